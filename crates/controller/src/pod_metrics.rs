//! Karpenter's pod and node metrics (v1.14.1's `controllers/metrics/pod` and `controllers/metrics/node`),
//! under Karpenter's names, types, labels and units, computed from the controller's state index.
//!
//! ```text
//!  pod watch event ──► Series::pod / pod_gone (one pod, as Karpenter reconciles one)
//!  every 5 s (leader, synced) ──► Series::refresh(ClusterState): pods whose object or node changed
//!                                  and pods waiting to start or bind looked at again, series of pods
//!                                  gone removed, every node series set (totals from the pods kept)
//! ```
//!
//! Pod series (labels sorted, as Prometheus' Go client writes them):
//! - `karpenter_pods_state{arch, capacity_type, instance_type, managed, name, namespace, node, nodepool,
//!   owner, phase, ready, scheduled, zone}` = 1 per pod. `owner` is the first owner reference as a self
//!   link (`/apis/<apiVersion>/namespaces/<ns>/<kind lower case>s/<name>`); zone, arch, capacity_type,
//!   instance_type and nodepool are the node's labels; `managed` is whether the node has a nodepool label.
//! - `karpenter_pods_startup_duration_seconds`: a summary (quantiles 0, 0.5, 0.9, 0.99, 1 over the last
//!   10 minutes; sum and count over all time) of `Ready.lastTransitionTime − creationTimestamp`,
//!   observed once for a pod seen `Pending` before and now Ready.
//! - `karpenter_pods_unstarted_time_seconds{name, namespace}` = now − creation, while such a pod is
//!   `Pending` or started but not Ready; removed once it is Ready or terminal.
//! - `karpenter_pods_bound_duration_seconds`: a histogram (Karpenter's `DurationBuckets`) of
//!   `PodScheduled.lastTransitionTime − creationTimestamp`, observed once for a pod seen `Pending` before.
//! - `karpenter_pods_unbound_time_seconds{name, namespace}` = now − creation while a `Pending` pod's
//!   `PodScheduled` condition is not `True`; removed once a pod past `Pending` is scheduled.
//!
//! Node series (`karpenter_nodes_*`, `karpenter_cluster_utilization_percent`): their values and labels
//! are `node_metrics`' functions; [`Series::refresh`] replaces them all from the state index.
//!
//! Karpenter's alpha series, timed from what the controller's batches record (Karpenter's cluster
//! state keeps the same three moments): a pod's first look as provisionable (a watch event or a
//! refresh: Karpenter's ack), the first batch that decided about it, and the first batch that placed it
//! (reset by a batch that found no place):
//! - `karpenter_pods_provisioning_scheduling_undecided_time_seconds{name, namespace}` = now − the first
//!   look, until a batch decides or the pod binds;
//! - `karpenter_pods_scheduling_decision_duration_seconds` (histogram) of first decision − first look;
//! - `karpenter_pods_provisioning_unbound_time_seconds` and `_unstarted_time_seconds{name, namespace}`
//!   = now − the first placement, and the histograms `karpenter_pods_provisioning_bound_duration_seconds`
//!   and `_startup_duration_seconds` of `PodScheduled` / `Ready` − the first placement, alongside the
//!   series above.
//!
//! Every value is a plain function of the objects (and of `now`, passed in); `Series` applies them to
//! the families.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::node_metrics::{NodeLabels, NodeSeries, NodeTotals, PodUsage, bool_label, cluster_utilization, node_label, node_values, phase, seconds_between, utilization_allocatable};
use crate::state::ClusterState;

/// Karpenter's duration buckets (`metrics.DurationBuckets`: controller-runtime's, plus longer ones).
pub(crate) const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

/// How long a startup observation counts towards the summary's quantiles (client_golang's default
/// `MaxAge`).
const SUMMARY_WINDOW_MS: i64 = 10 * 60 * 1000;
/// At most this many observations are kept for the quantiles (memory bound; the oldest go first).
const SUMMARY_CAP: usize = 100_000;
/// The summary's quantiles (Karpenter's `SummaryObjectives`).
const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

/// `(namespace, name)` of a pod.
pub(crate) type Key = (String, String);

/// The labels of `karpenter_pods_state`, in the order Prometheus' Go client writes them (sorted).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(crate) struct PodStateLabels {
    pub arch: String,
    pub capacity_type: String,
    pub instance_type: String,
    pub managed: String,
    pub name: String,
    pub namespace: String,
    pub node: String,
    pub nodepool: String,
    pub owner: String,
    pub phase: String,
    pub ready: String,
    pub scheduled: String,
    pub zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodLabel {
    name: String,
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource_type: String,
}

/// What a gauge of one pod becomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Change {
    Set(f64),
    Delete,
    Keep,
}

/// What one look at a pod changes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodUpdate {
    pub state: PodStateLabels,
    pub unstarted: Change,
    pub unbound: Change,
    /// A startup duration to observe.
    pub startup: Option<f64>,
    /// A bound duration to observe.
    pub bound: Option<f64>,
    /// The `provisioning_*` gauges: timed from when a batch first placed the pod.
    pub provisioning_unstarted: Change,
    pub provisioning_unbound: Change,
    /// Time since the pod was first seen provisionable, while no batch has decided about it.
    pub undecided: Change,
    pub provisioning_startup: Option<f64>,
    pub provisioning_bound: Option<f64>,
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status.as_ref()?.conditions.iter().flatten().find(|c| c.type_ == kind)
}

fn condition_true(pod: &Pod, kind: &str) -> bool {
    condition(pod, kind).is_some_and(|c| c.status == "True")
}

