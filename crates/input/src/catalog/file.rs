//! The catalog file format `stowage.dev/catalog/v1` (docs/formats.md §2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "stowage.dev/catalog/v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogFile {
    pub schema: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub provenance: Vec<String>,
    pub instance_types: Vec<TypeFile>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypeFile {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub capacity: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<OverheadFile>,
    pub offerings: Vec<OfferingFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsFile>,
    /// Volumes per CSI driver a node of the type may attach (what its CSINode will report). For a
    /// type with `aws` facts the EBS CSI driver's limit is derived and need not be given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attach_limits: BTreeMap<String, i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverheadFile {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_threshold: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfferingFile {
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    #[serde(default = "yes")]
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
    /// The capacity reservation of a `reserved` offering (required for that capacity type only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationFile>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReservationFile {
    pub id: String,
    /// `default` or `capacity-block`.
    #[serde(default = "default_reservation_type", rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub interruptible: bool,
    /// Instances that may still launch into it.
    pub count: u32,
}

fn default_reservation_type() -> String {
    "default".into()
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsFile {
    pub vcpu: i64,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: i64,
    pub arch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enis_default_card: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_per_eni: Option<i64>,
    #[serde(default)]
    pub branch_enis: i64,
    #[serde(default, rename = "localNvmeGB")]
    pub local_nvme_gb: i64,
}
