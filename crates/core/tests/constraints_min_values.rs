//! minValues (issue 15, behaviour 5): a NodePool requirement's `minValues` is a planning constraint.
//! The instance types a new node may launch as (its launch candidates, recorded in the plan cheapest
//! first) must keep that many distinct values of the key. Under `minValuesPolicy: Strict` (Karpenter's
//! default) a node that cannot is not planned and its pods stay pending with the reason; under
//! `BestEffort` the node is planned and the relaxation recorded. Every case runs through both planners
//! and the checker (common::Case::run); the checker's own verdicts on tampered plans follow.

mod common;

use std::path::Path;
use std::sync::OnceLock;

use common::{Edit, Exp, Is, case, pod, pods, pool};
use stowage_core::check;
use stowage_core::domain::catalog::Catalog;
use stowage_core::plan::Plan;
use stowage_core::semantics::min_values::{MinValuesPolicy, Shortfall};
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::weights::Weights;

const TYPE: &str = "node.kubernetes.io/instance-type";
const FAMILY: &str = "karpenter.k8s.aws/instance-family";

/// Six types in three families, one zone (tests/fixtures/catalog-minvalues.yaml).
fn catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(|| {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/fixtures/catalog-minvalues.yaml");
        stowage_input::catalog::load(&p).expect("tests/fixtures/catalog-minvalues.yaml parses")
    })
}

/// A NodePool with `minValues: min` on `key` (an `Exists` requirement, so only minValues restricts).
fn min_pool(key: &str, min: u32) -> String {
    pool("mv", &format!("[{{key: {key}, operator: Exists, minValues: {min}}}]"))
}

fn best_effort() -> Weights {
    Weights { min_values_policy: MinValuesPolicy::BestEffort, ..Weights::default() }
}

/// Every new node keeps at least `n` launch candidates and records no relaxation.
fn kept_types(plan: &Plan, n: usize) -> Result<(), String> {
    for node in &plan.new_nodes {
        if node.launch_candidates.len() < n || !node.min_values_relaxed.is_empty() {
            return Err(format!("{} launches as {:?}, relaxed {:?}", node.name, node.launch_candidates, node.min_values_relaxed));
        }
    }
    Ok(())
}

#[test]
fn min_values_on_instance_types_strict_and_best_effort() {
    // 5 cpu fits b.2xlarge and c.2xlarge only: two types where three are asked.
    let big = || format!("{}{}", min_pool(TYPE, 3), pod("big", "", "5", ""));
    case("strict: the node is not planned", big())
        .catalog(catalog())
        .expects([
            Exp::NewNodes(0),
            Exp::Unschedulable("big", "NodePool"),
            Exp::Custom("the reason names minValues", |p, _| match p.unschedulable.first() {
                Some(u) if u.reason.contains("minValues 3") && u.reason.contains(TYPE) && u.reason.contains("keep 2") => Ok(()),
                u => Err(format!("{u:?}")),
            }),
        ])
        .run();
    case("best effort: planned and relaxed", big())
        .catalog(catalog())
        .weights(best_effort())
        .expects([
            Exp::NewNodes(1),
            Exp::On("big", &[Is::New, Is::Type("b.2xlarge")]),
            Exp::Custom("the node records its candidates and the relaxation", |p, _| {
                let n = &p.new_nodes[0];
                let want = vec![Shortfall { key: TYPE.into(), min_values: 3, kept: 2 }];
                if n.launch_candidates == ["b.2xlarge", "c.2xlarge"] && n.min_values_relaxed == want { Ok(()) } else { Err(format!("{:?} {:?}", n.launch_candidates, n.min_values_relaxed)) }
            }),
        ])
        .run();
    // Two types asked, two kept: planned under Strict, nothing relaxed.
    case("strict: enough types", format!("{}{}", min_pool(TYPE, 2), pod("big", "", "5", "")))
        .catalog(catalog())
        .expects([Exp::NewNodes(1), Exp::On("big", &[Is::Type("b.2xlarge")]), Exp::Custom("two candidates", |p, _| kept_types(p, 2))])
        .run();
}

#[test]
fn min_values_on_instance_families() {
    // 5 cpu: families b and c remain of a, b, c.
    case("strict: three families asked, two kept", format!("{}{}", min_pool(FAMILY, 3), pod("big", "", "5", "")))
        .catalog(catalog())
        .expects([Exp::NewNodes(0), Exp::Unschedulable("big", "NodePool")])
        .run();
    case("strict: two families asked, two kept", format!("{}{}", min_pool(FAMILY, 2), pod("big", "", "5", ""))).catalog(catalog()).expects([Exp::NewNodes(1), Exp::AllPlaced]).run();
    case("best effort: relaxed to two families", format!("{}{}", min_pool(FAMILY, 3), pod("big", "", "5", "")))
        .catalog(catalog())
        .weights(best_effort())
        .expects([
            Exp::NewNodes(1),
            Exp::Custom("the family requirement is relaxed to 2", |p, _| {
                let want = vec![Shortfall { key: FAMILY.into(), min_values: 3, kept: 2 }];
                if p.new_nodes[0].min_values_relaxed == want { Ok(()) } else { Err(format!("{:?}", p.new_nodes[0].min_values_relaxed)) }
            }),
        ])
        .run();
    // A pod that asks for family a itself: only a types are candidates, one family.
    case("strict: the pod's own affinity narrows the families", format!("{}{}", min_pool(FAMILY, 2), pod("a", "", "1", &format!("nodeSelector: {{{FAMILY}: a}}"))))
        .catalog(catalog())
        .expects([Exp::NewNodes(0), Exp::Unschedulable("a", "NodePool")])
        .run();
}

