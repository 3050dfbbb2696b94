//! The cluster controller: a drop-in replacement for Karpenter's provisioning and node lifecycle on the
//! Karpenter v1 APIs (NodePool, NodeClaim, EC2NodeClass), planning each batch with stowage's MILP.
//!
//! ```text
//!  watchers (10 kinds) ──► state: ClusterState ──► synced? ──► readyz
//!        │ provisionable pods                  │
//!        ▼                                     ▼
//!  batcher (idle 1 s / max 10 s) ──► provisioner: snapshot → plan (MILP, greedy fallback) → NodeClaims
//!                                                 └─► launcher: CloudProvider::launch → status
//!  NodeClaim controller (kube-runtime `Controller`, per-object reconcile, backoff, finalizer()):
//!                   launch (crash recovery) · register · initialize · timeouts · terminate
//!  disruption task: empty nodes after consolidateAfter, expireAfter  ─┐ delete NodeClaims
//!  gc task:         leaked instances; instances gone → their NodeClaims' reconcile
//!  nodeclass task:  EC2NodeClass resolution and Ready (each batch too)
//!  interruption task (with a queue): SQS messages → events, refused offerings, NodeClaims deleted
//!  metrics task:    every 5 s, Karpenter's pod and node series from the state (pod events at once)
//!  leader election (Lease): only the leader runs the controller and tasks above; metrics, events, health
//! ```
//!
//! One file per stage: [`state`], the batcher (`stowage_decide::batch`), [`provisioner`], [`launcher`],
//! [`lifecycle`] (the NodeClaim controller; decisions in `stowage_decide::lifecycle`), [`registration`],
//! [`termination`], [`disruption`], [`gc`], [`nodeclass`] (EC2NodeClass readiness), [`interruption`]
//! (the interruption queue; decisions in `stowage_decide::interruption`), [`leader`],
//! [`metrics`] (with `cloud_metrics`, `pod_metrics` and `node_metrics`), [`events`], [`record`], [`conditions`],
//! [`clock`] (the one clock); the command line is
//! the binary's (src/cli/controller.rs).
//!
//! Invariants (each module states its own in detail):
//! - **Never plan on a partial view**: no batch runs until every watched kind is listed, and none while
//!   a kind re-lists (after an API server restart).
//! - **A NodeClaim exists before its instance**, and a launch is idempotent per NodeClaim name: a crash
//!   at any point leaves either a NodeClaim that is launched (or relaunched, adopting the instance) on
//!   restart, or an instance that garbage collection terminates. Nothing is launched twice.
//! - **Only the leader acts.** Followers keep their caches warm.
//! - **Deterministic planning**: the same state gives the same NodeClaims (modulo the MILP time budget
//!   on problems too large to solve within it).
//! - **Graceful shutdown**: on SIGTERM no new batch starts; a batch already planning creates and
//!   launches its NodeClaims (bounded by `shutdown_grace`); running launches finish; the Lease is
//!   released. Whatever is cut short is safe by the invariant above.

pub mod clock;
mod cloud_metrics;
pub mod conditions;
pub mod consolidation;
pub mod disruption;
pub mod events;
pub mod gc;
pub mod interruption;
pub mod launcher;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
mod node_metrics;
pub mod nodeclass;
pub mod nodepool;
mod pod_metrics;
pub mod provisioner;
pub mod record;
pub mod registration;
mod reservations;
pub mod state;
pub mod termination;

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use stowage_core::domain::catalog::Catalog;
use stowage_core::weights::Weights;
use stowage_decide::cloud::{CloudError, CloudProvider};
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool};

use clock::Clock;
use cloud_metrics::Caller;
use disruption::Disruption;
use events::{Events, Reason};
use launcher::{Launched, Unavailable};
use leader::LeaderConfig;
use metrics::{Health, Metrics, Stage};
use provisioner::{Nominated, PlannerSettings};
use registration::Timeouts;
use state::{ClusterState, Kind, StateObject, TERMINATION_FINALIZER};
use stowage_decide::batch::{BatchConfig, Batcher};

/// Everything the controller can be told.
#[derive(Clone, Debug)]
pub struct Config {
    pub batch: BatchConfig,
    pub planner: PlannerSettings,
    pub weights: Weights,
    pub timeouts: Timeouts,
    /// How long a refused offering stays unavailable (Karpenter: 3 minutes).
    pub unavailable_ttl: Duration,
    /// Garbage collection period and grace for instances no NodeClaim tracks.
    pub gc_interval: Duration,
    pub gc_grace: Duration,
    pub disruption_interval: Duration,
    /// How soon termination looks again at a NodeClaim whose pods are draining or volumes detaching.
    pub termination_retry: Duration,
    /// Consolidation of underutilised nodes: how disruption is weighed against saving.
    pub consolidation: stowage_decide::consolidation::Settings,
    /// How long a consolidation decision waits before it is validated (decided again) and acted on;
    /// an empty node likewise stays empty this long past `consolidateAfter` before it goes (Karpenter's
    /// 15 s re-validation of both).
    pub consolidation_validation: Duration,
    /// How often EC2NodeClasses are resolved again and their `Ready` condition written (each batch
    /// resolves them too).
    pub nodeclass_interval: Duration,
    /// How long a plan's nomination keeps a node from being judged empty (in memory from the batch; for
    /// the nominations persisted on a NodeClaim, from its initialization).
    pub nomination_ttl: Duration,
    /// How long the cloud's catalog is reused before it is asked again.
    pub catalog_ttl: Duration,
    /// While pods wait for capacity, a batch at least this often (their own events may not come).
    pub replan_interval: Duration,
    /// `None`: no election, this process always leads (one replica, or tests).
    pub leader: Option<LeaderConfig>,
    /// Where `/metrics`, `/healthz` and `/readyz` listen (`None`: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// Bound on the wait for in-flight work at shutdown.
    pub shutdown_grace: Duration,
    /// This replica's name (events' reporting instance, batch ids, Lease holder).
    pub identity: String,
    /// The interruption queue (`interruptionQueue`); `None`: no interruption handling.
    pub interruption_queue: Option<interruption::QueueHandle>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            batch: BatchConfig::default(),
            planner: PlannerSettings::default(),
            weights: Weights::default(),
            timeouts: Timeouts::default(),
            unavailable_ttl: Duration::from_secs(180),
            gc_interval: Duration::from_secs(10),
            gc_grace: Duration::from_secs(30),
            disruption_interval: Duration::from_secs(2),
            termination_retry: Duration::from_secs(1),
            consolidation: stowage_decide::consolidation::Settings::default(),
            consolidation_validation: consolidation::VALIDATION,
            nodeclass_interval: Duration::from_secs(5),
            nomination_ttl: Duration::from_secs(20),
            catalog_ttl: Duration::from_secs(60),
            replan_interval: Duration::from_secs(30),
            leader: None,
            metrics_addr: None,
            shutdown_grace: Duration::from_secs(20),
            identity: "stowage".into(),
            interruption_queue: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The metrics endpoint could not listen: choose another address (`--metrics-addr`).
    #[error("cannot listen on {addr} for /metrics: {error}")]
    Listen { addr: SocketAddr, error: std::io::Error },
}

