//! From recordings to the benchmark's numbers: per controller, the integrated cost, node-hours, nodes
//! launched, evictions, pod start latency and long waits; beside them the integral of the lower bound
//! on the cost of the history's demand; a table and a plot of $/h over time.
//!
//! All money and hours are in **history time** (wall seconds × compression); latencies are given in
//! both (wall seconds are what the controllers' unscaled timers produce).
//!
//! The bound: at every moment the history's demand changes (an event, a Job's end), the pods the
//! history asks for from then on (each app's replicas; each Job's pods from its creation for its
//! runtime, as if they started at once) are planned from scratch on an empty cluster with the same NodePool and catalog, with price-only weights
//! (no per-node, preference or NodePool-weight terms) and kube-scheduler's own hostname-spread rule; the
//! MILP's proven lower bound is a lower bound on the $/h of any placement of that demand, so its
//! integral bounds the cost of any controller that runs the history's demand (no pod pending). The
//! demand is constant between two such moments, so the integral is exact, not sampled. (Before
//! 2026-12-07 the demand was sampled every 10 min of history and held: a Job created a minute after
//! a sample and done before the next was missed, and batch's waves start just after samples.)

use std::collections::{BTreeMap, BTreeSet};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use stowage_core::solve::{Planner, plan_cluster};
use stowage_core::weights::{ConsolidationCosts, Weights};

use crate::history::{Action, History, NAMESPACE, objects_of};
use crate::observe::{PodLife, Recording};
use crate::run::{Contender, RunOutput};
use crate::setup::{Setup, Timing};

const HOUR: f64 = 3600.0;
/// A pod that waited longer than this (history seconds) to run is counted as a long wait.
pub const LONG_WAIT_S: f64 = 300.0;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub contender: String,
    /// USD over the history (history time).
    pub cost_usd: f64,
    pub node_hours: f64,
    pub nodes_launched: usize,
    pub evictions: usize,
    pub pods: usize,
    /// Pods that never ran before the history ended.
    pub never_ran: usize,
    /// Creation to Running, history seconds (wall seconds × compression).
    pub start_p50_s: f64,
    pub start_p99_s: f64,
    /// The same in wall seconds.
    pub start_p50_wall_s: f64,
    pub start_p99_wall_s: f64,
    /// Pods that waited more than [`LONG_WAIT_S`] of history time (or never ran and existed that long).
    pub waited_over_5min: usize,
    /// Tasks the history asked for that neither ran their whole runtime nor were still running or
    /// pending at the end: work the cluster lost (a failed Job), which must not pass for a saving.
    pub tasks_lost: usize,
    /// Task pods that ran and stopped before their runtime: evicted, or their Node deleted under them
    /// (the work is thrown away; the Job runs the task again, so it is not lost). `None` in results
    /// written before the recorder watched Nodes (shown as `-`: not measured, not zero).
    #[serde(default)]
    pub tasks_cut_short: Option<usize>,
    /// $/h at each history minute.
    pub curve: Vec<(f64, f64)>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The tasks each Job of the history asks for (its name: its pod count).
pub fn task_counts(h: &History) -> BTreeMap<String, usize> {
    h.events.iter().filter_map(|e| if let Action::Job(j) = &e.action { Some((j.name.clone(), j.count as usize)) } else { None }).collect()
}

/// When a task pod's work stopped, if it did before the run ended: when the pod ended or its Node was
/// deleted, whichever came first (a pod outlives its Node until Pod GC deletes it: observe.rs).
fn task_stop(r: &Recording, p: &PodLife) -> Option<f64> {
    let gone = p.node.as_deref().and_then(|n| r.nodes_gone.get(n)).copied();
    [p.ended_s, gone].into_iter().flatten().min_by(f64::total_cmp)
}

/// Whether a task pod that ran stopped before its runtime (1 % slack for the driver's tick).
fn cut_short(r: &Recording, k: f64, p: &PodLife) -> bool {
    let (Some(runtime), Some(run)) = (p.runtime_s, p.running_s) else { return false };
    task_stop(r, p).is_some_and(|stop| (stop - run) * k < runtime * 0.99)
}

