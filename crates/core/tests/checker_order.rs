//! The checker's bind-order step (issue 18 item 3): for any plan, whoever made it, some order in which
//! kube-scheduler binds every placed pod is found (valid), proved not to exist (invalid, with a
//! witness), or not decided within the search's budget (undecided). The plans here are written by hand
//! onto existing nodes, so what is judged is the order alone.
//!
//! The two-key cases: pods of `app: web` with maxSkew-1 spreads over zone and over a custom `rack` key,
//! on nodes that cover every (zone, rack) pair.

// Tests read fixtures; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use common::{case, node, pod};
use stowage_core::check::{self, order::Outcome};
use stowage_core::plan::{ExistingNode, Plan};
use stowage_core::solve::plan_cluster;
use stowage_core::weights::Weights;
use stowage_input::Workload;

const TWO_KEYS: &str = "topologySpreadConstraints: [\
    {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}, \
    {maxSkew: 1, topologyKey: rack, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]";

/// Nodes `n-<zone><rack>` for every zone and rack given, 4 CPU each, and one pending web pod per
/// entry of `pods` (p0, p1, ...), each asking for `cpu` with the two spreads.
fn grid(zones: &str, racks: &str, pods: usize, cpu: &str) -> Workload {
    let mut docs = String::new();
    for z in zones.chars() {
        for r in racks.chars() {
            docs += &node(&format!("n-{z}{r}"), &format!("zone-{z}"), "4", &format!("rack: \"{r}\""), "");
        }
    }
    for i in 0..pods {
        docs += &pod(&format!("p{i}"), "{app: web}", cpu, TWO_KEYS);
    }
    case("bind order", docs).workload()
}

/// A plan that places pod `p<i>` on `nodes[i]`, in that order, and launches nothing. Every planner's
/// own plan for the workload is checked on the way (it is a plan made in a test).
fn by_hand(w: &Workload, nodes: &[&str]) -> Plan {
    let cat = common::small_catalog();
    let mut plan = None;
    for solver in common::planners() {
        let p = plan_cluster(&w.cluster, cat, &Weights::default(), solver).expect("plans");
        let r = check::check(&w.cluster, cat, &p);
        assert!(r.valid(), "{solver:?}'s own plan: {:#?}", r.violations);
        plan = Some(p);
    }
    let mut plan = plan.expect("a planner ran");
    plan.new_nodes.clear();
    plan.unschedulable.clear();
    plan.cost_per_hour = 0.0;
    plan.placements.clear();
    plan.existing_nodes.clear();
    for (i, n) in nodes.iter().enumerate() {
        plan.placements.push(stowage_core::plan::Placement { pod: format!("default/p{i}"), node: n.to_string(), relaxed: vec![] });
        match plan.existing_nodes.iter_mut().find(|e| e.name == *n) {
            Some(e) => e.pods.push(format!("default/p{i}")),
            None => plan.existing_nodes.push(ExistingNode { name: n.to_string(), pods: vec![format!("default/p{i}")] }),
        }
    }
    plan
}

