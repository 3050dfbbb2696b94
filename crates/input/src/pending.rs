//! Which pods a batch plans (issue 15): the pods kube-scheduler gave up on, written once for
//! `stowage plan` (over files) and the controller (over the live cluster).
//!
//! ```text
//! planned(pod) = unbound ∧ not terminal ∧ not terminating ∧ not a DaemonSet or static (Node-owned) pod
//!              ∧ ( all-unbound
//!                ∨ no status.nominatedNodeName (kube-scheduler is preempting for it)
//!                  ∧ ( PodScheduled=False with reason Unschedulable       kube-scheduler gave up
//!                    ∨ nominated to in-flight capacity                     a NodeClaim in flight names it
//!                    ∨ no PodScheduled condition ∧ Selection::GivenUpOrUnjudged ) )
//! replanned(pod) = bound to a node being deleted (deletion timestamp or karpenter.sh/disrupted taint)
//!                  ∧ not terminal ∧ not a DaemonSet pod: unbound in the snapshot, the node no target
//! ```
//!
//! A pod without a PodScheduled condition has not been judged yet. The controller, which sees live
//! status, waits for the verdict (`Selection::GivenUp`, Karpenter's rule). A file cannot tell "not
//! judged yet" from "written by hand" or "dumped without status", so `stowage plan` plans such pods by
//! default (`Selection::GivenUpOrUnjudged`): every workload written before this rule plans what it
//! planned. Pods kube-scheduler judged otherwise (a `SchedulingGated` condition, say) are left out
//! unless `Selection::AllUnbound` (`--all-unbound`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;

/// Annotation listing the uids of the pods a NodeClaim was created for (`stowage_decide::provision`
/// writes it; docs/formats.md §5).
pub const NOMINATED_PODS_ANNOTATION: &str = "stowage.dev/nominated-pods";

/// Which unbound pods a batch plans (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Pods kube-scheduler found unschedulable, pods nominated to in-flight capacity, and pods not
    /// judged yet (no PodScheduled condition): `stowage plan`'s default.
    #[default]
    GivenUpOrUnjudged,
    /// Pods kube-scheduler found unschedulable and pods nominated to in-flight capacity: the controller.
    GivenUp,
    /// Every unbound, live pod that is not a DaemonSet or static pod (`--all-unbound`).
    AllUnbound,
}

/// The pod's `spec.nodeName`, if set.
pub fn node_name(p: &core::Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

pub fn is_terminal(p: &core::Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// The controlling owner's kind, if any.
pub fn owner_kind(p: &core::Pod) -> Option<&str> {
    p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| o.kind.as_str())
}

/// The pod's PodScheduled condition: `None` when kube-scheduler has not judged it yet.
fn scheduled_condition(p: &core::Pod) -> Option<&core::PodCondition> {
    p.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().find(|c| c.type_ == "PodScheduled")
}

/// Whether a batch plans this pod (module doc). `nominated` holds the uids NodeClaims in flight name
/// in [`NOMINATED_PODS_ANNOTATION`].
pub fn planned(p: &core::Pod, selection: Selection, nominated: &BTreeSet<String>) -> bool {
    if node_name(p).is_some() || p.metadata.deletion_timestamp.is_some() || is_terminal(p) || matches!(owner_kind(p), Some("DaemonSet" | "Node")) {
        return false;
    }
    if selection == Selection::AllUnbound {
        return true;
    }
    if p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
        return false;
    }
    if p.metadata.uid.as_ref().is_some_and(|u| nominated.contains(u)) {
        return true;
    }
    match scheduled_condition(p) {
        Some(c) => c.status == "False" && c.reason.as_deref() == Some("Unschedulable"),
        None => selection == Selection::GivenUpOrUnjudged,
    }
}

/// The uids named by NodeClaims still in flight (no Node of theirs in `nodes`, not being deleted).
pub fn nominated_in_flight(o: &crate::Objects) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in o.nodeclaims.iter().map(|c| &c.obj).filter(|c| c.metadata.deletion_timestamp.is_none()) {
        let status = c.status.as_ref();
        let registered = status.and_then(|s| s.node_name.as_deref()).is_some_and(|n| o.nodes.iter().any(|x| x.obj.metadata.name.as_deref() == Some(n)))
            || status.and_then(|s| s.provider_id.as_deref()).is_some_and(|p| o.nodes.iter().any(|x| x.obj.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(p)));
        if registered {
            continue;
        }
        let Some(v) = c.metadata.annotations.as_ref().and_then(|a| a.get(NOMINATED_PODS_ANNOTATION)) else { continue };
        out.extend(v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string));
    }
    out
}
