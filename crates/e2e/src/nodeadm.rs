//! nodeadm's own reading of EC2 user data: `peers/nodeadm/check.sh` builds (once, cached) a binary from
//! the `github.com/awslabs/amazon-eks-ami/nodeadm` module that parses user data as nodeadm does on a node
//! (MIME multipart, the `application/node.eks.aws` parts decoded and merged) and validates the NodeConfig
//! with nodeadm's own rules. [`nodeadm_reads`] returns the NodeConfig nodeadm would run with, or its error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::process::run_script;
use super::{Error, Result, repo_root};

/// The checker binary (built on first use; `log` gets the build output).
pub async fn nodeadm_checker(log: &Path) -> Result<PathBuf> {
    let out = run_script(&repo_root().join("peers").join("nodeadm").join("check.sh"), "build", &[], log).await?;
    out.lines().rev().map(PathBuf::from).find(|p| p.is_absolute() && p.ends_with("stowage-nodeadm-check")).ok_or_else(|| Error::Invalid(format!("check.sh printed no binary path: {out:?}")))
}

/// What nodeadm makes of `user_data` (the decoded bytes, not base64): `Ok` with the NodeConfig it would
/// run with (nodeadm's internal form as JSON), `Err(message)` with nodeadm's own error when it refuses it.
pub fn nodeadm_reads(checker: &Path, user_data: &[u8]) -> Result<std::result::Result<serde_json::Value, String>> {
    let what = format!("running {}", checker.display());
    let mut child = std::process::Command::new(checker).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| Error::io(what.clone(), e))?;
    child.stdin.take().expect("piped stdin").write_all(user_data).map_err(|e| Error::io(what.clone(), e))?;
    let out = child.wait_with_output().map_err(|e| Error::io(what.clone(), e))?;
    match out.status.code() {
        Some(0) => serde_json::from_slice(&out.stdout).map(Ok).map_err(|e| Error::Invalid(format!("{what}: not JSON: {e}"))),
        Some(1) => Ok(Err(String::from_utf8_lossy(&out.stderr).trim().to_string())),
        _ => Err(Error::Invalid(format!("{what}: {} {}", out.status, String::from_utf8_lossy(&out.stderr)))),
    }
}
