//! Karpenter's v1 API as typed Rust structs: NodePool and NodeClaim (`karpenter.sh/v1`) and
//! EC2NodeClass (`karpenter.k8s.aws/v1`). Their CRDs are generated from these types
//! (`stowage crds`), so the test control plane and the controller speak exactly what stowage parses.
//!
//! Field names, defaults and enums follow Karpenter v1.14 (`pkg/apis/v1` in kubernetes-sigs/karpenter and
//! aws/karpenter-provider-aws). Fields stowage does not interpret are still typed so that round trips
//! through the API server keep them, and `crate::unsupported` lists the ones that are set.

pub mod ec2nodeclass;
pub mod nodeclaim;
pub mod nodepool;

pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodepool::{NodePool, NodePoolSpec};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A requirement with Karpenter's `minValues` (`NodeSelectorRequirementWithMinValues`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

/// Reference to the cloud-specific node class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// A status condition (`metav1.Condition` shape, as Karpenter's `status.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The schema of a Karpenter object field stowage keeps but does not act on (reported by
/// `crate::unsupported`): any object, kept by the API server as it is.
pub(crate) fn opaque_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// [`opaque_object`] for a list of objects.
pub(crate) fn opaque_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

/// The CRDs of the three kinds, generated from these types.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![NodePool::crd(), NodeClaim::crd(), EC2NodeClass::crd()]
}
