//! The command line: thin wrappers that load inputs, call the library and print results.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use stowage_core::domain::catalog::Catalog;
use stowage_core::plan;
use stowage_core::solve::{self, Planner, Solver};
use stowage_core::weights::{PreferencePolicy, Weights};
use stowage_input as input;
use stowage_input::catalog;

#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "controller")]
mod controller;
mod out;
mod simulate;

use out::{out, outln};

// The Helm chart against the command line it runs (flags, CRDs, RBAC).
#[cfg(all(test, feature = "controller"))]
mod chart_tests;

#[derive(Parser)]
#[command(name = "stowage", version, about = "Plans Kubernetes node launches for pending pods as a mixed-integer program")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// The planner on the command line (`stowage_core::solve::Solver`).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SolverArg {
    /// Mixed-integer program on HiGHS, started from and falling back to the greedy plan.
    Milp,
    /// Best-fit decreasing with cost-aware node choice.
    Greedy,
}

impl From<SolverArg> for Solver {
    fn from(s: SolverArg) -> Solver {
        match s {
            SolverArg::Milp => Solver::Milp,
            SolverArg::Greedy => Solver::Greedy,
        }
    }
}

/// The most HiGHS threads a solve may ask for (HiGHS aborts on values it cannot start).
pub const MAX_THREADS: u32 = 256;
/// The longest planning budget a command accepts.
pub const MAX_BUDGET: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The MILP's settings, shared by every command that plans (`stowage plan`, `controller`, `bench`).
/// clap checks every value before anything starts.
#[derive(clap::Args, Clone, Debug)]
pub struct MilpArgs {
    /// Time budget of the MILP solver per batch, e.g. 1s, 500ms, 10s (at most 24h).
    #[arg(long, default_value = "1s", value_parser = parse_budget)]
    pub time_budget: std::time::Duration,
    /// Target relative optimality gap of the MILP solver (a finite number >= 0).
    #[arg(long, default_value_t = 0.01, value_parser = parse_gap, allow_negative_numbers = true)]
    pub gap: f64,
    /// HiGHS threads per solve, 1-256 (one value per process: HiGHS's thread pool is global).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS as i64))]
    pub threads: u32,
}

/// How much one run may read (`stowage_input::Limits`, docs/formats.md §1).
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Bytes all workload files may hold together, after gzip decompression.
    #[arg(long, default_value_t = input::limits::DEFAULT_MAX_INPUT_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_bytes: u64,
    /// Pods one batch may hold (listed, plus those controllers create).
    #[arg(long, default_value_t = input::limits::DEFAULT_MAX_PODS, value_parser = parse_positive)]
    pub max_pods: usize,
}

impl LimitArgs {
    pub fn limits(&self) -> input::Limits {
        input::Limits { max_input_bytes: self.max_input_bytes, max_pods: self.max_pods }
    }
}

pub(crate) fn parse_gap(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(g) if g.is_finite() && g >= 0.0 => Ok(g),
        _ => Err(format!("{s:?}: the gap is a finite number >= 0 (e.g. 0.01 for 1 %)")),
    }
}

pub(crate) fn parse_budget(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX_BUDGET {
        return Err(format!("{s:?}: at most 24h"));
    }
    Ok(d)
}

pub(crate) fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?}: a whole number >= 1")),
    }
}

impl MilpArgs {
    pub fn planner(&self, solver: Solver) -> Planner {
        Planner { solver, time_budget: self.time_budget, gap: self.gap, threads: self.threads }
    }
}

/// Solver settings of a command that plans with one planner.
#[derive(clap::Args, Clone, Debug)]
pub struct SolveArgs {
    #[arg(long, value_enum, default_value = "milp")]
    pub solver: SolverArg,
    #[command(flatten)]
    pub milp: MilpArgs,
}

