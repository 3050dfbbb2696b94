//! The Karpenter peer (peers/karpenter, README there): Karpenter v1.14.1's provisioning scheduler run as a
//! separate Go program on the same batch and catalog. It reads the expanded batch (`stowage export`) and
//! a catalog file and writes a `stowage.dev/plan/v1` plan, which the bench then judges with the same
//! checker as stowage's own plans.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use stowage_core::plan::Plan;
use stowage_input::Workload;

/// Builds the peer if needed (`peers/karpenter/build.sh`: cached under `$STOWAGE_CACHE`, a no-op when
/// current) and returns the binary's path, the last line the script prints.
pub fn build(root: &Path) -> Result<PathBuf, String> {
    let script = root.join("peers/karpenter/build.sh");
    if !script.is_file() {
        return Err(format!("{}: not found (run from the stowage repository, or set STOWAGE_ROOT)", script.display()));
    }
    let out = Command::new("bash").arg(&script).output().map_err(|e| format!("{}: cannot run: {e}", script.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        return Err(format!("{} failed ({}); last lines:\n{}", script.display(), out.status, tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let bin = stdout.lines().rev().find(|l| !l.trim().is_empty()).map(|l| PathBuf::from(l.trim()));
    match bin {
        Some(b) if b.is_file() => Ok(b),
        _ => Err(format!("{}: printed no binary path (stdout: {stdout:?})", script.display())),
    }
}

/// What one peer run gave.
pub struct PeerRun {
    pub plan: Plan,
    /// Wall time of the whole process (decoding, fake API server, scheduling, writing).
    pub wall_ms: f64,
    /// Karpenter's scheduling work: NewTopology + NewScheduler + Solve + TruncateInstanceTypes phases.
    pub schedule_ms: f64,
    pub stderr_tail: String,
}

/// Writes the expanded batch and the catalog into `dir`, runs the peer and reads its plan.
pub fn run(bin: &Path, w: &Workload, catalog_text: &str, args: &[String], dir: &Path, name: &str) -> Result<PeerRun, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let batch = dir.join(format!("{name}.batch.json"));
    let catalog = dir.join(format!("{name}.catalog.json"));
    let plan_file = dir.join(format!("{name}.karpenter-plan.json"));
    let list = stowage_input::export::to_list(&w.objects);
    let text = serde_json::to_string(&list).map_err(|e| format!("cannot write the batch: {e}"))?;
    std::fs::write(&batch, text).map_err(|e| format!("{}: {e}", batch.display()))?;
    std::fs::write(&catalog, catalog_text).map_err(|e| format!("{}: {e}", catalog.display()))?;
    let _ = std::fs::remove_file(&plan_file);
    let t0 = Instant::now();
    let out = Command::new(bin)
        .arg("--catalog")
        .arg(&catalog)
        .arg("--out")
        .arg(&plan_file)
        .args(args)
        .arg(&batch)
        // Karpenter's own log lines would drown the progress bar; errors still come back in stderr.
        .env("STOWAGE_KARPENTER_LOG", "off")
        .output()
        .map_err(|e| format!("{}: cannot run: {e}", bin.display()))?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr_tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    if !out.status.success() {
        return Err(format!("karpenter-peer exited with {}: {stderr_tail}", out.status));
    }
    let text = std::fs::read_to_string(&plan_file).map_err(|e| format!("{}: {e}", plan_file.display()))?;
    let plan = Plan::from_json(&text).map_err(|e| format!("{}: not a plan: {e}", plan_file.display()))?;
    let schedule_ms = plan.solver.phases.iter().filter(|p| matches!(p.name.as_str(), "newTopologyAndScheduler" | "solve" | "truncateInstanceTypes")).map(|p| p.time_ms).sum();
    Ok(PeerRun { plan, wall_ms, schedule_ms, stderr_tail })
}
