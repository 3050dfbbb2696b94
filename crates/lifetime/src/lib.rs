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
pub async fn compare(tag: &str, history: &History, setup: &Setup, timing: Timing, contenders: &[Contender], out: &Path) -> Result<Comparison, String> {
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
    let (bound_curve, bound_usd) = report::bound_curve(history, setup)?;
    let cmp = Comparison {
        history: history.clone(),
        timing,
        consolidation_policy: setup.consolidation_policy.clone(),
        budget: setup.budget.clone(),
        stowage_consolidation: contenders.contains(&Contender::Stowage).then(|| setup.stowage_weights.consolidation.clone()),
        summaries,
        bound_usd,
        bound_usd_sampled: None,
        bound_curve,
        runs,
    };
    run::write_json(out, "results.json", &cmp).map_err(|e| format!("writing results.json: {e}"))?;
    write_views(out, &cmp)?;
    Ok(cmp)
}

/// Writes `table.md` and `cost.svg` of `cmp` into `out`.
fn write_views(out: &Path, cmp: &Comparison) -> Result<(), String> {
    std::fs::write(out.join("table.md"), report::table(&cmp.history, cmp.timing, &cmp.summaries, cmp.bound_usd)).map_err(|e| format!("writing table.md: {e}"))?;
    std::fs::write(out.join("cost.svg"), report::plot(&cmp.history, &cmp.summaries, &cmp.bound_curve)?).map_err(|e| format!("writing cost.svg: {e}"))
}

/// Recomputes the bound of a comparison already written to `dir` (its `results.json`: history,
/// timing, summaries) with `setup`'s catalog, and rewrites `results.json`'s bound, `table.md` and
/// `cost.svg`; the runs are not repeated. The bound depends only on the history, the catalog and the
/// planner, so a recorded run can be set beside a better bound. Only the bound's fields of
/// `results.json` are rewritten, the rest of the text is kept byte for byte (read back, its floats
/// could move in the last digit). Returns (the bound before, after).
pub fn rebound(dir: &Path, setup: &Setup) -> Result<(f64, f64), String> {
    let path = dir.join("results.json");
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut cmp: Comparison = serde_json::from_str(&text).map_err(|e| at(&e))?;
    let (curve, after) = report::bound_curve(&cmp.history, setup)?;
    // The first rebound keeps the bound the runs were written with.
    let fields = BoundFields { bound_usd: after, bound_usd_sampled: cmp.bound_usd_sampled.or(Some(cmp.bound_usd)), bound_curve: &curve };
    let written = stowage_bench::splice_fields(&text, "bound_usd", "runs", &fields).ok_or_else(|| at(&"the bound's fields are not where `compare` writes them (bound_usd ... before runs)"))?;
    let check: Comparison = serde_json::from_str(&written).map_err(|e| at(&format_args!("the rewritten text does not read back: {e}")))?;
    if (check.bound_usd - after).abs() > 1e-9 * after.abs().max(1.0) || check.summaries.len() != cmp.summaries.len() {
        return Err(at(&"the rewritten text does not read back as written"));
    }
    std::fs::write(&path, written).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let before = cmp.bound_usd;
    (cmp.bound_usd, cmp.bound_curve) = (after, curve);
    write_views(dir, &cmp)?;
    Ok((before, after))
}

/// The bound's fields of [`Comparison`], in its order.
#[derive(serde::Serialize)]
struct BoundFields<'a> {
    bound_usd: f64,
    bound_usd_sampled: Option<f64>,
    bound_curve: &'a report::BoundCurve,
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

#[cfg(test)]
mod tests {
    use super::*;
    use history::{Action, App, Event, Spread};

    #[test]
    fn rebound_rewrites_the_bound_of_a_written_comparison_and_keeps_the_first() {
        let app = App { name: "a".into(), replicas: 4, cpu_m: 1000, memory_mi: 1024, spread: Spread::Zone, max_unavailable: 1 };
        let history = History { name: "t".into(), description: "test".into(), duration_s: 7200.0, events: vec![Event { at_s: 0.0, action: Action::Deploy(app) }] };
        let timing = Timing { compression: 60.0, boot_s: 60.0, consolidate_after_s: 60.0, scale_timers: true };
        let summary = report::Summary { contender: "stowage".into(), cost_usd: 1.0, curve: vec![(0.0, 0.5), (2.0, 0.5)], ..Default::default() };
        let cmp = Comparison {
            history,
            timing,
            consolidation_policy: "WhenEmpty".into(),
            budget: "10%".into(),
            stowage_consolidation: None,
            summaries: vec![summary],
            bound_usd: 123.0,
            bound_usd_sampled: None,
            bound_curve: vec![],
            runs: vec![],
        };
        let dir = std::env::temp_dir().join(format!("stowage-rebound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        run::write_json(&dir, "results.json", &cmp).unwrap();
        let written = std::fs::read_to_string(dir.join("results.json")).unwrap();
        let setup = Setup::default_setup();
        let (before, after) = rebound(&dir, &setup).unwrap();
        let rewritten = std::fs::read_to_string(dir.join("results.json")).unwrap();
        let head = written.find("\"bound_usd\"").unwrap();
        assert_eq!(rewritten[..head], written[..head], "the text before the bound is kept");
        assert_eq!(rewritten[rewritten.find("\"runs\"").unwrap()..], written[written.find("\"runs\"").unwrap()..], "and after it");
        assert_eq!(before, 123.0);
        let (_, exact) = report::bound_curve(&cmp.history, &setup).unwrap();
        assert!(after > 0.0 && (after - exact).abs() < 1e-9, "{after} vs {exact}");
        // Again: the written bound is read back, and the first (sampled) one stays on record.
        let (again_before, _) = rebound(&dir, &setup).unwrap();
        assert!((again_before - after).abs() < 1e-9);
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(json["bound_usd_sampled"], 123.0);
        assert!(std::fs::read_to_string(dir.join("table.md")).unwrap().contains("lower bound of the demand"));
        assert!(dir.join("cost.svg").exists());
        // A directory without results.json says which file it could not read.
        let err = rebound(&dir.join("nowhere"), &setup).unwrap_err();
        assert!(err.contains("nowhere/results.json"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