/// Tasks of `expected` (Job: pod count) that did not complete: a pod completed when it ran its runtime
/// before it ended or lost its Node, and one still running or pending when the run ended is not lost.
fn tasks_lost(r: &Recording, k: f64, expected: &BTreeMap<String, usize>) -> usize {
    let mut done: BTreeMap<&str, usize> = BTreeMap::new();
    for p in r.pods.values() {
        if p.runtime_s.is_none() {
            continue;
        }
        let ok = match task_stop(r, p) {
            None => true,
            Some(_) => p.running_s.is_some() && !cut_short(r, k, p),
        };
        if ok {
            *done.entry(p.app.as_str()).or_default() += 1;
        }
    }
    expected.iter().map(|(job, n)| n.saturating_sub(done.get(job.as_str()).copied().unwrap_or(0))).sum()
}

/// The numbers of one run; `expected_tasks` is [`task_counts`] of its history.
pub fn summarise(run: &RunOutput, timing: Timing, expected_tasks: &BTreeMap<String, usize>) -> Summary {
    let r = &run.recording;
    let k = timing.compression;
    let end = r.end_s;
    let mut cost = 0.0;
    let mut hours = 0.0;
    for c in r.claims.values() {
        let h = (c.gone_s.unwrap_or(end).min(end) - c.launched_s).max(0.0) * k / HOUR;
        hours += h;
        cost += h * c.price;
    }
    let mut starts: Vec<f64> = Vec::new();
    let (mut never, mut long) = (0, 0);
    for p in r.pods.values() {
        match p.running_s {
            Some(run_s) => {
                let wait = run_s - p.created_s;
                starts.push(wait);
                if wait * k > LONG_WAIT_S {
                    long += 1;
                }
            }
            None => {
                // Deleted before it ran (a scale-down of a pending replica) or still pending at the end.
                let until = p.ended_s.unwrap_or(end);
                if p.ended_s.is_none() {
                    never += 1;
                }
                if (until - p.created_s) * k > LONG_WAIT_S {
                    long += 1;
                }
            }
        }
    }
    starts.sort_by(f64::total_cmp);
    let minutes = (end * k / 60.0).ceil() as usize;
    let curve = (0..=minutes)
        .map(|m| {
            let t = m as f64 * 60.0 / k;
            let rate: f64 = r.claims.values().filter(|c| c.launched_s <= t && c.gone_s.is_none_or(|g| g > t)).map(|c| c.price).sum();
            (m as f64 / 60.0, rate)
        })
        .collect();
    Summary {
        contender: run.contender.name().to_string(),
        cost_usd: cost,
        node_hours: hours,
        nodes_launched: r.claims.len(),
        evictions: r.pods.values().filter(|p| p.evicted).count(),
        pods: r.pods.len(),
        never_ran: never,
        start_p50_s: quantile(&starts, 0.5) * k,
        start_p99_s: quantile(&starts, 0.99) * k,
        start_p50_wall_s: quantile(&starts, 0.5),
        start_p99_wall_s: quantile(&starts, 0.99),
        waited_over_5min: long,
        tasks_lost: tasks_lost(r, k, expected_tasks),
        tasks_cut_short: Some(r.pods.values().filter(|p| cut_short(r, k, p)).count()),
        curve,
    }
}

/// The demand at history time `t`: pods per app or Job.
fn demand_at(h: &History, t: f64) -> BTreeMap<String, u32> {
    let mut d: BTreeMap<String, u32> = BTreeMap::new();
    for e in h.events.iter().take_while(|e| e.at_s <= t) {
        match &e.action {
            Action::Deploy(a) => {
                d.insert(a.name.clone(), a.replicas);
            }
            Action::Scale { app, replicas } => {
                d.insert(app.clone(), *replicas);
            }
            Action::Job(j) => {
                if e.at_s + j.runtime_s > t {
                    d.insert(j.name.clone(), j.count);
                }
            }
        }
    }
    d.retain(|_, n| *n > 0);
    d
}

/// Pod templates by app or Job name.
fn templates(h: &History) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for e in &h.events {
        if let (Action::Deploy(_) | Action::Job(_), Some(o)) = (&e.action, objects_of(&e.action).into_iter().next()) {
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_string();
            out.insert(name, o["spec"]["template"].clone());
        }
    }
    out
}

