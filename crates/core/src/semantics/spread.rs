//! PodTopologySpread (`podtopologyspread/filtering.go`, `common.go`; KEP-895, 1258, 3022, 3094, 3243).
//!
//! For a DoNotSchedule constraint and a candidate node n with d = n.labels[topologyKey]:
//!
//! ```text
//! matchNum(d) + selfMatch − globalMin ≤ maxSkew
//!
//! matchNum(d)  pods on eligible nodes of domain d, in the incoming pod's namespace, matching the
//!              selector (matchLabelKeys already merged), not terminating
//! selfMatch    1 if the incoming pod matches the selector, else 0
//! globalMin    min over eligible domains of matchNum (domains with 0 pods included), taken before the
//!              pod is placed; 0 if the number of eligible domains < minDomains
//! eligible     the node carries every topologyKey of the pod's hard constraints, and passes this
//!              constraint's inclusion policies: nodeAffinityPolicy Honor (default) ⇒ the node matches
//!              the pod's nodeSelector and required node affinity (never its volumes); nodeTaintsPolicy
//!              Honor (default Ignore) ⇒ the pod tolerates the node's NoSchedule/NoExecute taints
//! ```
//!
//! A node without the topology key is UnschedulableAndUnresolvable. ScheduleAnyway constraints only
//! score. A nil or empty selector counts nothing (the loader stores both as `None`), so such a
//! constraint never binds.
//!
//! stowage's hostname rule ([`HostnameSpread::Intent`], the default; kubernetes-semantics.md §8): on a
//! node the plan launches, a hard `kubernetes.io/hostname` constraint also needs
//!
//! ```text
//! matchNum(node) + selfMatch ≤ maxSkew          (as if another empty node could always join)
//! ```
//!
//! while existing and in-flight nodes follow kube-scheduler's globalMin over real nodes alone (minDomains
//! as kube-scheduler: globalMin 0 while fewer real eligible nodes than minDomains exist). So four
//! replicas with maxSkew 1 get four new nodes, not one (kube-scheduler would accept one: a single
//! domain has skew 0), and replicas that fit the existing nodes by kube-scheduler's rule go there
//! instead of onto new nodes (Karpenter's constant 0 minimum, aws/karpenter-provider-aws#4666).
//! [`HostnameSpread::Exact`] is kube-scheduler's rule alone, and so is a cluster default
//! ([`SpreadConstraint::defaulted`], `spread_defaults`): the rule keeps what the user asked for. For a ScheduleAnyway hostname constraint
//! the same bound is a preference: each matching pod above maxSkew on a new node costs
//! `soft.scheduleAnywaySpread`.

use serde::{Deserialize, Serialize};

use crate::domain::labels::{LabelSelector, Labels, keys};
use crate::domain::pod::{InclusionPolicy, Pod, SpreadConstraint};
use crate::domain::taints::Taint;

use super::{Plugin, Reject, node_affinity, selectors, taints};

/// How hard `kubernetes.io/hostname` spreads are judged on the nodes a plan launches (the module
/// comment). Weights files (`hostnameSpread`) choose it; plan files record it so that the checker judges
/// a plan under the rule it was made with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HostnameSpread {
    /// A new node takes at most maxSkew matching pods; existing and in-flight nodes follow
    /// kube-scheduler.
    #[default]
    Intent,
    /// kube-scheduler's rule alone: four replicas with maxSkew 1 may share one new node.
    Exact,
}

impl HostnameSpread {
    pub fn as_str(self) -> &'static str {
        match self {
            HostnameSpread::Intent => "intent",
            HostnameSpread::Exact => "exact",
        }
    }
}

/// The intent rule on a node the plan launches: `matchNum + selfMatch ≤ maxSkew`, the skew against an
/// empty node that could always join.
pub(crate) fn intent_ok(match_num: i64, self_match: i64, max_skew: i32) -> bool {
    skew_ok(match_num, self_match, 0, max_skew)
}

/// Pods above maxSkew on a new node for a ScheduleAnyway hostname constraint under the intent rule:
/// the units of `soft.scheduleAnywaySpread` it costs (`carrying`: the pods there that carry the
/// constraint and match it).
pub fn intent_excess(carrying: i64, max_skew: i32) -> i64 {
    (carrying - max_skew as i64).max(0)
}

/// The pod's ScheduleAnyway `kubernetes.io/hostname` constraints that count the pod itself: the ones
/// the intent preference prices.
pub fn soft_hostname(pod: &Pod) -> impl Iterator<Item = &SpreadConstraint> {
    pod.spread.iter().filter(move |c| !c.is_hard() && !c.defaulted && c.key == keys::HOSTNAME && self_match(c, pod) == 1)
}