/// Poison-tolerant lock: a panic elsewhere must not take the controller down with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The HTTP status of an API error, if it is one.
pub(crate) fn kube_status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Shared by every task.
pub struct Ctx<P> {
    pub(crate) client: kube::Client,
    /// The cloud, every call measured for Karpenter's cloud-provider metrics (`cloud_metrics`).
    pub(crate) cloud: cloud_metrics::Instrumented<P>,
    pub(crate) config: Config,
    pub(crate) state: Mutex<ClusterState>,
    /// The one clock the controller reads (clock.rs).
    pub(crate) clock: Clock,
    batcher: Mutex<Batcher<Instant>>,
    provision_wake: Notify,
    pub(crate) unavailable: Mutex<Unavailable>,
    /// NodeClaims whose launch runs now.
    pub(crate) launching: Mutex<BTreeSet<String>>,
    /// Asks the running NodeClaim controller to reconcile one NodeClaim (`None`: not running).
    pub(crate) lifecycle_trigger: Mutex<Option<UnboundedSender<ObjectRef<NodeClaim>>>>,
    /// The NodeClaim controller's per-object backoff.
    pub(crate) lifecycle_backoff: Mutex<lifecycle::Backoff>,
    /// Provider ids garbage collection found gone (for the lifecycle decision's `instance_gone`).
    pub(crate) vanished: Mutex<BTreeSet<String>>,
    /// The cloud's description of its instances at garbage collection's last listing (at most
    /// `gc_interval` old): the facts of security-group and subnet drift (`stowage_decide::drift`),
    /// read without another cloud call per disruption round.
    pub(crate) instances: Mutex<Vec<stowage_decide::cloud::Instance>>,
    /// Node or NodeClaim names a recent plan put pods on: until when, and the uids of those pods.
    nominations: Mutex<BTreeMap<String, Nomination>>,
    /// Pod uid → the last Nominated / FailedScheduling note sent (events only when it changes).
    pod_notes: Mutex<BTreeMap<String, String>>,
    catalog: tokio::sync::Mutex<Option<(Arc<Catalog>, Instant)>>,
    pub(crate) metrics: Metrics,
    pub(crate) events: Events,
    leader: watch::Receiver<bool>,
    health: watch::Sender<Health>,
    batches: AtomicU64,
}

impl<P: CloudProvider> Ctx<P> {
    pub(crate) fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    pub(crate) fn request_batch(&self, key: &str) {
        lock(&self.batcher).trigger(key, Instant::now());
        self.provision_wake.notify_one();
    }

    /// Reconciles one NodeClaim soon (its launch finished, its instance is gone, the state index saw
    /// it or its Node change). Dropped when the NodeClaim controller is not running: it reconciles
    /// every NodeClaim when it starts.
    pub(crate) fn wake_lifecycle(&self, nodeclaim: &str) {
        if let Some(tx) = lock(&self.lifecycle_trigger).as_ref() {
            let _ = tx.send(ObjectRef::new(nodeclaim));
        }
    }

    /// The cloud's catalog, reused for `catalog_ttl`; the last good one if the cloud fails now. A fetch is
    /// measured under `caller`, the controller that needed it.
    pub(crate) async fn catalog(&self, caller: Caller) -> Result<Arc<Catalog>, CloudError> {
        let mut cached = self.catalog.lock().await;
        if let Some((c, at)) = cached.as_ref()
            && at.elapsed() < self.config.catalog_ttl
        {
            return Ok(c.clone());
        }
        match self.cloud.by(caller).catalog().await {
            Ok(c) => {
                let c = Arc::new(c);
                *cached = Some((c.clone(), Instant::now()));
                Ok(c)
            }
            Err(e) => {
                self.metrics.error(Stage::Cloud);
                match cached.as_ref() {
                    Some((c, _)) => {
                        tracing::warn!(error = %e, "reading the cloud's catalog failed; using the previous one");
                        Ok(c.clone())
                    }
                    None => Err(e),
                }
            }
        }
    }