/// `karpenter_pods_state`'s labels for `pod` on `node` (its `spec.nodeName`'s Node, if known).
pub(crate) fn pod_state_labels(pod: &Pod, node: Option<&Node>) -> PodStateLabels {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let owner = match pod.metadata.owner_references.as_deref().and_then(|o| o.first()) {
        Some(o) => format!("/apis/{}/namespaces/{namespace}/{}s/{}", o.api_version, o.kind.to_lowercase(), o.name),
        None => String::new(),
    };
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let nodepool = node_label(node, "karpenter.sh/nodepool");
    PodStateLabels {
        arch: node_label(node, "kubernetes.io/arch").to_string(),
        capacity_type: node_label(node, "karpenter.sh/capacity-type").to_string(),
        instance_type: node_label(node, "node.kubernetes.io/instance-type").to_string(),
        managed: bool_label(!nodepool.is_empty()),
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace,
        scheduled: bool_label(!node_name.is_empty()),
        node: node_name,
        nodepool: nodepool.to_string(),
        owner,
        phase: phase(pod).to_string(),
        ready: bool_label(condition_true(pod, "Ready")),
        zone: node_label(node, "topology.kubernetes.io/zone").to_string(),
    }
}

/// Which pods were seen `Pending`, for the observations made once when they start and bind, and when
/// the controller first saw each pod provisionable and a batch first decided about it (Karpenter's
/// cluster state keeps the same three times for its `provisioning_*` series).
#[derive(Clone, Debug, Default)]
pub(crate) struct PodTracker {
    pending: BTreeSet<Key>,
    unscheduled: BTreeSet<Key>,
    /// First seen provisionable (Karpenter's ack).
    acks: BTreeMap<Key, Timestamp>,
    /// A batch first placed the pod or found no place for it.
    attempted: BTreeMap<Key, Timestamp>,
    /// A batch first placed the pod (since the last batch that found no place for it).
    schedulable: BTreeMap<Key, Timestamp>,
}

impl PodTracker {
    /// One look at `pod` at `now` (Karpenter's pod metrics reconcile, step for step).
    pub(crate) fn update(&mut self, pod: &Pod, node: Option<&Node>, now: Timestamp) -> PodUpdate {
        let key = key_of(pod);
        let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
        let age = seconds_between(now, created);
        let pending = phase(pod) == "Pending";
        let mut u = PodUpdate {
            state: pod_state_labels(pod, node),
            unstarted: Change::Keep,
            unbound: Change::Keep,
            startup: None,
            bound: None,
            provisioning_unstarted: Change::Keep,
            provisioning_unbound: Change::Keep,
            undecided: Change::Keep,
            provisioning_startup: None,
            provisioning_bound: None,
        };
        let scheduled = condition(pod, "PodScheduled");
        let bound = scheduled.is_some_and(|c| c.status == "True");
        let schedulable = self.schedulable.get(&key).copied();
        let since_schedulable = || match schedulable {
            Some(t) => Change::Set(seconds_between(now, t)),
            None => Change::Delete,
        };

        // Undecided: from the first look as provisionable until a batch decides (or the pod binds).
        if self.attempted.contains_key(&key) || bound {
            u.undecided = Change::Delete;
        } else if let Some(ack) = self.acks.get(&key) {
            u.undecided = Change::Set(seconds_between(now, *ack));
        }

        // Startup: creation (and the first placement) until Ready, for pods seen Pending.
        if pending {
            u.unstarted = Change::Set(age);
            u.provisioning_unstarted = since_schedulable();
            self.pending.insert(key.clone());
        } else if self.pending.contains(&key) {
            match condition(pod, "Ready").filter(|c| c.status == "True") {
                Some(ready) => {
                    let at = ready.last_transition_time.as_ref().map_or(now, |t| t.0);
                    u.unstarted = Change::Delete;
                    u.provisioning_unstarted = Change::Delete;
                    u.startup = Some(seconds_between(at, created));
                    u.provisioning_startup = schedulable.map(|t| seconds_between(at, t));
                    self.pending.remove(&key);
                    self.clear_scheduling(&key);
                }
                None if matches!(phase(pod), "Succeeded" | "Failed") => {
                    // A terminal pod never became Ready: no startup to observe.
                    u.unstarted = Change::Delete;
                    u.provisioning_unstarted = Change::Delete;
                    self.pending.remove(&key);
                    self.clear_scheduling(&key);
                }
                None => {
                    u.unstarted = Change::Set(age);
                    u.provisioning_unstarted = since_schedulable();
                }
            }
        }

        // Binding: creation (and the first placement) until PodScheduled, for pods seen Pending.
        if pending {
            if !bound {
                u.unbound = Change::Set(age);
                u.provisioning_unbound = since_schedulable();
            }
            self.unscheduled.insert(key);
        } else if let Some(c) = scheduled.filter(|_| bound)
            && self.unscheduled.remove(&key)
        {
            let at = c.last_transition_time.as_ref().map_or(now, |t| t.0);
            u.unbound = Change::Delete;
            u.provisioning_unbound = Change::Delete;
            u.bound = Some(seconds_between(at, created));
            u.provisioning_bound = schedulable.map(|t| seconds_between(at, t));
        }
        u
    }

    /// The controller sees the pod provisionable at `now` (only the first time counts).
    pub(crate) fn ack(&mut self, key: Key, now: Timestamp) {
        self.acks.entry(key).or_insert(now);
    }

    /// A batch at `now` placed `placed` and found no place for `unplaced`: the first decision about a
    /// pod is recorded (and the time since its ack returned, to observe), a placement starts the
    /// pod's `provisioning_*` clocks, and no place stops them.
    pub(crate) fn decided(&mut self, placed: &[Key], unplaced: &[Key], now: Timestamp) -> Vec<f64> {
        let mut first = Vec::new();
        for (key, place) in unplaced.iter().map(|k| (k, false)).chain(placed.iter().map(|k| (k, true))) {
            if place {
                self.schedulable.entry(key.clone()).or_insert(now);
            } else {
                self.schedulable.remove(key);
            }
            if !self.attempted.contains_key(key) {
                self.attempted.insert(key.clone(), now);
                if let Some(ack) = self.acks.get(key) {
                    first.push(seconds_between(now, *ack));
                }
            }
        }
        first
    }

    fn clear_scheduling(&mut self, key: &Key) {
        self.acks.remove(key);
        self.attempted.remove(key);
        self.schedulable.remove(key);
    }

