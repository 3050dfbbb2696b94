//! The planning problem built from a cluster snapshot, a catalog and cost weights: the batch of
//! pending pods grouped into equivalence classes, the existing nodes, and the candidate new-node
//! configurations (NodePool × instance type × zone × capacity type × values of open label keys).
//!
//! Candidate configurations are pruned without losing any choice that matters: within a group of
//! configurations that agree on every label any constraint of the batch reads (the *relevant keys*)
//! and on the DaemonSets they run, a type is dropped when another is no dearer and at least as large
//! in every resource the batch requests (and in every NodePool-limited resource).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use crate::catalog;
use crate::domain::Cluster;
use crate::domain::catalog::{Catalog, SPOT};
use crate::domain::labels::{Labels, NodeMatcher, NodeOp, keys};
use crate::domain::node::AttachLimits;
use crate::domain::pod::{Pod, PodId};
use crate::domain::resources::Resources;
use crate::domain::taints::Taint;
use crate::semantics::{Plugin, Reject, daemonsets, limits, node_affinity, nodepool, ports, queue, reservations, spread, taints, volume_limits, volumes};
use crate::weights::Weights;

/// A configuration's labels restricted to the relevant keys.
type Projection = Vec<(String, String)>;

/// Pods with the same scheduling signature.
#[derive(Clone, Debug)]
pub struct Class {
    pub pods: Vec<PodId>,
    /// The first pod of the class; every pod of the class behaves alike.
    pub rep: PodId,
    /// Configurations a node of which could take one pod of the class (static checks: taints, node
    /// affinity, volumes, resources, host ports, topology keys present).
    pub compatible: Vec<u32>,
    /// `compatible`, split by configuration group (group index, configurations in cost order).
    pub by_group: Vec<(usize, Vec<u32>)>,
    /// Why no configuration is compatible, per NodePool (for messages).
    pub rejections: BTreeMap<String, Reject>,
}

/// A candidate new node.
#[derive(Clone, Debug)]
pub struct Config {
    /// Index into `Cluster::nodepools`.
    pub pool: usize,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    pub synthetic: bool,
    /// Objective cost per hour (weights applied).
    pub cost: f64,
    /// Every label of the node except the hostname.
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    /// The instance type's allocatable (DaemonSet pods not subtracted).
    pub allocatable: Resources,
    /// The instance type's attach limits per CSI driver (`InstanceType::attach_limits`).
    pub attach_limits: AttachLimits,
    /// DaemonSets (indices into `Cluster::daemonsets`) that run on such a node.
    pub daemonsets: Vec<usize>,
    pub ds_overhead: Resources,
    /// Configurations of one group agree on the NodePool, every relevant label and the DaemonSets:
    /// every constraint but resources treats them alike.
    pub group: usize,
    /// The capacity reservation a node of this configuration launches into (index into
    /// `Problem::reservations`). Configurations of one group agree on it, so moving a node within its
    /// group never changes a reservation's count.
    pub reservation: Option<usize>,
}

impl Config {
    /// Room left for workload pods.
    pub fn room(&self) -> Resources {
        self.allocatable.minus(&self.ds_overhead)
    }
}

/// A NodePool's usage counted against its limits (existing and in-flight nodes).
#[derive(Clone, Debug, Default)]
pub struct PoolUsage {
    pub capacity: Resources,
    pub nodes: i64,
}

pub struct Problem<'a> {
    pub cluster: &'a Cluster,
    pub weights: &'a Weights,
    /// The pending pods, in input order.
    pub batch: Vec<PodId>,
    pub classes: Vec<Class>,
    pub class_of: FxHashMap<PodId, usize>,
    /// Per class: the objective's penalty for each of its pods left pending, tiered by priority and
    /// queue position (`semantics::queue::pending_penalty`).
    pub pending_penalty: Vec<f64>,
    /// Existing nodes usable as targets (indices into `Cluster::nodes`).
    pub existing: Vec<usize>,
    pub configs: Vec<Config>,
    pub usage: Vec<PoolUsage>,
    /// Label keys some constraint of the batch reads.
    pub relevant_keys: BTreeSet<String>,
    pub region: Option<String>,
    /// Highest NodePool weight (for the weight term).
    pub max_weight: i32,
    /// Configurations of each group, in cost order.
    pub groups: Vec<Vec<u32>>,
    /// What planned nodes are named after (`<prefix>-<i>`; `solve::new_node_name`): `stowage`, unless
    /// an existing node already has such a name.
    pub node_prefix: String,
    /// Per NodePool: the catalog as its EC2NodeClass sees it (launch candidates, `solve::launch`).
    pub(crate) pool_views: Vec<Arc<Catalog>>,
    /// Per configuration group: its launch types (`semantics::min_values`), built when first asked.
    pub(crate) launch: Vec<OnceLock<Arc<crate::semantics::min_values::LaunchTypes>>>,
    /// The capacity reservations some configuration launches into, by id (`semantics::reservations`).
    pub reservations: Vec<reservations::Cap>,
}

