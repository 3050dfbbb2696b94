//! The simulator: a Kubernetes cluster with Karpenter-style provisioning in one process, on a
//! simulated clock, to run scenarios end to end (`stowage simulate`, docs/formats.md §4).
//!
//! ```text
//!  scenario steps ──► world (Kubernetes objects) ◄── controllers (Deployment, ReplicaSet,
//!                        │        ▲                   StatefulSet, DaemonSet, Job, pod GC)
//!                        │        ├── volumes (WaitForFirstConsumer at bind, Immediate at creation)
//!                        │        ├── binder (kube-scheduler: stowage_core::check::scheduler)
//!                        ▼        │
//!        unschedulable pods ─► provisioner: batcher ─► stowage_decide::provision (the controller's):
//!                                 │        Planner (stowage's MILP or greedy, or a test's) → NodeClaims
//!                                 │                     └─► checker (every plan, optionally)
//!                                 └─► cloud (a CloudProvider): launch (fallbacks, boot delay,
//!                                          │               insufficient capacity, bill)
//!                                          └─► NodeClaim in flight ─► Node registers
//!                                 disruption: empty nodes after consolidateAfter, expireAfter
//!                                 consolidation: stowage_decide::consolidation (underutilised nodes
//!                                   removed once their replacements are Ready)
//! ```
//!
//! Pure and deterministic: no async runtime, no wall clock (the one exception is the MILP's time
//! budget, see [`planner::StowagePlanner`]), no hash-map order anywhere a decision is made. The
//! binder never reads a plan, so a plan and what kube-scheduler does with it can disagree, and the
//! simulation shows it.
//!
//! One module per concern: [`scenario`] (the file format), [`world`] (the objects), [`controllers`],
//! [`volumes`], the binder (`stowage_core::check::scheduler`, kube-scheduler's model, shared with
//! the checker), [`cloud`], [`provisioner`] (the shared provisioning decision over the
//! world; registered Nodes), [`disruption`], [`consolidation`], [`planner`] (stowage's planners behind the seam), [`engine`] (the event loop), [`expect`], [`events`] and
//! [`report`] (outputs), [`time`].

pub mod cloud;
pub mod consolidation;
pub mod controllers;
pub mod disruption;
pub mod engine;
pub mod events;
pub mod expect;
pub mod planner;
pub mod provisioner;
pub mod report;
pub mod scenario;
pub mod time;
pub mod volumes;
pub mod world;

use std::path::{Path, PathBuf};

pub use engine::SimError;
pub use planner::{PlanError, Planner, StowagePlanner};
pub use report::Report;
pub use scenario::{Disk, Embedded, Scenario, ScenarioError};
pub use stowage_core::solve::Solver;

/// How a run is made.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Plan with this solver instead of the scenario's (`settings.solver`, default MILP).
    pub solver: Option<Solver>,
    /// Run the independent checker on every plan; a rejected plan fails the scenario.
    pub check_plans: bool,
}

/// Runs a scenario with stowage's planner.
pub fn run(sc: &Scenario, opts: &Options) -> Result<Report, SimError> {
    let solver = opts.solver.unwrap_or(sc.settings.solver);
    let mut planner = StowagePlanner { solver, time_budget: sc.settings.time_budget };
    run_with(sc, &mut planner, solver.as_str(), opts.check_plans)
}

/// Runs a scenario with any planner; `planner_name` is what the report calls it.
pub fn run_with(sc: &Scenario, planner: &mut dyn Planner, planner_name: &str, check_plans: bool) -> Result<Report, SimError> {
    engine::Engine::new(sc, planner, check_plans).run(planner_name)
}

/// The bundled seed scenarios (scenarios/README.md), from the copies compiled into stowage.
pub fn seed_scenarios() -> Result<Vec<Scenario>, ScenarioError> {
    scenario::SEED_SCENARIOS.iter().map(|p| scenario::load(Path::new(p), &Embedded)).collect()
}

/// Scenario files named on the command line: a file as is; a folder by its `scenario.yaml`, or else
/// every `*/scenario.yaml` below it, in name order.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ScenarioError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let own = p.join("scenario.yaml");
            if own.is_file() {
                out.push(own);
                continue;
            }
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| ScenarioError::new(p, None, format!("cannot list folder: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path().join("scenario.yaml")))
                .filter(|f| f.is_file())
                .collect();
            if found.is_empty() {
                return Err(ScenarioError::new(p, None, "no scenario.yaml in it or in its subfolders"));
            }
            found.sort();
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(ScenarioError::new(p, None, "no such file or folder"));
        }
    }
    Ok(out)
}
