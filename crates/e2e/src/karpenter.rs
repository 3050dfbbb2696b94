//! Karpenter's own operator (`sigs.k8s.io/karpenter/kwok`, its KWOK cloud provider) against a
//! [`ControlPlane`], for comparisons of whole controllers (issue 19).
//!
//! - The binary and the CRDs of that module version come from `peers/karpenter/build-operator.sh`
//!   (cached under `$STOWAGE_CACHE/karpenter-kwok-<version>/`; `crds/` holds the YAML).
//! - [`KarpenterOperator::start`] installs the module's NodePool and NodeClaim CRDs over the ones the
//!   control plane installed (the same Karpenter version's), adds KWOKNodeClass, NodeOverlay
//!   and CapacityBuffer, writes the instance-types file if one is given as JSON, and runs the operator with
//!   the admin kubeconfig, leader election off, metrics and health probes on two free local ports and its
//!   log in `target/e2e/<control plane name>/karpenter/karpenter.log`. It returns once `/readyz` answers 200.
//! - The KWOK provider creates Node objects itself (no kubelet); run [`crate::Kubelet::start_kwok`] to make
//!   them Ready and "run" their pods.
//! - The operator runs under a small bash wrapper whose stdin is a pipe only the test process holds: stop,
//!   drop, a panic or the death of the test process close it, and the wrapper sends SIGTERM (SIGKILL after
//!   10 s). So the operator never outlives the test.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::control_plane::install_crd_dir;
use super::process::{PortBlock, run_script};
use super::{ControlPlane, Error, Probe, Result, e2e_root, poll_until, repo_root};

const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The instance types the KWOK provider offers.
#[derive(Clone, Debug, Default)]
pub enum InstanceTypes {
    /// The module's embedded `kwok/cloudprovider/instance_types.json` (144 generic types `c-1x-amd64-linux`
    /// ... in zones `test-zone-a..d`, on-demand and spot).
    #[default]
    Embedded,
    /// An instance-types file (the KWOK format: `[{name, offerings: [{Price, Available, Requirements}],
    /// architecture, operatingSystems, resources}]`).
    File(PathBuf),
    /// That format as text; written to `karpenter/instance-types.json` in the run dir.
    Json(String),
}

/// What every KWOK instance type reserves (`newInstanceType` in kwok/cloudprovider/helpers.go: a fixed
/// kube-reserved of 100m CPU and 10Mi memory); KWOK's allocatable is its `resources` minus this.
const KWOK_OVERHEAD_CPU_M: i64 = 100;
const KWOK_OVERHEAD_MEMORY: i64 = 10 << 20;

impl InstanceTypes {
    /// The named types of stowage's embedded catalog (all of them when `names` is empty) in the KWOK
    /// format: every offering (zone, capacity type, price, availability), the architecture, linux, and
    /// `resources` = the catalog's allocatable plus KWOK's fixed overhead, so a KWOK Node's allocatable is
    /// exactly what stowage's catalog says the type's allocatable is (cpu, memory, ephemeral-storage, pods;
    /// extended resources such as `vpc.amazonaws.com/pod-eni` are left out).
    pub fn from_default_catalog(names: &[&str]) -> Result<Self> {
        Self::from_catalog(stowage_input::catalog::default_catalog(), names)
    }

    /// As [`InstanceTypes::from_default_catalog`], from any catalog (e.g. the default catalog as an
    /// EC2NodeClass sees it, `stowage_core::catalog::for_nodeclass`, so that Karpenter's Nodes get the
    /// allocatable stowage plans with).
    pub fn from_catalog(catalog: &stowage_core::domain::catalog::Catalog, names: &[&str]) -> Result<Self> {
        let mut out = Vec::new();
        for t in catalog.types.iter().filter(|t| names.is_empty() || names.contains(&t.name.as_str())) {
            let a = t.allocatable();
            let resources = serde_json::json!({
                "cpu": stowage_input::quantity::format("cpu", a.cpu_m + KWOK_OVERHEAD_CPU_M),
                "memory": stowage_input::quantity::format("memory", a.memory + KWOK_OVERHEAD_MEMORY),
                "ephemeral-storage": stowage_input::quantity::format("ephemeral-storage", a.ephemeral),
                "pods": stowage_input::quantity::format("pods", a.pods),
            });
            let offerings: Vec<serde_json::Value> = t
                .offerings
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "Price": o.price,
                        "Available": o.available,
                        "Requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [o.capacity_type]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [o.zone]},
                        ],
                    })
                })
                .collect();
            let arch = t.aws.as_ref().map_or("amd64", |f| f.arch.as_str());
            out.push(serde_json::json!({"name": t.name, "offerings": offerings, "architecture": arch, "operatingSystems": ["linux"], "resources": resources}));
        }
        let missing: Vec<&&str> = names.iter().filter(|n| catalog.get(n).is_none()).collect();
        if !missing.is_empty() {
            return Err(Error::Invalid(format!("instance types not in stowage's embedded catalog: {missing:?}")));
        }
        Ok(InstanceTypes::Json(serde_json::Value::Array(out).to_string()))
    }
}

