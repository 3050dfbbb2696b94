//! Required pod affinity: classes sharing one list of required terms over one key form a group `A`.
//!
//! ```text
//!   non-hostname key, per domain d without a matching pod yet:
//!     placed_{c,d} ≤ n_c (h_{A,d} + v_{A,d})          ∀ c ∈ A   (disaggregated: a tighter relaxation)
//!     h_{A,d} ≤ Σ_{q ∈ free targets} placed_{q,d}      (a free target lands in d)
//!   first pod:  Σ_d v_{A,d} + first-pod nodes ≤ 1  if the group matches itself and nothing matches
//!               anywhere yet, else ≤ 0
//!   hostname key (pattern check): the node holds a free target, or it is the group's first-pod node
//!   h, v ∈ {0,1}
//! ```
//!
//! Free targets are classes whose pods match all terms and have no required affinity themselves; their
//! demand rows are exact (a phantom pod would open a domain). Classes whose terms span several keys only
//! keep the existing nodes that already satisfy them and never go to a new node. Bounds: the aggregated
//! relaxation keeps the rows; the size-class bound drops them.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::{Cx, Family, InvalidPattern, Node, Purpose};
use crate::domain::labels::keys;
use crate::domain::pod::{Pod, PodAffinityTerm};
use crate::semantics::filter::FilterState;
use crate::semantics::interpod;
use crate::solve::milp::ids::{Class, Col, Place, Row};
use crate::solve::milp::model::{INF, Model, count_of};
use crate::solve::milp::structure::{Context, Structure};

/// Classes sharing one list of required affinity terms.
#[derive(Clone, Debug)]
pub struct AffinityGroup {
    pub classes: Vec<Class>,
    pub key: String,
    /// Classes whose pods match all terms and have no required affinity themselves (sorted).
    pub free_targets: Vec<Class>,
    /// The group's pods match their own terms.
    pub self_match: bool,
    /// Domains (or, for hostname, existing node names) already holding a matching pod.
    pub existing: BTreeSet<String>,
    /// Any matching pod exists anywhere (disables the first-pod exception).
    pub any_existing: bool,
    /// Domain universe for non-hostname keys.
    pub domains: Vec<String>,
}

impl AffinityGroup {
    /// A first-pod node (or domain) may hold the group without a target.
    fn first_allowed(&self) -> bool {
        self.self_match && !self.any_existing
    }
}

/// The rows of one group.
#[derive(Default)]
struct GroupRows {
    /// (class, domain) → row, non-hostname keys.
    dom: FxHashMap<(Class, String), Row>,
    /// domain → the free-target row `h_d ≤ …`.
    free: FxHashMap<String, Row>,
    first: Option<Row>,
}

pub struct Affinity {
    pub groups: Vec<AffinityGroup>,
    /// Per class: the affinity group it belongs to.
    pub class_group: Vec<Option<usize>>,
    rows: Vec<GroupRows>,
    /// The indicators `h_{A,d}` with their free row.
    h_cols: Vec<(Col, Row)>,
    /// The first-pod choices `v_{A,d}` with their group and domain.
    v_cols: Vec<(Col, usize, String)>,
}

impl Affinity {
    /// Affinity groups (classes sharing one list of required terms over one key), and the classes whose
    /// terms span several keys: those keep only the existing nodes that already satisfy them and never
    /// go to a new node.
    pub(crate) fn derive(cx: &Context, fs: &mut FilterState, s: &mut Structure) -> Self {
        let nc = cx.p.classes.len();
        let mut groups: Vec<AffinityGroup> = Vec::new();
        let mut class_group = vec![None; nc];
        let mut ix: FxHashMap<Vec<PodAffinityTerm>, usize> = FxHashMap::default();
        for c in cx.classes() {
            let pod = cx.rep(c);
            if pod.affinity.is_empty() {
                continue;
            }
            let keyset: BTreeSet<&str> = pod.affinity.iter().map(|t| t.key.as_str()).collect();
            if keyset.len() > 1 {
                // Terms over several keys: only nodes that already satisfy them (the targets kept by the
                // initial-state filter pass on their own); never a new node.
                s.no_new_nodes[c.ix()] = true;
                s.allowed[c.ix()].retain(|&(t, _)| {
                    let e = cx.targets[t.ix()];
                    let prep = fs.prepare(pod);
                    fs.filter(&prep, pod, e).is_ok()
                });
                continue;
            }
            let key = keyset.into_iter().next().unwrap_or_default().to_string();
            let i = *ix.entry(pod.affinity.clone()).or_insert_with(|| {
                groups.push(affinity_group(cx, fs, pod, key));
                groups.len() - 1
            });
            groups[i].classes.push(c);
            class_group[c.ix()] = Some(i);
        }
        Affinity { groups, class_group, rows: Vec::new(), h_cols: Vec::new(), v_cols: Vec::new() }
    }
}

/// A new affinity group for `pod`'s terms over `key` (no class yet).
fn affinity_group(cx: &Context, fs: &FilterState, pod: &Pod, key: String) -> AffinityGroup {
    let free_targets = cx.classes().filter(|&q| cx.rep(q).affinity.is_empty() && interpod::matches_all(&pod.affinity, cx.rep(q))).collect();
    let mut existing = BTreeSet::new();
    let mut any_existing = false;
    for n in fs.nodes() {
        for q in &n.pods {
            if interpod::matches_all(&pod.affinity, q) {
                any_existing |= n.labels.contains_key(&key);
                if let Some(v) = n.labels.get(&key) {
                    existing.insert(v.clone());
                }
            }
        }
    }
    let mut domains: BTreeSet<String> = cx.group_labels.iter().filter_map(|l| l.get(&key).cloned()).collect();
    for &e in &cx.targets {
        if let Some(d) = fs.nodes()[e].labels.get(&key) {
            domains.insert(d.clone());
        }
    }
    AffinityGroup { classes: Vec::new(), key, free_targets, self_match: interpod::matches_all(&pod.affinity, pod), existing, any_existing, domains: domains.into_iter().collect() }
}

