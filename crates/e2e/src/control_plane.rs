//! A real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) per test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::process::{DirLock, PortBlock, Watchdog, port_taken, run_script};
use super::{Error, Result, check_name, e2e_root, kube_conflict, repo_root};

/// A running control plane. Stopped on [`ControlPlane::stop`] or drop (and by its watchdog if the test
/// process dies).
pub struct ControlPlane {
    name: String,
    dir: PathBuf,
    port_base: u16,
    kubeconfig: PathBuf,
    k8s_bin: PathBuf,
    client: kube::Client,
    started_in: Duration,
    // Drop order: stop the processes, then free the ports, then unlock the run dir.
    watchdog: Watchdog,
    _ports: PortBlock,
    _lock: DirLock,
}

const CRD_TIMEOUT: Duration = Duration::from_secs(60);

impl ControlPlane {
    /// Builds the binaries if needed, starts a fresh cluster in `target/e2e/<name>/cluster` on five free
    /// ports, connects, installs Karpenter v1.14.1's own NodePool, NodeClaim and EC2NodeClass CRDs
    /// ([`karpenter_aws_crds`]) and waits until they are Established.
    pub async fn start(name: &str) -> Result<Self> {
        check_name(name)?;
        let t0 = Instant::now();
        let top = e2e_root().join(name);
        let dir = top.join("cluster");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock = DirLock::acquire(top.join("cluster.lock")).await?;
        let scripts = repo_root().join("tests").join("control-plane");
        let log = top.join("cluster-scripts.log");

        // Idempotent (~0.4 s when the binaries are current; a cold build takes minutes and holds a lock).
        run_script(&scripts.join("build.sh"), "build", &[], &log).await?;
        let paths = run_script(&scripts.join("build.sh"), "paths", &[], &log).await?;
        let k8s_bin = paths.lines().find_map(|l| l.strip_prefix("K8S_BIN=")).map(PathBuf::from).ok_or_else(|| Error::Invalid(format!("build.sh paths printed no K8S_BIN line: {paths:?}")))?;

        let mut skip = Vec::new();
        let (watchdog, ports) = loop {
            let ports = PortBlock::allocate(&format!("cp/{name}"), 5, &skip)?;
            let envs = vec![("STOWAGE_CP_DIR".to_string(), dir.display().to_string()), ("STOWAGE_CP_PORT_BASE".to_string(), ports.base.to_string())];
            // The watchdog exists before the start, so a start interrupted by a panic is cleaned up too.
            let mut watchdog = Watchdog::spawn(&scripts.join("cluster.sh"), &envs, &log, &format!("control plane {name}"))?;
            match run_script(&scripts.join("cluster.sh"), "start", &envs, &log).await {
                Ok(_) => break (watchdog, ports),
                Err(e) if port_taken(&e) && skip.len() < 3 => {
                    watchdog.stop().await?;
                    skip.push(ports.base);
                }
                Err(e) => return Err(e),
            }
        };

        let kubeconfig = dir.join("admin.kubeconfig");
        let client = client_from(&kubeconfig).await?;
        // The CRDs of a Karpenter v1 user, not stowage's generated ones: what stowage writes must pass
        // Karpenter's own schemas and validation rules.
        let crds = karpenter_aws_crds(&log).await?;
        install_crd_dir(&client, &crds.join("karpenter")).await?;
        let started_in = t0.elapsed();
        eprintln!("stowage e2e: control plane {name} up in {:.1}s (apiserver https://127.0.0.1:{}, run dir {})", started_in.as_secs_f64(), ports.base + 2, dir.display());
        Ok(ControlPlane { name: name.to_string(), dir, port_base: ports.base, kubeconfig, k8s_bin, client, started_in, watchdog, _ports: ports, _lock: lock })
    }

    /// A client with the admin (system:masters) identity.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin kubeconfig (certificates inline), for processes under test (`KUBECONFIG=...`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The run dir: `pki/`, `etcd/`, `logs/<component>.log`, `admin.kubeconfig`.
    pub fn run_dir(&self) -> &Path {
        &self.dir
    }

