//! Who stays pending when not everything fits: kube-scheduler's scheduling queue (issue 15, item 7).
//!
//! kube-scheduler's default QueueSort plugin (PrioritySort) pops pods by
//!
//! ```text
//! key(p) = (−spec.priority, queue timestamp, namespace/name)     smaller key = earlier in the queue
//! ```
//!
//! stowage has no queue timestamp; a pod's `seq` stands for it (its position in the input; the input
//! layer orders pods by creationTimestamp where it has one). Each popped pod is bound to a node that
//! passes every Filter *given the pods bound before it*, or stays pending. So when not everything fits,
//! the pods left pending are the lowest-priority ones, then the latest in the queue; an earlier, larger
//! pod is never dropped so that smaller later ones fit.
//!
//! The rule a plan is judged by (the checker's, `out_of_order`), with the plan's nodes fixed:
//!
//! ```text
//! P pending is out of order  ⇔  ∃ node n of the plan:  Filter(P, n | S_P) = Ok
//! S_P = the snapshot's bound pods + DaemonSet pods on the plan's new nodes
//!       + every pod the plan places that comes before P in the queue (key(Q) < key(P))
//! ```
//!
//! that is, P would have been bound at its turn had the pods after it not been there. Pods that
//! need a pod after them (a required affinity to it) are judged without it, as kube-scheduler would
//! at P's turn, so they are never reported. The rule is checked on the plan's nodes only: a plan that
//! launched a smaller instance type than P needs, for later pods, is not caught by it; the planners
//! avoid that through the pending penalty below.
//!
//! The MILP encodes the order in the penalty of a pending pod (`pending_penalty`): with the batch's
//! distinct priorities ranked `t = 0, 1, ...` from the lowest (capped at `MAX_TIER`) and the pod's class
//! ranked `r = 0..n` by queue position of its earliest pod,
//!
//! ```text
//! penalty(p) = unschedulablePod · TIER^t · (1 + EARLY · (n − r) / n)
//! ```
//!
//! so one pod of a higher priority outweighs `TIER / (1 + EARLY)` pods of the next lower priority
//! competing for its capacity, and an earlier class costs more than a later one of the same priority.
//! Every penalty is at least `unschedulablePod` (so a pod is still never left pending to save money,
//! and a bound computed with the flat penalty stays a lower bound) and at most
//! `unschedulablePod · TIER^MAX_TIER · (1 + EARLY)`, which keeps the objective's range sane for HiGHS.

use std::cmp::Reverse;

use super::filter::FilterState;
use crate::domain::pod::Pod;

/// Factor between the penalties of two adjacent priority tiers.
pub const TIER: f64 = 16.0;
/// Priority tiers above this share its penalty (the objective's range stays below
/// `unschedulablePod · 16^4 · 1.5 ≈ 10^9` with the default penalty of 10^4).
pub const MAX_TIER: usize = 4;
/// The share by which the earliest class of a tier costs more than the latest.
pub const EARLY: f64 = 0.5;

/// A pod's place in kube-scheduler's queue: higher priority first, then earlier (`seq`), then by
/// namespace/name for a stable tie.
pub fn key(p: &Pod) -> (Reverse<i32>, u32, &str, &str) {
    (Reverse(p.priority), p.seq, p.namespace.as_str(), p.name.as_str())
}

/// Whether `a` comes before `b` in the queue.
pub fn before(a: &Pod, b: &Pod) -> bool {
    key(a) < key(b)
}

/// Sorts pod indices (into `pods`) into queue order.
pub fn sort<T: Copy>(ids: &mut [T], pod: impl Fn(T) -> usize, pods: &[Pod]) {
    ids.sort_by(|&a, &b| key(&pods[pod(a)]).cmp(&key(&pods[pod(b)])));
}

/// The penalty tier of each priority: distinct priorities ranked from the lowest, capped at `MAX_TIER`.
pub fn tiers(priorities: impl IntoIterator<Item = i32>) -> std::collections::BTreeMap<i32, usize> {
    let distinct: std::collections::BTreeSet<i32> = priorities.into_iter().collect();
    distinct.into_iter().enumerate().map(|(t, p)| (p, t.min(MAX_TIER))).collect()
}

/// The penalty of one pending pod of tier `tier` whose class is `rank`-th of `n` in queue order (the
/// module comment's formula).
pub fn pending_penalty(base: f64, tier: usize, rank: usize, n: usize) -> f64 {
    let early = if n == 0 { 0.0 } else { EARLY * (n - rank.min(n)) as f64 / n as f64 };
    base * TIER.powi(tier.min(MAX_TIER) as i32) * (1.0 + early)
}

/// A pending pod that is out of order (the module comment's rule): the first node, in `fs` order, that
/// takes it once the pods after it are set aside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrder {
    pub pod: usize,
    pub node: usize,
}