    /// Whether a recent plan's nomination still holds `name`: its time is not up and one of the pods
    /// it was made for is still `pending` (unbound and alive). Once they are bound, here or elsewhere,
    /// the node is judged by the pods it holds, as Karpenter judges a new NodeClaim (no minimum life).
    fn nominated(&self, name: &str, pending: &BTreeSet<&str>) -> bool {
        lock(&self.nominations).get(name).is_some_and(|n| n.until > Instant::now() && n.pods.iter().any(|u| pending.contains(u.as_str())))
    }

    /// Applies one watch event and raises the triggers it implies.
    fn on_event<K: StateObject>(&self, ev: watcher::Event<K>) {
        let now = Instant::now();
        let mut triggers: Vec<String> = Vec::new();
        if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = &ev
            && let Some(p) = (o as &dyn Any).downcast_ref::<Pod>()
            && state::is_provisionable(p)
        {
            triggers.push(p.metadata.uid.clone().unwrap_or_default());
        }
        // The NodeClaim controller watches NodeClaims and Nodes itself, but decides on this index: a
        // change the index sees after the controller's watch did must reconcile again (once applied).
        let wake: Vec<String> = match &ev {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                let any = o as &dyn Any;
                if let Some(c) = any.downcast_ref::<NodeClaim>() {
                    c.metadata.name.clone().into_iter().collect()
                } else if let Some(n) = any.downcast_ref::<Node>() {
                    lifecycle::claims_of_node(self, n).into_iter().map(|r| r.name).collect()
                } else {
                    Vec::new()
                }
            }
            _ => Vec::new(),
        };
        // A pod changed or went (not a re-list's objects: the metrics task looks at every pod once the
        // list is complete): Karpenter's pod series follow it at once, as Karpenter's reconcile does.
        let pod_changed: Option<(String, String)> = match &ev {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                (o as &dyn Any).downcast_ref::<Pod>().map(|p| (p.metadata.namespace.clone().unwrap_or_default(), p.metadata.name.clone().unwrap_or_default()))
            }
            _ => None,
        };
        let (was, now_synced, gone) = {
            let mut s = lock(&self.state);
            let was = s.synced();
            let nodeclasses = |s: &ClusterState| -> BTreeSet<String> { s.nodeclasses.iter().filter_map(|c| c.metadata.name.clone()).collect() };
            let before = if matches!(K::KIND, Kind::EC2NodeClass) { nodeclasses(&s) } else { BTreeSet::new() };
            s.on_event(ev);
            if let Some((ns, name)) = &pod_changed
                && self.is_leader()
            {
                let (series, now) = (self.metrics.pods_nodes(), self.clock.now());
                match s.pods.get(ns, name) {
                    Some(p) => {
                        if state::is_provisionable(p) {
                            series.ack(ns, name, now);
                        }
                        series.pod(p, p.spec.as_ref().and_then(|sp| sp.node_name.as_deref()).and_then(|n| s.node(n)), now);
                    }
                    None => series.pod_gone(ns, name),
                }
            }
            let gone: Vec<String> = if before.is_empty() { Vec::new() } else { before.difference(&nodeclasses(&s)).cloned().collect() };
            (was, s.synced(), gone)
        };
        // A deleted EC2NodeClass (a Delete event, or missing from a re-list after a watch gap, which
        // brings no Delete): its zones leave the cloud's catalog; launches naming it wait for it again.
        for name in &gone {
            self.cloud.forget_nodeclass(name);
        }
        if now_synced != was {
            self.metrics.set_synced(now_synced);
            self.health.send_modify(|h| h.ready = now_synced);
            if now_synced {
                tracing::info!("every watched kind is listed");
                triggers.push("replan/synced".into());
            } else {
                tracing::info!("a watched kind is re-listing; planning pauses until it is complete");
            }
        }
        if !triggers.is_empty() {
            let mut b = lock(&self.batcher);
            for t in &triggers {
                b.trigger(t, now);
            }
            drop(b);
            self.provision_wake.notify_one();
        }
        for name in &wake {
            self.wake_lifecycle(name);
        }
    }
}

/// A running controller.
pub struct Controller {
    work_stop: watch::Sender<bool>,
    infra_stop: watch::Sender<bool>,
    work: Vec<JoinHandle<()>>,
    infra: Vec<JoinHandle<()>>,
    leader_task: Option<JoinHandle<()>>,
    /// Without leader election this replica always leads: the sender of the leadership channel lives as
    /// long as the controller, because a closed channel reads as "leadership lost" to its receivers
    /// (the NodeClaim controller would stop as soon as it started).
    _always_leader: Option<watch::Sender<bool>>,
    metrics: Metrics,
    metrics_addr: Option<SocketAddr>,
    grace: Duration,
}

