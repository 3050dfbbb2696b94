//! The solver driver: greedy plan → MILP under a time budget, started from the greedy plan → replay →
//! the better of the two. It owns the clock and every fallback decision; the encoding never reads the
//! clock.
//!
//! * The MILP phase gets what is left of the budget after the greedy plan.
//! * Its plan is shrunk (`greedy::downsize`), ordered and replayed through kube-scheduler's filters.
//!   If HiGHS fails, finds no integer solution, or its plan does not replay, the greedy plan is
//!   returned with status `fallback` and the reason.
//! * The returned plan never costs more than the greedy plan under the same weights.

use std::time::{Duration, Instant};

use super::milp::{self, Options};
use super::problem::Problem;
use super::{greedy, objective, order_placements, Outcome};
use crate::plan::{Phase, SolverReport, Status};

#[derive(Clone, Copy, Debug)]
pub struct DriverOptions {
    pub budget: Duration,
    /// Target relative gap: stop when (objective − lower bound) / objective ≤ gap.
    pub gap: f64,
    pub threads: u32,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions { budget: Duration::from_secs(1), gap: 0.01, threads: 1 }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn plan(p: &Problem, opts: DriverOptions) -> (Outcome, SolverReport) {
    let t0 = Instant::now();
    let deadline = t0 + opts.budget;
    let g = greedy::plan(p);
    let g_obj = objective(p, &g).total();
    let mut phases = vec![Phase { name: "greedy".into(), time_ms: ms(t0.elapsed()) }];
    let report = |status: Status, detail: String, obj: f64, lb: Option<f64>, phases: Vec<Phase>| {
        let gap = lb.map(|lb| if obj.abs() < 1e-12 { 0.0 } else { ((obj - lb) / obj.abs()).max(0.0) });
        SolverReport { name: "milp".into(), status, detail, time_ms: ms(t0.elapsed()), objective: Some(obj), lower_bound: lb, gap, phases }
    };
    if p.batch.is_empty() {
        return (g, report(Status::Optimal, "no pending pods".into(), 0.0, Some(0.0), phases));
    }
    let run = match milp::solve(p, &g, g_obj, deadline, opts.gap, Options { threads: opts.threads, seed: 0 }) {
        Ok(r) => r,
        Err(e) => return (g, report(Status::Fallback, format!("MILP failed: {e}"), g_obj, None, phases)),
    };
    phases.extend(run.phases.iter().map(|(n, t)| Phase { name: n.clone(), time_ms: *t }));
    let lb = run.lower_bound.map(|lb| lb.min(g_obj));
    let summary = format!(
        "{} columns, {} column-generation rounds, MIP {:?}{}{}",
        run.columns,
        run.cg_rounds,
        run.mip_status,
        if run.start_accepted { ", started from greedy" } else { ", greedy start not representable" },
        if run.note.is_empty() { String::new() } else { format!("; {}", run.note.trim_end_matches("; ")) }
    );
    let Some(mut o) = run.outcome else {
        return (g, report(Status::Fallback, format!("no integer solution within the budget ({summary})"), g_obj, lb, phases));
    };
    let t3 = Instant::now();
    greedy::downsize(p, &mut o);
    let (ordered, failures) = order_placements(p, &o);
    phases.push(Phase { name: "replay".into(), time_ms: ms(t3.elapsed()) });
    if !failures.is_empty() {
        let (id, r) = &failures[0];
        return (
            g,
            report(Status::Fallback, format!("the MILP plan does not replay ({} pods; {}: {r}) ({summary})", failures.len(), p.pod(*id).key()), g_obj, lb, phases),
        );
    }
    o.placements = ordered;
    // Reasons for pods left pending come from the greedy pass where it agrees.
    for (id, r) in &mut o.unschedulable {
        if let Some((_, gr)) = g.unschedulable.iter().find(|(gid, _)| gid == id) {
            *r = gr.clone();
        }
    }
    let m_obj = objective(p, &o).total();
    let (best, obj, kept) = if m_obj < g_obj - 1e-9 { (o, m_obj, "") } else { (g, g_obj, "; the greedy plan is as good, kept") };
    let lb = lb.map(|b| b.min(obj));
    let gap = lb.map(|b| if obj.abs() < 1e-12 { 0.0 } else { ((obj - b) / obj.abs()).max(0.0) });
    let timed_out = Instant::now() >= deadline || run.mip_status == Some(highs::HighsModelStatus::ReachedTimeLimit);
    let status = match gap {
        Some(x) if x <= 1e-6 => Status::Optimal,
        Some(x) if x <= opts.gap => Status::GapReached,
        _ if timed_out => Status::TimeLimit,
        _ => Status::Heuristic,
    };
    let detail = format!("greedy {g_obj:.6}, MILP {m_obj:.6}{kept}; {summary}");
    (best, report(status, detail, obj, lb, phases))
}