    /// Whether a pod is waiting to start, to bind or for a batch's decision (its gauges and
    /// observations may change with time alone).
    pub(crate) fn tracks(&self, key: &Key) -> bool {
        self.pending.contains(key) || self.unscheduled.contains(key) || self.acks.contains_key(key)
    }

    /// The pod is gone.
    pub(crate) fn forget(&mut self, key: &Key) {
        self.pending.remove(key);
        self.unscheduled.remove(key);
        self.clear_scheduling(key);
    }
}

fn key_of(pod: &Pod) -> Key {
    (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default())
}

/// A summary as Prometheus' Go client keeps one: quantiles over a sliding window, sum and count over
/// all time. prometheus_client has no summary type, so [`Summary::encode`] writes its text.
#[derive(Clone, Default)]
pub(crate) struct Summary {
    data: Arc<Mutex<SummaryData>>,
}

#[derive(Default)]
struct SummaryData {
    /// (observed at, in ms since the epoch; value), oldest first.
    window: VecDeque<(i64, f64)>,
    sum: f64,
    count: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Summary {
    pub(crate) fn observe(&self, value: f64, at: Timestamp) {
        let mut d = lock(&self.data);
        d.sum += value;
        d.count += 1;
        d.window.push_back((at.as_millisecond(), value));
        if d.window.len() > SUMMARY_CAP {
            d.window.pop_front();
        }
    }

    /// Drops observations older than the window.
    pub(crate) fn expire(&self, now: Timestamp) {
        let mut d = lock(&self.data);
        let oldest = now.as_millisecond() - SUMMARY_WINDOW_MS;
        while d.window.front().is_some_and(|(t, _)| *t < oldest) {
            d.window.pop_front();
        }
    }

    /// Each quantile's value: the nearest-rank quantile of the window (`q = 0` the least), NaN when
    /// the window is empty (as the Go client reports it). Exact, where the Go client estimates within
    /// ±1 % of rank.
    fn quantiles(&self) -> Vec<(f64, f64)> {
        let d = lock(&self.data);
        let mut v: Vec<f64> = d.window.iter().map(|(_, x)| *x).collect();
        v.sort_by(f64::total_cmp);
        QUANTILES
            .iter()
            .map(|q| {
                let x = if v.is_empty() {
                    f64::NAN
                } else {
                    let rank = (q * v.len() as f64).ceil() as usize;
                    v[rank.clamp(1, v.len()) - 1]
                };
                (*q, x)
            })
            .collect()
    }

    /// The summary in the text format, named `name`.
    pub(crate) fn encode(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let (sum, count) = {
            let d = lock(&self.data);
            (d.sum, d.count)
        };
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
        for (q, x) in self.quantiles() {
            let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {}", float(x));
        }
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {count}", float(sum));
    }
}

/// A float as prometheus_client writes one (`1.0`, `0.5`, `NaN`).
fn float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.fract() == 0.0 && x.is_finite() {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

const STARTUP_NAME: &str = "karpenter_pods_startup_duration_seconds";
const STARTUP_HELP: &str = "Time from a pod's creation until it is running (Ready).";

/// What the families hold now, to remove what a later look no longer finds.
#[derive(Default)]
struct Exported {
    tracker: PodTracker,
    pods: BTreeMap<Key, PodStateLabels>,
    /// Per pod, what the last refresh computed and from which versions of the pod and its node.
    seen: BTreeMap<Key, PodSeen>,
    /// The node series exported, by (series, node, resource type): their labels, and the gauge (set
    /// again without hashing its forty labels while they stay the same).
    nodes: BTreeMap<(NodeSeries, String, String), (NodeLabels, FloatGauge)>,
    utilization: BTreeSet<String>,
}

/// A pod as the last refresh saw it: a pod whose object and node's object are unchanged since, and
/// which the tracker does not follow (waiting to start, to bind or for a batch's decision), needs
/// nothing done again (its series are what they were).
struct PodSeen {
    /// The pod's and its node's resourceVersions (`None`: unknown, always looked at again).
    version: Option<(String, String)>,
    node: Option<String>,
    usage: PodUsage,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Karpenter's pod and node series. Cheap to clone (shared families).
#[derive(Clone)]
pub(crate) struct Series {
    pods_state: Family<PodStateLabels, Gauge>,
    startup: Summary,
    unstarted: Family<PodLabel, FloatGauge>,
    bound: Histogram,
    unbound: Family<PodLabel, FloatGauge>,
    provisioning_unstarted: Family<PodLabel, FloatGauge>,
    provisioning_unbound: Family<PodLabel, FloatGauge>,
    undecided: Family<PodLabel, FloatGauge>,
    provisioning_startup: Histogram,
    provisioning_bound: Histogram,
    decision: Histogram,
    allocatable: Family<NodeLabels, FloatGauge>,
    system_overhead: Family<NodeLabels, FloatGauge>,
    pod_requests: Family<NodeLabels, FloatGauge>,
    pod_limits: Family<NodeLabels, FloatGauge>,
    daemon_requests: Family<NodeLabels, FloatGauge>,
    daemon_limits: Family<NodeLabels, FloatGauge>,
    lifetime: Family<NodeLabels, FloatGauge>,
    utilization: Family<ResourceLabel, FloatGauge>,
    exported: Arc<Mutex<Exported>>,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            pods_state: Family::default(),
            startup: Summary::default(),
            unstarted: Family::default(),
            bound: Histogram::new(DURATION_BUCKETS.iter().copied()),
            unbound: Family::default(),
            provisioning_unstarted: Family::default(),
            provisioning_unbound: Family::default(),
            undecided: Family::default(),
            provisioning_startup: Histogram::new(DURATION_BUCKETS.iter().copied()),
            provisioning_bound: Histogram::new(DURATION_BUCKETS.iter().copied()),
            decision: Histogram::new(DURATION_BUCKETS.iter().copied()),
            allocatable: Family::default(),
            system_overhead: Family::default(),
            pod_requests: Family::default(),
            pod_limits: Family::default(),
            daemon_requests: Family::default(),
            daemon_limits: Family::default(),
            lifetime: Family::default(),
            utilization: Family::default(),
            exported: Arc::default(),
        }
    }
}

impl Series {
    /// Registers every series but the startup summary, which [`Series::encode_summary`] writes.
    pub(crate) fn register(&self, root: &mut Registry) {
        let r = root.sub_registry_with_prefix("karpenter");
        r.register(
            "pods_state",
            "The current state of each pod, labelled by name, namespace, owner, node, nodepool, zone, architecture, capacity type, instance type, phase and readiness",
            self.pods_state.clone(),
        );
        r.register("pods_unstarted_time_seconds", "Time since a pod's creation, while it has not started", self.unstarted.clone());
        r.register("pods_bound_duration_seconds", "Time from a pod's creation until it is bound", self.bound.clone());
        r.register("pods_unbound_time_seconds", "Time since a pod's creation, while it is not bound", self.unbound.clone());
        r.register("pods_provisioning_unstarted_time_seconds", "Time since a batch first placed a pod, while it has not started (alpha)", self.provisioning_unstarted.clone());
        r.register("pods_provisioning_unbound_time_seconds", "Time since a batch first placed a pod, while it is not bound (alpha)", self.provisioning_unbound.clone());
        r.register("pods_provisioning_scheduling_undecided_time_seconds", "Time since a pod was first seen provisionable, while no batch has decided about it (alpha)", self.undecided.clone());
        r.register("pods_provisioning_startup_duration_seconds", "Time from a batch's first placement of a pod until it is running (alpha)", self.provisioning_startup.clone());
        r.register("pods_provisioning_bound_duration_seconds", "Time from a batch's first placement of a pod until it is bound (alpha)", self.provisioning_bound.clone());
        r.register("pods_scheduling_decision_duration_seconds", "Time from a pod first seen provisionable until a batch first decided about it", self.decision.clone());
        r.register("nodes_allocatable", "The resources allocatable on each node", self.allocatable.clone());
        r.register("nodes_system_overhead", "The resources each node reserves for the system: capacity minus allocatable", self.system_overhead.clone());
        r.register("nodes_total_pod_requests", "The resources requested by the pods bound to each node, DaemonSet pods included", self.pod_requests.clone());
        r.register("nodes_total_pod_limits", "The resource limits of the pods bound to each node, DaemonSet pods included", self.pod_limits.clone());
        r.register("nodes_total_daemon_requests", "The resources requested by the DaemonSet pods bound to each node", self.daemon_requests.clone());
        r.register("nodes_total_daemon_limits", "The resource limits of the DaemonSet pods bound to each node", self.daemon_limits.clone());
        r.register("nodes_current_lifetime_seconds", "Each node's age in seconds", self.lifetime.clone());
        r.register("cluster_utilization_percent", "Pod requests as a percentage of the allocatable resources of every node", self.utilization.clone());
    }