impl Controller {
    /// Starts watching and, once synced and leading, provisioning.
    pub async fn start<P: CloudProvider + 'static>(client: kube::Client, cloud: Arc<P>, config: Config) -> Result<Controller, ControllerError> {
        let metrics = Metrics::new();
        let (work_stop, work_rx) = watch::channel(false);
        let (infra_stop, infra_rx) = watch::channel(false);
        let (leader_tx, leader_rx) = watch::channel(config.leader.is_none());
        metrics.set_leader(config.leader.is_none());
        let (health_tx, health_rx) = watch::channel(Health { live: true, ready: false });
        let (events, events_task) = Events::start(client.clone(), config.identity.clone(), metrics.clone());
        let mut infra = vec![events_task];
        let metrics_addr = match config.metrics_addr {
            Some(addr) => {
                let (bound, task) = metrics::serve(addr, metrics.clone(), health_rx, infra_rx.clone()).await.map_err(|error| ControllerError::Listen { addr, error })?;
                infra.push(task);
                tracing::info!(%bound, "serving /metrics, /healthz, /readyz");
                Some(bound)
            }
            None => None,
        };
        let grace = config.shutdown_grace;
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            cloud: cloud_metrics::Instrumented::new(cloud, metrics.clone()),
            batcher: Mutex::new(Batcher::new(config.batch)),
            config: config.clone(),
            state: Mutex::new(ClusterState::default()),
            clock: Clock::new(),
            provision_wake: Notify::new(),
            unavailable: Mutex::new(Unavailable::default()),
            launching: Mutex::new(BTreeSet::new()),
            lifecycle_trigger: Mutex::new(None),
            lifecycle_backoff: Mutex::new(lifecycle::Backoff::default()),
            vanished: Mutex::new(BTreeSet::new()),
            instances: Mutex::new(Vec::new()),
            nominations: Mutex::new(BTreeMap::new()),
            pod_notes: Mutex::new(BTreeMap::new()),
            catalog: tokio::sync::Mutex::new(None),
            metrics: metrics.clone(),
            events,
            leader: leader_rx,
            health: health_tx,
            batches: AtomicU64::new(0),
        });
        infra.push(spawn_watch::<Pod, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<Node, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<NodePool, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<NodeClaim, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<EC2NodeClass, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<PersistentVolumeClaim, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<PersistentVolume, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<StorageClass, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<CSINode, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<DaemonSet, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<Namespace, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<Service, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<ReplicationController, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<ReplicaSet, P>(&ctx, Api::all(client.clone()), &infra_rx));
        infra.push(spawn_watch::<StatefulSet, P>(&ctx, Api::all(client.clone()), &infra_rx));
        let (leader_task, always_leader) = match config.leader.clone() {
            Some(cfg) => (Some(tokio::spawn(leader::run(client.clone(), cfg, leader_tx, infra_rx.clone(), metrics.clone()))), None),
            None => (None, Some(leader_tx)),
        };
        let mut work = vec![
            tokio::spawn(warm_up(ctx.clone(), work_rx.clone())),
            tokio::spawn(provisioning_loop(ctx.clone(), work_rx.clone())),
            tokio::spawn(lifecycle::run(ctx.clone(), work_rx.clone())),
            tokio::spawn(disruption_loop(ctx.clone(), work_rx.clone())),
            tokio::spawn(gc_loop(ctx.clone(), work_rx.clone())),
            tokio::spawn(nodeclass_loop(ctx.clone(), work_rx.clone())),
            tokio::spawn(metrics_loop(ctx.clone(), work_rx.clone())),
        ];
        if let Some(q) = config.interruption_queue.clone() {
            work.push(tokio::spawn(interruption::run(ctx.clone(), q, work_rx)));
        }
        tracing::info!(identity = %config.identity, leader_election = config.leader.is_some(), "controller started");
        Ok(Controller { work_stop, infra_stop, work, infra, leader_task, _always_leader: always_leader, metrics, metrics_addr, grace })
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Where `/metrics` listens (the bound port when configured with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Graceful stop: no new batch; in-flight batches and launches finish (at most `shutdown_grace`);
    /// the Lease is released; watches stop.
    pub async fn shutdown(self) {
        tracing::info!("shutting down: finishing in-flight work");
        let _ = self.work_stop.send(true);
        let deadline = Instant::now() + self.grace;
        for t in self.work {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                tracing::warn!("in-flight work did not finish within the shutdown grace period; abandoning it (safe: NodeClaims exist before their instances)");
                abort.abort();
            }
        }
        let _ = self.infra_stop.send(true);
        if let Some(t) = self.leader_task {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        for t in self.infra {
            t.abort();
        }
        tracing::info!("stopped");
    }

    /// Stops every task at once, as a crash would (for tests of crash recovery).
    pub fn abort(self) {
        for t in self.work.iter().chain(self.infra.iter()).chain(self.leader_task.iter()) {
            t.abort();
        }
    }
}

/// Runs the controller until `signal` resolves, then shuts it down gracefully.
pub async fn run<P: CloudProvider + 'static>(client: kube::Client, cloud: Arc<P>, config: Config, signal: impl std::future::Future<Output = ()>) -> Result<(), ControllerError> {
    let c = Controller::start(client, cloud, config).await?;
    signal.await;
    c.shutdown().await;
    Ok(())
}

fn spawn_watch<K, P>(ctx: &Arc<Ctx<P>>, api: Api<K>, stop: &watch::Receiver<bool>) -> JoinHandle<()>
where
    K: StateObject + DeserializeOwned + Debug,
    P: CloudProvider + 'static,
{
    let ctx = ctx.clone();
    let mut stop = stop.clone();
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        loop {
            tokio::select! {
                ev = stream.next() => match ev {
                    Some(Ok(ev)) => ctx.on_event(ev),
                    Some(Err(e)) if watch_expired(&e) => {
                        // 410 Gone / Expired: the resource version left the API server's watch cache
                        // (routine after a restart or a slow start); the watcher re-lists. Not an error.
                        tracing::info!(kind = %K::KIND, error = %e, "watch expired; re-listing");
                    }
                    Some(Err(e)) => {
                        ctx.metrics.error(Stage::Watch);
                        tracing::warn!(kind = %K::KIND, error = %e, "watch failed; retrying with backoff");
                    }
                    None => break,
                },
                _ = stop.changed() => break,
            }
        }
    })
}

