//! The cluster as the controller sees it: a synchronous, pure index of the watched objects, fed by watch
//! events, and the planning snapshot built from it.
//!
//! ```text
//!  watch events ─► ClusterState (one index per kind, keyed by namespace/name)
//!                      │
//!                      ├─ synced(): every kind has finished its initial list (and any re-list)
//!                      ├─ provisionable pods: unbound, alive, kube-scheduler said Unschedulable
//!                      └─ planning_objects(catalog) ─► input::Objects ─► input::build ─► Cluster
//! ```
//!
//! Invariants:
//! - **Never plan on a partial view.** A kind is synced once its watcher reported `InitDone`; a re-list
//!   (after an API server restart or a too-old resource version) marks it unsynced until the new list
//!   is complete, and then replaces its objects wholesale, so objects deleted while the watch was down
//!   disappear. [`ClusterState::synced`] is false until every kind is synced.
//! - **Newer wins, with resourceVersions opaque.** The API promises nothing about resourceVersions
//!   but equality, so none is ever compared for order. Watch events are applied in the order the watch
//!   delivers them (which is the order of the changes). The controller also writes the API server's
//!   answer to its own writes into the index, to see them at once ([`ClusterState::apply`]); such an
//!   object waits for the watch: until an event of that uid carries the *same* resourceVersion, the
//!   watch is behind our write and its events are older, so they are ignored. If the watch delivered
//!   that version before our answer was recorded (it remembers the last few versions it delivered per
//!   object), the write is already superseded and is dropped. A re-list clears every pending write.
//! - **The snapshot is what kube-scheduler will see, soon.** Managed Nodes lose
//!   `karpenter.sh/unregistered` (registration removes it) and, while not initialised, their startup and
//!   not-ready taints; Nodes whose NodeClaim is being deleted are marked disrupted (both
//!   `stowage_input::karpenter::planning_node`, which `stowage plan` applies too); NodeClaims that have
//!   not launched yet get the capacity of the smallest instance type they allow (so a second batch never
//!   launches again for pods already planned onto them); unbound pods are kept by the batch's rule
//!   (`stowage_input::pending`, `Selection::GivenUp`: what kube-scheduler found unschedulable and what an
//!   in-flight NodeClaim names), plus pending DaemonSet pods (what will run on their nodes); terminal and
//!   terminating pods are left out.
//! - Pure: no clock, no IO, no async. Tests feed it objects directly.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Resource;
use kube::runtime::watcher;

use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::{Labels, keys};
use stowage_core::domain::resources::Resources;
use stowage_core::semantics::spread_defaults::SpreadDefaults;
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool};
use stowage_input::objects::{Obj, Objects};
use stowage_input::{self, InputError, Selection, Source, quantity};

/// Label Karpenter puts on a Node once the controller has adopted it.
pub(crate) const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Label Karpenter puts on a Node once it is ready for pods.
pub(crate) const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";
/// Finalizer on Nodes and NodeClaims the controller terminates.
pub(crate) const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Annotation that keeps a node (or a pod's node) from being disrupted voluntarily.
pub(crate) const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// The kinds the controller watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Pod,
    Node,
    NodePool,
    NodeClaim,
    EC2NodeClass,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CSINode,
    DaemonSet,
    Namespace,
    /// Services, ReplicationControllers, ReplicaSets and StatefulSets: read only for the selector of the
    /// cluster-default topology spread (`stowage_input::spread_defaults`).
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::Pod,
        Kind::Node,
        Kind::NodePool,
        Kind::NodeClaim,
        Kind::EC2NodeClass,
        Kind::PersistentVolumeClaim,
        Kind::PersistentVolume,
        Kind::StorageClass,
        Kind::CSINode,
        Kind::DaemonSet,
        Kind::Namespace,
        Kind::Service,
        Kind::ReplicationController,
        Kind::ReplicaSet,
        Kind::StatefulSet,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::NodePool => "NodePool",
            Kind::NodeClaim => "NodeClaim",
            Kind::EC2NodeClass => "EC2NodeClass",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::PersistentVolume => "PersistentVolume",
            Kind::StorageClass => "StorageClass",
            Kind::CSINode => "CSINode",
            Kind::DaemonSet => "DaemonSet",
            Kind::Namespace => "Namespace",
            Kind::Service => "Service",
            Kind::ReplicationController => "ReplicationController",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `(namespace or "", name)`.
pub(crate) type Key = (String, String);

/// How many resourceVersions the watch delivered are remembered per object: enough to recognise the
/// version of our own write when the watch delivers it before the write's answer is recorded (the
/// answer is recorded right after the response, so only a handful of events can come in between).
const SEEN_VERSIONS: usize = 8;

/// Our own write of an object, recorded before the watch delivered it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    uid: Option<String>,
    resource_version: String,
}

/// The objects of one kind, and the list in progress while the kind re-lists.
#[derive(Clone, Debug)]
pub struct Index<T> {
    objects: BTreeMap<Key, T>,
    /// `Some` between a watcher's `Init` and `InitDone`: the new list being collected.
    relisting: Option<BTreeMap<Key, T>>,
    /// An initial list has completed at least once.
    listed: bool,
    /// Objects holding our own write, which the watch has not delivered yet.
    pending: BTreeMap<Key, Pending>,
    /// The last resourceVersions the watch delivered per object (uid, version), newest last.
    seen: BTreeMap<Key, VecDeque<(Option<String>, String)>>,
}

impl<T> Default for Index<T> {
    fn default() -> Self {
        Index { objects: BTreeMap::new(), relisting: None, listed: false, pending: BTreeMap::new(), seen: BTreeMap::new() }
    }
}

