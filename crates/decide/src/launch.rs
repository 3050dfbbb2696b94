//! From a NodeClaim to the [`LaunchRequest`] a cloud is asked, and from the cloud's [`Instance`] back
//! to the labels the NodeClaim (and so its Node) gets: one function each, for the controller's
//! launcher (EC2) and the simulator's cloud alike.
//!
//! The offerings a NodeClaim allows, in the order to try them (capacity fallback):
//!
//! ```text
//! offerings(claim) = { (type, zone, capacity type, reservation) of the catalog, available,
//!                      with every requirement of the claim holding for the labels a node of it has }
//!   ordered by (position of the type in `instance-type In [...]`, of the zone, of the capacity type),
//!   then price, then type name
//! ```
//!
//! The provisioning decision writes the planner's choice first in `instance-type In [...]`, then the
//! fallbacks cheapest first (`provision`), so the cloud tries the plan's choice first.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint as KubeTaint;

use super::cloud::{Instance, LaunchRequest, OfferingRef};
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::{Labels, NodeOp, keys};
use stowage_core::domain::taints::{Effect, Taint};
use stowage_core::semantics::node_affinity;
use stowage_input::api::{EC2NodeClass, NodeClaim};

/// Why no launch request can be made for a NodeClaim.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    /// The NodeClaim's requirements cannot be read: delete it (nothing was launched).
    #[error("NodeClaim {claim}: {message}")]
    InvalidClaim { claim: String, message: String },
    /// No available offering satisfies the NodeClaim now (all refused recently, or none match): delete
    /// it and plan its pods again.
    #[error("NodeClaim {claim}: no available offering satisfies its requirements")]
    NoOffering { claim: String },
}

/// Values of a NodeClaim requirement `key In [...]`, in the order written.
pub fn requirement_values<'a>(claim: &'a NodeClaim, key: &str) -> Vec<&'a str> {
    claim.spec.requirements.iter().filter(|r| r.key == key && r.operator == "In").flat_map(|r| r.values.iter().map(String::as_str)).collect()
}

/// Labels a NodeClaim gives its node: its labels plus every single-valued `In` requirement.
pub fn claim_labels(claim: &NodeClaim) -> Labels {
    let mut labels: Labels = claim.metadata.labels.clone().unwrap_or_default();
    for r in &claim.spec.requirements {
        if r.operator == "In"
            && let [v] = r.values.as_slice()
        {
            labels.entry(r.key.clone()).or_insert_with(|| v.clone());
        }
    }
    labels
}

/// The offerings a NodeClaim allows, in the order to try them (module doc). `catalog` is the catalog
/// as the NodeClaim's node class sees it, with refused offerings already `available: false`.
pub fn offerings_for(claim: &NodeClaim, catalog: &Catalog) -> Result<Vec<OfferingRef>, stowage_input::InputError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let src = stowage_input::Source { file: "<cluster>".into(), doc: 0, item: None };
    let ctx = stowage_input::convert::Ctx { source: &src, object: format!("NodeClaim {name}") };
    let mut reqs = Vec::new();
    for (i, r) in claim.spec.requirements.iter().enumerate() {
        let req = stowage_input::convert::karpenter_requirement(&ctx, &format!("spec.requirements[{i}]"), &r.key, &r.operator, &r.values)?;
        reqs.push(req);
    }
    let order = |values: &[&str], v: &str| values.iter().position(|x| *x == v).unwrap_or(usize::MAX);
    let type_order = requirement_values(claim, keys::INSTANCE_TYPE);
    let zone_order = requirement_values(claim, keys::ZONE);
    let ct_order = requirement_values(claim, keys::CAPACITY_TYPE);
    let base_labels = claim.metadata.labels.clone().unwrap_or_default();
    let mut out: Vec<(usize, usize, usize, OfferingRef)> = Vec::new();
    for t in &catalog.types {
        for o in t.offerings.iter().filter(|o| o.available) {
            let mut labels = base_labels.clone();
            labels.extend(t.labels.clone());
            labels.insert(keys::INSTANCE_TYPE.into(), t.name.clone());
            labels.insert(keys::ZONE.into(), o.zone.clone());
            labels.insert(keys::CAPACITY_TYPE.into(), o.capacity_type.clone());
            if let Some(r) = &catalog.region {
                labels.insert(keys::REGION.into(), r.clone());
            }
            labels.extend(o.reservation.iter().flat_map(|r| r.labels()));
            // Keys neither the type nor the offering sets (custom labels) are judged on the NodeClaim's
            // labels only when it has them; a requirement on an absent custom key is the node's to satisfy
            // through its labels, which the NodeClaim carries.
            if !reqs.iter().all(|r| node_affinity::requirement_matches(r, &labels) || (r.op == NodeOp::In && !labels.contains_key(&r.key))) {
                continue;
            }
            let offering = OfferingRef { instance_type: t.name.clone(), zone: o.zone.clone(), capacity_type: o.capacity_type.clone(), price: o.price, reservation: o.reservation.clone() };
            out.push((order(&type_order, &t.name), order(&zone_order, &o.zone), order(&ct_order, &o.capacity_type), offering));
        }
    }
    out.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)).then_with(|| a.3.price.total_cmp(&b.3.price)).then_with(|| a.3.instance_type.cmp(&b.3.instance_type)));
    Ok(out.into_iter().map(|x| x.3).collect())
}

