//! A seeded fault run of the controller on the real control plane with moto (issue 20, item 6).
//!
//! While Deployments (plain and spread) are created, scaled and deleted and NodeClaims are deleted
//! (drain), the driver kills the in-process controller (`Controller::abort`: every task stops at once
//! and all in-memory state is dropped, as a crash would) at random moments of launch, registration and
//! drain/consolidation, and starts a fresh one. Throughout, the moto middleware fails a seeded random
//! share of the controller's EC2 requests, every action, with EC2's throttling (`RequestLimitExceeded`,
//! 503) or 5xx (`InternalError`, 500). Once the API server is down for 30 s (an outage), and once etcd
//! is compacted and the API server restarted, so every watch resumes from a compacted version and
//! answers `410 Gone` (a watch-expiry storm).
//!
//! Afterwards, within a deadline: no duplicate instance (at most one live instance per
//! `karpenter.sh/nodeclaim` tag, checked after every kill too), no leaked instance (every live instance
//! is a NodeClaim's, after the GC grace period), no lost pod (every Deployment's replicas Running and
//! Ready), every NodeClaim ever seen converged (Ready, or gone). The figures are printed.
//!
//! The test command runs a short seeded run; the environment scales it (never the assertions):
//!
//! ```text
//! STOWAGE_FAULT_KILLS=50 STOWAGE_FAULT_SEED=7 STOWAGE_FAULT_RATE=0.1 \
//!     cargo test --test e2e_faults -- --nocapture
//! ```
//!
//! Defaults: 6 kills, seed 1, rate 0.1. The RNG fixes the driver's choices; the moments themselves
//! depend on timing, so a seed reproduces the sequence of actions and faults, not every interleaving.

mod e2e_setup;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use e2e_setup::{aws_options, chart_rbac_client, controller_config, init_tracing, repo};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stowage_aws::AwsProvider;
use stowage_controller::Controller;
use stowage_decide::cloud::{CloudProvider, Instance};
use stowage_e2e::{ControlPlane, Error, Kubelet, Moto, Probe, RandomFaults, VolumeProvisioner, e2e_root, poll_until};
use stowage_input::api::{NodeClaim, NodePool};

const CLUSTER: &str = "demo";
const ZONE: &str = "topology.kubernetes.io/zone";
/// The controller's EC2 clients name themselves so; the faults hit them and nothing else (the
/// kubelet stand-in and this test's checks read moto unharmed).
const CONTROLLER_APP: &str = "stowage-controller";
const MAX_DEPLOYMENTS: usize = 4;
const MAX_REPLICAS: u32 = 3;
/// How long the driver waits for the moment it aims a kill at before killing anyway.
const MOMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The API server outage.
const OUTAGE: Duration = Duration::from_secs(30);
/// Bound on convergence after the last kill.
const CONVERGE: Duration = Duration::from_secs(420);
/// How long the test's own calls (API server, moto) are retried before the test gives up on them.
const RETRY_FOR: Duration = Duration::from_secs(90);

/// One of the test's own calls, retried on any error for [`RETRY_FOR`]: right after an API server
/// restart a pooled connection may still be the old server's, and a loaded machine may answer late.
/// The faults are aimed at the controller; the test's view of the world must not flake. Calls that are
/// not idempotent map "already done" to success themselves.
async fn retried<T, E: std::fmt::Display, Fut: std::future::Future<Output = Result<T, E>>>(what: &str, mut call: impl FnMut() -> Fut) -> T {
    let start = Instant::now();
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) if start.elapsed() < RETRY_FOR => {
                eprintln!("fault run: {what} failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("{what} failed for {RETRY_FOR:?}: {e}"),
        }
    }
}

/// A kube call's result with "already exists" (409) or "not found" (404), the answer to a repeated
/// create or delete, as success.
fn done_or_repeated<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    match std::env::var(key) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().unwrap_or_else(|_| panic!("{key}={v:?} is not a valid value")),
        _ => default,
    }
}

/// SplitMix64: a small seeded RNG, so the driver's choices depend on the seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn millis(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
}

