//! Karpenter's node metrics (v1.14.1's `controllers/metrics/node`) as plain functions of a Node, its pods
//! and `now`: the values and label sets `pod_metrics::Series` exports.
//!
//! Series, one per node with a Node object, labelled `node_name`, `phase` (`status.phase`), `managed`
//! (a NodeClaim tracks the node) and one label per Karpenter well-known node label ([`WELL_KNOWN`]: the
//! part after `/`, lower case, `-` as `_`; empty when the node lacks it):
//! - `karpenter_nodes_allocatable`, `_system_overhead` (capacity − allocatable), `_total_pod_requests`,
//!   `_total_pod_limits`, `_total_daemon_requests`, `_total_daemon_limits`, each by `resource_type`
//!   (the resource name, lower case, `-` as `_`): CPU in cores, the rest in base units (rounded up);
//!   totals over the node's non-terminal pods (DaemonSet-owned ones for `daemon`), with `pods` their
//!   count, and absent when there are none. A pod's requests and limits are Kubernetes' effective ones
//!   (`max(Σ containers + sidecars, each init container + the sidecars before it)`, pod-level cpu and
//!   memory over that, plus overhead: to every request, to limits that are set).
//! - `karpenter_nodes_current_lifetime_seconds` = now − the node's creation (no `resource_type`).
//! - `karpenter_cluster_utilization_percent{resource_type}` = 100 × (Σ pod requests / Σ allocatable)
//!   over every node, for each resource with a non-zero total; a node not yet initialized counts its
//!   NodeClaim's allocatable where its own is missing or zero.
//!
//! A pod's requests ignore the `status` resources of an in-place resize.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;

use stowage_input::quantity;

use crate::state::INITIALIZED_LABEL;

/// Karpenter's well-known node labels in v1.14.1: core's `v1.WellKnownLabels` and those the AWS
/// provider adds to it. Each becomes a label of the node series.
pub(crate) const WELL_KNOWN: [&str; 36] = [
    "karpenter.sh/nodepool",
    "karpenter.sh/capacity-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "topology.k8s.aws/zone-id",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// Resource name → amount (millicores for cpu, base units rounded up otherwise).
pub(crate) type ResourceList = BTreeMap<String, i64>;

/// A node series' labels, sorted by name.
pub(crate) type NodeLabels = Vec<(String, String)>;

/// The node series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NodeSeries {
    Allocatable,
    SystemOverhead,
    TotalPodRequests,
    TotalPodLimits,
    TotalDaemonRequests,
    TotalDaemonLimits,
    Lifetime,
}

/// One node series' value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeValue {
    pub series: NodeSeries,
    /// The `resource_type` label (empty for the lifetime).
    pub resource: String,
    pub labels: NodeLabels,
    pub value: f64,
}

pub(crate) fn seconds_between(later: Timestamp, earlier: Timestamp) -> f64 {
    (later.as_millisecond() - earlier.as_millisecond()) as f64 / 1000.0
}

pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

pub(crate) fn node_label<'a>(node: Option<&'a Node>, key: &str) -> &'a str {
    node.and_then(|n| n.metadata.labels.as_ref()?.get(key)).map(String::as_str).unwrap_or("")
}

pub(crate) fn bool_label(b: bool) -> String {
    if b { "true" } else { "false" }.to_string()
}

/// A resource list's amounts. The API server validated every quantity; one stowage's parser refuses
/// is left out (a metric is not worth failing for).
fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> ResourceList {
    list.into_iter().flatten().filter_map(|(name, q)| Some((name.clone(), quantity::amount(name, &q.0).ok()?))).collect()
}

fn add_into(dest: &mut ResourceList, src: &ResourceList) {
    for (name, v) in src {
        *dest.entry(name.clone()).or_default() += v;
    }
}