/// The prefix of planned node names: `stowage`, or the first of `stowage-new`, `stowage-new2`, ... no
/// existing node name `<prefix>-<digits>` uses, so that a planned node never shares a name (and a
/// hostname) with a node of the snapshot.
pub(crate) fn node_prefix(cluster: &Cluster) -> String {
    let taken = |prefix: &str| cluster.nodes.iter().any(|n| n.name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')).is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit())));
    let mut prefix = "stowage".to_string();
    let mut i = 1;
    while taken(&prefix) {
        prefix = if i == 1 { "stowage-new".into() } else { format!("stowage-new{i}") };
        i += 1;
    }
    prefix
}

#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    #[error("NodePool {pool}: EC2NodeClass {class:?} not found")]
    MissingNodeClass { pool: String, class: String },
    #[error(
        "weights ({source_name}): unschedulablePod = {penalty} does not exceed the cost of a single node ({cost:.2} $/h for {what}); raise unschedulablePod so that no plan leaves a pod pending to save money"
    )]
    PenaltyTooSmall { source_name: String, penalty: f64, cost: f64, what: String },
}

/// Hash of what kube-scheduler's rules read of a pod, requests left out (see `same_rules`).
pub(crate) fn rule_signature(p: &Pod) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    p.namespace.hash(&mut h);
    p.labels.hash(&mut h);
    p.node_matcher.hash(&mut h);
    p.preferred_node.hash(&mut h);
    p.tolerations.hash(&mut h);
    p.spread.hash(&mut h);
    p.affinity.hash(&mut h);
    p.anti_affinity.hash(&mut h);
    p.preferred_affinity.hash(&mut h);
    p.preferred_anti_affinity.hash(&mut h);
    p.host_ports.hash(&mut h);
    p.volumes.node_terms.hash(&mut h);
    p.volumes.zone_labels.hash(&mut h);
    p.volumes.selected_node.hash(&mut h);
    p.volumes.blocked.hash(&mut h);
    volume_limits::counts(p).hash(&mut h);
    p.invalid.hash(&mut h);
    p.hardened.hash(&mut h);
    h.finish()
}

/// Whether kube-scheduler's rules treat two pods alike wherever they go, requests aside: the same
/// namespace and labels (so every selector matches both or neither) and the same constraints, soft
/// ones and volume topology included.
pub(crate) fn same_rules(a: &Pod, b: &Pod) -> bool {
    a.namespace == b.namespace
        && a.labels == b.labels
        && a.node_matcher == b.node_matcher
        && a.preferred_node == b.preferred_node
        && a.tolerations == b.tolerations
        && a.spread == b.spread
        && a.affinity == b.affinity
        && a.anti_affinity == b.anti_affinity
        && a.preferred_affinity == b.preferred_affinity
        && a.preferred_anti_affinity == b.preferred_anti_affinity
        && a.host_ports == b.host_ports
        && a.volumes.node_terms == b.volumes.node_terms
        && a.volumes.zone_labels == b.volumes.zone_labels
        && a.volumes.selected_node == b.volumes.selected_node
        && a.volumes.blocked == b.volumes.blocked
        && volume_limits::counts(a) == volume_limits::counts(b)
        && a.invalid == b.invalid
        && a.hardened == b.hardened
}

/// A class is pods alike to the rules with equal requests and priority.
fn signature(p: &Pod) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    rule_signature(p).hash(&mut h);
    p.requests.hash(&mut h);
    p.priority.hash(&mut h);
    h.finish()
}

fn same_class(a: &Pod, b: &Pod) -> bool {
    a.requests == b.requests && a.priority == b.priority && same_rules(a, b)
}

fn matcher_keys(m: &NodeMatcher, out: &mut BTreeSet<String>) {
    for (k, _) in &m.selector {
        out.insert(k.clone());
    }
    for t in m.terms.iter().flatten() {
        for e in &t.expressions {
            out.insert(e.key.clone());
        }
    }
}

