//! Hostname spread: hard topology spread constraints over `kubernetes.io/hostname`.
//!
//! ```text
//!   per new node (pattern check), constrained members m_p = Σ_{c ∈ constrained ∩ members} a_c:
//!       m_p ≤ s                    regime 0, and always under hostnameSpread: intent
//!       m_p ≤ s + m̄               regime 1 (exact only), flagged:   R1: Σ_{p: m_p > s} z_p ≤ U r_h
//!   eligible nodes with fewer than m̄ members (flagged):  R2: Σ_{p low} z_p ≤ U (1 − r_h)
//!   existing target t (E_t matching pods there), constrained members on it:
//!       Σ x_{c,t} ≤ (s − E_t)⁺ + ((s + m̄ − E_t)⁺ − (s − E_t)⁺) r_h
//!       E_t > s:  Σ x_{c,t} ≤ n r_h   (and no pod at all when E_t ≥ s + m̄)
//! ```
//!
//! `s` = maxSkew, `m̄` = the smallest matching count over existing eligible nodes (0 without any, or
//! with fewer of them than minDomains: then there is only regime 0), `r_h` ∈ {0,1} the regime, `U` = pods in the batch. Only constrained members
//! are limited per node: a bind order exists that places constrained pods before the other members, and
//! a pod that does not match its own selector adds nothing. Aggregated relaxation: per configuration
//! group `Σ_{c ∈ constrained ∩ members} x_{c,g} ≤ (s + m̄) Σ_f y_f` (`s` under intent). Size-class
//! bound: dropped.
//!
//! Under `intent`, a ScheduleAnyway hostname spread prices the same bound (`Family::node_soft`): per new
//! node, `w · max(0, Σ_{c carrying it} a_c − s)` (`spread::intent_soft_units`, `w` =
//! `soft.scheduleAnywaySpread`), in the pattern's cost.
//!
//! Under `intent` (`semantics::spread`) a new node holds at most `s` constrained members whatever the
//! regime; the regime still governs existing targets (kube-scheduler's minimum over real nodes) and
//! still needs every eligible new node to hold at least `m̄` members (R2). The existing-target caps
//! take the minimum as the static `m̄`, so the model misses plans where existing nodes fill in rounds
//! past `s + m̄` (four nodes with one replica each taking five more); the greedy plan, which follows
//! kube-scheduler's minimum as it grows, finds those, and the driver keeps the cheaper plan.
//!
//! So the model is a relaxation only while the final minimum can be 0 or `m̄` alone. Where the batch
//! can make it another value ([`HostSpread::narrower_than_rule`]: under `exact` with no existing
//! eligible node one new node may hold every member; a batch with a member for each node at the minimum
//! can raise it), the driver reports none of the model's own bounds, only the size-class bound.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{AggRow, Cx, Family, InvalidPattern, Node, Purpose};
use crate::domain::labels::{LabelSelector, keys};
use crate::domain::pod::{Pod, SpreadConstraint};
use crate::semantics::filter::FilterState;
use crate::semantics::spread::{self, HostnameSpread};
use crate::solve::milp::ids::{Class, Col, Group, Row, Target};
use crate::solve::milp::model::{INF, Model};
use crate::solve::milp::structure::{Context, Eligibility, Structure, matches_selector};

/// A hard spread constraint over `kubernetes.io/hostname`.
#[derive(Clone, Debug)]
pub struct HostSpread {
    pub max_skew: u32,
    /// Classes the selector counts (all of them lower the global minimum when absent from a node).
    pub members: Vec<Class>,
    /// Classes carrying the constraint (sorted).
    pub constrained: Vec<Class>,
    /// Smallest matching count over existing eligible nodes (0 without any): with regime 1 every node
    /// ends with at least this many and each may hold `max_skew + mbar`.
    pub mbar: u32,
    pub group_eligible: FxHashSet<Group>,
    /// Per existing target: matching pods already there, if eligible.
    pub target_count: Vec<Option<u32>>,
    /// `hostnameSpread: intent`: a new node holds at most `max_skew` constrained members.
    pub intent: bool,
    /// Existing eligible nodes of the cluster.
    pub domains: u32,
    /// How many eligible nodes hold `mbar` matching pods (they all need one more before the minimum can
    /// rise); those that are targets are the ones `target_count` gives `mbar`.
    pub at_min: u32,
}

