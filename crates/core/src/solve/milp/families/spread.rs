//! Topology spread over keys other than the hostname (zones, capacity types, custom keys).
//!
//! ```text
//!   per hard group g and domain d:
//!     place   Σ_{c ∈ counted} placed_{c,d} − K_g W_{g,d} ≤ 0                K_g = Σ_{c ∈ counted} n_c
//!     skew    E_d + Σ_{c ∈ counted} placed_{c,d} − M_g ≤ s_g + B_d (1 − W_{g,d})
//!             B_d = E_d + K_g + s_g;   no W and no place row when `unconditional`
//!     min     M_g ≤ E_d + Σ_{c ∈ members} placed_{c,d}
//!   W_{g,d} ∈ {0,1};  M_g ≥ 0 (0 when fewer domains than minDomains)
//! ```
//!
//! `E_d` = matching pods already on eligible nodes of `d`; `members` = classes the selector counts;
//! `counted` = members that carry the constraint ([`SpreadGroup::counted`] says why only they count).
//! Domains are the universe of existing eligible domains and NodePool domains (rule b); volume
//! constraints never enter (rule a). Members' demand rows are exact (a phantom pod would lift a
//! minimum). No per-node rule. Bounds: the aggregated relaxation keeps the rows; the size-class bound
//! drops them.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use super::{Cx, Family};
use crate::domain::labels::{LabelSelector, keys};
use crate::domain::pod::{Pod, SpreadConstraint};
use crate::semantics::filter::FilterState;
use crate::solve::milp::ids::{Class, Col, Group, Place, Row};
use crate::solve::milp::model::{INF, Model};
use crate::solve::milp::structure::{Context, Eligibility, matches_selector};

/// Identity of a spread group: key, selector, namespace, eligibility, maxSkew, minDomains, hard.
type SpreadKey = (String, Option<LabelSelector>, String, Eligibility, i32, i32, bool);

/// A spread constraint over a non-hostname key, shared by the classes that carry it.
#[derive(Clone, Debug)]
pub struct SpreadGroup {
    pub key: String,
    pub max_skew: f64,
    pub hard: bool,
    /// globalMin is 0 (fewer eligible domains than minDomains).
    pub min_zero: bool,
    /// Classes whose pods the selector counts: they all raise a domain's count, so they all bound the
    /// global minimum from above (`M ≤ N_d`).
    pub members: Vec<Class>,
    /// Members that carry the constraint (self-matching). Whatever the bind order, the last of them
    /// placed in a domain saw at least `E_d + (their number) − 1` pods there and a minimum no larger
    /// than the final one, so `E_d + counted_d − M ≤ maxSkew` holds in every domain they use: the
    /// skew rows count only them. This is a necessary condition for every order, so every valid plan
    /// satisfies the model (the greedy plan included) and the lower bound holds; a plan of the model
    /// is replayed and repaired where no order realises it.
    pub counted: Vec<Class>,
    /// Classes that carry the constraint.
    pub constrained: Vec<Class>,
    /// Every constrained class is counted and existing counts already lie within maxSkew: the skew
    /// row then holds in every domain, so it needs no indicator (a much tighter relaxation).
    pub unconditional: bool,
    /// Domain universe: existing eligible domains ∪ NodePool domains (rule b).
    pub domains: Vec<String>,
    /// Matching pods already on eligible nodes, per domain.
    pub existing: Vec<f64>,
    /// Per problem configuration group: the domain index if its nodes are eligible.
    pub group_domain: FxHashMap<Group, usize>,
    /// Per existing target: the domain index if eligible.
    pub target_domain: Vec<Option<usize>>,
}

/// The rows of one group, per domain (empty for soft groups).
#[derive(Default)]
struct GroupRows {
    place: Vec<Row>,
    skew: Vec<Row>,
    min: Vec<Row>,
}

pub struct Spread {
    pub groups: Vec<SpreadGroup>,
    rows: Vec<GroupRows>,
    /// The indicators `W_{g,d}` with their place row.
    w_cols: Vec<(Col, Row)>,
    /// The minima `M_g` with their group.
    m_cols: Vec<(Col, usize)>,
}