/// How the operator is run. Durations left `None` keep Karpenter's defaults (batch 10 s max, 1 s idle).
#[derive(Clone, Debug)]
pub struct KarpenterConfig {
    pub instance_types: InstanceTypes,
    /// `BATCH_MAX_DURATION`.
    pub batch_max_duration: Option<Duration>,
    /// `BATCH_IDLE_DURATION`.
    pub batch_idle_duration: Option<Duration>,
    /// `LOG_LEVEL`: `debug` (default here: it logs the consolidation and batching decisions), `info`, `error`.
    pub log_level: String,
    /// Further environment for the operator (e.g. `FEATURE_GATES`), applied last.
    pub env: Vec<(String, String)>,
}

impl Default for KarpenterConfig {
    fn default() -> Self {
        KarpenterConfig { instance_types: InstanceTypes::Embedded, batch_max_duration: None, batch_idle_duration: None, log_level: "debug".to_string(), env: Vec::new() }
    }
}

/// What `peers/karpenter/build-operator.sh` produced.
#[derive(Clone, Debug)]
pub struct OperatorBuild {
    pub binary: PathBuf,
    /// The CRD YAML files of the same module version.
    pub crds: PathBuf,
}

/// A running Karpenter KWOK operator. Stopped on [`KarpenterOperator::stop`] or drop.
pub struct KarpenterOperator {
    dir: PathBuf,
    log: PathBuf,
    metrics_port: u16,
    health_port: u16,
    started_in: Duration,
    wrapper: Option<Child>,
    _ports: PortBlock,
}

impl KarpenterOperator {
    /// Builds (or finds up to date) the operator binary and its CRDs.
    pub async fn build(log: &Path) -> Result<OperatorBuild> {
        let script = repo_root().join("peers").join("karpenter").join("build-operator.sh");
        let out = run_script(&script, "build", &[], log).await?;
        // The script prints the binary's path last on stdout; stderr (progress) is appended after it by
        // `run_script`, so look for the line that names the binary.
        let binary = out
            .lines()
            .rev()
            .find(|l| l.ends_with("/karpenter-kwok") && !l.contains(' '))
            .map(PathBuf::from)
            .ok_or_else(|| Error::Invalid(format!("build-operator.sh printed no binary path: {out:?}")))?;
        let crds = binary.parent().map(|d| d.join("crds")).ok_or_else(|| Error::Invalid(format!("binary path without a directory: {}", binary.display())))?;
        Ok(OperatorBuild { binary, crds })
    }