impl HostSpread {
    /// Class `c` is limited per node: it carries the constraint and its selector counts it.
    fn limits(&self, c: Class) -> bool {
        self.members.binary_search(&c).is_ok() && self.constrained.binary_search(&c).is_ok()
    }

    /// Most constrained members a new node may hold (under regime 1 when that is larger).
    fn new_node_cap(&self) -> u32 {
        if self.intent { self.max_skew } else { self.max_skew + self.mbar }
    }

    /// Why the model's caps may cut off plans kube-scheduler (or the intent rule) accepts, if they may.
    /// The model knows two minimums, 0 (regime 0) and `m̄` (regime 1); a plan whose final minimum over
    /// the eligible nodes, new ones included, is another value has caps `s + min` the model does not
    /// offer. Then the model is no relaxation and a bound taken from it bounds the model only:
    /// - no existing eligible node (or too few for minDomains): under `exact` the new nodes are every
    ///   domain, so one node may hold all the batch's members (a single domain has skew 0); it matters
    ///   once more than `s` constrained pods come (under intent a new node holds `s` by the rule);
    /// - the batch has a member for each of the `at_min` nodes at the minimum, so it can raise it;
    /// - `m̄ ≥ 2` and a new node may be eligible: a new node holding between 1 and `m̄ − 1` members sets a
    ///   minimum between the two.
    ///
    /// A node at the minimum that no member may go to keeps it, and so does a batch with fewer members
    /// than such nodes; a new node sets it only if a member may go there.
    pub fn narrower_than_rule(&self, s: &Structure) -> Option<&'static str> {
        let constrained: u32 = self.constrained.iter().map(|&c| s.n_of(c)).sum();
        let members: u32 = self.members.iter().map(|&c| s.n_of(c)).sum();
        if constrained == 0 {
            return None;
        }
        if self.at_min == 0 {
            let exact_new = !self.intent && constrained > self.max_skew;
            return (exact_new || self.domains > 0).then_some("the new nodes can set the minimum, and the model keeps it at 0");
        }
        // Every node at the minimum must be a target some member may go to.
        let reachable = |t: Target| self.members.iter().any(|&c| s.allowed[c.ix()].iter().any(|&(u, _)| u == t));
        let at_min_targets: Vec<Target> = self.target_count.iter().enumerate().filter(|&(_, &n)| n == Some(self.mbar)).map(|(t, _)| Target::at(t)).collect();
        if members >= self.at_min && at_min_targets.len() as u32 == self.at_min && at_min_targets.into_iter().all(reachable) {
            return Some("the batch can raise the minimum over the existing nodes, and the model keeps it");
        }
        let member_on_new = self.members.iter().any(|&c| s.class_groups[c.ix()].iter().any(|g| self.group_eligible.contains(g)));
        if self.mbar >= 2 && member_on_new {
            return Some("a new node can set a minimum between 0 and the existing nodes' minimum");
        }
        None
    }
}

/// The regime rows of one hostname spread (mbar > 0 only) and its regime column.
#[derive(Clone, Copy)]
struct Regime {
    r1: Row,
    r2: Row,
}

pub struct HostSpreads {
    pub spreads: Vec<HostSpread>,
    /// Under intent, per ScheduleAnyway hostname spread (`spread::soft_hostname`): its maxSkew and the
    /// classes carrying it (sorted).
    pub soft: Vec<(u32, Vec<Class>)>,
    regimes: Vec<Option<Regime>>,
    /// Per hostname spread: the regime binary (mbar > 0 only).
    cols: Vec<Option<Col>>,
}