/// The module comment's rule over a plan: `fs` holds the plan's nodes (bound pods, DaemonSet pods,
/// new nodes) and none of its placements; `placed` are (pod, node) pairs of the plan, `pending` the pods
/// it leaves pending (indices into `pods`). Walks every one of them in queue order, binding each placed
/// pod as it comes (unchecked: the plan's own validity is judged elsewhere) and trying each pending pod
/// on every node. On return `fs` holds every placed pod.
/// Only nodes `usable` accepts are tried (the planners leave out nodes that are no target, such as
/// nodes being deleted; the checker tries every node).
pub fn out_of_order<'a>(pods: &'a [Pod], fs: &mut FilterState<'a>, placed: &[(usize, usize)], pending: &[usize], usable: &dyn Fn(usize) -> bool) -> Vec<OutOfOrder> {
    let mut walk: Vec<(usize, Option<usize>)> = placed.iter().map(|&(p, n)| (p, Some(n))).chain(pending.iter().map(|&p| (p, None))).collect();
    sort(&mut walk, |(p, _)| p, pods);
    let mut found = Vec::new();
    for (p, node) in walk {
        match node {
            Some(n) => fs.add_pod(&pods[p], n),
            None => {
                if let Some(n) = fs.verdicts(&pods[p]).iter().enumerate().position(|(i, v)| v.is_ok() && usable(i)) {
                    found.push(OutOfOrder { pod: p, node: n });
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_tier_outweighs_several_lower_pods_and_earlier_costs_more() {
        let base = 10_000.0;
        // The earliest pod of tier 0 against the latest of tier 1: still 10 pods of tier 0 are worth less.
        assert!(pending_penalty(base, 1, 9, 10) > 10.0 * pending_penalty(base, 0, 0, 10));
        assert!(pending_penalty(base, 0, 0, 10) > pending_penalty(base, 0, 1, 10));
        assert!(pending_penalty(base, 0, 9, 10) >= base);
        // Capped range.
        assert_eq!(pending_penalty(base, 9, 0, 1), pending_penalty(base, MAX_TIER, 0, 1));
        assert!(pending_penalty(base, 9, 0, 1) < 1e9 * 1.01);
    }

    fn pod(name: &str, cpu_m: i64, priority: i32, seq: u32) -> Pod {
        Pod { priority, seq, ..Pod::new("default", name, crate::domain::resources::Resources::new(cpu_m, 0, 0, 1)) }
    }

    /// One 4-cpu node; `placed` go on it, `pending` are tried.
    fn judge(pods: &[Pod], placed: &[usize], pending: &[usize]) -> Vec<OutOfOrder> {
        let node = super::super::filter::SimNode::new("n", Default::default(), vec![], crate::domain::resources::Resources::new(4000, 1 << 34, 0, 110));
        let mut fs = FilterState::new(vec![node]);
        let placed: Vec<(usize, usize)> = placed.iter().map(|&p| (p, 0)).collect();
        out_of_order(pods, &mut fs, &placed, pending, &|_| true)
    }

    #[test]
    fn a_pod_pending_while_later_pods_hold_its_room_is_out_of_order() {
        // big needs 3 cpu; two 1.5-cpu pods hold the node.
        let later = [pod("big", 3000, 10, 5), pod("s0", 1500, 0, 0), pod("s1", 1500, 0, 1)];
        assert_eq!(judge(&later, &[1, 2], &[0]), [OutOfOrder { pod: 0, node: 0 }], "a higher priority comes first");
        let same = [pod("big", 3000, 0, 0), pod("s0", 1500, 0, 1), pod("s1", 1500, 0, 2)];
        assert_eq!(judge(&same, &[1, 2], &[0]), [OutOfOrder { pod: 0, node: 0 }], "an earlier pod of equal priority comes first");
        // The small pods come first (higher priority, or earlier): leaving big pending is the queue's answer.
        let before = [pod("big", 3000, 0, 5), pod("s0", 1500, 10, 6), pod("s1", 1500, 10, 7)];
        assert_eq!(judge(&before, &[1, 2], &[0]), []);
        let earlier = [pod("big", 3000, 0, 2), pod("s0", 1500, 0, 0), pod("s1", 1500, 0, 1)];
        assert_eq!(judge(&earlier, &[1, 2], &[0]), []);
        // Too large for the node even empty: pending is right whatever the order.
        let huge = [pod("huge", 5000, 10, 0), pod("s0", 1500, 0, 1)];
        assert_eq!(judge(&huge, &[1], &[0]), []);
        // Only the pods before it count: s0 (earlier) stays, s1 (later) is set aside, and 2.5 cpu is free.
        let mixed = [pod("mid", 2500, 0, 1), pod("s0", 1500, 0, 0), pod("s1", 1500, 0, 2)];
        assert_eq!(judge(&mixed, &[1, 2], &[0]), [OutOfOrder { pod: 0, node: 0 }]);
    }

    #[test]
    fn the_queue_key_is_priority_then_seq_then_name() {
        assert!(before(&pod("a", 1, 10, 9), &pod("b", 1, 0, 0)));
        assert!(before(&pod("a", 1, 0, 0), &pod("b", 1, 0, 1)));
        assert!(before(&pod("a", 1, 0, 0), &pod("b", 1, 0, 0)));
        assert!(!before(&pod("b", 1, 0, 0), &pod("a", 1, 0, 0)));
    }

    #[test]
    fn tiers_rank_distinct_priorities_from_the_lowest() {
        let t = tiers([1000, 0, -5, 0, 1000, 7, 8, 9, 10]);
        assert_eq!(t[&-5], 0);
        assert_eq!(t[&0], 1);
        assert_eq!(t[&1000], MAX_TIER);
        assert_eq!(t[&7], 2);
    }
}
