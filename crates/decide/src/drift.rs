//! Drift: a NodeClaim that no longer matches what its NodePool and EC2NodeClass would launch now is
//! replaced within the pool's disruption budgets for reason `Drifted`, through consolidation's
//! replacement path ([`crate::consolidation::replace`]: the displaced pods planned by the provisioning
//! planners, the replacements launched and Initialized before the drifted node drains).
//!
//! Causes, as Karpenter v1 (and its AWS provider) name them, judged in Karpenter's order, the first
//! found wins:
//! - `NodePoolDrifted`: the NodeClaim's [`NODEPOOL_HASH`] differs from [`nodepool_hash`] of its pool
//!   now. The hash covers what a NodeClaim copies from the template and cannot change in place:
//!   template labels and annotations, taints, startup taints, `expireAfter`,
//!   `terminationGracePeriod`, `nodeClassRef` (requirements are judged separately, as in Karpenter).
//!   Only NodeClaims stamped with stowage's [`HASH_VERSION`] are judged: a NodeClaim Karpenter made
//!   carries Karpenter's hash of another version, and is not drifted by it (Karpenter does the same
//!   on a hash-version change).
//! - `RequirementsDrifted`: a label of the NodeClaim no longer satisfies the pool's requirement on
//!   that key (keys the NodeClaim has no label for are not judged, as Karpenter's compatibility).
//! - `InstanceTypeNotFound` (Karpenter core): the NodeClaim's instance type is no longer in the
//!   catalog the cloud offers ([`Round::catalog`]), or none of its offerings is compatible with the
//!   NodeClaim's zone and capacity type ([`instance_type_not_found`]); judged, as Karpenter does, only
//!   from an hour after the NodeClaim's creation ([`INSTANCE_TYPE_GRACE_SECONDS`]).
//! - `NodeClassDrift`: the NodeClaim's [`EC2NODECLASS_HASH`] differs from [`nodeclass_hash`] of its
//!   EC2NodeClass now. The hash covers the spec fields an instance cannot change in place (userData,
//!   role, instanceProfile, tags, kubelet, blockDeviceMappings, instanceStorePolicy, metadataOptions,
//!   associatePublicIPAddress, detailedMonitoring, context, and the fields stowage reads but does not
//!   act on), and the resolved AMI family; it leaves out what Karpenter's `hash:"ignore"` tags leave
//!   out ([`NODECLASS_HASH_IGNORES`]: the selector terms, which drift through the resolved status
//!   below, `ipPrefixCount`, the literal `amiFamily`). Zero values count as unset and lists as sets,
//!   as Karpenter's hash options. Judged only when the NodeClaim's [`EC2NODECLASS_HASH_VERSION`] is
//!   stowage's [`HASH_VERSION`] (the EC2NodeClass's current hash is computed here, always of that
//!   version): Karpenter's NodeClaims are not judged by it. Unlike Karpenter's, the hash does not
//!   cover the cluster's CA bundle.
//! - `AMIDrift`: the NodeClaim's image (`status.imageID`) is not among its EC2NodeClass's resolved
//!   images (`status.amis`) while that list is known and non-empty.
//! - `SecurityGroupDrift`: the set of security groups attached to the instance (the cloud's
//!   description of it, [`crate::cloud::Instance::security_group_ids`]) differs from the set the
//!   EC2NodeClass resolves (`status.securityGroups`), while both are known and the latter non-empty.
//! - `SubnetDrift`: the instance's subnet ([`crate::cloud::Instance::subnet_id`]) is not among the
//!   EC2NodeClass's resolved subnets (`status.subnets`), while both are known and the latter
//!   non-empty.
//! - `CapacityReservationDrift`: the instance runs in a capacity reservation
//!   ([`crate::cloud::Instance::capacity_reservation_id`], as the cloud describes it now: an instance
//!   whose reservation ended is no longer in one) that the EC2NodeClass no longer selects
//!   (`status.capacityReservations`, once the status is written).
//!
//! ```text
//! type_gone(c, cat)   = age(c) > 1h ∧ type(c) labelled ∧ ¬∃ o ∈ offerings(cat, type(c)):
//!                         (zone(c) unset ∨ o.zone = zone(c)) ∧ o.capacityType ∈ ct(c)
//!                       ct(c) = {reserved, on-demand} if capacityType(c) = reserved, else {capacityType(c)} (any if unset)
//! nodeclass_drift(c)  = version(c) = HASH_VERSION ∧ hash(c) ≠ nodeclass_hash(nc)
//! sg_drift(i, nc)     = ids(nc.status.securityGroups) ≠ ∅ ∧ set(i.securityGroups) ≠ ids(nc.status.securityGroups)
//! subnet_drift(i, nc) = ids(nc.status.subnets) ≠ ∅ ∧ i.subnet ∉ ids(nc.status.subnets)
//! cr_drift(i, nc)     = i.reservation ≠ ∅ ∧ nc.status ≠ ∅ ∧ i.reservation ∉ ids(nc.status.capacityReservations)
//! ```
//!
//! Karpenter's AWS provider also has `PlacementGroupDrift`; stowage does not launch into placement
//! groups (`placementGroupSelector` is read, reported as not acted on, and only hashed), so it does
//! not judge that.
//!
//! **Several at once.** Karpenter's drift method takes one candidate per pass (drift commands have one
//! candidate), empty candidates first, then the longest drifted, and its disruption loop passes again
//! at once after a command started, the nodes being replaced counting against the budgets as
//! disrupting; so several drifted nodes of a pool are replaced at the same time, up to the pool's
//! `Drifted` budget. [`candidate`] is one such pass: the caller passes the NodeClaims that decisions
//! in progress replace ([`Round::disrupting`]), and calls it again after each start.

