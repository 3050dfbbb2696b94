//! What a Karpenter NodePool allows: the labels of a node it launches and whether a node satisfies its
//! requirements (`karpenter.sh/v1` NodePool `spec.template`).
//!
//! ```text
//! labels(node) = instanceType.labels ∪ {zone, capacity-type, region} ∪ reservation(offering) ∪ template.labels
//!              ∪ {karpenter.sh/nodepool: pool, karpenter.k8s.aws/ec2nodeclass: class} ∪ {k: chosen value, for each key the pool leaves open}
//! allowed(node) = ∀ requirement r of the pool: r(labels(node))       (node-selector semantics)
//! ```
//!
//! A key is *open* when the pool's requirements name it but neither the instance type, the offering
//! nor the template labels give it a value (for example `capacity-spread In [1, 2]`). Its candidate
//! values are the `In` values of the requirements on it, or, for `Exists`/`NotIn`/`Gt`/`Lt`, the values
//! pods ask for. Karpenter labels a node with one value of each such key; stowage chooses which.

use crate::domain::catalog::{InstanceType, Offering};
use crate::domain::labels::{Labels, NodeOp, keys};
use crate::domain::nodepool::NodePool;

use super::node_affinity;

/// Label keys set by the offering or the node, never by the instance type or the pool template.
pub(crate) fn is_offering_or_node_key(key: &str) -> bool {
    matches!(
        key,
        keys::ZONE
            | keys::CAPACITY_TYPE
            | keys::REGION
            | keys::HOSTNAME
            | keys::NODEPOOL
            | keys::NODECLASS
            | "topology.k8s.aws/zone-id"
            | keys::CAPACITY_RESERVATION_ID
            | keys::CAPACITY_RESERVATION_TYPE
            | keys::CAPACITY_RESERVATION_INTERRUPTIBLE
    )
}

/// Whether a requirement of `pool` on a label that `itype` alone fixes (not an offering or node key, not
/// overridden by the template) fails: then no node of that type from the pool is allowed, whatever its
/// offering, and its label sets need not be built.
pub(crate) fn type_ruled_out(pool: &NodePool, itype: &InstanceType) -> bool {
    let fixed_by_type = |k: &str| itype.labels.contains_key(k) && !pool.labels.contains_key(k) && !is_offering_or_node_key(k);
    pool.requirements.iter().any(|r| fixed_by_type(&r.req.key) && !node_affinity::requirement_matches(&r.req, &itype.labels))
}

/// Whether a requirement of `pool` on the zone or capacity type, which the offering alone fixes (unless
/// the template overrides the label), fails: then no node of that offering is allowed, and its label
/// sets need not be built. A pool that asks for spot rules out every on-demand offering here.
pub(crate) fn offering_ruled_out(pool: &NodePool, o: &Offering) -> bool {
    let fixed = |k: &str| match k {
        keys::ZONE => Some(o.zone.as_str()),
        keys::CAPACITY_TYPE => Some(o.capacity_type.as_str()),
        _ => None,
    };
    pool.requirements.iter().any(|r| !pool.labels.contains_key(&r.req.key) && fixed(&r.req.key).is_some_and(|v| !node_affinity::requirement_matches_value(&r.req, Some(v))))
}

/// The labels of a node launched from `pool` with `itype` in (`zone`, `capacity_type`), before open
/// keys get their values and before the hostname is known.
pub fn base_labels(pool: &NodePool, itype: &InstanceType, zone: &str, capacity_type: &str, region: Option<&str>) -> Labels {
    let mut l = itype.labels.clone();
    l.insert(keys::ZONE.into(), zone.into());
    l.insert(keys::CAPACITY_TYPE.into(), capacity_type.into());
    if let Some(r) = region {
        l.insert(keys::REGION.into(), r.into());
    }
    for (k, v) in &pool.labels {
        l.insert(k.clone(), v.clone());
    }
    l.insert(keys::NODEPOOL.into(), pool.name.clone());
    l.insert(keys::NODECLASS.into(), pool.node_class.clone());
    l
}

/// [`base_labels`] for offering `o`, with a reserved offering's reservation labels (Karpenter's
/// `karpenter.k8s.aws/capacity-reservation-{id,type,interruptible}`; other offerings have none).
pub fn offering_labels(pool: &NodePool, itype: &InstanceType, o: &Offering, region: Option<&str>) -> Labels {
    let mut l = base_labels(pool, itype, &o.zone, &o.capacity_type, region);
    if let Some(r) = &o.reservation {
        l.extend(r.labels());
    }
    l
}

/// A key the pool leaves open, with the values a node may take for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenKey {
    pub key: String,
    /// Sorted candidates.
    pub values: Vec<String>,
    /// False when leaving the label off also satisfies the pool (NotIn, DoesNotExist).
    pub required: bool,
}

