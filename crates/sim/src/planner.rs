//! The seam between the provisioning loop and whatever decides which nodes to launch. The loop hands
//! a planner the cluster as it is when a batch closes (pending pods, registered nodes, NodeClaims in
//! flight) and the catalog with the offerings the cloud refused marked unavailable; it launches the
//! plan's new nodes and nothing else. Tests swap the planner (any closure with the same signature) to
//! show what the rest of the simulation does with a wrong plan.

use std::time::Duration;

use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::plan::Plan;
use stowage_core::solve;
use stowage_core::solve::Solver;
use stowage_core::weights::Weights;

/// The seam itself is the controller's (`stowage_decide::provision`): a planner's plan goes through
/// the same provisioning decision in both.
pub use stowage_decide::provision::{PlanError, Planner};

/// stowage's own planners: the MILP driver (greedy start, fallback) or the greedy planner alone.
#[derive(Clone, Copy, Debug)]
pub struct StowagePlanner {
    pub solver: Solver,
    /// MILP time budget per batch. The only wall-clock input of a simulation: a batch that hits it may
    /// plan differently on a slower machine (the seed batches solve in milliseconds).
    pub time_budget: Duration,
}

impl Planner for StowagePlanner {
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError> {
        plan_with(self.solver, self.time_budget, cluster, catalog, weights)
    }
}

/// Plans a cluster snapshot with one of stowage's solvers (what `stowage plan` does after loading).
pub fn plan_with(solver: Solver, time_budget: Duration, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError> {
    let planner = solve::Planner { solver, time_budget, ..solve::Planner::default() };
    Ok(solve::plan_cluster(cluster, catalog, weights, planner)?)
}