use std::collections::{BTreeMap, BTreeSet};

use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_input::Objects;
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool, NodeSelectorRequirementWithMinValues};
use stowage_input::ids::stable_hash;

use crate::cloud::Instance;
use crate::disruption::{allowed_disruptions, annotated, reason_budgets, workload_on};

/// The hash of the pool's template a NodeClaim was made from (Karpenter's annotation key).
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// Which hash [`NODEPOOL_HASH`] is (Karpenter's key, stowage's value).
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
pub const HASH_VERSION: &str = "stowage-v1";
/// The hash of the EC2NodeClass a NodeClaim was launched with (Karpenter's AWS provider's key; also
/// kept current on the EC2NodeClass itself by the controller's nodeclass reconcile).
pub const EC2NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// Which hash [`EC2NODECLASS_HASH`] is (Karpenter's key, stowage's [`HASH_VERSION`]).
pub const EC2NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// EC2NodeClass spec fields the hash leaves out, as Karpenter's `hash:"ignore"` tags do: the selector
/// terms (they drift through the resolved status: AMI, subnet, security-group and capacity-reservation
/// drift), `ipPrefixCount`, and the literal `amiFamily` (the resolved family is hashed instead).
pub const NODECLASS_HASH_IGNORES: [&str; 6] = ["subnetSelectorTerms", "securityGroupSelectorTerms", "capacityReservationSelectorTerms", "amiSelectorTerms", "ipPrefixCount", "amiFamily"];
/// The disruption reason budgets name for drift.
pub const REASON: &str = "Drifted";

/// Why a NodeClaim drifted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    NodePool,
    Requirements { key: String, value: String },
    InstanceType { instance_type: String },
    NodeClass,
    Image { image: String },
    SecurityGroups { attached: Vec<String> },
    Subnet { subnet: String },
    CapacityReservation { id: String },
}

