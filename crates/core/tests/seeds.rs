//! Acceptance tests of the core planner on the seed batches (scenarios/README.md): the greedy planner
//! through the library API, and the independent checker on its plans and on hand-broken copies.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stowage_core::catalog::for_nodeclass;
use stowage_core::check;
use stowage_core::domain::labels::keys;
use stowage_core::plan::Plan;
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::catalog::default_catalog;
use stowage_input::{self, Workload};

const NODECLASS: &str = "scenarios/common-ec2nodeclass.yaml";
const SEED1: &str = "scenarios/seed-1-statefulset-capacity-spread";
const SEED1C: &str = "scenarios/seed-1c-stuck-on-existing-nodes/state.yaml";
const SEED2: &str = "scenarios/seed-2-apiserver-anti-affinity";

fn path(p: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(p)
}

fn load(paths: &[&str]) -> Workload {
    let paths: Vec<PathBuf> = paths.iter().map(|p| path(p)).collect();
    stowage_input::load(&paths).unwrap_or_else(|e| panic!("loading {paths:?}: {e}"))
}

/// Every planner the acceptance cases must hold for.
fn planners() -> Vec<Solver> {
    vec![Solver::Greedy, Solver::Milp]
}

fn plan(w: &Workload, solver: Solver) -> Plan {
    plan_cluster(&w.cluster, default_catalog(), &Weights::default(), solver).unwrap_or_else(|e| panic!("{solver:?}: planning failed: {e}"))
}

#[track_caller]
fn assert_valid(w: &Workload, p: &Plan) {
    let r = check::check(&w.cluster, default_catalog(), p);
    assert!(r.valid(), "checker rejects the plan: {:#?}\nplan: {}", r.violations, p.to_json());
    assert!(r.stated_order_ok, "the plan's own bind order does not replay: {:?}", r.notes);
}

fn label<'a>(n: &'a stowage_core::plan::NewNode, k: &str) -> &'a str {
    n.labels.get(k).map(String::as_str).unwrap_or_else(|| panic!("node {} has no label {k}", n.name))
}

/// The zone of a pending pod's bound PV, read from the PV's node affinity in the workload.
fn pv_zone(w: &Workload, pod: &str) -> String {
    let id = w.cluster.find_pod(pod).unwrap_or_else(|| panic!("no pod {pod}"));
    let terms = &w.cluster.pod(id).volumes.node_terms;
    assert_eq!(terms.len(), 1, "{pod}: one volume expected");
    let zones: Vec<&String> = terms[0].iter().flat_map(|t| t.expressions.iter()).filter(|e| e.key == keys::ZONE).flat_map(|e| e.values.iter()).collect();
    assert_eq!(zones.len(), 1, "{pod}: one PV zone expected, got {zones:?}");
    zones[0].clone()
}

