//! Termination of a NodeClaim being deleted (by disruption, a timeout, garbage collection, a capacity
//! error or a person), in Karpenter v1's order:
//! 1. taint its Node `karpenter.sh/disrupted:NoSchedule` and label it
//!    `node.kubernetes.io/exclude-from-external-load-balancers` (load balancers stop sending to it);
//!    then end the pass, so that kube-scheduler sees the taint before the pods are read;
//! 2. evict its pods through the Eviction API (PodDisruptionBudgets apply) in groups, each group only
//!    once the ones before it are gone ([`eviction_group`]): non-critical workload pods, non-critical
//!    DaemonSet pods, system-critical workload pods, system-critical DaemonSet pods. Static pods and
//!    pods that tolerate the disruption taint are not evicted (they would come back to the node);
//!    a pod already terminating past its own grace period is not waited for (its kubelet may be gone).
//!    A pod annotated `karpenter.sh/do-not-disrupt: "true"` is not evicted: it holds the drain until
//!    the NodeClaim's `terminationGracePeriod` ends (forever without one, as in Karpenter). Once what is
//!    left of that grace period is no longer than a pod's own, the pod is deleted, not evicted (neither
//!    its PodDisruptionBudget nor do-not-disrupt hold it then), with what is left as its grace period,
//!    so that it ends by the deadline ([`drain_pass`]).
//!    The pods come from the state index; when it shows none left, the API server is asked
//!    (`spec.nodeName` field selector), since a pod bound seconds ago may not be in the index yet;
//! 3. wait until the node's VolumeAttachments are gone (volumes detached), but never past the
//!    NodeClaim's `terminationGracePeriod`, which also bounds the drain;
//! 4. terminate the instance, delete the Node and remove the finalizers (Node first, then NodeClaim).
//!
//! When garbage collection found the instance already gone, steps 2 and 3 are skipped: there is
//! nothing left to drain.
//!
//! [`terminate`] is the NodeClaim controller's `Cleanup` (lifecycle.rs, under kube-runtime's
//! `finalizer()`): it returns [`Progress::Done`] only once the instance is terminated and the Node is
//! gone, and only then does `finalizer()` remove the NodeClaim's finalizer.
//!
//! Invariants: the NodeClaim's finalizer goes last, after the instance was terminated, so an instance is
//! never left without the NodeClaim that tracks it; a NodeClaim whose launch is still running in this
//! process waits for it. A Node deleted directly (with our finalizer) makes its NodeClaim deleted (the
//! lifecycle decision's `NodeDeleted`), and the same path runs; a Node with our finalizer and no
//! NodeClaim just loses the finalizer ([`node_deleted`], from garbage collection).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use serde_json::json;
use stowage_decide::disruption::Moment;

use super::cloud_metrics::Caller;
use super::events::Reason;
use super::state::{DO_NOT_DISRUPT, TERMINATION_FINALIZER, is_daemon_pod, is_terminal, owner_kind};
use super::{Ctx, kube_status};
use stowage_core::domain::taints::well_known;
use stowage_decide::cloud::{CloudError, CloudProvider};
use stowage_input::api::NodeClaim;

#[derive(Debug, thiserror::Error)]
pub enum TerminationError {
    /// An API call failed; termination resumes where it stopped on the next tick.
    #[error("terminating NodeClaim {claim}: {what}: {error}")]
    Kube { claim: String, what: String, error: kube::Error },
    /// The cloud did not terminate the instance; retried on the next tick (the finalizer stays).
    #[error("terminating NodeClaim {claim}: {error}")]
    Cloud { claim: String, error: CloudError },
}

/// Where a termination stands after one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Pods are still leaving the node.
    Draining {
        remaining: usize,
    },
    /// Pods are gone; volumes are still attached to the node.
    Detaching {
        volumes: usize,
    },
    /// A launch of this NodeClaim is running; wait for it.
    AwaitLaunch,
    Done,
}

/// The label that takes a node out of external load balancers.
const EXCLUDE_FROM_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Whether `pod` tolerates `karpenter.sh/disrupted:NoSchedule`.
fn tolerates_disruption(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.tolerations.as_ref()).into_iter().flatten().any(|t| {
        let op = t.operator.as_deref().unwrap_or("Equal");
        let key_matches = match t.key.as_deref() {
            None | Some("") => op == "Exists",
            Some(k) => k == well_known::KARPENTER_DISRUPTED && (op == "Exists" || t.value.as_deref().unwrap_or("").is_empty()),
        };
        key_matches && t.effect.as_deref().is_none_or(|e| e.is_empty() || e == "NoSchedule")
    })
}

