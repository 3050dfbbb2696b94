//! The lifetime benchmark's command line (issue 19; docs/lifetime.md): each history once with
//! Karpenter's operator and once with stowage's controller on a real control plane, the results in
//! `--out/<history>/` (results.json, table.md, cost.svg, each run's recording, NodeClaims and
//! Karpenter's log). `scripts/lifetime.sh` builds and runs it.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use stowage_lifetime::history::{self, History};
use stowage_lifetime::run::Contender;
use stowage_lifetime::setup::{Setup, Timing};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    Web,
    Batch,
    Openb,
    /// The smoke test's one-hour history.
    Smoke,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Who {
    Karpenter,
    Stowage,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Policy {
    WhenEmptyOrUnderutilized,
    WhenEmpty,
}

#[derive(Parser, Debug)]
#[command(about = "stowage's controller and Karpenter's operator over one cluster history each")]
struct Args {
    /// Histories to run (each with every controller).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["web", "batch", "openb"])]
    history: Vec<Which>,
    /// Controllers, in run order.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["karpenter", "stowage"])]
    controllers: Vec<Who>,
    /// History seconds per wall second.
    #[arg(long, default_value_t = 60.0)]
    compression: f64,
    /// History seconds from launch to the Node (both clouds).
    #[arg(long, default_value_t = 60.0)]
    boot: f64,
    /// The NodePool's consolidateAfter, history seconds.
    #[arg(long, default_value_t = 300.0)]
    consolidate_after: f64,
    /// Run both controllers' fixed disruption and termination timers at their real-time values
    /// instead of compressing them with the history (the first, unfair measurements ran so).
    #[arg(long)]
    real_time_timers: bool,
    /// The NodePool's disruption budget (`nodes`).
    #[arg(long, default_value = "10%")]
    budget: String,
    /// The NodePool's consolidationPolicy (`WhenEmpty`: each controller's bill without consolidation).
    #[arg(long, value_enum, default_value = "when-empty-or-underutilized")]
    consolidation_policy: Policy,
    /// Seed of the generated histories.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hours of the web history.
    #[arg(long, default_value_t = 24.0)]
    web_hours: f64,
    /// Hours of the batch history.
    #[arg(long, default_value_t = 3.0)]
    batch_hours: f64,
    /// openb window: start and span (trace seconds); the default is the 12 h with the most CPU-only rows
    /// of the default pod list (65; the trace is mostly GPU pods, which the KWOK types cannot host).
    #[arg(long, default_value_t = 10_767_600)]
    openb_start: u64,
    #[arg(long, default_value_t = 43_200)]
    openb_span: u64,
    /// Cut every history to this many history seconds (a quick look).
    #[arg(long)]
    truncate: Option<f64>,
    /// Recompute the bound of comparisons already written (each DIR's results.json) and rewrite their
    /// bound, table.md and cost.svg; runs nothing else.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    rebound: Vec<PathBuf>,
    #[arg(long, default_value = "benches/results/lifetime")]
    out: PathBuf,
    /// stowage's cost weights (a file as models/weights/default.yaml); the embedded default if absent.
    #[arg(long, value_name = "FILE")]
    weights: Option<PathBuf>,
}

fn stowage_weights(path: Option<&std::path::Path>) -> Result<stowage_core::weights::Weights, String> {
    path.map_or_else(|| Ok(stowage_core::weights::Weights::default()), |p| stowage_input::weights::load(p).map_err(|e| e.to_string()))
}

fn histories(a: &Args) -> Result<Vec<History>, String> {
    let mut out = Vec::new();
    for w in &a.history {
        let h = match w {
            Which::Web => history::web(a.seed, 10, a.web_hours),
            Which::Batch => history::batch(a.seed, a.batch_hours),
            Which::Smoke => history::smoke(),
            Which::Openb => {
                let path = stowage_e2e::repo_root().join("../shared/data/alibaba-openb/openb_pod_list_default.csv");
                let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                let trace = stowage_bench::openb::parse_trace(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                history::openb(&trace, a.openb_start, a.openb_span)
            }
        };
        out.push(match a.truncate {
            Some(t) => h.truncated(t),
            None => h,
        });
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("stowage_lifetime=info,warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let a = Args::parse();
    let timing = Timing { compression: a.compression, boot_s: a.boot, consolidate_after_s: a.consolidate_after, scale_timers: !a.real_time_timers };
    let contenders: Vec<Contender> = a
        .controllers
        .iter()
        .map(|w| match w {
            Who::Karpenter => Contender::Karpenter,
            Who::Stowage => Contender::Stowage,
        })
        .collect();
    let setup = match Setup::new(&stowage_lifetime::setup::DEFAULT_TYPES.map(String::from), &stowage_lifetime::setup::DEFAULT_ZONES.map(String::from), &["on-demand".to_string()], &a.budget) {
        Ok(s) => Setup {
            consolidation_policy: match a.consolidation_policy {
                Policy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
                Policy::WhenEmpty => "WhenEmpty",
            }
            .to_string(),
            stowage_weights: match stowage_weights(a.weights.as_deref()) {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("error: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            },
            ..s
        },
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if !a.rebound.is_empty() {
        return rebound(&a.rebound, &setup);
    }
    let hs = match histories(&a) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    for h in &hs {
        eprintln!("history {}: {} events, peak {} pods, {} h; about {:.0} min per controller", h.name, h.events.len(), h.peak_pods(), h.duration_s / 3600.0, h.duration_s / a.compression / 60.0);
        match stowage_lifetime::compare("lt", h, &setup, timing, &contenders, &a.out.join(&h.name)).await {
            Ok(c) => println!("{}", stowage_lifetime::report::table(&c.history, c.timing, &c.summaries, c.bound_usd)),
            Err(e) => {
                eprintln!("error: history {}: {e}", h.name);
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}

fn rebound(dirs: &[PathBuf], setup: &Setup) -> std::process::ExitCode {
    for d in dirs {
        match stowage_lifetime::rebound(d, setup) {
            Ok((before, after)) => println!("{}: bound ${before:.2} -> ${after:.2}", d.display()),
            Err(e) => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    std::process::ExitCode::SUCCESS
}