#[test]
fn every_scenario_file_loads() {
    let mut files = Vec::new();
    // The core's no-IO rule (clippy.toml) is the library's; this test lists the repository's files.
    #[allow(clippy::disallowed_methods)]
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for e in entries {
            if e.is_dir() {
                walk(&e, out);
            } else if e.file_name().is_some_and(|n| n == "scenario.yaml") {
                // stowage simulate's scenario files; tests/simulate.rs runs them. Named explicitly as a
                // workload they are an input error that says so.
                let err = stowage_input::load(std::slice::from_ref(&e)).err().map(|x| x.to_string()).unwrap_or_default();
                assert!(err.contains("stowage simulate"), "{}: {err}", e.display());
            } else if matches!(e.extension().and_then(|x| x.to_str()), Some("yaml" | "yml" | "json")) {
                out.push(e);
            }
        }
    }
    walk(&path("scenarios"), &mut files);
    assert!(files.len() >= 10, "scenario files found: {files:?}");
    // Files reference each other (NodePools their EC2NodeClass, claims their StorageClass; a dangling
    // reference is an input error by design, see tests/bad_input.rs), so each file is loaded with the
    // files it needs: its own folder, the common EC2NodeClass, for seed-1c seed-1's NodePools and for
    // consolidation-1b consolidation-1's NodePool; drift-1's two NodePool versions each on their own.
    let groups: Vec<Vec<&str>> = vec![
        vec![NODECLASS],
        vec![SEED1, NODECLASS],
        vec!["scenarios/seed-1b-statefulset-zonal-rescale", NODECLASS],
        vec![SEED1C, SEED1, NODECLASS],
        vec![SEED2, NODECLASS],
        vec!["scenarios/consolidation-1-load-drops", NODECLASS],
        vec!["scenarios/consolidation-1b-do-not-disrupt", "scenarios/consolidation-1-load-drops/nodepool.yaml", NODECLASS],
        // drift-1 has two versions of one NodePool: each with the Deployment.
        vec!["scenarios/drift-1-nodepool-change/nodepool.yaml", "scenarios/drift-1-nodepool-change/deployment.yaml", NODECLASS],
        vec!["scenarios/drift-1-nodepool-change/nodepool-v2.yaml", "scenarios/drift-1-nodepool-change/deployment.yaml", NODECLASS],
        vec!["scenarios/interruption-1-spot-warning", NODECLASS],
        vec!["scenarios/budget-1-business-hours", NODECLASS],
    ];
    let mut covered = BTreeSet::new();
    for g in &groups {
        let w = load(g);
        assert!(w.warnings.is_empty(), "{g:?}: unexpected warnings {:?}", w.warnings);
        for p in g {
            let p = path(p);
            for f in &files {
                if f.starts_with(&p) {
                    covered.insert(f.clone());
                }
            }
        }
        if g.len() > 1 {
            assert!(!w.cluster.pending().is_empty(), "{g:?}: no pending pod");
            assert!(!w.cluster.nodepools.is_empty(), "{g:?}: no NodePool");
        }
    }
    let missed: Vec<&PathBuf> = files.iter().filter(|f| !covered.contains(*f)).collect();
    assert!(missed.is_empty(), "scenario files not loaded by this test: {missed:?}");
}