/// The eviction group of a pod on a draining node (module doc, step 2), `None` for pods a drain leaves:
/// terminal, static (mirror) pods, and pods that tolerate the disruption taint.
pub(crate) fn eviction_group(pod: &Pod) -> Option<u8> {
    if is_terminal(pod) || owner_kind(pod) == Some("Node") || tolerates_disruption(pod) {
        return None;
    }
    let critical = pod.spec.as_ref().and_then(|s| s.priority_class_name.as_deref()).is_some_and(|c| c == "system-cluster-critical" || c == "system-node-critical");
    Some(u8::from(critical) * 2 + u8::from(is_daemon_pod(pod)))
}

/// Pods a drain waits for (any group; a do-not-disrupt pod among them is waited for, not evicted).
pub(crate) fn drainable(pod: &Pod) -> bool {
    eviction_group(pod).is_some()
}

/// A pod's own `terminationGracePeriodSeconds` (the API's default, 30 s, when unset).
fn own_grace(pod: &Pod) -> Duration {
    Duration::from_secs(pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).max(0) as u64)
}

/// Whether a pod is terminating for longer than its own grace period (not waited for).
fn stuck_terminating(pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> bool {
    let Some(t) = pod.metadata.deletion_timestamp.as_ref() else { return false };
    Moment::since(now, t.0) > own_grace(pod)
}

fn do_not_disrupt(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().and_then(|a| a.get(DO_NOT_DISRUPT)).is_some_and(|v| v == "true")
}

/// What one pass of a drain does with the node's drainable pods.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct DrainPass<'a> {
    /// Evicted now: the pods of the first eviction group that still has a pod to go, but for those
    /// terminating, do-not-disrupt or deleted below.
    pub evict: Vec<&'a Pod>,
    /// Deleted now, with this grace period: what is left of the NodeClaim's `terminationGracePeriod`
    /// is no longer than the pod's own grace period, so the pod is given what is left (Karpenter's
    /// preemptive deletion; PodDisruptionBudgets and do-not-disrupt no longer hold it).
    pub delete: Vec<(&'a Pod, Duration)>,
    /// Pods still waited for (terminating within their own grace period included).
    pub waiting: usize,
}

/// One drain pass over a node's `pods` (those not [`drainable`] are left alone) at `now`, with `left` of the NodeClaim's
/// `terminationGracePeriod` (`None`: it has none, and a do-not-disrupt pod holds the drain forever,
/// as in Karpenter).
pub(crate) fn drain_pass(pods: &[Pod], now: k8s_openapi::jiff::Timestamp, left: Option<Duration>) -> DrainPass<'_> {
    let waiting: Vec<&Pod> = pods.iter().filter(|p| drainable(p) && !stuck_terminating(p, now)).collect();
    let idle: Vec<&Pod> = waiting.iter().copied().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    let (delete, rest): (Vec<&Pod>, Vec<&Pod>) = idle.into_iter().partition(|p| left.is_some_and(|l| l < own_grace(p) || l.is_zero()));
    // The first group with a pod still to go; do-not-disrupt pods, which wait for the deadline, do
    // not hold the later groups back.
    let group = waiting.iter().filter(|p| p.metadata.deletion_timestamp.is_some() || !do_not_disrupt(p)).filter_map(|p| eviction_group(p)).min();
    DrainPass {
        evict: rest.into_iter().filter(|p| !do_not_disrupt(p) && eviction_group(p) == group).collect(),
        delete: delete.into_iter().map(|p| (p, left.unwrap_or_default())).collect(),
        waiting: waiting.len(),
    }
}

fn grace(claim: &NodeClaim) -> Option<Duration> {
    claim.spec.termination_grace_period.as_deref().and_then(|g| humantime::parse_duration(g).ok())
}

