//! The provisioning decision, once for the controller and the simulator: from the cluster when a
//! batch closes to the NodeClaims to create, where each pending pod is meant to go, and which pods stay
//! pending and why.
//!
//! ```text
//!  Input { cluster (pods, nodes, NodeClaims in flight), objects (NodePool templates, NodeClaims),
//!          catalog (refused offerings unavailable), weights }
//!     │ pin: a pending pod a NodeClaim still in flight names in its nominated-pods annotation is
//!     │      planned there (bound to the in-flight node), not planned again
//!     ▼
//!  Planner::plan (stowage's MILP or greedy; a test's) ──► Plan
//!     ▼
//!  Decision { claims: one NodeClaim per new node (requirements pin the plan's offering, fallbacks
//!             after it), nominations (pod → Node / NodeClaim in flight / new claim k),
//!             unschedulable (pod, reason) }
//! ```
//!
//! Each new node of the plan becomes one NodeClaim (`karpenter.sh/v1`, `generateName: <nodepool>-`;
//! the executor names it: the API server, or the simulator's deterministic `<pool>-<5 chars>`) whose
//! requirements pin the chosen offering: `node.kubernetes.io/instance-type In [chosen, fallbacks...]`,
//! the zone, the capacity type and the values the plan chose for keys the NodePool leaves open (for
//! example `capacity-spread In ["1"]`), followed by the NodePool's other requirements. Fallback types
//! (for capacity errors) are ranked by price and admitted only if a node of that type would take the
//! same pods under every constraint: same zone and capacity type, the same values on every label key a
//! constraint of the batch reads, room for the pods plus the DaemonSets that would run there, every
//! pod's static filters, and no more capacity in a NodePool-limited resource than the chosen type. The
//! cloud is asked for them in that order ([`crate::launch::offerings_for`]).
//!
//! **Nominations are persisted** on the NodeClaim, in the annotation [`NOMINATED_PODS_ANNOTATION`]
//! (the pods' uids, comma-separated, in bind order), written when the NodeClaim is created. While the
//! NodeClaim is in flight (not registered) and such a pod is still pending, the pod is planned onto
//! that NodeClaim's node and nowhere else: a restarted controller, which rebuilds the nominations from
//! the NodeClaims it lists, does not plan the same pods twice. Once the node registers, kube-scheduler
//! decides, and a pod still pending is planned like any other.
//!
//! Invariants: pure apart from the MILP's time budget (same input, same decision: every order is
//! explicit); the planner counts existing nodes and NodeClaims in flight (the cluster holds them), so
//! NodePool limits include in-flight capacity.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::cloud::OfferingRef;
use super::launch;
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::{Labels, keys};
use stowage_core::domain::pod::PodId;
use stowage_core::domain::resources::Resources;
use stowage_core::plan::{NewNode, Plan};
use stowage_core::semantics::{daemonsets, nodepool};
use stowage_core::solve::problem::{Config, ProblemError, relevant_keys, static_check};
use stowage_core::weights::Weights;
use stowage_input::Objects;
use stowage_input::api::{self, NodeClaim, NodeClaimSpec, NodeSelectorRequirementWithMinValues};
use stowage_input::quantity;

/// Annotation naming the batch a NodeClaim was planned in.
pub const BATCH_ANNOTATION: &str = "stowage.dev/batch";
/// Annotation listing the uids of the pods a NodeClaim was created for (module doc); the batch's pod
/// selection reads it too (`stowage_input::pending`).
pub const NOMINATED_PODS_ANNOTATION: &str = stowage_input::pending::NOMINATED_PODS_ANNOTATION;
/// Karpenter's annotation on a NodeClaim whose minValues were relaxed (`minValuesPolicy: BestEffort`).
pub const MIN_VALUES_RELAXED_ANNOTATION: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
/// Finalizer on Nodes and NodeClaims the controller terminates.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Why a planner made no plan for a batch. The batch's pods stay pending until something changes.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// stowage's planners could not build the planning problem: a NodePool's node class is missing,
    /// or the weights make leaving a pod pending cheaper than a node. Fix the named object or the
    /// weights.
    #[error(transparent)]
    Problem(#[from] ProblemError),
    /// Another planner's reason (a test's planner, say).
    #[error("{0}")]
    Other(String),
}

