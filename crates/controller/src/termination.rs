//! Termination of a NodeClaim being deleted (by disruption, a timeout, garbage collection, a capacity
//! error or a person): taint its Node `karpenter.sh/disrupted:NoSchedule`, evict its pods (not DaemonSet
//! or static pods) through the Eviction API so PodDisruptionBudgets apply, wait for them to go (at most
//! the NodeClaim's `terminationGracePeriod`), terminate the instance, delete the Node and remove the
//! finalizers (Node first, then NodeClaim).
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
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams};
use serde_json::json;
use stowage_decide::disruption::Moment;

use super::events::Reason;
use super::state::{TERMINATION_FINALIZER, is_daemon_pod, is_terminal, owner_kind};
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
    /// A launch of this NodeClaim is running; wait for it.
    AwaitLaunch,
    Done,
}

/// Pods a drain evicts: bound to the node, alive, not DaemonSet or static (mirror) pods.
pub(crate) fn evictable(pod: &Pod) -> bool {
    !is_terminal(pod) && !is_daemon_pod(pod) && owner_kind(pod) != Some("Node")
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
    let (claim, node, pods) = {
        let s = super::lock(&ctx.state);
        let c = s.nodeclaim(name).filter(|c| c.metadata.uid == seen.metadata.uid).cloned().unwrap_or_else(|| seen.clone());
        let n = s.node_of(&c).cloned();
        let pods: Vec<Pod> = match &n {
            Some(n) => s.pods_on(n.metadata.name.as_deref().unwrap_or_default()).filter(|p| evictable(p)).cloned().collect(),
            None => Vec::new(),
        };
        (c, n, pods)
    };
    let kube_err = |what: String, error: kube::Error| TerminationError::Kube { claim: name.to_string(), what, error };
    let nodes: Api<Node> = Api::all(ctx.client.clone());

    if let Some(node) = &node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten().any(|t| t.key == well_known::KARPENTER_DISRUPTED);
        if !tainted && node.metadata.deletion_timestamp.is_none() {
            let mut taints: Vec<Taint> = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            taints.push(Taint { key: well_known::KARPENTER_DISRUPTED.into(), effect: "NoSchedule".into(), ..Default::default() });
            let patch = json!({ "metadata": { "resourceVersion": node.metadata.resource_version }, "spec": { "taints": taints } });
            match nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(n) => super::lock(&ctx.state).apply(n),
                Err(e) if kube_status(&e) == Some(404) => {}
                Err(e) => return Err(kube_err(format!("tainting Node {node_name}"), e)),
            }
            ctx.events.nodeclaim(&claim, Reason::Terminating, format!("draining Node {node_name}"));
        }
        let waiting: Vec<&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        for p in &waiting {
            let (ns, pname) = (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default());
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
            match api.evict(&pname, &EvictParams::default()).await {
                Ok(_) => tracing::info!(nodeclaim = name, pod = %format!("{ns}/{pname}"), "evicted"),
                // 429: a PodDisruptionBudget forbids it now; 404: gone already.
                Err(e) if matches!(kube_status(&e), Some(429 | 404)) => {}
                Err(e) => return Err(kube_err(format!("evicting pod {ns}/{pname}"), e)),
            }
        }
        let now = ctx.clock.now();
        let deleting_since = claim.metadata.deletion_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
        let waited = Moment::since(now, deleting_since);
        let out_of_time = grace(&claim).is_some_and(|g| waited >= g);
        if !pods.is_empty() && !out_of_time {
            return Ok(Progress::Draining { remaining: pods.len() });
        }
    }

    if let Some(pid) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|p| !p.is_empty()) {
        match ctx.cloud.terminate(pid).await {
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
    ctx.wake_provisioner();
    Ok(Progress::Done)
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

    #[test]
    fn drains_evict_workload_pods_only() {
        assert!(evictable(&pod(Some("ReplicaSet"), "Running")));
        assert!(evictable(&pod(None, "Running")));
        assert!(!evictable(&pod(Some("DaemonSet"), "Running")));
        assert!(!evictable(&pod(Some("Node"), "Running")), "static pods stay");
        assert!(!evictable(&pod(Some("Job"), "Succeeded")));
    }
}
