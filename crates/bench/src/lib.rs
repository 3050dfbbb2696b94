//! `stowage bench`: every planner (and weights profile) on every workload of a corpus, every plan judged
//! by the independent checker, optionally Karpenter's own scheduler beside them (`--peer karpenter`),
//! and the results as a table, CSV, JSON and SVG figures.
//!
//! * [`corpus`]: the index of recorded batches (`benches/workloads/index.yaml`), gzip-aware loading.
//! * [`peer`]: running the Karpenter peer (peers/karpenter) on a batch.
//! * [`replay`]: an event-driven replay of a pod trace (arrivals and departures, batches, removal of
//!   empty nodes) that reports what the cluster cost.
//! * [`consolidation`]: a seeded cluster at rest and one timed consolidation decision over it.
//! * [`lifecycle`]: a trace or a day curve through the simulator's engine with consolidation on and
//!   off, against the integral of the lower bound of the demand.
//! * [`openb`]: the Alibaba openb trace (a real production pod list) as stowage workloads.
//! * [`mixed`]: the deterministic mixed-constraint workloads.
//! * [`report`] and [`plot`]: outputs.
//!
//! Timing is measurement only: nothing here asserts on a time. Workloads run in parallel (rayon); each
//! MILP solve uses the same HiGHS `threads` value, because HiGHS's thread pool is process-global.

pub mod cluster;
pub mod consolidation;
pub mod corpus;
pub mod daemonsets;
pub mod error;
pub mod lifecycle;
pub mod mixed;
pub mod openb;
pub mod peer;
pub mod plot;
pub mod replay;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::Serialize;

use stowage_core::check;
use stowage_core::domain::catalog::Catalog;
use stowage_core::plan::{Phase, Plan};
use stowage_core::solve::{Planner, Solver, plan_cluster};
use stowage_core::weights::Weights;

pub use corpus::{CatalogRef, Corpus, Entry, Replay};
pub use error::BenchError;

/// `text`, a JSON object as `serde_json::to_string_pretty` writes it (two spaces a level), with its
/// top-level lines from key `first` up to key `next` replaced by `fields` (an object), pretty-printed
/// at the same depth; `None` if those keys are not there. The rest of the text stays byte for byte,
/// where reading and writing it back could move its floats in the last digit (how the lifetime and
/// lifecycle benchmarks rewrite a written run's bound).
pub fn splice_fields(text: &str, first: &str, next: &str, fields: &impl Serialize) -> Option<String> {
    let start = text.find(&format!("\n  \"{first}\": "))? + 1;
    let end = text[start..].find(&format!("\n  \"{next}\": "))? + start;
    let pretty = serde_json::to_string_pretty(fields).ok()?;
    let inner = pretty.strip_prefix("{\n")?.strip_suffix("\n}")?;
    Some(format!("{}{inner},{}", &text[..start], &text[end..]))
}

/// A named weights profile.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: String,
    pub weights: Weights,
}

impl Profile {
    pub fn default_profile() -> Profile {
        Profile { name: "default".into(), weights: Weights::default() }
    }

    /// This profile under another preference policy, named `<name>-<policy>` (`respect`, `ignore`,
    /// `priced`); the default profile is named by the policy alone.
    pub fn under(&self, policy: stowage_core::weights::PreferencePolicy) -> Profile {
        let tag = policy.as_str().to_lowercase();
        let name = if self.name == "default" { tag } else { format!("{}-{tag}", self.name) };
        Profile { name, weights: Weights { preference_policy: policy, ..self.weights.clone() } }
    }

