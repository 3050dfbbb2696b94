//! Capacity reservations (`semantics::reservations`): the new nodes of a reservation stay within the
//! instances it still takes.
//!
//! ```text
//!   Σ_{p : reservation(f(p)) = r} z_p ≤ count_r        ∀ reservations r some configuration launches into
//! ```
//!
//! Like the NodePool limits, a new node enters its reservation's row by itself (node entries of
//! patterns and of the aggregated relaxation's node counts); pricing reads the dual as the node's
//! value. Configurations of one group share their reservation, so the row is also a per-group one.
//! Registered last: a batch without reservations has the rows and columns it had before.

use super::{Cx, Family};
use crate::solve::milp::ids::{Config, Row};
use crate::solve::milp::model::{INF, Model};

#[derive(Default)]
pub struct Reservations {
    /// Per reservation (`Problem::reservations`): its row.
    rows: Vec<Row>,
}

impl Family for Reservations {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        self.rows = cx.p.reservations.iter().map(|r| m.row(-INF, r.count as f64)).collect();
    }

    fn node_entries(&self, cx: &Cx, f: Config, out: &mut Vec<(Row, f64)>) {
        if let Some(r) = cx.p.configs[f.ix()].reservation {
            out.push((self.rows[r], 1.0));
        }
    }
}