    /// `karpenter_pods_startup_duration_seconds` in the text format.
    pub(crate) fn encode_summary(&self, out: &mut String) {
        self.startup.encode(STARTUP_NAME, STARTUP_HELP, out);
    }

    fn node_family(&self, s: NodeSeries) -> &Family<NodeLabels, FloatGauge> {
        match s {
            NodeSeries::Allocatable => &self.allocatable,
            NodeSeries::SystemOverhead => &self.system_overhead,
            NodeSeries::TotalPodRequests => &self.pod_requests,
            NodeSeries::TotalPodLimits => &self.pod_limits,
            NodeSeries::TotalDaemonRequests => &self.daemon_requests,
            NodeSeries::TotalDaemonLimits => &self.daemon_limits,
            NodeSeries::Lifetime => &self.lifetime,
        }
    }

    fn apply_pod(&self, e: &mut Exported, pod: &Pod, node: Option<&Node>, now: Timestamp) {
        let key = key_of(pod);
        let u = e.tracker.update(pod, node, now);
        let label = PodLabel { name: key.1.clone(), namespace: key.0.clone() };
        if let Some(old) = e.pods.get(&key)
            && *old != u.state
        {
            self.pods_state.remove(old);
        }
        self.pods_state.get_or_create(&u.state).set(1);
        e.pods.insert(key, u.state);
        for (family, change) in [
            (&self.unstarted, u.unstarted),
            (&self.unbound, u.unbound),
            (&self.provisioning_unstarted, u.provisioning_unstarted),
            (&self.provisioning_unbound, u.provisioning_unbound),
            (&self.undecided, u.undecided),
        ] {
            match change {
                Change::Set(v) => {
                    family.get_or_create(&label).set(v);
                }
                Change::Delete => {
                    family.remove(&label);
                }
                Change::Keep => {}
            }
        }
        if let Some(v) = u.startup {
            self.startup.observe(v, now);
        }
        if let Some(v) = u.bound {
            self.bound.observe(v);
        }
        if let Some(v) = u.provisioning_startup {
            self.provisioning_startup.observe(v);
        }
        if let Some(v) = u.provisioning_bound {
            self.provisioning_bound.observe(v);
        }
    }

    fn remove_pod(&self, e: &mut Exported, key: &Key) {
        e.seen.remove(key);
        if let Some(old) = e.pods.remove(key) {
            self.pods_state.remove(&old);
        }
        let label = PodLabel { name: key.1.clone(), namespace: key.0.clone() };
        for family in [&self.unstarted, &self.unbound, &self.provisioning_unstarted, &self.provisioning_unbound, &self.undecided] {
            family.remove(&label);
        }
        e.tracker.forget(key);
    }

    /// One pod changed (a watch event): its series as of `now`; `node` is its node's Node, if known.
    pub(crate) fn pod(&self, pod: &Pod, node: Option<&Node>, now: Timestamp) {
        self.apply_pod(&mut lock(&self.exported), pod, node, now);
    }

    /// The controller sees a pod provisionable (a watch event or a refresh), at `now`.
    pub(crate) fn ack(&self, namespace: &str, name: &str, now: Timestamp) {
        lock(&self.exported).tracker.ack((namespace.to_string(), name.to_string()), now);
    }