impl Cause {
    /// Karpenter's condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Cause::NodePool => "NodePoolDrifted",
            Cause::Requirements { .. } => "RequirementsDrifted",
            Cause::InstanceType { .. } => "InstanceTypeNotFound",
            Cause::NodeClass => "NodeClassDrift",
            Cause::Image { .. } => "AMIDrift",
            Cause::SecurityGroups { .. } => "SecurityGroupDrift",
            Cause::Subnet { .. } => "SubnetDrift",
            Cause::CapacityReservation { .. } => "CapacityReservationDrift",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::NodePool => write!(f, "NodePoolDrifted: the NodePool's template changed"),
            Cause::Requirements { key, value } => write!(f, "RequirementsDrifted: {key}={value} no longer meets the NodePool's requirements"),
            Cause::InstanceType { instance_type } => write!(f, "InstanceTypeNotFound: instance type {instance_type} is no longer offered in the NodeClaim's zone and capacity type"),
            Cause::NodeClass => write!(f, "NodeClassDrift: the EC2NodeClass changed since launch"),
            Cause::Image { image } => write!(f, "AMIDrift: image {image} is no longer one the EC2NodeClass resolves"),
            Cause::SecurityGroups { attached } => write!(f, "SecurityGroupDrift: security groups [{}] are not the EC2NodeClass's", attached.join(", ")),
            Cause::Subnet { subnet } => write!(f, "SubnetDrift: subnet {subnet} is no longer one the EC2NodeClass resolves"),
            Cause::CapacityReservation { id } => write!(f, "CapacityReservationDrift: capacity reservation {id} is no longer one the EC2NodeClass selects"),
        }
    }
}

/// The hash of what a NodeClaim copies from `pool`'s template (module doc).
pub fn nodepool_hash(pool: &NodePool) -> String {
    let t = &pool.spec.template;
    let hashed = serde_json::json!({
        "labels": t.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default(),
        "annotations": t.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default(),
        "taints": t.spec.taints.clone().unwrap_or_default(),
        "startupTaints": t.spec.startup_taints.clone().unwrap_or_default(),
        "expireAfter": t.spec.expire_after.clone().unwrap_or_else(|| "720h".into()),
        "terminationGracePeriod": t.spec.termination_grace_period,
        "nodeClassRef": t.spec.node_class_ref,
    });
    stable_hash(&[hashed.to_string().as_str()]).to_string()
}

/// The annotations a NodeClaim made from `pool` carries.
pub fn stamp(pool: &NodePool, annotations: &mut BTreeMap<String, String>) {
    annotations.insert(NODEPOOL_HASH.into(), nodepool_hash(pool));
    annotations.insert(NODEPOOL_HASH_VERSION.into(), HASH_VERSION.into());
}

/// The hash of what an instance launched from `nc` cannot change in place (module doc): its spec
/// without [`NODECLASS_HASH_IGNORES`], with the resolved AMI family; a zero value (null, false, 0,
/// "", [] or {}) is the same as the field left out, and lists are sets (order does not count).
pub fn nodeclass_hash(nc: &EC2NodeClass) -> String {
    let mut spec = serde_json::to_value(&nc.spec).unwrap_or_default();
    if let Some(fields) = spec.as_object_mut() {
        for k in NODECLASS_HASH_IGNORES {
            fields.remove(k);
        }
        fields.insert("resolvedAmiFamily".into(), resolved_ami_family(nc).into());
    }
    stable_hash(&[canonical(&spec).unwrap_or_default().as_str()]).to_string()
}

/// The AMI family user data is written for, spelled lower case: `spec.amiFamily`, else the family of
/// the first alias (`al2023@latest` → `al2023`), else `custom` (Karpenter's `AMIFamily()`): setting
/// `amiFamily: AL2023` beside the alias `al2023@latest` changes nothing.
fn resolved_ami_family(nc: &EC2NodeClass) -> String {
    let alias = nc.spec.ami_selector_terms.iter().find_map(|t| t.alias.as_deref()).map(|a| a.split('@').next().unwrap_or(a));
    nc.spec.ami_family.as_deref().or(alias).unwrap_or("custom").to_ascii_lowercase()
}