/// Whatever decides which nodes to launch: stowage's planners ([`stowage_core::solve::Planner`]) or a
/// test's (any closure with the same signature).
pub trait Planner {
    /// Plans one batch: every pending pod of `cluster` appears in the plan, placed or unschedulable.
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError>;

    /// HiGHS threads for other programs solved beside this planner's (HiGHS's thread pool is one per
    /// process, fixed by its first solve).
    fn highs_threads(&self) -> u32 {
        1
    }
}

impl<F> Planner for F
where
    F: FnMut(&Cluster, &Catalog, &Weights) -> Result<Plan, PlanError>,
{
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError> {
        self(cluster, catalog, weights)
    }
}

impl Planner for stowage_core::solve::Planner {
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError> {
        Ok(stowage_core::solve::plan_cluster(cluster, catalog, weights, *self)?)
    }

    fn highs_threads(&self) -> u32 {
        self.threads.max(1)
    }
}

/// Why a batch has no decision.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The planner made no plan; the batch is retried on the next change.
    #[error("cannot plan the batch: {0}")]
    Plan(#[from] PlanError),
    /// The plan names something the cluster or the catalog does not have (a planner's bug): nothing is
    /// launched for it.
    #[error("the plan is not for this cluster: {0}")]
    InvalidPlan(String),
}

/// A pod, as events and logs name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where the decision puts a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nominated {
    /// A registered node.
    Node(String),
    /// A NodeClaim in flight (created by an earlier batch), by its node's name (the NodeClaim's name
    /// until it registers).
    InFlight(String),
    /// A NodeClaim of this decision (index into [`Decision::claims`]).
    New(usize),
}

/// A NodeClaim to create, with the pods the plan put on it.
#[derive(Clone, Debug)]
pub struct PlannedClaim {
    /// Unnamed (`generateName: <nodepool>-`); see [`PlannedClaim::named`].
    pub nodeclaim: NodeClaim,
    /// The plan's name for the node (`stowage-<k>`).
    pub plan_node: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    /// What the cloud is asked for, in order: the plan's offering, then the fallbacks.
    pub offerings: Vec<OfferingRef>,
    pub pods: Vec<PodRef>,
}

impl PlannedClaim {
    /// The NodeClaim under a name chosen by the executor (the simulator's; the API server generates
    /// the controller's).
    pub fn named(&self, name: &str) -> NodeClaim {
        let mut c = self.nodeclaim.clone();
        c.metadata.name = Some(name.to_string());
        c.metadata.generate_name = None;
        c
    }

    /// Whether the NodeClaim's minValues were relaxed (`MIN_VALUES_RELAXED_ANNOTATION`).
    pub fn min_values_relaxed(&self) -> bool {
        self.nodeclaim.metadata.annotations.as_ref().and_then(|a| a.get(MIN_VALUES_RELAXED_ANNOTATION)).is_some_and(|v| v == "true")
    }
}

/// What a batch decided.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The plan as `stowage plan` writes it (solver report, placements, costs).
    pub plan: Plan,
    pub claims: Vec<PlannedClaim>,
    /// Every pod with a place, in the plan's bind order after the pinned ones.
    pub nominations: Vec<(PodRef, Nominated)>,
    /// Pods left pending, with the planner's reason.
    pub unschedulable: Vec<(PodRef, String)>,
    /// Pods planned onto a NodeClaim in flight because it names them (not given to the planner), with
    /// that NodeClaim's node: the plan is of [`with_pins`] of the input cluster.
    pub pins: Vec<(PodId, String)>,
}

/// The state a batch is decided on.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    /// The cluster, with NodeClaims in flight as nodes (`stowage_input::build` of `objects`).
    pub cluster: &'a Cluster,
    /// The objects `cluster` was built from: NodePool templates and owners, NodeClaims' nominations.
    pub objects: &'a Objects,
    /// The catalog with the offerings the cloud refused recently unavailable.
    pub catalog: &'a Catalog,
    pub weights: &'a Weights,
    /// Most instance types one NodeClaim allows (the chosen one and its fallbacks).
    pub max_instance_types: usize,
    /// Written into [`BATCH_ANNOTATION`].
    pub batch: &'a str,
}

