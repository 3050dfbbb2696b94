//! Criterion benchmarks of the planners' hot paths on corpus workloads (benches/workloads/):
//!
//! * `greedy/karpenter-{1000,5000}`: the greedy planner on Karpenter's benchmark batches (problem built
//!   once, outside the measurement);
//! * `problem/*`: building the planning problem (classes, configurations, domains) on the full embedded
//!   us-east-1 catalog (mixed-3, openb-1d) and on Karpenter's 400 types (karpenter-5000);
//! * `check/karpenter-1000`, `check/mixed-3`: the independent checker on the greedy plan.
//!
//! Run: `cargo bench --bench planners` (add `-- greedy` to filter). Times are for comparison between
//! commits on the same machine only.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};

use stowage_bench::corpus;
use stowage_core::check;
use stowage_core::domain::catalog::Catalog;
use stowage_core::solve::{Problem, greedy};
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::Workload;

fn load(name: &str) -> (Workload, Catalog) {
    let index = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(corpus::STANDARD_INDEX);
    let c = corpus::load_index(&index).expect("corpus index");
    let e = c.workloads.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no corpus entry {name}"));
    let w = corpus::load_workload(&e.files).unwrap_or_else(|err| panic!("{name}: {err}"));
    let cat = e.catalog.load().unwrap_or_else(|err| panic!("{name}: {err}"));
    (w, (*cat).clone())
}

fn greedy_benches(c: &mut Criterion) {
    let weights = Weights::default();
    let mut g = c.benchmark_group("greedy");
    g.sample_size(10);
    for name in ["karpenter-1000", "karpenter-5000"] {
        let (w, cat) = load(name);
        let p = Problem::new(&w.cluster, &cat, &weights).expect("problem");
        g.bench_function(name, |b| b.iter(|| black_box(greedy::plan(black_box(&p)))));
    }
    g.finish();
}

fn problem_benches(c: &mut Criterion) {
    let weights = Weights::default();
    let mut g = c.benchmark_group("problem");
    g.sample_size(10);
    for name in ["mixed-3", "openb-1d", "karpenter-5000"] {
        let (w, cat) = load(name);
        g.bench_function(name, |b| b.iter(|| black_box(Problem::new(black_box(&w.cluster), &cat, &weights).expect("problem"))));
    }
    g.finish();
}

fn check_benches(c: &mut Criterion) {
    let weights = Weights::default();
    let mut g = c.benchmark_group("check");
    g.sample_size(10);
    for name in ["karpenter-1000", "mixed-3"] {
        let (w, cat) = load(name);
        let plan = plan_cluster(&w.cluster, &cat, &weights, Solver::Greedy).expect("plan");
        g.bench_function(name, |b| b.iter(|| black_box(check::check(&w.cluster, &cat, black_box(&plan)))));
    }
    g.finish();
}

criterion_group!(benches, greedy_benches, problem_benches, check_benches);
criterion_main!(benches);
