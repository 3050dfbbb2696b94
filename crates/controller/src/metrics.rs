//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoint.
//!
//! Every label value of the `stowage_*` series comes from a closed set (`Stage`, solver statuses, launch
//! results, disruption causes) or from NodePool names, so their cardinality stays bounded; nothing is
//! formatted from `Debug`. Karpenter's pod and node series (`pod_metrics`) are per pod and per node, as
//! Karpenter's are, and are removed with their objects.
//!
//! The HTTP side is a deliberately small HTTP/1.1 responder on a tokio listener: three GET endpoints,
//! `Connection: close`, a bounded request head and a read timeout. A framework (hyper's server
//! feature) would add nothing these endpoints need and would rebuild half the dependency tree.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Where an error happened (the `stage` label of `stowage_errors_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Watch,
    Snapshot,
    Plan,
    Create,
    Launch,
    Register,
    Terminate,
    Disrupt,
    Gc,
    Leader,
    Event,
    Cloud,
    Interruption,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Watch => "watch",
            Stage::Snapshot => "snapshot",
            Stage::Plan => "plan",
            Stage::Create => "create",
            Stage::Launch => "launch",
            Stage::Register => "register",
            Stage::Terminate => "terminate",
            Stage::Disrupt => "disrupt",
            Stage::Gc => "gc",
            Stage::Leader => "leader",
            Stage::Event => "event",
            Stage::Cloud => "cloud",
            Stage::Interruption => "interruption",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    nodepool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: &'static str,
}

