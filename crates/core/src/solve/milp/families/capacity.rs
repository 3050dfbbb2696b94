//! Resources: what the pods on a node request fits the node.
//!
//! ```text
//!   existing target t:  Σ_c req_{c,r} x_{c,t} ≤ free_{t,r}                ∀ t, r
//!   new node (pattern): Σ_c req_{c,r} a_c ≤ room_{f,r}                     ∀ r   (pattern check)
//! ```
//!
//! Resources are scaled to cores and GiB ([`unit`]) in the rows, so that no coefficient reaches 1e10.
//! The aggregated relaxation pools the room of a group's nodes (`Master::aggregate` makes those rows:
//! they are the aggregation itself); the size-class bound keeps requests against rooms and existing
//! targets' free room.

use super::{Cx, Family, InvalidPattern, Node};
use crate::solve::milp::ids::{Class, Row, Target};
use crate::solve::milp::model::{INF, Model};

/// Scale of a resource in the rows: cores, GiB, counts. In millicores and bytes the coefficients reach
/// 1e10 and HiGHS's presolve mis-maps the objective of a start solution (mixed-25: a start at 388.48
/// reported as 387.80 in the reduced space) and its cut rounds overrun the time limit.
pub fn unit(resource: &str) -> f64 {
    match resource {
        "cpu" => 1e-3,
        "memory" | "ephemeral-storage" => 1.0 / (1u64 << 30) as f64,
        r if r.starts_with("hugepages-") => 1.0 / (1u64 << 30) as f64,
        _ => 1.0,
    }
}

#[derive(Default)]
pub struct Capacity {
    /// Per target, per resource dimension: its row.
    rows: Vec<Vec<Row>>,
}

impl Family for Capacity {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        let s = cx.s;
        for t in 0..s.targets.len() {
            let mut v = Vec::new();
            for d in 0..s.dims.len() {
                let f = s.free[t][d] as f64 * unit(&s.dims[d]);
                v.push(m.row(-INF, f));
            }
            self.rows.push(v);
        }
    }

    fn target_entries(&self, cx: &Cx, c: Class, t: Target, out: &mut Vec<(Row, f64)>) {
        let s = cx.s;
        for d in 0..s.dims.len() {
            let q = s.req[c.ix()][d];
            if q != 0 {
                out.push((self.rows[t.ix()][d], q as f64 * unit(&s.dims[d])));
            }
        }
    }

    fn validate(&self, cx: &Cx, node: &Node, _flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        let s = cx.s;
        let room = cx.p.configs[node.config.ix()].room();
        let mut used = vec![0i64; s.dims.len()];
        for &(c, k) in node.counts {
            for (d, u) in used.iter_mut().enumerate() {
                *u += s.req[c.ix()][d] * k as i64;
            }
        }
        for (d, name) in s.dims.iter().enumerate() {
            if used[d] > room.get(name) {
                return Err(InvalidPattern::ExceedsRoom { resource: name.clone(), used: used[d], room: room.get(name) });
            }
        }
        Ok(())
    }
}
