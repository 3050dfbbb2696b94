//! The `stowage bench` and `stowage corpus` commands (wired into `src/cli/mod.rs`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use stowage_bench::corpus::{self, CatalogRef, Entry};
use stowage_bench::{Options, Profile};
use stowage_core::solve::Solver;

use super::{MilpArgs, SolverArg};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum PeerName {
    /// Karpenter v1.14.1's provisioning scheduler (peers/karpenter).
    Karpenter,
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Corpus entries by name (see benches/workloads/index.yaml), `all` for every entry including the
    /// non-standard ones, or workload files and folders (planned on --catalog). Default: the standard
    /// corpus and its trace replays.
    pub workloads: Vec<String>,
    /// The corpus index.
    #[arg(long)]
    pub index: Option<PathBuf>,
    /// Planners to run (repeat the flag); default greedy and milp.
    #[arg(long = "solver", value_enum)]
    pub solvers: Vec<SolverArg>,
    /// Weights profiles to compare side by side (repeat the flag); default the built-in weights.
    #[arg(long = "weights")]
    pub weights: Vec<PathBuf>,
    /// Run every weights profile under each of these preference policies side by side (repeat the
    /// flag: Respect, Ignore, Priced); default: each profile's own.
    #[arg(long = "preference-policy", value_parser = super::parse_preference_policy)]
    pub preference_policies: Vec<stowage_core::weights::PreferencePolicy>,
    /// Also run this peer on every workload and judge its plans with the same checker.
    #[arg(long, value_enum)]
    pub peer: Option<PeerName>,
    /// Runs of the peer per workload, with seeds 1..=N for its random launch choices (its scheduler's
    /// Go map order varies too); the tables show the median run by cost and the spread.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub peer_runs: u32,
    #[command(flatten)]
    pub milp: MilpArgs,
    /// Workloads planned in parallel, 0-256 (0, the default: one per core).
    #[arg(long, default_value_t = 0, value_parser = parse_jobs)]
    pub jobs: usize,
    /// Catalog for workloads given as files (default: the embedded us-east-1 catalog).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Output folder (default target/bench/standard, or target/bench/custom with WORKLOAD arguments).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the trace replays of the corpus.
    #[arg(long)]
    pub no_replays: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Subcommand, Clone, Debug)]
pub enum CorpusCommand {
    /// Write a batch of the Alibaba openb trace: the pods created in [start, start + span), pending.
    Openb {
        /// The pod list (CSV, maybe .gz).
        #[arg(long)]
        trace: PathBuf,
        /// Trace seconds.
        #[arg(long)]
        start: u64,
        /// Seconds.
        #[arg(long)]
        span: u64,
        /// Output file; `.gz` compresses.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write a mixed-constraint batch at a scale (≈ 113 pending pods per unit).
    Mixed {
        #[arg(long)]
        scale: usize,
        #[arg(long)]
        out: PathBuf,
    },
    /// Write a batch shaped like a recorded production cluster (crates/bench/src/cluster.rs).
    Cluster {
        /// `saas` (every pod pending) or `platform` (existing nodes run part of it; a scale-up).
        #[arg(long)]
        shape: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the DaemonSets every corpus workload loads (the EKS defaults plus a log and a metrics agent).
    Daemonsets {
        #[arg(long)]
        out: PathBuf,
    },
}

fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= 256 => Ok(n),
        _ => Err(format!("{s:?}: a whole number 0-256 (0: one per core)")),
    }
}

fn write(out: &Path, text: &str) -> Result<(), String> {
    if out.extension().and_then(|e| e.to_str()) == Some("gz") { corpus::write_gz(out, text) } else { stowage_input::output::write_atomic(out, text.as_bytes()) }
}

pub fn corpus_command(c: CorpusCommand) -> ExitCode {
    let r = match c {
        CorpusCommand::Openb { trace, start, span, out } => (|| {
            let rows = stowage_bench::openb::parse_trace(&corpus::read_text(&trace)?).map_err(|e| format!("{}: {e}", trace.display()))?;
            let pods = stowage_bench::openb::window(&rows, start, span);
            write(&out, &stowage_bench::openb::batch_text(&pods)?)?;
            Ok(format!("wrote {} ({} pods)", out.display(), pods.len()))
        })(),
        CorpusCommand::Cluster { shape, seed, out } => stowage_bench::cluster::Shape::parse(&shape)
            .and_then(|s| stowage_bench::cluster::workload(s, seed))
            .map_err(|e| e.to_string())
            .and_then(|t| write(&out, &t))
            .map(|_| format!("wrote {}", out.display())),
        CorpusCommand::Daemonsets { out } => stowage_bench::daemonsets::text().map_err(|e| e.to_string()).and_then(|t| write(&out, &t)).map(|_| format!("wrote {}", out.display())),
        CorpusCommand::Mixed { scale, out } => stowage_bench::mixed::workload(scale).map_err(|e| e.to_string()).and_then(|t| write(&out, &t)).map(|_| format!("wrote {}", out.display())),
    };
    super::report(r)
}