/// The pool's open keys given the labels fixed by type, offering and template. `wanted(key)` lists
/// values pods ask for on a key (used when the pool's requirement is not an `In` list).
pub(crate) fn open_keys(pool: &NodePool, fixed: &Labels, wanted: &dyn Fn(&str) -> Vec<String>) -> Vec<OpenKey> {
    let mut keys: Vec<&str> = pool.requirements.iter().map(|r| r.req.key.as_str()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        if fixed.contains_key(key) || is_offering_or_node_key(key) {
            continue;
        }
        let reqs: Vec<_> = pool.requirements.iter().filter(|r| r.req.key == key).map(|r| &r.req).collect();
        let mut candidates: Vec<String> = match reqs.iter().find(|r| r.op == NodeOp::In) {
            Some(r) => r.values.clone(),
            None => {
                let mut v = wanted(key);
                if v.is_empty() {
                    // No pod names a value: pick the simplest value the requirements accept.
                    if let Some(r) = reqs.iter().find(|r| r.op == NodeOp::Gt) {
                        v.push((r.int + 1).to_string());
                    } else if let Some(r) = reqs.iter().find(|r| r.op == NodeOp::Lt) {
                        v.push((r.int - 1).to_string());
                    } else if let Some(r) = reqs.iter().find(|r| matches!(r.op, NodeOp::Gte | NodeOp::Lte)) {
                        v.push(r.int.to_string());
                    } else if reqs.iter().any(|r| r.op == NodeOp::Exists) {
                        v.push("stowage".into());
                    }
                }
                v
            }
        };
        candidates.retain(|v| reqs.iter().all(|r| node_affinity::requirement_matches_value(r, Some(v))));
        candidates.sort();
        candidates.dedup();
        let required = !reqs.iter().all(|r| node_affinity::requirement_matches_value(r, None));
        out.push(OpenKey { key: key.to_string(), values: candidates, required });
    }
    out
}

/// The first pool requirement the labels violate, if any.
pub fn violated<'a>(pool: &'a NodePool, labels: &Labels) -> Option<&'a crate::domain::labels::NodeRequirement> {
    pool.requirements.iter().map(|r| &r.req).find(|r| !node_affinity::requirement_matches(r, labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::NodeRequirement;
    use crate::domain::nodepool::{ConsolidationPolicy, PoolRequirement};
    use crate::domain::resources::Resources;

    fn pool(reqs: Vec<NodeRequirement>, labels: &[(&str, &str)]) -> NodePool {
        NodePool {
            name: "p".into(),
            weight: 0,
            requirements: reqs.into_iter().map(|req| PoolRequirement { req, min_values: None }).collect(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: vec![],
            startup_taints: vec![],
            limits: None,
            node_class: "default".into(),
            consolidation: ConsolidationPolicy::WhenEmpty,
            consolidate_after: None,
            expire_after: None,
        }
    }

    fn itype(family: &str) -> InstanceType {
        InstanceType {
            name: format!("{family}.large"),
            labels: [("karpenter.k8s.aws/instance-family".to_string(), family.to_string())].into_iter().collect(),
            capacity: Resources::default(),
            overhead: Resources::default(),
            offerings: vec![],
            aws: None,
            attach_limits: Default::default(),
        }
    }

    #[test]
    fn only_labels_the_type_fixes_rule_a_type_out() {
        let family = NodeRequirement::new("karpenter.k8s.aws/instance-family", NodeOp::In, ["m5"]);
        assert!(type_ruled_out(&pool(vec![family.clone()], &[]), &itype("c5")));
        assert!(!type_ruled_out(&pool(vec![family.clone()], &[]), &itype("m5")));
        // The template overrides the type's label: the offering's labels decide, not the type.
        assert!(!type_ruled_out(&pool(vec![family], &[("karpenter.k8s.aws/instance-family", "m5")]), &itype("c5")));
        // Offering keys and keys the type does not carry are left to the label sets.
        assert!(!type_ruled_out(&pool(vec![NodeRequirement::new(keys::ZONE, NodeOp::In, ["us-east-1a"])], &[]), &itype("c5")));
        assert!(!type_ruled_out(&pool(vec![NodeRequirement::new("capacity-spread", NodeOp::In, ["1"])], &[]), &itype("c5")));
    }

    #[test]
    fn only_the_zone_and_capacity_type_rule_an_offering_out() {
        let o = |zone: &str, ct: &str| Offering { zone: zone.into(), capacity_type: ct.into(), price: 1.0, available: true, synthetic: false, reservation: None };
        let spot = pool(vec![NodeRequirement::new(keys::CAPACITY_TYPE, NodeOp::In, ["spot"])], &[]);
        assert!(offering_ruled_out(&spot, &o("us-east-1a", "on-demand")));
        assert!(!offering_ruled_out(&spot, &o("us-east-1a", "spot")));
        let not_a = pool(vec![NodeRequirement::new(keys::ZONE, NodeOp::NotIn, ["us-east-1a"])], &[]);
        assert!(offering_ruled_out(&not_a, &o("us-east-1a", "spot")));
        assert!(!offering_ruled_out(&not_a, &o("us-east-1b", "spot")));
        // Other keys are left to the label sets, and the whole offering agrees with its label set.
        let family = pool(vec![NodeRequirement::new("karpenter.k8s.aws/instance-family", NodeOp::In, ["m5"])], &[]);
        assert!(!offering_ruled_out(&family, &o("us-east-1a", "spot")));
        for p in [&spot, &not_a] {
            for off in [o("us-east-1a", "spot"), o("us-east-1b", "on-demand")] {
                let labels = offering_labels(p, &itype("m5"), &off, Some("us-east-1"));
                assert_eq!(offering_ruled_out(p, &off), violated(p, &labels).is_some(), "{off:?}");
            }
        }
    }
}
