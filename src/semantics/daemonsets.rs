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
    node_taints
        .iter()
        .filter(|t| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute))
        .all(|t| taints::tolerated(&ds.template.tolerations, t) || taints::tolerated(&auto, t))
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
