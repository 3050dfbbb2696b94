//! Karpenter's provisioning loop in the simulator. Everything it decides is the controller's own,
//! from `stowage_decide`: the batcher (`batch`), the cache of offerings the cloud refused
//! (`offerings`), the provisioning decision (`provision`: the NodeClaims, their fallback offerings,
//! nominations) and the launch request for a NodeClaim (`launch`). What is left here is the part a
//! real cluster's kubelet does: the Node a NodeClaim's instance registers.
//!
//! Batching (karpenter.md §1): a pod kube-scheduler cannot place triggers the batcher. The window
//! opens at the first trigger and closes when no *new* pod has triggered for `batchIdle` (1 s) or
//! `batchMax` (10 s) after it opened; a pod triggering again does not extend it. The batch is every
//! pending pod at closing time, planned together with the NodeClaims still in flight.
//!
//! A launch refused with insufficient capacity marks its offering unavailable for
//! `unavailableOfferingTTL` (3 minutes, Karpenter's cache); the planner sees the catalog with those
//! offerings marked `available: false`.

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::world::World;
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::weights::Weights;
use stowage_decide::provision::{self, Decision, Input, Planner, ProvisionError};
use stowage_input::api::NodeClaim;

/// Most instance types one NodeClaim allows (the controller's default, `--max-instance-types`).
pub const MAX_INSTANCE_TYPES: usize = 20;

/// The provisioning decision for batch `batch` of the world (`cluster` is its build): the
/// controller's, over the world's objects. `catalog` has the refused offerings unavailable.
pub fn decide(world: &World, cluster: &Cluster, catalog: &Catalog, weights: &Weights, planner: &mut dyn Planner, batch: u32) -> Result<Decision, ProvisionError> {
    let batch_id = format!("sim-{batch}");
    let input = Input { cluster, objects: &world.objects, catalog, weights, max_instance_types: MAX_INSTANCE_TYPES, batch: &batch_id };
    provision::decide(&input, planner)
}

/// The CSINode of a registered node whose CSI drivers report attach limits (none without limits).
pub(crate) fn csinode(node: &str, limits: &stowage_core::domain::node::AttachLimits) -> Option<k8s_openapi::api::storage::v1::CSINode> {
    use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
    if limits.is_empty() {
        return None;
    }
    let drivers = limits
        .iter()
        .map(|(d, &n)| CSINodeDriver { name: d.clone(), node_id: node.to_string(), allocatable: Some(VolumeNodeResources { count: Some(i32::try_from(n).unwrap_or(i32::MAX)) }), topology_keys: None })
        .collect();
    Some(CSINode { metadata: ObjectMeta { name: Some(node.to_string()), ..Default::default() }, spec: CSINodeSpec { drivers } })
}

/// The Node a NodeClaim's instance registers: its labels plus Karpenter's registration labels, its
/// taints (startup taints are assumed gone by the time pods schedule), its capacity.
pub(crate) fn registered_node(claim: &NodeClaim, provider_id: &str) -> Node {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(keys::HOSTNAME.into(), name.clone());
    labels.insert("karpenter.sh/registered".into(), "true".into());
    labels.insert("karpenter.sh/initialized".into(), "true".into());
    let status = claim.status.clone().unwrap_or_default();
    Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { provider_id: Some(provider_id.to_string()), taints: claim.spec.taints.clone(), ..Default::default() }),
        status: Some(NodeStatus { capacity: status.capacity, allocatable: status.allocatable, ..Default::default() }),
    }
}
