//! Karpenter NodePools and EC2NodeClasses, reduced to what planning needs.

use super::labels::{Labels, NodeRequirement};
use super::resources::Resources;
use super::taints::Taint;

#[derive(Clone, Debug, PartialEq)]
pub struct PoolRequirement {
    pub req: NodeRequirement,
    /// `minValues`: how many distinct values of this key a new node's launch candidates must keep
    /// (Karpenter; `semantics::min_values`, under the weights' `minValuesPolicy`).
    pub min_values: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenEmptyOrUnderutilized,
    /// Karpenter v1.14: underutilised nodes are consolidated only when the move's share of the pool's
    /// saving outweighs its share of the pool's disruption (`stowage_decide::balanced`).
    Balanced,
}

impl ConsolidationPolicy {
    /// Whether underutilised (non-empty) nodes of the pool are consolidated at all.
    pub fn consolidates_underutilized(&self) -> bool {
        matches!(self, ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodePool {
    pub name: String,
    /// Higher first; ties by name descending, as Karpenter orders them.
    pub weight: i32,
    pub requirements: Vec<PoolRequirement>,
    /// `spec.template.metadata.labels`.
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// `spec.limits`: resource totals (capacity, as Karpenter counts) over the pool's nodes; `nodes` is a
    /// node count. `None` = unlimited.
    pub limits: Option<PoolLimits>,
    pub node_class: String,
    pub consolidation: ConsolidationPolicy,
    /// Seconds; `None` = Never.
    pub consolidate_after: Option<u64>,
    /// Seconds; `None` = Never.
    pub expire_after: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct PoolLimits {
    pub resources: Resources,
    /// Names present in `spec.limits` (a limit of 0 is a real limit).
    pub limited: Vec<String>,
    pub nodes: Option<i64>,
}

/// Kubelet settings of an EC2NodeClass that change allocatable.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct KubeletSettings {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: Option<Resources>,
    pub system_reserved: Option<Resources>,
    /// `evictionHard` entries for memory.available / nodefs.available, as absolute amounts or percents.
    pub eviction_hard: Vec<(String, EvictionValue)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EvictionValue {
    Absolute(i64),
    Percent(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeClass {
    pub name: String,
    /// AL2023 (default with an `al2023@...` alias), AL2, Bottlerocket, Windows2022, Custom, ...
    pub ami_family: String,
    pub kubelet: KubeletSettings,
    /// Root volume size in bytes when block device mappings set one.
    pub root_volume: Option<i64>,
    /// EBS volumes a node boots with besides its root volume (the other blockDeviceMappings; the
    /// AMI family's default mappings when none are given): each takes one of its EBS attachments.
    pub extra_ebs_volumes: i64,
    /// The capacity reservations its `capacityReservationSelectorTerms` select (ids, from
    /// `status.capacityReservations`): only these of the catalog's reserved offerings are its own.
    pub capacity_reservations: Vec<String>,
}