impl Spread {
    /// Every spread group over a non-hostname key, shared by the classes that carry the same constraint.
    pub(crate) fn derive(cx: &Context, fs: &FilterState) -> Self {
        let mut spread: Vec<SpreadGroup> = Vec::new();
        let mut spread_ix: FxHashMap<SpreadKey, usize> = FxHashMap::default();
        for c in cx.classes() {
            let pod = cx.rep(c);
            for (ci, sc) in pod.spread.iter().enumerate() {
                if sc.key == keys::HOSTNAME {
                    continue;
                }
                let elig = Eligibility::of(pod, sc);
                let key = (sc.key.clone(), sc.selector.clone(), pod.namespace.clone(), elig.clone(), sc.max_skew, sc.min_domains, sc.is_hard());
                let ix = *spread_ix.entry(key).or_insert_with(|| {
                    let members: Vec<Class> = cx.classes().filter(|&q| matches_selector(sc.selector.as_ref(), &pod.namespace, cx.rep(q))).collect();
                    spread.push(spread_group(cx, fs, pod, ci, sc, &elig, members));
                    spread.len() - 1
                });
                spread[ix].constrained.push(c);
            }
        }
        for sg in &mut spread {
            sg.constrained.sort();
            sg.constrained.dedup();
            sg.counted = sg.members.iter().copied().filter(|c| sg.constrained.contains(c)).collect();
            let max = sg.existing.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let min = sg.existing.iter().copied().fold(f64::INFINITY, f64::min);
            // Domains no counted pod enters keep E_d ≤ min E + maxSkew ≤ M + maxSkew.
            sg.unconditional = sg.existing.is_empty() || max - min <= sg.max_skew;
        }
        Spread { groups: spread, rows: Vec::new(), w_cols: Vec::new(), m_cols: Vec::new() }
    }
}

/// A new spread group for constraint `ci` (`sc`) of `pod` over a non-hostname key (no constrained
/// class yet): its domain universe, existing counts and which groups and targets fall in which domain.
fn spread_group(cx: &Context, fs: &FilterState, pod: &Pod, ci: usize, sc: &SpreadConstraint, elig: &Eligibility, members: Vec<Class>) -> SpreadGroup {
    let mut domains: BTreeSet<String> = cx.p.pool_domains(pod, ci);
    let mut existing_counts: BTreeMap<String, f64> = BTreeMap::new();
    for n in fs.nodes() {
        if elig.admits(&n.labels, &n.taints, Some(&n.name))
            && let Some(d) = n.labels.get(&sc.key)
        {
            domains.insert(d.clone());
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as f64;
            *existing_counts.entry(d.clone()).or_default() += cnt;
        }
    }
    let domains: Vec<String> = domains.into_iter().collect();
    let dix: BTreeMap<&str, usize> = domains.iter().enumerate().map(|(i, d)| (d.as_str(), i)).collect();
    let existing = domains.iter().map(|d| existing_counts.get(d).copied().unwrap_or(0.0)).collect();
    let mut group_domain = FxHashMap::default();
    for g in cx.groups() {
        let l = cx.group_labels(g);
        let mut l2 = l.clone();
        l2.insert(keys::HOSTNAME.into(), "new".into());
        if elig.admits(&l2, cx.group_taints(g), None)
            && let Some(d) = l.get(&sc.key)
            && let Some(&i) = dix.get(d.as_str())
        {
            group_domain.insert(g, i);
        }
    }
    let target_domain = cx
        .targets
        .iter()
        .map(|&e| {
            let n = &fs.nodes()[e];
            if elig.admits(&n.labels, &n.taints, Some(&n.name)) { n.labels.get(&sc.key).and_then(|d| dix.get(d.as_str()).copied()) } else { None }
        })
        .collect();
    SpreadGroup {
        key: sc.key.clone(),
        max_skew: sc.max_skew as f64,
        hard: sc.is_hard(),
        min_zero: (domains.len() as i32) < sc.min_domains.max(1),
        members,
        counted: Vec::new(),
        constrained: Vec::new(),
        unconditional: false,
        domains,
        existing,
        group_domain,
        target_domain,
    }
}

