//! The bench's outputs: Markdown tables (for people and the README), CSV and JSON (for tools).

use std::fmt::Write as _;
use std::path::Path;

use super::{Results, Row};

fn f(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

fn u(x: Option<usize>) -> String {
    x.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.2}%", v * 100.0),
        _ => "-".into(),
    }
}

/// The checker's verdict as a table cell.
pub fn verdict(r: &Row) -> String {
    if let Some(e) = &r.error {
        return format!("ERROR: {}", one_line(e, 80));
    }
    match r.valid {
        Some(true) => "valid".into(),
        Some(false) => {
            let what = if r.verdict.as_deref() == Some("undecided") { "UNDECIDED" } else { "INVALID" };
            format!("{what} ({}): {}", r.violations, one_line(r.first_violation.as_deref().unwrap_or(""), 80))
        }
        None => "-".into(),
    }
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '|'], " ");
    if s.chars().count() > max { format!("{}…", s.chars().take(max).collect::<String>()) } else { s }
}

/// Every row: cost, nodes, unschedulable pods, time, lower bound, gap, and the ratios.
pub(crate) fn main_table(res: &Results) -> String {
    let mut s = String::new();
    s.push_str("| workload | pods | planner | weights | $/h | nodes | unsched | time ms | MILP bound | gap | status | $/h bound | ×greedy | ×bound | check |\n");
    s.push_str("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n");
    for r in &res.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.pods,
            r.planner,
            r.weights,
            f(r.cost_per_hour, 4),
            u(r.nodes),
            u(r.unschedulable),
            f(r.time_ms, 1),
            f(r.lower_bound, 4),
            pct(r.gap),
            r.status,
            f(r.bound_per_hour, 4),
            f(r.vs_greedy, 4),
            f(r.vs_bound, 4),
            verdict(r)
        );
    }
    s
}

/// A peer cell: the median run's value and, over several runs, the spread `[min–max]`.
fn with_range(v: String, range: Option<(String, String)>) -> String {
    match range {
        Some((lo, hi)) if lo != hi => format!("{v} [{lo}–{hi}]"),
        _ => v,
    }
}

/// The cost ratio stowage / Karpenter, or why there is none: a plan that leaves more pods pending is
/// cheaper for it, so the ratio is only given when both leave the same number pending.
fn cost_ratio(ours: Option<&Row>, k: &Row) -> String {
    let (Some(o), Some(oc), Some(kc)) = (ours, ours.and_then(|o| o.cost_per_hour), k.cost_per_hour) else {
        return "-".into();
    };
    match (o.unschedulable, k.unschedulable) {
        (Some(a), Some(b)) if a != b => format!("not comparable ({a} vs {b} pending)"),
        _ if kc > 0.0 => format!("{:.4}", oc / kc),
        _ => "-".into(),
    }
}

/// stowage (MILP, else greedy, under the first weights profile) beside Karpenter, per workload the peer
/// ran on. Karpenter's columns are its median run by cost, with the spread over its runs in brackets.
pub fn peer_table(res: &Results) -> String {
    let peers: Vec<&Row> = res.rows.iter().filter(|r| r.planner == "karpenter").collect();
    if peers.is_empty() {
        return String::new();
    }
    let first_weights = res.settings.weights.first().cloned().unwrap_or_default();
    let mut s = String::new();
    s.push_str("| workload | pods | stowage | stowage $/h | Karpenter $/h | cost stowage/Karpenter | stowage nodes | Karpenter nodes | stowage unsched | Karpenter unsched | stowage ms | Karpenter ms | time stowage/Karpenter | Karpenter wall ms | Karpenter check | runs |\n");
    s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
    for k in peers {
        let ours = ["milp", "greedy"].iter().find_map(|p| res.rows.iter().find(|r| r.workload == k.workload && r.planner == *p && r.weights == first_weights && r.error.is_none()));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let fr = |r: Option<(f64, f64)>, d: usize| r.map(|(a, b)| (f(Some(a), d), f(Some(b), d)));
        let ur = |r: Option<(usize, usize)>| r.map(|(a, b)| (a.to_string(), b.to_string()));
        let invalid_runs = k.runs.iter().filter(|r| r.verdict.as_deref() != Some("valid")).count();
        let check = if k.runs.len() > 1 && invalid_runs > 0 { format!("{} ({invalid_runs} of {} runs not valid)", verdict(k), k.runs.len()) } else { verdict(k) };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            k.workload,
            k.pods,
            ours.map(|o| o.planner.as_str()).unwrap_or("-"),
            f(ours.and_then(|o| o.cost_per_hour), 4),
            with_range(f(k.cost_per_hour, 4), fr(k.run_range(|r| r.cost_per_hour), 4)),
            cost_ratio(ours, k),
            u(ours.and_then(|o| o.nodes)),
            with_range(u(k.nodes), ur(k.run_range(|r| r.nodes))),
            u(ours.and_then(|o| o.unschedulable)),
            with_range(u(k.unschedulable), ur(k.run_range(|r| r.unschedulable))),
            f(ours.and_then(|o| o.time_ms), 1),
            with_range(f(k.time_ms, 1), fr(k.run_range(|r| r.time_ms), 0)),
            f(ratio(ours.and_then(|o| o.time_ms), k.time_ms), 3),
            f(k.wall_ms, 0),
            check,
            k.runs.len().max(1)
        );
    }
    s
}