/// Where a kill is aimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Moment {
    /// A NodeClaim exists without an instance (its launch is in flight or not begun).
    Launch,
    /// A NodeClaim has an instance and is not registered yet.
    Registration,
    /// A NodeClaim is being deleted (drain, termination; consolidation deletes NodeClaims too).
    Drain,
    /// Whenever: a random delay.
    Any,
}

struct World {
    cp: ControlPlane,
    moto: Moto,
    kubelet: Kubelet,
    volumes: VolumeProvisioner,
    client: kube::Client,
    /// The controller's provider: its requests carry [`CONTROLLER_APP`] and get the faults.
    cloud: Arc<AwsProvider>,
    /// The test's own view of EC2 (no faults).
    aws: Arc<AwsProvider>,
    rbac: kube::Client,
}

impl World {
    async fn start(name: &str) -> World {
        let log = e2e_root().join(name).join("stowage.log");
        init_tracing(Some(&log));
        eprintln!("fault run: the controller's and the stand-ins' log is {}", log.display());
        let (cp, moto) = tokio::try_join!(ControlPlane::start(name), Moto::start(name)).unwrap();
        let client = cp.client();
        let kubelet = Kubelet::start(client.clone(), moto.ec2());
        let volumes = VolumeProvisioner::start(client.clone());
        let cloud = Arc::new(AwsProvider::new(&moto.sdk_config_as(CONTROLLER_APP).unwrap(), CLUSTER, aws_options()).unwrap());
        let aws = Arc::new(AwsProvider::new(&moto.sdk_config(), CLUSTER, aws_options()).unwrap());
        let rbac = chart_rbac_client(&cp, &client).await;
        World { cp, moto, kubelet, volumes, client, cloud, aws, rbac }
    }

    async fn controller(&self) -> Controller {
        Controller::start(self.rbac.clone(), self.cloud.clone(), controller_config("stowage-0", None)).await.unwrap()
    }

    /// kubectl with `args` (idempotent ones: it is retried).
    async fn kubectl(&self, args: &[&str]) -> String {
        retried(&format!("kubectl {args:?}"), || async {
            let out = tokio::process::Command::new(self.cp.kubectl()).arg("--kubeconfig").arg(self.cp.kubeconfig()).args(args).output().await.map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            if out.status.success() { Ok(text) } else { Err(text) }
        })
        .await
    }

    async fn nodeclaims(&self) -> Result<Vec<NodeClaim>, Error> {
        Api::<NodeClaim>::all(self.client.clone()).list(&ListParams::default()).await.map(|l| l.items).map_err(|e| Error::kube("listing NodeClaims", e))
    }

    async fn live_instances(&self) -> Result<Vec<Instance>, Error> {
        let all = self.aws.list().await.map_err(|e| Error::Invalid(format!("listing instances: {e}")))?;
        Ok(all.into_iter().filter(|i| !matches!(i.state.as_str(), "shutting-down" | "terminated")).collect())
    }
}

/// A Deployment of `n` pods of `cpu`; a spread one also has one pod per node (hostname anti-affinity)
/// and spreads over zones (maxSkew 1).
fn deployment(name: &str, n: u32, cpu: &str, spread: bool) -> Deployment {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]});
    if spread {
        spec["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": name}}}
        ]}});
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": name}}}]);
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": n, "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    }))
    .unwrap()
}

fn running_and_ready(p: &Pod) -> bool {
    let s = p.status.clone().unwrap_or_default();
    p.metadata.deletion_timestamp.is_none() && s.phase.as_deref() == Some("Running") && s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

fn condition_true(c: &NodeClaim, type_: &str) -> bool {
    c.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|x| x.type_ == type_ && x.status == "True"))
}

fn provider_id(c: &NodeClaim) -> Option<String> {
    c.status.as_ref()?.provider_id.clone()
}

fn name(c: &NodeClaim) -> String {
    c.metadata.name.clone().unwrap_or_default()
}