/// Labels of Karpenter's metrics of the same names (v1.14.1's `pkg/metrics` and controllers).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreatedLabel {
    reason: &'static str,
    nodepool: String,
    min_values_relaxed: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolZoneLabel {
    nodepool: String,
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DisruptedLabel {
    reason: &'static str,
    nodepool: String,
    capacity_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TerminatedLabel {
    nodepool: String,
    capacity_type: String,
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: &'static str,
    reason: &'static str,
    consolidation_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessageTypeLabel {
    message_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CloudLabel {
    controller: &'static str,
    method: &'static str,
    provider: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CloudErrorLabel {
    controller: &'static str,
    method: &'static str,
    provider: &'static str,
    error: &'static str,
}

/// One NodePool's summed node capacity, node count and limits.
struct PoolUsage<'a> {
    name: &'a str,
    used: stowage_core::domain::resources::Resources,
    nodes: i64,
    limits: Option<&'a stowage_core::domain::nodepool::PoolLimits>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourcePoolLabel {
    resource_type: String,
    nodepool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: &'static str,
}

/// A label of a NodeClaim, or empty (Karpenter's metric labels read a missing label as empty).
pub(crate) fn claim_label<'a>(claim: Option<&'a stowage_input::api::NodeClaim>, key: &str) -> &'a str {
    claim.and_then(|c| c.metadata.labels.as_ref()?.get(key)).map(String::as_str).unwrap_or_default()
}

/// Karpenter's error label for a cloud error (`GetErrorTypeLabelValue`; empty for any other error).
fn cloud_error_label(e: &stowage_decide::cloud::CloudError) -> &'static str {
    use stowage_decide::cloud::CloudError;
    match e {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacityError",
        CloudError::NotFound(_) => "NodeClaimNotFoundError",
        CloudError::NodeClassNotReady(_) => "NodeClassNotReadyError",
        CloudError::Throttled(_) | CloudError::Fatal(_) => "",
    }
}

fn duration_histogram() -> Histogram {
    Histogram::new(crate::pod_metrics::DURATION_BUCKETS.iter().copied())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

/// The `karpenter_*` series stowage can count honestly, under Karpenter's names and labels, so that
/// dashboards and alerts written for Karpenter keep working.
#[derive(Clone)]
struct KarpenterMetrics {
    nodeclaims_created: Family<CreatedLabel, Counter>,
    nodeclaims_terminated: Family<TerminatedLabel, Counter>,
    nodeclaims_disrupted: Family<DisruptedLabel, Counter>,
    nodes_created: Family<PoolZoneLabel, Counter>,
    nodes_terminated: Family<PoolZoneLabel, Counter>,
    decisions: Family<DecisionLabel, Counter>,
    synced: Gauge,
    build_info: Family<VersionLabel, Gauge>,
    interruption_received: Family<MessageTypeLabel, Counter>,
    interruption_deleted: Counter,
    interruption_queue_duration: Histogram,
    cloud_duration: Family<CloudLabel, Histogram, fn() -> Histogram>,
    cloud_errors: Family<CloudErrorLabel, Counter>,
    scheduling_duration: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    unschedulable: Family<ControllerLabel, Gauge>,
    nodepool_usage: Family<ResourcePoolLabel, Gauge<f64, AtomicU64>>,
    nodepool_limit: Family<ResourcePoolLabel, Gauge<f64, AtomicU64>>,
}

impl Default for KarpenterMetrics {
    fn default() -> Self {
        KarpenterMetrics {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            decisions: Family::default(),
            synced: Gauge::default(),
            build_info: Family::default(),
            interruption_received: Family::default(),
            interruption_deleted: Counter::default(),
            // 0.1 s to about 55 min: a message handled at once up to one that waited out the queue.
            interruption_queue_duration: Histogram::new(exponential_buckets(0.1, 2.0, 16)),
            cloud_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            cloud_errors: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            unschedulable: Family::default(),
            nodepool_usage: Family::default(),
            nodepool_limit: Family::default(),
        }
    }
}

impl KarpenterMetrics {
    fn register(&self, r: &mut Registry) {
        let r = r.sub_registry_with_prefix("karpenter");
        r.register("nodeclaims_created", "Number of nodeclaims created in total. Labeled by reason the nodeclaim was created and the owning nodepool", self.nodeclaims_created.clone());
        r.register("nodeclaims_terminated", "Number of nodeclaims terminated in total. Labeled by the owning nodepool, capacity type, and zone", self.nodeclaims_terminated.clone());
        r.register("nodeclaims_disrupted", "Number of nodeclaims disrupted in total. Labeled by reason the nodeclaim was disrupted and the owning nodepool", self.nodeclaims_disrupted.clone());
        r.register("nodes_created", "Number of nodes created in total. Labeled by owning nodepool", self.nodes_created.clone());
        r.register("nodes_terminated", "Number of nodes terminated in total. Labeled by owning nodepool", self.nodes_terminated.clone());
        r.register("voluntary_disruption_decisions", "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type", self.decisions.clone());
        r.register("cluster_state_synced", "Returns 1 if cluster state is synced and 0 otherwise", self.synced.clone());
        r.register("build_info", "A metric with a constant '1' value labeled by version from which stowage was built", self.build_info.clone());
        r.register("interruption_received_messages", "Count of messages received from the SQS queue. Broken down by message type", self.interruption_received.clone());
        r.register("interruption_deleted_messages", "Count of messages deleted from the SQS queue", self.interruption_deleted.clone());
        r.register(
            "interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter",
            self.interruption_queue_duration.clone(),
        );
        r.register("cloudprovider_duration_seconds", "Duration of cloud provider method calls. Labeled by the controller, method name and provider", self.cloud_duration.clone());
        r.register("cloudprovider_errors", "Total number of errors returned from CloudProvider calls", self.cloud_errors.clone());
        r.register("scheduler_scheduling_duration_seconds", "Duration of scheduling simulations used for deprovisioning and provisioning in seconds", self.scheduling_duration.clone());
        r.register("scheduler_unschedulable_pods_count", "The number of unschedulable Pods", self.unschedulable.clone());
        r.register("nodepools_usage", "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type", self.nodepool_usage.clone());
        r.register("nodepools_limit", "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type", self.nodepool_limit.clone());
        self.build_info.get_or_create(&VersionLabel { version: env!("CARGO_PKG_VERSION") }).set(1);
    }
}

/// The controller's metrics. Cheap to clone (shared counters).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    batches: Counter,
    batch_pods: Histogram,
    pods: Family<StateLabel, Gauge>,
    plan_cost: Gauge<f64, AtomicU64>,
    planned_cost: Counter<f64, AtomicU64>,
    solver_status: Family<StatusLabel, Counter>,
    solver_seconds: Histogram,
    solver_gap: Gauge<f64, AtomicU64>,
    nodeclaims_created: Family<PoolLabel, Counter>,
    launches: Family<ResultLabel, Counter>,
    registrations: Counter,
    terminations: Counter,
    disruptions: Family<CauseLabel, Counter>,
    gc_instances: Counter,
    gc_nodeclaims: Counter,
    errors: Family<StageLabel, Counter>,
    leader: Gauge,
    synced: Gauge,
    karpenter: KarpenterMetrics,
    /// Karpenter's pod and node series (`pod_metrics`).
    pods_nodes: crate::pod_metrics::Series,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            batches: Counter::default(),
            batch_pods: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            pods: Family::default(),
            plan_cost: Gauge::default(),
            planned_cost: Counter::default(),
            solver_status: Family::default(),
            solver_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            solver_gap: Gauge::default(),
            nodeclaims_created: Family::default(),
            launches: Family::default(),
            registrations: Counter::default(),
            terminations: Counter::default(),
            disruptions: Family::default(),
            gc_instances: Counter::default(),
            gc_nodeclaims: Counter::default(),
            errors: Family::default(),
            leader: Gauge::default(),
            synced: Gauge::default(),
            karpenter: KarpenterMetrics::default(),
            pods_nodes: crate::pod_metrics::Series::default(),
        };
        m.karpenter.register(&mut root);
        m.pods_nodes.register(&mut root);
        let r = root.sub_registry_with_prefix("stowage");
        r.register("batches", "Batches planned", m.batches.clone());
        r.register("batch_pods", "Pending pods per batch", m.batch_pods.clone());
        r.register("pods", "Pods by state: provisionable (waiting for capacity), nominated (planned onto a node or NodeClaim), unschedulable (the planner found no place)", m.pods.clone());
        r.register("plan_cost_dollars_per_hour", "Hourly price of the new nodes of the last batch", m.plan_cost.clone());
        r.register("planned_cost_dollars_per_hour", "Sum of the hourly prices of every NodeClaim planned", m.planned_cost.clone());
        r.register("solver", "Batches by solver status (optimal, gapReached, timeLimit, heuristic, fallback)", m.solver_status.clone());
        r.register("solver_duration_seconds", "Planner time per batch", m.solver_seconds.clone());
        r.register("solver_gap", "Relative optimality gap of the last MILP plan", m.solver_gap.clone());
        r.register("nodeclaims_created", "NodeClaims created, by NodePool", m.nodeclaims_created.clone());
        r.register("launches", "Launch attempts by result (launched, insufficient_capacity, error)", m.launches.clone());
        r.register("registrations", "Nodes registered", m.registrations.clone());
        r.register("terminations", "NodeClaims terminated", m.terminations.clone());
        r.register("disruptions", "NodeClaims deleted by disruption, by cause (empty, expired, underutilized, drifted)", m.disruptions.clone());
        r.register("gc_instances", "Leaked instances terminated by garbage collection", m.gc_instances.clone());
        r.register("gc_nodeclaims", "NodeClaims deleted because their instance vanished", m.gc_nodeclaims.clone());
        r.register("errors", "Errors by stage", m.errors.clone());
        r.register("leader", "1 while this replica leads", m.leader.clone());
        r.register("state_synced", "1 once every watched kind is listed", m.synced.clone());
        Metrics { registry: Arc::new(root), ..m }
    }

    pub fn batch(&self, pods: usize, status: &'static str, seconds: f64, gap: Option<f64>, cost: f64) {
        self.batches.inc();
        self.batch_pods.observe(pods as f64);
        self.solver_status.get_or_create(&StatusLabel { status }).inc();
        self.solver_seconds.observe(seconds);
        self.karpenter.scheduling_duration.get_or_create(&ControllerLabel { controller: "provisioner" }).observe(seconds);
        if let Some(g) = gap {
            self.solver_gap.set(g);
        }
        self.plan_cost.set(cost);
    }

    pub fn pods(&self, provisionable: usize, nominated: usize, unschedulable: usize) {
        self.pods.get_or_create(&StateLabel { state: "provisionable" }).set(provisionable as i64);
        self.pods.get_or_create(&StateLabel { state: "nominated" }).set(nominated as i64);
        self.pods.get_or_create(&StateLabel { state: "unschedulable" }).set(unschedulable as i64);
        self.karpenter.unschedulable.get_or_create(&ControllerLabel { controller: "provisioner" }).set(unschedulable as i64);
    }

    /// Karpenter's `karpenter_nodepools_usage` and `_limit` from a batch's snapshot: per NodePool, the
    /// summed capacity of its nodes (existing and in flight, as its limits count them) and its
    /// `spec.limits`, by resource type (Karpenter's names: lower case, `-` as `_`; CPU in cores, the rest
    /// in their base units; `nodes` the node count). Series of pools or resources gone are removed.
    pub(crate) fn nodepools(&self, cluster: &stowage_core::domain::cluster::Cluster) {
        let pools: Vec<PoolUsage> = cluster
            .nodepools
            .iter()
            .map(|pool| {
                let mut used = stowage_core::domain::resources::Resources::default();
                let mut nodes = 0i64;
                for n in cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(pool.name.as_str())) {
                    used.add(&n.capacity);
                    nodes += 1;
                }
                PoolUsage { name: &pool.name, used, nodes, limits: pool.limits.as_ref() }
            })
            .collect();
        self.set_nodepools(&pools);
    }

    fn set_nodepools(&self, pools: &[PoolUsage]) {
        let value = |name: &str, amount: i64| if name == "cpu" { amount as f64 / 1000.0 } else { amount as f64 };
        let label = |name: &str, pool: &str| ResourcePoolLabel { resource_type: name.to_lowercase().replace('-', "_"), nodepool: pool.to_string() };
        self.karpenter.nodepool_usage.clear();
        self.karpenter.nodepool_limit.clear();
        for p in pools {
            for name in ["cpu", "memory", "ephemeral-storage", "pods"] {
                self.karpenter.nodepool_usage.get_or_create(&label(name, p.name)).set(value(name, p.used.get(name)));
            }
            for (name, amount) in p.used.extended() {
                self.karpenter.nodepool_usage.get_or_create(&label(name, p.name)).set(value(name, *amount));
            }
            self.karpenter.nodepool_usage.get_or_create(&label("nodes", p.name)).set(p.nodes as f64);
            if let Some(l) = p.limits {
                for name in &l.limited {
                    self.karpenter.nodepool_limit.get_or_create(&label(name, p.name)).set(value(name, l.resources.get(name)));
                }
                if let Some(n) = l.nodes {
                    self.karpenter.nodepool_limit.get_or_create(&label("nodes", p.name)).set(n as f64);
                }
            }
        }
    }

    /// One cloud-provider call (`cloud_metrics`): its duration, and its error class if it failed.
    /// `controller`: Karpenter's name of the controller that made the call (`cloud_metrics::Caller`).
    pub(crate) fn cloud_call(&self, controller: &'static str, provider: &'static str, method: &'static str, seconds: f64, error: Option<&stowage_decide::cloud::CloudError>) {
        self.karpenter.cloud_duration.get_or_create(&CloudLabel { controller, method, provider }).observe(seconds);
        if let Some(e) = error {
            let error = cloud_error_label(e);
            self.karpenter.cloud_errors.get_or_create(&CloudErrorLabel { controller, method, provider, error }).inc();
        }
    }

    /// A NodeClaim created for `reason` (`provisioning`, or the disruption whose replacement it is);
    /// `min_values_relaxed`: its minValues were relaxed (`karpenter.sh/nodeclaim-min-values-relaxed`).
    pub(crate) fn nodeclaim_created(&self, nodepool: &str, price: f64, reason: &'static str, min_values_relaxed: bool) {
        self.nodeclaims_created.get_or_create(&PoolLabel { nodepool: nodepool.to_string() }).inc();
        self.planned_cost.inc_by(price);
        self.karpenter.nodeclaims_created.get_or_create(&CreatedLabel { reason, nodepool: nodepool.to_string(), min_values_relaxed: if min_values_relaxed { "true" } else { "false" } }).inc();
    }

    /// A disruption decision carried out: `replace` (with replacements) or `delete`; `nodes` removed.
    pub(crate) fn decision(&self, replace: bool, reason: &'static str, nodes: usize) {
        let consolidation_type = match (reason, nodes) {
            ("underutilized" | "empty", 1) => "single",
            ("underutilized" | "empty", _) => "multi",
            _ => "",
        };
        self.karpenter.decisions.get_or_create(&DecisionLabel { decision: if replace { "replace" } else { "delete" }, reason, consolidation_type }).inc();
    }

    pub fn launch(&self, result: &'static str) {
        self.launches.get_or_create(&ResultLabel { result }).inc();
    }

    /// A Node registered, of `nodepool` in `zone` (its labels).
    pub fn registered(&self, nodepool: &str, zone: &str) {
        self.registrations.inc();
        self.karpenter.nodes_created.get_or_create(&PoolZoneLabel { nodepool: nodepool.to_string(), zone: zone.to_string() }).inc();
    }

    /// A NodeClaim's termination finished (instance terminated, Node gone).
    pub fn terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.terminations.inc();
        let t = TerminatedLabel { nodepool: nodepool.to_string(), capacity_type: capacity_type.to_string(), zone: zone.to_string() };
        self.karpenter.nodeclaims_terminated.get_or_create(&t).inc();
        self.karpenter.nodes_terminated.get_or_create(&PoolZoneLabel { nodepool: nodepool.to_string(), zone: zone.to_string() }).inc();
    }

    /// A NodeClaim of `nodepool` and `capacity_type` (its labels) deleted for `cause`.
    pub fn disrupted(&self, cause: &'static str, nodepool: &str, capacity_type: &str) {
        self.disruptions.get_or_create(&CauseLabel { cause }).inc();
        self.karpenter.nodeclaims_disrupted.get_or_create(&DisruptedLabel { reason: cause, nodepool: nodepool.to_string(), capacity_type: capacity_type.to_string() }).inc();
    }

    /// An interruption message read, by Karpenter's `message_type`.
    pub(crate) fn interruption_received(&self, message_type: &'static str) {
        self.karpenter.interruption_received.get_or_create(&MessageTypeLabel { message_type }).inc();
    }

    pub(crate) fn interruption_deleted(&self) {
        self.karpenter.interruption_deleted.inc();
    }

    /// From the message's event time to its handling.
    pub(crate) fn interruption_queue_duration(&self, seconds: f64) {
        self.karpenter.interruption_queue_duration.observe(seconds);
    }

    pub fn gc(&self, instances: usize, nodeclaims: usize) {
        self.gc_instances.inc_by(instances as u64);
        self.gc_nodeclaims.inc_by(nodeclaims as u64);
    }

    pub fn error(&self, stage: Stage) {
        self.errors.get_or_create(&StageLabel { stage: stage.as_str() }).inc();
    }

    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(leading as i64);
    }

    pub(crate) fn set_synced(&self, synced: bool) {
        self.synced.set(synced as i64);
        self.karpenter.synced.set(synced as i64);
    }

    /// Karpenter's pod and node series, refreshed from the state index (`pod_metrics`).
    pub(crate) fn pods_nodes(&self) -> &crate::pod_metrics::Series {
        &self.pods_nodes
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        // Writing to a String cannot fail. The startup summary is written by hand (prometheus_client
        // has no summary type), before the end marker.
        let _ = encode_registry(&mut out, &self.registry);
        self.pods_nodes.encode_summary(&mut out);
        let _ = encode_eof(&mut out);
        out
    }
}