/// Resolves the NodeClasses and fetches the cloud's catalog once the state is synced, so the first
/// batch does not wait for them (the first catalog fetch lists every instance type of the region).
async fn warm_up<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, mut stop: watch::Receiver<bool>) {
    loop {
        if lock(&ctx.state).synced() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = stop.changed() => return,
        }
    }
    nodeclass::reconcile_all(&ctx).await;
    if let Err(e) = ctx.catalog(Caller::Provisioner).await {
        tracing::warn!(error = %e, "the cloud's catalog is not available yet; the first batch asks again");
    }
}

async fn provisioning_loop<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, mut stop: watch::Receiver<bool>) {
    let mut leader = ctx.leader.clone();
    // Pods stay pending without a new event when kube-scheduler does not retry them soon (its backoff
    // for unschedulable pods reaches minutes): while any is provisionable, plan again at this pace.
    let mut replan = tokio::time::interval_at(Instant::now() + ctx.config.replan_interval, ctx.config.replan_interval);
    replan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let deadline = lock(&ctx.batcher).deadline();
        tokio::select! {
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {}
            _ = ctx.provision_wake.notified() => continue,
            _ = replan.tick() => {
                if lock(&ctx.state).pods.iter().any(state::is_provisionable) {
                    ctx.request_batch("replan/periodic");
                }
                continue;
            }
            changed = leader.changed() => {
                if changed.is_ok() && *leader.borrow() {
                    ctx.request_batch("replan/leader");
                }
                continue;
            }
            _ = stop.changed() => break,
        }
        let now = Instant::now();
        let Some(triggers) = lock(&ctx.batcher).close_if_due(now) else { continue };
        if !ctx.is_leader() {
            continue;
        }
        if !lock(&ctx.state).synced() {
            // The sync completing triggers a batch.
            continue;
        }
        if let Err(e) = run_batch(&ctx, triggers).await {
            tracing::warn!(error = %e, "batch failed; retrying in 5s");
            let ctx2 = ctx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                ctx2.request_batch("replan/retry");
            });
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum BatchError {
    #[error("the cloud's catalog: {0}")]
    Catalog(CloudError),
    #[error(transparent)]
    Snapshot(#[from] state::StateError),
    #[error(transparent)]
    Plan(#[from] provisioner::ProvisionError),
    #[error("the planner task failed: {0}")]
    Join(tokio::task::JoinError),
}

/// The batch looks at every pending pod it plans. A pod that came with the first list has no watch
/// event of its own, and its first look waited for the metrics task's next refresh: a batch that
/// decided before it found no look and never observed the decision's duration. Earlier looks win.
fn look_at_pending<P: CloudProvider + 'static>(ctx: &Ctx<P>, cluster: &stowage_core::domain::cluster::Cluster, pending: &[stowage_core::domain::pod::PodId]) {
    let looked = ctx.clock.now();
    for &id in pending {
        let pod = cluster.pod(id);
        ctx.metrics.pods_nodes().ack(&pod.namespace, &pod.name, looked);
    }
}

/// A plan's status as the plan file spells it (the `status` label of the batch metrics).
fn status_name(status: stowage_core::plan::Status) -> &'static str {
    use stowage_core::plan::Status;
    match status {
        Status::Optimal => "optimal",
        Status::GapReached => "gapReached",
        Status::TimeLimit => "timeLimit",
        Status::Heuristic => "heuristic",
        Status::Fallback => "fallback",
        Status::Infeasible => "infeasible",
    }
}