    /// The log of one component (`kube-apiserver`, `kube-scheduler`, `kube-controller-manager`, `etcd`).
    pub fn log_file(&self, component: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{component}.log"))
    }

    /// `https://127.0.0.1:<port>`.
    pub fn api_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port_base + 2)
    }

    /// etcd client = base, etcd peer = base+1, apiserver = base+2, scheduler = base+3, KCM = base+4.
    pub fn port_base(&self) -> u16 {
        self.port_base
    }

    /// The kubectl built with the control plane (handy for debugging: `kubectl --kubeconfig ...`).
    pub fn kubectl(&self) -> PathBuf {
        self.k8s_bin.join("kubectl")
    }

    /// Wall time of [`ControlPlane::start`].
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The API server's `/readyz` body (`ok` when ready).
    pub async fn readyz(&self) -> Result<String> {
        let req = http::Request::get("/readyz").body(Vec::new()).map_err(|e| Error::Invalid(format!("building the /readyz request: {e}")))?;
        self.client.request_text(req).await.map_err(|e| Error::kube("GET /readyz", e))
    }

    /// Stops kube-apiserver and starts it again on the same port and etcd (`cluster.sh
    /// restart-apiserver`); returns once `/readyz` is ok. Clients see their connections and watches
    /// drop, then a fresh API server with every object still there.
    pub async fn restart_apiserver(&self) -> Result<()> {
        self.restart_apiserver_after(Duration::ZERO).await
    }

    /// [`ControlPlane::restart_apiserver`] with the API server down for `down` in between: an outage.
    /// Every client's requests fail (connection refused) until it is back.
    pub async fn restart_apiserver_after(&self, down: Duration) -> Result<()> {
        let top = e2e_root().join(&self.name);
        let envs = vec![
            ("STOWAGE_CP_DIR".to_string(), self.dir.display().to_string()),
            ("STOWAGE_CP_PORT_BASE".to_string(), self.port_base.to_string()),
            ("STOWAGE_CP_APISERVER_DOWN".to_string(), format!("{:.1}", down.as_secs_f64())),
        ];
        let script = repo_root().join("tests").join("control-plane").join("cluster.sh");
        run_script(&script, "restart-apiserver", &envs, &top.join("cluster-scripts.log")).await.map(|_| ())
    }

    /// Compacts etcd's history up to its current revision (etcd's v3 JSON gateway, what `etcdctl
    /// compact` does) and returns that revision. Every resourceVersion older than it is gone from etcd:
    /// once the API server's watch cache is rebuilt (a restart), watches resumed from an older version
    /// answer `410 Gone` and their clients must re-list.
    pub async fn compact_etcd(&self) -> Result<i64> {
        // The key "a" (base64 "YQ=="); any key: the answer's header carries the store's revision.
        let range = self.etcd_request("/v3/kv/range", &serde_json::json!({"key": "YQ=="})).await?;
        let revision = range["header"]["revision"].as_str().and_then(|r| r.parse::<i64>().ok()).ok_or_else(|| Error::Invalid(format!("etcd range answer without a revision: {range}")))?;
        self.etcd_request("/v3/kv/compaction", &serde_json::json!({"revision": revision.to_string(), "physical": true})).await?;
        Ok(revision)
    }

    async fn etcd_request(&self, path: &str, body: &serde_json::Value) -> Result<serde_json::Value> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let what = format!("POST {path} on etcd of {}", self.name);
        let body = body.to_string();
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port_base)).await.map_err(|e| Error::io(what.clone(), e))?;
        let req = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", self.port_base, body.len());
        stream.write_all(req.as_bytes()).await.map_err(|e| Error::io(what.clone(), e))?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.map_err(|e| Error::io(what.clone(), e))?;
        let text = String::from_utf8_lossy(&out);
        let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        if !head.starts_with("HTTP/1.1 200") {
            return Err(Error::Invalid(format!("{what}: {} {payload}", head.lines().next().unwrap_or(""))));
        }
        // The gateway may answer chunked: the JSON object is between the first '{' and the last '}'.
        let json = payload.find('{').zip(payload.rfind('}')).map(|(a, b)| &payload[a..=b]).unwrap_or(payload);
        serde_json::from_str(json).map_err(|e| Error::Invalid(format!("{what}: invalid JSON {payload:?}: {e}")))
    }

    /// Stops all four processes and waits for them.
    pub async fn stop(mut self) -> Result<()> {
        self.watchdog.stop().await
    }
}

