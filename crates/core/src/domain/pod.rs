//! A pod as the planners see it: its requests already computed, selectors compiled, namespaces of its
//! affinity terms resolved and its volumes turned into node constraints.

use super::labels::{LabelSelector, Labels, NodeMatcher, NodeSelectorTerm, PreferredTerm};
use super::resources::Resources;
use super::taints::Toleration;

/// Index of a pod in `Cluster::pods`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(pub u32);

impl PodId {
    pub fn ix(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

/// A topology spread constraint, `matchLabelKeys` already ANDed into `selector`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub key: String,
    pub when: WhenUnsatisfiable,
    /// `None`: a nil or empty selector, which counts no pod (the constraint never binds).
    pub selector: Option<LabelSelector>,
    /// 1 when unset.
    pub min_domains: i32,
    /// Default Honor.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: InclusionPolicy,
    /// A cluster default (kube-scheduler's PodTopologySpread `defaultConstraints`, with the selector
    /// deduced from the Services and controllers selecting the pod; `semantics::spread_defaults`), not
    /// the pod's own: it filters exactly as kube-scheduler says, and is never the user's intent (no
    /// hostname intent rule, never hardened or priced as a preference). Only `DoNotSchedule` defaults
    /// are kept; `ScheduleAnyway` ones only score in kube-scheduler.
    pub defaulted: bool,
}

impl SpreadConstraint {
    pub(crate) fn is_hard(&self) -> bool {
        self.when == WhenUnsatisfiable::DoNotSchedule
    }
}

/// The namespaces a pod (anti-)affinity term selects, resolved against the known namespaces:
/// unset ⇒ the pod's own; `namespaceSelector: {}` ⇒ all.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespaces {
    All,
    /// Sorted, deduplicated.
    Set(Vec<String>),
}

impl Namespaces {
    pub fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Set(s) => s.binary_search_by(|x| x.as_str().cmp(ns)).is_ok(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodAffinityTerm {
    /// `None`: nil selector, matches no pod.
    pub selector: Option<LabelSelector>,
    pub namespaces: Namespaces,
    pub key: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WeightedAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub protocol: String,
    /// "0.0.0.0" when unset.
    pub ip: String,
    pub port: i32,
}

/// What a pod's volumes require of a node. Node-side only: volume topology never enters the pod's
/// own node affinity, so it never changes spread counting (kubernetes-semantics.md §7, Karpenter #1239).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeNeeds {
    /// One entry per volume: the node must match at least one of its terms (bound PV nodeAffinity, or
    /// the StorageClass allowedTopologies of an unbound WaitForFirstConsumer claim).
    pub node_terms: Vec<Vec<NodeSelectorTerm>>,
    /// VolumeZone: per bound PV, a zone or region label key and the values allowed.
    pub zone_labels: Vec<(String, Vec<String>)>,
    /// A WaitForFirstConsumer claim already carrying `volume.kubernetes.io/selected-node`.
    pub selected_node: Option<String>,
    /// Why no node can take the pod now (for example an unbound Immediate claim).
    pub blocked: Option<String>,
    /// Claim names (namespace-local), for display and for the simulator's volume binder.
    pub claims: Vec<String>,
    /// The volumes NodeVolumeLimits counts (`semantics::volume_limits`): per claim backed by a CSI
    /// driver (or an in-tree plugin migrated to one), its driver and unique handle. Sorted, no
    /// duplicates.
    pub attach: Vec<AttachVolume>,
}

/// One volume as NodeVolumeLimits counts it: `driver/handle` is its unique name on a node. A bound
/// claim's handle is its PersistentVolume's volume handle; an unbound claim's is `pvc:<ns>/<claim>`
/// (kube-scheduler's stand-in for a volume not provisioned yet), under its StorageClass's provisioner.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttachVolume {
    pub driver: String,
    pub handle: String,
}

/// A pod spec kube-apiserver would refuse (an unknown selector operator, maxSkew 0, ...), read from a
/// file: no Filter plugin can evaluate it, so the pod stays pending with this reason and the rest of
/// the batch is planned (`semantics::invalid_spec`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InvalidSpec {
    /// The offending field, e.g. `spec.topologySpreadConstraints[0].maxSkew`.
    pub field: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    pub kind: String,
    pub name: String,
}

/// The parts of a pod's preferences that `preferencePolicy: Respect` plans as requirements and that
/// the pod's spec fields cannot say (`semantics::preferences::harden`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hardened {
    /// PreferNoSchedule taints the pod does not tolerate filter like NoSchedule.
    pub prefer_no_schedule: bool,
    /// The last this many `anti_affinity` terms are preferred terms held as requirements: they keep
    /// the pod out of domains holding pods they select, but, unlike required terms, do not keep later
    /// pods out of the pod's own domain (Karpenter does not track preferred terms inversely).
    pub one_way_anti_affinity: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: Labels,
    /// Effective request (containers, init and sidecar containers, overhead) incl. one pod slot.
    pub requests: Resources,
    pub node_matcher: NodeMatcher,
    pub preferred_node: Vec<PreferredTerm>,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<PodAffinityTerm>,
    pub anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
    pub host_ports: Vec<HostPort>,
    pub volumes: VolumeNeeds,
    /// What `preferencePolicy: Respect` made of the pod's preferences (`semantics::preferences`); the
    /// default (nothing) for every pod the input reads.
    pub hardened: Hardened,
    /// Set when the spec could not be read: the pod is never placed (its other constraint fields are
    /// then empty, its requests what could be read).
    pub invalid: Option<InvalidSpec>,
    /// `spec.nodeName`: bound (or nominated to be bound) to this node.
    pub node_name: Option<String>,
    pub terminating: bool,
    pub phase: PodPhase,
    pub owner: Option<Owner>,
    pub priority: i32,
    /// The pod's place in time, a stand-in for kube-scheduler's queue timestamp (`semantics::queue`):
    /// the input ranks pods by creationTimestamp, then by their order in the input
    /// (`stowage_input::build`).
    pub seq: u32,
}

impl Pod {
    /// A pending pod with these requests and no constraints (tests and synthetic workloads build on it).
    pub fn new(namespace: &str, name: &str, requests: Resources) -> Pod {
        Pod {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("{namespace}/{name}"),
            labels: Labels::new(),
            requests,
            node_matcher: NodeMatcher::default(),
            preferred_node: vec![],
            tolerations: vec![],
            spread: vec![],
            affinity: vec![],
            anti_affinity: vec![],
            preferred_affinity: vec![],
            preferred_anti_affinity: vec![],
            host_ports: vec![],
            volumes: VolumeNeeds::default(),
            hardened: Hardened::default(),
            invalid: None,
            node_name: None,
            terminating: false,
            phase: PodPhase::Pending,
            owner: None,
            priority: 0,
            seq: 0,
        }
    }

    /// The required anti-affinity terms that also repel later pods (kube-scheduler's symmetry): all but
    /// the hardened preferred ones.
    pub fn symmetric_anti_affinity(&self) -> &[PodAffinityTerm] {
        &self.anti_affinity[..self.anti_affinity.len().saturating_sub(self.hardened.one_way_anti_affinity)]
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    pub fn is_daemon(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }

    /// A pod waiting for a node: unbound, alive, not a DaemonSet pod (those follow their nodes).
    pub(crate) fn is_pending(&self) -> bool {
        self.node_name.is_none() && !self.is_terminal() && !self.terminating && !self.is_daemon()
    }
}