impl<T: Resource> Index<T> {
    pub fn get(&self, namespace: &str, name: &str) -> Option<&T> {
        self.objects.get(&(namespace.to_string(), name.to_string()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.objects.values()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    fn synced(&self) -> bool {
        self.listed && self.relisting.is_none()
    }
}

fn key_of<T: Resource>(o: &T) -> Key {
    let md = o.meta();
    (md.namespace.clone().unwrap_or_default(), md.name.clone().unwrap_or_default())
}

fn version_of<T: Resource>(o: &T) -> (Option<String>, Option<String>) {
    (o.meta().uid.clone(), o.meta().resource_version.clone())
}

/// A kind the index holds.
pub trait StateObject: Resource<DynamicType = ()> + Clone + Send + Sync + 'static {
    const KIND: Kind;
    fn index(s: &ClusterState) -> &Index<Self>;
    fn index_mut(s: &mut ClusterState) -> &mut Index<Self>;
}

macro_rules! state_object {
    ($t:ty, $kind:expr, $field:ident) => {
        impl StateObject for $t {
            const KIND: Kind = $kind;
            fn index(s: &ClusterState) -> &Index<Self> {
                &s.$field
            }
            fn index_mut(s: &mut ClusterState) -> &mut Index<Self> {
                &mut s.$field
            }
        }
    };
}

state_object!(Pod, Kind::Pod, pods);
state_object!(Node, Kind::Node, nodes);
state_object!(NodePool, Kind::NodePool, nodepools);
state_object!(NodeClaim, Kind::NodeClaim, nodeclaims);
state_object!(EC2NodeClass, Kind::EC2NodeClass, nodeclasses);
state_object!(PersistentVolumeClaim, Kind::PersistentVolumeClaim, pvcs);
state_object!(PersistentVolume, Kind::PersistentVolume, pvs);
state_object!(StorageClass, Kind::StorageClass, storageclasses);
state_object!(CSINode, Kind::CSINode, csinodes);
state_object!(DaemonSet, Kind::DaemonSet, daemonsets);
state_object!(Namespace, Kind::Namespace, namespaces);
state_object!(Service, Kind::Service, services);
state_object!(ReplicationController, Kind::ReplicationController, replicationcontrollers);
state_object!(ReplicaSet, Kind::ReplicaSet, replicasets);
state_object!(StatefulSet, Kind::StatefulSet, statefulsets);

/// Every watched object. Fields change only through [`ClusterState::apply`], [`ClusterState::delete`] and
/// the re-list methods.
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    pub pods: Index<Pod>,
    pub nodes: Index<Node>,
    pub nodepools: Index<NodePool>,
    pub nodeclaims: Index<NodeClaim>,
    pub nodeclasses: Index<EC2NodeClass>,
    pub pvcs: Index<PersistentVolumeClaim>,
    pub pvs: Index<PersistentVolume>,
    pub storageclasses: Index<StorageClass>,
    /// Per node, the volumes each CSI driver may attach (NodeVolumeLimits).
    pub csinodes: Index<CSINode>,
    pub daemonsets: Index<DaemonSet>,
    pub namespaces: Index<Namespace>,
    pub services: Index<Service>,
    pub replicationcontrollers: Index<ReplicationController>,
    pub replicasets: Index<ReplicaSet>,
    pub statefulsets: Index<StatefulSet>,
}

/// An object the snapshot had to leave out because stowage cannot read it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excluded {
    /// `Pod default/x`, `NodePool a`, ... (as `input` names objects).
    pub object: String,
    pub reason: String,
}

/// Everything one batch is planned on.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The objects as the planner reads them (what `stowage record` writes).
    pub objects: Objects,
    pub cluster: Cluster,
    /// Objects left out (an invalid pod never blocks the others).
    pub excluded: Vec<Excluded>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Some objects cannot be read and could not be attributed to one object to leave out; the batch
    /// is skipped and retried when something changes. Fix the objects named in the message.
    #[error("cannot build the planning snapshot: {0}")]
    Invalid(String),
}

impl ClusterState {
    /// Records the API server's answer to our own write, so the controller sees it before the watch
    /// delivers it (the module invariant says how a later watch event is judged against it).
    pub fn apply<T: StateObject>(&mut self, obj: T) {
        let key = key_of(&obj);
        let index = T::index_mut(self);
        let (uid, rv) = version_of(&obj);
        if let Some(rv) = rv {
            if index.seen.get(&key).is_some_and(|s| s.iter().any(|(u, v)| *u == uid && *v == rv)) {
                // The watch delivered this version already, and maybe newer ones since: it knows better.
                return;
            }
            index.pending.insert(key.clone(), Pending { uid, resource_version: rv });
        }
        if let Some(list) = &mut index.relisting {
            list.insert(key.clone(), obj.clone());
        }
        index.objects.insert(key, obj);
    }

    /// A watch `Apply`: the newest state of the object, unless our own write of it is newer (the watch
    /// has not reached it yet).
    pub(crate) fn observe<T: StateObject>(&mut self, obj: T) {
        let key = key_of(&obj);
        let index = T::index_mut(self);
        let (uid, rv) = version_of(&obj);
        if let Some(rv) = &rv {
            let seen = index.seen.entry(key.clone()).or_default();
            if seen.front().is_some_and(|(u, _)| *u != uid) {
                seen.clear();
            }
            seen.push_back((uid.clone(), rv.clone()));
            if seen.len() > SEEN_VERSIONS {
                seen.pop_front();
            }
        }
        if let Some(p) = index.pending.get(&key) {
            if p.uid == uid && rv.as_ref() != Some(&p.resource_version) {
                // Same object, a version before our write: the watch is behind.
                return;
            }
            // Our write itself (the watch caught up), or a new incarnation of the name.
            index.pending.remove(&key);
        }
        if let Some(list) = &mut index.relisting {
            list.insert(key.clone(), obj.clone());
        }
        index.objects.insert(key, obj);
    }

