//! `stowage bench` on the small corpus entries (the seed batches and Karpenter's 100-pod benchmark
//! batch) with the greedy and MILP planners: every plan passes the checker, MILP never costs more than
//! greedy, the outputs are written. Times are not asserted (measurement only).

use std::path::{Path, PathBuf};

use stowage_bench::{self, Options, Profile, corpus};
use stowage_core::solve::Solver;
use stowage_core::weights::Weights;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn standard() -> corpus::Corpus {
    corpus::load_index(&root().join(corpus::STANDARD_INDEX)).expect("the corpus index loads")
}

fn entries(names: &[&str]) -> Vec<corpus::Entry> {
    let c = standard();
    names.iter().map(|n| c.workloads.iter().find(|e| e.name == *n).unwrap_or_else(|| panic!("no corpus entry {n}")).clone()).collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stowage-test-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn every_corpus_file_exists_and_small_entries_load() {
    let c = standard();
    assert!(c.workloads.len() >= 13, "{} entries", c.workloads.len());
    for group in ["karpenter", "seed", "mixed", "openb"] {
        assert!(c.workloads.iter().any(|e| e.group == group), "no {group} entry");
    }
    for e in &c.workloads {
        assert!(!e.description.is_empty(), "{}: no description", e.name);
        for f in &e.files {
            assert!(f.exists(), "{}: {} missing", e.name, f.display());
        }
        if let corpus::CatalogRef::File(p) = &e.catalog {
            assert!(p.is_file(), "{}: catalog {} missing", e.name, p.display());
        }
    }
    for r in &c.replays {
        assert!(r.trace.is_file() && r.nodepools.iter().all(|f| f.is_file()), "{}: files missing", r.name);
    }
    // The small ones load without warnings and have the pending pods their descriptions promise.
    for (name, pods) in [("seed-1c", 1), ("seed-1-rescale", 3), ("seed-2-scale-to-3", 2), ("karpenter-100", 100), ("mixed-3", 339), ("openb-6h", 91)] {
        let e = &entries(&[name])[0];
        let w = corpus::load_workload(&e.files).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(w.warnings.is_empty(), "{name}: {:?}", w.warnings);
        assert_eq!(w.cluster.pending().len(), pods, "{name}");
    }
}

/// The Karpenter benchmark batch is makeDiversePods(100) with Go's math/rand seeded 42: five groups of
/// 20 in the benchmark's order, the benchmark's label keys, and the first draws of that generator.
#[test]
fn karpenter_benchmark_batch_has_the_published_shape() {
    let e = &entries(&["karpenter-100"])[0];
    let w = corpus::load_workload(&e.files).unwrap();
    let c = &w.cluster;
    assert_eq!(c.nodepools.len(), 1);
    let np = &c.nodepools[0];
    assert_eq!(np.weight, 0);
    let pods: Vec<_> = c.pending().into_iter().map(|id| c.pod(id)).collect();
    assert_eq!(pods.len(), 100);
    assert!(pods.iter().all(|p| p.namespace == "default"));
    let group = |range: std::ops::Range<usize>| &pods[range];
    assert!(group(0..20).iter().all(|p| p.labels.contains_key("my-label") && p.spread.is_empty() && p.affinity.is_empty()));
    assert!(group(20..40).iter().all(|p| p.spread.len() == 1 && p.spread[0].key == "topology.kubernetes.io/zone"));
    assert!(group(40..60).iter().all(|p| p.spread.len() == 1 && p.spread[0].key == "kubernetes.io/hostname"));
    assert!(group(60..80).iter().all(|p| p.labels.contains_key("my-affininity") && p.affinity.len() == 1));
    assert!(group(80..100).iter().all(|p| p.labels.get("app").map(String::as_str) == Some("nginx") && p.anti_affinity.len() == 1));
    // rand.New(rand.NewSource(42)): Intn(7) = 5 ("f"), Intn(5) = 2 (500m), Intn(6) = 2 (512Mi).
    assert_eq!(pods[0].labels.get("my-label").map(String::as_str), Some("f"));
    assert_eq!(pods[0].requests.cpu_m, 500, "CPU of the first pod");
    assert_eq!(pods[0].requests.memory, 512 << 20, "memory of the first pod");
    let cpus: std::collections::BTreeSet<i64> = pods.iter().map(|p| p.requests.cpu_m).collect();
    assert!(cpus.is_subset(&[100, 250, 500, 1000, 1500].into()), "{cpus:?}");
}

#[test]
fn bench_on_the_small_batches_checks_every_plan() {
    let ws = entries(&["seed-1c", "seed-1-rescale", "seed-2-scale-to-3", "karpenter-100"]);
    let out = tmp("small");
    // A budget the MILP never needs here when the machine is idle (these batches solve in well under a
    // second), so that on a loaded machine it still proves the lower bound the greedy rows are judged by
    // (seed-1c's resource-volume bound is 0: its pod cannot use the existing nodes' free room).
    let opts = Options { solvers: vec![Solver::Greedy, Solver::Milp], scratch: out.join("scratch"), time_budget: std::time::Duration::from_secs(20), ..Default::default() };
    let res = stowage_bench::run(&ws, &[], &opts);
    assert_eq!(res.rows.len(), 8);
    for r in &res.rows {
        assert!(r.error.is_none(), "{}/{}: {:?}", r.workload, r.planner, r.error);
        assert_eq!(r.valid, Some(true), "{}/{}: {:?}", r.workload, r.planner, r.first_violation);
        assert_eq!(r.unschedulable, Some(0), "{}/{}", r.workload, r.planner);
        // The lower bound on $/h holds for every plan that places every pod.
        let ratio = r.vs_bound.unwrap_or_else(|| panic!("{}/{}: no bound", r.workload, r.planner));
        assert!(ratio >= 1.0 - 1e-9, "{}/{}: cost below the lower bound ({ratio})", r.workload, r.planner);
    }
    for w in &ws {
        let get = |p: &str| res.rows.iter().find(|r| r.workload == w.name && r.planner == p).unwrap();
        let (g, m) = (get("greedy"), get("milp"));
        assert!(m.cost_per_hour.unwrap() <= g.cost_per_hour.unwrap() + 1e-9, "{}: MILP {:?} > greedy {:?}", w.name, m.cost_per_hour, g.cost_per_hour);
        if let (Some(lb), Some(obj)) = (m.lower_bound, m.objective) {
            assert!(lb <= obj + 1e-6, "{}: lower bound {lb} above the objective {obj}", w.name);
        }
        assert_eq!(g.vs_greedy, Some(1.0));
    }
    // The seed batches are small enough to be solved to optimality.
    for s in ["seed-1c", "seed-1-rescale", "seed-2-scale-to-3"] {
        let m = res.rows.iter().find(|r| r.workload == s && r.planner == "milp").unwrap();
        assert_eq!(m.status, "optimal", "{s}: {}", m.detail);
        assert!((m.vs_lower_bound.unwrap() - 1.0).abs() < 1e-6);
        assert!((m.vs_bound.unwrap() - 1.0).abs() < 1e-5, "{s}: {:?}", m.vs_bound);
    }
    assert!(!res.failed());

    let files = stowage_bench::report::write_all(&res, &out).unwrap();
    assert_eq!(files.len(), 5, "{files:?}");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9);
    let svg = std::fs::read_to_string(out.join("cost-vs-bound.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("seed-1c"), "{}", &svg[..svg.len().min(200)]);
    assert!(std::fs::read_to_string(out.join("time-vs-pods.svg")).unwrap().contains("milp"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 8);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("| seed-1c | 1 | milp | default |"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Two weights profiles side by side: a spot-averse profile may not choose spot where the default does.
#[test]
fn weights_profiles_side_by_side() {
    let ws = entries(&["seed-1-rescale"]);
    let mut averse = Weights::default();
    averse.spot.price_multiplier = 1000.0;
    let profiles = vec![Profile::default_profile(), Profile { name: "spot-averse".into(), weights: averse }];
    let opts = Options { solvers: vec![Solver::Greedy], profiles, ..Default::default() };
    let res = stowage_bench::run(&ws, &[], &opts);
    assert_eq!(res.rows.len(), 2);
    assert_eq!(res.rows[0].weights, "default");
    assert_eq!(res.rows[1].weights, "spot-averse");
    assert!(res.rows.iter().all(|r| r.valid == Some(true)), "{:?}", res.rows.iter().map(|r| &r.first_violation).collect::<Vec<_>>());
}

#[test]
fn a_bad_workload_is_a_row_with_an_error_not_a_panic() {
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("broken.yaml");
    std::fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n").unwrap();
    let gz = dir.join("broken.json.gz");
    std::fs::write(&gz, b"not gzip").unwrap();
    let mk = |p: &Path| corpus::Entry {
        name: p.file_name().unwrap().to_string_lossy().into(),
        group: "files".into(),
        description: "bad".into(),
        files: vec![p.to_path_buf()],
        catalog: corpus::CatalogRef::Default,
        peer_args: vec![],
        standard: false,
        generator: None,
    };
    let res = stowage_bench::run(&[mk(&f), mk(&gz), mk(&dir.join("missing.yaml"))], &[], &Options { solvers: vec![Solver::Greedy], ..Default::default() });
    assert_eq!(res.rows.len(), 3);
    assert!(res.rows.iter().all(|r| r.error.is_some() && r.fails_bench()));
    assert!(res.rows[0].error.as_ref().unwrap().contains("cpu"), "{:?}", res.rows[0].error);
    assert!(res.rows[1].error.as_ref().unwrap().contains("decompress"));
    assert!(res.failed());
    let _ = std::fs::remove_dir_all(&dir);
}