    /// A profile from a weights file, named by the file's stem.
    pub fn load(path: &Path) -> Result<Profile, String> {
        let weights = stowage_input::weights::load(path).map_err(|e| e.to_string())?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("weights");
        let name = name.strip_suffix(".yaml").or_else(|| name.strip_suffix(".yml")).unwrap_or(name).to_string();
        Ok(Profile { name, weights })
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub solvers: Vec<Solver>,
    pub profiles: Vec<Profile>,
    /// Run Karpenter's scheduler (the peer binary at this path) on every workload.
    pub peer: Option<PathBuf>,
    /// Runs of the peer per workload (seeds 1..=N); the row is the median run by cost.
    pub peer_runs: u32,
    pub time_budget: Duration,
    pub gap: f64,
    pub threads: u32,
    /// Where the peer's input files go.
    pub scratch: PathBuf,
    /// Draw a progress bar on stderr (indicatif hides it when stderr is not a terminal).
    pub progress: bool,
    /// Parallel workers across workloads (0 = rayon's default, one per core).
    pub jobs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            solvers: vec![Solver::Greedy, Solver::Milp],
            profiles: vec![Profile::default_profile()],
            peer: None,
            peer_runs: 5,
            time_budget: Duration::from_secs(1),
            gap: 0.01,
            threads: 1,
            scratch: std::env::temp_dir().join(format!("stowage-bench-{}", std::process::id())),
            progress: false,
            jobs: 0,
        }
    }
}

/// One plan of one planner on one workload, and the checker's verdict.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub workload: String,
    pub group: String,
    /// Pending pods of the batch.
    pub pods: usize,
    pub catalog: String,
    /// `greedy`, `milp` or `karpenter`.
    pub planner: String,
    /// Weights profile (`-` for the peer, which has no weights).
    pub weights: String,
    pub cost_per_hour: Option<f64>,
    pub nodes: Option<usize>,
    /// Pods the plan leaves without a node: unschedulable, or deferred by the budget to a later batch.
    pub unschedulable: Option<usize>,
    /// The planner's own time (stowage: problem building + solving; Karpenter: NewTopology +
    /// NewScheduler + Solve + TruncateInstanceTypes).
    pub time_ms: Option<f64>,
    /// Wall time of the whole peer process (decoding and the fake API server included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
    pub status: String,
    pub objective: Option<f64>,
    /// Proven lower bound on the objective (MILP only; objective units).
    pub lower_bound: Option<f64>,
    pub gap: Option<f64>,
    /// Lower bound on the cost per hour of any plan that places every pending pod ([`volume_bound`],
    /// or the MILP's bound when the objective is the price; the larger). Same for every planner of a
    /// workload and weights profile.
    pub bound_per_hour: Option<f64>,
    /// Cost per hour divided by `bound_per_hour` (only for plans that leave no pod pending).
    pub vs_bound: Option<f64>,
    /// Cost per hour divided by the greedy plan's (same workload and weights).
    pub vs_greedy: Option<f64>,
    /// Objective divided by the MILP's lower bound (same workload and weights; for the peer, under the
    /// default profile, its cost plus the unschedulable penalty).
    pub vs_lower_bound: Option<f64>,
    /// The checker's verdict; `None` when there was no plan to check.
    pub valid: Option<bool>,
    pub violations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_violation: Option<String>,
    pub stated_order_ok: Option<bool>,
    /// The checker's verdict: `valid`, `invalid` (no bind order exists, or another violation) or
    /// `undecided` (its bind-order search ran out of budget); `None` when there was no plan to check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub synthetic_prices: bool,
    pub phases: Vec<Phase>,
    /// The peer's runs (one per seed) when it ran more than once; the row itself is the median run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<PeerRunSummary>,
    /// The weights make the objective the price (so the MILP's bound is a bound on $/h too).
    #[serde(skip)]
    pub price_only: bool,
}

/// One run of the peer among several: what differs from run to run.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerRunSummary {
    pub seed: u32,
    pub cost_per_hour: Option<f64>,
    pub nodes: Option<usize>,
    pub unschedulable: Option<usize>,
    pub time_ms: Option<f64>,
    pub verdict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Row {
    /// The spread of a value over the peer's runs (min, max), when it ran more than once.
    pub fn run_range<T: PartialOrd + Copy>(&self, f: impl Fn(&PeerRunSummary) -> Option<T>) -> Option<(T, T)> {
        let mut vals = self.runs.iter().filter_map(f);
        let first = vals.next()?;
        Some(vals.fold((first, first), |(lo, hi), v| (if v < lo { v } else { lo }, if v > hi { v } else { hi })))
    }

    /// A stowage plan that failed (error or checker) makes the bench fail; the peer's plans are
    /// reported, not required to be valid.
    pub fn fails_bench(&self) -> bool {
        if self.planner == "karpenter" {
            return false;
        }
        self.error.is_some() || self.valid != Some(true)
    }
}

