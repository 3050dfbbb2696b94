//! `karpenter.k8s.aws/v1` EC2NodeClass.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(group = "karpenter.k8s.aws", version = "v1", kind = "EC2NodeClass", plural = "ec2nodeclasses", shortname = "ec2nc")]
#[kube(status = "EC2NodeClassStatus")]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    #[serde(default)]
    pub subnet_selector_terms: Vec<SelectorTerm>,
    #[serde(default)]
    pub security_group_selector_terms: Vec<SelectorTerm>,
    #[serde(default)]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "associatePublicIPAddress")]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Capacity reservations whose instances nodes may launch into (Karpenter's `reserved` capacity type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_selector_terms: Option<Vec<CapacityReservationSelectorTerm>>,
    // Karpenter's fields stowage keeps but does not act on (`crate::unsupported` reports them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::opaque_object")]
    pub placement_group_selector: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::opaque_objects")]
    pub network_interfaces: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::opaque_object")]
    pub connection_tracking: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::opaque_object")]
    pub cpu_options: Option<serde_json::Value>,
}

/// A subnet or security group selector term: tags ANDed, or an id (or, for security groups, a name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One term of `capacityReservationSelectorTerms`: a reservation by id, or every active reservation with
/// these tags (`*`: any value), owner and instance match criteria. Terms are ORed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "ownerID")]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

impl CapacityReservationSelectorTerm {
    /// What Karpenter v1.14's CRD refuses in the term at `at` (e.g. `spec.capacityReservationSelectorTerms[0]`).
    pub fn validate(&self, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        let tags = self.tags.as_ref().is_some_and(|t| !t.is_empty());
        match (&self.id, tags, self.instance_match_criteria.is_some()) {
            (None, false, false) => out.push(format!("{at}: expected at least one of id, tags or instanceMatchCriteria")),
            (Some(_), true, _) | (Some(_), _, true) => out.push(format!("{at}: id is mutually exclusive with tags and instanceMatchCriteria")),
            _ => {}
        }
        if self.id.is_some() && self.owner_id.is_some() {
            out.push(format!("{at}: ownerID may only be set with tags or instanceMatchCriteria"));
        }
        if let Some(id) = &self.id
            && !(id.strip_prefix("cr-").is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())))
        {
            out.push(format!("{at}.id: {id:?} is not a capacity reservation id (cr-[0-9a-z]+)"));
        }
        if let Some(o) = &self.owner_id
            && !(o.len() == 12 && o.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(format!("{at}.ownerID: {o:?} is not a 12-digit AWS account id"));
        }
        if let Some(m) = &self.instance_match_criteria
            && m != "open"
            && m != "targeted"
        {
            out.push(format!("{at}.instanceMatchCriteria: {m:?} is not one of open, targeted"));
        }
        for (k, v) in self.tags.iter().flatten() {
            if k.is_empty() || v.is_empty() {
                out.push(format!("{at}.tags: empty tag keys or values aren't supported"));
            }
        }
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `al2023@latest`, `bottlerocket@v1.20.0`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Signal → duration (`1m30s`); every `evictionSoft` signal needs one (kubelet refuses to start otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
}

/// The eviction signals Karpenter's CRD accepts in `evictionHard` / `evictionSoft` /
/// `evictionSoftGracePeriod`.
pub const EVICTION_SIGNALS: [&str; 6] = ["memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"];
/// The resources Karpenter's CRD accepts in `kubeReserved` / `systemReserved`.
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// Whether `s` is a Go duration (`300ms`, `1m30s`, `2h`), the format kubelet's `metav1.Duration` reads.
pub fn is_go_duration(s: &str) -> bool {
    let mut rest = s.strip_prefix(['+', '-']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (n, after) = rest.split_at(num);
        if n.is_empty() || n == "." || n.matches('.').count() > 1 {
            return false;
        }
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"].iter().filter(|u| after.starts_with(*u)).max_by_key(|u| u.len()) else { return false };
        rest = &after[unit.len()..];
    }
    true
}