impl Family for Affinity {
    fn exact_demand(&self, exact: &mut [bool]) {
        for g in &self.groups {
            for &c in &g.free_targets {
                exact[c.ix()] = true;
            }
        }
    }

    /// Per group: per class and domain with no matching pod yet, the domain row; per domain the
    /// free-target row; and the first-pod row.
    fn rows(&mut self, _cx: &Cx, m: &mut Model) {
        for (a, g) in self.groups.iter().enumerate() {
            let mut rows = GroupRows::default();
            if g.key != keys::HOSTNAME {
                for d in &g.domains {
                    if g.existing.contains(d) {
                        continue;
                    }
                    for &c in &g.classes {
                        rows.dom.insert((c, d.clone()), m.named(format!("affinity[{a}].class[{c}].dom[{d}]"), -INF, 0.0));
                    }
                    if !g.free_targets.is_empty() {
                        rows.free.insert(d.clone(), m.named(format!("affinity[{a}].free[{d}]"), -INF, 0.0));
                    }
                }
            }
            rows.first = Some(m.named(format!("affinity[{a}].first"), -INF, if g.first_allowed() { 1.0 } else { 0.0 }));
            self.rows.push(rows);
        }
    }

    fn pod_entries(&self, cx: &Cx, c: Class, at: Place, out: &mut Vec<(Row, f64)>) {
        let labels = cx.labels(at);
        for (g, rows) in self.groups.iter().zip(&self.rows) {
            let Some(d) = labels.get(&g.key) else { continue };
            if let Some(&r) = rows.dom.get(&(c, d.clone())) {
                out.push((r, 1.0));
            }
            if g.free_targets.binary_search(&c).is_ok()
                && let Some(&r) = rows.free.get(d)
            {
                out.push((r, -1.0));
            }
        }
    }

    /// `h_{A,d}` (a free target lands in `d`) and `v_{A,d}` (the first pod's domain).
    fn aux_columns(&mut self, cx: &Cx, m: &mut Model) {
        for (a, (g, rows)) in self.groups.iter().zip(&self.rows).enumerate() {
            if g.key == keys::HOSTNAME {
                continue;
            }
            for d in &g.domains {
                // Per class: placed_{c,d} ≤ n_c (h_d + v_d), disaggregated for a tighter relaxation.
                let dom: Vec<(Row, f64)> = g.classes.iter().filter_map(|&c| rows.dom.get(&(c, d.clone())).map(|&r| (r, -(cx.s.n_of(c) as f64)))).collect();
                if dom.is_empty() {
                    continue;
                }
                if let Some(&fr) = rows.free.get(d) {
                    let mut e = dom.clone();
                    e.push((fr, 1.0));
                    let h = m.aux_col(format!("aff-h {a} {d}"), 0.0, 1.0, true, e);
                    self.h_cols.push((h, fr));
                }
                let first = rows.first.expect("every affinity group has a first-pod row");
                let mut e = dom;
                e.push((first, 1.0));
                let v = m.aux_col(format!("aff-v {a} {d}"), 0.0, 1.0, true, e);
                self.v_cols.push((v, a, d.clone()));
            }
        }
    }

    /// Hostname affinity: the node holds a free target, or it is the group's first-pod node (flagged).
    fn validate(&self, _cx: &Cx, node: &Node, flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        let mut first_pod = Vec::new();
        for (a, (g, rows)) in self.groups.iter().zip(&self.rows).enumerate() {
            if g.key != keys::HOSTNAME || !g.classes.iter().any(|&c| count_of(node.counts, c) > 0) {
                continue;
            }
            if g.free_targets.iter().any(|&q| count_of(node.counts, q) > 0) {
                continue;
            }
            if !g.first_allowed() {
                return Err(InvalidPattern::AffinityWithoutTarget(a));
            }
            first_pod.extend(rows.first);
        }
        flags.push(first_pod);
        Ok(())
    }

    /// The greedy fill adds a hostname-affinity class only after a free target, or, in its second
    /// pass, as the group's first pod.
    fn cap(&self, _cx: &Cx, c: Class, counts: &[(Class, u32)], purpose: Purpose) -> Option<i64> {
        let Purpose::Fill { first_pass } = purpose else { return None };
        let g = &self.groups[self.class_group[c.ix()]?];
        if g.key != keys::HOSTNAME {
            return None;
        }
        let has_target = g.free_targets.iter().any(|&q| counts.iter().any(|x| x.0 == q));
        (!(has_target || g.first_allowed() && !first_pass)).then_some(0)
    }

    fn fill_aux(&self, _cx: &Cx, act: &[f64], x: &mut [f64]) {
        for &(col, free) in &self.h_cols {
            x[col.ix()] = (act[free.ix()] < -0.5) as u8 as f64;
        }
        for (col, a, d) in &self.v_cols {
            let (g, rows) = (&self.groups[*a], &self.rows[*a]);
            let placed = g.classes.iter().any(|&c| rows.dom.get(&(c, d.clone())).is_some_and(|&r| act[r.ix()] > 0.5));
            let has_target = rows.free.get(d).is_some_and(|&r| act[r.ix()] < -0.5);
            x[col.ix()] = (placed && !has_target) as u8 as f64;
        }
    }
}