/// Units of `soft.scheduleAnywaySpread` the pods of one node the plan launches cost under the intent
/// rule: per distinct ScheduleAnyway hostname constraint (namespace, selector, maxSkew) of
/// [`soft_hostname`], the pods on the node carrying it beyond maxSkew (`intent_excess`).
pub fn intent_soft_units(pods: &[&Pod]) -> i64 {
    let mut sigs: Vec<(&str, &Option<LabelSelector>, i32, i64)> = Vec::new();
    for p in pods {
        for c in soft_hostname(p) {
            match sigs.iter_mut().find(|s| s.0 == p.namespace && *s.1 == c.selector && s.2 == c.max_skew) {
                Some(s) => s.3 += 1,
                None => sigs.push((p.namespace.as_str(), &c.selector, c.max_skew, 1)),
            }
        }
    }
    sigs.iter().map(|s| intent_excess(s.3, s.2)).sum()
}

/// The pod's hard (DoNotSchedule) constraints: the only ones the filter sees.
pub fn hard(pod: &Pod) -> impl Iterator<Item = &SpreadConstraint> {
    pod.spread.iter().filter(|c| c.is_hard())
}

/// `matchNodeInclusionPolicies` for one constraint.
pub(crate) fn node_included(c: &SpreadConstraint, pod: &Pod, labels: &Labels, node_taints: &[Taint], node_name: Option<&str>) -> bool {
    if c.node_affinity_policy == InclusionPolicy::Honor && !node_affinity::matcher_matches(&pod.node_matcher, labels, node_name) {
        return false;
    }
    if c.node_taints_policy == InclusionPolicy::Honor && taints::first_untolerated(node_taints, &pod.tolerations).is_some() {
        return false;
    }
    true
}

/// Whether an eligible node of the domain counts towards a constraint of the pod (`pod`) for the
/// incoming pod's constraint (`countPodsMatchSelector`).
pub fn counts(c: &SpreadConstraint, incoming_namespace: &str, other: &Pod) -> bool {
    !other.terminating && other.namespace == incoming_namespace && selectors::opt_matches(c.selector.as_ref(), &other.labels)
}

pub(crate) fn self_match(c: &SpreadConstraint, pod: &Pod) -> i64 {
    selectors::opt_matches(c.selector.as_ref(), &pod.labels) as i64
}

/// globalMin: 0 when fewer eligible domains exist than minDomains, else the smallest domain count.
pub(crate) fn global_min(min_count: Option<i64>, eligible_domains: usize, min_domains: i32) -> i64 {
    if (eligible_domains as i64) < min_domains.max(1) as i64 { 0 } else { min_count.unwrap_or(0) }
}

/// The skew inequality.
pub(crate) fn skew_ok(match_num: i64, self_match: i64, global_min: i64, max_skew: i32) -> bool {
    match_num + self_match - global_min <= max_skew as i64
}

pub(crate) fn reject_missing_label() -> Reject {
    Reject::unresolvable(Plugin::PodTopologySpread, "node(s) didn't match pod topology spread constraints (missing required label)")
}

pub(crate) fn reject_skew() -> Reject {
    Reject::new(Plugin::PodTopologySpread, "node(s) didn't match pod topology spread constraints")
}

pub(crate) fn reject_intent() -> Reject {
    Reject::new(Plugin::PodTopologySpread, "node(s) didn't match pod topology spread constraints (a new node takes at most maxSkew pods of a kubernetes.io/hostname spread; hostnameSpread: intent)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_uses_the_pre_placement_minimum_and_self_match() {
        // counts a=1, b=0, c=0: a gets 1+1-0 = 2 > 1, b gets 0+1-0 = 1.
        assert!(!skew_ok(1, 1, 0, 1));
        assert!(skew_ok(0, 1, 0, 1));
        // a pod that does not match its own selector adds nothing.
        assert!(skew_ok(1, 0, 0, 1));
    }

    #[test]
    fn intent_bounds_a_new_node_by_max_skew_alone() {
        // A new node with 1 matching pod, maxSkew 1: kube-scheduler (min 1 on a lone node) accepts a
        // second pod, the intent rule does not; maxSkew 2 takes it.
        assert!(skew_ok(1, 1, 1, 1));
        assert!(!intent_ok(1, 1, 1));
        assert!(intent_ok(1, 1, 2));
        assert!(intent_ok(1, 0, 1), "a pod outside the selector adds nothing");
        assert_eq!(intent_excess(4, 1), 3);
        assert_eq!(intent_excess(1, 2), 0);
    }

    #[test]
    fn min_domains_forces_zero_minimum() {
        assert_eq!(global_min(Some(2), 2, 3), 0);
        assert_eq!(global_min(Some(2), 3, 3), 2);
        assert_eq!(global_min(Some(2), 1, 1), 2);
        assert_eq!(global_min(None, 0, 1), 0);
    }
}
