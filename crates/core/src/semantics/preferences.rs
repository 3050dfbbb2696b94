//! Preferences under a policy (issue 15, behaviour 12): what a pod's preferred node affinity,
//! preferred pod (anti-)affinity, ScheduleAnyway spreads and PreferNoSchedule taints mean to a planner.
//!
//! To kube-scheduler every one of them only scores; none filters. Which of them a plan keeps is a
//! planning choice, the `preferencePolicy` setting:
//!
//! * `Respect` (Karpenter's default, `--preference-policy=Respect`): a pending pod's preferences are
//!   planned as requirements and relaxed one step at a time, in a fixed order, only while the pod
//!   cannot be placed. The hardened pod, after `k` relaxation steps, is
//!
//!   ```text
//!   steps(pod)  = [ preferred pod-affinity terms, heaviest first (stable),
//!                   preferred pod-anti-affinity terms, heaviest first,
//!                   preferred node-affinity terms, heaviest first,
//!                   the pod's own ScheduleAnyway spreads, in spec order,
//!                   PreferNoSchedule taints (one step, only if some node or NodePool has one) ]
//!   hard(pod,k) = required affinity      ∪ { affinity terms not among the first k steps }
//!                 required anti-affinity ∪ { anti-affinity terms not among the first k steps }
//!                 node affinity          ∧ the heaviest node term not among the first k steps
//!                 ScheduleAnyway spreads not among the first k steps become DoNotSchedule
//!                 PreferNoSchedule taints filter like NoSchedule unless that step is among the first k
//!   ```
//!
//!   This is Karpenter's relaxation (`preferences.go`: pod affinity, anti-affinity, node affinity,
//!   ScheduleAnyway spread, PreferNoSchedule, one change per failed attempt; the "drop the first of
//!   several required node terms" step is not needed, stowage evaluates ORed terms exactly). Two
//!   differences, both stricter: a hardened anti-affinity term also keeps in-batch pods it selects out
//!   of the carrier's domain (kube-scheduler's symmetry for required terms; Karpenter does not track
//!   preferred terms inversely), and PreferNoSchedule taints of existing nodes count as well as the
//!   NodePools'. A plan records, per placed pod, the steps it relaxed (`Placement::relaxed`), and the
//!   checker judges each placed pod as `hard(pod, k)`.
//! * `Ignore` (`--preference-policy=Ignore`): preferences are not planned at all.
//! * `Priced`: preferences cost the weights' `soft` terms per unit left unmet, and the planners trade
//!   them against price (what the objective of every planner counts: `solve::objective`; ScheduleAnyway
//!   spreads over keys other than the hostname are not priced).
//!
//! Defaulted spread constraints (a cluster's default constraints, not the pod's own) are never hardened:
//! they are kube-scheduler's scoring, not the user's intent.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::Cluster;
use crate::domain::pod::{Hardened, Pod, PodId, WhenUnsatisfiable};
use crate::domain::taints::Effect;

/// Karpenter's `--preference-policy` (`PREFERENCE_POLICY`), plus `Priced`; spelled as Karpenter spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PreferencePolicy {
    /// Preferences are requirements until the pod cannot be placed; then relaxed in Karpenter's order.
    #[default]
    Respect,
    /// Preferences are not planned.
    Ignore,
    /// Preferences cost the weights' `soft` terms per unmet unit.
    Priced,
}

impl PreferencePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PreferencePolicy::Respect => "Respect",
            PreferencePolicy::Ignore => "Ignore",
            PreferencePolicy::Priced => "Priced",
        }
    }

    pub fn parse(s: &str) -> Option<PreferencePolicy> {
        match s {
            "Respect" => Some(PreferencePolicy::Respect),
            "Ignore" => Some(PreferencePolicy::Ignore),
            "Priced" => Some(PreferencePolicy::Priced),
            _ => None,
        }
    }
}

