//! What each Kubernetes scheduling constraint means, one module per constraint family, following
//! kube-scheduler's Filter plugins (docs: ../shared/docs/kubernetes-semantics.md). Pure functions over
//! domain types; shared by the planners, the checker and the simulator. No search lives here.

pub mod daemonsets;
pub mod filter;
pub mod interpod;
pub mod limits;
pub mod min_values;
pub mod node_affinity;
pub mod nodepool;
pub mod ports;
pub mod preferences;
pub mod queue;
pub mod reservations;
pub mod resources;
pub mod selectors;
pub mod spread;
pub mod spread_defaults;
pub mod taints;
pub mod volume_limits;
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
    NodeVolumeLimits,
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
            Plugin::NodeVolumeLimits => "NodeVolumeLimits",
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
            Plugin::NodeVolumeLimits,
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

/// A pod whose spec could not be read (`Pod::invalid`) fits no node. The plugin is the one whose field
/// is wrong; the reason names the field, since kube-apiserver would have refused the pod and
/// kube-scheduler has no wording for it.
///
/// ```text
/// invalid_spec(pod) = Err(plugin(field), "invalid pod spec: <field>: <message>")  if pod.invalid
/// ```
pub fn invalid_spec(pod: &crate::domain::Pod) -> Result<(), Reject> {
    let Some(bad) = &pod.invalid else { return Ok(()) };
    let f = bad.field.as_str();
    let plugin = if f.starts_with("spec.affinity.nodeAffinity") || f.starts_with("spec.nodeSelector") {
        Plugin::NodeAffinity
    } else if f.starts_with("spec.affinity") {
        Plugin::InterPodAffinity
    } else if f.starts_with("spec.topologySpreadConstraints") {
        Plugin::PodTopologySpread
    } else if f.starts_with("spec.tolerations") {
        Plugin::TaintToleration
    } else if f.starts_with("spec.volumes") {
        Plugin::VolumeBinding
    } else if f.contains(".ports") {
        Plugin::NodePorts
    } else {
        Plugin::NodeResourcesFit
    };
    Err(Reject::unresolvable(plugin, format!("invalid pod spec: {f}: {}", bad.message)))
}

/// The rejection of a pod that no node can take whatever the node (kube-scheduler's PreFilter: an
/// invalid spec, a missing or unbound-Immediate volume claim), or `None`.
pub fn prefilter(pod: &crate::domain::Pod) -> Option<Reject> {
    if let Err(r) = invalid_spec(pod) {
        return Some(r);
    }
    pod.volumes.blocked.as_ref().map(|why| Reject::unresolvable(Plugin::VolumeBinding, why.clone()))
}