/// The MILP's proven lower bound ($/h) on running `demand` (see the module docs), or `None` if it
/// proved none. Pods the planner finds no place for at all
/// (an openb row larger than any instance type) are left out and it plans again: both controllers
/// leave those pending too, and the bound is of the demand that can run, without the pending penalty.
fn bound_of(demand: &BTreeMap<String, u32>, templates: &BTreeMap<String, Value>, setup: &Setup, weights: &Weights) -> Result<Option<f64>, String> {
    let mut left_out: BTreeSet<String> = BTreeSet::new();
    loop {
        let plan = plan_demand(demand, templates, setup, weights, &left_out)?;
        let cannot: Vec<String> = plan.unschedulable.iter().map(|u| u.pod.rsplit('/').next().unwrap_or(&u.pod).to_string()).filter(|p| !left_out.contains(p)).collect();
        if cannot.is_empty() {
            return Ok(plan.solver.lower_bound);
        }
        left_out.extend(cannot);
    }
}

fn plan_demand(demand: &BTreeMap<String, u32>, templates: &BTreeMap<String, Value>, setup: &Setup, weights: &Weights, left_out: &BTreeSet<String>) -> Result<stowage_core::plan::Plan, String> {
    let mut items = Vec::new();
    for (app, n) in demand {
        let t = templates.get(app).ok_or_else(|| format!("no template for {app}"))?;
        for i in (0..*n).filter(|i| !left_out.contains(&format!("{app}-{i}"))) {
            let mut labels = t["metadata"]["labels"].clone();
            if labels.is_null() {
                labels = json!({});
            }
            items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{app}-{i}"), "namespace": NAMESPACE, "labels": labels}, "spec": t["spec"]}));
        }
    }
    let pods = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let pools: String = setup.stowage_objects(Timing { compression: 1.0, boot_s: 0.0, consolidate_after_s: 0.0, scale_timers: false }).iter().map(|o| format!("---\n{}\n", o)).collect();
    let w = stowage_input::load_texts([(std::path::Path::new("<lifetime nodepool>"), pools.as_str()), (std::path::Path::new("<lifetime demand>"), pods.as_str())]).map_err(|e| e.to_string())?;
    let planner = Planner { time_budget: std::time::Duration::from_secs(3), gap: 0.005, ..Planner::milp() };
    plan_cluster(&w.cluster, &setup.catalog, weights, planner).map_err(|e| e.to_string())
}

/// $/h bound at history hours; `None` where the MILP proved no bound.
pub type BoundCurve = Vec<(f64, Option<f64>)>;

/// The history seconds at which its demand changes: 0, every event, and every Job's end (creation
/// plus runtime), within `[0, duration)`, ascending, each once. Between two of them the demand is
/// constant.
fn change_points(h: &History) -> Vec<f64> {
    let ends = h.events.iter().filter_map(|e| if let Action::Job(j) = &e.action { Some(e.at_s + j.runtime_s) } else { None });
    let mut t: Vec<f64> = std::iter::once(0.0).chain(h.events.iter().map(|e| e.at_s)).chain(ends).filter(|t| *t >= 0.0 && *t < h.duration_s).collect();
    t.sort_by(f64::total_cmp);
    t.dedup();
    t
}

/// The bound's curve, one point where the demand changes (its value holds until the next point;
/// cached by demand), and its integral in USD: exactly the integral over time of the bound of the
/// pods the history asks for at each moment. `None` points where the MILP proved no bound (the
/// integral then counts them as 0).
pub fn bound_curve(h: &History, setup: &Setup) -> Result<(BoundCurve, f64), String> {
    let templates = templates(h);
    let weights = stowage_bench::lifecycle::price_only();
    let mut cache: BTreeMap<Vec<(String, u32)>, Option<f64>> = BTreeMap::new();
    let mut curve = Vec::new();
    let mut integral = 0.0;
    let points = change_points(h);
    for (i, &t) in points.iter().enumerate() {
        let d = demand_at(h, t);
        let key: Vec<(String, u32)> = d.iter().map(|(a, n)| (a.clone(), *n)).collect();
        let b = match cache.get(&key) {
            Some(b) => *b,
            None => {
                let b = if d.is_empty() { Some(0.0) } else { bound_of(&d, &templates, setup, &weights)? };
                cache.insert(key, b);
                b
            }
        };
        let next = points.get(i + 1).copied().unwrap_or(h.duration_s);
        integral += b.unwrap_or(0.0) * (next - t) / HOUR;
        curve.push((t / HOUR, b));
    }
    Ok((curve, integral))
}