/// Everything one bench run measured.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Results {
    pub rows: Vec<Row>,
    pub replays: Vec<replay::ReplayRow>,
    pub settings: Settings,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub time_budget_ms: f64,
    pub gap: f64,
    pub threads: u32,
    pub jobs: usize,
    pub solvers: Vec<String>,
    pub weights: Vec<String>,
    pub peer: Option<String>,
    /// Runs of the peer per workload (seeds 1..=N).
    pub peer_runs: u32,
}

impl Results {
    pub fn failed(&self) -> bool {
        self.rows.iter().any(Row::fails_bench) || self.replays.iter().any(|r| r.error.is_some() || r.invalid_plans > 0)
    }
}

fn solver_name(s: Solver) -> &'static str {
    s.as_str()
}

fn row_from_plan(e: &Entry, pods: usize, planner: &str, weights: &str, p: &Plan, r: &check::Report) -> Row {
    Row {
        workload: e.name.clone(),
        group: e.group.clone(),
        pods,
        catalog: e.catalog.describe(),
        planner: planner.into(),
        weights: weights.into(),
        cost_per_hour: Some(p.cost_per_hour),
        nodes: Some(p.new_nodes.len()),
        // A pod the budget deferred to a later batch has no node either: it is not money saved.
        unschedulable: Some(p.unschedulable.len() + p.deferred.len()),
        time_ms: Some(p.solver.time_ms),
        wall_ms: None,
        status: serde_json::to_value(p.solver.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        objective: p.solver.objective,
        lower_bound: p.solver.lower_bound,
        gap: p.solver.gap,
        vs_greedy: None,
        vs_lower_bound: None,
        bound_per_hour: None,
        vs_bound: None,
        valid: Some(r.valid()),
        violations: r.violations.len(),
        first_violation: r.violations.first().map(|v| v.to_string()),
        stated_order_ok: Some(r.stated_order_ok),
        verdict: Some(r.verdict().as_str().to_string()),
        error: None,
        detail: p.solver.detail.clone(),
        synthetic_prices: p.synthetic_prices,
        phases: p.solver.phases.clone(),
        runs: Vec::new(),
        price_only: false,
    }
}

fn error_row(e: &Entry, pods: usize, planner: &str, weights: &str, msg: String) -> Row {
    Row {
        workload: e.name.clone(),
        group: e.group.clone(),
        pods,
        catalog: e.catalog.describe(),
        planner: planner.into(),
        weights: weights.into(),
        status: "error".into(),
        error: Some(msg),
        ..Default::default()
    }
}

/// Catalogs are shared across workloads (parsing the us-east-1 catalog takes a while).
#[derive(Default)]
struct Catalogs(Mutex<Vec<(CatalogRef, Arc<Catalog>)>>);

impl Catalogs {
    fn get(&self, r: &CatalogRef) -> Result<Arc<Catalog>, String> {
        if let Some((_, c)) = self.0.lock().map_err(|_| "catalog cache poisoned")?.iter().find(|(k, _)| k == r) {
            return Ok(c.clone());
        }
        let c = r.load()?;
        let mut g = self.0.lock().map_err(|_| "catalog cache poisoned")?;
        if let Some((_, c)) = g.iter().find(|(k, _)| k == r) {
            return Ok(c.clone());
        }
        g.push((r.clone(), c.clone()));
        Ok(c)
    }
}

fn progress_bar(len: usize, on: bool) -> indicatif::ProgressBar {
    if !on {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len as u64);
    let style = indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}").map(|s| s.progress_chars("=> "));
    if let Ok(s) = style {
        pb.set_style(s);
    }
    pb
}