/// One pass of a NodeClaim's termination.
/// `seen` is the NodeClaim as the caller saw it being deleted; the state index's copy is used when it
/// is the same object (it holds our own writes), so an index that has not caught up yet never makes
/// termination skip the instance.
pub async fn terminate<P: CloudProvider>(ctx: &Ctx<P>, seen: &NodeClaim) -> Result<Progress, TerminationError> {
    let name = seen.metadata.name.as_deref().unwrap_or_default();
    if super::lock(&ctx.launching).contains(name) {
        return Ok(Progress::AwaitLaunch);
    }
    let (claim, node, mut pods) = {
        let s = super::lock(&ctx.state);
        let c = s.nodeclaim(name).filter(|c| c.metadata.uid == seen.metadata.uid).cloned().unwrap_or_else(|| seen.clone());
        let n = s.node_of(&c).cloned();
        let pods: Vec<Pod> = match &n {
            Some(n) => s.pods_on(n.metadata.name.as_deref().unwrap_or_default()).filter(|p| drainable(p)).cloned().collect(),
            None => Vec::new(),
        };
        (c, n, pods)
    };
    let kube_err = |what: String, error: kube::Error| TerminationError::Kube { claim: name.to_string(), what, error };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    // Garbage collection found the instance gone: nothing runs there any more, so nothing to drain.
    let pid = claim.status.as_ref().and_then(|s| s.provider_id.clone()).unwrap_or_default();
    let instance_gone = !pid.is_empty() && super::lock(&ctx.vanished).contains(&pid);

    if let Some(node) = node.as_ref().filter(|_| !instance_gone) {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten().any(|t| t.key == well_known::KARPENTER_DISRUPTED);
        if !tainted && node.metadata.deletion_timestamp.is_none() {
            let mut taints: Vec<Taint> = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            taints.push(Taint { key: well_known::KARPENTER_DISRUPTED.into(), effect: "NoSchedule".into(), ..Default::default() });
            let patch = json!({ "metadata": { "resourceVersion": node.metadata.resource_version, "labels": { EXCLUDE_FROM_LB: "true" } }, "spec": { "taints": taints } });
            match nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(n) => {
                    super::lock(&ctx.state).apply(n);
                    ctx.events.nodeclaim(&claim, Reason::Terminating, format!("draining Node {node_name}"));
                    // The pods are read in a later pass, once kube-scheduler has seen the taint: a pod
                    // it binds meanwhile is then on the list.
                    return Ok(Progress::Draining { remaining: pods.len() });
                }
                // The Node is gone already: nothing left to drain.
                Err(e) if kube_status(&e) == Some(404) => {}
                Err(e) => return Err(kube_err(format!("tainting Node {node_name}"), e)),
            }
        }
        let now = ctx.clock.now();
        let deleting_since = claim.metadata.deletion_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
        let left = grace(&claim).map(|g| g.saturating_sub(Moment::since(now, deleting_since)));
        // The index says the drain is done, but it may lag the API server (a watch behind under load,
        // a re-list): the instance goes only once the API server lists no pod to wait for.
        let confirm = drain_pass(&pods, now, left).waiting == 0;
        if confirm {
            pods = pods_on(ctx, &node_name).await.map_err(|e| kube_err(format!("listing the pods of Node {node_name}"), e))?;
        }
        let pass = drain_pass(&pods, now, left);
        if confirm && pass.waiting > 0 {
            tracing::info!(nodeclaim = name, node = %node_name, pods = pass.waiting, "the API server lists pods to drain that the watch has not shown yet");
        }
        for (p, grace) in &pass.delete {
            let (ns, pname) = (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            let params = DeleteParams { grace_period_seconds: Some(grace.as_secs().min(u64::from(u32::MAX)) as u32), ..Default::default() };
            match api.delete(&pname, &params).await {
                Ok(_) => tracing::info!(nodeclaim = name, pod = %format!("{ns}/{pname}"), grace = ?grace, "deleted: the NodeClaim's terminationGracePeriod ends"),
                Err(e) if kube_status(&e) == Some(404) => {}
                Err(e) => return Err(kube_err(format!("deleting pod {ns}/{pname}"), e)),
            }
        }
        for p in &pass.evict {
            let (ns, pname) = (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            match api.evict(&pname, &EvictParams::default()).await {
                Ok(_) => tracing::info!(nodeclaim = name, pod = %format!("{ns}/{pname}"), "evicted"),
                // 429: a PodDisruptionBudget forbids it now; 404: gone already.
                Err(e) if matches!(kube_status(&e), Some(429 | 404)) => {}
                Err(e) => return Err(kube_err(format!("evicting pod {ns}/{pname}"), e)),
            }
        }
        let out_of_time = left.is_some_and(|l| l.is_zero());
        if pass.waiting > 0 && !out_of_time {
            return Ok(Progress::Draining { remaining: pass.waiting });
        }
        if !out_of_time {
            let attached = volume_attachments(ctx, &node_name).await.map_err(|e| kube_err(format!("listing the VolumeAttachments of Node {node_name}"), e))?;
            if attached > 0 {
                return Ok(Progress::Detaching { volumes: attached });
            }
        }
    }

    if let Some(pid) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|p| !p.is_empty()) {
        match ctx.cloud.by(Caller::Lifecycle).terminate(pid).await {
            Ok(()) | Err(CloudError::NotFound(_)) => {}
            Err(error) => return Err(TerminationError::Cloud { claim: name.to_string(), error }),
        }
        tracing::info!(nodeclaim = name, provider_id = pid, "instance terminated");
    }

    if let Some(node) = &node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if node.metadata.deletion_timestamp.is_none() {
            match nodes.delete(&node_name, &DeleteParams::default()).await {
                Ok(r) => {
                    if let Some(n) = r.left() {
                        super::lock(&ctx.state).apply(n);
                    }
                }
                Err(e) if kube_status(&e) == Some(404) => {}
                Err(e) => return Err(kube_err(format!("deleting Node {node_name}"), e)),
            }
        }
        remove_node_finalizer(ctx, &node_name).await.map_err(|e| kube_err(format!("removing the finalizer of Node {node_name}"), e))?;
    }

    // The NodeClaim's finalizer is removed by the caller (`finalizer()`), after this returns Done.
    tracing::info!(nodeclaim = name, "terminated");
    // Capacity went away: pods still pending (planned onto this node, or waiting for room) are planned
    // again now, not when their next status change happens to arrive.
    ctx.request_batch("replan/terminated");
    Ok(Progress::Done)
}