/// What makes two hard hostname spreads one: selector, namespace, eligibility, maxSkew, minDomains, and
/// whether it is a cluster default (no intent rule: `SpreadConstraint::defaulted`).
type SpreadKey = (Option<LabelSelector>, String, Eligibility, i32, i32, bool);

impl HostSpreads {
    /// Every hard hostname spread of the batch, shared by the classes that carry the same constraint.
    pub(crate) fn derive(cx: &Context, fs: &FilterState) -> Self {
        let mut spreads: Vec<HostSpread> = Vec::new();
        let mut ix: FxHashMap<SpreadKey, usize> = FxHashMap::default();
        for c in cx.classes() {
            let pod = cx.rep(c);
            for sc in &pod.spread {
                if sc.key != keys::HOSTNAME || !sc.is_hard() {
                    continue;
                }
                let elig = Eligibility::of(pod, sc);
                let key = (sc.selector.clone(), pod.namespace.clone(), elig.clone(), sc.max_skew, sc.min_domains, sc.defaulted);
                let i = *ix.entry(key).or_insert_with(|| {
                    let members: Vec<Class> = cx.classes().filter(|&q| matches_selector(sc.selector.as_ref(), &pod.namespace, cx.rep(q))).collect();
                    spreads.push(host_spread(cx, fs, pod, sc, &elig, members));
                    spreads.len() - 1
                });
                spreads[i].constrained.push(c);
            }
        }
        for hs in &mut spreads {
            hs.constrained.sort();
            hs.constrained.dedup();
        }
        HostSpreads { spreads, soft: soft_spreads(cx), regimes: Vec::new(), cols: Vec::new() }
    }

    /// The first hard hostname spread whose caps may cut off valid plans ([`HostSpread::narrower_than_rule`]),
    /// with why: the bounds taken from the model do not bound every plan then.
    pub fn narrower_than_rule(&self, s: &Structure) -> Option<(usize, &'static str)> {
        self.spreads.iter().enumerate().find_map(|(h, hs)| hs.narrower_than_rule(s).map(|why| (h, why)))
    }
}

/// Under intent, the ScheduleAnyway hostname spreads of the batch, one per (namespace, selector,
/// maxSkew), with the classes carrying them (`spread::intent_soft_units` counts the same pods).
fn soft_spreads(cx: &Context) -> Vec<(u32, Vec<Class>)> {
    let w = cx.p.weights;
    if w.hostname_spread != HostnameSpread::Intent || w.soft.schedule_anyway_spread <= 0.0 {
        return Vec::new();
    }
    let mut ix: FxHashMap<(String, Option<LabelSelector>, i32), usize> = FxHashMap::default();
    let mut out: Vec<(u32, Vec<Class>)> = Vec::new();
    for c in cx.classes() {
        let pod = cx.rep(c);
        for sc in spread::soft_hostname(pod) {
            let i = *ix.entry((pod.namespace.clone(), sc.selector.clone(), sc.max_skew)).or_insert_with(|| {
                out.push((sc.max_skew as u32, Vec::new()));
                out.len() - 1
            });
            if out[i].1.last() != Some(&c) {
                out[i].1.push(c);
            }
        }
    }
    out
}

