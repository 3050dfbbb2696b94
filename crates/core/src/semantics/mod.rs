//! What each Kubernetes scheduling constraint means, one module per constraint family, following
//! kube-scheduler's Filter plugins (docs: ../shared/docs/kubernetes-semantics.md). Pure functions over
//! domain types; shared by the planners, the checker and the simulator. No search lives here.

pub mod daemonsets;
pub mod filter;
pub mod interpod;
pub mod limits;
pub mod node_affinity;
pub mod nodepool;
pub mod ports;
pub mod resources;
pub mod selectors;
pub mod spread;
pub mod taints;
pub mod volumes;

use std::fmt;

/// The kube-scheduler Filter plugin (or stowage check) a rejection comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plugin {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeBinding,
    VolumeZone,
    PodTopologySpread,
    InterPodAffinity,
    /// Not a kube-scheduler plugin: no NodePool can launch a node for the pod (requirements, limits,
    /// instance types).
    NodePool,
}

impl Plugin {
    pub fn as_str(self) -> &'static str {
        match self {
            Plugin::NodeUnschedulable => "NodeUnschedulable",
            Plugin::NodeName => "NodeName",
            Plugin::TaintToleration => "TaintToleration",
            Plugin::NodeAffinity => "NodeAffinity",
            Plugin::NodePorts => "NodePorts",
            Plugin::NodeResourcesFit => "NodeResourcesFit",
            Plugin::VolumeBinding => "VolumeBinding",
            Plugin::VolumeZone => "VolumeZone",
            Plugin::PodTopologySpread => "PodTopologySpread",
            Plugin::InterPodAffinity => "InterPodAffinity",
            Plugin::NodePool => "NodePool",
        }
    }

    pub fn parse(s: &str) -> Option<Plugin> {
        [
            Plugin::NodeUnschedulable,
            Plugin::NodeName,
            Plugin::TaintToleration,
            Plugin::NodeAffinity,
            Plugin::NodePorts,
            Plugin::NodeResourcesFit,
            Plugin::VolumeBinding,
            Plugin::VolumeZone,
            Plugin::PodTopologySpread,
            Plugin::InterPodAffinity,
            Plugin::NodePool,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a node cannot take a pod, in kube-scheduler's words (`reason` is the text that follows
/// "N node(s)" in its events, e.g. "didn't match pod topology spread constraints").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reject {
    pub plugin: Plugin,
    pub reason: String,
    /// `UnschedulableAndUnresolvable`: no change to other pods would help on this node.
    pub unresolvable: bool,
}

impl Reject {
    pub fn new(plugin: Plugin, reason: impl Into<String>) -> Self {
        Reject { plugin, reason: reason.into(), unresolvable: false }
    }

    pub fn unresolvable(plugin: Plugin, reason: impl Into<String>) -> Self {
        Reject { plugin, reason: reason.into(), unresolvable: true }
    }
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.plugin, self.reason)
    }
}

/// Summarises per-node rejections the way kube-scheduler's FitError does:
/// "0/4 nodes are available: 1 node(s) didn't match pod topology spread constraints, 3 node(s) had
/// volume node affinity conflict."
pub fn summarize(total_nodes: usize, rejects: &[Reject]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in rejects {
        *counts.entry(r.reason.as_str()).or_default() += 1;
    }
    if counts.is_empty() {
        return format!("0/{total_nodes} nodes are available.");
    }
    let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    format!("0/{total_nodes} nodes are available: {}.", parts.join(", "))
}