async fn run_batch<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, triggers: usize) -> Result<(), BatchError> {
    // The cloud needs every NodeClass resolved before it can size the catalog's zones and launch.
    nodeclass::reconcile_all(ctx).await;
    let catalog = ctx.catalog(Caller::Provisioner).await.map_err(BatchError::Catalog)?;
    let now = Instant::now();
    let view = {
        let mut u = lock(&ctx.unavailable);
        u.expire(now);
        u.view(&catalog, now)
    };
    let snapshot = {
        let s = lock(&ctx.state);
        s.snapshot_under(&view, &ctx.config.weights.topology_spread_defaults)
    };
    let snapshot = snapshot.inspect_err(|_| ctx.metrics.error(Stage::Snapshot))?;
    for x in &snapshot.excluded {
        tracing::warn!(object = %x.object, reason = %x.reason, "left out of the batch: stowage cannot read it");
    }
    nodepool::report(ctx, &snapshot.excluded).await;
    nodepool::report_unsupported(ctx).await;
    ctx.metrics.nodepools(&snapshot.cluster);
    let pending_ids = snapshot.cluster.pending();
    let pending = pending_ids.len();
    if pending == 0 {
        ctx.metrics.pods(0, 0, 0);
        return Ok(());
    }
    look_at_pending(ctx, &snapshot.cluster, &pending_ids);
    let n = ctx.batches.fetch_add(1, Ordering::Relaxed) + 1;
    let batch_id = format!("{}-{}-{n}", ctx.config.identity, Timestamp::now().as_millisecond());
    let (settings, weights) = (ctx.config.planner.clone(), ctx.config.weights.clone());
    let id = batch_id.clone();
    let decision = tokio::task::spawn_blocking(move || provisioner::plan_batch(&snapshot.cluster, &snapshot.objects, &view, &weights, &settings, &id))
        .await
        .map_err(BatchError::Join)?
        .inspect_err(|_| ctx.metrics.error(Stage::Plan))?;
    let solver = &decision.plan.solver;
    let status = status_name(solver.status);
    ctx.metrics.batch(pending, status, solver.time_ms / 1000.0, solver.gap, decision.plan.cost_per_hour);
    ctx.metrics.pods(pending, decision.nominations.len(), decision.unschedulable.len());
    let key = |p: &provisioner::PodRef| (p.namespace.clone(), p.name.clone());
    let placed: Vec<(String, String)> = decision.nominations.iter().map(|(p, _)| key(p)).collect();
    let unplaced: Vec<(String, String)> = decision.unschedulable.iter().map(|(p, _)| key(p)).collect();
    ctx.metrics.pods_nodes().decided(&placed, &unplaced, ctx.clock.now());
    tracing::info!(
        batch = %batch_id, triggers, pending, pinned = decision.pins.len(), new_nodes = decision.claims.len(), unschedulable = decision.unschedulable.len(),
        deferred = decision.plan.deferred.len(), cost_per_hour = decision.plan.cost_per_hour, solver = %solver.name, status, time_ms = solver.time_ms, detail = %solver.detail,
        "batch planned"
    );
    if !decision.plan.deferred.is_empty() {
        // The budget cut the batch: the pods it deferred are the next batch's, at once (the batch
        // window still gathers pods that come meanwhile).
        ctx.request_batch("replan/deferred");
    }
    if !ctx.is_leader() {
        tracing::info!(batch = %batch_id, "lost leadership while planning; dropping the batch");
        return Ok(());
    }

    // NodeClaims first (the invariant), then their launches.
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut created: Vec<Option<String>> = Vec::new();
    for c in &decision.claims {
        match api.create(&PostParams::default(), &c.nodeclaim).await {
            Ok(nc) => {
                let name = nc.metadata.name.clone().unwrap_or_default();
                tracing::info!(batch = %batch_id, nodeclaim = %name, nodepool = %c.nodepool, instance_type = %c.instance_type, zone = %c.zone, capacity_type = %c.capacity_type, price = c.price, pods = c.pods.len(), "NodeClaim created");
                ctx.metrics.nodeclaim_created(&c.nodepool, c.price, "provisioning", c.min_values_relaxed());
                lock(&ctx.state).apply(nc);
                created.push(Some(name));
            }
            Err(e) => {
                ctx.metrics.error(Stage::Create);
                tracing::warn!(batch = %batch_id, nodepool = %c.nodepool, error = %e, "creating a NodeClaim failed; its pods are planned again in a later batch");
                created.push(None);
            }
        }
    }
    let until = Instant::now() + ctx.config.nomination_ttl;
    {
        let mut noms = lock(&ctx.nominations);
        noms.retain(|_, n| n.until > now);
        for (pod, target) in &decision.nominations {
            let name = match target {
                Nominated::Node(n) | Nominated::InFlight(n) => Some(n.clone()),
                Nominated::New(k) => created.get(*k).cloned().flatten(),
            };
            if let Some(n) = name {
                let n = noms.entry(n).or_insert_with(|| Nomination { until, pods: BTreeSet::new() });
                n.until = until;
                n.pods.insert(pod.uid.clone());
            }
        }
    }
    for (pod, target) in &decision.nominations {
        let note = match target {
            Nominated::Node(n) => format!("Pod should schedule on: node/{n}"),
            Nominated::InFlight(n) => format!("Pod should schedule on: nodeclaim/{n}"),
            Nominated::New(k) => match created.get(*k).cloned().flatten() {
                Some(n) => format!("Pod should schedule on: nodeclaim/{n}"),
                None => continue,
            },
        };
        pod_event(ctx, pod, Reason::Nominated, note);
    }
    for (pod, reason) in &decision.unschedulable {
        pod_event(ctx, pod, Reason::FailedScheduling, format!("Failed to schedule pod: {reason}"));
    }
    let launches = created.iter().flatten().map(|name| {
        let ctx = ctx.clone();
        async move {
            let r = launcher::launch(&ctx, name).await;
            after_launch(&ctx, name, r);
        }
    });
    futures::future::join_all(launches).await;
    Ok(())
}

/// A plan's nomination of one node: until when it holds, and the pods it was made for.
struct Nomination {
    until: Instant,
    pods: BTreeSet<String>,
}

/// Sends a pod event when its note differs from the last one sent for the pod.
fn pod_event<P: CloudProvider>(ctx: &Ctx<P>, pod: &provisioner::PodRef, reason: Reason, note: String) {
    let key = format!("{}:{}", reason.as_str(), note);
    let mut notes = lock(&ctx.pod_notes);
    if notes.get(&pod.uid) == Some(&key) {
        return;
    }
    notes.insert(pod.uid.clone(), key);
    if notes.len() > 100_000 {
        notes.clear();
    }
    drop(notes);
    ctx.events.pod(pod, reason, note);
}

/// After a batch launched a NodeClaim directly: a failure or a deferred launch is the NodeClaim
/// controller's to retry, with its per-object backoff.
pub(crate) fn after_launch<P: CloudProvider>(ctx: &Ctx<P>, name: &str, r: Result<Launched, launcher::LaunchError>) {
    match r {
        Ok(Launched::Done { .. } | Launched::Skipped | Launched::Refused) => {}
        Ok(Launched::Retry { .. }) => ctx.wake_lifecycle(name),
        Err(e) => {
            ctx.metrics.error(Stage::Launch);
            tracing::warn!(nodeclaim = name, error = %e, "launch failed; the NodeClaim controller retries it");
            ctx.wake_lifecycle(name);
        }
    }
}

/// The wait before a periodic task's next round: its interval after a clean round, else the task's
/// backoff (doubling from the interval up to 5 minutes), so a failing API or cloud is not hammered
/// every tick.
fn next_round(interval: Duration, backoff: &mut lifecycle::Backoff, ok: bool) -> Duration {
    if ok {
        backoff.succeeded("round");
        interval
    } else {
        backoff.failed("round").max(interval)
    }
}