    /// Removes an object (a watch `Delete`, or the answer to our own delete).
    pub fn delete<T: StateObject>(&mut self, obj: &T) {
        let key = key_of(obj);
        let index = T::index_mut(self);
        // A delete of an older incarnation (different uid) must not remove the new object.
        if let Some(old) = index.objects.get(&key)
            && old.meta().uid.is_some()
            && obj.meta().uid.is_some()
            && old.meta().uid != obj.meta().uid
        {
            return;
        }
        index.objects.remove(&key);
        index.pending.remove(&key);
        index.seen.remove(&key);
        if let Some(list) = &mut index.relisting {
            list.remove(&key);
        }
    }

    /// A (re-)list starts: the kind is unsynced until [`Self::init_done`]. Its current objects stay
    /// visible meanwhile.
    pub fn init<T: StateObject>(&mut self) {
        T::index_mut(self).relisting = Some(BTreeMap::new());
    }

    /// An object of the list in progress.
    pub(crate) fn init_apply<T: StateObject>(&mut self, obj: T) {
        let index = T::index_mut(self);
        let key = key_of(&obj);
        index.relisting.get_or_insert_with(BTreeMap::new).insert(key, obj);
    }

    /// The list is complete: it replaces the kind's objects, and the kind is synced.
    pub(crate) fn init_done<T: StateObject>(&mut self) {
        let index = T::index_mut(self);
        if let Some(list) = index.relisting.take() {
            index.objects = list;
            // The list is the API server's state at one moment; what the watch delivers next is newer.
            index.pending.clear();
            index.seen.clear();
        }
        index.listed = true;
    }

    /// Feeds one watcher event.
    pub(crate) fn on_event<T: StateObject>(&mut self, ev: watcher::Event<T>) {
        match ev {
            watcher::Event::Apply(o) => self.observe(o),
            watcher::Event::Delete(o) => self.delete(&o),
            watcher::Event::Init => self.init::<T>(),
            watcher::Event::InitApply(o) => self.init_apply(o),
            watcher::Event::InitDone => self.init_done::<T>(),
        }
    }

    pub(crate) fn kind_synced(&self, kind: Kind) -> bool {
        match kind {
            Kind::Pod => self.pods.synced(),
            Kind::Node => self.nodes.synced(),
            Kind::NodePool => self.nodepools.synced(),
            Kind::NodeClaim => self.nodeclaims.synced(),
            Kind::EC2NodeClass => self.nodeclasses.synced(),
            Kind::PersistentVolumeClaim => self.pvcs.synced(),
            Kind::PersistentVolume => self.pvs.synced(),
            Kind::StorageClass => self.storageclasses.synced(),
            Kind::CSINode => self.csinodes.synced(),
            Kind::DaemonSet => self.daemonsets.synced(),
            Kind::Namespace => self.namespaces.synced(),
            Kind::Service => self.services.synced(),
            Kind::ReplicationController => self.replicationcontrollers.synced(),
            Kind::ReplicaSet => self.replicasets.synced(),
            Kind::StatefulSet => self.statefulsets.synced(),
        }
    }

    /// Every kind has a complete list: planning and cleanup decisions may be made.
    pub(crate) fn synced(&self) -> bool {
        Kind::ALL.iter().all(|&k| self.kind_synced(k))
    }

    /// Kinds still listing (the tests' view of `synced`).
    #[cfg(test)]
    fn unsynced(&self) -> Vec<Kind> {
        Kind::ALL.iter().copied().filter(|&k| !self.kind_synced(k)).collect()
    }

    pub fn nodeclaim(&self, name: &str) -> Option<&NodeClaim> {
        self.nodeclaims.get("", name)
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get("", name)
    }

    /// The Node registered for a provider id.
    pub(crate) fn node_by_provider_id(&self, provider_id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
    }

    /// The Node of a NodeClaim: by provider id, else by `status.nodeName`.
    pub fn node_of(&self, claim: &NodeClaim) -> Option<&Node> {
        let status = claim.status.as_ref()?;
        if let Some(pid) = status.provider_id.as_deref()
            && let Some(n) = self.node_by_provider_id(pid)
        {
            return Some(n);
        }
        status.node_name.as_deref().and_then(|n| self.node(n))
    }