async fn client_from(kubeconfig: &Path) -> Result<kube::Client> {
    let what = format!("reading {}", kubeconfig.display());
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|error| Error::Kubeconfig { what: what.clone(), error })?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(|error| Error::Kubeconfig { what, error })?;
    // kube is built with its `aws-lc-rs` feature and no `ring`: `try_from` installs the aws-lc-rs rustls
    // provider as the process default when none is set, which is the same provider the AWS SDK uses, so no
    // explicit `CryptoProvider::install_default` is needed (tests/e2e_smoke.rs exercises both clients).
    kube::Client::try_from(config).map_err(|e| Error::kube("building a client from the admin kubeconfig", e))
}

/// Karpenter v1.14.1's own CRDs, as a Karpenter user on EKS has them installed (NodePool, NodeClaim,
/// EC2NodeClass; `karpenter/`), and nodeadm's NodeConfig CRD (`nodeadm/`), fetched from the Go module
/// proxy by `peers/karpenter/crds.sh` (idempotent; a few milliseconds once cached). Returns the folder.
pub async fn karpenter_aws_crds(log: &Path) -> Result<PathBuf> {
    let script = repo_root().join("peers").join("karpenter").join("crds.sh");
    let out = run_script(&script, "fetch", &[], log).await?;
    out.lines().rev().map(PathBuf::from).find(|p| p.is_absolute() && p.join("karpenter").is_dir()).ok_or_else(|| Error::Invalid(format!("crds.sh printed no CRD folder: {out:?}")))
}

/// Creates (or replaces, keeping nothing of the old schema) every CRD in `dir` (one `*.yaml` file each)
/// and waits until each is Established. Returns their names.
pub async fn install_crd_dir(kube: &kube::Client, dir: &Path) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(kube.clone());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut names = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
        // stowage's own reader (serde-saphyr under its parser budget), then the typed CRD.
        let docs = stowage_input::read::parse_text(file, &text).map_err(|e| Error::Invalid(format!("{}: {e}", file.display())))?;
        let [doc] = docs.as_slice() else { return Err(Error::Invalid(format!("{}: expected one document, found {}", file.display(), docs.len()))) };
        let mut crd: CustomResourceDefinition = serde_json::from_value(doc.value.clone()).map_err(|e| Error::Invalid(format!("{}: not a CustomResourceDefinition: {e}", file.display())))?;
        let name = crd.metadata.name.clone().ok_or_else(|| Error::Invalid(format!("{}: CRD without a name", file.display())))?;
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(e) if kube_conflict(&e) => {
                // stowage's own NodePool/NodeClaim CRDs: a full replace, so no field of their schema stays.
                let existing = api.get(&name).await.map_err(|e| Error::kube(format!("getting CRD {name}"), e))?;
                crd.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &crd).await.map_err(|e| Error::kube(format!("replacing CRD {name} with {}", file.display()), e))?;
            }
            Err(e) => return Err(Error::kube(format!("creating CRD {name} from {}", file.display()), e)),
        }
        names.push(name);
    }
    for name in &names {
        let cond = kube::runtime::wait::conditions::is_crd_established();
        match tokio::time::timeout(CRD_TIMEOUT, kube::runtime::wait::await_condition(api.clone(), name, cond)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Error::Invalid(format!("waiting for CRD {name} to be Established: {e}"))),
            Err(_) => return Err(Error::Timeout { what: format!("CRD {name} to be Established"), after: CRD_TIMEOUT, last: "not Established".to_string() }),
        }
    }
    Ok(names)
}
