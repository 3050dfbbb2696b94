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
//! - `AMIDrift`: the NodeClaim's image (`status.imageID`) is not among its EC2NodeClass's resolved
//!   images (`status.amis`) while that list is known and non-empty.
//! - `SecurityGroupDrift`: the set of security groups attached to the instance (the cloud's
//!   description of it, [`crate::cloud::Instance::security_group_ids`]) differs from the set the
//!   EC2NodeClass resolves (`status.securityGroups`), while both are known and the latter non-empty.
//! - `SubnetDrift`: the instance's subnet ([`crate::cloud::Instance::subnet_id`]) is not among the
//!   EC2NodeClass's resolved subnets (`status.subnets`), while both are known and the latter
//!   non-empty.
//!
//! - `CapacityReservationDrift`: the instance runs in a capacity reservation
//!   ([`crate::cloud::Instance::capacity_reservation_id`], as the cloud describes it now: an instance
//!   whose reservation ended is no longer in one) that the EC2NodeClass no longer selects
//!   (`status.capacityReservations`, once the status is written).
//!
//! ```text
//! sg_drift(i, nc)     = ids(nc.status.securityGroups) ≠ ∅ ∧ set(i.securityGroups) ≠ ids(nc.status.securityGroups)
//! subnet_drift(i, nc) = ids(nc.status.subnets) ≠ ∅ ∧ i.subnet ∉ ids(nc.status.subnets)
//! cr_drift(i, nc)     = i.reservation ≠ ∅ ∧ nc.status ≠ ∅ ∧ i.reservation ∉ ids(nc.status.capacityReservations)
//! ```
//!
//! Karpenter's AWS provider also has `NodeClassDrift` (the EC2NodeClass's static hash) and
//! `PlacementGroupDrift`, and its core `InstanceTypeNotFound`; stowage does not judge those.
//!
//! **Several at once.** Karpenter's drift method takes one candidate per pass (drift commands have one
//! candidate), empty candidates first, then the longest drifted, and its disruption loop passes again
//! at once after a command started, the nodes being replaced counting against the budgets as
//! disrupting; so several drifted nodes of a pool are replaced at the same time, up to the pool's
//! `Drifted` budget. [`candidate`] is one such pass: the caller passes the NodeClaims that decisions
//! in progress replace ([`Round::disrupting`]), and calls it again after each start.

use std::collections::{BTreeMap, BTreeSet};

use stowage_core::domain::Cluster;
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
/// The disruption reason budgets name for drift.
pub const REASON: &str = "Drifted";

/// Why a NodeClaim drifted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    NodePool,
    Requirements { key: String, value: String },
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
        let Some(cause) = drifted(c, pool, nodeclass, instance) else { continue };
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

/// Whether `claim` drifted from `pool`, its `nodeclass` and, for security groups and subnets, its
/// `instance` as the cloud describes it (module doc); the first cause found, in Karpenter's order.
pub fn drifted(claim: &NodeClaim, pool: &NodePool, nodeclass: Option<&EC2NodeClass>, instance: Option<&Instance>) -> Option<Cause> {
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
        assert_eq!(drifted(&c, &p, Some(&nc), None), None);
        assert_eq!(drifted(&c, &pool(true, &["us-east-1a", "us-east-1b"]), Some(&nc), None), Some(Cause::NodePool), "a new taint");
        let narrowed = pool(false, &["us-east-1b"]);
        let c2 = claim(&narrowed, "us-east-1a", Some("ami-1"));
        assert_eq!(drifted(&c2, &narrowed, Some(&nc), None), Some(Cause::Requirements { key: "topology.kubernetes.io/zone".into(), value: "us-east-1a".into() }));
        let nc2 = nodeclass(&["ami-2"]);
        assert!(c.status.as_ref().and_then(|s| s.image_id.as_deref()) == Some("ami-1"), "{:?}", c.status);
        assert!(nc2.status.as_ref().and_then(|s| s.amis.as_ref()).is_some_and(|a| a.len() == 1), "{:?}", nc2.status);
        assert_eq!(drifted(&c, &p, Some(&nc2), None), Some(Cause::Image { image: "ami-1".into() }));
        assert_eq!(drifted(&c, &p, Some(&nodeclass(&[])), None), None, "no resolved images known: no AMI drift");
    }

    #[test]
    fn a_claim_with_another_hash_version_is_not_drifted_by_hash() {
        let p = pool(false, &["us-east-1a"]);
        let mut c = claim(&p, "us-east-1a", None);
        let mut annotate = |version: &str| {
            let a = c.metadata.annotations.as_mut().unwrap();
            a.insert(NODEPOOL_HASH.into(), "123".into());
            a.insert(NODEPOOL_HASH_VERSION.into(), version.into());
            drifted(&c, &p, None, None)
        };
        assert_eq!(annotate("v3"), None, "Karpenter's hash is not stowage's");
        assert_eq!(annotate(HASH_VERSION), Some(Cause::NodePool));
    }
}
