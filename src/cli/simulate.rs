//! `stowage simulate`: runs scenarios in the simulator (crates/sim) and prints their timelines.

use std::path::PathBuf;
use std::process::ExitCode;

use stowage_sim::{Disk, Options, Report, Scenario, Solver};

use super::Output as Format;
use super::out::{out, outln};

/// `stowage simulate`: exit code 0 if every scenario passes, 1 if one fails, 2 if one cannot run.
pub(crate) fn command(paths: &[PathBuf], solver: Option<Solver>, format: Format) -> ExitCode {
    let loaded: Result<Vec<Scenario>, String> = if paths.is_empty() {
        stowage_sim::seed_scenarios().map_err(|e| e.to_string())
    } else {
        stowage_sim::scenario_files(paths).and_then(|files| files.iter().map(|f| stowage_sim::scenario::load(f, &Disk)).collect()).map_err(|e| e.to_string())
    };
    let scenarios = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = Options { solver, check_plans: true };
    let mut reports = Vec::new();
    for sc in &scenarios {
        match stowage_sim::run(sc, &opts) {
            Ok(r) => {
                if format == Format::Table
                    && let Err(e) = out!("{}", stowage_sim::report::render(&r, true))
                {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
                reports.push(r);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let passed = reports.iter().all(|r| r.passed);
    match format {
        Format::Table => {
            let verdicts: Vec<String> = reports.iter().map(|r| format!("{} {}", r.scenario, if r.passed { "PASS" } else { "FAIL" })).collect();
            if let Err(e) = outln!("{} of {} scenario(s) pass: {}", reports.iter().filter(|r| r.passed).count(), reports.len(), verdicts.join(", ")) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        Format::Json | Format::Yaml => {
            #[derive(serde::Serialize)]
            struct Out<'r> {
                passed: bool,
                scenarios: &'r [Report],
            }
            let v = Out { passed, scenarios: &reports };
            let text = if format == Format::Json { serde_json::to_string_pretty(&v).map(|s| s + "\n").map_err(|e| e.to_string()) } else { serde_saphyr::to_string(&v).map_err(|e| e.to_string()) };
            match text.and_then(|t| out!("{t}")) {
                Ok(()) => {}
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    if passed { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