    /// Builds if needed, installs the CRDs, starts the operator against `cp` and waits for `/readyz`.
    pub async fn start(cp: &ControlPlane, config: KarpenterConfig) -> Result<Self> {
        let t0 = Instant::now();
        let dir = e2e_root().join(cp.name()).join("karpenter");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let build = Self::build(&dir.join("build.log")).await?;
        install_crd_dir(&cp.client(), &build.crds).await?;

        let types_file = match &config.instance_types {
            InstanceTypes::Embedded => None,
            InstanceTypes::File(p) => Some(p.clone()),
            InstanceTypes::Json(text) => {
                let p = dir.join("instance-types.json");
                std::fs::write(&p, text).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
                Some(p)
            }
        };
        let ports = PortBlock::allocate(&format!("karpenter/{}", cp.name()), 2, &[])?;
        let (metrics_port, health_port) = (ports.base, ports.base + 1);
        let mut env: Vec<(String, String)> = vec![
            ("KUBECONFIG".into(), cp.kubeconfig().display().to_string()),
            ("DISABLE_LEADER_ELECTION".into(), "true".into()),
            ("METRICS_PORT".into(), metrics_port.to_string()),
            ("HEALTH_PROBE_PORT".into(), health_port.to_string()),
            ("LOG_LEVEL".into(), config.log_level.clone()),
        ];
        if let Some(p) = &types_file {
            env.push(("INSTANCE_TYPES_FILE_PATH".into(), p.display().to_string()));
        }
        if let Some(d) = config.batch_max_duration {
            env.push(("BATCH_MAX_DURATION".into(), go_duration(d)));
        }
        if let Some(d) = config.batch_idle_duration {
            env.push(("BATCH_IDLE_DURATION".into(), go_duration(d)));
        }
        env.extend(config.env.iter().cloned());

        let log = dir.join("karpenter.log");
        let header = format!("===== {} with {}\n", build.binary.display(), env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
        std::fs::write(&log, header).map_err(|e| Error::io(format!("writing {}", log.display()), e))?;
        // One append-mode file description shared by stdout and stderr, so neither overwrites the other.
        let out = std::fs::OpenOptions::new().append(true).open(&log).map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
        let err = out.try_clone().map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c").arg(WRAPPER).arg(&build.binary).stdin(Stdio::piped()).stdout(out).stderr(err).process_group(0);
        // Nothing of the test's own cluster settings leaks in; only what is set here.
        for key in ["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"] {
            cmd.env_remove(key);
        }
        cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let wrapper = cmd.spawn().map_err(|e| Error::io("spawning the Karpenter operator", e))?;
        let mut op = KarpenterOperator { dir, log, metrics_port, health_port, started_in: Duration::ZERO, wrapper: Some(wrapper), _ports: ports };

        let port = op.health_port;
        let ready = poll_until("the Karpenter operator's /readyz", READY_TIMEOUT, Duration::from_millis(250), || {
            let exited = op.exited();
            async move {
                if let Some(status) = exited {
                    return Err(Error::Invalid(format!("the Karpenter operator exited ({status}) before it was ready")));
                }
                Ok(match http_get(port, "/readyz").await {
                    Ok((200, _)) => Probe::Done(()),
                    Ok((code, body)) => Probe::Waiting(format!("HTTP {code}: {body}")),
                    Err(e) => Probe::Waiting(e.to_string()),
                })
            }
        })
        .await;
        if let Err(e) = ready {
            return Err(Error::Invalid(format!("{e}; log {}:\n{}", op.log.display(), op.log_tail(40))));
        }
        op.started_in = t0.elapsed();
        eprintln!("stowage e2e: Karpenter KWOK operator up in {:.1}s (metrics :{}, health :{}, log {})", op.started_in.as_secs_f64(), op.metrics_port, op.health_port, op.log.display());
        Ok(op)
    }

    /// The operator's log (JSON lines, stdout and stderr).
    pub fn log_file(&self) -> &Path {
        &self.log
    }

    /// `target/e2e/<name>/karpenter`: the log, the instance-types file, the build log.
    pub fn run_dir(&self) -> &Path {
        &self.dir
    }

    /// The last `n` lines of the log (for failure messages).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Wall time of [`KarpenterOperator::start`] (build check, CRDs, process start, caches synced).
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// `Some(exit status)` if the operator (its wrapper) has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.wrapper.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Stops the operator (SIGTERM, SIGKILL after 10 s) and waits for it.
    pub async fn stop(mut self) -> Result<()> {
        let Some(child) = self.wrapper.take() else { return Ok(()) };
        tokio::task::spawn_blocking(move || finish(child)).await.map_err(|e| Error::Invalid(format!("stopping the Karpenter operator: {e}")))?
    }
}

impl Drop for KarpenterOperator {
    fn drop(&mut self) {
        if let Some(child) = self.wrapper.take()
            && let Err(e) = finish(child)
        {
            eprintln!("stowage e2e: {e}");
        }
    }
}

/// `$0` is the operator binary. The operator gets /dev/null as stdin; the wrapper keeps the pipe from the
/// test process on fd 3 and stops the operator when it reaches EOF. Exits with the operator's status.
const WRAPPER: &str = r#"exec 3<&0
"$0" </dev/null 3<&- &
pid=$!
{ read -r _ <&3 || true
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  echo "===== wrapper: the operator ignored SIGTERM for 10 s; SIGKILL"
  kill -KILL "$pid" 2>/dev/null; } &
reader=$!
wait "$pid"; rc=$?
kill "$reader" 2>/dev/null
echo "===== wrapper: the operator exited with $rc"
exit "$rc""#;

fn finish(mut child: Child) -> Result<()> {
    drop(child.stdin.take());
    child.wait().map_err(|e| Error::io("waiting for the Karpenter operator", e))?;
    // SIGTERM makes the operator exit non-zero at times (a controller's context cancelled); that is a stop,
    // not a failure.
    Ok(())
}

/// A Go `time.ParseDuration` string: whole milliseconds.
fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// A plain HTTP/1.1 GET to 127.0.0.1:`port`; (status code, body).
async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let what = format!("GET 127.0.0.1:{port}{path}");
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| Error::io(what.clone(), e))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.map_err(|e| Error::io(what.clone(), e))?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.map_err(|e| Error::io(what.clone(), e))?;
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| Error::Invalid(format!("{what}: no HTTP status in {head:?}")))?;
    Ok((code, body.to_string()))
}