/// Does `claims` show `moment` now?
fn at_moment(moment: Moment, claims: &[NodeClaim]) -> bool {
    match moment {
        Moment::Launch => claims.iter().any(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_none()),
        Moment::Registration => claims.iter().any(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_some() && !condition_true(c, "Registered")),
        Moment::Drain => claims.iter().any(|c| c.metadata.deletion_timestamp.is_some()),
        Moment::Any => true,
    }
}

/// Live instances beyond the first per NodeClaim tag.
fn duplicates(instances: &[Instance]) -> usize {
    let mut per_claim: BTreeMap<&str, usize> = BTreeMap::new();
    for i in instances {
        *per_claim.entry(i.nodeclaim.as_deref().unwrap_or("")).or_default() += 1;
    }
    per_claim.values().map(|n| n - 1).sum()
}

/// What the run did and what it left.
#[derive(Debug, Default)]
struct Figures {
    kills: usize,
    kills_at: BTreeMap<String, usize>,
    actions: BTreeMap<&'static str, usize>,
    max_duplicates_seen: usize,
    duplicates: usize,
    leaked: usize,
    pods_lost: u32,
    nodeclaims_seen: usize,
    nodeclaims_converged: usize,
    not_converged: Vec<String>,
    faults_injected: BTreeMap<String, u64>,
    ec2_requests: u64,
    converged_in: Duration,
}

/// The driver's state: the Deployments it made and their replicas.
struct Driver {
    rng: Rng,
    deployments: BTreeMap<String, u32>,
    next_deployment: usize,
    seen_claims: BTreeSet<String>,
}