#[test]
fn min_values_can_cost_a_node_more_than_the_cheapest_type_alone() {
    // Four pods of 1.5 cpu: one b.2xlarge ($0.40) holds them all and is the plan without minValues
    // (fewer nodes at equal price), but only b.2xlarge and c.2xlarge hold 6 cpu. With minValues 3 the
    // pods go two by two (3 cpu: a.xlarge, c.xlarge, b.2xlarge, c.2xlarge), also $0.40.
    let four = || pods(4, "p", "", "1500m", "");
    case("without minValues", format!("{}{}", pool("mv", ""), four())).catalog(catalog()).expects([Exp::NewNodes(1), Exp::On("p-0", &[Is::Type("b.2xlarge")])]).run();
    case("with minValues 3", format!("{}{}", min_pool(TYPE, 3), four()))
        .catalog(catalog())
        .expects([
            Exp::AllPlaced,
            Exp::NewNodes(2),
            Exp::Custom("two pods a node", |p, _| if p.new_nodes.iter().all(|n| n.pods.len() == 2) { Ok(()) } else { Err("uneven".into()) }),
            Exp::Custom("every node keeps three types", |p, _| kept_types(p, 3)),
            Exp::Custom("the price of the single node", |p, _| if (p.cost_per_hour - 0.40).abs() < 1e-9 { Ok(()) } else { Err(format!("{}", p.cost_per_hour)) }),
        ])
        // All four pods on one b.2xlarge: the checker rejects it by minValues.
        .broken([Edit::Retype("p-0", "b.2xlarge"), Edit::AllTo("p-0")], "NodePool")
        .run();
}

fn planned(docs: &str, w: &Weights) -> Vec<(Solver, Plan, stowage_input::Workload)> {
    let wl = case("c", docs.to_string()).workload();
    [Solver::Greedy, Solver::Milp].into_iter().map(|s| (s, plan_cluster(&wl.cluster, catalog(), w, s).expect("plans"), case("c", docs.to_string()).workload())).collect()
}

fn nodepool_violations(r: &check::Report) -> Vec<String> {
    r.violations.iter().filter(|v| v.constraint == "NodePool").map(|v| v.message.clone()).collect()
}

#[test]
fn the_checker_judges_launch_candidates_and_relaxations() {
    let docs = format!("{}{}", min_pool(TYPE, 3), pod("big", "", "5", ""));
    for (solver, plan, w) in planned(&docs, &best_effort()) {
        let ok = check::check(&w.cluster, catalog(), &plan);
        assert!(ok.valid(), "{solver:?}: {:#?}", ok.violations);
        assert_eq!(plan.min_values_policy, MinValuesPolicy::BestEffort);
        let json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
        assert_eq!(json["minValuesPolicy"], "BestEffort");
        assert_eq!(json["newNodes"][0]["launchCandidates"], serde_json::json!(["b.2xlarge", "c.2xlarge"]));
        assert_eq!(json["newNodes"][0]["minValuesRelaxed"], serde_json::json!([{"key": TYPE, "minValues": 3, "kept": 2}]));

        // The same plan judged under Strict: the node breaks minValues.
        let mut strict = plan.clone();
        strict.min_values_policy = MinValuesPolicy::Strict;
        let r = check::check(&w.cluster, catalog(), &strict);
        let v = nodepool_violations(&r);
        assert!(v.iter().any(|m| m.contains("minValues 3")) && v.iter().any(|m| m.contains("minValuesRelaxed is recorded")), "{solver:?}: {v:#?}");

        // A relaxation left out, or a candidate the pod does not fit, is caught.
        let mut unrecorded = plan.clone();
        unrecorded.new_nodes[0].min_values_relaxed.clear();
        assert!(nodepool_violations(&check::check(&w.cluster, catalog(), &unrecorded)).iter().any(|m| m.contains("minValuesRelaxed")), "{solver:?}");
        let mut padded = plan.clone();
        padded.new_nodes[0].launch_candidates.insert(0, "a.xlarge".into());
        assert!(nodepool_violations(&check::check(&w.cluster, catalog(), &padded)).iter().any(|m| m.contains("launchCandidates")), "{solver:?}");
        let mut reordered = plan.clone();
        reordered.new_nodes[0].launch_candidates.reverse();
        assert!(!check::check(&w.cluster, catalog(), &reordered).valid(), "{solver:?}: candidates out of price order");

        // A peer's plan says nothing of candidates: judged on minValues alone.
        let mut peer = plan.clone();
        peer.new_nodes[0].launch_candidates.clear();
        peer.new_nodes[0].min_values_relaxed.clear();
        assert!(check::check(&w.cluster, catalog(), &peer).valid(), "{solver:?}");
        peer.min_values_policy = MinValuesPolicy::Strict;
        assert!(!check::check(&w.cluster, catalog(), &peer).valid(), "{solver:?}: Strict by default for peers");
    }
}

#[test]
fn plans_without_the_new_fields_are_strict_and_list_no_candidates() {
    let docs = format!("{}{}", min_pool(TYPE, 2), pod("big", "", "5", ""));
    for (solver, plan, w) in planned(&docs, &Weights::default()) {
        let mut json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
        assert_eq!(json["minValuesPolicy"], "Strict", "{solver:?}");
        json.as_object_mut().expect("object").remove("minValuesPolicy");
        json["newNodes"][0].as_object_mut().expect("object").remove("launchCandidates");
        let old = Plan::from_json(&json.to_string()).expect("an older plan parses");
        assert_eq!(old.min_values_policy, MinValuesPolicy::Strict);
        assert!(old.new_nodes[0].launch_candidates.is_empty());
        assert!(check::check(&w.cluster, catalog(), &old).valid(), "{solver:?}");
    }
}