/// Disruption is a whole-cluster decision (budgets count a pool's nodes; emptiness needs the pods of
/// every node), so it runs as one periodic task over the state index rather than per NodeClaim.
async fn disruption_loop<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, stop: watch::Receiver<bool>) {
    let d = tokio::sync::Mutex::new((Disruption::with_validation(ctx.config.consolidation_validation), consolidation::Consolidator::default()));
    periodic(ctx.config.disruption_interval, stop, || async {
        if !(ctx.is_leader() && lock(&ctx.state).synced()) {
            return true;
        }
        let (emptiness, consolidator) = &mut *d.lock().await;
        let (ok, acted) = disrupt(&ctx, emptiness).await;
        // Consolidation judges a cluster at rest: not in a round that just deleted empty nodes.
        if acted { ok } else { consolidation::round(&ctx, consolidator).await && ok }
    })
    .await;
}

/// Runs `round` every `interval` until `stop`; after a failed round (false) the next waits for the
/// backoff instead (see [`next_round`]).
async fn periodic<F, Fut>(interval: Duration, mut stop: watch::Receiver<bool>, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut backoff = lifecycle::Backoff::new(interval, Duration::from_secs(300));
    let mut wait = interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => break,
        }
        let ok = round().await;
        wait = next_round(interval, &mut backoff, ok);
    }
}

/// One round of emptiness and expiration; whether every deletion succeeded, and whether it deleted any.
async fn disrupt<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, d: &mut Disruption) -> (bool, bool) {
    let now = ctx.clock.now();
    let (candidates, pools) = {
        let s = lock(&ctx.state);
        // Nominations survive a restart: the NodeClaims carry theirs (`stowage_decide::provision`), and
        // a consolidation's replacements theirs (`consolidation`).
        let pending = disruption::pending_uids(&s);
        let mut persisted = disruption::persisted_nominations(&s, &pending, now, ctx.config.nomination_ttl);
        persisted.extend(consolidation::protected(&consolidation::in_progress(&s)));
        let nominated = |n: &str| ctx.nominated(n, &pending) || persisted.contains(n);
        let pools: BTreeMap<String, disruption::PoolPolicy> = s.nodepools.iter().filter_map(|p| Some((p.metadata.name.clone()?, disruption::pool_policy_at(p, Some(now.as_second()))))).collect();
        (disruption::candidates(&s, &nominated), pools)
    };
    let actions = d.decide(&candidates, &pools, now);
    let acted = !actions.is_empty();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut ok = true;
    for a in actions {
        let why = match &a.cause {
            disruption::Cause::Empty { for_ } => format!("empty for {}s (consolidateAfter, then the validation wait)", for_.as_secs()),
            disruption::Cause::Expired { age } => format!("expired after {}s (expireAfter)", age.as_secs()),
        };
        let claim = lock(&ctx.state).nodeclaim(&a.nodeclaim).cloned();
        tracing::info!(nodeclaim = %a.nodeclaim, nodepool = %a.nodepool, cause = a.cause.label(), %why, "disrupting");
        match api.delete(&a.nodeclaim, &DeleteParams::default()).await {
            Ok(r) => {
                if let Some(c) = r.left() {
                    lock(&ctx.state).apply(c);
                }
                ctx.metrics.disrupted(a.cause.label(), &a.nodepool, metrics::claim_label(claim.as_ref(), stowage_core::domain::labels::keys::CAPACITY_TYPE));
                if matches!(a.cause, disruption::Cause::Empty { .. }) {
                    ctx.metrics.decision(false, "empty", 1);
                }
                if let Some(c) = claim {
                    ctx.events.nodeclaim(&c, Reason::Disrupting, why);
                }
                ctx.wake_lifecycle(&a.nodeclaim);
            }
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                ok = false;
                ctx.metrics.error(Stage::Disrupt);
                tracing::warn!(nodeclaim = %a.nodeclaim, error = %e, "deleting a NodeClaim for disruption failed; retrying with backoff");
            }
        }
    }
    (ok, acted)
}

/// Garbage collection compares the cloud's whole instance list with every NodeClaim, so it is one
/// periodic task; what it finds about one NodeClaim (its instance gone) goes to that NodeClaim's
/// reconcile.
async fn gc_loop<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, stop: watch::Receiver<bool>) {
    periodic(ctx.config.gc_interval, stop, || async { if ctx.is_leader() && lock(&ctx.state).synced() { collect(&ctx).await } else { true } }).await;
}

/// EC2NodeClass readiness: every NodeClass resolved by the cloud and its status written (as leader),
/// periodically; a NodeClass that becomes resolvable becomes Ready without waiting for a batch.
async fn nodeclass_loop<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, stop: watch::Receiver<bool>) {
    periodic(ctx.config.nodeclass_interval, stop, || async {
        if lock(&ctx.state).synced() {
            nodeclass::reconcile_all(&ctx).await;
            nodepool::report_unsupported(&ctx).await;
            reservations::expire(&ctx).await;
        }
        true
    })
    .await;
}

/// How often Karpenter's pod and node series are refreshed from the state index (Karpenter refreshes
/// its node metrics every 5 s).
const METRICS_INTERVAL: Duration = Duration::from_secs(5);

/// Karpenter's pod and node series (`pod_metrics`), from the state index only (no API call): every pod
/// and node as leader once every kind is listed; a replica that does not lead exports none (Karpenter's
/// metrics controllers run on the leader only).
async fn metrics_loop<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, stop: watch::Receiver<bool>) {
    periodic(METRICS_INTERVAL, stop, || async {
        let series = ctx.metrics.pods_nodes();
        if !ctx.is_leader() {
            series.clear();
            return true;
        }
        let s = lock(&ctx.state);
        if s.synced() {
            series.refresh(&s, ctx.clock.now());
        }
        true
    })
    .await;
}

