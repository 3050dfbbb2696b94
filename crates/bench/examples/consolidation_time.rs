#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]
//! One consolidation decision on a generated cluster, timed (issue 17's measurement;
//! `stowage_bench::consolidation` says what the cluster is and how time is attributed). Prints the
//! figures, and writes them as JSON with `--json FILE`.
//!
//! cargo run --release -p stowage-bench --example consolidation_time -- [--nodes 1000] [--seed 1]
//!     [--solver milp|greedy] [--budget-ms 1000] [--json FILE]
use std::time::Duration;

use stowage_bench::consolidation::{Spec, cluster, measure};
use stowage_core::solve::{Planner, Solver};

fn main() {
    let mut spec = Spec { nodes: 1000, seed: 1 };
    let mut planner = Planner::default();
    let mut json: Option<String> = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let value = |i: usize| args.get(i + 1).cloned().unwrap_or_else(|| fail(&format!("{} needs a value", args[i])));
    while i < args.len() {
        match args[i].as_str() {
            "--nodes" => spec.nodes = value(i).parse().unwrap_or_else(|_| fail("--nodes: a whole number")),
            "--seed" => spec.seed = value(i).parse().unwrap_or_else(|_| fail("--seed: a whole number")),
            "--budget-ms" => planner.time_budget = Duration::from_millis(value(i).parse().unwrap_or_else(|_| fail("--budget-ms: a whole number"))),
            "--solver" => {
                planner.solver = match value(i).as_str() {
                    "milp" => Solver::Milp,
                    "greedy" => Solver::Greedy,
                    other => fail(&format!("--solver {other:?}: milp or greedy")),
                }
            }
            "--json" => json = Some(value(i)),
            other => fail(&format!("unknown argument {other:?}")),
        }
        i += 2;
    }
    let w = cluster(spec).unwrap_or_else(|e| fail(&e));
    let (m, _) = measure(spec, &w, planner).unwrap_or_else(|e| fail(&e));
    print!("{}", m.render());
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&m).unwrap_or_else(|e| fail(&e.to_string()));
        std::fs::write(&path, text + "\n").unwrap_or_else(|e| fail(&format!("{path}: {e}")));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}
