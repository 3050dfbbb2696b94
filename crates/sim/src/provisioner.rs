//! Karpenter's provisioning loop, the parts that are not planning: the NodeClaim and Node objects a plan
//! turns into. The batcher and the cache of offerings the cloud refused are the controller's own
//! (`stowage_decide::{batch, offerings}`), as described here.
//!
//! Batching (karpenter.md §1): a pod kube-scheduler cannot place triggers the batcher. The window
//! opens at the first trigger and closes when no *new* pod has triggered for `batchIdle` (1 s) or
//! `batchMax` (10 s) after it opened; a pod triggering again does not extend it. The batch is every
//! pending pod at closing time, planned together with the NodeClaims still in flight.
//!
//! A launch refused with insufficient capacity marks its offering unavailable for
//! `unavailableOfferingTTL` (3 minutes, Karpenter's cache); the planner sees the catalog with those
//! offerings marked `available: false`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use stowage_core::domain::labels::keys;
use stowage_core::domain::resources::Resources;
use stowage_core::plan::NewNode;
use stowage_input::api::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
use stowage_input::quantity;

pub fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter().map(|(n, v)| (n.to_string(), Quantity(quantity::format(n, v)))).collect()
}

fn plan_taints(n: &NewNode) -> Vec<Taint> {
    n.taints.iter().map(|t| Taint { key: t.key.clone(), value: (!t.value.is_empty()).then(|| t.value.clone()), effect: t.effect.clone(), time_added: None }).collect()
}

/// The NodeClaim for a plan's new node: the plan's labels (hostname = the claim's name), the
/// NodePool's taints, and the instance type's capacity already in its status, so that later batches
/// count it as capacity in flight (`input::karpenter::in_flight`).
pub(crate) fn node_claim(name: &str, n: &NewNode, node_class: stowage_input::api::NodeClassReference, capacity: &Resources, allocatable: &Resources) -> NodeClaim {
    let mut labels = n.labels.clone();
    labels.insert(keys::HOSTNAME.into(), name.to_string());
    let mut c = NodeClaim::new(
        name,
        NodeClaimSpec {
            taints: Some(plan_taints(n)).filter(|t| !t.is_empty()),
            startup_taints: None,
            requirements: Vec::new(),
            resources: None,
            node_class_ref: node_class,
            expire_after: None,
            termination_grace_period: None,
        },
    );
    c.metadata.labels = Some(labels);
    c.status = Some(NodeClaimStatus { capacity: Some(quantities(capacity)), allocatable: Some(quantities(allocatable)), ..Default::default() });
    c
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