    /// The NodeClaim of a Node, by provider id.
    pub(crate) fn nodeclaim_of(&self, node: &Node) -> Option<&NodeClaim> {
        let pid = node.spec.as_ref()?.provider_id.as_deref()?;
        self.nodeclaims.iter().find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid))
    }

    /// Pods bound to a node (any phase).
    pub fn pods_on(&self, node: &str) -> impl Iterator<Item = &Pod> {
        self.pods.iter().filter(move |p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    }

    /// Pods waiting for capacity (the tests' view of `is_provisionable` over the index).
    #[cfg(test)]
    fn provisionable_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter().filter(|p| is_provisionable(p))
    }

    /// The objects the planner reads (see the module invariants). `catalog` sizes NodeClaims that have
    /// not launched yet.
    pub(crate) fn planning_objects(&self, catalog: &Catalog) -> Objects {
        // NodePools being deleted, or whose EC2NodeClass is not ready, launch nothing.
        let class_not_ready = |p: &NodePool| self.nodeclasses.get("", &p.spec.template.spec.node_class_ref.name).is_some_and(super::conditions::nodeclass_not_ready);
        let mut views: BTreeMap<String, Option<Catalog>> = BTreeMap::new();
        let nodeclaims = self
            .nodeclaims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .map(|c| {
                let class = c.spec.node_class_ref.name.clone();
                let view = views.entry(class.clone()).or_insert_with(|| self.catalog_view(catalog, &class));
                sized_nodeclaim(c, view.as_ref().unwrap_or(catalog))
            })
            .map(live)
            .collect();
        let nominated: BTreeSet<String> =
            self.nodeclaims.iter().filter(|c| c.metadata.deletion_timestamp.is_none() && self.node_of(c).is_none()).flat_map(stowage_decide::provision::nominated_pods).collect();
        let pods = self
            .pods
            .iter()
            .filter(|p| {
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
                // Pending DaemonSet pods: what will run on their nodes (semantics::daemonsets::pod_for).
                (bound && !is_terminal(p)) || stowage_input::pending::planned(p, Selection::GivenUp, &nominated) || (is_daemon_pod(p) && !is_terminal(p) && p.metadata.deletion_timestamp.is_none())
            })
            .cloned()
            .map(live)
            .collect();
        Objects {
            namespaces: self.namespaces.iter().cloned().map(live).collect(),
            nodeclasses: self.nodeclasses.iter().cloned().map(live).collect(),
            nodepools: self.nodepools.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && !class_not_ready(p)).cloned().map(live).collect(),
            storageclasses: self.storageclasses.iter().cloned().map(live).collect(),
            csinodes: self.csinodes.iter().cloned().map(live).collect(),
            pvs: self.pvs.iter().cloned().map(live).collect(),
            pvcs: self.pvcs.iter().cloned().map(live).collect(),
            daemonsets: self.daemonsets.iter().cloned().map(live).collect(),
            nodes: self.nodes.iter().map(|n| self.planning_node(n)).map(live).collect(),
            nodeclaims,
            pods,
            // For the cluster-default spread's selector only: stowage never expands these here (every
            // pod they own is in `pods` already, as the API server has it).
            services: self.services.iter().cloned().map(live).collect(),
            replicationcontrollers: self.replicationcontrollers.iter().cloned().map(live).collect(),
            replicasets: self.replicasets.iter().cloned().map(live).collect(),
            statefulsets: self.statefulsets.iter().cloned().map(live).collect(),
            ..Default::default()
        }
    }

    /// The catalog as a node class sees it (kubelet settings change allocatable); `None` if the class is
    /// unknown or invalid.
    fn catalog_view(&self, catalog: &Catalog, class: &str) -> Option<Catalog> {
        let nc = self.nodeclasses.get("", class)?;
        let domain = stowage_input::karpenter::nodeclass(&Obj { source: live_source(), obj: nc.clone() }).ok()?;
        Some(stowage_core::catalog::for_nodeclass(catalog, &domain))
    }

    /// A Node as kube-scheduler will see it once the controller has done its part: the rule
    /// `stowage_input::build` applies to every workload (`karpenter::planning_node`), applied here too so
    /// that the recorded files show it.
    fn planning_node(&self, n: &Node) -> Node {
        let pool = n.metadata.labels.as_ref().and_then(|l| l.get(keys::NODEPOOL)).and_then(|p| self.nodepools.get("", p));
        stowage_input::karpenter::planning_node(n, self.nodeclaim_of(n), pool).0
    }

    /// [`ClusterState::snapshot_under`] kube-scheduler's default cluster-default spread (`System`).
    pub fn snapshot(&self, catalog: &Catalog) -> Result<Snapshot, StateError> {
        self.snapshot_under(catalog, &SpreadDefaults::default())
    }

    /// The planning snapshot, its pods given the cluster-default topology spread `defaults` (the
    /// weights' `topologySpreadDefaults`). Objects `input` cannot read are left out (and reported) so
    /// that one invalid pod never blocks a batch; an error that names no single object fails the
    /// snapshot.
    pub fn snapshot_under(&self, catalog: &Catalog, defaults: &SpreadDefaults) -> Result<Snapshot, StateError> {
        let mut objects = self.planning_objects(catalog);
        let mut excluded = Vec::new();
        // Each round removes at least one object; a handful of rounds covers errors that only show once
        // another object is gone (a NodePool whose node class was invalid, ...).
        for _ in 0..8 {
            match stowage_input::build_spread(&objects, defaults) {
                Ok(cluster) => return Ok(Snapshot { objects, cluster, excluded }),
                Err(errors) => {
                    let mut progress = false;
                    for e in &errors {
                        if remove_object(&mut objects, e) {
                            excluded.push(Excluded { object: e.object.clone().unwrap_or_default(), reason: e.to_string() });
                            progress = true;
                        }
                    }
                    if !progress {
                        let text: Vec<String> = errors.iter().map(InputError::to_string).collect();
                        return Err(StateError::Invalid(text.join("; ")));
                    }
                }
            }
        }
        Err(StateError::Invalid("too many invalid objects; see the controller's warnings".into()))
    }
}

/// Live objects have no file; errors name them by kind and name.
fn live_source() -> Source {
    Source { file: PathBuf::from("<cluster>"), doc: 0, item: None }
}

fn live<T>(obj: T) -> Obj<T> {
    Obj { source: live_source(), obj }
}