fn max_into(dest: &mut ResourceList, src: &ResourceList) {
    for (name, v) in src {
        let e = dest.entry(name.clone()).or_insert(*v);
        *e = (*e).max(*v);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Requests,
    Limits,
}

fn container(c: &Container, kind: Kind) -> ResourceList {
    let r = c.resources.as_ref();
    amounts(match kind {
        Kind::Requests => r.and_then(|r| r.requests.as_ref()),
        Kind::Limits => r.and_then(|r| r.limits.as_ref()),
    })
}

/// A pod's effective requests or limits (Kubernetes' `PodRequests` / `PodLimits`):
/// `max(Σ containers + Σ sidecars, max over init containers of (it + the sidecars before it))`, then
/// pod-level cpu, memory and hugepages over that, then the overhead (added to every request; to a
/// limit only where one is set).
fn effective(pod: &Pod, kind: Kind) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else { return ResourceList::new() };
    let mut total = ResourceList::new();
    for c in &spec.containers {
        add_into(&mut total, &container(c, kind));
    }
    let (mut sidecars, mut init_max) = (ResourceList::new(), ResourceList::new());
    for c in spec.init_containers.iter().flatten() {
        let own = container(c, kind);
        let during = if c.restart_policy.as_deref() == Some("Always") {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut t = own;
            add_into(&mut t, &sidecars);
            t
        };
        max_into(&mut init_max, &during);
    }
    max_into(&mut total, &init_max);
    let pod_level = spec.resources.as_ref().and_then(|r| match kind {
        Kind::Requests => r.requests.as_ref(),
        Kind::Limits => r.limits.as_ref(),
    });
    for (name, v) in amounts(pod_level) {
        if name == "cpu" || name == "memory" || name.starts_with("hugepages-") {
            total.insert(name, v);
        }
    }
    for (name, v) in amounts(spec.overhead.as_ref()) {
        match kind {
            Kind::Requests => *total.entry(name).or_default() += v,
            Kind::Limits => {
                if let Some(l) = total.get_mut(&name) {
                    *l += v;
                }
            }
        }
    }
    total
}

/// One pod's share of its node's totals: its effective requests and limits, each with `pods` 1
/// (Karpenter's `RequestsForPods` / `LimitsForPods` of one pod).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PodUsage {
    pub requests: ResourceList,
    pub limits: ResourceList,
    /// Owned by a DaemonSet.
    pub daemon: bool,
    /// Succeeded or Failed: counts for nothing.
    pub terminal: bool,
}

impl PodUsage {
    pub(crate) fn of(pod: &Pod) -> PodUsage {
        let with_slot = |mut l: ResourceList| {
            l.insert("pods".into(), 1);
            l
        };
        PodUsage { requests: with_slot(effective(pod, Kind::Requests)), limits: with_slot(effective(pod, Kind::Limits)), daemon: is_daemonset_pod(pod), terminal: is_terminal(pod) }
    }
}

/// A node's pod totals: Σ over its non-terminal pods (DaemonSet pods for `daemon_*`), `pods` their
/// count; a total over no pod is empty (no series).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NodeTotals {
    pub requests: ResourceList,
    pub limits: ResourceList,
    pub daemon_requests: ResourceList,
    pub daemon_limits: ResourceList,
}

impl NodeTotals {
    pub(crate) fn add(&mut self, pod: &PodUsage) {
        if pod.terminal {
            return;
        }
        add_into(&mut self.requests, &pod.requests);
        add_into(&mut self.limits, &pod.limits);
        if pod.daemon {
            add_into(&mut self.daemon_requests, &pod.requests);
            add_into(&mut self.daemon_limits, &pod.limits);
        }
    }

    #[cfg(test)]
    pub(crate) fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> NodeTotals {
        let mut t = NodeTotals::default();
        for p in pods {
            t.add(&PodUsage::of(p));
        }
        t
    }
}

/// A resource name as Karpenter's `resource_type` label writes it.
pub(crate) fn resource_type(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// An amount as Karpenter's metrics write it: cores for cpu, base units otherwise.
fn metric_value(name: &str, amount: i64) -> f64 {
    if name == "cpu" { amount as f64 / 1000.0 } else { amount as f64 }
}

/// A well-known label's name as a metric label (`karpenter.k8s.aws/instance-cpu` → `instance_cpu`).
fn label_name(key: &str) -> String {
    key.split_once('/').map_or(key, |(_, l)| l).to_lowercase().replace('-', "_")
}

/// The labels every node series of `node` carries.
pub(crate) fn node_labels(node: &Node, managed: bool) -> NodeLabels {
    let mut l: NodeLabels = WELL_KNOWN.iter().map(|k| (label_name(k), node_label(Some(node), k).to_string())).collect();
    l.push(("node_name".into(), node.metadata.name.clone().unwrap_or_default()));
    l.push(("phase".into(), node.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()));
    l.push(("managed".into(), bool_label(managed)));
    l.sort();
    l
}

fn with_resource(labels: &NodeLabels, name: &str) -> NodeLabels {
    let mut l = labels.clone();
    l.push(("resource_type".into(), resource_type(name)));
    l.sort();
    l
}

fn is_daemonset_pod(p: &Pod) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1")
}

pub(crate) fn is_terminal(p: &Pod) -> bool {
    matches!(phase(p), "Succeeded" | "Failed")
}