/// One relaxation step of a pod under `Respect`: the preference it gives up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relaxation {
    /// `preferredDuringScheduling` pod-affinity term `index` (spec order), of `weight`.
    PodAffinity {
        index: usize,
        weight: i32,
    },
    PodAntiAffinity {
        index: usize,
        weight: i32,
    },
    NodeAffinity {
        index: usize,
        weight: i32,
    },
    /// `topologySpreadConstraints[index]`, a ScheduleAnyway spread over `key`.
    ScheduleAnyway {
        index: usize,
        key: String,
    },
    /// PreferNoSchedule taints are tolerated from now on.
    PreferNoSchedule,
}

impl fmt::Display for Relaxation {
    /// As plans spell it, naming the pod spec field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Relaxation::PodAffinity { index, weight } => write!(f, "podAffinity.preferred[{index}] (weight {weight})"),
            Relaxation::PodAntiAffinity { index, weight } => write!(f, "podAntiAffinity.preferred[{index}] (weight {weight})"),
            Relaxation::NodeAffinity { index, weight } => write!(f, "nodeAffinity.preferred[{index}] (weight {weight})"),
            Relaxation::ScheduleAnyway { index, key } => write!(f, "topologySpreadConstraints[{index}] ({key}, ScheduleAnyway)"),
            Relaxation::PreferNoSchedule => write!(f, "PreferNoSchedule taints"),
        }
    }
}

/// Indices of weighted items, heaviest first, ties in spec order (Karpenter's stable sort).
fn heaviest_first(weights: impl Iterator<Item = i32>) -> Vec<(usize, i32)> {
    let mut v: Vec<(usize, i32)> = weights.enumerate().collect();
    v.sort_by_key(|&(i, w)| (std::cmp::Reverse(w), i));
    v
}

/// Whether any node or NodePool of the cluster carries a PreferNoSchedule taint (the last relaxation
/// step exists only then, as in Karpenter).
pub fn cluster_has_prefer_no_schedule(cluster: &Cluster) -> bool {
    let pns = |t: &crate::domain::taints::Taint| t.effect == Effect::PreferNoSchedule;
    cluster.nodes.iter().any(|n| n.taints.iter().any(pns)) || cluster.nodepools.iter().any(|p| p.taints.iter().any(pns))
}

/// The relaxation steps of `pod` under `Respect`, in the order they are taken (the module comment).
/// Empty for a pod without preferences.
pub fn relaxations(pod: &Pod, prefer_no_schedule: bool) -> Vec<Relaxation> {
    let mut out = Vec::new();
    for (index, weight) in heaviest_first(pod.preferred_affinity.iter().map(|t| t.weight)) {
        out.push(Relaxation::PodAffinity { index, weight });
    }
    for (index, weight) in heaviest_first(pod.preferred_anti_affinity.iter().map(|t| t.weight)) {
        out.push(Relaxation::PodAntiAffinity { index, weight });
    }
    for (index, weight) in heaviest_first(pod.preferred_node.iter().map(|t| t.weight)) {
        out.push(Relaxation::NodeAffinity { index, weight });
    }
    for (index, c) in pod.spread.iter().enumerate() {
        if c.when == WhenUnsatisfiable::ScheduleAnyway && !c.defaulted {
            out.push(Relaxation::ScheduleAnyway { index, key: c.key.clone() });
        }
    }
    if prefer_no_schedule {
        out.push(Relaxation::PreferNoSchedule);
    }
    out
}