pub(crate) fn replay_table(res: &Results) -> String {
    if res.replays.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    s.push_str("| replay | planner | pods | batches | total $ | node-hours | nodes launched | peak nodes | never placed | invalid plans | fallbacks | planner s |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &res.replays {
        if let Some(e) = &r.error {
            let _ = writeln!(s, "| {} | {} | ERROR: {} |||||||||| |", r.name, r.planner, one_line(e, 100));
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} | {:.1} | {} | {} | {} | {} | {} | {:.1} |",
            r.name,
            r.planner,
            r.pods,
            r.batches,
            r.total_cost,
            r.node_hours,
            r.nodes_launched,
            r.peak_nodes,
            r.never_placed,
            r.invalid_plans,
            r.fallbacks,
            r.plan_ms / 1000.0
        );
    }
    s
}

/// All tables as one Markdown document.
pub fn markdown(res: &Results) -> String {
    let mut s = String::new();
    let st = &res.settings;
    let _ = writeln!(
        s,
        "Settings: time budget {} ms, gap {}, HiGHS threads {}, {} parallel workers, solvers {}, weights {}{}.\n",
        st.time_budget_ms,
        st.gap,
        st.threads,
        st.jobs,
        st.solvers.join(", "),
        st.weights.join(", "),
        if st.peer.is_some() {
            format!(", peer karpenter ({} runs per workload, seeds 1-{}; its columns show the median run by cost and [min–max] over the runs)", st.peer_runs, st.peer_runs)
        } else {
            String::new()
        }
    );
    s.push_str(&main_table(res));
    let p = peer_table(res);
    if !p.is_empty() {
        s.push_str("\nstowage vs Karpenter:\n\n");
        s.push_str(&p);
    }
    let r = replay_table(res);
    if !r.is_empty() {
        s.push_str("\nTrace replays:\n\n");
        s.push_str(&r);
    }
    s
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn csv_f(x: Option<f64>) -> String {
    x.filter(|v| v.is_finite()).map(|v| format!("{v}")).unwrap_or_default()
}

pub fn csv(res: &Results) -> String {
    let mut s = String::from(
        "workload,group,pods,catalog,planner,weights,cost_per_hour,nodes,unschedulable,time_ms,wall_ms,status,objective,lower_bound,gap,bound_per_hour,vs_greedy,vs_lower_bound,vs_bound,valid,violations,first_violation,error\n",
    );
    for r in &res.rows {
        let cells = [
            csv_cell(&r.workload),
            csv_cell(&r.group),
            r.pods.to_string(),
            csv_cell(&r.catalog),
            csv_cell(&r.planner),
            csv_cell(&r.weights),
            csv_f(r.cost_per_hour),
            r.nodes.map(|v| v.to_string()).unwrap_or_default(),
            r.unschedulable.map(|v| v.to_string()).unwrap_or_default(),
            csv_f(r.time_ms),
            csv_f(r.wall_ms),
            csv_cell(&r.status),
            csv_f(r.objective),
            csv_f(r.lower_bound),
            csv_f(r.gap),
            csv_f(r.bound_per_hour),
            csv_f(r.vs_greedy),
            csv_f(r.vs_lower_bound),
            csv_f(r.vs_bound),
            r.valid.map(|v| v.to_string()).unwrap_or_default(),
            r.violations.to_string(),
            csv_cell(r.first_violation.as_deref().unwrap_or("")),
            csv_cell(r.error.as_deref().unwrap_or("")),
        ];
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}

pub(crate) fn replay_csv(res: &Results) -> String {
    let mut s = String::from("replay,planner,pods,windows,batches,total_cost,node_hours,nodes_launched,peak_nodes,never_placed,invalid_plans,fallbacks,plan_ms,error\n");
    for r in &res.replays {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_cell(&r.name),
            r.planner,
            r.pods,
            r.windows,
            r.batches,
            r.total_cost,
            r.node_hours,
            r.nodes_launched,
            r.peak_nodes,
            r.never_placed,
            r.invalid_plans,
            r.fallbacks,
            r.plan_ms,
            csv_cell(r.error.as_deref().unwrap_or(""))
        );
    }
    s
}

/// The files [`write_all`] writes.
pub const RESULT_FILES: [&str; 6] = ["results.md", "results.csv", "replays.csv", "results.json", "cost-vs-bound.svg", "time-vs-pods.svg"];
/// The marker of a run that has not written its results (yet): interrupted, or still running.
pub const INCOMPLETE: &str = "INCOMPLETE";

fn remove_if_present(p: &Path) -> Result<(), String> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", p.display())),
        _ => Ok(()),
    }
}

