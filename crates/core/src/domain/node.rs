//! Existing nodes (and NodeClaims that have no Node yet).

use super::labels::Labels;
use super::resources::Resources;
use super::taints::Taint;

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub capacity: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    pub provider_id: Option<String>,
    /// Marked for deletion: never a target.
    pub deleting: bool,
    /// A NodeClaim launched but not registered yet (future capacity, not yet a node kube-scheduler
    /// sees), or a Karpenter-managed node that is initialized but not Ready (coming back, not settled).
    pub in_flight: bool,
    /// Karpenter NodePool owning the node (`karpenter.sh/nodepool`), if any.
    pub nodepool: Option<String>,
    /// Its CSINode's `spec.drivers[].allocatable.count` per driver name; a driver absent here has no
    /// limit on the node (`semantics::volume_limits`).
    pub attach_limits: AttachLimits,
}

/// Most volumes of each CSI driver a node may have attached, by driver name.
pub type AttachLimits = std::collections::BTreeMap<String, i64>;

impl Node {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}
