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

use crate::domain::labels::Labels;
use crate::domain::pod::{InclusionPolicy, Pod, SpreadConstraint};
use crate::domain::taints::Taint;

use super::{Plugin, Reject, node_affinity, selectors, taints};

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
    fn min_domains_forces_zero_minimum() {
        assert_eq!(global_min(Some(2), 2, 3), 0);
        assert_eq!(global_min(Some(2), 3, 3), 2);
        assert_eq!(global_min(Some(2), 1, 1), 2);
        assert_eq!(global_min(None, 0, 1), 0);
    }
}
