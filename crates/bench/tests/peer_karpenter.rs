//! Karpenter's own scheduler (peers/karpenter) beside stowage on the seed batches and Karpenter's
//! 100-pod benchmark batch. The peer is built by peers/karpenter/build.sh (cached under
//! $STOWAGE_CACHE; scripts/test.sh builds it before `cargo test`). Karpenter's plans are not required
//! to be valid: the test asserts what the checker says about each of them.

use std::path::PathBuf;
use std::sync::OnceLock;

use stowage_bench::{self, Options, corpus, peer};
use stowage_core::check;
use stowage_core::solve::Solver;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn peer_bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| peer::build(&root()).unwrap_or_else(|e| panic!("building the Karpenter peer: {e}")))
}

fn entry(name: &str) -> corpus::Entry {
    let c = corpus::load_index(&root().join(corpus::STANDARD_INDEX)).unwrap();
    c.workloads.into_iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no corpus entry {name}"))
}

struct Judged {
    plan: stowage_core::plan::Plan,
    report: check::Report,
    pending: usize,
}

fn run_peer(name: &str) -> Judged {
    let e = entry(name);
    let w = corpus::load_workload(&e.files).unwrap();
    let cat = e.catalog.load().unwrap();
    let scratch = std::env::temp_dir().join(format!("stowage-test-peer-{}", std::process::id()));
    let run = peer::run(peer_bin(), &w, &e.catalog.text().unwrap(), &e.peer_args, &scratch, name).unwrap_or_else(|err| panic!("{name}: {err}"));
    assert_eq!(run.plan.solver.name, "karpenter");
    let report = check::check(&w.cluster, &cat, &run.plan);
    Judged { plan: run.plan, report, pending: w.cluster.pending().len() }
}

/// Every pending pod is accounted for, once.
fn assert_complete(name: &str, j: &Judged) {
    assert_eq!(j.plan.placements.len() + j.plan.unschedulable.len(), j.pending, "{name}: placements + unschedulable");
}

/// seed-1c: Karpenter v1.14.1 finds the expected plan (peers/karpenter/README.md): one on-demand
/// c6g.medium in us-east-1c with capacity-spread 1 holding repro-2. The checker accepts it.
#[test]
fn seed_1c_karpenter_plan_is_valid() {
    let j = run_peer("seed-1c");
    assert_complete("seed-1c", &j);
    assert!(j.report.valid(), "{:#?}", j.report.violations);
    assert_eq!(j.plan.new_nodes.len(), 1);
    let n = &j.plan.new_nodes[0];
    assert_eq!((n.node_pool.as_str(), n.zone.as_str(), n.capacity_type.as_str()), ("on-demand-np", "us-east-1c", "on-demand"));
    assert_eq!(n.labels.get("capacity-spread").map(String::as_str), Some("1"));
    assert_eq!(n.pods, ["default/repro-2"]);
}

#[test]
fn seed_rescale_and_scale_to_3_karpenter_plans_are_valid() {
    for name in ["seed-1-rescale", "seed-2-scale-to-3"] {
        let j = run_peer(name);
        assert_complete(name, &j);
        assert!(j.plan.unschedulable.is_empty(), "{name}: {:?}", j.plan.unschedulable);
        assert!(j.report.valid(), "{name}: {:#?}", j.report.violations);
    }
}

/// Karpenter's 100-pod benchmark batch: every pod placed. Karpenter breaks ties at random, so its plan
/// varies between runs; the checker either accepts it or rejects only placements of the zonal
/// self-affinity group (Karpenter has put one group in two zones, which kube-scheduler refuses in any
/// order) and of the zone or hostname spreads (kube-scheduler counts every pod the selector matches,
/// the generic pods with the same `my-label` included).
#[test]
fn karpenter_100_plan_is_judged() {
    let j = run_peer("karpenter-100");
    assert_complete("karpenter-100", &j);
    assert!(j.plan.unschedulable.is_empty(), "{:?}", j.plan.unschedulable);
    for v in &j.report.violations {
        assert!(matches!(v.constraint.as_str(), "InterPodAffinity" | "PodTopologySpread"), "unexpected violation kind: {v}");
    }
    eprintln!("karpenter-100: checker says {} ({} violations)", if j.report.valid() { "valid" } else { "INVALID" }, j.report.violations.len());
}

/// The bench with the peer: stowage's plans all valid, MILP ≤ greedy, and on these batches stowage's
/// MILP plan costs no more than Karpenter's.
#[test]
fn bench_with_the_peer() {
    let ws: Vec<corpus::Entry> = ["seed-1c", "seed-1-rescale", "seed-2-scale-to-3", "karpenter-100"].iter().map(|n| entry(n)).collect();
    let scratch = std::env::temp_dir().join(format!("stowage-test-peer-bench-{}", std::process::id()));
    let opts = Options { solvers: vec![Solver::Greedy, Solver::Milp], peer: Some(peer_bin().clone()), scratch, ..Default::default() };
    let res = stowage_bench::run(&ws, &[], &opts);
    assert_eq!(res.rows.len(), 12);
    for w in &ws {
        let get = |p: &str| res.rows.iter().find(|r| r.workload == w.name && r.planner == p).unwrap_or_else(|| panic!("{}: no {p} row", w.name));
        let (g, m, k) = (get("greedy"), get("milp"), get("karpenter"));
        for r in [g, m] {
            assert_eq!(r.valid, Some(true), "{}/{}: {:?}", r.workload, r.planner, r.first_violation);
        }
        assert!(k.error.is_none(), "{}: {:?}", w.name, k.error);
        assert!(k.valid.is_some(), "{}: the peer's plan was not judged", w.name);
        let (gc, mc, kc) = (g.cost_per_hour.unwrap(), m.cost_per_hour.unwrap(), k.cost_per_hour.unwrap());
        assert!(mc <= gc + 1e-9, "{}: MILP {mc} > greedy {gc}", w.name);
        assert!(mc <= kc + 1e-9, "{}: MILP {mc} > Karpenter {kc}", w.name);
        assert!(k.objective.is_some() && k.time_ms.is_some() && k.wall_ms.is_some());
    }
    // Seeds: Karpenter's plans pass the checker (see the tests above).
    for s in ["seed-1c", "seed-1-rescale", "seed-2-scale-to-3"] {
        let k = res.rows.iter().find(|r| r.workload == s && r.planner == "karpenter").unwrap();
        assert_eq!(k.valid, Some(true), "{s}: {:?}", k.first_violation);
    }
    // A Karpenter plan the checker rejects is reported, not a failure of the bench.
    assert!(!res.failed(), "{:?}", res.rows.iter().filter(|r| r.fails_bench()).map(|r| (&r.workload, &r.planner)).collect::<Vec<_>>());
    let table = stowage_bench::report::peer_table(&res);
    assert_eq!(table.lines().count(), 2 + ws.len(), "{table}");
}