/// The side-by-side table (markdown).
pub fn table(h: &History, timing: Timing, rows: &[Summary], bound_usd: f64) -> String {
    let mut s = format!(
        "History `{}`: {} ({} h of history, compressed {}x; boot {} s, consolidateAfter {} s of history; the controllers' disruption timers {})\n\n",
        h.name,
        h.description,
        h.duration_s / HOUR,
        timing.compression,
        timing.boot_s,
        timing.consolidate_after_s,
        if timing.scale_timers {
            format!("compressed too (divided by {}, floor {} ms; stowage's recent-move window and Job lost-work payback alike)", timing.timer_scale(), crate::setup::TIMER_FLOOR.as_millis())
        } else {
            "at their real-time values".to_string()
        }
    );
    s.push_str("| controller | cost ($) | vs bound | node-hours | nodes launched | evictions | pod start p50 / p99 (history s) | p50 / p99 (wall s) | waited > 5 min | never ran | tasks cut short | tasks lost |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let vs = if bound_usd > 0.0 { format!("{:.2}", r.cost_usd / bound_usd) } else { "-".into() };
        s.push_str(&format!(
            "| {} | {:.2} | {} | {:.1} | {} | {} | {:.0} / {:.0} | {:.1} / {:.1} | {} | {} | {} | {} |\n",
            r.contender,
            r.cost_usd,
            vs,
            r.node_hours,
            r.nodes_launched,
            r.evictions,
            r.start_p50_s,
            r.start_p99_s,
            r.start_p50_wall_s,
            r.start_p99_wall_s,
            r.waited_over_5min,
            r.never_ran,
            r.tasks_cut_short.map_or("-".to_string(), |n| n.to_string()),
            r.tasks_lost
        ));
    }
    s.push_str(&format!("| lower bound of the demand | {bound_usd:.2} | 1.00 | | | | | | | | | |\n"));
    s
}

fn color(who: &str) -> RGBColor {
    match who {
        "karpenter" => RGBColor(44, 160, 44),
        "stowage" => RGBColor(214, 39, 40),
        _ => RGBColor(80, 80, 80),
    }
}

/// The bound's points as a step line: each value held until the next point (or `xmax`); points
/// without a bound are drawn at 0, as the integral counts them.
fn steps(bound: &[(f64, Option<f64>)], xmax: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, (t, b)) in bound.iter().enumerate() {
        let until = bound.get(i + 1).map_or(xmax, |n| n.0);
        let v = b.unwrap_or(0.0);
        out.extend([(*t, v), (until, v)]);
    }
    out
}