impl KubeletConfiguration {
    /// What Karpenter v1's CRD refuses in `spec.kubelet` (its OpenAPI bounds and CEL rules), one message
    /// per problem, each naming the field. Empty: valid.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (field, v) in [("maxPods", self.max_pods), ("podsPerCore", self.pods_per_core)] {
            if v.is_some_and(|v| v < 0) {
                out.push(format!("spec.kubelet.{field} must be at least 0"));
            }
        }
        for (field, v) in [("imageGCHighThresholdPercent", self.image_gc_high_threshold_percent), ("imageGCLowThresholdPercent", self.image_gc_low_threshold_percent)] {
            if v.is_some_and(|v| !(0..=100).contains(&v)) {
                out.push(format!("spec.kubelet.{field} must be between 0 and 100"));
            }
        }
        if let (Some(h), Some(l)) = (self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent)
            && h <= l
        {
            out.push(format!("spec.kubelet: imageGCHighThresholdPercent ({h}) must be greater than imageGCLowThresholdPercent ({l})"));
        }
        for (field, m) in [("kubeReserved", &self.kube_reserved), ("systemReserved", &self.system_reserved)] {
            for (k, v) in m.iter().flatten() {
                if !RESERVED_RESOURCES.contains(&k.as_str()) {
                    out.push(format!("spec.kubelet.{field}: {k:?} is not one of {}", RESERVED_RESOURCES.join(", ")));
                }
                if crate::quantity::milli(v).is_err() {
                    out.push(format!("spec.kubelet.{field}.{k}: {v:?} is not a quantity"));
                }
            }
        }
        for (field, m) in [("evictionHard", &self.eviction_hard), ("evictionSoft", &self.eviction_soft)] {
            for (k, v) in m.iter().flatten() {
                if !EVICTION_SIGNALS.contains(&k.as_str()) {
                    out.push(format!("spec.kubelet.{field}: {k:?} is not one of {}", EVICTION_SIGNALS.join(", ")));
                }
                let pct_ok = v.strip_suffix('%').is_some_and(|p| p.parse::<f64>().is_ok_and(|p| (0.0..=100.0).contains(&p)));
                if !pct_ok && crate::quantity::milli(v).is_err() {
                    out.push(format!("spec.kubelet.{field}.{k}: {v:?} is neither a percentage (0-100%) nor a quantity"));
                }
            }
        }
        let soft = self.eviction_soft.clone().unwrap_or_default();
        let grace = self.eviction_soft_grace_period.clone().unwrap_or_default();
        for k in soft.keys().filter(|k| !grace.contains_key(*k)) {
            out.push(format!("spec.kubelet.evictionSoft.{k} has no evictionSoftGracePeriod.{k} (kubelet refuses a soft eviction threshold without a grace period)"));
        }
        for (k, v) in &grace {
            if !soft.contains_key(k) {
                out.push(format!("spec.kubelet.evictionSoftGracePeriod.{k} has no matching evictionSoft.{k}"));
            }
            if !is_go_duration(v) {
                out.push(format!("spec.kubelet.evictionSoftGracePeriod.{k}: {v:?} is not a duration (e.g. 1m30s)"));
            }
        }
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "kmsKeyID")]
    pub kms_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "snapshotID")]
    pub snapshot_id: Option<String>,
    /// MiB/s (Karpenter v1.14); kept, not acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<SubnetStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroupStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<AmiStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservations: Option<Vec<CapacityReservationStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// A capacity reservation the NodeClass's selector terms select, as Karpenter writes it into
/// `status.capacityReservations`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    pub availability_zone: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    pub id: String,
    pub instance_match_criteria: String,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    #[serde(default)]
    pub interruptible: bool,
    /// `active`, or `expiring` (a capacity block within 40 minutes of its end).
    #[serde(default = "default_reservation_state")]
    pub state: String,
}

fn default_reservation_type() -> String {
    "default".into()
}

fn default_reservation_state() -> String {
    "active".into()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    pub id: String,
    pub zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "zoneID")]
    pub zone_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub requirements: Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement>,
}