/// Removes the object an input error names; false if it names none that is present.
fn remove_object(o: &mut Objects, e: &InputError) -> bool {
    let Some(object) = e.object.as_deref() else { return false };
    let Some((kind, name)) = object.split_once(' ') else { return false };
    let (ns, name) = match name.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, name),
    };
    fn drop_named<T: Resource>(v: &mut Vec<Obj<T>>, ns: Option<&str>, name: &str) -> bool {
        let before = v.len();
        v.retain(|x| {
            let md = x.obj.meta();
            let same_ns = ns.is_none_or(|ns| md.namespace.as_deref().unwrap_or("default") == ns);
            !(same_ns && md.name.as_deref() == Some(name))
        });
        v.len() != before
    }
    match kind {
        "Pod" => drop_named(&mut o.pods, ns, name),
        "Node" => drop_named(&mut o.nodes, ns, name),
        "NodePool" => drop_named(&mut o.nodepools, ns, name),
        "NodeClaim" => drop_named(&mut o.nodeclaims, ns, name),
        "EC2NodeClass" => drop_named(&mut o.nodeclasses, ns, name),
        "DaemonSet" => drop_named(&mut o.daemonsets, ns, name),
        "PersistentVolumeClaim" => drop_named(&mut o.pvcs, ns, name),
        "PersistentVolume" => drop_named(&mut o.pvs, ns, name),
        "StorageClass" => drop_named(&mut o.storageclasses, ns, name),
        "CSINode" => drop_named(&mut o.csinodes, ns, name),
        "Namespace" => drop_named(&mut o.namespaces, ns, name),
        "Service" => drop_named(&mut o.services, ns, name),
        "ReplicationController" => drop_named(&mut o.replicationcontrollers, ns, name),
        "ReplicaSet" => drop_named(&mut o.replicasets, ns, name),
        "StatefulSet" => drop_named(&mut o.statefulsets, ns, name),
        _ => false,
    }
}

pub fn is_terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// The controlling owner's kind, if any.
pub(crate) fn owner_kind(p: &Pod) -> Option<&str> {
    p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| o.kind.as_str())
}

pub(crate) fn is_daemon_pod(p: &Pod) -> bool {
    owner_kind(p) == Some("DaemonSet")
}

/// A pod Karpenter would provision for (`pod.IsProvisionable`): not bound, not terminal, not being
/// deleted, not preempting, not a DaemonSet or static pod, and kube-scheduler has found it
/// unschedulable (so pods the scheduler has not tried yet never trigger a launch). The batch's rule,
/// shared with `stowage plan`: `stowage_input::pending` (which also keeps pods nominated to in-flight
/// capacity).
pub fn is_provisionable(p: &Pod) -> bool {
    stowage_input::pending::planned(p, Selection::GivenUp, &BTreeSet::new())
}

/// A NodeClaim with its size known: launched ones as they are; others get, for planning only, the
/// capacity and allocatable of the smallest instance type they allow (per resource) and the labels all
/// those types share. Every type a NodeClaim allows fits the pods it was created for, so counting the
/// minimum never makes a later batch launch again for them.
pub(crate) fn sized_nodeclaim(claim: &NodeClaim, catalog: &Catalog) -> NodeClaim {
    let launched = claim.status.as_ref().and_then(|s| s.allocatable.as_ref()).is_some_and(|a| !a.is_empty());
    if launched {
        return claim.clone();
    }
    let types: Vec<_> = stowage_decide::launch::requirement_values(claim, keys::INSTANCE_TYPE).into_iter().filter_map(|t| catalog.get(t)).collect();
    let Some(first) = types.first() else { return claim.clone() };
    let mut capacity = first.capacity.clone();
    let mut allocatable = first.allocatable();
    let mut common: Labels = first.labels.clone();
    for t in &types[1..] {
        capacity = min_each(&capacity, &t.capacity);
        allocatable = min_each(&allocatable, &t.allocatable());
        common.retain(|k, v| t.labels.get(k) == Some(v));
    }
    let mut c = claim.clone();
    let labels = c.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in common {
        labels.entry(k).or_insert(v);
    }
    let status = c.status.get_or_insert_with(Default::default);
    status.capacity = Some(quantities(&capacity));
    status.allocatable = Some(quantities(&allocatable));
    c
}

fn min_each(a: &Resources, b: &Resources) -> Resources {
    let mut out = Resources::default();
    for name in a.names(b) {
        out.set(name, a.get(name).min(b.get(name)));
    }
    out
}

