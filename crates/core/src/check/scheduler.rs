//! kube-scheduler, reduced to one scheduling cycle per pod: pending pods are placed one at a time, in
//! kube-scheduler's queue order (priority, then creation), using the Filter model every other part of
//! stowage trusts (`semantics::filter::FilterState`) and a simple score. It never reads a plan's
//! placements: a plan can say "repro-2 on spot-c" and the scheduler can still put another pod there
//! first, which is the point. The simulator binds with it ([`pass`], registered nodes only), and the
//! checker asks it whether a plan whose new nodes are all up at once leaves a pod behind
//! (`super::scheduler_leaves`, what consolidation's replacements must survive).
//!
//! Score (each plugin normalised to 0–100 over the feasible nodes, then weighted as kube-scheduler's
//! default profile does):
//!
//! ```text
//! NodeResourcesFit  LeastAllocated over cpu and memory                  weight 1
//! NodeAffinity      preferred terms matched (sum of weights)            weight 2
//! TaintToleration   PreferNoSchedule taints not tolerated (fewer wins)  weight 3
//! PodTopologySpread ScheduleAnyway constraints, or the system defaults
//!                   (hostname maxSkew 3, zone maxSkew 5 over pods of the
//!                   same controller) for pods without any: fewer
//!                   matching pods in the node's domain wins              weight 2
//! InterPodAffinity  preferred (anti-)affinity terms                     weight 2
//! ```
//!
//! Ties go to the first node by name (kube-scheduler picks at random among ties; determinism matters
//! more here). Not modelled: preemption, nominated nodes, the image-locality and balanced-allocation
//! scores, extenders.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Cluster;
use crate::domain::labels::keys;
use crate::domain::pod::{Pod, PodId, WhenUnsatisfiable};
use crate::domain::taints::Effect;
use crate::semantics::filter::{FilterState, SimNode, bound_nodes};
use crate::semantics::{Reject, interpod, node_affinity, selectors, summarize, taints};

/// What one pass over the queue decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pass {
    /// Pod and the index of its node, in bind order: in `Cluster::nodes` from [`pass`], in the
    /// `FilterState`'s nodes from [`pass_on`].
    pub bound: Vec<(PodId, usize)>,
    /// Pods no registered node takes, with kube-scheduler's message.
    pub unschedulable: Vec<(PodId, String)>,
    /// Pods sharing a claim with a pod bound in this pass: retried next pass, once the claim's volume
    /// (and so its zone) exists.
    pub deferred: Vec<PodId>,
}

/// kube-scheduler's active queue order: higher priority first, then older (`semantics::queue`, the
/// order the planners leave pods pending by).
pub fn queue(cluster: &Cluster) -> Vec<PodId> {
    let mut q = cluster.pending();
    crate::semantics::queue::sort(&mut q, PodId::ix, &cluster.pods);
    q
}

/// One pass over every pending pod, on the registered nodes.
pub fn pass(cluster: &Cluster) -> Pass {
    // kube-scheduler sees registered nodes only; NodeClaims in flight are Karpenter's business.
    let usable: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| !cluster.nodes[i].in_flight).collect();
    let sims: Vec<SimNode> = bound_nodes(cluster).into_iter().zip(&cluster.nodes).filter(|(_, n)| !n.in_flight).map(|(s, _)| s).collect();
    let mut fs = FilterState::new(sims);
    let mut out = pass_on(cluster, &mut fs, &queue(cluster));
    for b in &mut out.bound {
        b.1 = usable[b.1];
    }
    out
}

/// One pass over `queue` on the nodes of `fs` (bound pods seated); [`Pass::bound`] holds indices into
/// `fs.nodes()`, and `fs` ends with the bound pods added.
pub fn pass_on<'c>(cluster: &'c Cluster, fs: &mut FilterState<'c>, queue: &[PodId]) -> Pass {
    let mut out = Pass::default();
    let mut touched_claims: BTreeSet<(String, String)> = BTreeSet::new();
    for &id in queue {
        let pod = cluster.pod(id);
        if pod.volumes.claims.iter().any(|c| touched_claims.contains(&(pod.namespace.clone(), c.clone()))) {
            out.deferred.push(id);
            continue;
        }
        let prep = fs.prepare(pod);
        let mut feasible = Vec::new();
        let mut rejects: Vec<Reject> = Vec::new();
        for k in 0..fs.nodes().len() {
            match fs.filter(&prep, pod, k) {
                Ok(()) => feasible.push(k),
                Err(r) => rejects.push(r),
            }
        }
        if feasible.is_empty() {
            out.unschedulable.push((id, summarize(fs.nodes().len(), &rejects)));
            continue;
        }
        let k = best(fs, pod, &feasible);
        fs.add_pod(pod, k);
        out.bound.push((id, k));
        for c in &pod.volumes.claims {
            touched_claims.insert((pod.namespace.clone(), c.clone()));
        }
    }
    out
}

/// Normalises raw scores to 0–100; `higher_better` says which end wins.
fn normalise(raw: &[f64], higher_better: bool) -> Vec<f64> {
    let (lo, hi) = raw.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    raw.iter()
        .map(|&x| {
            if hi - lo < 1e-12 {
                100.0
            } else if higher_better {
                100.0 * (x - lo) / (hi - lo)
            } else {
                100.0 * (hi - x) / (hi - lo)
            }
        })
        .collect()
}

/// A spread the score counts: its key and which pods it counts.
struct SoftSpread<'p> {
    key: String,
    matches: Box<dyn Fn(&Pod) -> bool + 'p>,
}