/// Runs the planners (and the peer) on the workloads and the replays. Never panics on bad input: a
/// workload that does not load is a row with an error.
pub fn run(workloads: &[Entry], replays: &[Replay], opts: &Options) -> Results {
    let per_workload = opts.solvers.len() * opts.profiles.len() + usize::from(opts.peer.is_some());
    let per_replay = opts.solvers.len();
    let pb = progress_bar(workloads.len() * per_workload + replays.len() * per_replay, opts.progress);
    let catalogs = Catalogs::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.jobs).build();
    let stowage_rows = |e: &Entry| -> Vec<Row> {
        pb.set_message(e.name.clone());
        let loaded = corpus::load_workload(&e.files).and_then(|w| catalogs.get(&e.catalog).map(|c| (w, c)));
        let (w, cat) = match loaded {
            Ok(x) => x,
            Err(msg) => {
                pb.inc(per_workload as u64 - u64::from(opts.peer.is_some()));
                return vec![error_row(e, 0, "load", "-", msg)];
            }
        };
        let pods = w.cluster.pending().len();
        let volume = volume_bound(&w.cluster, &cat, &opts.profiles.first().map(|p| p.weights.clone()).unwrap_or_default());
        let mut rows = Vec::new();
        for prof in &opts.profiles {
            for &s in &opts.solvers {
                let args = Planner { solver: s, time_budget: opts.time_budget, gap: opts.gap, threads: opts.threads };
                let row = match plan_cluster(&w.cluster, &cat, &prof.weights, args).map_err(|e| e.to_string()) {
                    Ok(p) => {
                        let r = check::check(&w.cluster, &cat, &p);
                        row_from_plan(e, pods, solver_name(s), &prof.name, &p, &r)
                    }
                    Err(msg) => error_row(e, pods, solver_name(s), &prof.name, msg),
                };
                rows.push(Row { bound_per_hour: volume, price_only: price_only(&w.cluster, &prof.weights), ..row });
                pb.inc(1);
            }
        }
        rows
    };
    let mut rows: Vec<Row> = match &pool {
        Ok(pool) => pool.install(|| workloads.par_iter().map(stowage_rows).collect::<Vec<_>>()),
        Err(_) => workloads.iter().map(stowage_rows).collect(),
    }
    .into_iter()
    .flatten()
    .collect();

    // The peer runs one workload at a time after stowage's runs, so that its wall-clock times are not
    // taken while stowage's solves compete for the two cores (Karpenter's scheduler is parallel itself).
    if let Some(bin) = &opts.peer {
        for e in workloads {
            pb.set_message(format!("{} (karpenter)", e.name));
            if rows.iter().any(|r| r.workload == e.name && r.planner == "load") {
                pb.inc(1);
                continue;
            }
            rows.push(peer_row(bin, e, &catalogs, opts));
            pb.inc(1);
        }
    }

    let mut replay_rows = Vec::new();
    for r in replays {
        for &s in &opts.solvers {
            pb.set_message(format!("{} ({})", r.name, solver_name(s)));
            let args = Planner { solver: s, time_budget: opts.time_budget, gap: opts.gap, threads: opts.threads };
            let prof = opts.profiles.first().cloned().unwrap_or_else(Profile::default_profile);
            replay_rows.push(match catalogs.get(&r.catalog) {
                Ok(cat) => replay::run(r, &cat, &prof.weights, &args),
                Err(msg) => replay::ReplayRow::error(r, solver_name(s), msg),
            });
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    order_rows(&mut rows, workloads, opts);
    fill_ratios(&mut rows, opts);
    Results {
        rows,
        replays: replay_rows,
        settings: Settings {
            time_budget_ms: opts.time_budget.as_secs_f64() * 1000.0,
            gap: opts.gap,
            threads: opts.threads,
            jobs: pool.as_ref().map(|p| p.current_num_threads()).unwrap_or(1),
            solvers: opts.solvers.iter().map(|&s| solver_name(s).to_string()).collect(),
            weights: opts.profiles.iter().map(|p| p.name.clone()).collect(),
            peer: opts.peer.as_ref().map(|_| "karpenter".to_string()),
            peer_runs: if opts.peer.is_some() { opts.peer_runs.max(1) } else { 0 },
        },
    }
}

fn peer_row(bin: &Path, e: &Entry, catalogs: &Catalogs, opts: &Options) -> Row {
    let loaded = corpus::load_workload(&e.files).and_then(|w| catalogs.get(&e.catalog).map(|c| (w, c))).and_then(|(w, c)| e.catalog.text().map(|t| (w, c, t)));
    let (w, cat, text) = match loaded {
        Ok(x) => x,
        Err(msg) => return error_row(e, 0, "karpenter", "-", msg),
    };
    let pods = w.cluster.pending().len();
    let runs = opts.peer_runs.max(1);
    // The same for every run: the bound builds the whole problem.
    let (bound, price_only) = (volume_bound(&w.cluster, &cat, &Weights::default()), price_only(&w.cluster, &Weights::default()));
    let mut rows: Vec<(u32, Row)> = Vec::new();
    for seed in 1..=runs {
        let mut args = e.peer_args.clone();
        args.extend(["--seed".to_string(), seed.to_string()]);
        let row = match peer::run(bin, &w, &text, &args, &opts.scratch, &format!("{}.seed-{seed}", e.name)) {
            Ok(run) => {
                let r = check::check(&w.cluster, &cat, &run.plan);
                let mut row = row_from_plan(e, pods, "karpenter", "-", &run.plan, &r);
                row.bound_per_hour = bound;
                row.price_only = price_only;
                row.time_ms = Some(run.schedule_ms);
                row.wall_ms = Some(run.wall_ms);
                row.objective = Some(objective_of(&w.cluster, &run.plan, &Weights::default()));
                row
            }
            Err(msg) => error_row(e, pods, "karpenter", "-", msg),
        };
        rows.push((seed, row));
    }
    median_run(rows)
}

/// The median run by cost (the lower middle for an even count; runs that failed sort last), with every
/// run's summary attached when there was more than one.
fn median_run(mut rows: Vec<(u32, Row)>) -> Row {
    let summaries: Vec<PeerRunSummary> = rows
        .iter()
        .map(|(seed, r)| PeerRunSummary {
            seed: *seed,
            cost_per_hour: r.cost_per_hour,
            nodes: r.nodes,
            unschedulable: r.unschedulable,
            time_ms: r.time_ms,
            verdict: r.verdict.clone(),
            error: r.error.clone(),
        })
        .collect();
    rows.sort_by(|(sa, a), (sb, b)| {
        let key = |r: &Row| if r.error.is_some() { f64::INFINITY } else { r.cost_per_hour.unwrap_or(f64::INFINITY) };
        key(a).total_cmp(&key(b)).then(sa.cmp(sb))
    });
    let n = rows.len();
    let mut row = rows.swap_remove((n - 1) / 2).1;
    if n > 1 {
        row.runs = summaries;
    }
    row
}

/// A plan's objective under `weights`, recomputed from the plan file: the node terms (weighted price,
/// per-node and spot terms, NodePool-weight deficit) and the penalty per pod left pending. Soft terms
/// (preferences) are not counted. Used for the peer, whose plans carry no objective, so that its plans
/// compare with stowage's lower bound in the same units.
pub(crate) fn objective_of(cluster: &stowage_core::domain::Cluster, plan: &Plan, weights: &Weights) -> f64 {
    let max_weight = cluster.nodepools.iter().map(|p| p.weight).max().unwrap_or(0);
    let nodes: f64 = plan
        .new_nodes
        .iter()
        .map(|n| {
            let pool_weight = cluster.nodepool(&n.node_pool).map(|p| p.weight).unwrap_or(max_weight);
            weights.node_cost(n.price_per_hour, n.capacity_type == "spot", max_weight - pool_weight)
        })
        .sum();
    nodes + weights.unschedulable_pod * (plan.unschedulable.len() + plan.deferred.len()) as f64
}

/// Whether the objective under `weights` is the price of the new nodes (plus the tie-break): price
/// weight 1, no per-node or spot terms, and no NodePool-weight term (all pools of equal weight, or the
/// term switched off).
pub(crate) fn price_only(cluster: &stowage_core::domain::Cluster, weights: &Weights) -> bool {
    let equal_pools = cluster.nodepools.windows(2).all(|w| w[0].weight == w[1].weight);
    (weights.price - 1.0).abs() < 1e-12
        && weights.per_node == 0.0
        && (weights.spot.price_multiplier - 1.0).abs() < 1e-12
        && weights.spot.per_node == 0.0
        && (equal_pools || weights.node_pool_weight == 0.0)
}

/// A lower bound on the cost per hour of any plan that places every pending pod, from resource
/// volume alone: for each resource r, the demand the existing nodes cannot absorb (pending requests
/// minus the free allocatable of every usable existing node) times the cheapest price per unit of r
/// among the configurations the NodePools offer; the largest over r. Valid because every new node of
/// configuration f costs price_f ≥ (its share of r) × min_g price_g / room_g(r). Weak when constraints
/// (anti-affinity, spreads, selectors) rather than volume decide the node count, but never wrong,
/// which the MILP's own bound is not guaranteed to make useful (it can be negative).
pub(crate) fn volume_bound(cluster: &stowage_core::domain::Cluster, catalog: &Catalog, weights: &Weights) -> Option<f64> {
    use std::collections::BTreeMap;
    let p = stowage_core::solve::Problem::new(cluster, catalog, weights).ok()?;
    let mut demand: BTreeMap<String, i64> = BTreeMap::new();
    for id in cluster.pending() {
        for (n, v) in cluster.pod(id).requests.iter() {
            *demand.entry(n.to_string()).or_default() += v;
        }
    }
    if demand.is_empty() {
        return Some(0.0);
    }
    for node in cluster.nodes.iter().filter(|n| !n.deleting && !n.unschedulable) {
        let mut free: BTreeMap<&str, i64> = node.allocatable.iter().collect();
        for pod in cluster.pods.iter().filter(|q| q.node_name.as_deref() == Some(node.name.as_str()) && !q.is_terminal()) {
            for (n, v) in pod.requests.iter() {
                if let Some(f) = free.get_mut(n) {
                    *f -= v;
                }
            }
        }
        for (n, f) in free {
            if let Some(d) = demand.get_mut(n) {
                *d -= f.max(0);
            }
        }
    }
    let mut best: f64 = 0.0;
    for (r, need) in demand {
        if need <= 0 {
            continue;
        }
        let ratio = p.configs.iter().filter(|c| c.room().get(&r) > 0).map(|c| c.price / c.room().get(&r) as f64).fold(f64::INFINITY, f64::min);
        if ratio.is_finite() {
            best = best.max(need as f64 * ratio);
        }
    }
    Some(best)
}

/// Rows in a fixed order: workloads as given, then weights profiles, then planners as given, the peer
/// last. Parallel runs finish in any order; the outputs must not depend on it.
fn order_rows(rows: &mut [Row], workloads: &[Entry], opts: &Options) {
    let wix = |w: &str| workloads.iter().position(|e| e.name == w).unwrap_or(usize::MAX);
    let pix = |p: &str| opts.profiles.iter().position(|x| x.name == p).unwrap_or(usize::MAX);
    let six = |s: &str| match s {
        "load" => 0,
        "karpenter" => usize::MAX,
        other => 1 + opts.solvers.iter().position(|&x| solver_name(x) == other).unwrap_or(usize::MAX - 2),
    };
    rows.sort_by_key(|r| (wix(&r.workload), r.planner == "karpenter", pix(&r.weights), six(&r.planner)));
}

fn fill_ratios(rows: &mut [Row], opts: &Options) {
    let snapshot: Vec<Row> = rows.to_vec();
    let find = |w: &str, weights: &str, planner: &str| snapshot.iter().find(|r| r.workload == w && r.weights == weights && r.planner == planner && r.error.is_none());
    let default_name = opts.profiles.iter().find(|p| p.weights == Weights::default()).map(|p| p.name.clone());
    for r in rows.iter_mut() {
        if r.error.is_some() {
            continue;
        }
        // The peer has no weights: compare it under the default profile, if one ran.
        let weights = if r.planner == "karpenter" {
            match &default_name {
                Some(n) => n.clone(),
                None => continue,
            }
        } else {
            r.weights.clone()
        };
        if let (Some(g), Some(c)) = (find(&r.workload, &weights, "greedy").and_then(|g| g.cost_per_hour), r.cost_per_hour)
            && g > 0.0
        {
            r.vs_greedy = Some(c / g);
        }
        let lb = find(&r.workload, &weights, "milp").and_then(|m| m.lower_bound);
        if let (Some(lb), Some(obj)) = (lb, r.objective)
            && lb > 1e-9
        {
            r.vs_lower_bound = Some(obj / lb);
        }
        // The MILP's bound counts in $/h when the objective is the price; the tie-break terms are taken
        // off so that the bound stays valid: the proportional one (a fraction of the price) and the
        // per-node one (`weights::node_tie_break`, below `pods · node_tie_break(pods)` in a whole plan).
        let profile = opts.profiles.iter().find(|p| p.name == weights).map(|p| &p.weights);
        if r.price_only
            && let Some(lb) = lb.filter(|lb| *lb > 0.0 && *lb < Weights::default().unschedulable_pod)
        {
            let tie = 1.0 + profile.map(|w| w.tie_break).unwrap_or(0.01);
            let per_node = r.pods as f64 * stowage_core::weights::node_tie_break(r.pods);
            r.bound_per_hour = Some(r.bound_per_hour.unwrap_or(0.0).max((lb - per_node).max(0.0) / tie));
        }
        if let (Some(b), Some(c), Some(0)) = (r.bound_per_hour, r.cost_per_hour, r.unschedulable)
            && b > 1e-9
        {
            r.vs_bound = Some(c / b);
        }
    }
}

/// The repository root: `$STOWAGE_ROOT`, else the current folder if it holds the corpus, else the
/// folder stowage was built from.
pub fn repo_root() -> PathBuf {
    if let Ok(r) = std::env::var("STOWAGE_ROOT") {
        return PathBuf::from(r);
    }
    if Path::new(corpus::STANDARD_INDEX).is_file() {
        return PathBuf::from(".");
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Times a closure (for the CLI's summary line).
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cost: Option<f64>, unsched: usize, error: bool) -> Row {
        Row { planner: "karpenter".into(), cost_per_hour: cost, unschedulable: Some(unsched), verdict: Some("valid".into()), error: error.then(|| "peer failed".to_string()), ..Default::default() }
    }

    /// The peer's row is its median run by cost (failed runs last), with every run listed.
    #[test]
    fn the_peer_row_is_the_median_run() {
        let rows = vec![(1, run(Some(30.0), 0, false)), (2, run(None, 0, true)), (3, run(Some(10.0), 2, false)), (4, run(Some(20.0), 1, false)), (5, run(Some(40.0), 0, false))];
        let m = median_run(rows);
        assert_eq!((m.cost_per_hour, m.unschedulable), (Some(30.0), Some(0)), "10, 20, 30, 40, failed: the third");
        assert_eq!(m.runs.iter().map(|r| r.seed).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        assert_eq!(m.run_range(|r| r.cost_per_hour), Some((10.0, 40.0)));
        assert_eq!(m.run_range(|r| r.unschedulable), Some((0, 2)));
        let even = median_run(vec![(1, run(Some(2.0), 0, false)), (2, run(Some(1.0), 0, false))]);
        assert_eq!(even.cost_per_hour, Some(1.0), "the lower middle");
        let one = median_run(vec![(1, run(Some(2.0), 0, false))]);
        assert!(one.runs.is_empty(), "a single run lists no runs");
    }
}