/// Kubernetes taints as the domain's (unknown effects dropped).
pub fn domain_taints(ts: Option<&Vec<KubeTaint>>) -> Vec<Taint> {
    ts.into_iter().flatten().filter_map(|t| Some(Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect: Effect::parse(&t.effect)? })).collect()
}

/// The launch request for a NodeClaim. `catalog`: as for [`offerings_for`].
pub fn launch_request(claim: &NodeClaim, catalog: &Catalog, nodeclass: Option<&EC2NodeClass>) -> Result<LaunchRequest, RequestError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let offerings = offerings_for(claim, catalog).map_err(|e| RequestError::InvalidClaim { claim: name.clone(), message: e.to_string() })?;
    if offerings.is_empty() {
        return Err(RequestError::NoOffering { claim: name });
    }
    let labels = claim_labels(claim);
    let mut taints = domain_taints(claim.spec.taints.as_ref());
    for t in domain_taints(claim.spec.startup_taints.as_ref()) {
        if !taints.contains(&t) {
            taints.push(t);
        }
    }
    Ok(LaunchRequest {
        nodepool: labels.get(keys::NODEPOOL).cloned().unwrap_or_default(),
        nodeclass: claim.spec.node_class_ref.name.clone(),
        nodeclaim: name,
        offerings,
        labels,
        taints,
        tags: nodeclass.and_then(|c| c.spec.tags.clone()).unwrap_or_default(),
    })
}

/// The labels a launched instance gives its NodeClaim (and so its Node): the type's catalog labels, its
/// type, zone and capacity type, and the region.
pub fn instance_labels(instance: &Instance, catalog: &Catalog) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = catalog.get(&instance.instance_type).map(|t| t.labels.clone()).unwrap_or_default();
    l.insert(keys::INSTANCE_TYPE.into(), instance.instance_type.clone());
    l.insert(keys::ZONE.into(), instance.zone.clone());
    l.insert(keys::CAPACITY_TYPE.into(), instance.capacity_type.clone());
    if let Some(r) = &catalog.region {
        l.insert(keys::REGION.into(), r.clone());
    }
    l
}

