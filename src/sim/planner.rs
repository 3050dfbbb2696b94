//! The seam between the provisioning loop and whatever decides which nodes to launch. The loop hands
//! a planner the cluster as it is when a batch closes (pending pods, registered nodes, NodeClaims in
//! flight) and the catalog with the offerings the cloud refused marked unavailable; it launches the
//! plan's new nodes and nothing else. Tests swap the planner (any closure with the same signature) to
//! show what the rest of the simulation does with a wrong plan.

use std::time::{Duration, Instant};

use super::scenario::SolverName;
use crate::domain::catalog::Catalog;
use crate::domain::Cluster;
use crate::plan::{Phase, Plan};
use crate::solve::{self, Problem};
use crate::weights::Weights;

pub trait Planner {
    /// Plans one batch: every pending pod of `cluster` appears in the plan, placed or unschedulable.
    /// An error leaves the batch's pods pending until something changes.
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, String>;
}

impl<F> Planner for F
where
    F: FnMut(&Cluster, &Catalog, &Weights) -> Result<Plan, String>,
{
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, String> {
        self(cluster, catalog, weights)
    }
}

/// stowage's own planners: the MILP driver (greedy start, fallback) or the greedy planner alone.
#[derive(Clone, Copy, Debug)]
pub struct StowagePlanner {
    pub solver: SolverName,
    /// MILP time budget per batch. The only wall-clock input of a simulation: a batch that hits it may
    /// plan differently on a slower machine (the seed batches solve in milliseconds).
    pub time_budget: Duration,
}

impl Planner for StowagePlanner {
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, String> {
        plan_with(self.solver, self.time_budget, cluster, catalog, weights)
    }
}

/// Plans a cluster snapshot with one of stowage's solvers (what `stowage plan` does after loading).
pub fn plan_with(solver: SolverName, time_budget: Duration, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, String> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let t0 = Instant::now();
    let problem = Problem::new(cluster, catalog, weights).map_err(|e| e.to_string())?;
    let build_ms = ms(t0);
    let (outcome, mut report) = match solver {
        SolverName::Milp => {
            let opts = solve::driver::DriverOptions { budget: time_budget, ..Default::default() };
            solve::driver::plan(&problem, opts)
        }
        SolverName::Greedy => solve::driver::plan_greedy(&problem),
    };
    report.phases.insert(0, Phase { name: "problem".into(), time_ms: build_ms });
    report.time_ms += build_ms;
    Ok(solve::to_plan(&problem, &outcome, report))
}