/// `v` as one string with object keys sorted, zero values left out and list items sorted; None for a
/// zero value.
fn canonical(v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(false) => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Bool(true) | Value::Number(_) | Value::String(_) => Some(v.to_string()),
        Value::Array(items) => {
            let mut items: Vec<String> = items.iter().map(|i| canonical(i).unwrap_or_else(|| "null".into())).collect();
            items.sort();
            (!items.is_empty()).then(|| format!("[{}]", items.join(",")))
        }
        Value::Object(fields) => {
            let fields: BTreeMap<&str, String> = fields.iter().filter_map(|(k, v)| Some((k.as_str(), canonical(v)?))).collect();
            (!fields.is_empty()).then(|| format!("{{{}}}", fields.iter().map(|(k, v)| format!("{}:{v}", serde_json::Value::from(*k))).collect::<Vec<_>>().join(",")))
        }
    }
}

/// The annotations a NodeClaim launched with `nc` carries.
pub fn stamp_nodeclass(nc: &EC2NodeClass, annotations: &mut BTreeMap<String, String>) {
    annotations.insert(EC2NODECLASS_HASH.into(), nodeclass_hash(nc));
    annotations.insert(EC2NODECLASS_HASH_VERSION.into(), HASH_VERSION.into());
}

fn satisfies(r: &NodeSelectorRequirementWithMinValues, value: &str) -> bool {
    let num = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => r.values.iter().any(|v| v == value),
        "NotIn" => !r.values.iter().any(|v| v == value),
        "Exists" => true,
        "DoesNotExist" => false,
        "Gt" => num(value).zip(r.values.first().and_then(|v| num(v))).is_some_and(|(a, b)| a > b),
        "Lt" => num(value).zip(r.values.first().and_then(|v| num(v))).is_some_and(|(a, b)| a < b),
        "Gte" => num(value).zip(r.values.first().and_then(|v| num(v))).is_some_and(|(a, b)| a >= b),
        "Lte" => num(value).zip(r.values.first().and_then(|v| num(v))).is_some_and(|(a, b)| a <= b),
        // An operator the NodePool reader refuses never gets here; do not drift on it.
        _ => true,
    }
}

/// How long after its creation a NodeClaim is first judged for `InstanceTypeNotFound` (Karpenter's
/// hour: the catalog is the cloud's, not the user's, and may blink).
pub const INSTANCE_TYPE_GRACE_SECONDS: i64 = 3600;

/// `InstanceTypeNotFound` (module doc): the NodeClaim's instance type is not in `catalog`, or none of
/// its offerings is compatible with the NodeClaim's zone and capacity type (availability aside; a
/// `reserved` NodeClaim also matches on-demand offerings, its reservation not compared). A NodeClaim
/// without an instance-type label is not judged.
pub fn instance_type_not_found(claim: &NodeClaim, catalog: &Catalog) -> Option<Cause> {
    use stowage_core::domain::catalog::RESERVED;
    use stowage_core::domain::labels::keys;
    let labels = claim.metadata.labels.as_ref()?;
    let name = labels.get(keys::INSTANCE_TYPE)?;
    let capacity = labels.get(keys::CAPACITY_TYPE).map(String::as_str);
    let zone = labels.get(keys::ZONE).map(String::as_str);
    let capacity_fits = |ct: &str| match capacity {
        None => true,
        Some(RESERVED) => ct == RESERVED || ct == "on-demand",
        Some(c) => ct == c,
    };
    let offered = catalog.get(name).is_some_and(|t| t.offerings.iter().any(|o| zone.is_none_or(|z| z == o.zone) && capacity_fits(&o.capacity_type)));
    (!offered).then(|| Cause::InstanceType { instance_type: name.clone() })
}