/// seed-1c: repro-2's volume is in us-east-1c, where only spot-c (capacity-spread 3) exists. The only
/// valid plan is one new on-demand node in us-east-1c with capacity-spread 1, of the cheapest c/m/r type.
#[test]
fn seed_1c_one_on_demand_node_in_us_east_1c_with_capacity_spread_1() {
    let w = load(&[SEED1C, &format!("{SEED1}/nodepools.yaml"), NODECLASS]);
    let pending: Vec<String> = w.cluster.pending().into_iter().map(|id| w.cluster.pod(id).key()).collect();
    assert_eq!(pending, ["default/repro-2"]);

    // The cheapest c/m/r type with an available on-demand offering in us-east-1c that holds repro-2,
    // as the EC2NodeClass sees the catalog.
    let nc = w.cluster.nodeclass("default").expect("EC2NodeClass default");
    let view = for_nodeclass(default_catalog(), nc);
    let pod = w.cluster.pod(w.cluster.find_pod("default/repro-2").unwrap());
    let mut fitting: Vec<(f64, String)> = view
        .types
        .iter()
        .filter(|t| t.labels.get("karpenter.k8s.aws/instance-category").is_some_and(|c| ["c", "m", "r"].contains(&c.as_str())))
        .filter(|t| pod.requests.fits_in(&t.allocatable()))
        .filter_map(|t| t.offerings.iter().find(|o| o.zone == "us-east-1c" && o.capacity_type == "on-demand" && o.available).map(|o| (o.price, t.name.clone())))
        .collect();
    fitting.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let cheapest_price = fitting.first().expect("some c/m/r type fits").0;
    let cheapest: BTreeSet<&str> = fitting.iter().filter(|(p, _)| *p == cheapest_price).map(|(_, n)| n.as_str()).collect();

    for solver in planners() {
        let p = plan(&w, solver);
        assert!(p.unschedulable.is_empty(), "{solver:?}: {:?}", p.unschedulable);
        assert_eq!(p.new_nodes.len(), 1, "{solver:?}: exactly one new node: {}", p.to_json());
        let n = &p.new_nodes[0];
        assert_eq!(n.node_pool, "on-demand-np");
        assert_eq!(n.capacity_type, "on-demand");
        assert_eq!(n.zone, "us-east-1c");
        assert_eq!(label(n, keys::ZONE), "us-east-1c");
        assert_eq!(label(n, "capacity-spread"), "1", "capacity-spread 2 would make skew 2");
        assert!(cheapest.contains(n.instance_type.as_str()), "{solver:?}: {} is not among the cheapest fitting types {cheapest:?}", n.instance_type);
        assert_eq!(n.price_per_hour, cheapest_price);
        assert_eq!(n.pods, ["default/repro-2"]);
        assert_eq!(p.placements.len(), 1);
        assert_eq!((p.placements[0].pod.as_str(), p.placements[0].node.as_str()), ("default/repro-2", n.name.as_str()));
        assert_valid(&w, &p);

        // What the defective provisioner kept doing: repro-2 on spot-c.
        let mut bad = p.clone();
        bad.new_nodes.clear();
        bad.placements[0].node = "spot-c".into();
        bad.finish();
        let r = check::check(&w.cluster, default_catalog(), &bad);
        assert!(!r.valid(), "repro-2 on spot-c must be rejected");
        assert!(
            r.violations.iter().any(|v| v.constraint == "PodTopologySpread" && v.pod.as_deref() == Some("default/repro-2") && v.node.as_deref() == Some("spot-c")),
            "expected a PodTopologySpread violation for repro-2 on spot-c: {:#?}",
            r.violations
        );

        // A capacity-spread 2 node in us-east-1c is wrong too (skew 2 against capacity-spread 1).
        let mut two = p.clone();
        two.new_nodes[0].labels.insert("capacity-spread".into(), "2".into());
        let r = check::check(&w.cluster, default_catalog(), &two);
        assert!(r.violations.iter().any(|v| v.constraint == "PodTopologySpread"), "capacity-spread 2: {:#?}", r.violations);
    }
}

/// seed-1 step 3: repro scaled 0 -> 3 with the claims still bound in us-east-1a/b/c and no node left.
/// Expected: 2 on-demand + 1 spot node, capacity-spread 1, 2, 3 once each, each pod in its PV's zone.
#[test]
fn seed_1_rescale_two_on_demand_one_spot_each_in_its_volume_zone() {
    let w = load(&[SEED1, "tests/fixtures/seed-1-rescale", NODECLASS]);
    let pending: BTreeSet<String> = w.cluster.pending().into_iter().map(|id| w.cluster.pod(id).key()).collect();
    assert_eq!(pending, ["default/repro-0", "default/repro-1", "default/repro-2"].into_iter().map(String::from).collect());
    for solver in planners() {
        let p = plan(&w, solver);
        assert!(p.unschedulable.is_empty(), "{solver:?}: {:?}", p.unschedulable);
        assert_eq!(p.new_nodes.len(), 3, "{solver:?}: {}", p.to_json());
        let on_demand = p.new_nodes.iter().filter(|n| n.capacity_type == "on-demand" && n.node_pool == "on-demand-np").count();
        let spot = p.new_nodes.iter().filter(|n| n.capacity_type == "spot" && n.node_pool == "spot-np").count();
        assert_eq!((on_demand, spot), (2, 1), "{solver:?}: 2 on-demand + 1 spot");
        let mut spreads: Vec<&str> = p.new_nodes.iter().map(|n| label(n, "capacity-spread")).collect();
        spreads.sort();
        assert_eq!(spreads, ["1", "2", "3"]);
        for n in &p.new_nodes {
            assert_eq!(n.pods.len(), 1, "{solver:?}: one pod per node on {}", n.name);
            assert_eq!(n.zone, pv_zone(&w, &n.pods[0]), "{solver:?}: {} must be in its PV's zone", n.pods[0]);
        }
        let zones: BTreeSet<&str> = p.new_nodes.iter().map(|n| n.zone.as_str()).collect();
        assert_eq!(zones.len(), 3);
        assert_valid(&w, &p);
    }
}

