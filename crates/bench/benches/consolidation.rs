//! Consolidation decision time on a generated 1,000-node cluster (issue 17's measurement; the cluster
//! is `stowage_bench::consolidation`'s, seed 1): one `Consolidation::decide` with the default settings
//! and the controller's default planner (the MILP driver, 1 s budget per evaluation), and with the
//! greedy planner for comparison. Ten samples each, so the whole run stays around a minute or two.
//!
//! Run: `cargo bench -p stowage-bench --bench consolidation`. For the phases of one decision, run the
//! `consolidation_time` example. Times are for this machine only.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use stowage_bench::consolidation::{Spec, cluster, decide};
use stowage_core::solve::{Planner, Solver};
use stowage_decide::consolidation::Outcome;

fn consolidation_benches(c: &mut Criterion) {
    let w = cluster(Spec { nodes: 1000, seed: 1 }).expect("the generated cluster loads");
    let mut g = c.benchmark_group("consolidation-1000-nodes");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(1));
    g.measurement_time(Duration::from_secs(5));
    for (name, planner) in [("milp-1s", Planner::default()), ("greedy", Planner { solver: Solver::Greedy, ..Planner::default() })] {
        let mut p = planner;
        let o = decide(&w, &mut p).expect("a decision");
        assert!(matches!(o, Outcome::Consolidate(_)), "{name}: the generated cluster is meant to be consolidated: {o:?}");
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut p = planner;
                black_box(decide(black_box(&w), &mut p).expect("a decision"))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, consolidation_benches);
criterion_main!(benches);