/// `hard(pod, k)` of the module comment, `steps` being `relaxations(pod, _)`: the pod as the planners
/// and the checker see it under `Respect` after the first `k` steps. The preferences it keeps become
/// requirements and leave the preferred lists; the ones it relaxed are dropped.
pub fn harden(pod: &Pod, steps: &[Relaxation], k: usize) -> Pod {
    let relaxed = &steps[..k.min(steps.len())];
    let kept = &steps[k.min(steps.len())..];
    let mut h = pod.clone();
    h.preferred_affinity.clear();
    h.preferred_anti_affinity.clear();
    h.preferred_node.clear();
    for s in kept {
        match s {
            Relaxation::PodAffinity { index, .. } => h.affinity.push(pod.preferred_affinity[*index].term.clone()),
            Relaxation::PodAntiAffinity { index, .. } => h.anti_affinity.push(pod.preferred_anti_affinity[*index].term.clone()),
            Relaxation::ScheduleAnyway { index, .. } => h.spread[*index].when = WhenUnsatisfiable::DoNotSchedule,
            Relaxation::NodeAffinity { .. } | Relaxation::PreferNoSchedule => {}
        }
    }
    // Only the heaviest node-affinity term still kept is required (Karpenter's rule); ANDed into every
    // required term, or the only term when the pod has none.
    if let Some(Relaxation::NodeAffinity { index, .. }) = kept.iter().find(|s| matches!(s, Relaxation::NodeAffinity { .. })) {
        let extra = &pod.preferred_node[*index].term;
        match &mut h.node_matcher.terms {
            Some(terms) => {
                for t in terms.iter_mut() {
                    t.expressions.extend(extra.expressions.iter().cloned());
                    t.fields.extend(extra.fields.iter().cloned());
                }
            }
            None => h.node_matcher.terms = Some(vec![extra.clone()]),
        }
    }
    // Relaxed ScheduleAnyway spreads leave the pod (they no longer even score in the plan).
    let dropped: Vec<usize> = relaxed.iter().filter_map(|s| if let Relaxation::ScheduleAnyway { index, .. } = s { Some(*index) } else { None }).collect();
    if !dropped.is_empty() {
        h.spread = h.spread.into_iter().enumerate().filter(|(i, _)| !dropped.contains(i)).map(|(_, c)| c).collect();
    }
    h.hardened = Hardened { prefer_no_schedule: kept.contains(&Relaxation::PreferNoSchedule), one_way_anti_affinity: h.anti_affinity.len() - pod.anti_affinity.len() };
    h
}

/// The cluster as planned under `Respect`: every pending pod with steps hardened, after
/// `relaxed[pod]` steps (0 when absent); other pods unchanged.
pub fn harden_cluster(cluster: &Cluster, steps: &BTreeMap<PodId, Vec<Relaxation>>, relaxed: &BTreeMap<PodId, usize>) -> Cluster {
    let mut c = cluster.clone();
    for (id, s) in steps {
        let k = relaxed.get(id).copied().unwrap_or(0);
        c.pods[id.ix()] = harden(cluster.pod(*id), s, k);
    }
    c
}

