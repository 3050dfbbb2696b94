//! The provisioning decision with capacity reservations (issue 16 item 6): a NodeClaim planned into a
//! reservation carries Karpenter's reserved requirements and its launch offerings name the
//! reservation; NodeClaims of an earlier batch that have no instance yet take their share of the
//! reservation before this batch plans (the snapshot leaves them out, and the cloud's count does not
//! know them). Real YAML through `stowage_input`, the embedded catalog, both planners, every plan
//! judged by `stowage_core::check`.

use std::path::Path;

use serde_json::json;
use stowage_core::domain::catalog::{Offering, RESERVED, Reservation};
use stowage_core::solve::{Planner, Solver};
use stowage_core::weights::Weights;
use stowage_decide::provision;

#[test]
fn reserved_claims_name_their_reservation_and_unlaunched_claims_take_their_share() {
    let mut catalog = stowage_input::catalog::default_catalog().clone();
    let m5 = catalog.types.iter_mut().find(|t| t.name == "m5.large").unwrap();
    let od = m5.offerings.iter().find(|o| o.zone == "us-east-1a" && o.capacity_type == "on-demand").unwrap().price;
    m5.offerings.push(Offering {
        zone: "us-east-1a".into(),
        capacity_type: RESERVED.into(),
        price: od / 10_000_000.0,
        available: true,
        synthetic: false,
        reservation: Some(Reservation { id: "cr-1".into(), kind: "default".into(), interruptible: false, count: 2 }),
    });
    let mut items = vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                     "capacityReservationSelectorTerms": [{"id": "cr-1"}]},
            "status": {"capacityReservations": [{"id": "cr-1", "availabilityZone": "us-east-1a", "instanceType": "m5.large", "instanceMatchCriteria": "targeted", "ownerID": "123456789012"}]}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}}}}),
    ];
    for i in 0..3 {
        items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p-{i}"), "namespace": "default", "uid": format!("uid-{i}")},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
    }
    // An earlier batch's NodeClaim into cr-1, not launched yet.
    let unlaunched = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "np-old", "labels": {"karpenter.sh/nodepool": "np", "karpenter.k8s.aws/capacity-reservation-id": "cr-1"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}, {"key": "karpenter.k8s.aws/capacity-reservation-id", "operator": "In", "values": ["cr-1"]}]}});
    for (with_unlaunched, want_reserved) in [(false, 2), (true, 1)] {
        let mut docs = items.clone();
        if with_unlaunched {
            docs.push(unlaunched.clone());
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs})).unwrap();
        let w = stowage_input::load_texts([(Path::new("test.yaml"), text.as_str())]).unwrap();
        for solver in [Solver::Greedy, Solver::Milp] {
            let ctx = format!("{solver:?}, unlaunched claim: {with_unlaunched}");
            let weights = Weights::default();
            let input = provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: &catalog, weights: &weights, max_instance_types: 20, batch: "b" };
            let d = provision::decide(&input, &mut Planner { solver, ..Planner::default() }).expect("decides");
            let r = stowage_core::check::check(&w.cluster, &catalog, &d.plan);
            assert!(r.valid(), "{ctx}: {:#?}", r.violations);
            assert!(d.plan.unschedulable.is_empty(), "{ctx}: {:?}", d.plan.unschedulable);
            let reserved: Vec<_> = d.claims.iter().filter(|c| c.capacity_type == RESERVED).collect();
            assert_eq!(reserved.len(), want_reserved, "{ctx}: {:?}", d.claims.iter().map(|c| (&c.instance_type, &c.capacity_type)).collect::<Vec<_>>());
            for c in reserved {
                let req = |k: &str| c.nodeclaim.spec.requirements.iter().find(|r| r.key == k).map(|r| r.values.clone());
                assert_eq!(req("karpenter.sh/capacity-type"), Some(vec!["reserved".to_string()]), "{ctx}");
                assert_eq!(req("karpenter.k8s.aws/capacity-reservation-id"), Some(vec!["cr-1".to_string()]), "{ctx}");
                assert_eq!(c.nodeclaim.metadata.labels.as_ref().and_then(|l| l.get("karpenter.k8s.aws/capacity-reservation-id")).map(String::as_str), Some("cr-1"), "{ctx}");
                assert!(!c.offerings.is_empty() && c.offerings.iter().all(|o| o.reservation.as_ref().is_some_and(|r| r.id == "cr-1") && o.instance_type == "m5.large"), "{ctx}: {:?}", c.offerings);
            }
            assert!(d.claims.iter().filter(|c| c.capacity_type != RESERVED).all(|c| c.offerings.iter().all(|o| o.reservation.is_none())), "{ctx}");
        }
    }
}
