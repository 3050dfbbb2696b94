//! Drift: a NodeClaim that no longer matches what its NodePool and EC2NodeClass would launch now is
//! replaced, one node at a time per pool and within the pool's disruption budgets for reason
//! `Drifted`, through consolidation's replacement path ([`crate::consolidation::replace`]: the
//! displaced pods planned by the provisioning planners, the replacements launched and Initialized
//! before the drifted node drains).
//!
//! Causes, as Karpenter v1 names them:
//! - `NodePoolDrifted`: the NodeClaim's [`NODEPOOL_HASH`] differs from [`nodepool_hash`] of its pool
//!   now. The hash covers what a NodeClaim copies from the template and cannot change in place:
//!   template labels and annotations, taints, startup taints, `expireAfter`,
//!   `terminationGracePeriod`, `nodeClassRef` (requirements are judged separately, as in Karpenter).
//!   Only NodeClaims stamped with stowage's [`HASH_VERSION`] are judged: a NodeClaim Karpenter made
//!   carries Karpenter's hash of another version, and is not drifted by it (Karpenter does the same
//!   on a hash-version change).
//! - `RequirementsDrifted`: a label of the NodeClaim no longer satisfies the pool's requirement on
//!   that key (keys the NodeClaim has no label for are not judged, as Karpenter's compatibility).
//! - `AMIDrifted`: the NodeClaim's image (`status.imageID`) is not among its EC2NodeClass's resolved
//!   images (`status.amis`) while that list is known and non-empty.

use std::collections::BTreeMap;

use stowage_core::domain::Cluster;
use stowage_input::Objects;
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool, NodeSelectorRequirementWithMinValues};
use stowage_input::ids::stable_hash;

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
}

impl Cause {
    /// Karpenter's condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Cause::NodePool => "NodePoolDrifted",
            Cause::Requirements { .. } => "RequirementsDrifted",
            Cause::Image { .. } => "AMIDrifted",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::NodePool => write!(f, "NodePoolDrifted: the NodePool's template changed"),
            Cause::Requirements { key, value } => write!(f, "RequirementsDrifted: {key}={value} no longer meets the NodePool's requirements"),
            Cause::Image { image } => write!(f, "AMIDrifted: image {image} is no longer one the EC2NodeClass resolves"),
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

/// The first drifted NodeClaim (by name) that may go now, for the controller and the simulator alike:
/// its Node registered and initialized (not in flight), neither being deleted, no
/// `karpenter.sh/do-not-disrupt` on either, not in `skip`, and its pool's budgets for [`REASON`] at
/// `now` (Unix seconds, if the clock has a calendar) allow one more of the pool's nodes disrupting.
pub fn candidate(cluster: &Cluster, objects: &Objects, now: Option<i64>, skip: &dyn Fn(&str) -> bool) -> Option<Drifted> {
    let mut claims: Vec<&NodeClaim> = objects.nodeclaims.iter().map(|o| &o.obj).collect();
    claims.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for c in claims {
        let (Some(name), Some(node_name)) = (c.metadata.name.clone(), c.status.as_ref().and_then(|s| s.node_name.clone())) else { continue };
        let Some(node) = cluster.nodes.iter().find(|n| n.name == node_name) else { continue };
        let Some(pool_name) = node.nodepool.clone() else { continue };
        let node_obj = objects.nodes.iter().map(|o| &o.obj).find(|n| n.metadata.name.as_deref() == Some(node_name.as_str()));
        if skip(&name) || c.metadata.deletion_timestamp.is_some() || node.deleting || node.in_flight || annotated(&c.metadata) || node_obj.is_some_and(|n| annotated(&n.metadata)) {
            continue;
        }
        let Some(pool) = objects.nodepools.iter().map(|o| &o.obj).find(|p| p.metadata.name.as_deref() == Some(pool_name.as_str())) else { continue };
        // A static pool's nodes are Karpenter's static drift's, which stowage does not implement.
        if stowage_input::unsupported::is_static(pool) {
            continue;
        }
        let nodeclass = objects.nodeclasses.iter().map(|o| &o.obj).find(|n| n.metadata.name.as_deref() == Some(c.spec.node_class_ref.name.as_str()));
        let Some(cause) = drifted(c, pool, nodeclass) else { continue };
        let members: Vec<&stowage_core::domain::Node> = cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(pool_name.as_str())).collect();
        let deleting = members.iter().filter(|n| n.deleting).count();
        if allowed_disruptions(&reason_budgets(Some(pool), REASON, now), members.len()).saturating_sub(deleting) == 0 {
            continue;
        }
        let empty = workload_on(cluster, &node_name).next().is_none();
        return Some(Drifted { claim: name, node: node_name, cause, empty });
    }
    None
}

/// Whether `claim` drifted from `pool` and its `nodeclass` (module doc); the first cause found.
pub fn drifted(claim: &NodeClaim, pool: &NodePool, nodeclass: Option<&EC2NodeClass>) -> Option<Cause> {
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
    let image = claim.status.as_ref().and_then(|s| s.image_id.clone())?;
    let amis = nodeclass.and_then(|c| c.status.as_ref()).and_then(|s| s.amis.as_ref()).filter(|a| !a.is_empty())?;
    (!amis.iter().any(|a| a.id == image)).then_some(Cause::Image { image })
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
        assert_eq!(drifted(&c, &p, Some(&nc)), None);
        assert_eq!(drifted(&c, &pool(true, &["us-east-1a", "us-east-1b"]), Some(&nc)), Some(Cause::NodePool), "a new taint");
        let narrowed = pool(false, &["us-east-1b"]);
        let c2 = claim(&narrowed, "us-east-1a", Some("ami-1"));
        assert_eq!(drifted(&c2, &narrowed, Some(&nc)), Some(Cause::Requirements { key: "topology.kubernetes.io/zone".into(), value: "us-east-1a".into() }));
        let nc2 = nodeclass(&["ami-2"]);
        assert!(c.status.as_ref().and_then(|s| s.image_id.as_deref()) == Some("ami-1"), "{:?}", c.status);
        assert!(nc2.status.as_ref().and_then(|s| s.amis.as_ref()).is_some_and(|a| a.len() == 1), "{:?}", nc2.status);
        assert_eq!(drifted(&c, &p, Some(&nc2)), Some(Cause::Image { image: "ami-1".into() }));
        assert_eq!(drifted(&c, &p, Some(&nodeclass(&[]))), None, "no resolved images known: no AMI drift");
    }

    #[test]
    fn a_claim_with_another_hash_version_is_not_drifted_by_hash() {
        let p = pool(false, &["us-east-1a"]);
        let mut c = claim(&p, "us-east-1a", None);
        let mut annotate = |version: &str| {
            let a = c.metadata.annotations.as_mut().unwrap();
            a.insert(NODEPOOL_HASH.into(), "123".into());
            a.insert(NODEPOOL_HASH_VERSION.into(), version.into());
            drifted(&c, &p, None)
        };
        assert_eq!(annotate("v3"), None, "Karpenter's hash is not stowage's");
        assert_eq!(annotate(HASH_VERSION), Some(Cause::NodePool));
    }
}
