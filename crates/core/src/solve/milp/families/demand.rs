//! Demand: every pod of the batch is placed or left pending.
//!
//! ```text
//!   Σ_p a_{c,p} z_p + Σ_t x_{c,t} + u_c ≥ n_c        ∀ classes c
//!   (= n_c for classes another family marks exact: a spread minimum counts them or an affinity
//!    group targets them, where a phantom pod would lift a minimum or open a domain)
//! ```
//!
//! Demand rows are covering rows for the other classes: extra, unfilled slots cannot loosen any
//! constraint there, so their duals stay non-negative and bounded, which keeps column generation out of
//! the degenerate swamps of equality rows. Every pod enters its class's row with 1 (new node, existing
//! target or the pending column `u_c`, made by the master). No per-node rule, no auxiliary column.
//! Bounds: the aggregated relaxation keeps the rows; the size-class bound keeps them per merged item.

use super::{Cx, Family};
use crate::solve::milp::ids::{Class, Place, Row};
use crate::solve::milp::model::{INF, Model};

#[derive(Default)]
pub struct Demand {
    /// Per class: the row must be an equality (set by [`super::build`] from every family).
    pub exact: Vec<bool>,
    /// Per class: its demand row.
    rows: Vec<Row>,
}

impl Demand {
    /// The demand row of class `c`.
    pub fn row(&self, c: Class) -> Row {
        self.rows[c.ix()]
    }
}

impl Family for Demand {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        for c in cx.s.classes() {
            let n = cx.s.n_of(c) as f64;
            let hi = if self.exact[c.ix()] { n } else { INF };
            let r = m.named(format!("demand[{c}]"), n, hi);
            self.rows.push(r);
        }
    }

    fn pod_entries(&self, _cx: &Cx, c: Class, _at: Place, out: &mut Vec<(Row, f64)>) {
        out.push((self.row(c), 1.0));
    }
}