/// A new hostname spread for constraint `sc` of `pod` (no constrained class yet).
fn host_spread(cx: &Context, fs: &FilterState, pod: &Pod, sc: &SpreadConstraint, elig: &Eligibility, members: Vec<Class>) -> HostSpread {
    let mut target_count = Vec::new();
    let mut mbar: Option<u32> = None;
    for &e in &cx.targets {
        let n = &fs.nodes()[e];
        if elig.admits(&n.labels, &n.taints, Some(&n.name)) {
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as u32;
            target_count.push(Some(cnt));
        } else {
            target_count.push(None);
        }
    }
    // The minimum runs over every eligible node of the cluster, not only targets.
    let mut counts = Vec::new();
    for n in fs.nodes() {
        if elig.admits(&n.labels, &n.taints, Some(&n.name)) {
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as u32;
            mbar = Some(mbar.map_or(cnt, |m| m.min(cnt)));
            counts.push(cnt);
        }
    }
    let domains = counts.len() as u32;
    // minDomains as kube-scheduler: fewer real eligible nodes than minDomains make the minimum 0. New
    // nodes may add domains, but a minimum of 0 is never too high, so regime 0 alone stays safe.
    if (domains as i64) < sc.min_domains.max(1) as i64 {
        mbar = None;
    }
    let at_min = counts.iter().filter(|&&c| c == mbar.unwrap_or(0)).count() as u32;
    let group_eligible = cx
        .groups()
        .filter(|&g| {
            let mut l = cx.group_labels(g).clone();
            l.insert(keys::HOSTNAME.into(), "new".into());
            elig.admits(&l, cx.group_taints(g), None)
        })
        .collect();
    // A cluster default is not the user's intent: kube-scheduler's rule alone (`spread_defaults`).
    let intent = cx.p.weights.hostname_spread == HostnameSpread::Intent && !sc.defaulted;
    HostSpread { max_skew: sc.max_skew as u32, members, constrained: Vec::new(), mbar: mbar.unwrap_or(0), group_eligible, target_count, intent, domains, at_min }
}