    /// A batch's decision at `now`: the pods it placed and those it found no place for.
    pub(crate) fn decided(&self, placed: &[Key], unplaced: &[Key], now: Timestamp) {
        for v in lock(&self.exported).tracker.decided(placed, unplaced, now) {
            self.decision.observe(v);
        }
    }

    /// A pod is gone: its series are removed.
    pub(crate) fn pod_gone(&self, namespace: &str, name: &str) {
        self.remove_pod(&mut lock(&self.exported), &(namespace.to_string(), name.to_string()));
    }

    /// Every pod and node series from the state index at `now`: pods looked at again, series of pods
    /// and nodes no longer there removed, the node series and the cluster's utilization replaced.
    pub(crate) fn refresh(&self, state: &ClusterState, now: Timestamp) {
        let mut e = lock(&self.exported);
        let mut present = BTreeSet::new();
        for pod in state.pods.iter() {
            let key = key_of(pod);
            let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
            let node = node_name.and_then(|n| state.node(n));
            if crate::state::is_provisionable(pod) {
                e.tracker.ack(key.clone(), now);
            }
            let version = pod.metadata.resource_version.clone().map(|v| (v, node.and_then(|n| n.metadata.resource_version.clone()).unwrap_or_default()));
            let unchanged = version.is_some() && e.seen.get(&key).is_some_and(|s| s.version == version) && !e.tracker.tracks(&key);
            if !unchanged {
                self.apply_pod(&mut e, pod, node, now);
                e.seen.insert(key.clone(), PodSeen { version, node: node_name.map(str::to_string), usage: PodUsage::of(pod) });
            }
            present.insert(key);
        }
        let gone: BTreeSet<Key> = e.seen.keys().chain(e.pods.keys()).filter(|k| !present.contains(*k)).cloned().collect();
        for k in &gone {
            self.remove_pod(&mut e, k);
        }

        let mut totals: BTreeMap<&str, NodeTotals> = BTreeMap::new();
        for s in e.seen.values() {
            if let Some(n) = &s.node {
                totals.entry(n.as_str()).or_default().add(&s.usage);
            }
        }
        let mut values = Vec::new();
        let mut usage = Vec::new();
        let none = NodeTotals::default();
        for node in state.nodes.iter() {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let t = totals.get(name).unwrap_or(&none);
            let claim = state.nodeclaim_of(node);
            values.extend(node_values(node, t, claim.is_some(), now).into_iter().map(|v| (name.to_string(), v)));
            let claim_allocatable = claim.and_then(|c| c.status.as_ref()?.allocatable.as_ref());
            usage.push((utilization_allocatable(node, claim_allocatable), t.requests.clone()));
        }
        drop(totals);
        let mut exported = BTreeMap::new();
        for (node, v) in values {
            let family = self.node_family(v.series);
            let key = (v.series, node, v.resource);
            let gauge = match e.nodes.remove(&key) {
                Some((old, gauge)) if old == v.labels => gauge,
                old => {
                    if let Some((old, _)) = old {
                        family.remove(&old);
                    }
                    family.get_or_create(&v.labels).clone()
                }
            };
            gauge.set(v.value);
            exported.insert(key, (v.labels, gauge));
        }
        for ((series, _, _), (labels, _)) in std::mem::replace(&mut e.nodes, exported) {
            self.node_family(series).remove(&labels);
        }

        let utilization = cluster_utilization(&usage);
        let names: BTreeSet<String> = utilization.iter().map(|(n, _)| n.clone()).collect();
        for gone in e.utilization.difference(&names) {
            self.utilization.remove(&ResourceLabel { resource_type: gone.clone() });
        }
        for (name, v) in utilization {
            self.utilization.get_or_create(&ResourceLabel { resource_type: name }).set(v);
        }
        e.utilization = names;
        self.startup.expire(now);
    }