/// A drifted NodeClaim chosen for replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drifted {
    pub claim: String,
    /// Its Node (registered).
    pub node: String,
    pub cause: Cause,
    /// No workload pod on its Node: it is deleted, nothing replaces it.
    pub empty: bool,
}

/// What one drift pass reads besides the cluster.
pub struct Round<'a> {
    /// The cloud's description of the instances (`CloudProvider::list`), matched to NodeClaims by
    /// provider id: the facts of security-group and subnet drift. An instance not listed (or a
    /// fact it lacks) is not judged for them.
    pub instances: &'a [Instance],
    /// Now in Unix seconds, if the clock has a calendar (budget schedules).
    pub now: Option<i64>,
    /// NodeClaims that decisions in progress replace: not chosen again, and counted against their
    /// pool's budgets as disrupting (Karpenter marks a command's candidates for deletion when it starts).
    pub disrupting: &'a BTreeSet<String>,
    /// NodeClaims not to choose now (a recent replacement found no place for their pods).
    pub skip: &'a dyn Fn(&str) -> bool,
    /// The instance types the cloud offers now (offerings refused for a while included): the facts of
    /// `InstanceTypeNotFound`, judged only with this and [`Round::now`] known.
    pub catalog: Option<&'a Catalog>,
}

/// One drift pass, for the controller and the simulator alike: the drifted NodeClaim to replace now,
/// if any. Eligible: its Node registered and initialized (not in flight), neither being deleted nor
/// replaced by a decision in progress, no `karpenter.sh/do-not-disrupt` on either, not skipped, and
/// its pool's budgets for [`REASON`] allow one more of the pool's nodes disrupting. Order as
/// Karpenter's: empty ones first, then the longest drifted (the `Drifted` condition's transition
/// time, set when a NodeClaim was chosen before), then by name.
///
/// ```text
/// total(pool)      = the pool's registered Nodes (Karpenter: managed, initialized)
/// disrupting(pool) = those being deleted, not Ready, or replaced by a decision in progress
/// room(pool)       = allowed_disruptions(Drifted budgets at now, total) − disrupting
/// ```
pub fn candidate(cluster: &Cluster, objects: &Objects, round: &Round) -> Option<Drifted> {
    let node_objs: BTreeMap<&str, &k8s_openapi::api::core::v1::Node> = objects.nodes.iter().filter_map(|o| Some((o.obj.metadata.name.as_deref()?, &o.obj))).collect();
    let claim_of_node: BTreeMap<&str, &str> = objects.nodeclaims.iter().filter_map(|o| Some((o.obj.status.as_ref()?.node_name.as_deref()?, o.obj.metadata.name.as_deref()?))).collect();
    let mut found: Vec<(bool, Option<String>, Drifted)> = Vec::new();
    for c in objects.nodeclaims.iter().map(|o| &o.obj) {
        let (Some(name), Some(node_name)) = (c.metadata.name.clone(), c.status.as_ref().and_then(|s| s.node_name.clone())) else { continue };
        let Some(node) = cluster.nodes.iter().find(|n| n.name == node_name) else { continue };
        let Some(pool_name) = node.nodepool.clone() else { continue };
        let node_obj = node_objs.get(node_name.as_str());
        if (round.skip)(&name)
            || round.disrupting.contains(&name)
            || c.metadata.deletion_timestamp.is_some()
            || node.deleting
            || node.in_flight
            || annotated(&c.metadata)
            || node_obj.is_some_and(|n| annotated(&n.metadata))
        {
            continue;
        }
        let Some(pool) = objects.nodepools.iter().map(|o| &o.obj).find(|p| p.metadata.name.as_deref() == Some(pool_name.as_str())) else { continue };
        // A static pool's nodes are Karpenter's static drift's, which stowage does not implement.
        if stowage_input::unsupported::is_static(pool) {
            continue;
        }
        let nodeclass = objects.nodeclasses.iter().map(|o| &o.obj).find(|n| n.metadata.name.as_deref() == Some(c.spec.node_class_ref.name.as_str()));
        let pid = c.status.as_ref().and_then(|s| s.provider_id.as_deref()).or(node.provider_id.as_deref());
        let instance = pid.and_then(|pid| round.instances.iter().find(|i| i.provider_id == pid));
        // Karpenter judges a NodeClaim's instance type only an hour after its creation.
        let created = c.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second());
        let offered = round.catalog.filter(|_| round.now.zip(created).is_some_and(|(now, created)| now - created > INSTANCE_TYPE_GRACE_SECONDS));
        let Some(cause) = drifted(c, pool, nodeclass, instance, offered) else { continue };
        let members: Vec<&stowage_core::domain::Node> = cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(pool_name.as_str()) && node_objs.contains_key(n.name.as_str())).collect();
        let disrupting = members.iter().filter(|n| n.deleting || n.in_flight || claim_of_node.get(n.name.as_str()).is_some_and(|c| round.disrupting.contains(*c))).count();
        if allowed_disruptions(&reason_budgets(Some(pool), REASON, round.now), members.len()).saturating_sub(disrupting) == 0 {
            continue;
        }
        let empty = workload_on(cluster, &node_name).next().is_none();
        let since = c.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|x| x.type_ == CONDITION && x.status == "True")).and_then(|x| x.last_transition_time.clone());
        found.push((!empty, since, Drifted { claim: name, node: node_name, cause, empty }));
    }
    // Empty first; then the longest drifted (RFC 3339 times order as strings; never marked: last).
    found.sort_by(|a, b| (a.0, a.1.is_none(), &a.1, &a.2.claim).cmp(&(b.0, b.1.is_none(), &b.1, &b.2.claim)));
    found.into_iter().next().map(|(_, _, d)| d)
}

