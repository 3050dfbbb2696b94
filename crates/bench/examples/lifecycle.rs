#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]
//! Consolidation over a cluster's life (`stowage_bench::lifecycle` says what is run and measured): a
//! history through the simulator with consolidation on and off, and the integral of the lower bound of
//! its demand. Prints the table; with `--out DIR` writes `table.md` and `results.json` there. With
//! `--rebound DIR` it runs nothing but the bound of the same history, and rewrites DIR's bound,
//! table.md and results.json from its recorded rows (the earlier bound kept as `boundUsdEarlier`).
//!
//! cargo run --release -p stowage-bench --example lifecycle -- --history openb [--start 12000000]
//!     [--span-hours 24] | --history diurnal [--hours 48] [--seed 1]
//!     [--consolidate-after-s 300] [--solver milp|greedy] [--out DIR | --rebound DIR]
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use stowage_bench::lifecycle::{Config, History, Row, bound, run, table};
use stowage_core::solve::Solver;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).map(|i| args.get(i + 1).cloned().unwrap_or_else(|| fail(&format!("{flag} needs a value"))));
    let num = |flag: &str, default: u64| get(flag).map(|v| v.parse::<u64>().unwrap_or_else(|_| fail(&format!("{flag}: a whole number")))).unwrap_or(default);
    for (i, a) in args.iter().enumerate() {
        let known = ["--history", "--start", "--span-hours", "--hours", "--seed", "--consolidate-after-s", "--solver", "--out", "--rebound"];
        if i % 2 == 0 && !known.contains(&a.as_str()) {
            fail(&format!("unknown argument {a:?} (known: {})", known.join(", ")));
        }
    }
    let history = match get("--history").as_deref() {
        Some("openb") | None => {
            History::Openb { trace: stowage_bench::repo_root().join("benches/workloads/openb/openb_pod_list_default.csv.gz"), start: num("--start", 12_000_000), span: num("--span-hours", 24) * 3600 }
        }
        Some("diurnal") => History::Diurnal { hours: num("--hours", 48) as u32, seed: num("--seed", 1) },
        Some(other) => fail(&format!("--history {other:?}: openb or diurnal")),
    };
    let mut cfg = Config::new(history);
    cfg.consolidate_after = Duration::from_secs(num("--consolidate-after-s", 300));
    if let Some(s) = get("--solver") {
        cfg.planner.solver = match s.as_str() {
            "milp" => Solver::Milp,
            "greedy" => Solver::Greedy,
            other => fail(&format!("--solver {other:?}: milp or greedy")),
        };
    }
    if let Some(dir) = get("--rebound").map(PathBuf::from) {
        return rebound(&cfg, &dir);
    }
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for on in [true, false] {
        let (row, report) = run(&cfg, on).unwrap_or_else(|e| fail(&e));
        eprintln!("{}: ${:.2}, {:.0} s wall", row.run, row.cost_usd, row.wall_s);
        rows.push(row);
        reports.push(report);
    }
    let tb = Instant::now();
    let (curve, integral) = bound(&cfg).unwrap_or_else(|e| fail(&e));
    eprintln!("bound: ${integral:.2} in {:.0} s", tb.elapsed().as_secs_f64());
    let text = table(&cfg, &rows, integral);
    print!("{text}");
    eprintln!("total {:.0} s", t0.elapsed().as_secs_f64());
    if let Some(dir) = get("--out").map(PathBuf::from) {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        std::fs::write(dir.join("table.md"), &text).unwrap_or_else(|e| fail(&e.to_string()));
        let cost_over_time: Vec<_> = reports.iter().map(|r| serde_json::json!({"run": r.scenario, "costOverTime": r.cost_over_time})).collect();
        let json = serde_json::json!({
            "history": cfg.history.name(),
            "consolidateAfterS": cfg.consolidate_after.as_secs(),
            "planner": cfg.planner.solver.as_str(),
            "rows": rows,
            "boundUsd": integral,
            "boundCurve": curve,
            "costOverTime": cost_over_time,
        });
        std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(&json).unwrap_or_default() + "\n").unwrap_or_else(|e| fail(&e.to_string()));
        eprintln!("wrote {}", dir.display());
    }
}

/// Recomputes the bound of the run written in `dir` (made with the same history arguments) and
/// rewrites its table.md and the bound's fields of results.json; the rest of results.json is kept
/// byte for byte (read back, its floats could move in the last digit).
fn rebound(cfg: &Config, dir: &Path) {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| fail_at(&path, &e));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| fail_at(&path, &e));
    if json["history"] != serde_json::json!(cfg.history.name()) {
        fail_at(&path, &format_args!("history {} was written, the arguments give {}", json["history"], cfg.history.name()));
    }
    let rows: Vec<Row> = serde_json::from_value(json["rows"].clone()).unwrap_or_else(|e| fail_at(&path, &format_args!("rows: {e}")));
    let tb = Instant::now();
    let (curve, integral) = bound(cfg).unwrap_or_else(|e| fail(&e));
    eprintln!("bound: ${integral:.2} (was {}) in {:.0} s", json["boundUsd"], tb.elapsed().as_secs_f64());
    // The first rebound keeps the bound the runs were written with.
    let earlier = json.get("boundUsdEarlier").unwrap_or(&json["boundUsd"]).clone();
    let fields = serde_json::json!({"boundCurve": curve, "boundUsd": integral, "boundUsdEarlier": earlier});
    // From the bound's first field to the next key (`boundStepS` of older files in between).
    let written = stowage_bench::splice_fields(&text, "boundCurve", "consolidateAfterS", &fields)
        .unwrap_or_else(|| fail_at(&path, &"the bound's fields are not where the example writes them (boundCurve ... before consolidateAfterS)"));
    let check: serde_json::Value = serde_json::from_str(&written).unwrap_or_else(|e| fail_at(&path, &format_args!("the rewritten text does not read back: {e}")));
    if check["rows"] != json["rows"] || check["boundUsd"].as_f64().is_none_or(|b| (b - integral).abs() > 1e-9 * integral.max(1.0)) {
        fail_at(&path, &"the rewritten text does not read back as written");
    }
    let table_text = table(cfg, &rows, integral);
    print!("{table_text}");
    std::fs::write(dir.join("table.md"), &table_text).unwrap_or_else(|e| fail(&e.to_string()));
    std::fs::write(&path, written).unwrap_or_else(|e| fail(&e.to_string()));
    eprintln!("wrote {}", dir.display());
}

fn fail_at(path: &Path, e: &dyn std::fmt::Display) -> ! {
    fail(&format!("{}: {e}", path.display()))
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}
