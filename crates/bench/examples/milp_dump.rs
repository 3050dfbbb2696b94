#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]
//! Dumps, per corpus workload, every model the MILP hands HiGHS (the `milp::MODEL_TRACE` events, one
//! file each), the solver's DEBUG events (`debug.log`) and the MILP plan without its times
//! (`plan.json`), so that two builds of the encoding can be compared with `diff -r`. Runs that end at a
//! time share (column generation, the size-class bound, the integer program) differ by budget effects
//! only after the last model both runs reached.
//!
//! cargo run -p stowage-bench --example milp_dump -- REPO OUT BUDGET_SECONDS WORKLOAD...
//! (WORKLOAD: a name from benches/workloads/index.yaml, or FILE@CATALOG_FILE)
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stowage_core::solve::{Planner, Solver, plan_cluster};
use stowage_core::weights::Weights;
use tracing::field::{Field, Visit};

const MODEL: &str = stowage_core::solve::milp::MODEL_TRACE;

struct Sink {
    dir: PathBuf,
    seq: Mutex<usize>,
    log: Arc<Mutex<String>>,
}

#[derive(Default)]
struct Fields {
    phase: String,
    model: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, f: &Field, v: &str) {
        match f.name() {
            "phase" => self.phase = v.to_string(),
            "model" => self.model = v.to_string(),
            n => {
                let _ = write!(self.rest, " {n}={v}");
            }
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        let _ = write!(self.rest, " {}={v:?}", f.name());
    }
}

impl tracing::Subscriber for Sink {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == MODEL || (m.target().starts_with("stowage_core") && *m.level() <= tracing::Level::DEBUG)
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        let mut f = Fields::default();
        e.record(&mut f);
        if e.metadata().target() == MODEL {
            let mut seq = self.seq.lock().unwrap();
            *seq += 1;
            std::fs::write(self.dir.join(format!("{:02}-{}.txt", *seq, f.phase)), &f.model).unwrap();
        } else {
            let _ = writeln!(self.log.lock().unwrap(), "{} {}{}", e.metadata().target(), f.phase, f.rest);
        }
    }
}

fn strip_times(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("timeMs");
            for (_, x) in m.iter_mut() {
                strip_times(x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_times),
        _ => {}
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let repo = PathBuf::from(&args[1]);
    let out = PathBuf::from(&args[2]);
    let budget: f64 = args[3].parse().unwrap();
    let corpus = stowage_bench::corpus::load_index(&repo.join("benches/workloads/index.yaml")).unwrap();
    for name in &args[4..] {
        // A corpus entry, or `FILE@CATALOG`: a workload file on a catalog file.
        let (w, cat, name) = match name.split_once('@') {
            Some((file, catalog)) => {
                let w = stowage_bench::corpus::load_workload(&[PathBuf::from(file)]).unwrap();
                let cat = stowage_bench::corpus::CatalogRef::File(PathBuf::from(catalog)).load().unwrap();
                (w, cat, PathBuf::from(file).file_stem().unwrap().to_string_lossy().into_owned())
            }
            None => {
                let e = corpus.workloads.iter().find(|e| &e.name == name).unwrap_or_else(|| panic!("no workload {name}"));
                (stowage_bench::corpus::load_workload(&e.files).unwrap(), e.catalog.load().unwrap(), name.clone())
            }
        };
        let dir = out.join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Sink { dir: dir.clone(), seq: Mutex::new(0), log: log.clone() };
        let sub = sink;
        let planner = Planner { solver: Solver::Milp, time_budget: Duration::from_secs_f64(budget), gap: 0.01, threads: 1 };
        let t = std::time::Instant::now();
        let plan = tracing::subscriber::with_default(sub, || plan_cluster(&w.cluster, &cat, &Weights::default(), planner)).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&plan.to_json()).unwrap();
        let time = v.pointer("/solver/timeMs").cloned();
        strip_times(&mut v);
        std::fs::write(dir.join("plan.json"), serde_json::to_string_pretty(&v).unwrap()).unwrap();
        std::fs::write(dir.join("debug.log"), log.lock().unwrap().as_str()).unwrap();
        println!("{name}: {:.1}s wall, solver {:?}, status {:?}", t.elapsed().as_secs_f64(), time, v.pointer("/solver/status"));
    }
}