/// Label keys any constraint of these pods (or of existing pods' anti-affinity) reads: the keys a
/// configuration's group projects on. The DaemonSets' keys are not among them: which DaemonSets run is
/// part of the group key itself ([`daemonset_keys`] says why).
pub fn relevant_keys(cluster: &Cluster, batch: &[PodId]) -> BTreeSet<String> {
    let mut k = BTreeSet::new();
    for key in [keys::ZONE, keys::CAPACITY_TYPE, keys::NODEPOOL] {
        k.insert(key.to_string());
    }
    for &id in batch {
        let p = cluster.pod(id);
        matcher_keys(&p.node_matcher, &mut k);
        for pt in &p.preferred_node {
            for e in &pt.term.expressions {
                k.insert(e.key.clone());
            }
        }
        for c in &p.spread {
            k.insert(c.key.clone());
        }
        for t in p.affinity.iter().chain(&p.anti_affinity) {
            k.insert(t.key.clone());
        }
        for t in p.preferred_affinity.iter().chain(&p.preferred_anti_affinity) {
            k.insert(t.term.key.clone());
        }
        for alts in &p.volumes.node_terms {
            for t in alts {
                for e in &t.expressions {
                    k.insert(e.key.clone());
                }
            }
        }
        for (key, _) in &p.volumes.zone_labels {
            k.insert(key.clone());
        }
    }
    for p in &cluster.pods {
        if p.node_name.is_some() {
            for t in &p.anti_affinity {
                k.insert(t.key.clone());
            }
        }
    }
    k
}

/// Label keys the DaemonSets' node selectors and affinity read. They decide only which DaemonSets run on
/// a configuration, and that set is part of its group key, so they need not split groups: the EBS CSI
/// node plugin's `node.kubernetes.io/instance-type NotIn [a1.*]`, say, would otherwise make every
/// instance type a group of its own (thousands of columns for three pods, and single-type NodeClaims).
/// Open NodePool keys among them still get every value enumerated, since a value may change the set.
pub fn daemonset_keys(cluster: &Cluster) -> BTreeSet<String> {
    let mut k = BTreeSet::new();
    for ds in &cluster.daemonsets {
        matcher_keys(&ds.template.node_matcher, &mut k);
    }
    k
}

struct BatchState {
    batch: Vec<PodId>,
    classes: Vec<Class>,
    class_of: FxHashMap<PodId, usize>,
    pending_penalty: Vec<f64>,
    existing: Vec<usize>,
    usage: Vec<PoolUsage>,
    max_weight: i32,
}

/// The pending pods grouped into classes (pods of a class share their priority, so that the pending
/// penalty can follow kube-scheduler's queue; a class's pods are in queue order, so the pods a planner
/// leaves pending are its latest), the usable existing nodes and the NodePools' usage.
fn batch_state(cluster: &Cluster, unschedulable_pod: f64) -> BatchState {
    let batch = cluster.pending();
    let mut classes: Vec<Class> = Vec::new();
    let mut class_of = FxHashMap::default();
    let mut by_sig: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for &id in &batch {
        let p = cluster.pod(id);
        let sig = signature(p);
        let bucket = by_sig.entry(sig).or_default();
        let found = bucket.iter().copied().find(|&c| same_class(cluster.pod(classes[c].rep), p));
        let c = match found {
            Some(c) => c,
            None => {
                classes.push(Class { pods: Vec::new(), rep: id, compatible: Vec::new(), by_group: Vec::new(), rejections: BTreeMap::new() });
                bucket.push(classes.len() - 1);
                classes.len() - 1
            }
        };
        classes[c].pods.push(id);
        class_of.insert(id, c);
    }
    // Input order is queue order only where creation times are; the planners take a class's pods
    // first to last, so its latest are the ones left pending.
    for c in &mut classes {
        queue::sort(&mut c.pods, PodId::ix, &cluster.pods);
    }
    let existing: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| !cluster.nodes[i].deleting).collect();
    let max_weight = cluster.nodepools.iter().map(|p| p.weight).max().unwrap_or(0);
    let mut usage = vec![PoolUsage::default(); cluster.nodepools.len()];
    for n in &cluster.nodes {
        if let Some(pi) = n.nodepool.as_ref().and_then(|np| cluster.nodepools.iter().position(|p| &p.name == np)) {
            usage[pi].capacity.add(&n.capacity);
            usage[pi].nodes += 1;
        }
    }
    let pending_penalty = class_penalties(cluster, &classes, unschedulable_pod);
    BatchState { batch, classes, class_of, pending_penalty, existing, usage, max_weight }
}