/// Resources as Kubernetes quantities (zero entries omitted, except the four common ones).
pub fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter().map(|(n, v)| (n.to_string(), Quantity(quantity::format(n, v)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, NodeSpec, NodeStatus, PodCondition, PodSpec, PodStatus, ResourceRequirements, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use stowage_core::domain::taints::well_known;
    use stowage_input::api::{NodeClaimSpec, NodeClaimStatus, NodeClassReference, NodeSelectorRequirementWithMinValues};
    use stowage_input::pending::NOMINATED_PODS_ANNOTATION as NOMINATED_PODS;

    fn meta(name: &str, ns: Option<&str>, uid: &str, rv: &str) -> ObjectMeta {
        ObjectMeta { name: Some(name.into()), namespace: ns.map(str::to_string), uid: Some(uid.into()), resource_version: Some(rv.into()), ..Default::default() }
    }

    fn pod(name: &str, node: Option<&str>, unschedulable: bool) -> Pod {
        let conditions = unschedulable.then(|| vec![PodCondition { type_: "PodScheduled".into(), status: "False".into(), reason: Some("Unschedulable".into()), ..Default::default() }]);
        Pod {
            metadata: meta(name, Some("default"), &format!("uid-{name}"), "1"),
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements { requests: Some([("cpu".to_string(), Quantity("500m".into()))].into()), ..Default::default() }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus { phase: Some("Pending".into()), conditions, ..Default::default() }),
        }
    }

    fn node(name: &str, provider_id: &str, taints: &[&str], labels: &[(&str, &str)]) -> Node {
        let mut md = meta(name, None, &format!("uid-{name}"), "1");
        md.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        Node {
            metadata: md,
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.into()),
                taints: Some(taints.iter().map(|k| Taint { key: k.to_string(), effect: "NoExecute".into(), ..Default::default() }).collect()),
                ..Default::default()
            }),
            status: Some(NodeStatus { allocatable: Some([("cpu".to_string(), Quantity("2".into())), ("pods".to_string(), Quantity("29".into()))].into()), ..Default::default() }),
        }
    }

    fn claim(name: &str, types: &[&str], provider_id: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::new(
            name,
            NodeClaimSpec {
                requirements: vec![
                    NodeSelectorRequirementWithMinValues { key: keys::INSTANCE_TYPE.into(), operator: "In".into(), values: types.iter().map(|t| t.to_string()).collect(), min_values: None },
                    NodeSelectorRequirementWithMinValues { key: keys::ZONE.into(), operator: "In".into(), values: vec!["us-east-1a".into()], min_values: None },
                ],
                node_class_ref: NodeClassReference { group: "karpenter.k8s.aws".into(), kind: "EC2NodeClass".into(), name: "default".into() },
                ..Default::default()
            },
        );
        c.metadata.uid = Some(format!("uid-{name}"));
        c.metadata.resource_version = Some("1".into());
        c.metadata.labels = Some([(keys::NODEPOOL.to_string(), "np".to_string())].into());
        c.status = provider_id.map(|p| NodeClaimStatus { provider_id: Some(p.into()), ..Default::default() });
        c
    }

    fn synced_state() -> ClusterState {
        let mut s = ClusterState::default();
        macro_rules! list {
            ($($t:ty),*) => {$( s.init::<$t>(); s.init_done::<$t>(); )*};
        }
        list!(
            Pod,
            Node,
            NodePool,
            NodeClaim,
            EC2NodeClass,
            PersistentVolumeClaim,
            PersistentVolume,
            StorageClass,
            CSINode,
            DaemonSet,
            Namespace,
            Service,
            ReplicationController,
            ReplicaSet,
            StatefulSet
        );
        s
    }

    #[test]
    fn unsynced_until_every_kind_has_listed_and_again_during_a_relist() {
        let mut s = ClusterState::default();
        assert!(!s.synced());
        for k in Kind::ALL.iter().skip(1) {
            assert!(s.unsynced().contains(k));
        }
        s = synced_state();
        assert!(s.synced());
        s.apply(pod("a", None, true));
        s.apply(pod("b", None, true));
        // A re-list (API server restart): the kind is unsynced, the old objects stay visible, and objects
        // missing from the new list are gone once it completes.
        s.init::<Pod>();
        assert!(!s.synced());
        assert_eq!(s.unsynced(), vec![Kind::Pod]);
        assert_eq!(s.pods.len(), 2);
        s.init_apply(pod("b", None, true));
        s.init_done::<Pod>();
        assert!(s.synced());
        assert_eq!(s.pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect::<Vec<_>>(), vec!["b"]);
    }

    #[test]
    fn a_late_event_never_undoes_a_newer_write() {
        // resourceVersions are opaque: none of these parse as numbers, and their text order is not the
        // order of the changes ("zz" comes before "aa" here).
        let with = |rv: &str, pid: Option<&str>| {
            let mut c = claim("c", &["m5.large"], pid);
            c.metadata.resource_version = Some(rv.into());
            c
        };
        let mut s = synced_state();
        s.observe(with("zz", None));
        // Our own write's answer: seen at once.
        s.apply(with("mm", Some("aws:///us-east-1a/i-1")));
        assert!(s.nodeclaim("c").unwrap().status.is_some());
        // The watch is behind: an event it delivers before our write's version is older.
        s.observe(with("qq", None));
        assert!(s.nodeclaim("c").unwrap().status.is_some(), "the older event was ignored");
        // The watch delivers our write, then a newer change by someone else.
        s.observe(with("mm", Some("aws:///us-east-1a/i-1")));
        s.observe(with("aa", None));
        assert_eq!(s.nodeclaim("c").unwrap().metadata.resource_version.as_deref(), Some("aa"), "after our write, the watch order decides");
        assert!(s.nodeclaim("c").unwrap().status.is_none());
        // The watch delivered our write (and a newer version) before the answer was recorded: the
        // answer is stale and dropped, and later events are not held back by it.
        s.observe(with("k1", Some("aws:///us-east-1a/i-2")));
        s.observe(with("k2", None));
        s.apply(with("k1", Some("aws:///us-east-1a/i-2")));
        assert_eq!(s.nodeclaim("c").unwrap().metadata.resource_version.as_deref(), Some("k2"));
        s.observe(with("k3", None));
        assert_eq!(s.nodeclaim("c").unwrap().metadata.resource_version.as_deref(), Some("k3"));
        // A new object of the same name (different uid) always replaces, even over a pending write.
        s.apply(with("p1", Some("aws:///us-east-1a/i-3")));
        let mut other = claim("c", &["m5.large"], None);
        other.metadata.uid = Some("uid-other".into());
        other.metadata.resource_version = Some("b".into());
        s.observe(other.clone());
        assert_eq!(s.nodeclaim("c").unwrap().metadata.uid.as_deref(), Some("uid-other"));
        // A delete of the previous incarnation leaves the new one.
        s.delete(&claim("c", &["m5.large"], None));
        assert!(s.nodeclaim("c").is_some());
        s.delete(&other);
        assert!(s.nodeclaim("c").is_none());
    }

    #[test]
    fn a_relist_clears_pending_writes() {
        let mut s = synced_state();
        let mut mine = claim("c", &["m5.large"], Some("aws:///us-east-1a/i-1"));
        mine.metadata.resource_version = Some("x-2".into());
        s.apply(mine);
        s.init::<NodeClaim>();
        let mut listed = claim("c", &["m5.large"], None);
        listed.metadata.resource_version = Some("x-1".into());
        s.init_apply(listed);
        s.init_done::<NodeClaim>();
        assert!(s.nodeclaim("c").unwrap().status.is_none(), "the list replaces the kind");
        let mut next = claim("c", &["m5.large"], None);
        next.metadata.resource_version = Some("x-3".into());
        s.observe(next);
        assert_eq!(s.nodeclaim("c").unwrap().metadata.resource_version.as_deref(), Some("x-3"), "nothing waits for the write any more");
    }

    #[test]
    fn only_pods_kube_scheduler_found_unschedulable_are_provisionable() {
        let mut s = synced_state();
        s.apply(pod("waiting", None, true));
        s.apply(pod("untried", None, false));
        s.apply(pod("bound", Some("n1"), false));
        let mut ds = pod("ds", None, true);
        ds.metadata.owner_references = Some(vec![OwnerReference { kind: "DaemonSet".into(), name: "d".into(), controller: Some(true), ..Default::default() }]);
        s.apply(ds);
        let mut deleting = pod("deleting", None, true);
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        s.apply(deleting);
        let mut done = pod("done", Some("n1"), false);
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        s.apply(done);
        let names: Vec<String> = s.provisionable_pods().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, vec!["waiting"]);
        let planned: Vec<String> = s.planning_objects(stowage_input::catalog::default_catalog()).pods.iter().map(|p| p.obj.metadata.name.clone().unwrap()).collect();
        assert_eq!(planned, vec!["bound", "ds", "waiting"], "bound pods count, and pending DaemonSet pods (what will run on their nodes); untried, terminal and terminating pods do not");
        // A pod an in-flight NodeClaim names is planned before kube-scheduler judged it (the shared rule,
        // stowage_input::pending).
        let mut c = claim("c9", &["m5.large"], None);
        c.metadata.annotations = Some([(NOMINATED_PODS.to_string(), "uid-untried".to_string())].into());
        s.apply(c);
        let planned: Vec<String> = s.planning_objects(stowage_input::catalog::default_catalog()).pods.iter().map(|p| p.obj.metadata.name.clone().unwrap()).collect();
        assert_eq!(planned, vec!["bound", "ds", "untried", "waiting"]);
    }

    /// The cluster-default topology spread in the controller's snapshot: the selector comes from the
    /// watched Services and the pod's ReplicaSet, and the weights' setting decides what applies.
    #[test]
    fn the_snapshot_applies_the_cluster_default_spread_from_watched_services_and_owners() {
        use k8s_openapi::api::apps::v1::ReplicaSetSpec;
        use k8s_openapi::api::core::v1::ServiceSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        use stowage_core::semantics::spread_defaults::{Action, DefaultConstraint};
        let mut s = synced_state();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
        let mut svc = Service { metadata: meta("web", Some("default"), "uid-svc", "1"), ..Default::default() };
        svc.spec = Some(ServiceSpec { selector: Some(labels(&[("app", "web")])), ..Default::default() });
        s.apply(svc);
        let mut rs = ReplicaSet { metadata: meta("web-abc", Some("default"), "uid-rs", "1"), ..Default::default() };
        rs.spec = Some(ReplicaSetSpec { selector: LabelSelector { match_labels: Some(labels(&[("app", "web"), ("pod-template-hash", "abc")])), ..Default::default() }, ..Default::default() });
        s.apply(rs);
        let mut p = pod("web-abc-1", None, true);
        p.metadata.labels = Some(labels(&[("app", "web"), ("pod-template-hash", "abc")]));
        p.metadata.owner_references =
            Some(vec![OwnerReference { api_version: "apps/v1".into(), kind: "ReplicaSet".into(), name: "web-abc".into(), uid: "uid-rs".into(), controller: Some(true), ..Default::default() }]);
        s.apply(p);
        let mut lonely = pod("lonely", None, true);
        lonely.metadata.labels = Some(labels(&[("app", "other")]));
        s.apply(lonely);
        let cat = stowage_input::catalog::default_catalog();
        let zone = DefaultConstraint {
            max_skew: 1,
            topology_key: keys::ZONE.into(),
            when_unsatisfiable: Action::DoNotSchedule,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
            label_selector: None,
        };
        let list = SpreadDefaults::list(vec![zone]);
        let snap = s.snapshot_under(cat, &list).unwrap();
        assert_eq!(snap.cluster.spread_defaults, list);
        let web = snap.cluster.pods.iter().find(|p| p.name == "web-abc-1").unwrap();
        assert_eq!(web.spread.len(), 1, "{:?}", web.spread);
        assert!(web.spread[0].defaulted && web.spread[0].key == keys::ZONE);
        let sel = web.spread[0].selector.as_ref().unwrap();
        assert_eq!(sel.requirements.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), vec!["app", "pod-template-hash"]);
        assert!(snap.cluster.pods.iter().find(|p| p.name == "lonely").unwrap().spread.is_empty(), "nothing selects it");
        // kube-scheduler's System defaults never filter: no constraint is kept.
        let system = s.snapshot(cat).unwrap();
        assert!(system.cluster.pods.iter().all(|p| p.spread.is_empty()));
        // A ReplicaSet missing from the watch: only the Service's selector.
        s.delete(&ReplicaSet { metadata: meta("web-abc", Some("default"), "uid-rs", "2"), ..Default::default() });
        let snap = s.snapshot_under(cat, &list).unwrap();
        let web = snap.cluster.pods.iter().find(|p| p.name == "web-abc-1").unwrap();
        assert_eq!(web.spread[0].selector.as_ref().unwrap().requirements.len(), 1);
    }

    #[test]
    fn managed_nodes_are_planned_as_they_will_be_after_registration() {
        let mut s = synced_state();
        s.apply(claim("c1", &["m5.large"], Some("aws:///us-east-1a/i-1")));
        s.apply(node("n1", "aws:///us-east-1a/i-1", &[well_known::KARPENTER_UNREGISTERED, "dedicated"], &[]));
        s.apply(node("n2", "aws:///us-east-1a/i-2", &[well_known::KARPENTER_UNREGISTERED], &[]));
        let o = s.planning_objects(stowage_input::catalog::default_catalog());
        let taints = |name: &str| -> Vec<String> {
            let n = o.nodes.iter().find(|n| n.obj.metadata.name.as_deref() == Some(name)).unwrap();
            n.obj.spec.as_ref().unwrap().taints.iter().flatten().map(|t| t.key.clone()).collect()
        };
        assert_eq!(taints("n1"), vec!["dedicated"], "the unregistered taint goes at registration");
        assert_eq!(taints("n2"), vec![well_known::KARPENTER_UNREGISTERED], "a node no NodeClaim owns is left as it is");
        // A NodeClaim being deleted: its node is no target.
        let mut c = claim("c1", &["m5.large"], Some("aws:///us-east-1a/i-1"));
        c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        c.metadata.resource_version = Some("2".into());
        s.apply(c);
        let snap = s.snapshot(stowage_input::catalog::default_catalog()).unwrap();
        assert!(snap.cluster.node("n1").unwrap().deleting);
    }

    #[test]
    fn unlaunched_nodeclaims_count_as_their_smallest_allowed_type() {
        let mut s = synced_state();
        s.apply(claim("c1", &["m5.xlarge", "m5.large", "c5.large"], None));
        let o = s.planning_objects(stowage_input::catalog::default_catalog());
        let c = &o.nodeclaims[0].obj;
        let status = c.status.as_ref().unwrap();
        let alloc = quantity::resources(status.allocatable.as_ref().unwrap()).unwrap();
        let cat = stowage_input::catalog::default_catalog();
        let smallest = min_each(&cat.get("m5.large").unwrap().allocatable(), &cat.get("c5.large").unwrap().allocatable());
        assert_eq!(alloc, smallest);
        let labels = c.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.get("kubernetes.io/arch").map(String::as_str), Some("amd64"), "labels every allowed type shares");
        assert!(!labels.contains_key("karpenter.k8s.aws/instance-category"), "m and c differ: no category label");
        // It is capacity in flight for the planner.
        let snap = s.snapshot(cat).unwrap();
        let n = snap.cluster.node("c1").unwrap();
        assert!(n.in_flight);
        assert_eq!(n.nodepool.as_deref(), Some("np"));
        assert_eq!(n.label(keys::ZONE), Some("us-east-1a"));
    }

    #[test]
    fn an_invalid_pod_is_left_out_and_reported() {
        let mut s = synced_state();
        s.apply(pod("good", None, true));
        let mut bad = pod("bad", None, true);
        bad.spec.as_mut().unwrap().containers[0].resources.as_mut().unwrap().requests = Some([("cpu".to_string(), Quantity("lots".into()))].into());
        s.apply(bad);
        let snap = s.snapshot(stowage_input::catalog::default_catalog()).unwrap();
        assert_eq!(snap.cluster.pods.len(), 1);
        assert_eq!(snap.cluster.pods[0].name, "good");
        assert_eq!(snap.excluded.len(), 1);
        assert_eq!(snap.excluded[0].object, "Pod default/bad");
    }

    #[test]
    fn a_nodes_csinode_gives_it_attach_limits() {
        let mut s = synced_state();
        s.apply(node("n1", "aws:///us-east-1a/i-1", &[], &[("kubernetes.io/hostname", "n1")]));
        let csinode: CSINode = serde_json::from_value(serde_json::json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": "n1", "uid": "uid-csinode-n1", "resourceVersion": "1"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}}]}
        }))
        .unwrap();
        s.apply(csinode);
        let snap = s.snapshot(stowage_input::catalog::default_catalog()).unwrap();
        assert_eq!(snap.cluster.node("n1").unwrap().attach_limits.get("ebs.csi.aws.com"), Some(&25));
        // Until the CSINode is listed, the controller does not plan (a watched kind like the others).
        let mut fresh = ClusterState::default();
        assert!(fresh.unsynced().contains(&Kind::CSINode));
        fresh.init::<CSINode>();
        fresh.init_done::<CSINode>();
        assert!(!fresh.unsynced().contains(&Kind::CSINode));
    }
}
