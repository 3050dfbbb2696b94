//! Process plumbing shared by the control plane and moto: running the shell scripts, the stop watchdog,
//! run-dir locks and port allocation.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use super::{Error, Result};

/// Runs `script command` with `envs`, appending its output to `log`. Fails with the tail of the output.
pub(crate) async fn run_script(script: &Path, command: &str, envs: &[(String, String)], log: &Path) -> Result<String> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(script);
    cmd.arg(command).stdin(Stdio::null()).kill_on_drop(false);
    for key in UNSHARED_ENV {
        cmd.env_remove(key);
    }
    cmd.envs(envs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let out = cmd.output().await.map_err(|e| Error::io(format!("running {} {command}", script.display()), e))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let mut f = OpenOptions::new().create(true).append(true).open(log).map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
    let header = format!("===== {} {command} ({:.1}s, {})\n", script.display(), started.elapsed().as_secs_f64(), out.status);
    f.write_all(header.as_bytes()).and_then(|()| f.write_all(text.as_bytes())).map_err(|e| Error::io(format!("writing {}", log.display()), e))?;
    if out.status.success() {
        Ok(text)
    } else {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        Err(Error::Script { script: script.display().to_string(), command: command.to_string(), status: out.status.to_string(), log: log.display().to_string(), tail })
    }
}

/// Variables that pin single ports of a component. Inherited from a developer's shell they would make every
/// test use the same port, so the harness never passes them on.
const UNSHARED_ENV: [&str; 6] = ["STOWAGE_CP_ETCD_PORT", "STOWAGE_CP_ETCD_PEER_PORT", "STOWAGE_CP_API_PORT", "STOWAGE_CP_SCHED_PORT", "STOWAGE_CP_KCM_PORT", "KUBECONFIG"];

/// Runs `<script> stop` when the test process lets go of it: on [`Watchdog::stop`], on drop, and when the
/// process dies in any way (the watchdog's stdin is a pipe whose only writer is this process; the kernel
/// closes it on exit, `read` returns, and the watchdog runs the stop command). It has its own process group
/// so a Ctrl-C aimed at the test does not kill it before it has cleaned up.
pub(crate) struct Watchdog {
    child: Option<Child>,
    what: String,
}

impl Watchdog {
    pub(crate) fn spawn(script: &Path, envs: &[(String, String)], log: &Path, what: &str) -> Result<Self> {
        let open = |p: &Path| OpenOptions::new().create(true).append(true).open(p).map_err(|e| Error::io(format!("opening {}", p.display()), e));
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c").arg(r#"read -r _ || true; echo "===== watchdog: stopping ($0 stop)"; exec "$0" stop"#).arg(script).stdin(Stdio::piped()).stdout(open(log)?).stderr(open(log)?).process_group(0);
        for key in UNSHARED_ENV {
            cmd.env_remove(key);
        }
        cmd.envs(envs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let child = cmd.spawn().map_err(|e| Error::io(format!("spawning the {what} watchdog"), e))?;
        Ok(Watchdog { child: Some(child), what: what.to_string() })
    }

    /// Stops the component and waits for the stop command to finish.
    pub(crate) async fn stop(&mut self) -> Result<()> {
        let Some(child) = self.child.take() else { return Ok(()) };
        let what = self.what.clone();
        tokio::task::spawn_blocking(move || finish(child, &what)).await.map_err(|e| Error::Invalid(format!("stopping {}: the stop task failed: {e}", self.what)))?
    }
}

fn finish(mut child: Child, what: &str) -> Result<()> {
    drop(child.stdin.take());
    let status = child.wait().map_err(|e| Error::io(format!("waiting for the {what} watchdog"), e))?;
    if status.success() { Ok(()) } else { Err(Error::Invalid(format!("stopping {what}: the stop command exited with {status}"))) }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(child) = self.child.take()
            && let Err(e) = finish(child, &self.what)
        {
            eprintln!("stowage e2e: {e}");
        }
    }
}

/// An exclusive lock on a run dir, held until drop (and released by the kernel if the process dies).
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    pub(crate) async fn acquire(path: PathBuf) -> Result<Self> {
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(format!("opening lock {}", path.display()), e))?;
        match file.try_lock() {
            Ok(()) => return Ok(DirLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!("stowage e2e: {} is in use by another test process; waiting", path.display());
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(format!("locking {}", path.display()), e)),
        }
        let what = format!("locking {}", path.display());
        tokio::task::spawn_blocking(move || file.lock().map(|()| file)).await.map_err(|e| Error::Invalid(format!("{what}: {e}")))?.map(|file| DirLock { _file: file }).map_err(|e| Error::io(what, e))
    }
}

/// Blocks of ports below Linux's ephemeral range (32768+), so outgoing connections never take them.
const PORT_FIRST: u16 = 20000;
const PORT_BLOCK: u16 = 10;
const PORT_BLOCKS: u16 = 1200;

static RESERVED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A block of consecutive free ports on 127.0.0.1, reserved within this process until drop.
pub(crate) struct PortBlock {
    pub(crate) base: u16,
}

impl PortBlock {
    /// The first block at or after a position derived from `seed` whose first `count` ports are free and
    /// not reserved by another harness object of this process. `skip` blocks that failed before are avoided.
    pub(crate) fn allocate(seed: &str, count: u16, skip: &[u16]) -> Result<Self> {
        let start = fnv1a(seed) % u64::from(PORT_BLOCKS);
        let mut reserved = RESERVED.lock().unwrap_or_else(|p| p.into_inner());
        for i in 0..u64::from(PORT_BLOCKS) {
            let block = u16::try_from((start + i) % u64::from(PORT_BLOCKS)).unwrap_or(0);
            let base = PORT_FIRST + block * PORT_BLOCK;
            if reserved.contains(&base) || skip.contains(&base) {
                continue;
            }
            if (base..base + count).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
                reserved.insert(base);
                return Ok(PortBlock { base });
            }
        }
        Err(Error::Invalid(format!("no {count} free consecutive ports between {PORT_FIRST} and 32000 on 127.0.0.1")))
    }
}

impl Drop for PortBlock {
    fn drop(&mut self) {
        RESERVED.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.base);
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `true` if a failed script run was about a port somebody else took between our check and its bind.
pub(crate) fn port_taken(e: &Error) -> bool {
    matches!(e, Error::Script { tail, .. } if tail.contains("in use"))
}
