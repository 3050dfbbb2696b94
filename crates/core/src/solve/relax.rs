//! Planning under the weights' `preferencePolicy` (`semantics::preferences`).
//!
//! * `Priced`: one plan of the snapshot as it is, preferences priced by the weights' `soft` terms.
//! * `Ignore`: the same with every `soft` weight zero.
//! * `Respect`: rounds. Every pending pod with preferences is planned hardened (its preferences as
//!   requirements); each pod a round leaves pending relaxes one more step, and the batch is planned
//!   again, until no pending pod has a step left. The rounds plan greedily; the last one runs the
//!   requested planner (the MILP under what is left of the budget), and if it leaves a pod pending
//!   that can still relax, the rounds go on. Every round relaxes at least one step, so the rounds end
//!   after at most the total number of steps. Soft weights are zero: under `Respect` a preference is
//!   kept or relaxed, never traded for money.

use std::collections::BTreeMap;
use std::time::Instant;

use super::driver::{Planner, Solver, build_and_plan, plan_built};
use super::problem::ProblemError;
use crate::domain::Cluster;
use crate::domain::catalog::Catalog;
use crate::domain::pod::PodId;
use crate::plan::{Phase, Plan};
use crate::semantics::preferences::{self, PreferencePolicy};
use crate::weights::Weights;

/// Plans a cluster snapshot under the weights' preference policy: [`build_and_plan`] once, or in
/// relaxation rounds under `Respect`, and the plan file, as `stowage plan` writes it. What `stowage
/// plan`, the simulator, the benchmark and the controller share.
pub fn plan_cluster(cluster: &Cluster, catalog: &Catalog, weights: &Weights, planner: impl Into<Planner>) -> Result<Plan, ProblemError> {
    let planner = planner.into();
    let unpriced = weights.without_preference_prices();
    match weights.preference_policy {
        PreferencePolicy::Priced => plan_once(cluster, catalog, weights, planner),
        PreferencePolicy::Ignore => plan_once(cluster, catalog, &unpriced, planner),
        PreferencePolicy::Respect => plan_respecting(cluster, catalog, &unpriced, planner),
    }
}

fn plan_once(cluster: &Cluster, catalog: &Catalog, weights: &Weights, planner: Planner) -> Result<Plan, ProblemError> {
    let (problem, outcome, report) = build_and_plan(cluster, catalog, weights, planner)?;
    Ok(super::to_plan(&problem, &outcome, report))
}

fn plan_respecting(cluster: &Cluster, catalog: &Catalog, weights: &Weights, planner: Planner) -> Result<Plan, ProblemError> {
    let steps = preferences::all_relaxations(cluster);
    if steps.is_empty() {
        return plan_once(cluster, catalog, weights, planner);
    }
    let t0 = Instant::now();
    let mut relaxed: BTreeMap<PodId, usize> = BTreeMap::new();
    let (mut rounds, mut passes) = (0, 0);
    let mut greedy_rounds = planner.solver == Solver::Milp;
    loop {
        let hardened = preferences::harden_cluster(cluster, &steps, &relaxed);
        let round = if greedy_rounds { Planner::greedy() } else { Planner { time_budget: planner.time_budget.saturating_sub(t0.elapsed()), ..planner } };
        let (problem, mut outcome, mut report) = build_and_plan(&hardened, catalog, weights, round)?;
        passes += 1;
        let stuck_of =
            |o: &super::Outcome| -> Vec<PodId> { o.unschedulable.iter().map(|(id, _)| *id).filter(|id| steps.get(id).is_some_and(|s| relaxed.get(id).copied().unwrap_or(0) < s.len())).collect() };
        let mut stuck = stuck_of(&outcome);
        if stuck.is_empty() && greedy_rounds {
            // The greedy rounds are over: the requested planner plans the same hardened snapshot, on
            // the problem the last greedy round built (building it again took a tenth of a 1 s budget
            // on mixed-3). Its report counts that build as its own.
            greedy_rounds = false;
            let build = report.phases.iter().find(|ph| ph.name == "problem").map_or(0.0, |ph| ph.time_ms);
            let rest = Planner { time_budget: planner.time_budget.saturating_sub(t0.elapsed()), ..planner };
            (outcome, report) = plan_built(&problem, rest, Instant::now());
            report.phases.insert(0, Phase { name: "problem".into(), time_ms: build });
            report.time_ms += build;
            passes += 1;
            stuck = stuck_of(&outcome);
        }
        if stuck.is_empty() {
            let mut plan = super::to_plan(&problem, &outcome, report);
            // The plan records, per placed pod, the preferences it gave up (pods left pending have no
            // preference that matters).
            let mut pods_relaxed = 0;
            for (pl, (id, _)) in plan.placements.iter_mut().zip(&outcome.placements) {
                let k = relaxed.get(id).copied().unwrap_or(0);
                if k > 0 {
                    pods_relaxed += 1;
                    pl.relaxed = steps[id][..k].iter().map(|s| s.to_string()).collect();
                }
            }
            let r = &mut plan.solver;
            if rounds > 0 {
                let sep = if r.detail.is_empty() { "" } else { "; " };
                r.detail = format!("{}{sep}preferences respected: {pods_relaxed} placed pod(s) relaxed some, over {rounds} relaxation round(s)", r.detail);
            }
            // The passes before the last plan count in the time and show as one phase.
            if passes > 1 {
                let elapsed = t0.elapsed().as_secs_f64() * 1000.0;
                r.phases.insert(0, Phase { name: "preference-rounds".into(), time_ms: (elapsed - r.time_ms).max(0.0) });
                r.time_ms = r.time_ms.max(elapsed);
            }
            return Ok(plan);
        }
        for id in stuck {
            *relaxed.entry(id).or_default() += 1;
        }
        rounds += 1;
    }
}
