//! Node conflicts: hostname anti-affinity and host ports, the rules about which pods may share a node.
//!
//! ```text
//!   one per node   a_c ≤ 1 on a new node;  x_{c,t} ≤ 1 on a target        (self-matching hostname
//!                                                                          anti-affinity, host ports)
//!   conflicts      a_c · a_q = 0 on a new node                             (a term of one matches the
//!                                                                          other, or ports clash)
//!                  x_c + x_q ≤ 1                (both one-per-node)         on each shared target t
//!                  cap_q x_c + x_q ≤ cap_q      (c one-per-node)
//! ```
//!
//! Where neither class is one-per-node there is no exact linear form on a target: only the first class
//! keeps the node ([`NodeConflicts::derive`]). New nodes: the pattern check. Aggregated relaxation: per
//! configuration group, a clique of classes carrying one self-matching hostname term takes at most one
//! pod per node (`Σ_{c∈K} x_{c,g} ≤ Σ_f y_f`), and so does each other one-per-node class. Size-class
//! bound: the same cliques and one-per-node caps ([`NodeConflicts::cliques`], `one_per_node`).

use rustc_hash::{FxHashMap, FxHashSet};

use super::{AggRow, Cx, Family, InvalidPattern, Node, Purpose};
use crate::domain::labels::keys;
use crate::semantics::{interpod, ports};
use crate::solve::milp::ids::{Class, Group, Row, Target};
use crate::solve::milp::model::{INF, Model};
use crate::solve::milp::structure::{Context, Structure};

pub struct NodeConflicts {
    /// Per class: classes it may not share a node with (hostname anti-affinity, either direction).
    pub host_conflicts: Vec<FxHashSet<Class>>,
    /// Per class: at most one pod per node (self hostname anti-affinity or host ports).
    pub one_per_node: Vec<bool>,
    /// Per class: classes whose host ports clash with its own.
    pub port_conflicts: Vec<FxHashSet<Class>>,
    /// Cliques of classes no two pods of which may share a node: the classes carrying one hostname
    /// anti-affinity term and matching it themselves (each clique listed once, in class order).
    pub cliques: Vec<Vec<Class>>,
    /// Per (class, target): the conflict rows its assignment column enters.
    target_rows: FxHashMap<(Class, Target), Vec<(Row, f64)>>,
}

impl NodeConflicts {
    /// Hostname anti-affinity as per-node conflicts, host ports, and what they leave each class of the
    /// existing targets.
    pub(crate) fn derive(cx: &Context, s: &mut Structure) -> Self {
        let nc = cx.p.classes.len();
        let mut host_conflicts: Vec<FxHashSet<Class>> = vec![FxHashSet::default(); nc];
        let mut one_per_node = vec![false; nc];
        for c in cx.classes() {
            let pod = cx.rep(c);
            for t in &pod.anti_affinity {
                if t.key != keys::HOSTNAME {
                    continue;
                }
                if interpod::term_matches(t, pod) {
                    one_per_node[c.ix()] = true;
                }
                for q in cx.classes().filter(|&q| q != c && interpod::term_matches(t, cx.rep(q))) {
                    host_conflicts[c.ix()].insert(q);
                    host_conflicts[q.ix()].insert(c);
                }
            }
        }
        let port_conflicts = host_ports(cx, &mut one_per_node);
        share_existing_nodes(&one_per_node, &host_conflicts, &port_conflicts, &mut s.allowed);
        NodeConflicts { host_conflicts, one_per_node, port_conflicts, cliques: hostname_cliques(cx), target_rows: FxHashMap::default() }
    }

    /// Classes `c` and `q` may not share a node.
    pub fn conflict(&self, c: Class, q: Class) -> bool {
        self.host_conflicts[c.ix()].contains(&q) || self.port_conflicts[c.ix()].contains(&q)
    }

    pub fn one(&self, c: Class) -> bool {
        self.one_per_node[c.ix()]
    }
}

/// Host ports: one pod of a class per node, and classes with clashing ports never together.
fn host_ports(cx: &Context, one_per_node: &mut [bool]) -> Vec<FxHashSet<Class>> {
    let mut port_conflicts: Vec<FxHashSet<Class>> = vec![FxHashSet::default(); cx.p.classes.len()];
    for c in cx.classes() {
        if !cx.rep(c).host_ports.is_empty() {
            one_per_node[c.ix()] = true;
            for q in cx.classes() {
                if q != c && ports::filter(&cx.rep(c).host_ports, &cx.rep(q).host_ports).is_err() {
                    port_conflicts[c.ix()].insert(q);
                }
            }
        }
    }
    port_conflicts
}