/// Bound first, p0 on (b, 2) leaves p1 on (a, 2) and p2 on (b, 1) each one over a skew, and passes over
/// the rejected pods stay stuck there; binding p1 and p2 first places all three (zones a1 b2, racks
/// 1:1 2:2). Only a search finds that order.
#[test]
fn a_plan_only_a_searched_order_binds_is_valid() {
    let w = grid("ab", "12", 3, "100m");
    let plan = by_hand(&w, &["n-b2", "n-a2", "n-b1"]);
    let r = check::check(&w.cluster, common::small_catalog(), &plan);
    assert!(r.valid(), "{:#?}\n{:#?}", r.violations, r.notes);
    assert_eq!(r.verdict(), Outcome::Valid);
    assert!(!r.stated_order_ok, "the plan's own order fails");
    assert!(r.order_search_checks > 0, "the passes alone do not bind it: {:#?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("a searched bind order places every pod")), "{:#?}", r.notes);
}

/// Rack 3 never gets a pod, so its count stays the minimum 0 and a second pod in rack 2 is always one
/// over: no order binds p0 and p2 both. Neither is rejected by a filter that order cannot change, so
/// the proof is the exhausted search, and the witness is the pod left where it got deepest.
#[test]
fn a_plan_no_order_binds_is_invalid_with_a_witness() {
    let w = grid("ab", "123", 3, "100m");
    let plan = by_hand(&w, &["n-b2", "n-a2", "n-b1"]);
    let r = check::check(&w.cluster, common::small_catalog(), &plan);
    assert_eq!(r.verdict(), Outcome::Invalid, "{:#?}", r.notes);
    assert_eq!(r.order, Outcome::Invalid);
    assert_eq!(r.violations.len(), 1, "one pod is left at the deepest state: {:#?}", r.violations);
    assert_eq!(r.violations[0].constraint, "PodTopologySpread");
    assert!(r.notes.iter().any(|n| n.contains("no bind order exists: every reachable set of bound pods searched")), "{:#?}", r.notes);
}

/// The first case with a budget of one filter check: the search cannot finish, and says so.
#[test]
fn the_search_answers_undecided_when_its_budget_runs_out() {
    let w = grid("ab", "12", 3, "100m");
    let plan = by_hand(&w, &["n-b2", "n-a2", "n-b1"]);
    let r = check::check_with_budget(&w.cluster, common::small_catalog(), &plan, 1);
    assert_eq!(r.verdict(), Outcome::Undecided, "{:#?}", r.notes);
    assert!(!r.valid(), "an undecided plan is not a verified one");
    assert_eq!(r.order_search_checks, 1);
    assert!(!r.violations.is_empty() && r.violations.len() == r.order_left);
    assert!(r.notes.iter().any(|n| n.contains("undecided")), "{:#?}", r.notes);
}

/// Two 3-CPU pods on one 4-CPU node: whatever the order, the second does not fit. The resource filter
/// is a witness on its own, so no search runs.
#[test]
fn a_static_witness_needs_no_search() {
    let w = grid("ab", "12", 2, "3");
    let plan = by_hand(&w, &["n-a1", "n-a1"]);
    let r = check::check(&w.cluster, common::small_catalog(), &plan);
    assert_eq!(r.verdict(), Outcome::Invalid);
    assert_eq!(r.order_search_checks, 0, "{:#?}", r.notes);
    assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
    assert_eq!(r.violations[0].constraint, "NodeResourcesFit");
    assert!(r.notes.iter().any(|n| n.contains("rejected by a filter no order changes")), "{:#?}", r.notes);
}

/// Interchangeable pods are one group, so a plan of many alike pods is decided in few states: twelve
/// web pods over four (zone, rack) nodes, three per node, listed node by node (the plan's order fails
/// at once, the passes or the search find the round-robin order).
#[test]
fn alike_pods_are_searched_as_counts() {
    let w = grid("ab", "12", 12, "100m");
    let nodes: Vec<&str> = ["n-a1", "n-a2", "n-b1", "n-b2"].iter().flat_map(|n| std::iter::repeat_n(*n, 3)).collect();
    let plan = by_hand(&w, &nodes);
    let r = check::check(&w.cluster, common::small_catalog(), &plan);
    assert!(r.valid(), "{:#?}\n{:#?}", r.violations, r.notes);
    assert!(!r.stated_order_ok);
    assert!(r.order_search_checks < 200, "{} checks", r.order_search_checks);
}

/// The checker's order is one that works; kube-scheduler takes its own. Node a has 2 of 4 CPU free, b
/// is empty. p0 (2 CPU) before p1 (4 CPU) in the queue: the plan p0 on a, p1 on b is valid, but
/// kube-scheduler's LeastAllocated score sends p0 to the emptier b, and p1 then fits nowhere. With p0
/// (4 CPU) first the queue's order works (smallest first is tried only when the plan launches nodes:
/// crates/decide/tests/consolidation.rs covers that). Two 2-CPU pods fit either way.
#[test]
fn a_valid_plan_can_still_leave_a_pod_to_kube_schedulers_own_order() {
    let cases: [(&str, &str, [&str; 2], &[&str]); 3] = [("2", "4", ["a", "b"], &["default/p1"]), ("4", "2", ["b", "a"], &[]), ("2", "2", ["a", "b"], &[])];
    for (cpu0, cpu1, nodes, want) in cases {
        let docs = node("a", "zone-a", "4", "", "") + &node("b", "zone-a", "4", "", "") + &pod("bound", "", "2", "nodeName: a") + &pod("p0", "", cpu0, "") + &pod("p1", "", cpu1, "");
        let w = case("scheduler order", docs).workload();
        let plan = by_hand(&w, &nodes);
        let r = check::check(&w.cluster, common::small_catalog(), &plan);
        assert!(r.valid(), "{cpu0} {cpu1}: {:#?}", r.violations);
        let left = check::scheduler_leaves(&w.cluster, common::small_catalog(), &plan);
        assert_eq!(left.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), want, "{cpu0} {cpu1}: {left:?}");
        assert!(left.iter().all(|(_, msg)| msg.contains("Insufficient cpu")), "{left:?}");
    }
}

/// Pods a budget deferred (`deferred`) are outside the plan's batch: the plan is judged without them
/// (kube-scheduler's queue would bind p2 and p3 here, but they are not the batch's to place), and the
/// bookkeeping still holds every pending pod to exactly one list.
#[test]
fn deferred_pods_are_judged_as_outside_the_batch() {
    let w = grid("ab", "1", 4, "100m");
    let cat = common::small_catalog();
    let mut plan = by_hand(&w, &["n-a1", "n-b1"]);
    let missing = check::check(&w.cluster, cat, &plan);
    assert!(missing.violations.iter().any(|v| v.pod.as_deref() == Some("default/p2") && v.message.contains("missing from the plan")), "{:#?}", missing.violations);
    plan.deferred = vec!["default/p2".into(), "default/p3".into()];
    plan.finish();
    assert_eq!(plan.totals.pods_deferred, 2);
    let r = check::check(&w.cluster, cat, &plan);
    assert!(r.valid(), "{:#?}", r.violations);
    assert!(r.queue_order.is_empty(), "deferred pods are not left pending by this plan: {:#?}", r.queue_order);
    let text = plan.to_json();
    assert!(text.contains("\"podsDeferred\": 2"), "{text}");
    let back = stowage_core::plan::Plan::from_json(&text).expect("reads back");
    assert_eq!((&back.deferred, &back.totals), (&plan.deferred, &plan.totals));

    let mut twice = plan.clone();
    twice.deferred.push("default/p0".into());
    let r = check::check(&w.cluster, cat, &twice);
    assert!(r.violations.iter().any(|v| v.pod.as_deref() == Some("default/p0") && v.message.contains("listed 2 times")), "placed and deferred: {:#?}", r.violations);
    let mut unknown = plan.clone();
    unknown.deferred.push("default/nope".into());
    let r = check::check(&w.cluster, cat, &unknown);
    assert!(r.violations.iter().any(|v| v.pod.as_deref() == Some("default/nope") && v.message.contains("no such pod")), "{:#?}", r.violations);
}