/// seed-1 step 3 through the MILP driver: the greedy plan (0.0795 $/h) is 1.1 % above the optimum, which
/// the aggregated integer program proves (0.0786); its solution, packed into nodes
/// (`milp::disaggregate`), is that optimum, so the driver returns it without the column-generated
/// integer program. The plan is the checker's to judge, and proven optimal by the bound it reports.
#[test]
fn seed_1_rescale_the_packed_aggregated_solution_is_the_proven_optimum() {
    use std::time::Duration;
    use stowage_core::solve::{driver, problem::Problem, to_plan};

    let w = load(&[SEED1, "tests/fixtures/seed-1-rescale", NODECLASS]);
    let weights = Weights::default();
    let p = Problem::new(&w.cluster, default_catalog(), &weights).expect("builds");
    let (o, report) = driver::plan(&p, driver::DriverOptions { budget: Duration::from_secs(60), gap: 0.01, threads: 1 });
    assert!(report.detail.contains("the packed aggregated solution is within the target gap"), "{}", report.detail);
    let (obj, lb) = (report.objective.expect("an objective"), report.lower_bound.expect("a bound"));
    assert!((obj - 0.07860275).abs() < 1e-6 && lb >= obj - 1e-9, "objective {obj}, bound {lb}: {}", report.detail);
    let plan = to_plan(&p, &o, report);
    assert_eq!(plan.new_nodes.len(), 3);
    assert_valid(&w, &plan);
}

/// seed-2 step 2: example-apiserver scaled 1 -> 3 with required hostname anti-affinity and a zonal
/// spread. Expected: 2 new m5.16xlarge on-demand nodes in us-east-1b and us-east-1c, one apiserver each.
#[test]
fn seed_2_two_m5_16xlarge_in_the_other_zones() {
    let w = load(&[SEED2, "tests/fixtures/seed-2-scale-to-3", NODECLASS]);
    let pending: Vec<String> = w.cluster.pending().into_iter().map(|id| w.cluster.pod(id).key()).collect();
    assert_eq!(pending.len(), 2, "two new apiserver pods: {pending:?}");
    assert!(pending.iter().all(|k| k.starts_with("default/example-apiserver-")), "{pending:?}");
    for solver in planners() {
        let p = plan(&w, solver);
        assert!(p.unschedulable.is_empty(), "{solver:?}: {:?}", p.unschedulable);
        assert_eq!(p.new_nodes.len(), 2, "{solver:?}: {}", p.to_json());
        for n in &p.new_nodes {
            assert_eq!(n.instance_type, "m5.16xlarge");
            assert_eq!(n.capacity_type, "on-demand");
            assert_eq!(n.node_pool, "control-plane");
            assert_eq!(n.pods.len(), 1, "one apiserver per node");
            assert!(n.pods[0].starts_with("default/example-apiserver-"));
        }
        let zones: BTreeSet<&str> = p.new_nodes.iter().map(|n| n.zone.as_str()).collect();
        assert_eq!(zones, ["us-east-1b", "us-east-1c"].into_iter().collect());
        assert!(p.placements.iter().all(|pl| pl.node != "cp-a"), "the first node keeps exactly one apiserver");
        assert_valid(&w, &p);

        // Both new apiservers on one node breaks the hostname anti-affinity.
        let mut bad = p.clone();
        let first = bad.new_nodes[0].name.clone();
        for pl in &mut bad.placements {
            pl.node = first.clone();
        }
        bad.new_nodes.truncate(1);
        bad.finish();
        let r = check::check(&w.cluster, default_catalog(), &bad);
        assert!(!r.valid());
        assert!(r.violations.iter().any(|v| v.constraint == "InterPodAffinity" || v.constraint == "PodTopologySpread"), "{:#?}", r.violations);
    }
}