/// Per class: `semantics::queue::pending_penalty` of its pods, its tier the rank of its priority among
/// the batch's, its rank its place in queue order (by its earliest pod).
fn class_penalties(cluster: &Cluster, classes: &[Class], base: f64) -> Vec<f64> {
    let tiers = queue::tiers(classes.iter().map(|c| cluster.pod(c.rep).priority));
    let mut by_queue: Vec<usize> = (0..classes.len()).collect();
    queue::sort(&mut by_queue, |c| classes[c].pods[0].ix(), &cluster.pods);
    let mut out = vec![0.0; classes.len()];
    for (rank, &c) in by_queue.iter().enumerate() {
        out[c] = queue::pending_penalty(base, tiers[&cluster.pod(classes[c].rep).priority], rank, classes.len());
    }
    out
}

/// Values pods ask for on a key (In requirements and node selectors), for open NodePool keys.
fn wanted_values(cluster: &Cluster, batch: &[PodId], key: &str) -> Vec<String> {
    let mut v = BTreeSet::new();
    for &id in batch {
        let p = cluster.pod(id);
        for (k, val) in &p.node_matcher.selector {
            if k == key {
                v.insert(val.clone());
            }
        }
        for t in p.node_matcher.terms.iter().flatten() {
            for e in &t.expressions {
                if e.key == key && e.op == NodeOp::In {
                    v.extend(e.values.iter().cloned());
                }
            }
        }
    }
    v.into_iter().collect()
}

/// Dimensions compared when pruning dominated types: every resource a batch pod requests, pods, and
/// every NodePool-limited resource.
fn relevant_dims(cluster: &Cluster, batch: &[PodId]) -> Vec<String> {
    let mut d: BTreeSet<String> = BTreeSet::new();
    d.insert("pods".into());
    for &id in batch {
        for (n, _) in cluster.pod(id).requests.iter() {
            d.insert(n.to_string());
        }
    }
    d.into_iter().collect()
}

/// The CSI drivers of the batch's volumes, each with the most volumes of it a new node could ever
/// hold: the batch's volumes of the driver plus those of every DaemonSet pod. Configurations are told
/// apart by their limits up to that count only (`attach_projection`).
fn batch_drivers(cluster: &Cluster, batch: &[PodId]) -> BTreeMap<String, i64> {
    let mut total: BTreeMap<String, i64> = BTreeMap::new();
    for &id in batch {
        for (d, n) in volume_limits::counts(cluster.pod(id)) {
            *total.entry(d.to_string()).or_default() += n;
        }
    }
    for ds in &cluster.daemonsets {
        for (d, n) in volume_limits::counts(&ds.template) {
            if let Some(t) = total.get_mut(d) {
                *t += n;
            }
        }
    }
    total
}

/// A configuration's attach limits for the batch's drivers (`None`: no limit), each capped at the most
/// the node could hold (`batch_drivers`): two types whose limits the batch cannot reach are alike, so
/// they share a group (splitting groups by limits no plan can reach would only fragment them).
fn attach_projection(limits: &AttachLimits, drivers: &BTreeMap<String, i64>) -> Vec<Option<i64>> {
    drivers.iter().map(|(d, most)| limits.get(d).map(|&l| l.min(*most))).collect()
}

/// What building one NodePool's candidate configurations reads besides the NodePool.
struct PoolEnv<'e> {
    cluster: &'e Cluster,
    weights: &'e Weights,
    batch: &'e [PodId],
    relevant: &'e BTreeSet<String>,
    /// `relevant` plus [`daemonset_keys`]: the open keys whose every value is enumerated.
    enumerate: &'e BTreeSet<String>,
    region: Option<&'e str>,
    max_weight: i32,
    /// The batch's CSI drivers (`batch_drivers`).
    drivers: &'e BTreeMap<String, i64>,
}

/// A pruning group of one NodePool: zone, capacity type, the labels' projection on the relevant keys,
/// the DaemonSets that run, the attach limits of the batch's drivers and the capacity reservation.
type PoolGroupKey = (String, String, Projection, Vec<usize>, Vec<Option<i64>>, Option<String>);

/// A configuration group: NodePool, the labels' projection on the relevant keys, the DaemonSets that
/// run, the attach limits of the batch's drivers and the capacity reservation.
type GroupKey = (usize, Projection, Vec<usize>, Vec<Option<i64>>, Option<usize>);