/// Karpenter's NodeClaim condition type for drift.
pub const CONDITION: &str = "Drifted";

/// Whether `claim` drifted from `pool`, the instance types `offered` (None: not judged), its
/// `nodeclass` and, for security groups, subnets and reservations, its `instance` as the cloud
/// describes it (module doc); the first cause found, in Karpenter's order.
pub fn drifted(claim: &NodeClaim, pool: &NodePool, nodeclass: Option<&EC2NodeClass>, instance: Option<&Instance>, offered: Option<&Catalog>) -> Option<Cause> {
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    if annotations.get(NODEPOOL_HASH_VERSION).map(String::as_str) == Some(HASH_VERSION) && annotations.get(NODEPOOL_HASH).is_some_and(|h| *h != nodepool_hash(pool)) {
        return Some(Cause::NodePool);
    }
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    for r in &pool.spec.template.spec.requirements {
        if let Some(value) = labels.get(&r.key)
            && !satisfies(r, value)
        {
            return Some(Cause::Requirements { key: r.key.clone(), value: value.clone() });
        }
    }
    if let Some(cause) = offered.and_then(|catalog| instance_type_not_found(claim, catalog)) {
        return Some(cause);
    }
    if let Some(nc) = nodeclass
        && annotations.get(EC2NODECLASS_HASH_VERSION).map(String::as_str) == Some(HASH_VERSION)
        && annotations.get(EC2NODECLASS_HASH).is_some_and(|h| *h != nodeclass_hash(nc))
    {
        return Some(Cause::NodeClass);
    }
    let status = nodeclass.and_then(|c| c.status.as_ref());
    if let Some(image) = claim.status.as_ref().and_then(|s| s.image_id.clone())
        && let Some(amis) = status.and_then(|s| s.amis.as_ref()).filter(|a| !a.is_empty())
        && !amis.iter().any(|a| a.id == image)
    {
        return Some(Cause::Image { image });
    }
    let instance = instance?;
    let resolved: BTreeSet<&str> = status.and_then(|s| s.security_groups.as_ref()).into_iter().flatten().map(|g| g.id.as_str()).collect();
    if let Some(attached) = instance.security_group_ids.as_ref()
        && !resolved.is_empty()
        && attached.iter().map(String::as_str).collect::<BTreeSet<&str>>() != resolved
    {
        let mut attached = attached.clone();
        attached.sort();
        return Some(Cause::SecurityGroups { attached });
    }
    let subnets: BTreeSet<&str> = status.and_then(|s| s.subnets.as_ref()).into_iter().flatten().map(|s| s.id.as_str()).collect();
    if let Some(subnet) = instance.subnet_id.as_ref()
        && !subnets.is_empty()
        && !subnets.contains(subnet.as_str())
    {
        return Some(Cause::Subnet { subnet: subnet.clone() });
    }
    if let (Some(id), Some(status)) = (instance.capacity_reservation_id.as_ref(), status)
        && !status.capacity_reservations.iter().flatten().any(|r| &r.id == id)
    {
        return Some(Cause::CapacityReservation { id: id.clone() });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(taint: bool, zones: &[&str]) -> NodePool {
        let taints = if taint { json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]) } else { json!([]) };
        serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "taints": taints,
                "requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}]}}}}))
        .unwrap()
    }

    fn claim(p: &NodePool, zone: &str, image: Option<&str>) -> NodeClaim {
        let mut a = BTreeMap::new();
        stamp(p, &mut a);
        serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c", "annotations": a, "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"imageID": image}}))
        .unwrap()
    }

    fn nodeclass(amis: &[&str]) -> EC2NodeClass {
        let amis: Vec<_> = amis.iter().map(|id| json!({"id": id, "requirements": []})).collect();
        serde_json::from_value(json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}], "role": "r"},
            "status": {"amis": amis}}))
        .unwrap()
    }

    #[test]
    fn each_cause_is_found_and_an_unchanged_claim_is_not_drifted() {
        let p = pool(false, &["us-east-1a", "us-east-1b"]);
        let c = claim(&p, "us-east-1a", Some("ami-1"));
        let nc = nodeclass(&["ami-1"]);
        assert_eq!(drifted(&c, &p, Some(&nc), None, None), None);
        assert_eq!(drifted(&c, &pool(true, &["us-east-1a", "us-east-1b"]), Some(&nc), None, None), Some(Cause::NodePool), "a new taint");
        let narrowed = pool(false, &["us-east-1b"]);
        let c2 = claim(&narrowed, "us-east-1a", Some("ami-1"));
        assert_eq!(drifted(&c2, &narrowed, Some(&nc), None, None), Some(Cause::Requirements { key: "topology.kubernetes.io/zone".into(), value: "us-east-1a".into() }));
        let nc2 = nodeclass(&["ami-2"]);
        assert!(c.status.as_ref().and_then(|s| s.image_id.as_deref()) == Some("ami-1"), "{:?}", c.status);
        assert!(nc2.status.as_ref().and_then(|s| s.amis.as_ref()).is_some_and(|a| a.len() == 1), "{:?}", nc2.status);
        assert_eq!(drifted(&c, &p, Some(&nc2), None, None), Some(Cause::Image { image: "ami-1".into() }));
        assert_eq!(drifted(&c, &p, Some(&nodeclass(&[])), None, None), None, "no resolved images known: no AMI drift");
    }

    #[test]
    fn a_claim_with_another_hash_version_is_not_drifted_by_hash() {
        let p = pool(false, &["us-east-1a"]);
        let mut c = claim(&p, "us-east-1a", None);
        let mut annotate = |version: &str| {
            let a = c.metadata.annotations.as_mut().unwrap();
            a.insert(NODEPOOL_HASH.into(), "123".into());
            a.insert(NODEPOOL_HASH_VERSION.into(), version.into());
            drifted(&c, &p, None, None, None)
        };
        assert_eq!(annotate("v3"), None, "Karpenter's hash is not stowage's");
        assert_eq!(annotate(HASH_VERSION), Some(Cause::NodePool));
    }
}