fn soft_spreads(pod: &Pod) -> Vec<SoftSpread<'_>> {
    // Defaulted constraints are cluster defaults that filter (`SpreadConstraint::defaulted`); the
    // System defaults that only score are approximated here.
    if pod.spread.iter().all(|c| c.defaulted) {
        // kube-scheduler's system default constraints, for pods a controller owns; the selector is
        // approximated by "pods of the same controller".
        return match &pod.owner {
            Some(o) if matches!(o.kind.as_str(), "ReplicaSet" | "StatefulSet" | "ReplicationController") => [keys::HOSTNAME, keys::ZONE]
                .into_iter()
                .map(|k| SoftSpread { key: k.to_string(), matches: Box::new(move |q: &Pod| q.owner.as_ref().is_some_and(|qo| qo.name == o.name && qo.kind == o.kind) && q.namespace == pod.namespace) })
                .collect(),
            _ => Vec::new(),
        };
    }
    pod.spread
        .iter()
        .filter(|c| c.when == WhenUnsatisfiable::ScheduleAnyway)
        .map(|c| SoftSpread { key: c.key.clone(), matches: Box::new(move |q: &Pod| !q.terminating && q.namespace == pod.namespace && selectors::opt_matches(c.selector.as_ref(), &q.labels)) })
        .collect()
}

/// Pods `matches` counts per domain of `key`, over every node (once per pod scored, not once per
/// feasible node).
fn per_domain<'n>(nodes: &'n [SimNode], key: &str, matches: &dyn Fn(&Pod) -> bool) -> BTreeMap<&'n str, usize> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in nodes {
        // Most nodes hold no matching pod: their label is not looked up and the map stays small.
        let c = n.pods.iter().filter(|q| matches(q)).count();
        if c > 0
            && let Some(d) = n.labels.get(key)
        {
            *counts.entry(d.as_str()).or_default() += c;
        }
    }
    counts
}

/// The feasible node (index in `fs`) with the highest weighted score; ties to the first by name.
fn best(fs: &FilterState, pod: &Pod, feasible: &[usize]) -> usize {
    let nodes = fs.nodes();
    let least_allocated: Vec<f64> = feasible
        .iter()
        .map(|&k| {
            let n = &nodes[k];
            let mut parts = Vec::new();
            for (alloc, used) in [(n.allocatable.cpu_m, n.requested.cpu_m + pod.requests.cpu_m), (n.allocatable.memory, n.requested.memory + pod.requests.memory)] {
                if alloc > 0 {
                    parts.push(100.0 * (alloc - used).max(0) as f64 / alloc as f64);
                }
            }
            if parts.is_empty() { 0.0 } else { parts.iter().sum::<f64>() / parts.len() as f64 }
        })
        .collect();
    let node_pref: Vec<f64> = feasible.iter().map(|&k| node_affinity::preferred_score(&pod.preferred_node, &nodes[k].labels, Some(&nodes[k].name)) as f64).collect();
    let soft_taints: Vec<f64> = feasible.iter().map(|&k| nodes[k].taints.iter().filter(|t| t.effect == Effect::PreferNoSchedule && !taints::tolerated(&pod.tolerations, t)).count() as f64).collect();
    let spreads: Vec<(String, BTreeMap<&str, usize>)> = soft_spreads(pod).into_iter().map(|s| (s.key.clone(), per_domain(nodes, &s.key, &s.matches))).collect();
    let spread_raw: Vec<f64> = feasible
        .iter()
        .map(|&k| {
            let mut total = 0.0;
            for (key, counts) in &spreads {
                // A node without the key is the worst place for a soft spread.
                total += nodes[k].labels.get(key).map_or(1e6, |d| counts.get(d.as_str()).copied().unwrap_or(0) as f64);
            }
            total
        })
        .collect();
    let mut terms: Vec<(&str, f64, BTreeMap<&str, usize>)> = Vec::new();
    for (list, sign) in [(&pod.preferred_affinity, 1.0), (&pod.preferred_anti_affinity, -1.0)] {
        for wt in list.iter() {
            terms.push((wt.term.key.as_str(), sign * wt.weight as f64, per_domain(nodes, &wt.term.key, &|q: &Pod| interpod::term_matches(&wt.term, q))));
        }
    }
    let pod_pref: Vec<f64> =
        feasible.iter().map(|&k| terms.iter().map(|(key, w, counts)| nodes[k].labels.get(*key).map_or(0.0, |d| w * counts.get(d.as_str()).copied().unwrap_or(0) as f64)).sum()).collect();
    let parts =
        [(1.0, normalise(&least_allocated, true)), (2.0, normalise(&node_pref, true)), (3.0, normalise(&soft_taints, false)), (2.0, normalise(&spread_raw, false)), (2.0, normalise(&pod_pref, true))];
    let total = |i: usize| parts.iter().map(|(w, v)| w * v[i]).sum::<f64>();
    let mut best_i = 0;
    for i in 1..feasible.len() {
        let (a, b) = (total(i), total(best_i));
        if a > b + 1e-9 || ((a - b).abs() <= 1e-9 && nodes[feasible[i]].name < nodes[feasible[best_i]].name) {
            best_i = i;
        }
    }
    feasible[best_i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_maps_to_0_100() {
        assert_eq!(normalise(&[1.0, 3.0], true), vec![0.0, 100.0]);
        assert_eq!(normalise(&[1.0, 3.0], false), vec![100.0, 0.0]);
        assert_eq!(normalise(&[2.0, 2.0], false), vec![100.0, 100.0]);
    }
}
