//! The lifetime benchmark (issue 19; docs/lifetime.md): stowage's controller and Karpenter's own
//! operator (v1.14.1, its KWOK cloud provider) each run one cluster history on a real control plane,
//! and the bills are compared, beside a lower bound on the cost of the history's demand.
//!
//! ```text
//!  history (seeded) ──► run::play ──► kube-apiserver ◄── kube-scheduler, kube-controller-manager
//!                                        ▲      ▲
//!        Karpenter's operator ───────────┘      └─────────── stowage's controller
//!        (KWOK provider creates Nodes)                       (cloud::FakeCloud creates the same Nodes)
//!                                        ▲
//!                    kubelet stand-in (Kubelet::start_kwok): Nodes Ready, pods Running
//!                                        │
//!                     observe::Recorder (watches) ──► report (cost, node-hours, evictions, waits,
//!                                                     bound of the demand, table, plot)
//! ```
//!
//! A dev-only crate: it runs the e2e harness, never ships in the binary. `examples/lifetime.rs` is its
//! command line (`scripts/lifetime.sh`); `tests/e2e_lifetime.rs` the smoke test.

pub mod cloud;
pub mod history;
pub mod observe;
pub mod report;
pub mod run;
pub mod setup;

use std::path::{Path, PathBuf};

use history::History;
use report::{Comparison, RunMeta};
use run::Contender;
use setup::{Setup, Timing};

/// Runs each contender over `history` (one after the other, each on a fresh control plane), writes
/// `results.json`, `table.md` and `cost.svg` into `out`, and returns the comparison. `tag` prefixes the
/// control planes' names (one per history and contender).
pub async fn compare(tag: &str, history: &History, setup: &Setup, timing: Timing, contenders: &[Contender], bound_step_s: f64, out: &Path) -> Result<Comparison, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let mut summaries = Vec::new();
    let mut runs = Vec::new();
    let tasks = report::task_counts(history);
    for &c in contenders {
        let name = format!("{tag}-{}-{}", history.name, c.name());
        tracing::info!(run = %name, "lifetime: starting");
        let r = run::run(&name, c, history, setup, timing).await.map_err(|e| e.to_string())?;
        let s = report::summarise(&r, timing, &tasks);
        tracing::info!(run = %name, cost = s.cost_usd, nodes = s.nodes_launched, evictions = s.evictions, "lifetime: done");
        run::write_json(&r.dir, "recording.json", &r.recording).map_err(|e| format!("writing the recording: {e}"))?;
        runs.push(RunMeta { contender: c, dir: rel(&r.dir), stand_in_errors: r.stand_in_errors.clone(), driver_errors: r.driver_errors.clone(), watch_errors: r.recording.watch_errors.clone() });
        copy_run(&r.dir, &out.join(c.name()));
        summaries.push(s);
    }
    let (bound_curve, bound_usd) = report::bound_curve(history, setup, bound_step_s)?;
    let table = report::table(history, timing, &summaries, bound_usd);
    let svg = report::plot(history, &summaries, &bound_curve)?;
    let cmp = Comparison { history: history.clone(), timing, consolidation_policy: setup.consolidation_policy.clone(), budget: setup.budget.clone(), summaries, bound_usd, bound_curve, runs };
    run::write_json(out, "results.json", &cmp).map_err(|e| format!("writing results.json: {e}"))?;
    std::fs::write(out.join("table.md"), &table).map_err(|e| format!("writing table.md: {e}"))?;
    std::fs::write(out.join("cost.svg"), svg).map_err(|e| format!("writing cost.svg: {e}"))?;
    Ok(cmp)
}

fn rel(p: &Path) -> String {
    p.strip_prefix(stowage_e2e::repo_root()).unwrap_or(p).display().to_string()
}

/// Keeps a run's evidence with the results: the recording, the NodeClaims left at the end and
/// Karpenter's log.
fn copy_run(from: &Path, to: &PathBuf) {
    let _ = std::fs::create_dir_all(to);
    for f in ["recording.json", "nodeclaims-at-end.json", "karpenter.log"] {
        let _ = std::fs::copy(from.join(f), to.join(f));
    }
}