impl Family for HostSpreads {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        for hs in &self.spreads {
            if hs.mbar > 0 {
                let r1 = m.row(-INF, 0.0);
                let r2 = m.row(-INF, cx.big_nodes());
                self.regimes.push(Some(Regime { r1, r2 }));
            } else {
                self.regimes.push(None);
            }
        }
    }

    /// The regime binary, and per existing target the caps on members (rows made here, after the
    /// assignment columns they constrain).
    fn aux_columns(&mut self, cx: &Cx, m: &mut Model) {
        for (h, hs) in self.spreads.iter().enumerate() {
            let big = cx.big_nodes();
            let r = self.regimes[h].map(|rg| m.aux_col(format!("host-regime {h}"), 0.0, 1.0, true, vec![(rg.r1, -big), (rg.r2, big)]));
            self.cols.push(r);
            for (t, cnt) in hs.target_count.iter().enumerate() {
                let Some(cnt) = *cnt else { continue };
                let t = Target::at(t);
                let s = hs.max_skew as f64;
                let (e, mbar) = (cnt as f64, hs.mbar as f64);
                let cap0 = (s - e).max(0.0);
                let cap1 = (s + mbar - e).max(0.0);
                // Constrained members bind first on the node.
                let members: Vec<Class> = hs.members.iter().copied().filter(|&c| hs.constrained.contains(&c) && cx.assign.contains_key(&(c, t))).collect();
                let constrained: Vec<Class> = hs.constrained.iter().copied().filter(|&c| cx.assign.contains_key(&(c, t))).collect();
                if constrained.is_empty() {
                    continue;
                }
                // Members on the node: ≤ cap0, or ≤ cap1 under regime 1.
                let row = m.row(-INF, cap0);
                for &c in &members {
                    m.col_mut(cx.assign[&(c, t)]).entries.push((row, 1.0));
                }
                if let Some(r) = r {
                    m.col_mut(r).entries.push((row, -(cap1 - cap0)));
                }
                // Constrained pods on a node already above maxSkew: only under regime 1 (and only if
                // regime 1 lets it hold them).
                if e > s {
                    let n: f64 = constrained.iter().map(|&c| cx.s.n_of(c) as f64).sum();
                    let row = m.row(-INF, 0.0);
                    for &c in &constrained {
                        let col = m.col_mut(cx.assign[&(c, t)]);
                        col.entries.push((row, 1.0));
                        if e >= s + mbar {
                            col.hi = 0.0;
                        }
                    }
                    if let Some(r) = r {
                        m.col_mut(r).entries.push((row, -n));
                    }
                }
            }
        }
    }

    /// At most maxSkew constrained members per node, maxSkew + mbar under regime 1 (flagged); eligible
    /// nodes with fewer than mbar members are flagged too.
    fn validate(&self, _cx: &Cx, node: &Node, flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        let mut regime1 = Vec::new();
        let mut low = Vec::new();
        for (h, hs) in self.spreads.iter().enumerate() {
            let members: u32 = node.counts.iter().filter(|(c, _)| hs.members.binary_search(c).is_ok()).map(|x| x.1).sum();
            // Constrained members bind first on the node; other members after them.
            let limited: u32 = node.counts.iter().filter(|(c, _)| hs.limits(*c)).map(|x| x.1).sum();
            if limited > hs.max_skew {
                if hs.mbar == 0 || limited > hs.new_node_cap() {
                    return Err(InvalidPattern::HostSpread { spread: h, members: limited, max_skew: hs.max_skew, mbar: hs.mbar });
                }
                regime1.extend(self.regimes[h].map(|rg| rg.r1));
            }
            if hs.mbar > 0 && hs.group_eligible.contains(&node.group) && members < hs.mbar {
                low.extend(self.regimes[h].map(|rg| rg.r2));
            }
        }
        flags.push(regime1);
        flags.push(low);
        Ok(())
    }

    /// The greedy fill keeps every node within maxSkew + mbar (maxSkew under intent); the seed columns
    /// within maxSkew.
    fn cap(&self, _cx: &Cx, c: Class, counts: &[(Class, u32)], purpose: Purpose) -> Option<i64> {
        let mut cap: Option<i64> = None;
        for hs in &self.spreads {
            let k = match purpose {
                Purpose::Fill { .. } if hs.limits(c) => {
                    let held: u32 = counts.iter().filter(|(q, _)| hs.limits(*q)).map(|x| x.1).sum();
                    hs.new_node_cap() as i64 - held as i64
                }
                Purpose::Seed if hs.constrained.contains(&c) && hs.members.binary_search(&c).is_ok() => hs.max_skew as i64,
                _ => continue,
            };
            cap = Some(cap.map_or(k, |x| x.min(k)));
        }
        cap
    }

    fn node_soft(&self, cx: &Cx, node: &Node) -> f64 {
        let units: i64 = self
            .soft
            .iter()
            .map(|(s, classes)| {
                let k: u32 = node.counts.iter().filter(|(c, _)| classes.binary_search(c).is_ok()).map(|x| x.1).sum();
                spread::intent_excess(k as i64, *s as i32)
            })
            .sum();
        cx.p.weights.soft.schedule_anyway_spread * units as f64
    }

    fn fill_aux(&self, _cx: &Cx, act: &[f64], x: &mut [f64]) {
        for (rg, col) in self.regimes.iter().zip(&self.cols) {
            if let (Some(rg), Some(col)) = (rg, col) {
                x[col.ix()] = (act[rg.r1.ix()] > 0.5) as u8 as f64;
            }
        }
    }

    fn aggregate_rows(&self, cx: &Cx, g: Group, m: &mut Model, out: &mut Vec<AggRow>) {
        for (h, hs) in self.spreads.iter().enumerate() {
            let limited: Vec<Class> = hs.members.iter().copied().filter(|c| hs.constrained.contains(c) && cx.s.class_groups[c.ix()].contains(&g)).collect();
            if limited.is_empty() {
                continue;
            }
            let row = m.named(format!("agg.hostspread[{h}][{g}]"), -INF, 0.0);
            out.push(AggRow { row, per_node: hs.new_node_cap() as f64, members: limited });
        }
    }
}
