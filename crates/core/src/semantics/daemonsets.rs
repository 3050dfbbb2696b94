//! DaemonSet pods on a node (`pkg/controller/daemon` `NodeShouldRunDaemonPod`) and the overhead they
//! add to a new node.
//!
//! ```text
//! runs_on(ds, node) = ds.nodeSelector ∧ ds.requiredNodeAffinity match node.labels
//!                   ∧ every NoSchedule/NoExecute taint of the node is tolerated by ds.tolerations
//!                     plus the tolerations the DaemonSet controller adds
//! overhead(node)    = Σ requests of the DaemonSets that run on it
//! ```
//!
//! For a node the plan launches, the taints are its NodePool's `taints` (startup taints are removed
//! before workloads schedule, as Karpenter assumes).

use crate::domain::cluster::DaemonSet;
use crate::domain::labels::Labels;
use crate::domain::resources::Resources;
use crate::domain::taints::{Effect, Taint};

use super::{node_affinity, taints};

pub fn runs_on(ds: &DaemonSet, labels: &Labels, node_taints: &[Taint], node_name: Option<&str>) -> bool {
    if !node_affinity::matcher_matches(&ds.template.node_matcher, labels, node_name) {
        return false;
    }
    let auto = taints::daemonset_tolerations();
    node_taints.iter().filter(|t| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute)).all(|t| taints::tolerated(&ds.template.tolerations, t) || taints::tolerated(&auto, t))
}

/// The DaemonSets that will put a pod on an existing node that has none of theirs yet. The DaemonSet
/// controller creates those pods as soon as a node exists, so a planner counts them as seated: it keeps
/// a plan from filling an in-flight node (a NodeClaim not registered yet) or a node that just registered
/// with pods its DaemonSets claim first. kube-scheduler itself reserves nothing, so the checker does not.
///
/// ```text
/// missing(node) = { ds | runs_on(ds, node) ∧ no live pod owned by ds is bound to node }
/// ```
pub fn missing<'a>(dss: &'a [DaemonSet], node: &crate::domain::Node, pods_on_node: &[&crate::domain::pod::Pod]) -> Vec<&'a DaemonSet> {
    dss.iter()
        .filter(|ds| !pods_on_node.iter().any(|p| p.namespace == ds.namespace && !p.is_terminal() && p.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet" && o.name == ds.name)))
        .filter(|ds| runs_on(ds, &node.labels, &node.taints, Some(&node.name)))
        .collect()
}

/// The DaemonSets that run on the node and the sum of their requests.
pub fn overhead<'a>(dss: &'a [DaemonSet], labels: &Labels, node_taints: &[Taint], node_name: Option<&str>) -> (Resources, Vec<&'a DaemonSet>) {
    let mut total = Resources::default();
    let mut which = Vec::new();
    for ds in dss {
        if runs_on(ds, labels, node_taints, node_name) {
            total.add(&ds.template.requests);
            which.push(ds);
        }
    }
    (total, which)
}