/// What `/healthz` and `/readyz` report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// The loops run.
    pub live: bool,
    /// Every watched kind is listed.
    pub ready: bool,
}

/// Serves `/metrics`, `/healthz` and `/readyz` until `shutdown` changes. Returns the bound address (port
/// 0 picks one).
pub async fn serve(addr: SocketAddr, metrics: Metrics, health: watch::Receiver<Health>, mut shutdown: watch::Receiver<bool>) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let (metrics, health) = (metrics.clone(), health.clone());
                    tokio::spawn(async move {
                        // A slow or broken client only loses its own connection.
                        let _ = tokio::time::timeout(Duration::from_secs(10), respond(stream, &metrics, &health)).await;
                    });
                }
                _ = shutdown.changed() => break,
            }
        }
    });
    Ok((local, task))
}

/// The response to one request line.
pub(crate) fn route(path: &str, metrics: &Metrics, health: &Health) -> (u16, &'static str, String) {
    match path {
        "/metrics" => (200, "text/plain; version=0.0.4; charset=utf-8", metrics.render()),
        "/healthz" if health.live => (200, "text/plain", "ok\n".into()),
        "/healthz" => (503, "text/plain", "not running\n".into()),
        "/readyz" if health.ready => (200, "text/plain", "ok\n".into()),
        "/readyz" => (503, "text/plain", "caches not synced\n".into()),
        _ => (404, "text/plain", "not found\n".into()),
    }
}