/// $/h over history hours for each controller and the bound (SVG).
pub fn plot(h: &History, rows: &[Summary], bound: &[(f64, Option<f64>)]) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw the figure: {e}");
    let xmax = h.duration_s / HOUR;
    let ymax = rows.iter().flat_map(|r| r.curve.iter().map(|p| p.1)).chain(bound.iter().filter_map(|b| b.1)).fold(0.1_f64, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{}: cost per hour over the history", h.name), ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(|e| err(&e))?;
        chart.configure_mesh().x_desc("history hours").y_desc("$ / h").draw().map_err(|e| err(&e))?;
        for r in rows {
            let c = color(&r.contender);
            chart
                .draw_series(LineSeries::new(r.curve.iter().copied().filter(|p| p.0 <= xmax), c.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(r.contender.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        let gray = color("bound");
        chart
            .draw_series(LineSeries::new(steps(bound, xmax), gray.stroke_width(1)))
            .map_err(|e| err(&e))?
            .label("lower bound of the demand")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], gray.stroke_width(1)));
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw().map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// Everything of one history's comparison, as results.json holds it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub history: History,
    pub timing: Timing,
    /// The NodePool's `consolidationPolicy` and disruption budget (`nodes`), the same for every run.
    pub consolidation_policy: String,
    pub budget: String,
    /// stowage's consolidation costs, in history seconds (before [`Timing::consolidation_costs`]);
    /// absent in runs before 2026-12-07's jobfix run, which ran the defaults of their commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stowage_consolidation: Option<ConsolidationCosts>,
    pub summaries: Vec<Summary>,
    pub bound_usd: f64,
    /// Where the bound was recomputed after the runs (`crate::rebound`): the bound they were written
    /// with, sampled every 10 min of history before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_usd_sampled: Option<f64>,
    pub bound_curve: Vec<(f64, Option<f64>)>,
    pub runs: Vec<RunMeta>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RunMeta {
    pub contender: Contender,
    pub dir: String,
    pub stand_in_errors: Vec<String>,
    pub driver_errors: Vec<String>,
    pub watch_errors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{App, Job, Spread};
    use crate::observe::ClaimLife;

    fn history() -> History {
        let app = App { name: "a".into(), replicas: 4, cpu_m: 1000, memory_mi: 1024, spread: Spread::Zone, max_unavailable: 1 };
        History {
            name: "t".into(),
            description: "test".into(),
            duration_s: 3.0 * HOUR,
            events: vec![
                crate::history::Event { at_s: 0.0, action: Action::Deploy(app) },
                crate::history::Event { at_s: HOUR, action: Action::Scale { app: "a".into(), replicas: 8 } },
                crate::history::Event { at_s: HOUR, action: Action::Job(Job { name: "j".into(), count: 3, cpu_m: 2000, memory_mi: 2048, runtime_s: 1800.0 }) },
            ],
        }
    }

    #[test]
    fn demand_follows_scales_and_job_runtimes() {
        let h = history();
        assert_eq!(demand_at(&h, 10.0), BTreeMap::from([("a".to_string(), 4)]));
        assert_eq!(demand_at(&h, HOUR + 10.0), BTreeMap::from([("a".to_string(), 8), ("j".to_string(), 3)]));
        assert_eq!(demand_at(&h, 2.0 * HOUR), BTreeMap::from([("a".to_string(), 8)]));
    }

    #[test]
    fn the_bound_grows_with_demand_and_is_below_a_feasible_packing() {
        let h = history();
        let setup = Setup::default_setup();
        let (curve, integral) = bound_curve(&h, &setup).unwrap();
        // The demand changes at 0 (4 pods), 1 h (8 + the Job's 3) and 1.5 h (the Job ends: 8).
        let at: Vec<f64> = curve.iter().map(|p| p.0).collect();
        assert_eq!(at, vec![0.0, 1.0, 1.5]);
        let b: Vec<f64> = curve.iter().map(|p| p.1.expect("a bound at every change")).collect();
        assert!(b[0] > 0.0 && b[1] > b[2] && b[2] > b[0], "{curve:?}");
        // 4 pods of 1 CPU fit 4 c6i.large-sized nodes at most; the cheapest type's price times 4 is a
        // feasible packing's cost, so the bound is below it.
        let cheapest = setup.catalog.types.iter().flat_map(|t| t.offerings.iter().map(|o| o.price)).fold(f64::INFINITY, f64::min);
        assert!(b[0] <= 4.0 * cheapest + 1e-9, "bound {} vs {}", b[0], 4.0 * cheapest);
        // Each value holds until the next change: 1 h, 0.5 h, then 1.5 h to the end.
        let exact = b[0] * 1.0 + b[1] * 0.5 + b[2] * 1.5;
        assert!((integral - exact).abs() < 1e-9, "{integral} vs {exact}");
    }

    #[test]
    fn the_demand_changes_at_events_and_job_ends_inside_the_history() {
        let mut h = history();
        // A Job that outlives the history adds its start, not its end.
        h.events.push(crate::history::Event { at_s: 2.5 * HOUR, action: Action::Job(Job { name: "late".into(), count: 1, cpu_m: 100, memory_mi: 64, runtime_s: HOUR }) });
        assert_eq!(change_points(&h), vec![0.0, HOUR, 1.5 * HOUR, 2.5 * HOUR]);
        let steps = steps(&[(0.0, Some(2.0)), (1.0, None)], 3.0);
        assert_eq!(steps, vec![(0.0, 2.0), (1.0, 2.0), (1.0, 0.0), (3.0, 0.0)]);
    }

    #[test]
    fn summaries_integrate_cost_in_history_time_and_count_evictions_and_waits() {
        let timing = Timing { compression: 60.0, boot_s: 60.0, consolidate_after_s: 60.0, scale_timers: true };
        let mut r = Recording { end_s: 120.0, ..Default::default() };
        // 1 $/h for 60 wall s = 1 history hour; the second claim is still up at the end (60 wall s).
        r.claims.insert("a".into(), ClaimLife { name: "a".into(), price: 1.0, launched_s: 0.0, gone_s: Some(60.0), ..Default::default() });
        r.claims.insert("b".into(), ClaimLife { name: "b".into(), price: 2.0, launched_s: 60.0, gone_s: None, ..Default::default() });
        r.pods.insert("1".into(), PodLife { created_s: 0.0, running_s: Some(2.0), evicted: true, ..Default::default() });
        r.pods.insert("2".into(), PodLife { created_s: 0.0, running_s: Some(10.0), ..Default::default() });
        r.pods.insert("3".into(), PodLife { created_s: 100.0, ..Default::default() });
        let run = RunOutput { contender: Contender::Stowage, recording: r, dir: Default::default(), stand_in_errors: vec![], driver_errors: vec![] };
        let s = summarise(&run, timing, &BTreeMap::new());
        assert!((s.cost_usd - 3.0).abs() < 1e-9, "{}", s.cost_usd);
        assert!((s.node_hours - 2.0).abs() < 1e-9);
        assert_eq!((s.nodes_launched, s.evictions, s.never_ran), (2, 1, 1));
        // Waits 2 s and 10 s of wall time = 120 s and 600 s of history: one over 5 min; the pod never run
        // existed 20 wall s = 1200 history s.
        assert_eq!(s.waited_over_5min, 2);
        assert_eq!(s.curve[30].1, 1.0);
        assert_eq!(s.curve[90].1, 2.0);
    }

    #[test]
    fn a_task_cut_short_and_not_run_again_is_lost_and_one_run_again_is_not() {
        let task = |app: &str, running: Option<f64>, ended: Option<f64>| PodLife { app: app.into(), created_s: 0.0, running_s: running, ended_s: ended, runtime_s: Some(600.0), ..Default::default() };
        let mut r = Recording { end_s: 100.0, ..Default::default() };
        // k = 60: a 600 s task needs 10 wall s. Job a: one pod cut at 3 s, its replacement ran 10 s.
        r.pods.insert("a1".into(), task("a", Some(1.0), Some(4.0)));
        r.pods.insert("a2".into(), task("a", Some(5.0), Some(15.0)));
        // Job b (2 tasks): one cut short and never run again, one still running at the end.
        r.pods.insert("b1".into(), task("b", Some(1.0), Some(2.0)));
        r.pods.insert("b2".into(), task("b", Some(95.0), None));
        // Job c: pending at the end (never ran; counted there, not here).
        r.pods.insert("c1".into(), task("c", None, None));
        let expected: BTreeMap<String, usize> = [("a".to_string(), 1), ("b".to_string(), 2), ("c".to_string(), 1)].into();
        assert_eq!(tasks_lost(&r, 60.0, &expected), 1);
        let cut: Vec<&str> = r.pods.iter().filter(|(_, p)| cut_short(&r, 60.0, p)).map(|(id, _)| id.as_str()).collect();
        assert_eq!(cut, ["a1", "b1"]);

        // Job d: its pod "succeeds" at its runtime (the stand-in keeps it running), but its Node was
        // deleted 2 wall s into the run: cut short and lost.
        let mut on_node = task("d", Some(1.0), Some(11.0));
        on_node.node = Some("n-1".into());
        r.pods.insert("d1".into(), on_node);
        r.nodes_gone.insert("n-1".into(), 3.0);
        let expected: BTreeMap<String, usize> = [("d".to_string(), 1)].into();
        assert_eq!(tasks_lost(&r, 60.0, &expected), 1);
        assert!(cut_short(&r, 60.0, &r.pods["d1"]));
        // A Node that went after the task ran its runtime cuts nothing.
        r.nodes_gone.insert("n-1".into(), 12.0);
        assert_eq!(tasks_lost(&r, 60.0, &expected), 0);
        assert!(!cut_short(&r, 60.0, &r.pods["d1"]));
    }
}