/// Existing nodes: a one-per-node class takes at most one pod of a node, and of two classes that may
/// not share a node, where neither is one-per-node (no exact linear form), only the first keeps the
/// node. The rows cover the other pairs (the module's formula).
fn share_existing_nodes(one_per_node: &[bool], host_conflicts: &[FxHashSet<Class>], port_conflicts: &[FxHashSet<Class>], allowed: &mut [Vec<(Target, u32)>]) {
    let nc = one_per_node.len();
    for c in 0..nc {
        if one_per_node[c] {
            for a in &mut allowed[c] {
                a.1 = a.1.min(1);
            }
        }
    }
    for c in Class::all(nc) {
        for q in Class::all(nc).skip(c.ix() + 1) {
            if one_per_node[c.ix()] || one_per_node[q.ix()] || !(host_conflicts[c.ix()].contains(&q) || port_conflicts[c.ix()].contains(&q)) {
                continue;
            }
            let mine: FxHashSet<Target> = allowed[c.ix()].iter().map(|a| a.0).collect();
            allowed[q.ix()].retain(|a| !mine.contains(&a.0));
        }
    }
}

/// The cliques of [`NodeConflicts::cliques`].
fn hostname_cliques(cx: &Context) -> Vec<Vec<Class>> {
    let mut cliques: Vec<Vec<Class>> = Vec::new();
    for c in cx.classes() {
        let pod = cx.rep(c);
        for t in &pod.anti_affinity {
            if t.key != keys::HOSTNAME || !interpod::term_matches(t, pod) {
                continue;
            }
            let k: Vec<Class> = cx
                .classes()
                .filter(|&q| {
                    let qp = cx.rep(q);
                    qp.anti_affinity.contains(t) && interpod::term_matches(t, qp)
                })
                .collect();
            if !cliques.contains(&k) {
                cliques.push(k);
            }
        }
    }
    cliques
}

impl Family for NodeConflicts {
    fn target_rows(&mut self, cx: &Cx, m: &mut Model) {
        let s = cx.s;
        let mut pairs = Vec::new();
        for c in s.classes() {
            for q in s.classes().skip(c.ix() + 1) {
                if !self.conflict(c, q) {
                    continue;
                }
                for &(t, cap_c) in &s.allowed[c.ix()] {
                    if let Some(cap_q) = s.cap_on(q, t) {
                        pairs.push((c, q, t, cap_c, cap_q));
                    }
                }
            }
        }
        for (c, q, t, cap_c, cap_q) in pairs {
            let (a, b, big) = match (self.one(c), self.one(q)) {
                (true, true) => (1.0, 1.0, 1.0),
                (true, false) => (cap_q as f64, 1.0, cap_q as f64),
                (false, true) => (1.0, cap_c as f64, cap_c as f64),
                (false, false) => continue, // derive leaves the node to one of them
            };
            let r = m.named(format!("hostconflict[{c}][{q}][{t}]"), -INF, big);
            self.target_rows.entry((c, t)).or_default().push((r, a));
            self.target_rows.entry((q, t)).or_default().push((r, b));
        }
    }

    fn target_entries(&self, _cx: &Cx, c: Class, t: Target, out: &mut Vec<(Row, f64)>) {
        out.extend(self.target_rows.get(&(c, t)).into_iter().flatten().copied());
    }

    fn validate(&self, _cx: &Cx, node: &Node, _flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        for &(c, k) in node.counts {
            if self.one(c) && k > 1 {
                return Err(InvalidPattern::OncePerNode { class: c, count: k });
            }
        }
        for &(c, _) in node.counts {
            for &(q, _) in node.counts {
                if q != c && self.conflict(c, q) {
                    return Err(InvalidPattern::Conflict(c, q));
                }
            }
        }
        Ok(())
    }

    fn cap(&self, _cx: &Cx, c: Class, counts: &[(Class, u32)], _purpose: Purpose) -> Option<i64> {
        if counts.iter().any(|&(q, _)| self.conflict(c, q)) {
            Some(0)
        } else if self.one(c) {
            Some(1)
        } else {
            None
        }
    }

    fn aggregate_rows(&self, cx: &Cx, g: Group, m: &mut Model, out: &mut Vec<AggRow>) {
        let s = cx.s;
        for (k, clique) in self.cliques.iter().enumerate() {
            if clique.iter().any(|&c| s.class_groups[c.ix()].contains(&g)) {
                let row = m.named(format!("agg.clique[{k}][{g}]"), -INF, 0.0);
                out.push(AggRow { row, per_node: 1.0, members: clique.clone() });
            }
        }
        for c in s.classes() {
            if self.one(c) && !self.cliques.iter().any(|k| k.contains(&c)) && s.class_groups[c.ix()].contains(&g) {
                let row = m.named(format!("agg.one[{c}][{g}]"), -INF, 0.0);
                out.push(AggRow { row, per_node: 1.0, members: vec![c] });
            }
        }
    }
}
