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
//! before workloads schedule, as Karpenter assumes), and the overhead is the templates'. On an existing
//! node the DaemonSet pods kube-scheduler sees count: bound ones as bound pods, and a missing one by its
//! pending pod aimed at the node when there is one (`pod_for`).

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
    node_taints.iter().filter(|t| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute)).all(|t| taints::tolerated(&ds.template.tolerations, t) || taints::tolerated(auto, t))
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

/// The pod a DaemonSet missing from an existing node will put there: its pending pod aimed at the node
/// (the DaemonSet controller pins each pod to its node by `metadata.name`), whose requests are what
/// kube-scheduler will see (a LimitRange or a vertical autoscaler may have changed them), else the
/// template. New nodes always get the template.
///
/// ```text
/// pod_for(ds, node) = the live unbound pod owned by ds whose node affinity admits only node.name
///                     (matchFields metadata.name), else ds.template
/// ```
pub fn pod_for<'a>(ds: &'a DaemonSet, node: &crate::domain::Node, pods: &'a [crate::domain::pod::Pod]) -> &'a crate::domain::pod::Pod {
    pods.iter()
        .find(|p| {
            p.node_name.is_none()
                && !p.is_terminal()
                && !p.terminating
                && p.namespace == ds.namespace
                && p.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet" && o.name == ds.name)
                && p.node_matcher.terms.as_ref().is_some_and(|ts| ts.iter().all(|t| t.fields.iter().any(|f| f.key == "metadata.name")))
                && node_affinity::matcher_matches(&p.node_matcher, &node.labels, Some(&node.name))
        })
        .unwrap_or(&ds.template)
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