/// Every node series of `node`, given its pod totals and whether a NodeClaim tracks it.
pub(crate) fn node_values(node: &Node, totals: &NodeTotals, managed: bool, now: Timestamp) -> Vec<NodeValue> {
    let labels = node_labels(node, managed);
    let status = node.status.as_ref();
    let allocatable = amounts(status.and_then(|s| s.allocatable.as_ref()));
    let mut overhead = amounts(status.and_then(|s| s.capacity.as_ref()));
    for (name, v) in overhead.iter_mut() {
        *v -= allocatable.get(name).copied().unwrap_or(0);
    }
    let mut out = Vec::new();
    for (series, list) in [
        (NodeSeries::Allocatable, &allocatable),
        (NodeSeries::SystemOverhead, &overhead),
        (NodeSeries::TotalPodRequests, &totals.requests),
        (NodeSeries::TotalPodLimits, &totals.limits),
        (NodeSeries::TotalDaemonRequests, &totals.daemon_requests),
        (NodeSeries::TotalDaemonLimits, &totals.daemon_limits),
    ] {
        for (name, amount) in list {
            out.push(NodeValue { series, resource: resource_type(name), labels: with_resource(&labels, name), value: metric_value(name, *amount) });
        }
    }
    let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
    out.push(NodeValue { series: NodeSeries::Lifetime, resource: String::new(), labels, value: seconds_between(now, created) });
    out
}

/// What a node offers to the cluster's utilization: its allocatable, or, until it is initialized, its
/// NodeClaim's where its own is missing or zero (Karpenter's `StateNode.Allocatable`).
pub(crate) fn utilization_allocatable(node: &Node, claim_allocatable: Option<&BTreeMap<String, Quantity>>) -> ResourceList {
    let mut own = amounts(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
    let initialized = node_label(Some(node), INITIALIZED_LABEL) == "true";
    if !initialized && let Some(claim) = claim_allocatable {
        for (name, v) in amounts(Some(claim)) {
            let e = own.entry(name).or_insert(0);
            if *e == 0 {
                *e = v;
            }
        }
    }
    own
}

/// `karpenter_cluster_utilization_percent` per resource type from each node's allocatable and pod
/// requests: 100 × Σ requests / Σ allocatable, for resources whose allocatable total is not zero.
pub(crate) fn cluster_utilization(nodes: &[(ResourceList, ResourceList)]) -> Vec<(String, f64)> {
    let (mut allocatable, mut used) = (ResourceList::new(), ResourceList::new());
    for (a, u) in nodes {
        add_into(&mut allocatable, a);
        add_into(&mut used, u);
    }
    allocatable.iter().filter(|(_, a)| **a != 0).map(|(name, a)| (resource_type(name), 100.0 * (used.get(name).copied().unwrap_or(0) as f64 / *a as f64))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    /// Kubernetes' effective requests and limits: sidecars add to the containers, an init container
    /// runs beside the sidecars started before it, pod-level cpu/memory override, overhead is added (to
    /// limits only where set).
    #[test]
    fn a_pods_effective_requests_and_limits() {
        let p: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "500m"}}}],
                "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}},
                                   {"name": "big", "resources": {"requests": {"cpu": "3", "nvidia.com/gpu": "1"}}}],
                "overhead": {"cpu": "100m", "memory": "64Mi"}
            }
        }))
        .unwrap();
        let req = effective(&p, Kind::Requests);
        // containers 1.5 + sidecar 0.25 = 1.75 < big 3 + sidecar 0.25; + overhead 0.1.
        assert_eq!(req, ResourceList::from([("cpu".into(), 3350), ("memory".into(), (1536 + 64) << 20), ("nvidia.com/gpu".into(), 1)]));
        let lim = effective(&p, Kind::Limits);
        assert_eq!(lim, ResourceList::from([("cpu".into(), 2100)]), "overhead only where a limit is set");
        let mut pl = p.clone();
        pl.spec.as_mut().unwrap().resources = Some(serde_json::from_value(json!({"requests": {"cpu": "4"}})).unwrap());
        assert_eq!(effective(&pl, Kind::Requests)["cpu"], 4100);
        let mut done = p.clone();
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        let t = NodeTotals::of([&p, &p, &done]);
        assert_eq!((t.requests["pods"], t.limits["pods"], t.requests["cpu"]), (2, 2, 6700), "a terminal pod counts for nothing");
        assert!(t.daemon_requests.is_empty() && t.daemon_limits.is_empty(), "no DaemonSet pod: no daemon totals at all");
    }

    #[test]
    fn well_known_labels_become_distinct_metric_labels() {
        let names: BTreeSet<String> = WELL_KNOWN.iter().map(|k| label_name(k)).collect();
        assert_eq!(names.len(), WELL_KNOWN.len());
        assert_eq!(label_name("karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"), "instance_cpu_sustained_clock_speed_mhz");
        assert_eq!(label_name("topology.k8s.aws/zone-id"), "zone_id");
        for own in ["node_name", "phase", "managed", "resource_type"] {
            assert!(!names.contains(own), "{own} is the series' own label");
        }
        assert_eq!(resource_type("ephemeral-storage"), "ephemeral_storage");
        assert_eq!(resource_type("hugepages-2Mi"), "hugepages_2mi");
    }
}