/// Pods of the counted classes of group `sg`.
fn counted_pods(cx: &Cx, sg: &SpreadGroup) -> f64 {
    sg.counted.iter().map(|&c| cx.s.n_of(c) as f64).sum()
}

impl Family for Spread {
    fn exact_demand(&self, exact: &mut [bool]) {
        for sg in &self.groups {
            for &c in &sg.members {
                exact[c.ix()] = true;
            }
        }
    }

    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        for (g, sg) in self.groups.iter().enumerate() {
            let mut rows = GroupRows::default();
            let members = counted_pods(cx, sg);
            for d in 0..sg.domains.len() {
                let e = sg.existing[d];
                let s = sg.max_skew;
                let big = e + members + s;
                if sg.hard {
                    if !sg.unconditional {
                        rows.place.push(m.named(format!("spread[{g}].place[{d}]"), -INF, 0.0));
                    }
                    let rhs = if sg.unconditional { s - e } else { s + big - e };
                    rows.skew.push(m.named(format!("spread[{g}].skew[{d}]"), -INF, rhs));
                    rows.min.push(m.named(format!("spread[{g}].min[{d}]"), -INF, e));
                }
            }
            self.rows.push(rows);
        }
    }

    fn pod_entries(&self, _cx: &Cx, c: Class, at: Place, out: &mut Vec<(Row, f64)>) {
        for (g, sg) in self.groups.iter().enumerate() {
            if !sg.hard {
                continue;
            }
            let d = match at {
                Place::Group(gr) => sg.group_domain.get(&gr).copied(),
                Place::Target(t) => sg.target_domain[t.ix()],
            };
            let Some(d) = d else { continue };
            if sg.counted.binary_search(&c).is_ok() {
                out.push((self.rows[g].skew[d], 1.0));
                if !sg.unconditional {
                    out.push((self.rows[g].place[d], 1.0));
                }
            }
            if sg.members.binary_search(&c).is_ok() {
                out.push((self.rows[g].min[d], -1.0));
            }
        }
    }

    /// `W_{g,d}` (a counted class lands in `d`) and `M_g` (the global minimum).
    fn aux_columns(&mut self, cx: &Cx, m: &mut Model) {
        for (g, sg) in self.groups.iter().enumerate() {
            if !sg.hard {
                continue;
            }
            let kp = counted_pods(cx, sg);
            let rows = &self.rows[g];
            let mut mentries = Vec::new();
            for d in 0..sg.domains.len() {
                if !sg.unconditional {
                    let big = sg.existing[d] + kp + sg.max_skew;
                    let e = vec![(rows.place[d], -kp), (rows.skew[d], big)];
                    let w = m.aux_col(format!("spread-w {g} {d}"), 0.0, 1.0, true, e);
                    self.w_cols.push((w, rows.place[d]));
                }
                mentries.push((rows.skew[d], -1.0));
                mentries.push((rows.min[d], 1.0));
            }
            let hi = if sg.min_zero { 0.0 } else { INF };
            let col = m.aux_col(format!("spread-m {g}"), 0.0, hi, false, mentries);
            self.m_cols.push((col, g));
        }
    }

    fn fill_aux(&self, _cx: &Cx, act: &[f64], x: &mut [f64]) {
        for &(col, place) in &self.w_cols {
            x[col.ix()] = (act[place.ix()] > 0.5) as u8 as f64;
        }
        for &(col, g) in &self.m_cols {
            let sg = &self.groups[g];
            x[col.ix()] = if sg.min_zero { 0.0 } else { (0..sg.domains.len()).map(|d| sg.existing[d] - act[self.rows[g].min[d].ix()]).fold(f64::INFINITY, f64::min).max(0.0) };
        }
    }
}