/// The drainable pods bound to a node, read from the API server (not the index).
async fn pods_on<P: CloudProvider>(ctx: &Ctx<P>, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    Ok(api.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await?.items.into_iter().filter(drainable).collect())
}

/// How many VolumeAttachments still name the node (a CSI driver detaches them once the pods are gone).
async fn volume_attachments<P: CloudProvider>(ctx: &Ctx<P>, node: &str) -> Result<usize, kube::Error> {
    let api: Api<VolumeAttachment> = Api::all(ctx.client.clone());
    Ok(api.list(&ListParams::default()).await?.items.iter().filter(|v| v.spec.node_name == node).count())
}

/// Removes our finalizer from a Node (fresh read, resource version precondition).
pub(crate) async fn remove_node_finalizer<P: CloudProvider>(ctx: &Ctx<P>, node_name: &str) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let Some(n) = nodes.get_opt(node_name).await? else { return Ok(()) };
    let current: Vec<String> = n.metadata.finalizers.clone().unwrap_or_default();
    if !current.iter().any(|f| f == TERMINATION_FINALIZER) {
        return Ok(());
    }
    let rest: Vec<String> = current.into_iter().filter(|f| f != TERMINATION_FINALIZER).collect();
    let patch = json!({ "metadata": { "resourceVersion": n.metadata.resource_version, "finalizers": rest } });
    match nodes.patch(node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(n) => {
            let mut s = super::lock(&ctx.state);
            if n.metadata.deletion_timestamp.is_some() && n.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty()) {
                s.delete(&n);
            } else {
                s.apply(n);
            }
            Ok(())
        }
        Err(e) if kube_status(&e) == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A Node deleted directly while it carries our finalizer: delete its NodeClaim (whose termination
/// removes the finalizer), or, if it has none, just let the Node go.
pub(crate) async fn node_deleted<P: CloudProvider>(ctx: &Ctx<P>, node_name: &str) -> Result<(), kube::Error> {
    let claim = {
        let s = super::lock(&ctx.state);
        s.node(node_name).and_then(|n| s.nodeclaim_of(n)).cloned()
    };
    match claim {
        Some(c) if c.metadata.deletion_timestamp.is_none() => {
            let name = c.metadata.name.clone().unwrap_or_default();
            tracing::info!(node = node_name, nodeclaim = %name, "Node deleted; deleting its NodeClaim");
            let api: Api<NodeClaim> = Api::all(ctx.client.clone());
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(r) => {
                    if let Some(c) = r.left() {
                        super::lock(&ctx.state).apply(c);
                    }
                    Ok(())
                }
                Err(e) if kube_status(&e) == Some(404) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Some(_) => Ok(()),
        None => remove_node_finalizer(ctx, node_name).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(owner: Option<&str>, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta { owner_references: owner.map(|k| vec![OwnerReference { kind: k.into(), controller: Some(true), ..Default::default() }]), ..Default::default() },
            spec: None,
            status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }

    fn with(mut p: Pod, priority_class: Option<&str>, tolerations: serde_json::Value) -> Pod {
        let mut spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(json!({"containers": [], "tolerations": tolerations})).unwrap();
        spec.priority_class_name = priority_class.map(str::to_string);
        p.spec = Some(spec);
        p
    }

    #[test]
    fn drains_evict_in_karpenters_groups_and_leave_static_terminal_and_tolerating_pods() {
        assert_eq!(eviction_group(&pod(Some("ReplicaSet"), "Running")), Some(0));
        assert_eq!(eviction_group(&pod(None, "Running")), Some(0), "bare pods go too");
        assert_eq!(eviction_group(&pod(Some("DaemonSet"), "Running")), Some(1), "DaemonSet pods after the workload");
        assert_eq!(eviction_group(&with(pod(Some("ReplicaSet"), "Running"), Some("system-cluster-critical"), json!([]))), Some(2));
        assert_eq!(eviction_group(&with(pod(Some("DaemonSet"), "Running"), Some("system-node-critical"), json!([]))), Some(3), "critical daemons last");
        assert_eq!(eviction_group(&pod(Some("Node"), "Running")), None, "static pods stay");
        assert_eq!(eviction_group(&pod(Some("Job"), "Succeeded")), None);
        let tolerating = with(pod(Some("ReplicaSet"), "Running"), None, json!([{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}]));
        assert_eq!(eviction_group(&tolerating), None, "it would come back to the node");
        let everything = with(pod(Some("DaemonSet"), "Running"), None, json!([{"operator": "Exists"}]));
        assert_eq!(eviction_group(&everything), None);
        let other = with(pod(Some("ReplicaSet"), "Running"), None, json!([{"key": "dedicated", "operator": "Exists"}]));
        assert_eq!(eviction_group(&other), Some(0));
    }

    fn named(mut p: Pod, name: &str) -> Pod {
        p.metadata.name = Some(name.into());
        p
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
    }

    #[test]
    fn do_not_disrupt_pods_hold_the_drain_until_the_grace_period_and_are_deleted_in_time_for_it() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let web = named(with(pod(Some("ReplicaSet"), "Running"), None, json!([])), "web");
        let mut keep = named(with(pod(Some("ReplicaSet"), "Running"), None, json!([])), "keep");
        keep.metadata.annotations = Some([(DO_NOT_DISRUPT.to_string(), "true".to_string())].into());
        keep.spec.as_mut().unwrap().termination_grace_period_seconds = Some(60);
        let daemon = named(pod(Some("DaemonSet"), "Running"), "daemon");

        // No terminationGracePeriod: the workload pod is evicted, the do-not-disrupt one only waited for.
        let all = [web.clone(), keep.clone(), daemon.clone()];
        let p = drain_pass(&all, now, None);
        assert_eq!((names(&p.evict), p.delete.len(), p.waiting), (vec!["web".to_string()], 0, 3));
        // A pod terminating within its own grace period holds the DaemonSet pods back.
        let mut leaving = web.clone();
        leaving.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now - Duration::from_secs(10)));
        let p = drain_pass(std::slice::from_ref(&leaving), now, None);
        assert_eq!((p.evict.len(), p.waiting), (0, 1));
        let held_back = [leaving, keep.clone(), daemon.clone()];
        let p = drain_pass(&held_back, now, None);
        assert!(p.evict.is_empty(), "{:?}", names(&p.evict));
        // Once it is gone the DaemonSet pod goes; the do-not-disrupt pod does not hold it back, and
        // without a grace period it holds the drain for good.
        let rest = [keep.clone(), daemon.clone()];
        let p = drain_pass(&rest, now, None);
        assert_eq!((names(&p.evict), p.delete.len(), p.waiting), (vec!["daemon".to_string()], 0, 2));
        // 5 min left of the NodeClaim's grace period, more than the pod's own 60 s: still waited for.
        let p = drain_pass(&rest, now, Some(Duration::from_secs(300)));
        assert!(p.delete.is_empty());
        // 45 s left: deleted with those 45 s; the DaemonSet pod's own 30 s still fit, so it is evicted.
        let p = drain_pass(&rest, now, Some(Duration::from_secs(45)));
        assert_eq!(p.delete.iter().map(|(p, g)| (p.metadata.name.clone().unwrap(), *g)).collect::<Vec<_>>(), [("keep".to_string(), Duration::from_secs(45))]);
        assert_eq!(names(&p.evict), ["daemon"]);
        // Out of time: every pod left is deleted at once, with no grace.
        let p = drain_pass(&rest, now, Some(Duration::ZERO));
        assert_eq!(p.delete.len(), 2);
        assert!(p.delete.iter().all(|(_, g)| g.is_zero()) && p.evict.is_empty());
    }

    #[test]
    fn a_pod_terminating_past_its_own_grace_period_is_not_waited_for() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let mut p = with(pod(Some("ReplicaSet"), "Running"), None, json!([]));
        assert!(!stuck_terminating(&p, now));
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now - Duration::from_secs(20)));
        assert!(!stuck_terminating(&p, now), "within the default 30 s");
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now - Duration::from_secs(31)));
        assert!(stuck_terminating(&p, now));
    }
}
