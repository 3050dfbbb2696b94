//! NodePool limits: the new nodes of a NodePool stay within what its limits leave.
//!
//! ```text
//!   Σ_{p ∈ pool} cap_{f(p),r} z_p ≤ L_r − used_r        ∀ pools with limits, limited resources r
//!   Σ_{p ∈ pool} z_p ≤ L_nodes − used                  ∀ pools with a node limit
//! ```
//!
//! A new node enters its pool's rows by itself (the node entries of patterns and of the aggregated
//! relaxation's node counts); pricing reads the duals as the node's value. No pod entries, no per-node
//! rule, no auxiliary column. Bounds: the aggregated relaxation keeps the rows; the size-class bound
//! drops them.

use super::capacity::unit;
use super::{Cx, Family};
use crate::solve::milp::ids::{Config, Row};
use crate::solve::milp::model::{INF, Model};

#[derive(Default)]
pub struct PoolLimits {
    /// Per pool: (resource name, row).
    limits: Vec<Vec<(String, Row)>>,
    /// Per pool: the node-count row.
    nodes: Vec<Option<Row>>,
}

impl Family for PoolLimits {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        let p = cx.p;
        for (pi, pool) in p.cluster.nodepools.iter().enumerate() {
            let mut lim = Vec::new();
            let mut nodes = None;
            if let Some(l) = &pool.limits {
                for name in &l.limited {
                    let room = (l.resources.get(name) - p.usage[pi].capacity.get(name)).max(0) as f64 * unit(name);
                    lim.push((name.clone(), m.row(-INF, room)));
                }
                if let Some(n) = l.nodes {
                    nodes = Some(m.row(-INF, (n - p.usage[pi].nodes).max(0) as f64));
                }
            }
            self.limits.push(lim);
            self.nodes.push(nodes);
        }
    }

    fn node_entries(&self, cx: &Cx, f: Config, out: &mut Vec<(Row, f64)>) {
        let cfg = &cx.p.configs[f.ix()];
        for (name, r) in &self.limits[cfg.pool] {
            let v = cfg.capacity.get(name);
            if v != 0 {
                out.push((*r, v as f64 * unit(name)));
            }
        }
        if let Some(r) = self.nodes[cfg.pool] {
            out.push((r, 1.0));
        }
    }
}
