//! Capacity reservations (`semantics::reservations`): Karpenter's `reserved` capacity type. A NodePool
//! that allows `reserved` launches into the reservations its EC2NodeClass selects, at most as many
//! nodes as each still takes, before paying for on-demand; reservations the NodeClass does not select
//! are not its own. Every plan is judged by the independent checker, which also refuses a plan that
//! overfills a reservation.

mod common;

use std::path::Path;

use common::*;
use stowage_core::check;
use stowage_core::domain::catalog::{Catalog, Offering, RESERVED, Reservation};
use stowage_core::domain::labels::keys;
use stowage_core::plan::Plan;
use stowage_core::solve::plan_cluster;
use stowage_core::weights::Weights;

/// catalog-small plus two reservations of t.medium: `cr-aaa` (2 instances, zone-a) and `cr-bbb`
/// (1 instance, zone-b), priced as Karpenter prices them (on-demand / 10,000,000).
fn catalog() -> Catalog {
    let mut c = small_catalog().clone();
    let t = c.types.iter_mut().find(|t| t.name == "t.medium").expect("t.medium");
    for (id, zone, count) in [("cr-aaa", "zone-a", 2), ("cr-bbb", "zone-b", 1)] {
        t.offerings.push(Offering {
            zone: zone.into(),
            capacity_type: RESERVED.into(),
            price: 0.19 / 10_000_000.0,
            available: true,
            synthetic: false,
            reservation: Some(Reservation { id: id.into(), kind: "default".into(), interruptible: false, count }),
        });
    }
    c
}

/// The NodeClass selecting `cr-aaa` (its status as the controller writes it), a NodePool allowing
/// `capacity_types`, and `docs`.
fn workload(capacity_types: &str, status: bool, docs: &str) -> stowage_input::Workload {
    let status = if status {
        "\nstatus: {capacityReservations: [{id: cr-aaa, availabilityZone: zone-a, instanceType: t.medium, instanceMatchCriteria: targeted, ownerID: \"123456789012\", reservationType: default, state: active}]}"
    } else {
        ""
    };
    let text = format!(
        "---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec: {{role: test, amiSelectorTerms: [{{alias: al2023@latest}}], subnetSelectorTerms: [{{tags: {{k: v}}}}], securityGroupSelectorTerms: [{{tags: {{k: v}}}}], capacityReservationSelectorTerms: [{{tags: {{team: ml}}}}]}}{status}
{}{docs}",
        pool("default", &format!("[{{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_types}]}}]"))
    );
    stowage_input::load_texts([(Path::new("reservations.yaml"), text.as_str())]).unwrap_or_else(|e| panic!("the workload loads: {e}\n{text}"))
}

fn reserved_nodes<'p>(p: &'p Plan, id: &str) -> Vec<&'p stowage_core::plan::NewNode> {
    p.new_nodes.iter().filter(|n| n.capacity_type == RESERVED && n.labels.get(keys::CAPACITY_RESERVATION_ID).map(String::as_str) == Some(id)).collect()
}

/// Plans with every planner; each plan must pass the checker.
fn plans(w: &stowage_input::Workload, cat: &Catalog) -> Vec<(String, Plan)> {
    planners()
        .into_iter()
        .map(|s| {
            let p = plan_cluster(&w.cluster, cat, &Weights::default(), s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            let r = check::check(&w.cluster, cat, &p);
            assert!(r.valid(), "{s:?}: the checker rejects the plan: {:#?}\n{}", r.violations, summary(&p));
            (format!("{s:?}"), p)
        })
        .collect()
}

#[test]
fn a_reservation_takes_as_many_nodes_as_it_has_room_for_then_on_demand() {
    let cat = catalog();
    // Six pods of 3 cpu: one per t.medium (3.9 cpu allocatable), two per t.large.
    let w = workload("on-demand, reserved", true, &pods(6, "web", "{app: web}", "3000m", ""));
    for (s, p) in plans(&w, &cat) {
        let reserved = reserved_nodes(&p, "cr-aaa");
        assert_eq!(reserved.len(), 2, "{s}: both instances of cr-aaa are used, no more\n{}", summary(&p));
        for n in &reserved {
            assert_eq!((n.instance_type.as_str(), n.zone.as_str()), ("t.medium", "zone-a"), "{s}");
            assert_eq!(n.labels.get(keys::CAPACITY_RESERVATION_TYPE).map(String::as_str), Some("default"), "{s}");
            assert_eq!(n.labels.get(keys::CAPACITY_RESERVATION_INTERRUPTIBLE).map(String::as_str), Some("false"), "{s}");
            assert_eq!(n.pods.len(), 1, "{s}");
        }
        assert!(reserved_nodes(&p, "cr-bbb").is_empty(), "{s}: cr-bbb is not the NodeClass's\n{}", summary(&p));
        assert!(p.unschedulable.is_empty(), "{s}: {:?}", p.unschedulable);
        // The other four pods on the cheapest on-demand capacity: two t.large (0.72 $/h).
        assert!((p.cost_per_hour - (0.72 + 2.0 * 0.19 / 10_000_000.0)).abs() < 1e-6, "{s}: cost {}\n{}", p.cost_per_hour, summary(&p));

        // A third node in cr-aaa is more than it takes: the checker says so.
        let mut bad = p.clone();
        let mut extra = reserved[0].clone();
        extra.name = "extra".into();
        extra.labels.insert(keys::HOSTNAME.into(), "extra".into());
        extra.pods.clear();
        extra.launch_candidates.clear();
        bad.new_nodes.push(extra);
        bad.finish();
        let r = check::check(&w.cluster, &cat, &bad);
        let full: Vec<_> = r.violations.iter().filter(|v| v.message.contains("capacity reservation cr-aaa is full")).collect();
        assert_eq!(full.len(), 1, "{s}: {:#?}", r.violations);
    }
}

#[test]
fn reservations_stay_unused_where_the_nodepool_or_the_nodeclass_does_not_have_them() {
    let cat = catalog();
    let docs = pods(2, "web", "{app: web}", "3000m", "");
    for (what, w) in [("a NodePool without reserved", workload("on-demand", true, &docs)), ("a NodeClass whose status names no reservation", workload("on-demand, reserved", false, &docs))] {
        for (s, p) in plans(&w, &cat) {
            assert!(p.new_nodes.iter().all(|n| n.capacity_type != RESERVED && !n.labels.contains_key(keys::CAPACITY_RESERVATION_ID)), "{what} ({s}):\n{}", summary(&p));
            assert!(p.unschedulable.is_empty(), "{what} ({s})");
        }
    }
}

#[test]
fn pods_that_select_the_reservation_get_no_more_than_it_takes() {
    let cat = catalog();
    // Three pods that need a whole t.medium each and select cr-aaa: two run, one stays pending.
    let docs = pods(3, "train", "{app: train}", "3000m", "nodeSelector: {karpenter.k8s.aws/capacity-reservation-id: cr-aaa}");
    let w = workload("on-demand, reserved", true, &docs);
    for (s, p) in plans(&w, &cat) {
        assert_eq!(reserved_nodes(&p, "cr-aaa").len(), 2, "{s}\n{}", summary(&p));
        assert_eq!(p.new_nodes.len(), 2, "{s}: nothing else can hold them\n{}", summary(&p));
        assert_eq!(p.unschedulable.len(), 1, "{s}: {:?}", p.unschedulable);
        assert!(p.unschedulable[0].reason.contains("cr-aaa") || p.unschedulable[0].reason.contains("capacity-reservation-id"), "{s}: the reason names the reservation: {:?}", p.unschedulable[0]);
    }
}