impl PoolEnv<'_> {
    /// Every configuration NodePool `pi` can launch from its catalog view (available offerings, values
    /// of open keys that matter, the NodePool's requirements), by pruning group.
    fn candidate_groups(&self, pi: usize, view: &Catalog) -> BTreeMap<PoolGroupKey, Vec<Config>> {
        let (cluster, pool) = (self.cluster, &self.cluster.nodepools[pi]);
        // What pods ask for on a key is the same for every offering: read the batch once per key, not
        // once per offering (types × offerings × pods otherwise, for a NodePool with an open key).
        let memo: std::cell::RefCell<BTreeMap<String, Vec<String>>> = std::cell::RefCell::new(BTreeMap::new());
        let wanted = |k: &str| memo.borrow_mut().entry(k.to_string()).or_insert_with(|| wanted_values(cluster, self.batch, k)).clone();
        let mut groups: BTreeMap<PoolGroupKey, Vec<Config>> = BTreeMap::new();
        for it in &view.types {
            // Most types, for pools that pin a family or category: skip them before building labels.
            if nodepool::type_ruled_out(pool, it) {
                continue;
            }
            let alloc = it.allocatable();
            for o in it.offerings.iter().filter(|o| o.available && !nodepool::offering_ruled_out(pool, o)) {
                let base = nodepool::offering_labels(pool, it, o, self.region);
                let open = nodepool::open_keys(pool, &base, &wanted);
                let Some(combos) = label_combos(base, &open, self.enumerate) else {
                    continue;
                };
                for labels in combos {
                    if nodepool::violated(pool, &labels).is_some() {
                        continue;
                    }
                    let (ds_overhead, dss) = daemonsets::overhead(&cluster.daemonsets, &labels, &pool.taints, None);
                    let ds_ix: Vec<usize> = dss.iter().map(|d| cluster.daemonsets.iter().position(|x| std::ptr::eq(x, *d)).unwrap_or(0)).collect();
                    let projection: Vec<(String, String)> = labels.iter().filter(|(k, _)| self.relevant.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
                    let spot = o.capacity_type == SPOT;
                    let deficit = self.max_weight.saturating_sub(pool.weight);
                    // The tie-break makes fewer nodes win between plans of equal price (`weights::node_tie_break`).
                    let cost = self.weights.node_cost(o.price, spot, deficit) + crate::weights::node_tie_break(self.batch.len());
                    let attach = attach_projection(&it.attach_limits, self.drivers);
                    let reservation = o.reservation.as_ref().map(|r| r.id.clone());
                    groups.entry((o.zone.clone(), o.capacity_type.clone(), projection, ds_ix.clone(), attach, reservation)).or_default().push(Config {
                        pool: pi,
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.clone(),
                        price: o.price,
                        synthetic: o.synthetic,
                        cost,
                        labels,
                        taints: pool.taints.clone(),
                        capacity: it.capacity.clone(),
                        allocatable: alloc.clone(),
                        attach_limits: it.attach_limits.clone(),
                        daemonsets: ds_ix,
                        ds_overhead,
                        group: 0,
                        reservation: None,
                    });
                }
            }
        }
        groups
    }
}

/// The label sets an offering's base labels extend to: every value of each open key a constraint of
/// the batch reads, the first value of the others. None if a required open key has no value.
fn label_combos(base: Labels, open: &[nodepool::OpenKey], relevant: &BTreeSet<String>) -> Option<Vec<Labels>> {
    let mut combos: Vec<Labels> = vec![base];
    for ok in open {
        if ok.values.is_empty() {
            if ok.required {
                return None;
            }
            continue;
        }
        let vals: Vec<&String> = if relevant.contains(&ok.key) { ok.values.iter().collect() } else { vec![&ok.values[0]] };
        let mut next = Vec::with_capacity(combos.len() * vals.len());
        for l in combos {
            // Every value but the last extends a copy; the last takes the label set itself.
            for v in &vals[..vals.len() - 1] {
                let mut c = l.clone();
                c.insert(ok.key.clone(), (*v).clone());
                next.push(c);
            }
            let mut l = l;
            l.insert(ok.key.clone(), vals[vals.len() - 1].clone());
            next.push(l);
        }
        combos = next;
    }
    Some(combos)
}

/// Drops each configuration of a pruning group that another is no dearer than and at least as large as
/// in every compared dimension, without more capacity in a NodePool-limited resource.
fn prune_dominated(mut group: Vec<Config>, dims: &[String], limited: &[String]) -> Vec<Config> {
    group.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.instance_type.cmp(&b.instance_type)));
    // The kept configurations with their room, computed once each.
    let mut kept: Vec<(Config, Resources)> = Vec::new();
    for c in group {
        let room = c.room();
        let dominated = kept.iter().any(|(k, kroom)| k.cost <= c.cost && dims.iter().all(|d| kroom.get(d) >= room.get(d)) && limited.iter().all(|d| k.capacity.get(d) <= c.capacity.get(d)));
        if !dominated {
            kept.push((c, room));
        }
    }
    kept.into_iter().map(|(c, _)| c).collect()
}