async fn respond(mut stream: tokio::net::TcpStream, metrics: &Metrics, health: &watch::Receiver<Health>) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (code, ctype, body) = if method == "GET" { route(path, metrics, &health.borrow()) } else { (405, "text/plain", "only GET\n".into()) };
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let response = format!("HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_with_bounded_labels() {
        let m = Metrics::new();
        m.batch(3, "optimal", 0.012, Some(0.0), 0.192);
        m.launch("launched");
        m.error(Stage::Launch);
        m.nodeclaim_created("default", 0.096, "provisioning", false);
        let text = m.render();
        for needle in [
            "stowage_batches_total 1",
            "stowage_solver_total{status=\"optimal\"} 1",
            "stowage_launches_total{result=\"launched\"} 1",
            "stowage_errors_total{stage=\"launch\"} 1",
            "stowage_nodeclaims_created_total{nodepool=\"default\"} 1",
            "stowage_plan_cost_dollars_per_hour 0.192",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    /// Karpenter's dashboards read these names and labels (karpenter.sh/docs/reference/metrics, v1.14).
    #[test]
    fn karpenter_series_have_karpenters_names_and_labels() {
        let m = Metrics::new();
        m.nodeclaim_created("default", 0.1, "provisioning", false);
        m.nodeclaim_created("default", 0.05, "underutilized", false);
        m.nodeclaim_created("relaxed", 0.1, "provisioning", true);
        m.registered("default", "us-east-1a");
        m.disrupted("underutilized", "default", "spot");
        m.decision(true, "underutilized", 1);
        m.decision(false, "empty", 1);
        m.terminated("default", "spot", "us-east-1a");
        m.set_synced(true);
        m.interruption_received("spot_interrupted");
        m.interruption_deleted();
        m.interruption_queue_duration(0.3);
        m.batch(3, "optimal", 0.42, None, 1.0);
        m.pods(3, 2, 1);
        m.cloud_call("nodeclaim.lifecycle", "aws", "Create", 0.02, None);
        let limits = stowage_core::domain::nodepool::PoolLimits { resources: stowage_core::domain::resources::Resources::new(100_000, 0, 0, 0), limited: vec!["cpu".into()], nodes: Some(10) };
        let node = stowage_core::domain::resources::Resources::new(4000, 16 << 30, 20 << 30, 58);
        m.set_nodepools(&[PoolUsage { name: "gone", used: node.clone(), nodes: 1, limits: None }]);
        m.set_nodepools(&[PoolUsage { name: "default", used: node.plus(&node), nodes: 2, limits: Some(&limits) }]);
        m.cloud_call("nodeclaim.lifecycle", "aws", "Create", 0.03, Some(&stowage_decide::cloud::CloudError::InsufficientCapacity { offerings: vec![], message: "x".into() }));
        m.cloud_call("instance.garbagecollection", "aws", "Delete", 0.01, Some(&stowage_decide::cloud::CloudError::Throttled("x".into())));
        let text = m.render();
        for needle in [
            "karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 1",
            "karpenter_interruption_deleted_messages_total 1",
            "karpenter_interruption_message_queue_duration_seconds_count 1",
            "karpenter_interruption_message_queue_duration_seconds_bucket{le=\"0.4\"} 1",
            "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"default\",min_values_relaxed=\"false\"} 1",
            "karpenter_nodeclaims_created_total{reason=\"underutilized\",nodepool=\"default\",min_values_relaxed=\"false\"} 1",
            "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"relaxed\",min_values_relaxed=\"true\"} 1",
            "karpenter_nodes_created_total{nodepool=\"default\",zone=\"us-east-1a\"} 1",
            "karpenter_nodeclaims_disrupted_total{reason=\"underutilized\",nodepool=\"default\",capacity_type=\"spot\"} 1",
            "karpenter_voluntary_disruption_decisions_total{decision=\"replace\",reason=\"underutilized\",consolidation_type=\"single\"} 1",
            "karpenter_voluntary_disruption_decisions_total{decision=\"delete\",reason=\"empty\",consolidation_type=\"single\"} 1",
            "karpenter_nodeclaims_terminated_total{nodepool=\"default\",capacity_type=\"spot\",zone=\"us-east-1a\"} 1",
            "karpenter_nodes_terminated_total{nodepool=\"default\",zone=\"us-east-1a\"} 1",
            "karpenter_cluster_state_synced 1",
            "karpenter_build_info{version=",
            "stowage_terminations_total 1",
            "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"} 1",
            "karpenter_scheduler_scheduling_duration_seconds_bucket{le=\"0.45\",controller=\"provisioner\"} 1",
            "karpenter_scheduler_unschedulable_pods_count{controller=\"provisioner\"} 1",
            "karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"aws\"} 2",
            "karpenter_cloudprovider_errors_total{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"aws\",error=\"InsufficientCapacityError\"} 1",
            "karpenter_cloudprovider_errors_total{controller=\"instance.garbagecollection\",method=\"Delete\",provider=\"aws\",error=\"\"} 1",
            "karpenter_nodepools_usage{resource_type=\"cpu\",nodepool=\"default\"} 8.0",
            "karpenter_nodepools_usage{resource_type=\"memory\",nodepool=\"default\"} 34359738368.0",
            "karpenter_nodepools_usage{resource_type=\"ephemeral_storage\",nodepool=\"default\"} 42949672960.0",
            "karpenter_nodepools_usage{resource_type=\"pods\",nodepool=\"default\"} 116.0",
            "karpenter_nodepools_usage{resource_type=\"nodes\",nodepool=\"default\"} 2.0",
            "karpenter_nodepools_limit{resource_type=\"cpu\",nodepool=\"default\"} 100.0",
            "karpenter_nodepools_limit{resource_type=\"nodes\",nodepool=\"default\"} 10.0",
        ] {
            assert!(text.contains(needle), "missing {needle}:\n{text}");
        }
        for gone in ["nodepool=\"gone\"", "karpenter_nodepools_limit{resource_type=\"memory\""] {
            assert!(!text.contains(gone), "{gone} should not be exported:\n{text}");
        }
    }

    #[test]
    fn health_routes() {
        let m = Metrics::new();
        assert_eq!(route("/healthz", &m, &Health { live: true, ready: false }).0, 200);
        assert_eq!(route("/readyz", &m, &Health { live: true, ready: false }).0, 503);
        assert_eq!(route("/readyz", &m, &Health { live: true, ready: true }).0, 200);
        assert_eq!(route("/nope", &m, &Health::default()).0, 404);
    }

    #[tokio::test]
    async fn serves_over_tcp() {
        let (h_tx, h_rx) = watch::channel(Health { live: true, ready: true });
        let (s_tx, s_rx) = watch::channel(false);
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), Metrics::new(), h_rx, s_rx).await.unwrap();
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK") && out.ends_with("ok\n"), "{out}");
        drop(h_tx);
        s_tx.send(true).unwrap();
        task.await.unwrap();
    }
}