impl Driver {
    /// One random action; returns its name and the moment a kill after it aims at.
    async fn act(&mut self, w: &World) -> (&'static str, Moment) {
        let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), "default");
        let roll = self.rng.below(100);
        if self.deployments.len() < MAX_DEPLOYMENTS && (roll < 30 || self.deployments.is_empty()) {
            let spread = self.rng.below(2) == 0;
            let name = format!("{}-{}", if spread { "spread" } else { "plain" }, self.next_deployment);
            self.next_deployment += 1;
            let n = 1 + self.rng.below(u64::from(MAX_REPLICAS)) as u32;
            let cpu = ["500m", "1", "2", "3"][self.rng.below(4) as usize];
            let d = deployment(&name, n, cpu, spread);
            retried("creating a Deployment", || async { done_or_repeated(deployments.create(&PostParams::default(), &d).await) }).await;
            self.deployments.insert(name, n);
            return ("create deployment", if self.rng.below(2) == 0 { Moment::Launch } else { Moment::Registration });
        }
        if roll < 65 {
            let names: Vec<String> = self.deployments.keys().cloned().collect();
            let name = names[self.rng.below(names.len() as u64) as usize].clone();
            let old = self.deployments[&name];
            let n = (self.rng.below(u64::from(MAX_REPLICAS)) as u32 + 1 + old) % (MAX_REPLICAS + 1);
            w.kubectl(&["scale", "deployment", &name, &format!("--replicas={n}")]).await;
            self.deployments.insert(name, n);
            return if n > old { ("scale up", [Moment::Launch, Moment::Registration][self.rng.below(2) as usize]) } else { ("scale down", Moment::Drain) };
        }
        if roll < 90 {
            let claims = retried("listing NodeClaims", || w.nodeclaims()).await;
            let ready: Vec<&NodeClaim> = claims.iter().filter(|c| c.metadata.deletion_timestamp.is_none() && condition_true(c, "Ready")).collect();
            if let Some(c) = (!ready.is_empty()).then(|| ready[self.rng.below(ready.len() as u64) as usize]) {
                let api = Api::<NodeClaim>::all(w.client.clone());
                retried("deleting a NodeClaim", || async { done_or_repeated(api.delete(&name(c), &DeleteParams::default()).await) }).await;
                return ("delete nodeclaim", Moment::Drain);
            }
            return ("nothing to drain", Moment::Any);
        }
        let names: Vec<String> = self.deployments.keys().cloned().collect();
        let name = names[self.rng.below(names.len() as u64) as usize].clone();
        retried("deleting a Deployment", || async { done_or_repeated(deployments.delete(&name, &DeleteParams::default()).await) }).await;
        self.deployments.remove(&name);
        ("delete deployment", Moment::Drain)
    }

    /// Waits (at most [`MOMENT_TIMEOUT`]) until the cluster shows `moment`, then a random 0-400 ms more.
    /// Returns whether the moment was seen.
    async fn wait_for(&mut self, w: &World, moment: Moment) -> bool {
        let start = Instant::now();
        let mut seen = moment == Moment::Any;
        if moment == Moment::Any {
            tokio::time::sleep(self.rng.millis(3000)).await;
        }
        while !seen && start.elapsed() < MOMENT_TIMEOUT {
            // The API server may be restarting: an error is "not seen yet".
            if let Ok(claims) = w.nodeclaims().await {
                self.seen_claims.extend(claims.iter().map(name));
                seen = at_moment(moment, &claims);
            }
            if !seen {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        tokio::time::sleep(self.rng.millis(400)).await;
        seen
    }
}

/// Compacts etcd and restarts the API server: every watch (the controller's ten) resumes from a
/// compacted version. Shown with a watch of our own from before: it must answer 410 Gone.
async fn watch_storm(w: &World) {
    let api = Api::<NodeClaim>::all(w.client.clone());
    let lp = ListParams::default();
    let before = retried("listing NodeClaims", || api.list(&lp)).await.metadata.resource_version.unwrap();
    let revision = w.cp.compact_etcd().await.unwrap();
    w.cp.restart_apiserver().await.unwrap();
    let answer = w.kubectl(&["get", "--raw", &format!("/apis/karpenter.sh/v1/nodeclaims?watch=1&resourceVersion={before}&timeoutSeconds=2")]).await;
    assert!(answer.contains("\"code\":410"), "a watch from resourceVersion {before} after compacting etcd at {revision}: {answer}");
    eprintln!("fault run: etcd compacted at revision {revision}, API server restarted; a watch from {before} answers 410 Gone, as every watch of the controller does");
}

async fn check_no_duplicates(w: &World, figures: &mut Figures) {
    let instances = retried("listing instances", || w.live_instances()).await;
    let d = duplicates(&instances);
    figures.max_duplicates_seen = figures.max_duplicates_seen.max(d);
    if d > 0 {
        let tags: Vec<_> = instances.iter().map(|i| (i.nodeclaim.clone(), i.id.clone())).collect();
        eprintln!("fault run: DUPLICATE instances: {tags:?}");
    }
}

/// The state the run must end in: every Deployment's replicas Running and Ready, every NodeClaim
/// Ready and not deleting, and the live instances exactly the NodeClaims' (one each).
async fn settled(w: &World, driver: &Driver) -> Result<Probe<()>, Error> {
    // A failed read is "not settled yet", never the end of the wait.
    Ok(settled_state(w, driver).await.unwrap_or_else(|e| Probe::Waiting(format!("reading the state: {e}"))))
}

async fn settled_state(w: &World, driver: &Driver) -> Result<Probe<()>, Error> {
    let pods = Api::<Pod>::namespaced(w.client.clone(), "default").list(&ListParams::default()).await.map_err(|e| Error::kube("listing pods", e))?.items;
    let mut waiting = Vec::new();
    for (d, &n) in &driver.deployments {
        let running = pods.iter().filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get("app")) == Some(d) && running_and_ready(p)).count();
        if running != n as usize {
            waiting.push(format!("{d} {running}/{n} running"));
        }
    }
    let claims = w.nodeclaims().await?;
    let unready: Vec<String> = claims.iter().filter(|c| c.metadata.deletion_timestamp.is_some() || !condition_true(c, "Ready")).map(name).collect();
    if !unready.is_empty() {
        waiting.push(format!("NodeClaims not Ready {unready:?}"));
    }
    let live: BTreeSet<String> = w.live_instances().await?.into_iter().map(|i| i.provider_id).collect();
    let tracked: BTreeSet<String> = claims.iter().filter_map(provider_id).collect();
    if live != tracked {
        waiting.push(format!("instances {live:?} vs NodeClaims' {tracked:?}"));
    }
    Ok(if waiting.is_empty() { Probe::Done(()) } else { Probe::Waiting(waiting.join("; ")) })
}