/// The uids a NodeClaim's [`NOMINATED_PODS_ANNOTATION`] names.
pub fn nominated_pods(claim: &NodeClaim) -> Vec<String> {
    let Some(v) = claim.metadata.annotations.as_ref().and_then(|a| a.get(NOMINATED_PODS_ANNOTATION)) else { return Vec::new() };
    v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Persisted nominations that still hold: (pending pod, the in-flight node of the NodeClaim naming it).
/// A NodeClaim being deleted, or registered (its node is no longer in flight), holds none.
pub fn pins(cluster: &Cluster, nodeclaims: &[stowage_input::objects::Obj<NodeClaim>]) -> Vec<(PodId, String)> {
    let by_uid: BTreeMap<&str, PodId> = cluster.pods.iter().enumerate().map(|(i, p)| (p.uid.as_str(), PodId(i as u32))).collect();
    let in_flight: BTreeSet<&str> = cluster.nodes.iter().filter(|n| n.in_flight).map(|n| n.name.as_str()).collect();
    let pending: BTreeSet<PodId> = cluster.pending().into_iter().collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for c in nodeclaims.iter().map(|o| &o.obj).filter(|c| c.metadata.deletion_timestamp.is_none()) {
        let node = c.status.as_ref().and_then(|s| s.node_name.clone()).or_else(|| c.metadata.name.clone()).unwrap_or_default();
        if !in_flight.contains(node.as_str()) {
            continue;
        }
        for uid in nominated_pods(c) {
            if let Some(&id) = by_uid.get(uid.as_str())
                && pending.contains(&id)
                && seen.insert(id)
            {
                out.push((id, node.clone()));
            }
        }
    }
    out
}

fn pod_ref(cluster: &Cluster, id: PodId) -> PodRef {
    let p = cluster.pod(id);
    PodRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() }
}

/// Decides a batch (module doc).
/// The catalog with each capacity reservation's count lowered by the NodeClaims planned into it that
/// have no instance yet (an earlier batch's, still launching): the snapshot leaves such NodeClaims out
/// (their size is not known), and the cloud's count does not know of them either. None: no change.
pub fn unlaunched_reservations(catalog: &Catalog, nodeclaims: &[stowage_input::objects::Obj<NodeClaim>]) -> Option<Catalog> {
    let mut planned: BTreeMap<String, u32> = BTreeMap::new();
    for c in nodeclaims.iter().map(|o| &o.obj) {
        let launched = c.status.as_ref().is_some_and(|s| s.provider_id.as_deref().is_some_and(|p| !p.is_empty()));
        if launched || c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(id) = launch::claim_labels(c).remove(keys::CAPACITY_RESERVATION_ID) {
            *planned.entry(id).or_default() += 1;
        }
    }
    if planned.is_empty() {
        return None;
    }
    let mut out = catalog.clone();
    out.take_reservations(|id| planned.get(id).copied().unwrap_or(0));
    Some(out)
}