impl SolveArgs {
    pub fn planner(&self) -> Planner {
        self.milp.planner(self.solver.into())
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (use e.g. 1s, 500ms, 5m)"))
}

#[derive(Subcommand)]
pub enum Command {
    /// Plan the new nodes for the pending pods of a workload.
    Plan {
        /// Workload files or folders (kubectl YAML/JSON).
        #[arg(required = true)]
        workload: Vec<PathBuf>,
        /// Instance catalog (stowage.dev/catalog/v1); default: the embedded us-east-1 catalog.
        #[arg(long)]
        catalog: Option<PathBuf>,
        /// Cost weights (stowage.dev/weights/v1); default: models/weights/default.yaml.
        #[arg(long)]
        weights: Option<PathBuf>,
        #[command(flatten)]
        solve: SolveArgs,
        /// What pods' preferences mean to the plan: Respect (Karpenter's default: requirements, relaxed
        /// in Karpenter's order only while a pod cannot be placed), Ignore, or Priced (the weights'
        /// soft terms). Default: the weights file's `preferencePolicy` (Respect).
        #[arg(long, value_parser = parse_preference_policy)]
        preference_policy: Option<PreferencePolicy>,
        #[command(flatten)]
        limits: LimitArgs,
        /// Fail (exit 2) when a pod cannot be scheduled as written (a missing or invalid claim,
        /// StorageClass or PersistentVolume, an invalid spec) instead of planning the others and
        /// listing it as unschedulable: for CI.
        #[arg(long)]
        strict: bool,
        /// Plan every unbound pod, not only those kube-scheduler found unschedulable (or has not judged
        /// yet) and those nominated to in-flight capacity.
        #[arg(long)]
        all_unbound: bool,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Verify a plan as kube-scheduler would carry it out. Exit code 0 only for a valid plan.
    Check {
        #[arg(required = true)]
        workload: Vec<PathBuf>,
        #[arg(long)]
        plan: PathBuf,
        #[arg(long)]
        catalog: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
        /// Judge the plan over every unbound pod (for a plan made with `plan --all-unbound`).
        #[arg(long)]
        all_unbound: bool,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Write the expanded batch (controllers expanded into pods and claims) as one v1 List.
    Export {
        #[arg(required = true)]
        workload: Vec<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
        #[arg(short, long, value_enum, default_value = "json")]
        output: Output,
    },
    /// Run scenarios (stowage.dev/scenario/v1) end to end in the simulator: controllers, kube-scheduler,
    /// volumes, a cloud and the provisioning loop on a simulated clock. Without arguments: the bundled
    /// seed scenarios. Exit code 0 only if every expectation holds.
    Simulate {
        /// Scenario files, or folders holding scenario.yaml (or subfolders that do).
        scenarios: Vec<PathBuf>,
        /// Plan with this solver instead of each scenario's own (default milp).
        #[arg(long, value_enum)]
        solver: Option<SolverArg>,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Run every planner (and weights profile, and optionally Karpenter's scheduler) on every workload
    /// of the benchmark corpus; check every plan; write tables, CSV, JSON and SVG figures.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
    /// Run the cluster controller: watch pods, plan each batch of unschedulable pods, launch NodeClaims
    /// on EC2, register, consolidate and garbage-collect nodes (Karpenter v1 APIs; README "Deploy").
    #[cfg(feature = "controller")]
    Controller(Box<controller::ControllerArgs>),
    /// Write the current batch of a live cluster (everything the planner reads) as a workload file for
    /// `stowage plan` and `stowage bench`, and optionally the catalog the controller would plan with.
    #[cfg(feature = "controller")]
    Record(controller::RecordArgs),
    /// Write benchmark corpus files (benches/workloads/README.md says which command made each).
    #[cfg(feature = "bench")]
    Corpus {
        #[command(subcommand)]
        command: bench::CorpusCommand,
    },
    /// Print the CustomResourceDefinitions of NodePool, NodeClaim and EC2NodeClass.
    Crds {
        #[arg(short, long, value_enum, default_value = "yaml")]
        output: Output,
    },
    /// Catalog tools.
    Catalog {
        #[command(subcommand)]
        command: CatalogCommand,
    },
}

#[derive(Subcommand)]
pub enum CatalogCommand {
    /// Generate the default catalog from the offline AWS data (models/aws/).
    Generate {
        #[arg(long, default_value = "models/aws")]
        aws_data: PathBuf,
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(long, value_delimiter = ',', default_value = "us-east-1a,us-east-1b,us-east-1c")]
        zones: Vec<String>,
        /// Instead, write Karpenter's scheduling-benchmark catalog with this many types.
        #[arg(long)]
        karpenter_benchmark: Option<usize>,
        #[arg(long)]
        out: PathBuf,
    },
}

pub(crate) fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// A command's one-line outcome: the message on success (exit 0), `error: ...` otherwise (exit 2).
pub(crate) fn report(r: Result<String, String>) -> ExitCode {
    match r {
        Ok(m) => {
            eprintln!("{m}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Exit 0 on success, `error: ...` and exit 2 otherwise.
fn done(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn load_workload(paths: &[PathBuf], limits: &LimitArgs) -> Result<input::Workload, String> {
    let w = input::load_with(paths, &limits.limits()).map_err(|e| e.to_string())?;
    for warning in &w.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(w)
}

fn load_catalog(path: &Option<PathBuf>) -> Result<Catalog, String> {
    match path {
        Some(p) => catalog::load(p).map_err(|e| e.to_string()),
        None => Ok(catalog::default_catalog().clone()),
    }
}

/// `--preference-policy`: spelled as Karpenter spells it (Respect, Ignore), or Priced.
pub(crate) fn parse_preference_policy(s: &str) -> Result<PreferencePolicy, String> {
    PreferencePolicy::parse(s).ok_or_else(|| format!("{s:?}: expected Respect, Ignore or Priced"))
}

fn load_weights(path: &Option<PathBuf>) -> Result<Weights, String> {
    match path {
        Some(p) => stowage_input::weights::load(p).map_err(|e| e.to_string()),
        None => Ok(Weights::default()),
    }
}

fn print_yaml<T: serde::Serialize>(v: &T) -> Result<(), String> {
    let s = serde_saphyr::to_string(v).map_err(|e| e.to_string())?;
    out!("{s}")
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "controller")]
    let logs_itself = matches!(cli.command, Command::Controller(_));
    #[cfg(not(feature = "controller"))]
    let logs_itself = false;
    if !logs_itself {
        diagnostics_on_request();
    }
    match cli.command {
        Command::Plan { workload, catalog, weights, solve, preference_policy, limits, strict, all_unbound, output } => {
            done(plan(&workload, &catalog, &weights, preference_policy, &solve, &limits, Batch { strict, all_unbound }, output))
        }
        Command::Check { workload, plan: plan_path, catalog, limits, all_unbound, output } => match check(&workload, &plan_path, &catalog, &limits, all_unbound, output) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => fail(e),
        },
        Command::Export { workload, limits, output } => done(export(&workload, &limits, output)),
        Command::Simulate { scenarios, solver, output } => simulate::command(&scenarios, solver.map(Solver::from), output),
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::bench(args),
        #[cfg(feature = "controller")]
        Command::Controller(args) => controller::controller(*args),
        #[cfg(feature = "controller")]
        Command::Record(args) => controller::record(args),
        #[cfg(feature = "bench")]
        Command::Corpus { command } => bench::corpus_command(command),
        Command::Crds { output } => done(crds(output)),
        Command::Catalog { command: CatalogCommand::Generate { aws_data, region, zones, karpenter_benchmark, out } } => report(generate_catalog(&aws_data, &region, &zones, karpenter_benchmark, &out)),
    }
}

/// The offline commands log nothing unless `RUST_LOG` asks, on stderr: their output is the plan or
/// report, and a default log line would only be noise beside it. `RUST_LOG=stowage_core::solve::milp=trace`
/// adds the MILP's phases, the model dumps and HiGHS's own log (HiGHS writes that one to stdout).
fn diagnostics_on_request() {
    let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() else {
        return;
    };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// `plan`'s choices of which pods make the batch.
struct Batch {
    strict: bool,
    all_unbound: bool,
}

/// The workload with the unbound pods `all_unbound` selects.
fn select(w: input::Workload, all_unbound: bool) -> Result<input::Workload, String> {
    if all_unbound { w.reselect(input::Selection::AllUnbound).map_err(|e| e.to_string()) } else { Ok(w) }
}

#[allow(clippy::too_many_arguments)]
fn plan(
    workload: &[PathBuf],
    catalog: &Option<PathBuf>,
    weights: &Option<PathBuf>,
    preference_policy: Option<PreferencePolicy>,
    solve: &SolveArgs,
    limits: &LimitArgs,
    batch: Batch,
    output: Output,
) -> Result<(), String> {
    let w = select(load_workload(workload, limits)?, batch.all_unbound)?;
    let w = if batch.strict {
        w.strict().map_err(|e| e.to_string())?
    } else {
        for e in w.invalid_templates.iter().chain(&w.rejected) {
            eprintln!("warning: {e} (planned as unschedulable; --strict makes this an error)");
        }
        w
    };
    if !w.skipped.is_empty() {
        let more = if w.skipped.len() > 10 { ", ..." } else { "" };
        eprintln!("note: {} unbound pod(s) left out: kube-scheduler has not given up on them (--all-unbound plans them): {}{more}", w.skipped.len(), w.skipped[..w.skipped.len().min(10)].join(", "));
    }
    let c = load_catalog(catalog)?;
    let mut wt = load_weights(weights)?;
    if let Some(pp) = preference_policy {
        wt.preference_policy = pp;
    }
    let w = w.with_spread_defaults(&wt.topology_spread_defaults).map_err(|e| e.to_string())?;
    let p = solve::plan_cluster(&w.cluster, &c, &wt, solve.planner()).map_err(|e| e.to_string())?;
    match output {
        Output::Table => out!("{}", plan::render::table(&p)),
        Output::Json => outln!("{}", p.to_json()),
        Output::Yaml => print_yaml(&p),
    }
}

/// `stowage check`: whether the plan is valid, or why it cannot be checked.
fn check(workload: &[PathBuf], plan_path: &std::path::Path, catalog: &Option<PathBuf>, limits: &LimitArgs, all_unbound: bool, output: Output) -> Result<bool, String> {
    let w = select(load_workload(workload, limits)?, all_unbound)?;
    let c = load_catalog(catalog)?;
    let text = input::read::read_text_limited(plan_path, limits.max_input_bytes).map_err(|e| e.to_string())?;
    let p = plan::Plan::from_json(&text).map_err(|e| format!("{}: {e}", plan_path.display()))?;
    // The pods as the plan's planner saw them: its cluster-default topology spread.
    let w = w.with_spread_defaults(&p.topology_spread_defaults).map_err(|e| e.to_string())?;
    let report = stowage_core::check::check(&w.cluster, &c, &p);
    match output {
        Output::Table => {
            for n in &report.notes {
                outln!("note: {n}")?;
            }
            for v in &report.violations {
                outln!("violation: {v}")?;
            }
            for q in &report.queue_order {
                outln!("warning: {q}")?;
            }
            let pr = &report.preferences;
            if *pr != Default::default() {
                outln!(
                    "preferences unmet: preferredNodeAffinity {}, preferredPodAffinity {}, preferredPodAntiAffinity {}, preferNoSchedule {}, scheduleAnywayHostnameSpread {} (hostnameSpread: {}, preferencePolicy: {})",
                    pr.preferred_node_affinity,
                    pr.preferred_pod_affinity,
                    pr.preferred_pod_anti_affinity,
                    pr.prefer_no_schedule,
                    pr.schedule_anyway_hostname_spread,
                    p.hostname_spread.as_str(),
                    p.preference_policy.as_str()
                )?;
            }
            outln!("{}: {} placement(s) checked, {} violation(s)", report.verdict().as_str().to_uppercase(), report.pods_checked, report.violations.len())?;
        }
        Output::Json | Output::Yaml => {
            let j = serde_json::json!({
                "valid": report.valid(),
                "verdict": report.verdict().as_str(),
                "podsChecked": report.pods_checked,
                "statedOrderOk": report.stated_order_ok,
                "bindOrder": report.order.as_str(),
                "bindOrderSearchChecks": report.order_search_checks,
                "hostnameSpread": p.hostname_spread,
                "minValuesPolicy": p.min_values_policy,
                "preferencePolicy": p.preference_policy,
                "preferences": {
                    "preferredNodeAffinity": report.preferences.preferred_node_affinity,
                    "preferredPodAffinity": report.preferences.preferred_pod_affinity,
                    "preferredPodAntiAffinity": report.preferences.preferred_pod_anti_affinity,
                    "preferNoSchedule": report.preferences.prefer_no_schedule,
                    "scheduleAnywayHostnameSpread": report.preferences.schedule_anyway_hostname_spread,
                },
                "notes": report.notes,
                "queueOrder": report.queue_order.iter().map(|v| serde_json::json!({
                    "pod": v.pod, "node": v.node, "message": v.message
                })).collect::<Vec<_>>(),
                "violations": report.violations.iter().map(|v| serde_json::json!({
                    "pod": v.pod, "node": v.node, "constraint": v.constraint, "message": v.message
                })).collect::<Vec<_>>(),
            });
            if output == Output::Json {
                outln!("{}", serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?)?;
            } else {
                print_yaml(&j)?;
            }
        }
    }
    Ok(report.valid())
}

fn export(workload: &[PathBuf], limits: &LimitArgs, output: Output) -> Result<(), String> {
    let w = load_workload(workload, limits)?;
    let list = stowage_input::export::to_list(&w.objects);
    match output {
        Output::Yaml => print_yaml(&list),
        _ => outln!("{}", serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?),
    }
}

fn crds(output: Output) -> Result<(), String> {
    let crds = stowage_input::api::crds();
    match output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&crds).map_err(|e| e.to_string())?)?,
        _ => {
            let mut out = String::new();
            for c in &crds {
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(c).map_err(|e| e.to_string())?);
            }
            out!("{out}")?;
        }
    }
    Ok(())
}

fn generate_catalog(aws_data: &std::path::Path, region: &str, zones: &[String], karpenter_benchmark: Option<usize>, out: &std::path::Path) -> Result<String, String> {
    let file = match karpenter_benchmark {
        Some(n) => catalog::generate::karpenter_benchmark(n),
        None => {
            let types = std::fs::read_to_string(aws_data.join("instance-types.json")).map_err(|e| format!("{}: {e}", aws_data.display()))?;
            let prices = std::fs::read_to_string(aws_data.join("ondemand-prices.json")).map_err(|e| format!("{}: {e}", aws_data.display()))?;
            let z: Vec<&str> = zones.iter().map(String::as_str).collect();
            let (f, checked) = catalog::generate::aws(&types, &prices, region, &z).map_err(|e| e.to_string())?;
            eprintln!("{} instance types; allocatable checked against Karpenter's published values for {checked}", f.instance_types.len());
            f
        }
    };
    let text = catalog::generate::to_json(&file);
    catalog::parse(&out.display().to_string(), &text).map_err(|e| format!("generated catalog does not parse: {e}"))?;
    input::output::write_atomic(out, text.as_bytes())?;
    Ok(format!("wrote {}", out.display()))
}