/// Counts what the run left once it settled (or the deadline passed).
async fn final_figures(w: &World, driver: &Driver, figures: &mut Figures) {
    let claims = retried("listing NodeClaims", || w.nodeclaims()).await;
    let live = retried("listing instances", || w.live_instances()).await;
    figures.duplicates = duplicates(&live);
    let tracked: BTreeSet<String> = claims.iter().filter_map(provider_id).collect();
    let names: BTreeSet<String> = claims.iter().map(name).collect();
    figures.leaked = live.iter().filter(|i| !tracked.contains(&i.provider_id) || !i.nodeclaim.as_ref().is_some_and(|n| names.contains(n))).count();
    let pod_api = Api::<Pod>::namespaced(w.client.clone(), "default");
    let lp = ListParams::default();
    let pods = retried("listing pods", || pod_api.list(&lp)).await.items;
    figures.pods_lost = driver
        .deployments
        .iter()
        .map(|(d, &n)| n.saturating_sub(pods.iter().filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get("app")) == Some(d) && running_and_ready(p)).count() as u32))
        .sum();
    let mut seen = driver.seen_claims.clone();
    seen.extend(names.iter().cloned());
    figures.nodeclaims_seen = seen.len();
    let converged = |n: &String| claims.iter().find(|c| &name(c) == n).is_none_or(|c| c.metadata.deletion_timestamp.is_none() && condition_true(c, "Ready"));
    figures.not_converged = seen.iter().filter(|n| !converged(n)).cloned().collect();
    figures.nodeclaims_converged = seen.len() - figures.not_converged.len();
    let state = retried("reading moto's fault state", || w.moto.fault_state()).await;
    for (action, codes) in state["injected"].as_object().into_iter().flatten() {
        for (code, n) in codes.as_object().into_iter().flatten() {
            *figures.faults_injected.entry(format!("{action}/{code}")).or_default() += n.as_u64().unwrap_or(0);
        }
    }
    figures.ec2_requests = state["requests"].as_object().into_iter().flatten().map(|(_, n)| n.as_u64().unwrap_or(0)).sum();
}

