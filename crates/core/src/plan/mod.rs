//! The plan schema `stowage.dev/plan/v1` (docs/formats.md §3): what every planner produces, what the
//! checker and the benchmark read, and how it is shown to people.

pub mod render;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::semantics::min_values::{MinValuesPolicy, Shortfall};
use crate::semantics::preferences::PreferencePolicy;
use crate::semantics::spread::HostnameSpread;
use crate::semantics::spread_defaults::SpreadDefaults;

pub const SCHEMA: &str = "stowage.dev/plan/v1";

/// Why a plan file could not be read. The file needs fixing (or writing again with `stowage plan`)
/// before it can be checked or compared.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Not JSON, or a field missing or of the wrong type; `path` names the field (`.` for the whole
    /// document, as when the text is not JSON and `message` names the line).
    #[error("{path}: {message}")]
    Field { path: String, message: String },
    /// A plan of another schema version.
    #[error("schema: expected {SCHEMA:?}, got {got:?}")]
    Schema { got: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// Proven optimal (within the solver's default tolerance).
    Optimal,
    /// Stopped at the requested relative gap.
    GapReached,
    /// Stopped at the time budget with an incumbent.
    TimeLimit,
    /// A heuristic plan with no optimality claim (greedy, Karpenter).
    Heuristic,
    /// The MILP failed or found nothing better; the greedy plan is returned (see `detail`).
    Fallback,
    /// The planner found no placement for some pods (listed in `unschedulable`) and claims none
    /// exists; stowage's own planners say `heuristic` or `optimal` instead, peers may write this
    /// (docs/formats.md §3).
    Infeasible,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub name: String,
    pub time_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SolverReport {
    pub name: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub time_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    #[serde(default)]
    pub phases: Vec<Phase>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewNode {
    pub name: String,
    pub node_pool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price_per_hour: f64,
    #[serde(default = "catalog_source")]
    pub price_source: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<PlanTaint>,
    #[serde(default)]
    pub pods: Vec<String>,
    /// The instance types the node may launch as, cheapest first (`semantics::min_values`): every one
    /// holds its pods as the plan places them. Empty in plans that do not say (peers, older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_candidates: Vec<String>,
    /// Under `minValuesPolicy: BestEffort`: the NodePool's minValues requirements the candidates do not
    /// keep, each with the values they keep (the relaxed minValues).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub min_values_relaxed: Vec<Shortfall>,
}

fn catalog_source() -> String {
    "catalog".into()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingNode {
    pub name: String,
    pub pods: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub pod: String,
    pub node: String,
    /// Under `preferencePolicy: Respect`: the preferences the pod gave up, in the order it gave them up
    /// (`semantics::preferences`); the checker holds it to the rest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relaxed: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unschedulable {
    pub pod: String,
    pub plugin: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub new_nodes: usize,
    pub pods_placed: usize,
    pub pods_unschedulable: usize,
    /// Pods in `deferred`; absent when none (plans written before the field, and every plan whose
    /// batch the budget did not cut).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pods_deferred: usize,
    pub cost_per_hour: f64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub schema: String,
    pub solver: SolverReport,
    pub cost_per_hour: f64,
    #[serde(default)]
    pub synthetic_prices: bool,
    #[serde(default)]
    pub new_nodes: Vec<NewNode>,
    #[serde(default)]
    pub existing_nodes: Vec<ExistingNode>,
    #[serde(default)]
    pub placements: Vec<Placement>,
    #[serde(default)]
    pub unschedulable: Vec<Unschedulable>,
    /// Pending pods the planner's time budget cut off before they were planned (docs/formats.md, Time
    /// budget): outside this plan's batch, as pods that arrive after a batch window closed are; they
    /// wait for the next batch. The checker judges the plan without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
    #[serde(default)]
    pub totals: Totals,
    /// The hostname-spread rule the plan was made under (the weights' `hostnameSpread`); the checker
    /// judges the plan by it. Plans without it (peers, older files) were made under kube-scheduler's
    /// rule alone: `exact`.
    #[serde(default = "exact")]
    pub hostname_spread: HostnameSpread,
    /// The minValues policy the plan was made under (the weights' `minValuesPolicy`); the checker
    /// judges the plan by it. Plans without it: Karpenter's default, `Strict`.
    #[serde(default)]
    pub min_values_policy: MinValuesPolicy,
    /// The preference policy the plan was made under (the weights' `preferencePolicy`). Under `Respect`
    /// the checker judges each placed pod with the preferences it did not relax as requirements. Plans
    /// without it (peers, older files) are judged by kube-scheduler's rules alone: `Priced`.
    #[serde(default = "priced")]
    pub preference_policy: PreferencePolicy,
    /// The cluster-default topology spread the workload's pods were built under (the weights'
    /// `topologySpreadDefaults`); `stowage check` builds the workload the same way. Plans without it:
    /// kube-scheduler's default, `System` (whose defaults never filter).
    #[serde(default)]
    pub topology_spread_defaults: SpreadDefaults,
}

fn priced() -> PreferencePolicy {
    PreferencePolicy::Priced
}

fn exact() -> HostnameSpread {
    HostnameSpread::Exact
}

impl Plan {
    /// Recomputes `costPerHour`, `syntheticPrices`, the per-node pod lists and the totals from
    /// `newNodes` and `placements` (the authoritative parts).
    pub fn finish(&mut self) {
        // fold from +0.0: `sum()` of no f64 is -0.0, which would print as "-0.0" in every plan
        // without new nodes.
        self.cost_per_hour = self.new_nodes.iter().map(|n| n.price_per_hour).fold(0.0, |a, b| a + b);
        self.synthetic_prices = self.new_nodes.iter().any(|n| n.price_source == "synthetic");
        let mut by_node: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for p in &self.placements {
            by_node.entry(p.node.as_str()).or_default().push(p.pod.clone());
        }
        for n in &mut self.new_nodes {
            n.pods = by_node.remove(n.name.as_str()).unwrap_or_default();
        }
        self.existing_nodes = by_node.into_iter().map(|(name, pods)| ExistingNode { name: name.to_string(), pods }).collect();
        self.totals = Totals {
            new_nodes: self.new_nodes.len(),
            pods_placed: self.placements.len(),
            pods_unschedulable: self.unschedulable.len(),
            pods_deferred: self.deferred.len(),
            cost_per_hour: self.cost_per_hour,
        };
    }

    /// Reads a plan file's text; the error names the field (or the line, for text that is not JSON).
    /// Exactly one JSON document with no key twice (`crate::json`).
    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        crate::json::parse(text).map_err(|e| PlanError::Field { path: ".".into(), message: e.to_string() })?;
        let de = &mut serde_json::Deserializer::from_str(text);
        let p: Plan = serde_path_to_error::deserialize(&mut *de).map_err(|e| PlanError::Field { path: e.path().to_string(), message: e.inner().to_string() })?;
        if p.schema != SCHEMA {
            return Err(PlanError::Schema { got: p.schema });
        }
        Ok(p)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plans serialise")
    }
}