    /// No longer the leader: the gauges go (another replica exports them now) and pods seen pending are
    /// forgotten; the histogram and summary keep what they counted.
    pub(crate) fn clear(&self) {
        let mut e = lock(&self.exported);
        *e = Exported::default();
        self.pods_state.clear();
        for family in [&self.unstarted, &self.unbound, &self.provisioning_unstarted, &self.provisioning_unbound, &self.undecided] {
            family.clear();
        }
        for s in [
            NodeSeries::Allocatable,
            NodeSeries::SystemOverhead,
            NodeSeries::TotalPodRequests,
            NodeSeries::TotalPodLimits,
            NodeSeries::TotalDaemonRequests,
            NodeSeries::TotalDaemonLimits,
            NodeSeries::Lifetime,
        ] {
            self.node_family(s).clear();
        }
        self.utilization.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use serde_json::json;
    use stowage_input::api::NodeClaim;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn ts(s: i64) -> String {
        at(s).to_string()
    }

    /// A pod created at t=0, in `phase`, with the given conditions (type, status, lastTransitionTime).
    fn pod(name: &str, node: Option<&str>, phase: &str, conditions: &[(&str, &str, i64)]) -> Pod {
        let conditions: Vec<_> = conditions.iter().map(|(t, s, when)| json!({"type": t, "status": s, "lastTransitionTime": ts(*when)})).collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "creationTimestamp": ts(0),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}]},
            "status": {"phase": phase, "conditions": conditions}
        }))
        .unwrap()
    }

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": ts(0), "labels": labels},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}, "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}
        }))
        .unwrap()
    }

    fn managed_labels() -> serde_json::Value {
        json!({"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "us-east-1a",
               "node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"})
    }

    fn lines(m: &Metrics, prefix: &str) -> Vec<String> {
        m.render().lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect()
    }

    /// A pod's way from Pending to Running, as Karpenter's pod metrics record it: the state series with
    /// Karpenter's labels, the time gauges while it waits, one startup and one bound observation, and
    /// nothing left once it is deleted.
    #[test]
    fn karpenters_pod_series_follow_a_pod_from_pending_to_running_to_deleted() {
        let m = Metrics::new();
        let s = m.pods_nodes();
        let n = node("n1", managed_labels());
        s.pod(&pod("web-1", None, "Pending", &[("PodScheduled", "False", 0)]), None, at(7));
        assert_eq!(
            lines(&m, "karpenter_pods_state"),
            vec![
                "karpenter_pods_state{arch=\"\",capacity_type=\"\",instance_type=\"\",managed=\"false\",name=\"web-1\",namespace=\"default\",node=\"\",nodepool=\"\",owner=\"/apis/apps/v1/namespaces/default/replicasets/web-abc\",phase=\"Pending\",ready=\"false\",scheduled=\"false\",zone=\"\"} 1"
            ]
        );
        assert_eq!(lines(&m, "karpenter_pods_unstarted_time_seconds{"), vec!["karpenter_pods_unstarted_time_seconds{name=\"web-1\",namespace=\"default\"} 7.0"]);
        assert_eq!(lines(&m, "karpenter_pods_unbound_time_seconds{"), vec!["karpenter_pods_unbound_time_seconds{name=\"web-1\",namespace=\"default\"} 7.0"]);
        // Bound at 40 s and Ready at 52 s, seen at 60 s.
        let running = pod("web-1", Some("n1"), "Running", &[("PodScheduled", "True", 40), ("Ready", "True", 52)]);
        s.pod(&running, Some(&n), at(60));
        assert_eq!(
            lines(&m, "karpenter_pods_state"),
            vec![
                "karpenter_pods_state{arch=\"amd64\",capacity_type=\"on-demand\",instance_type=\"m5.large\",managed=\"true\",name=\"web-1\",namespace=\"default\",node=\"n1\",nodepool=\"default\",owner=\"/apis/apps/v1/namespaces/default/replicasets/web-abc\",phase=\"Running\",ready=\"true\",scheduled=\"true\",zone=\"us-east-1a\"} 1"
            ],
            "the Pending series is replaced, not kept beside it"
        );
        assert!(lines(&m, "karpenter_pods_unstarted_time_seconds{").is_empty());
        assert!(lines(&m, "karpenter_pods_unbound_time_seconds{").is_empty());
        // Looked at again (the next refresh): nothing observed twice.
        s.pod(&running, Some(&n), at(65));
        let text = m.render();
        for line in [
            "karpenter_pods_startup_duration_seconds{quantile=\"0\"} 52.0",
            "karpenter_pods_startup_duration_seconds{quantile=\"0.5\"} 52.0",
            "karpenter_pods_startup_duration_seconds{quantile=\"0.99\"} 52.0",
            "karpenter_pods_startup_duration_seconds{quantile=\"1\"} 52.0",
            "karpenter_pods_startup_duration_seconds_sum 52.0",
            "karpenter_pods_startup_duration_seconds_count 1",
            "# TYPE karpenter_pods_startup_duration_seconds summary",
            "karpenter_pods_bound_duration_seconds_sum 40.0",
            "karpenter_pods_bound_duration_seconds_count 1",
            "karpenter_pods_bound_duration_seconds_bucket{le=\"30.0\"} 0",
            "karpenter_pods_bound_duration_seconds_bucket{le=\"40.0\"} 1",
            "# TYPE karpenter_pods_bound_duration_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "the summary is written before the end marker");
        s.pod_gone("default", "web-1");
        let text = m.render();
        assert!(!text.contains("name=\"web-1\""), "a deleted pod's series are removed:\n{text}");
        assert!(text.contains("karpenter_pods_startup_duration_seconds_count 1"), "observations stay");
    }

    /// A pod first seen running was never seen Pending: nothing to observe (Karpenter's rule); a pod
    /// that fails before Ready leaves its unstarted gauge without an observation.
    #[test]
    fn only_pods_seen_pending_are_timed() {
        let mut t = PodTracker::default();
        let u = t.update(&pod("a", Some("n1"), "Running", &[("PodScheduled", "True", 3), ("Ready", "True", 5)]), None, at(10));
        assert_eq!((u.startup, u.bound, u.unstarted, u.unbound), (None, None, Change::Keep, Change::Keep));
        let u = t.update(&pod("b", None, "Pending", &[]), None, at(4));
        assert_eq!((u.unstarted, u.unbound), (Change::Set(4.0), Change::Set(4.0)), "no PodScheduled condition yet: unbound");
        let u = t.update(&pod("b", Some("n1"), "Pending", &[("PodScheduled", "True", 6)]), None, at(8));
        assert_eq!((u.unstarted, u.unbound, u.bound), (Change::Set(8.0), Change::Keep, None), "bound but still Pending: no observation yet");
        let u = t.update(&pod("b", Some("n1"), "Failed", &[("PodScheduled", "True", 6), ("Ready", "False", 9)]), None, at(12));
        assert_eq!((u.unstarted, u.startup), (Change::Delete, None));
        assert_eq!((u.unbound, u.bound), (Change::Delete, Some(6.0)));
    }

    /// Karpenter's node series for one managed node: allocatable, overhead, pod and DaemonSet totals
    /// (terminal pods left out, `pods` the count), lifetime, and the cluster's utilization; removed
    /// when the node goes.
    #[test]
    fn karpenters_node_series_from_the_state_index() {
        let m = Metrics::new();
        let mut st = ClusterState::default();
        st.apply(node("n1", managed_labels()));
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c1", "uid": "uid-c1"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": "aws:///us-east-1a/i-n1"}
        }))
        .unwrap();
        st.apply(claim);
        st.apply(pod("web-1", Some("n1"), "Running", &[]));
        let mut ds = pod("ds-1", Some("n1"), "Running", &[]);
        ds.metadata.owner_references.as_mut().unwrap()[0].kind = "DaemonSet".into();
        ds.spec.as_mut().unwrap().containers[0].resources = Some(serde_json::from_value(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}})).unwrap());
        st.apply(ds);
        st.apply(pod("done", Some("n1"), "Succeeded", &[]));
        m.pods_nodes().refresh(&st, at(3600));
        let labels = |resource: Option<&str>| {
            let wk = "arch=\"amd64\",capacity_reservation_id=\"\",capacity_reservation_interruptible=\"\",capacity_reservation_type=\"\",capacity_type=\"on-demand\",instance_accelerator_count=\"\",instance_accelerator_manufacturer=\"\",instance_accelerator_name=\"\",instance_capability_flex=\"\",instance_category=\"\",instance_cpu=\"\",instance_cpu_manufacturer=\"\",instance_cpu_sustained_clock_speed_mhz=\"\",instance_ebs_bandwidth=\"\",instance_encryption_in_transit_supported=\"\",instance_family=\"\",instance_generation=\"\",instance_gpu_count=\"\",instance_gpu_manufacturer=\"\",instance_gpu_memory=\"\",instance_gpu_name=\"\",instance_hypervisor=\"\",instance_local_nvme=\"\",instance_memory=\"\",instance_network_bandwidth=\"\",instance_size=\"\",instance_tenancy=\"\",instance_type=\"m5.large\",managed=\"true\",node_name=\"n1\",nodepool=\"default\",os=\"linux\",phase=\"\",placement_group_id=\"\",placement_group_partition=\"\",region=\"\"";
            match resource {
                Some(r) => format!("{{{wk},resource_type=\"{r}\",windows_build=\"\",zone=\"us-east-1a\",zone_id=\"\"}}"),
                None => format!("{{{wk},windows_build=\"\",zone=\"us-east-1a\",zone_id=\"\"}}"),
            }
        };
        let expected = [
            format!("karpenter_nodes_allocatable{} 1.93", labels(Some("cpu"))),
            format!("karpenter_nodes_allocatable{} 7516192768.0", labels(Some("memory"))),
            format!("karpenter_nodes_allocatable{} 29.0", labels(Some("pods"))),
            format!("karpenter_nodes_system_overhead{} 0.07", labels(Some("cpu"))),
            format!("karpenter_nodes_system_overhead{} 1073741824.0", labels(Some("memory"))),
            format!("karpenter_nodes_system_overhead{} 0.0", labels(Some("pods"))),
            format!("karpenter_nodes_total_pod_requests{} 0.6", labels(Some("cpu"))),
            format!("karpenter_nodes_total_pod_requests{} 1073741824.0", labels(Some("memory"))),
            format!("karpenter_nodes_total_pod_requests{} 2.0", labels(Some("pods"))),
            format!("karpenter_nodes_total_pod_limits{} 0.2", labels(Some("cpu"))),
            format!("karpenter_nodes_total_pod_limits{} 2147483648.0", labels(Some("memory"))),
            format!("karpenter_nodes_total_pod_limits{} 2.0", labels(Some("pods"))),
            format!("karpenter_nodes_total_daemon_requests{} 0.1", labels(Some("cpu"))),
            format!("karpenter_nodes_total_daemon_requests{} 1.0", labels(Some("pods"))),
            format!("karpenter_nodes_total_daemon_limits{} 0.2", labels(Some("cpu"))),
            format!("karpenter_nodes_total_daemon_limits{} 1.0", labels(Some("pods"))),
            format!("karpenter_nodes_current_lifetime_seconds{} 3600.0", labels(None)),
        ];
        let mut got = lines(&m, "karpenter_nodes_");
        got.sort();
        let mut want: Vec<String> = expected.to_vec();
        want.sort();
        assert_eq!(got, want);
        // Karpenter's arithmetic, 100 × (Σ requests / Σ allocatable) in floating point; compared as
        // numbers (the text encoder does not print the shortest form).
        let util: BTreeMap<String, f64> = lines(&m, "karpenter_cluster_utilization_percent{")
            .iter()
            .map(|l| {
                let (series, v) = l.rsplit_once(' ').unwrap();
                (series.to_string(), v.parse().unwrap())
            })
            .collect();
        let want = BTreeMap::from([
            ("karpenter_cluster_utilization_percent{resource_type=\"cpu\"}".to_string(), 100.0 * (600.0 / 1930.0)),
            ("karpenter_cluster_utilization_percent{resource_type=\"memory\"}".to_string(), 100.0 * (1073741824.0 / 7516192768.0)),
            ("karpenter_cluster_utilization_percent{resource_type=\"pods\"}".to_string(), 100.0 * (2.0 / 29.0)),
        ]);
        assert_eq!(util, want);
        // The DaemonSet pod goes, then the node: their series go with them.
        let ds = st.pods.get("default", "ds-1").unwrap().clone();
        st.delete(&ds);
        m.pods_nodes().refresh(&st, at(3605));
        assert!(lines(&m, "karpenter_nodes_total_daemon").is_empty(), "no DaemonSet pod: no daemon totals");
        assert!(!m.render().contains("name=\"ds-1\""), "the deleted pod's state series went at the refresh");
        let n1 = st.node("n1").unwrap().clone();
        st.delete(&n1);
        m.pods_nodes().refresh(&st, at(3610));
        assert!(lines(&m, "karpenter_nodes_").is_empty(), "{:?}", lines(&m, "karpenter_nodes_"));
        assert!(lines(&m, "karpenter_cluster_utilization_percent{").is_empty());
        // A pod on a node gone keeps its state series, without the node's labels.
        assert!(m.render().contains("managed=\"false\",name=\"web-1\""));
        m.pods_nodes().clear();
        assert!(lines(&m, "karpenter_pods_state").is_empty(), "a replica that stops leading exports no gauges");
    }

    /// Karpenter's alpha `provisioning_*` series: timed from the first look at a provisionable pod
    /// (undecided until a batch decides) and from a batch's first placement (unbound, unstarted, then
    /// one bound and one startup observation); a batch that finds no place stops those clocks.
    #[test]
    fn the_provisioning_series_time_from_the_first_look_and_the_first_placement() {
        let m = Metrics::new();
        let s = m.pods_nodes();
        let waiting = pod("web-1", None, "Pending", &[("PodScheduled", "False", 0)]);
        let key = ("default".to_string(), "web-1".to_string());
        s.ack("default", "web-1", at(2));
        s.pod(&waiting, None, at(5));
        assert_eq!(
            lines(&m, "karpenter_pods_provisioning_scheduling_undecided_time_seconds{"),
            vec!["karpenter_pods_provisioning_scheduling_undecided_time_seconds{name=\"web-1\",namespace=\"default\"} 3.0"]
        );
        assert!(lines(&m, "karpenter_pods_provisioning_unbound_time_seconds{").is_empty(), "not placed yet");
        // A batch finds no place at 6 s, then places it at 9 s; the second ack changes nothing.
        s.decided(&[], std::slice::from_ref(&key), at(6));
        s.ack("default", "web-1", at(7));
        s.pod(&waiting, None, at(8));
        assert!(lines(&m, "karpenter_pods_provisioning_scheduling_undecided_time_seconds{").is_empty(), "decided at 6 s");
        assert!(lines(&m, "karpenter_pods_provisioning_unbound_time_seconds{").is_empty(), "no place: no provisioning clock");
        s.decided(std::slice::from_ref(&key), &[], at(9));
        s.pod(&waiting, None, at(12));
        for line in [
            "karpenter_pods_provisioning_unbound_time_seconds{name=\"web-1\",namespace=\"default\"} 3.0",
            "karpenter_pods_provisioning_unstarted_time_seconds{name=\"web-1\",namespace=\"default\"} 3.0",
            "karpenter_pods_scheduling_decision_duration_seconds_sum 4.0",
            "karpenter_pods_scheduling_decision_duration_seconds_count 1",
        ] {
            assert!(m.render().lines().any(|l| l == line), "missing {line}:\n{}", m.render());
        }
        // Bound at 20 s, Ready at 25 s.
        let running = pod("web-1", Some("n1"), "Running", &[("PodScheduled", "True", 20), ("Ready", "True", 25)]);
        s.pod(&running, None, at(30));
        let text = m.render();
        for line in [
            "karpenter_pods_provisioning_bound_duration_seconds_sum 11.0",
            "karpenter_pods_provisioning_bound_duration_seconds_count 1",
            "karpenter_pods_provisioning_startup_duration_seconds_sum 16.0",
            "karpenter_pods_provisioning_startup_duration_seconds_count 1",
            "# TYPE karpenter_pods_provisioning_startup_duration_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(!text.contains("name=\"web-1\",namespace=\"default\"} "), "every per-pod gauge of the started pod is gone:\n{text}");
        let mut t = PodTracker::default();
        t.ack(key.clone(), at(1));
        assert!(t.tracks(&key));
        t.forget(&key);
        assert!(!t.tracks(&key) && t.decided(std::slice::from_ref(&key), &[], at(3)).is_empty(), "a pod gone forgets its ack");
    }

    /// A refresh skips what has not changed (the pod's and its node's resourceVersions), yet a waiting
    /// pod's gauges still follow the time, and a node relabelled moves its pods' and its own series to
    /// the new labels without leaving the old ones behind.
    #[test]
    fn a_refresh_looks_again_at_what_changed_and_at_waiting_pods() {
        let m = Metrics::new();
        let mut st = ClusterState::default();
        let mut n = node("n1", managed_labels());
        n.metadata.resource_version = Some("n-1".into());
        st.apply(n.clone());
        let mut running = pod("web-1", Some("n1"), "Running", &[("PodScheduled", "True", 2), ("Ready", "True", 3)]);
        running.metadata.resource_version = Some("p-1".into());
        st.apply(running);
        let mut waiting = pod("web-2", None, "Pending", &[("PodScheduled", "False", 0)]);
        waiting.metadata.resource_version = Some("p-2".into());
        st.apply(waiting);
        m.pods_nodes().refresh(&st, at(10));
        m.pods_nodes().refresh(&st, at(20));
        assert_eq!(
            lines(&m, "karpenter_pods_unbound_time_seconds{"),
            vec!["karpenter_pods_unbound_time_seconds{name=\"web-2\",namespace=\"default\"} 20.0"],
            "an unchanged waiting pod's gauge follows the time"
        );
        let count = |m: &Metrics| lines(m, "karpenter_nodes_").len();
        let before = count(&m);
        assert!(m.render().contains("instance_type=\"m5.large\",managed=\"true\",name=\"web-1\""));
        // The node becomes another instance type (a new resourceVersion); the pod is unchanged.
        let mut labels = managed_labels();
        labels["node.kubernetes.io/instance-type"] = json!("m5.xlarge");
        let mut relabelled = node("n1", labels);
        relabelled.metadata.resource_version = Some("n-2".into());
        st.apply(relabelled);
        m.pods_nodes().refresh(&st, at(30));
        let text = m.render();
        assert!(text.contains("instance_type=\"m5.xlarge\",managed=\"true\",name=\"web-1\""), "{text}");
        assert!(!text.contains("m5.large"), "no series keeps the old labels:\n{text}");
        assert_eq!(count(&m), before, "each node series replaced, none added");
        assert!(text.contains("karpenter_nodes_current_lifetime_seconds{") && text.lines().any(|l| l.starts_with("karpenter_nodes_current_lifetime_seconds{") && l.ends_with(" 30.0")));
    }

    #[test]
    fn the_startup_summary_keeps_ten_minutes_for_its_quantiles() {
        let s = Summary::default();
        let mut out = String::new();
        s.encode("x", "h", &mut out);
        assert!(out.contains("x{quantile=\"0.5\"} NaN\n") && out.contains("x_count 0\n"), "{out}");
        for (i, v) in [5.0, 1.0, 3.0, 2.0, 4.0].into_iter().enumerate() {
            s.observe(v, at(i as i64));
        }
        assert_eq!(s.quantiles(), vec![(0.0, 1.0), (0.5, 3.0), (0.9, 5.0), (0.99, 5.0), (1.0, 5.0)]);
        s.observe(10.0, at(400));
        s.expire(at(602));
        assert_eq!(s.quantiles(), vec![(0.0, 2.0), (0.5, 3.0), (0.9, 10.0), (0.99, 10.0), (1.0, 10.0)], "the first two observations are past ten minutes");
        let mut out = String::new();
        s.encode("x", "h", &mut out);
        assert!(out.ends_with("x_sum 25.0\nx_count 6\n"), "sum and count are over all time:\n{out}");
    }
}