fn report(seed: u64, rate: f64, f: &Figures) {
    let faults: u64 = f.faults_injected.values().sum();
    eprintln!("fault run (seed {seed}, fault rate {rate}):");
    eprintln!("  kills survived:        {} {:?}", f.kills, f.kills_at);
    eprintln!("  actions:               {:?}", f.actions);
    eprintln!("  AWS faults injected:   {faults} of {} EC2 requests {:?}", f.ec2_requests, f.faults_injected);
    eprintln!("  instances leaked:      {}", f.leaked);
    eprintln!("  duplicates:            {} at the end, {} at most after any kill", f.duplicates, f.max_duplicates_seen);
    eprintln!("  pods lost:             {}", f.pods_lost);
    eprintln!("  NodeClaims converged:  {}/{} (not: {:?}) in {:.0}s after the last kill", f.nodeclaims_converged, f.nodeclaims_seen, f.not_converged, f.converged_in.as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_fault_run_leaves_no_duplicate_leak_or_lost_pod() {
    let kills: usize = env_or("STOWAGE_FAULT_KILLS", 6);
    let seed: u64 = env_or("STOWAGE_FAULT_SEED", 1);
    let rate: f64 = env_or("STOWAGE_FAULT_RATE", 0.1);
    assert!(kills >= 3, "STOWAGE_FAULT_KILLS must be at least 3 (the outage and the watch storm come between kills)");
    let w = World::start("faults").await;
    w.kubectl(&["apply", "-f", repo("scenarios/common-ec2nodeclass.yaml").to_str().unwrap()]).await;
    w.kubectl(&["apply", "-f", repo("scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml").to_str().unwrap()]).await;
    // Consolidation (empty and underutilised nodes) acts within the run too, so kills land in its
    // decisions as well.
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let disruption = json!({"spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s"}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&disruption)).await.unwrap();
    w.moto.inject_random_faults(&RandomFaults::any_action(rate, seed).from_app(CONTROLLER_APP)).await.unwrap();

    let mut driver = Driver { rng: Rng(seed), deployments: BTreeMap::new(), next_deployment: 0, seen_claims: BTreeSet::new() };
    let mut figures = Figures::default();
    let (outage_at, storm_at) = (kills / 3, 2 * kills / 3);
    let t0 = Instant::now();
    let mut c = w.controller().await;
    for k in 0..kills {
        let (action, moment) = driver.act(&w).await;
        *figures.actions.entry(action).or_default() += 1;
        let seen = driver.wait_for(&w, moment).await;
        c.abort();
        figures.kills += 1;
        *figures.kills_at.entry(format!("{moment:?}{}", if seen { "" } else { " (not seen: at timeout)" })).or_default() += 1;
        eprintln!("fault run: kill {}/{kills} at {moment:?} (seen {seen}) after {action}, {:.0}s", k + 1, t0.elapsed().as_secs_f64());
        tokio::time::sleep(driver.rng.millis(2000)).await;
        c = w.controller().await;
        check_no_duplicates(&w, &mut figures).await;
        if k == outage_at {
            let t = Instant::now();
            w.cp.restart_apiserver_after(OUTAGE).await.unwrap();
            eprintln!("fault run: API server down {}s, back after {:.1}s", OUTAGE.as_secs(), t.elapsed().as_secs_f64());
        }
        if k == storm_at {
            watch_storm(&w).await;
        }
    }

    let t = Instant::now();
    let r = poll_until("the cluster to settle", CONVERGE, Duration::from_secs(1), || settled(&w, &driver)).await;
    figures.converged_in = t.elapsed();
    if let Err(e) = &r {
        eprintln!("fault run: did not settle: {e}");
    }
    final_figures(&w, &driver, &mut figures).await;
    report(seed, rate, &figures);
    let faults: u64 = figures.faults_injected.values().sum();
    let controller_errors = c.metrics().render();
    c.shutdown().await;
    let (k, v) = (w.kubelet.recent_errors(), w.volumes.recent_errors());
    w.volumes.stop().await;
    w.kubelet.stop().await;
    tokio::try_join!(w.moto.stop(), w.cp.stop()).unwrap();
    eprintln!("stand-in errors: kubelet {k:?}, volumes {v:?}");

    // Every failed expectation at once, after the log's last warnings: a CI report keeps the tail of
    // the output, so the reasons come last.
    let expectations = [
        (figures.kills == kills, format!("{} kills of {kills}", figures.kills)),
        (figures.max_duplicates_seen == 0, format!("a NodeClaim had two live instances after a kill ({} at most)", figures.max_duplicates_seen)),
        (figures.duplicates == 0, format!("{} duplicate instances at the end", figures.duplicates)),
        (figures.leaked == 0, format!("{} leaked instances", figures.leaked)),
        (figures.pods_lost == 0, format!("{} pods not Running", figures.pods_lost)),
        (figures.not_converged.is_empty(), format!("NodeClaims not converged: {:?}", figures.not_converged)),
        (r.is_ok(), format!("the cluster did not settle within {CONVERGE:?}: {r:?}")),
        (faults > 0, "no AWS fault was injected: the run proved nothing about them".to_string()),
        (figures.nodeclaims_seen > 0, format!("no NodeClaim was ever created: the run proved nothing\n{controller_errors}")),
    ];
    let failed: Vec<&String> = expectations.iter().filter(|(ok, _)| !ok).map(|(_, why)| why).collect();
    if !failed.is_empty() {
        let log = std::fs::read_to_string(e2e_root().join("faults").join("stowage.log")).unwrap_or_default();
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ")).collect();
        eprintln!("fault run: the log's last warnings and errors:\n{}", warnings[warnings.len().saturating_sub(40)..].join("\n"));
        panic!("the fault run (seed {seed}) failed:\n  {}", failed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "));
    }
}