pub fn decide(input: &Input, planner: &mut dyn Planner) -> Result<Decision, ProvisionError> {
    let reserved = unlaunched_reservations(input.catalog, &input.objects.nodeclaims);
    let input = &Input { catalog: reserved.as_ref().unwrap_or(input.catalog), ..*input };
    let pins = pins(input.cluster, &input.objects.nodeclaims);
    let pinned_cluster;
    let cluster = if pins.is_empty() {
        input.cluster
    } else {
        pinned_cluster = with_pins(input.cluster, &pins);
        &pinned_cluster
    };
    let plan = planner.plan(cluster, input.catalog, input.weights)?;
    let by_key = cluster.pods_by_key();
    let find = |key: &str| by_key.get(key).copied().ok_or_else(|| ProvisionError::InvalidPlan(format!("pod {key} is not in the cluster")));
    let relevant = relevant_keys(cluster, &cluster.pending());
    let mut views: BTreeMap<String, Catalog> = BTreeMap::new();
    let mut claims = Vec::new();
    // Each new node's pods in placement order, gathered in one pass (a scan of every placement per new
    // node is quadratic in large batches).
    let mut on_node: BTreeMap<&str, Vec<PodId>> = BTreeMap::new();
    for p in &plan.placements {
        on_node.entry(p.node.as_str()).or_default().push(find(&p.pod)?);
    }
    for n in &plan.new_nodes {
        let pods = on_node.remove(n.name.as_str()).unwrap_or_default();
        let pool = cluster.nodepool(&n.node_pool).ok_or_else(|| ProvisionError::InvalidPlan(format!("NodePool {} is not in the cluster", n.node_pool)))?;
        let view = views.entry(pool.node_class.clone()).or_insert_with(|| match cluster.nodeclass(&pool.node_class) {
            Some(nc) => stowage_core::catalog::for_nodeclass(input.catalog, nc),
            None => input.catalog.clone(),
        });
        let pool_obj = input.objects.nodepools.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(pool.name.as_str()));
        let nodeclass_obj = input.objects.nodeclasses.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(pool.node_class.as_str()));
        let node = NodeSpec { cluster, relevant: &relevant, view, pool_obj, nodeclass_obj, max_types: input.max_instance_types, batch: input.batch };
        claims.push(node.claim(n, &pods)?);
    }
    let new_index: BTreeMap<&str, usize> = plan.new_nodes.iter().enumerate().map(|(k, n)| (n.name.as_str(), k)).collect();
    let mut nominations: Vec<(PodRef, Nominated)> = pins.iter().map(|(id, node)| (pod_ref(cluster, *id), Nominated::InFlight(node.clone()))).collect();
    for p in &plan.placements {
        let id = find(&p.pod)?;
        let target = match new_index.get(p.node.as_str()) {
            Some(&k) => Nominated::New(k),
            None => match cluster.nodes.iter().find(|x| x.name == p.node) {
                Some(x) if x.in_flight => Nominated::InFlight(x.name.clone()),
                Some(x) => Nominated::Node(x.name.clone()),
                None => return Err(ProvisionError::InvalidPlan(format!("node {} is neither new nor in the cluster", p.node))),
            },
        };
        nominations.push((pod_ref(cluster, id), target));
    }
    let unschedulable = plan.unschedulable.iter().map(|u| Ok((pod_ref(cluster, find(&u.pod)?), format!("{}: {}", u.plugin, u.reason)))).collect::<Result<Vec<_>, ProvisionError>>()?;
    Ok(Decision { plan, claims, nominations, unschedulable, pins })
}

/// The cluster with pinned pods bound (`spec.nodeName`) to their NodeClaim's node: what the planner
/// was given.
pub fn with_pins(cluster: &Cluster, pins: &[(PodId, String)]) -> Cluster {
    let mut c = cluster.clone();
    for (id, node) in pins {
        c.pods[id.ix()].node_name = Some(node.clone());
    }
    c
}

/// What one new node's NodeClaim is built from.
struct NodeSpec<'a> {
    cluster: &'a Cluster,
    relevant: &'a BTreeSet<String>,
    /// The catalog as the NodePool's node class sees it.
    view: &'a Catalog,
    pool_obj: Option<&'a api::NodePool>,
    /// The EC2NodeClass it launches with (its hash is stamped on the NodeClaim).
    nodeclass_obj: Option<&'a api::EC2NodeClass>,
    max_types: usize,
    batch: &'a str,
}