/// The offering of `offerings` an instance was launched from (its price is the one billed).
pub fn launched_offering<'a>(offerings: &'a [OfferingRef], instance: &Instance) -> Option<&'a OfferingRef> {
    offerings.iter().find(|o| o.instance_type == instance.instance_type && o.zone == instance.zone && o.capacity_type == instance.capacity_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offerings::Unavailable;
    use stowage_input::api::{NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues};

    fn claim(reqs: &[(&str, &[&str])]) -> NodeClaim {
        let mut c = NodeClaim::new(
            "np-abc",
            NodeClaimSpec {
                requirements: reqs
                    .iter()
                    .map(|(k, v)| NodeSelectorRequirementWithMinValues { key: k.to_string(), operator: "In".into(), values: v.iter().map(|s| s.to_string()).collect(), min_values: None })
                    .collect(),
                node_class_ref: NodeClassReference { group: "karpenter.k8s.aws".into(), kind: "EC2NodeClass".into(), name: "default".into() },
                ..Default::default()
            },
        );
        c.metadata.labels = Some([(keys::NODEPOOL.to_string(), "np".to_string()), ("capacity-spread".to_string(), "1".to_string())].into());
        c
    }

    #[test]
    fn offerings_follow_the_requirement_order_and_skip_refused_ones() {
        let c = claim(&[(keys::INSTANCE_TYPE, &["m5.xlarge", "m5.large", "c5.large"]), (keys::ZONE, &["us-east-1b"]), (keys::CAPACITY_TYPE, &["spot"]), ("capacity-spread", &["1"])]);
        let cat = stowage_input::catalog::default_catalog();
        let mut u: Unavailable<u64> = Unavailable::default();
        let req = launch_request(&c, &u.view(cat, 0), None).unwrap();
        let types: Vec<&str> = req.offerings.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(types, vec!["m5.xlarge", "m5.large", "c5.large"]);
        assert!(req.offerings.iter().all(|o| o.zone == "us-east-1b" && o.capacity_type == "spot"));
        assert_eq!(req.labels.get("capacity-spread").map(String::as_str), Some("1"));
        assert_eq!(req.labels.get(keys::ZONE).map(String::as_str), Some("us-east-1b"), "single-valued requirements are labels");
        assert_eq!(req.nodepool, "np");

        u.mark(("m5.xlarge".into(), "us-east-1b".into(), "spot".into()), 180);
        let req = launch_request(&c, &u.view(cat, 0), None).unwrap();
        assert_eq!(req.offerings[0].instance_type, "m5.large", "the refused offering is skipped");
        // After the TTL it is offered again.
        assert_eq!(launch_request(&c, &u.view(cat, 180), None).unwrap().offerings[0].instance_type, "m5.xlarge");
    }

    #[test]
    fn a_claim_with_every_offering_refused_has_none() {
        let c = claim(&[(keys::INSTANCE_TYPE, &["m5.large"]), (keys::ZONE, &["us-east-1a"]), (keys::CAPACITY_TYPE, &["on-demand"])]);
        let mut u: Unavailable<u64> = Unavailable::default();
        u.mark(("m5.large".into(), "us-east-1a".into(), "on-demand".into()), 180);
        let e = launch_request(&c, &u.view(stowage_input::catalog::default_catalog(), 0), None).unwrap_err();
        assert_eq!(e, RequestError::NoOffering { claim: "np-abc".into() });
    }

    #[test]
    fn a_claim_without_a_type_requirement_gets_the_cheapest_matching_offerings() {
        let c = claim(&[("karpenter.k8s.aws/instance-family", &["m5"]), (keys::ZONE, &["us-east-1a"]), (keys::CAPACITY_TYPE, &["on-demand"])]);
        let req = launch_request(&c, stowage_input::catalog::default_catalog(), None).unwrap();
        assert_eq!(req.offerings[0].instance_type, "m5.large");
        assert!(req.offerings.windows(2).all(|w| w[0].price <= w[1].price));
    }

    #[test]
    fn invalid_requirements_are_reported() {
        let mut c = claim(&[]);
        c.spec.requirements.push(NodeSelectorRequirementWithMinValues { key: "x".into(), operator: "Near".into(), values: vec![], min_values: None });
        let e = launch_request(&c, stowage_input::catalog::default_catalog(), None).unwrap_err();
        assert!(e.to_string().contains("unknown operator"), "{e}");
    }
}