impl<'a> Problem<'a> {
    pub fn new(cluster: &'a Cluster, catalog: &Catalog, weights: &'a Weights) -> Result<Problem<'a>, ProblemError> {
        let BatchState { batch, classes, class_of, pending_penalty, existing, usage, max_weight } = batch_state(cluster, weights.unschedulable_pod);
        let relevant = relevant_keys(cluster, &batch);
        let enumerate: BTreeSet<String> = relevant.union(&daemonset_keys(cluster)).cloned().collect();
        let dims = relevant_dims(cluster, &batch);
        let mut configs = Vec::new();
        let mut views: BTreeMap<String, Arc<Catalog>> = BTreeMap::new();
        let mut pool_views = Vec::new();
        for pool in &cluster.nodepools {
            let view = match cluster.nodeclass(&pool.node_class) {
                Some(nc) => views.entry(nc.name.clone()).or_insert_with(|| Arc::new(catalog::for_nodeclass(catalog, nc))),
                None if cluster.nodeclasses.is_empty() => views.entry(String::new()).or_insert_with(|| Arc::new(catalog.clone())),
                None => return Err(ProblemError::MissingNodeClass { pool: pool.name.clone(), class: pool.node_class.clone() }),
            };
            pool_views.push(view.clone());
        }
        let drivers = batch_drivers(cluster, &batch);
        for (pi, (pool, view)) in cluster.nodepools.iter().zip(&pool_views).enumerate() {
            let limited: Vec<String> = pool.limits.as_ref().map(|l| l.limited.clone()).unwrap_or_default();
            let env = PoolEnv { cluster, weights, batch: &batch, relevant: &relevant, enumerate: &enumerate, region: catalog.region.as_deref(), max_weight, drivers: &drivers };
            for group in env.candidate_groups(pi, view).into_values() {
                configs.extend(prune_dominated(group, &dims, &limited));
            }
        }
        // Deterministic order: by cost, then pool, type, zone, capacity type, labels.
        configs.sort_by(|a, b| {
            a.cost
                .total_cmp(&b.cost)
                .then_with(|| a.pool.cmp(&b.pool))
                .then_with(|| a.instance_type.cmp(&b.instance_type))
                .then_with(|| a.zone.cmp(&b.zone))
                .then_with(|| a.capacity_type.cmp(&b.capacity_type))
                .then_with(|| a.labels.cmp(&b.labels))
        });
        let reservations = reservations::caps(&pool_views);
        for c in &mut configs {
            c.reservation = c.labels.get(keys::CAPACITY_RESERVATION_ID).and_then(|id| reservations.iter().position(|r| &r.id == id));
        }
        // A group also agrees on the attach limits of the batch's drivers, so that growing or shrinking a
        // node within its group never changes what NodeVolumeLimits allows it, and on the reservation.
        let mut group_ix: BTreeMap<GroupKey, usize> = BTreeMap::new();
        for c in &mut configs {
            let projection: Vec<(String, String)> = c.labels.iter().filter(|(k, _)| relevant.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            let n = group_ix.len();
            c.group = *group_ix.entry((c.pool, projection, c.daemonsets.clone(), attach_projection(&c.attach_limits, &drivers), c.reservation)).or_insert(n);
        }
        if let Some(c) = configs.iter().max_by(|a, b| a.cost.total_cmp(&b.cost))
            && c.cost >= weights.unschedulable_pod
            && !batch.is_empty()
        {
            return Err(ProblemError::PenaltyTooSmall {
                source_name: weights.source.clone(),
                penalty: weights.unschedulable_pod,
                cost: c.cost,
                what: format!("{} {} in {}", c.instance_type, c.capacity_type, c.zone),
            });
        }

        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); group_ix.len()];
        for (i, c) in configs.iter().enumerate() {
            groups[c.group].push(i as u32);
        }
        let node_prefix = node_prefix(cluster);
        let launch = vec![OnceLock::new(); groups.len()];
        let mut problem = Problem {
            cluster,
            weights,
            batch,
            classes,
            class_of,
            pending_penalty,
            existing,
            configs,
            usage,
            relevant_keys: relevant,
            region: catalog.region.clone(),
            max_weight,
            groups,
            node_prefix,
            pool_views,
            launch,
            reservations,
        };
        problem.compute_compatibility();
        Ok(problem)
    }

    pub fn pod(&self, id: PodId) -> &'a Pod {
        self.cluster.pod(id)
    }

    /// The same candidate configurations over another snapshot of the same batch (for instance with
    /// some pods already bound to nodes a plan launches): classes, existing nodes, usage and
    /// compatibility are recomputed; configurations, groups and relevant keys are kept.
    pub(crate) fn rebase<'b>(&self, cluster: &'b Cluster) -> Problem<'b>
    where
        'a: 'b,
    {
        let BatchState { batch, classes, class_of, pending_penalty, existing, usage, max_weight } = batch_state(cluster, self.weights.unschedulable_pod);
        let mut problem = Problem {
            cluster,
            weights: self.weights,
            batch,
            classes,
            class_of,
            pending_penalty,
            existing,
            configs: self.configs.clone(),
            usage,
            relevant_keys: self.relevant_keys.clone(),
            region: self.region.clone(),
            max_weight: max_weight.max(self.max_weight),
            groups: self.groups.clone(),
            node_prefix: node_prefix(cluster),
            pool_views: self.pool_views.clone(),
            launch: self.launch.clone(),
            reservations: self.reservations_after(&cluster.nodes[self.cluster.nodes.len().min(cluster.nodes.len())..]),
        };
        problem.compute_compatibility();
        problem
    }

    /// The reservations' counts once `added` (nodes of a rebased snapshot beyond this one's: planned
    /// nodes become in-flight ones) have taken theirs.
    fn reservations_after(&self, added: &[crate::domain::node::Node]) -> Vec<reservations::Cap> {
        let mut caps = self.reservations.clone();
        for n in added {
            if let Some(c) = n.labels.get(keys::CAPACITY_RESERVATION_ID).and_then(|id| caps.iter_mut().find(|c| &c.id == id)) {
                c.count = c.count.saturating_sub(1);
            }
        }
        caps
    }

    /// Static compatibility of every class with every configuration.
    ///
    /// Everything but resources is decided per group (its configurations agree on every label the batch
    /// reads, the NodePool and the DaemonSets) and is the same for classes whose pods the rules treat
    /// alike (`same_rules`); resources are decided per configuration and are the same for classes with
    /// equal requests. Both are computed once per distinct rule set and request vector, not per class
    /// (3,390 classes, about 30 request vectors and 15 rule sets at 100,000 pods of Karpenter's shapes).
    fn compute_compatibility(&mut self) {
        let cluster = self.cluster;
        let rooms: Vec<Resources> = self.configs.iter().map(Config::room).collect();
        // Per distinct rule set (a representative pod): each group's verdict.
        type Verdicts = Vec<Result<(), Reject>>;
        let mut rule_sets: FxHashMap<u64, Vec<(PodId, Verdicts)>> = FxHashMap::default();
        // Per distinct request vector: each group's fitting configurations and the last shortage.
        type Fits = Vec<(Vec<u32>, Option<Reject>)>;
        let mut fits_by_req: FxHashMap<Resources, Fits> = FxHashMap::default();
        for class in &mut self.classes {
            let p = cluster.pod(class.rep);
            let bucket = rule_sets.entry(rule_signature(p)).or_default();
            let verdicts = match bucket.iter().position(|(rep, _)| same_rules(cluster.pod(*rep), p)) {
                Some(i) => &bucket[i].1,
                None => {
                    let v = self.groups.iter().map(|configs| group_check(cluster, p, &self.configs[configs[0] as usize])).collect();
                    bucket.push((class.rep, v));
                    &bucket[bucket.len() - 1].1
                }
            };
            let fits = fits_by_req.entry(p.requests.clone()).or_insert_with(|| {
                self.groups
                    .iter()
                    .map(|configs| {
                        let mut fits = Vec::new();
                        let mut shortage = None;
                        for &fi in configs {
                            match crate::semantics::resources::fit(&p.requests, &rooms[fi as usize]) {
                                Ok(()) => fits.push(fi),
                                Err(r) => shortage = Some(r),
                            }
                        }
                        (fits, shortage)
                    })
                    .collect()
            });
            let mut by_group: Vec<(usize, Vec<u32>)> = Vec::new();
            for (g, configs) in self.groups.iter().enumerate() {
                let pool = &cluster.nodepools[self.configs[configs[0] as usize].pool].name;
                if let Err(r) = &verdicts[g] {
                    class.rejections.entry(pool.clone()).or_insert_with(|| r.clone());
                    continue;
                }
                let (group_fits, shortage) = &fits[g];
                if group_fits.is_empty() {
                    if let Some(r) = shortage {
                        class.rejections.entry(pool.clone()).or_insert_with(|| r.clone());
                    }
                    continue;
                }
                class.compatible.extend(group_fits.iter().copied());
                by_group.push((g, group_fits.clone()));
            }
            class.compatible.sort();
            class.by_group = by_group;
            if self.configs.is_empty() {
                for pool in &cluster.nodepools {
                    class.rejections.insert(pool.name.clone(), Reject::unresolvable(Plugin::NodePool, "no instance type offering satisfies the NodePool's requirements"));
                }
            }
        }
    }

    /// The domain universe a spread constraint of a pod sees from NodePools (rule b): values of the
    /// key over configurations that pass the constraint's inclusion policies. Volume topology is not
    /// applied (rule a).
    ///
    /// A configuration the NodePool's limits forbid even as the pool's next node (given its existing
    /// and in-flight nodes) creates no domain. Karpenter keeps the domains of a pool at its limits;
    /// rule (b) counts the domains NodePools *can create*, and kube-scheduler never sees a domain
    /// without a node, so counting one that cannot be created would only leave pods pending.
    pub(crate) fn pool_domains(&self, pod: &Pod, ci: usize) -> BTreeSet<String> {
        let c = &pod.spread[ci];
        let mut out = BTreeSet::new();
        if c.key == keys::HOSTNAME {
            return out;
        }
        for configs in &self.groups {
            let rep = &self.configs[configs[0] as usize];
            let Some(v) = rep.labels.get(&c.key) else { continue };
            if out.contains(v) {
                continue;
            }
            let room_in_limits = configs.iter().any(|&f| {
                let f = &self.configs[f as usize];
                self.cluster.nodepools[f.pool].limits.as_ref().is_none_or(|l| limits::check(l, &self.usage[f.pool].capacity, self.usage[f.pool].nodes, &f.capacity).is_ok())
            });
            if !room_in_limits {
                continue;
            }
            if spread::hard(pod).all(|h| h.key == keys::HOSTNAME || rep.labels.contains_key(&h.key)) && spread::node_included(c, pod, &rep.labels, &rep.taints, None) {
                out.insert(v.clone());
            }
        }
        out
    }
}