/// Before a run: removes the previous run's results from `dir` and leaves the [`INCOMPLETE`] marker,
/// which [`write_all`] removes once the new results are all written. An interrupted run so leaves no
/// stale results that look current.
pub fn start(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for name in RESULT_FILES {
        remove_if_present(&dir.join(name))?;
    }
    let note = "a `stowage bench` run started here and has not written its results: it was interrupted, or is still running\n";
    stowage_input::output::write_atomic(&dir.join(INCOMPLETE), note.as_bytes())
}

/// Writes `results.md`, `results.csv`, `replays.csv`, `results.json` and the figures into `dir`, each
/// atomically, then removes the [`INCOMPLETE`] marker.
pub fn write_all(res: &Results, dir: &Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut put = |name: &str, text: String| -> Result<(), String> {
        let p = dir.join(name);
        stowage_input::output::write_atomic(&p, text.as_bytes())?;
        written.push(p.display().to_string());
        Ok(())
    };
    put("results.md", markdown(res))?;
    put("results.csv", csv(res))?;
    if !res.replays.is_empty() {
        put("replays.csv", replay_csv(res))?;
    }
    put("results.json", serde_json::to_string_pretty(res).map_err(|e| e.to_string())? + "\n")?;
    put("cost-vs-bound.svg", super::plot::cost_vs_bound(res)?)?;
    put("time-vs-pods.svg", super::plot::time_vs_pods(res)?)?;
    remove_if_present(&dir.join(INCOMPLETE))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cost ratio is only given when both plans leave the same number of pods pending.
    #[test]
    fn a_cost_ratio_needs_the_same_pending_pods() {
        let row = |cost: f64, unsched: usize| Row { cost_per_hour: Some(cost), unschedulable: Some(unsched), ..Default::default() };
        assert_eq!(cost_ratio(Some(&row(8.0, 0)), &row(10.0, 0)), "0.8000");
        assert_eq!(cost_ratio(Some(&row(8.0, 0)), &row(6.0, 3)), "not comparable (0 vs 3 pending)");
        assert_eq!(cost_ratio(None, &row(6.0, 3)), "-");
        assert_eq!(with_range("2".into(), Some(("1".into(), "3".into()))), "2 [1–3]");
        assert_eq!(with_range("2".into(), Some(("2".into(), "2".into()))), "2");
    }

    /// An interrupted run leaves no previous results that look current: `start` removes them and
    /// leaves the marker, which only a complete `write_all` removes.
    #[test]
    fn an_interrupted_run_leaves_no_stale_results() {
        let dir = std::env::temp_dir().join(format!("stowage-bench-start-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("results.md"), "an earlier run").unwrap();
        std::fs::write(dir.join("notes.txt"), "not ours").unwrap();
        start(&dir).unwrap();
        assert!(!dir.join("results.md").exists(), "the previous results are gone");
        assert!(dir.join(INCOMPLETE).exists() && dir.join("notes.txt").exists());
        write_all(&Results::default(), &dir).unwrap();
        assert!(!dir.join(INCOMPLETE).exists() && dir.join("results.md").exists() && dir.join("time-vs-pods.svg").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