/// Resolves the WORKLOAD arguments into corpus entries and replays.
fn select(a: &BenchArgs, root: &Path) -> Result<(Vec<Entry>, Vec<corpus::Replay>, bool), String> {
    let index = a.index.clone().unwrap_or_else(|| root.join(corpus::STANDARD_INDEX));
    let needs_index = a.workloads.is_empty() || a.workloads.iter().any(|w| !Path::new(w).exists());
    let c = if needs_index { corpus::load_index(&index)? } else { Default::default() };
    if a.workloads.is_empty() {
        let w = c.workloads.iter().filter(|e| e.standard).cloned().collect();
        let r = if a.no_replays { Vec::new() } else { c.replays.iter().filter(|r| r.standard).cloned().collect() };
        return Ok((w, r, true));
    }
    let mut entries = Vec::new();
    let mut replays = Vec::new();
    let file_catalog = match &a.catalog {
        Some(p) => CatalogRef::File(p.clone()),
        None => CatalogRef::Default,
    };
    for w in &a.workloads {
        if w == "all" {
            entries.extend(c.workloads.iter().cloned());
            if !a.no_replays {
                replays.extend(c.replays.iter().cloned());
            }
        } else if let Some(e) = c.workloads.iter().find(|e| &e.name == w) {
            entries.push(e.clone());
        } else if let Some(r) = c.replays.iter().find(|r| &r.name == w) {
            replays.push(r.clone());
        } else if Path::new(w).exists() {
            let name = Path::new(w).file_name().and_then(|n| n.to_str()).unwrap_or(w).to_string();
            entries.push(Entry {
                name,
                group: "files".into(),
                description: format!("{w} (command line)"),
                files: vec![PathBuf::from(w)],
                catalog: file_catalog.clone(),
                peer_args: Vec::new(),
                standard: false,
                generator: None,
            });
        } else {
            let known: Vec<&str> = c.workloads.iter().map(|e| e.name.as_str()).chain(c.replays.iter().map(|r| r.name.as_str())).collect();
            return Err(format!("{w}: neither a file nor a corpus entry of {} (known: {})", index.display(), known.join(", ")));
        }
    }
    Ok((entries, replays, false))
}

pub fn bench(a: BenchArgs) -> ExitCode {
    let root = stowage_bench::repo_root();
    let (workloads, replays, standard) = match select(&a, &root) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut profiles = Vec::new();
    for p in &a.weights {
        match Profile::load(p) {
            Ok(p) if profiles.iter().any(|q: &Profile| q.name == p.name) => {
                eprintln!("error: two weights profiles are named {:?}; rename one file", p.name);
                return ExitCode::from(2);
            }
            Ok(p) => profiles.push(p),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if profiles.is_empty() {
        profiles.push(Profile::default_profile());
    }
    if !a.preference_policies.is_empty() {
        profiles = profiles.iter().flat_map(|p| a.preference_policies.iter().map(move |&pp| p.under(pp))).collect();
    }
    let peer = match a.peer {
        Some(PeerName::Karpenter) => match stowage_bench::peer::build(&root) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("error: cannot build the Karpenter peer: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let out = a.out.clone().unwrap_or_else(|| root.join("target/bench").join(if standard { "standard" } else { "custom" }));
    let opts = Options {
        solvers: if a.solvers.is_empty() { vec![Solver::Greedy, Solver::Milp] } else { a.solvers.iter().map(|&s| Solver::from(s)).collect() },
        profiles,
        peer,
        peer_runs: a.peer_runs,
        time_budget: a.milp.time_budget,
        gap: a.milp.gap,
        threads: a.milp.threads,
        scratch: out.join("peer-inputs"),
        progress: !a.quiet,
        jobs: a.jobs,
    };
    // An interrupted run must not leave the previous run's results looking current: they are removed
    // and a marker says a run is in progress until the new results are written.
    if let Err(e) = stowage_bench::report::start(&out) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let (res, took) = stowage_bench::timed(|| stowage_bench::run(&workloads, &replays, &opts));
    if let Err(e) = super::out::out!("{}", stowage_bench::report::markdown(&res)) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    match stowage_bench::report::write_all(&res, &out) {
        Ok(files) => eprintln!("bench: {} plans in {:.1}s; wrote {}", res.rows.len(), took.as_secs_f64(), files.join(", ")),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    if res.failed() {
        let bad: Vec<String> = res.rows.iter().filter(|r| r.fails_bench()).map(|r| format!("{}/{}/{}", r.workload, r.planner, r.weights)).collect();
        eprintln!("bench: FAILED: {}", if bad.is_empty() { "a replay has an error or an invalid plan".to_string() } else { bad.join(", ") });
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