/// Every pending pod's relaxation steps (pods without preferences left out).
pub fn all_relaxations(cluster: &Cluster) -> BTreeMap<PodId, Vec<Relaxation>> {
    let pns = cluster_has_prefer_no_schedule(cluster);
    cluster.pending().into_iter().map(|id| (id, relaxations(cluster.pod(id), pns))).filter(|(_, s)| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{LabelSelector, NodeMatcher, NodeRequirement, NodeSelectorTerm, PreferredTerm};
    use crate::domain::pod::{InclusionPolicy, Namespaces, PodAffinityTerm, SpreadConstraint, WeightedAffinityTerm};

    fn term(key: &str) -> PodAffinityTerm {
        PodAffinityTerm { selector: Some(LabelSelector::default()), namespaces: Namespaces::All, key: key.into() }
    }

    fn node_term(zone: &str) -> NodeSelectorTerm {
        NodeSelectorTerm { expressions: vec![NodeRequirement::is_in("topology.kubernetes.io/zone", [zone])], fields: vec![] }
    }

    fn spread(key: &str, when: WhenUnsatisfiable) -> SpreadConstraint {
        SpreadConstraint {
            max_skew: 1,
            key: key.into(),
            when,
            selector: None,
            min_domains: 1,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
            defaulted: false,
        }
    }

    fn pod() -> Pod {
        let mut p = Pod::new("default", "p", crate::domain::resources::Resources::new(100, 0, 0, 1));
        p.preferred_affinity = vec![WeightedAffinityTerm { weight: 10, term: term("a10") }, WeightedAffinityTerm { weight: 50, term: term("a50") }];
        p.preferred_anti_affinity = vec![WeightedAffinityTerm { weight: 5, term: term("x5") }];
        p.preferred_node = vec![PreferredTerm { weight: 1, term: node_term("z1") }, PreferredTerm { weight: 90, term: node_term("z2") }];
        p.spread = vec![spread("kubernetes.io/hostname", WhenUnsatisfiable::DoNotSchedule), spread("topology.kubernetes.io/zone", WhenUnsatisfiable::ScheduleAnyway)];
        p
    }

    #[test]
    fn steps_follow_karpenters_order_heaviest_first() {
        let s = relaxations(&pod(), true);
        let names: Vec<String> = s.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            names,
            [
                "podAffinity.preferred[1] (weight 50)",
                "podAffinity.preferred[0] (weight 10)",
                "podAntiAffinity.preferred[0] (weight 5)",
                "nodeAffinity.preferred[1] (weight 90)",
                "nodeAffinity.preferred[0] (weight 1)",
                "topologySpreadConstraints[1] (topology.kubernetes.io/zone, ScheduleAnyway)",
                "PreferNoSchedule taints",
            ]
        );
        assert_eq!(relaxations(&pod(), false).len(), 6, "no PreferNoSchedule step without such taints");
    }

    #[test]
    fn hardening_moves_kept_preferences_into_requirements() {
        let p = pod();
        let s = relaxations(&p, true);
        let h = harden(&p, &s, 0);
        assert_eq!(h.affinity.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["a50", "a10"]);
        assert_eq!(h.anti_affinity.len(), 1);
        assert_eq!(h.node_matcher, NodeMatcher { selector: vec![], terms: Some(vec![node_term("z2")]) }, "only the heaviest node term is required");
        assert!(h.spread.iter().all(|c| c.when == WhenUnsatisfiable::DoNotSchedule));
        assert!(h.hardened.prefer_no_schedule);
        assert_eq!(h.hardened.one_way_anti_affinity, 1);
        assert!(h.symmetric_anti_affinity().is_empty(), "a hardened preference does not repel later pods");
        assert!(h.preferred_affinity.is_empty() && h.preferred_anti_affinity.is_empty() && h.preferred_node.is_empty());

        // Four steps: both affinity terms, the anti-affinity term and the heaviest node term dropped.
        let h = harden(&p, &s, 4);
        assert!(h.affinity.is_empty() && h.anti_affinity.is_empty());
        assert_eq!(h.node_matcher.terms, Some(vec![node_term("z1")]), "the next node term becomes the required one");
        assert_eq!(h.spread[1].when, WhenUnsatisfiable::DoNotSchedule);

        // Everything relaxed: no preference is left, and the filters see what kube-scheduler sees.
        let h = harden(&p, &s, s.len());
        assert_eq!(h.node_matcher, p.node_matcher);
        assert_eq!(h.spread, vec![p.spread[0].clone()]);
        assert!(h.hardened == Hardened::default() && h.affinity.is_empty() && h.anti_affinity.is_empty());
    }

    #[test]
    fn a_preferred_node_term_is_anded_into_each_required_term() {
        let mut p = pod();
        p.node_matcher.terms = Some(vec![node_term("z3"), NodeSelectorTerm { expressions: vec![NodeRequirement::is_in("arch", ["arm64"])], fields: vec![] }]);
        let s = relaxations(&p, false);
        let h = harden(&p, &s, 3);
        let terms = h.node_matcher.terms.expect("terms");
        assert_eq!(terms.len(), 2);
        assert!(terms.iter().all(|t| t.expressions.contains(&node_term("z2").expressions[0])));
    }

    #[test]
    fn policies_are_spelled_as_karpenter_spells_them() {
        for p in [PreferencePolicy::Respect, PreferencePolicy::Ignore, PreferencePolicy::Priced] {
            assert_eq!(PreferencePolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(PreferencePolicy::parse("respect"), None);
    }
}