/// Whether one pod could ever run on a node of this configuration (ignoring other pods).
pub fn static_check(cluster: &Cluster, p: &Pod, f: &Config) -> Result<(), Reject> {
    group_check(cluster, p, f)?;
    crate::semantics::resources::fit(&p.requests, &f.room())
}

/// [`static_check`] without resources: the same for every configuration of a group.
pub(crate) fn group_check(cluster: &Cluster, p: &Pod, f: &Config) -> Result<(), Reject> {
    crate::semantics::invalid_spec(p)?;
    taints::filter(&f.taints, false, &p.tolerations, p.hardened.prefer_no_schedule)?;
    node_affinity::filter(&p.node_matcher, &f.labels, None)?;
    volume_limits::filter(&f.attach_limits, std::iter::empty(), p)?;
    volumes::filter(&p.volumes, &f.labels, None)?;
    let ds_ports: Vec<_> = f.daemonsets.iter().flat_map(|&d| cluster.daemonsets[d].template.host_ports.iter().cloned()).collect();
    ports::filter(&ds_ports, &p.host_ports)?;
    for c in spread::hard(p) {
        if c.key != keys::HOSTNAME && !f.labels.contains_key(&c.key) {
            return Err(spread::reject_missing_label());
        }
    }
    for t in &p.affinity {
        if t.key != keys::HOSTNAME && !f.labels.contains_key(&t.key) {
            return Err(crate::semantics::interpod::reject_affinity_missing_key());
        }
    }
    // DaemonSet pods share every node of the configuration: hostname anti-affinity either way.
    for &d in &f.daemonsets {
        let ds = &cluster.daemonsets[d].template;
        if p.anti_affinity.iter().any(|t| t.key == keys::HOSTNAME && crate::semantics::interpod::term_matches(t, ds)) {
            return Err(crate::semantics::interpod::reject_anti_affinity());
        }
        if ds.anti_affinity.iter().any(|t| t.key == keys::HOSTNAME && crate::semantics::interpod::term_matches(t, p)) {
            return Err(crate::semantics::interpod::reject_existing_anti_affinity());
        }
    }
    Ok(())
}