/// One round of garbage collection; false if something failed.
async fn collect<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>) -> bool {
    let instances = match ctx.cloud.by(Caller::NodeClaimGc).list().await {
        Ok(i) => i,
        Err(e) => {
            ctx.metrics.error(Stage::Gc);
            tracing::warn!(error = %e, "listing instances failed; garbage collection retries with backoff");
            return false;
        }
    };
    // Read the NodeClaims after the instances: an instance launched in between is young, hence kept.
    let (claims, launching): (Vec<NodeClaim>, BTreeSet<String>) = {
        let s = lock(&ctx.state);
        (s.nodeclaims.iter().cloned().collect(), lock(&ctx.launching).clone())
    };
    let actions = gc::decide(&instances, &claims, &launching, ctx.clock.now(), ctx.config.gc_grace);
    *lock(&ctx.instances) = instances.clone();
    let mut ok = true;
    let mut terminated = 0;
    for pid in &actions.terminate {
        tracing::warn!(provider_id = %pid, "terminating an instance no NodeClaim tracks");
        match ctx.cloud.by(Caller::InstanceGc).terminate(pid).await {
            Ok(()) | Err(CloudError::NotFound(_)) => terminated += 1,
            Err(e) => {
                ok = false;
                ctx.metrics.error(Stage::Gc);
                tracing::warn!(provider_id = %pid, error = %e, "terminating a leaked instance failed; retrying with backoff");
            }
        }
    }
    ctx.metrics.gc(terminated, 0);
    // NodeClaims whose instance vanished: their reconcile deletes them (the lifecycle decision's InstanceGone).
    let gone: BTreeSet<String> = claims.iter().filter(|c| c.metadata.name.as_ref().is_some_and(|n| actions.delete.contains(n))).filter_map(|c| c.status.as_ref()?.provider_id.clone()).collect();
    *lock(&ctx.vanished) = gone;
    for name in &actions.delete {
        ctx.wake_lifecycle(name);
    }
    // Nodes deleted directly while they carry our finalizer and no NodeClaim owns them (a Node with a
    // NodeClaim is its NodeClaim's reconcile: NodeDeleted).
    let orphans: Vec<String> = {
        let s = lock(&ctx.state);
        s.nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() && n.metadata.finalizers.iter().flatten().any(|f| f == TERMINATION_FINALIZER) && s.nodeclaim_of(n).is_none())
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    };
    for node in orphans {
        if let Err(e) = termination::node_deleted(ctx, &node).await {
            ok = false;
            ctx.metrics.error(Stage::Gc);
            tracing::warn!(node = %node, error = %e, "releasing a deleted Node failed; retrying with backoff");
        }
    }
    ok
}

/// Whether a watch error is the API server saying the resource version is too old (HTTP 410), which
/// kube-rs's watcher answers by listing again.
fn watch_expired(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchError(s) => s.code == 410,
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchFailed(kube::Error::Api(s)) | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A periodic task whose rounds fail backs off (interval, then doubling) and returns to its interval
    /// after a clean round; all in tokio's paused time, without a real sleep.
    #[tokio::test(start_paused = true)]
    async fn a_failing_periodic_task_backs_off_and_recovers() {
        let start = Instant::now();
        let (stop_tx, stop) = watch::channel(false);
        let attempts: Arc<Mutex<Vec<u64>>> = Arc::default();
        let n = Arc::new(AtomicUsize::new(0));
        let task = {
            let (attempts, n) = (attempts.clone(), n.clone());
            tokio::spawn(periodic(Duration::from_secs(2), stop, move || {
                let (attempts, n) = (attempts.clone(), n.clone());
                async move {
                    lock(&attempts).push(start.elapsed().as_secs());
                    // Rounds 0..5 fail, the rest succeed.
                    n.fetch_add(1, Ordering::SeqCst) >= 5
                }
            }))
        };
        // Stop between two rounds (a timer due at the same instant as the stop may run first or not).
        tokio::time::sleep(Duration::from_secs(81)).await;
        let _ = stop_tx.send(true);
        task.await.unwrap();
        // Fails at 2, 4, 8, 16 and 32 (waits of 2, 4, 8, 16, 32: backoff from the interval), succeeds at
        // 64, then runs every 2 s again.
        assert_eq!(lock(&attempts).clone(), vec![2, 4, 8, 16, 32, 64, 66, 68, 70, 72, 74, 76, 78, 80]);
    }

    /// The batch window closes on tokio's clock: 1 s after the last new pod, at most 10 s after the
    /// first (paused time; `Batcher<Instant>` is the controller's).
    #[tokio::test(start_paused = true)]
    async fn batch_windows_close_on_tokio_time() {
        let start = Instant::now();
        let mut b: Batcher<Instant> = Batcher::new(BatchConfig::default());
        b.trigger("a", Instant::now());
        for i in 0..30 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            b.trigger(&format!("p{i}"), Instant::now());
            if let Some(d) = b.deadline()
                && d <= Instant::now()
            {
                break;
            }
        }
        tokio::time::sleep_until(b.deadline().unwrap()).await;
        assert_eq!(b.close_if_due(Instant::now()), Some(21), "the max window bounds a steady trickle");
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        b.trigger("q", Instant::now());
        tokio::time::sleep_until(b.deadline().unwrap()).await;
        assert_eq!(start.elapsed(), Duration::from_secs(11), "an idle second closes a lone pod's window");
        assert_eq!(b.close_if_due(Instant::now()), Some(1));
    }
}