impl NodeSpec<'_> {
    /// The plan's new node `n` as the planner's configuration (labels without the hostname).
    fn config(&self, n: &NewNode) -> Result<Config, ProvisionError> {
        let cluster = self.cluster;
        let pool_ix = cluster.nodepools.iter().position(|p| p.name == n.node_pool).ok_or_else(|| ProvisionError::InvalidPlan(format!("NodePool {} is not in the cluster", n.node_pool)))?;
        let pool = &cluster.nodepools[pool_ix];
        let t = self.view.get(&n.instance_type).ok_or_else(|| ProvisionError::InvalidPlan(format!("the plan launches {}, which the catalog does not have", n.instance_type)))?;
        let mut labels: Labels = n.labels.clone();
        labels.remove(keys::HOSTNAME);
        let offering = t.offerings.iter().find(|o| o.is_for(&labels));
        let (ds_overhead, dss) = daemonsets::overhead(&cluster.daemonsets, &labels, &pool.taints, None);
        Ok(Config {
            pool: pool_ix,
            instance_type: t.name.clone(),
            zone: n.zone.clone(),
            capacity_type: n.capacity_type.clone(),
            price: n.price_per_hour,
            synthetic: offering.is_some_and(|o| o.synthetic),
            cost: 0.0,
            labels,
            taints: pool.taints.clone(),
            capacity: t.capacity.clone(),
            allocatable: t.allocatable(),
            attach_limits: t.attach_limits.clone(),
            daemonsets: dss.iter().filter_map(|d| cluster.daemonsets.iter().position(|x| std::ptr::eq(x, *d))).collect(),
            ds_overhead,
            group: 0,
            reservation: None,
        })
    }

    /// The NodeClaim for the plan's new node `n` and its pods (bind order).
    fn claim(&self, n: &NewNode, pods: &[PodId]) -> Result<PlannedClaim, ProvisionError> {
        let cluster = self.cluster;
        let c = self.config(n)?;
        let pool = &cluster.nodepools[c.pool];
        let types = if n.launch_candidates.is_empty() { self.instance_types(&c, pods) } else { self.plan_types(&c, n) };
        let open = self.open_labels(&c);

        let mut pinned: BTreeSet<&str> = [keys::INSTANCE_TYPE, keys::ZONE, keys::CAPACITY_TYPE].into();
        pinned.extend(open.keys().map(String::as_str));
        let template = self.pool_obj.map(|o| &o.spec.template);
        let pool_reqs: &[NodeSelectorRequirementWithMinValues] = template.map(|t| t.spec.requirements.as_slice()).unwrap_or(&[]);
        // minValues as the plan keeps them: relaxed ones (BestEffort) lowered to what the candidates keep.
        let relaxed = |key: &str, m: Option<i64>| m.map(|m| n.min_values_relaxed.iter().find(|r| r.key == key).map_or(m, |r| m.min(r.kept as i64)));
        let type_min_values = relaxed(keys::INSTANCE_TYPE, pool_reqs.iter().filter(|r| r.key == keys::INSTANCE_TYPE).find_map(|r| r.min_values)).filter(|&m| m >= 1 && (m as usize) <= types.len());
        let in_req = |key: &str, values: Vec<String>, min_values: Option<i64>| NodeSelectorRequirementWithMinValues { key: key.into(), operator: "In".into(), values, min_values };
        let mut requirements =
            vec![in_req(keys::INSTANCE_TYPE, types.clone(), type_min_values), in_req(keys::ZONE, vec![c.zone.clone()], None), in_req(keys::CAPACITY_TYPE, vec![c.capacity_type.clone()], None)];
        for (key, v) in &open {
            requirements.push(in_req(key, vec![v.clone()], None));
        }
        requirements.extend(pool_reqs.iter().filter(|r| !pinned.contains(r.key.as_str())).map(|r| NodeSelectorRequirementWithMinValues { min_values: relaxed(&r.key, r.min_values), ..r.clone() }));

        let mut labels: Labels = pool.labels.clone();
        labels.insert(keys::NODEPOOL.into(), pool.name.clone());
        labels.insert(keys::NODECLASS.into(), pool.node_class.clone());
        labels.insert(keys::ZONE.into(), c.zone.clone());
        labels.insert(keys::CAPACITY_TYPE.into(), c.capacity_type.clone());
        if let Some(r) = &self.view.region {
            labels.insert(keys::REGION.into(), r.clone());
        }
        if let [only] = types.as_slice() {
            labels.insert(keys::INSTANCE_TYPE.into(), only.clone());
        }
        labels.extend(open.clone());

        let mut requests = c.ds_overhead.clone();
        for &id in pods {
            requests.add(&cluster.pod(id).requests);
        }
        let pod_refs: Vec<PodRef> = pods.iter().map(|&id| pod_ref(cluster, id)).collect();
        let mut nodeclaim = self.nodeclaim(pool, labels, requirements, &requests, &pod_refs);
        if !n.min_values_relaxed.is_empty() {
            nodeclaim.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(MIN_VALUES_RELAXED_ANNOTATION.into(), "true".into());
        }
        let offerings = launch::offerings_for(&nodeclaim, self.view).map_err(|e| ProvisionError::InvalidPlan(e.to_string()))?;
        Ok(PlannedClaim {
            nodeclaim,
            plan_node: n.name.clone(),
            nodepool: pool.name.clone(),
            instance_type: c.instance_type.clone(),
            zone: c.zone.clone(),
            capacity_type: c.capacity_type.clone(),
            price: c.price,
            offerings,
            pods: pod_refs,
        })
    }

    /// Keys the plan chose a value for that neither the type, the offering nor the template fixes.
    fn open_labels(&self, c: &Config) -> Labels {
        let pool = &self.cluster.nodepools[c.pool];
        let base = self.view.get(&c.instance_type).map(|t| nodepool::base_labels(pool, t, &c.zone, &c.capacity_type, self.view.region.as_deref())).unwrap_or_default();
        c.labels.iter().filter(|(k, _)| !base.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    fn nodeclaim(&self, pool: &stowage_core::domain::NodePool, labels: Labels, requirements: Vec<NodeSelectorRequirementWithMinValues>, requests: &Resources, pods: &[PodRef]) -> NodeClaim {
        let owner = self.pool_obj.and_then(|o| {
            Some(OwnerReference {
                api_version: "karpenter.sh/v1".into(),
                kind: "NodePool".into(),
                name: o.metadata.name.clone()?,
                uid: o.metadata.uid.clone()?,
                block_owner_deletion: Some(true),
                controller: None,
            })
        });
        let template = self.pool_obj.map(|o| &o.spec.template);
        let tspec = template.map(|t| &t.spec);
        let spec = NodeClaimSpec {
            taints: tspec.and_then(|s| s.taints.clone()),
            startup_taints: tspec.and_then(|s| s.startup_taints.clone()),
            requirements,
            resources: Some(api::nodeclaim::ResourceRequirements { requests: Some(quantities(requests)) }),
            node_class_ref: tspec.map(|s| s.node_class_ref.clone()).unwrap_or_else(|| api::NodeClassReference {
                group: "karpenter.k8s.aws".into(),
                kind: "EC2NodeClass".into(),
                name: pool.node_class.clone(),
            }),
            expire_after: Some(tspec.and_then(|s| s.expire_after.clone()).unwrap_or_else(|| "720h".into())),
            termination_grace_period: tspec.and_then(|s| s.termination_grace_period.clone()),
        };
        let mut annotations: BTreeMap<String, String> = template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.clone()).unwrap_or_default();
        annotations.insert(BATCH_ANNOTATION.into(), self.batch.into());
        annotations.insert(NOMINATED_PODS_ANNOTATION.into(), pods.iter().map(|p| p.uid.as_str()).collect::<Vec<_>>().join(","));
        if let Some(o) = self.pool_obj {
            crate::drift::stamp(o, &mut annotations);
        }
        if let Some(nc) = self.nodeclass_obj {
            crate::drift::stamp_nodeclass(nc, &mut annotations);
        }
        NodeClaim {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", pool.name)),
                labels: Some(labels),
                annotations: Some(annotations),
                finalizers: Some(vec![TERMINATION_FINALIZER.into()]),
                owner_references: owner.map(|o| vec![o]),
                ..Default::default()
            },
            spec,
            status: None,
        }
    }

    /// The plan's launch candidates (`NewNode::launch_candidates`), the chosen type first: at most
    /// `max_types`, unless the NodePool's minValues need more of them (the shortest cheapest-first prefix
    /// that keeps every minValues the plan did not relax).
    fn plan_types(&self, c: &Config, n: &NewNode) -> Vec<String> {
        let pool = &self.cluster.nodepools[c.pool];
        let mut order: Vec<&str> = vec![c.instance_type.as_str()];
        order.extend(n.launch_candidates.iter().map(String::as_str).filter(|t| *t != c.instance_type));
        // As for the fallbacks without a plan: no type larger than the chosen one in a resource the
        // NodePool limits, unless minValues needs it.
        let limited: Vec<String> = pool.limits.as_ref().map(|l| l.limited.clone()).unwrap_or_default();
        let within: Vec<&str> = order.iter().copied().filter(|t| self.view.get(t).is_some_and(|it| limited.iter().all(|r| it.capacity.get(r) <= c.capacity.get(r)))).collect();
        if let Some(need) = self.min_values_prefix(c, n, &within) {
            return within.into_iter().take(need).map(str::to_string).collect();
        }
        let need = self.min_values_prefix(c, n, &order).unwrap_or(order.len());
        order.into_iter().take(need).map(str::to_string).collect()
    }

    /// How many of `order` (cheapest first) the NodeClaim lists: at most `max_types`, or the shortest
    /// prefix that keeps every minValues of the NodePool the plan did not relax; None if `order` cannot.
    fn min_values_prefix(&self, c: &Config, n: &NewNode, order: &[&str]) -> Option<usize> {
        let pool = &self.cluster.nodepools[c.pool];
        // The value of `key` on a node of type `t`: the type's (or template's) label, else the node's.
        let value = |t: &str, key: &str| -> Option<String> {
            let it = self.view.get(t)?;
            nodepool::base_labels(pool, it, &c.zone, &c.capacity_type, self.view.region.as_deref()).get(key).or_else(|| n.labels.get(key)).cloned()
        };
        let mut need = self.max_types.min(order.len()).max(1);
        for r in &pool.requirements {
            let Some(m) = r.min_values else { continue };
            let m = n.min_values_relaxed.iter().find(|x| x.key == r.req.key).map_or(m, |x| m.min(x.kept));
            let mut seen = BTreeSet::new();
            let mut upto = None;
            for (i, t) in order.iter().enumerate() {
                seen.extend(value(t, &r.req.key));
                if seen.len() as u32 >= m {
                    upto = Some(i + 1);
                    break;
                }
            }
            need = need.max(upto?);
        }
        Some(need)
    }

    /// The chosen type, then the types that would take the same pods as well, cheapest first (ties by
    /// name), at most `max_types` in all.
    fn instance_types(&self, c: &Config, pods: &[PodId]) -> Vec<String> {
        let cluster = self.cluster;
        let pool = &cluster.nodepools[c.pool];
        let region = self.view.region.as_deref();
        let projection = |l: &Labels| -> Vec<(String, String)> { l.iter().filter(|(k, _)| self.relevant.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect() };
        let wanted = projection(&c.labels);
        let open = self.open_labels(c);
        let mut need = Resources::default();
        for &id in pods {
            need.add(&cluster.pod(id).requests);
        }
        let limited: Vec<String> = pool.limits.as_ref().map(|l| l.limited.clone()).unwrap_or_default();

        let mut others: Vec<(f64, String)> = Vec::new();
        for t in &self.view.types {
            if t.name == c.instance_type {
                continue;
            }
            let Some(offering) = t.offerings.iter().find(|o| o.available && o.is_for(&c.labels)) else { continue };
            let mut labels = nodepool::offering_labels(pool, t, offering, region);
            labels.extend(open.iter().map(|(k, v)| (k.clone(), v.clone())));
            if nodepool::violated(pool, &labels).is_some() || projection(&labels) != wanted {
                continue;
            }
            if limited.iter().any(|r| t.capacity.get(r) > c.capacity.get(r)) {
                continue;
            }
            let (ds_overhead, dss) = daemonsets::overhead(&cluster.daemonsets, &labels, &pool.taints, None);
            // The same DaemonSets as the chosen type: the plan counted their pods (ports, anti-affinity),
            // and the projection above no longer tells types apart by the keys only DaemonSets read.
            let same_daemonsets = dss.len() == c.daemonsets.len() && dss.iter().zip(&c.daemonsets).all(|(d, &i)| std::ptr::eq(*d, &cluster.daemonsets[i]));
            let alloc = t.allocatable();
            if !same_daemonsets || !need.plus(&ds_overhead).fits_in(&alloc) {
                continue;
            }
            let candidate = Config {
                pool: c.pool,
                instance_type: t.name.clone(),
                zone: c.zone.clone(),
                capacity_type: c.capacity_type.clone(),
                price: offering.price,
                synthetic: offering.synthetic,
                cost: c.cost,
                labels,
                taints: pool.taints.clone(),
                capacity: t.capacity.clone(),
                allocatable: alloc,
                attach_limits: t.attach_limits.clone(),
                daemonsets: dss.iter().filter_map(|d| cluster.daemonsets.iter().position(|x| std::ptr::eq(x, *d))).collect(),
                ds_overhead,
                group: c.group,
                reservation: c.reservation,
            };
            // The node's pods together within the type's attach limits (NodeVolumeLimits).
            let mut volumes: Vec<_> = pods.iter().flat_map(|&id| cluster.pod(id).volumes.attach.iter().cloned()).collect();
            volumes.sort();
            volumes.dedup();
            let attach_ok = stowage_core::semantics::volume_limits::fits(&candidate.attach_limits, &Default::default(), &volumes).is_ok();
            if attach_ok && pods.iter().all(|&id| static_check(cluster, cluster.pod(id), &candidate).is_ok()) {
                others.push((offering.price, t.name.clone()));
            }
        }
        others.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut out = vec![c.instance_type.clone()];
        out.extend(others.into_iter().map(|(_, n)| n).take(self.max_types.saturating_sub(1)));
        out
    }
}

/// Resources as Kubernetes quantities (zero entries omitted, except the four common ones).
pub fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter().map(|(n, v)| (n.to_string(), Quantity(quantity::format(n, v)))).collect()
}
