//! `minValues` (Karpenter v1 NodePool `spec.template.spec.requirements[].minValues`) and the operator
//! setting `minValuesPolicy`: the instance types a new node may launch as (its *launch candidates*)
//! must keep enough distinct values of a key.
//!
//! ```text
//! types(node)  = { t ∈ view(pool) | t has an available offering in (node.zone, node.capacityType,
//!                                    node.capacityReservationId)
//!                  ∧ the pool's requirements hold on labels(t) }
//!   labels(t)  = base_labels(pool, t, zone, capacityType) ∪ { k: node.labels[k] | k a key the pool
//!                leaves open (named by a requirement, fixed neither by t, the offering nor the template) }
//! launch(node) = { t ∈ types(node) | ∀ pod p on the node:
//!                    p's required node affinity, node selector and volume topology match labels(t)
//!                  ∧ preferred_score(p, labels(t)) = preferred_score(p, node.labels)
//!                  ∧ labels(t)[k] = node.labels[k] for every topology key k of p's spreads and
//!                    pod (anti-)affinity terms, required or preferred (hostname aside)
//!                ∧ Σ_p requests(p) + Σ_{ds runs on labels(t)} requests(ds) ≤ allocatable(t)
//!                ∧ ∀ CSI driver d with a limit on t: the pods' distinct d-volumes ≤ attach_limit(t, d) }
//!                ordered by (price, name), the first MAX_LAUNCH_CANDIDATES of them
//! kept(node, k) = |{ labels(t)[k] | t ∈ launch(node) }|
//! Strict (default):  ∀ requirement r of the pool with minValues: kept(node, r.key) ≥ r.minValues,
//!                    else the node is not launched (a pod whose placement breaks it is rejected)
//! BestEffort:        a requirement with kept < minValues is relaxed to kept, and the relaxation recorded
//! ```
//!
//! Every launch candidate looks the same as the planned node to every constraint of its pods, so the
//! launch may use any of them. stowage pins zone and capacity type per node, so a minValues on those
//! keys (or on a key the pool leaves open) counts the node's one value. The cap of 60 candidates is the
//! AWS provider's CreateFleet truncation, after which Karpenter checks minValues again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::domain::catalog::InstanceType;
use crate::domain::cluster::DaemonSet;
use crate::domain::labels::{Labels, NodeMatcher, keys};
use crate::domain::node::AttachLimits;
use crate::domain::nodepool::NodePool;
use crate::domain::pod::Pod;
use crate::domain::resources::Resources;

use super::{Plugin, Reject, daemonsets, node_affinity, nodepool, volumes};

/// Most launch candidates a node keeps (Karpenter's AWS provider truncates to 60 by price and checks
/// minValues again).
pub const MAX_LAUNCH_CANDIDATES: usize = 60;

/// Karpenter's `--min-values-policy` (`MIN_VALUES_POLICY`); spelled as Karpenter spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MinValuesPolicy {
    /// A node whose launch candidates cannot keep minValues is not planned.
    #[default]
    Strict,
    /// minValues is lowered to what the candidates keep, and the plan records it.
    BestEffort,
}

impl MinValuesPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            MinValuesPolicy::Strict => "Strict",
            MinValuesPolicy::BestEffort => "BestEffort",
        }
    }

    pub fn parse(s: &str) -> Option<MinValuesPolicy> {
        match s {
            "Strict" => Some(MinValuesPolicy::Strict),
            "BestEffort" => Some(MinValuesPolicy::BestEffort),
            _ => None,
        }
    }
}

/// One instance type a node may launch as.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchType {
    pub name: String,
    /// Of the node's offering (zone, capacity type).
    pub price: f64,
    pub labels: Labels,
    /// Allocatable less the requests of the DaemonSets that run on such a node.
    pub room: Resources,
    /// The type's attach limits per CSI driver (`volume_limits`).
    pub attach_limits: AttachLimits,
}

/// The types a node of one NodePool, zone, capacity type and open-key values may launch as before its
/// pods are known (`types(node)`), cheapest first, with the pool's minValues requirements.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LaunchTypes {
    pub pool: String,
    /// (key, minValues) per requirement of the pool that has one.
    pub rules: Vec<(String, u32)>,
    pub types: Vec<LaunchType>,
}

/// The pool's minValues requirements.
pub fn rules(pool: &NodePool) -> Vec<(String, u32)> {
    pool.requirements.iter().filter_map(|r| r.min_values.map(|m| (r.req.key.clone(), m))).collect()
}

/// The node labels [`launch_types`] reads for `pool` (a superset): two nodes of the pool that agree on
/// them have the same launch types.
pub fn labels_read(pool: &NodePool) -> impl Iterator<Item = &str> {
    [keys::ZONE, keys::CAPACITY_TYPE, keys::CAPACITY_RESERVATION_ID].into_iter().chain(pool.requirements.iter().map(|r| r.req.key.as_str()))
}

/// `types(node)`: `node_labels` are the planned node's labels (zone, capacity type and the values of
/// open keys are read from them; the hostname is ignored).
pub fn launch_types(pool: &NodePool, view: &[InstanceType], node_labels: &Labels, region: Option<&str>, dss: &[DaemonSet]) -> LaunchTypes {
    if !node_labels.contains_key(keys::ZONE) || !node_labels.contains_key(keys::CAPACITY_TYPE) {
        return LaunchTypes { pool: pool.name.clone(), rules: rules(pool), types: Vec::new() };
    }
    let pool_keys: BTreeSet<&str> = pool.requirements.iter().map(|r| r.req.key.as_str()).collect();
    let mut types = Vec::new();
    for it in view {
        let Some(o) = it.offerings.iter().find(|o| o.available && o.is_for(node_labels)) else { continue };
        if nodepool::type_ruled_out(pool, it) {
            continue;
        }
        let mut labels = nodepool::offering_labels(pool, it, o, region);
        for k in &pool_keys {
            if !labels.contains_key(*k)
                && !nodepool::is_offering_or_node_key(k)
                && let Some(v) = node_labels.get(*k)
            {
                labels.insert(k.to_string(), v.clone());
            }
        }
        if nodepool::violated(pool, &labels).is_some() {
            continue;
        }
        let (overhead, _) = daemonsets::overhead(dss, &labels, &pool.taints, None);
        types.push(LaunchType { name: it.name.clone(), price: o.price, labels, room: it.allocatable().minus(&overhead), attach_limits: it.attach_limits.clone() });
    }
    types.sort_by(|a, b| a.price.total_cmp(&b.price).then_with(|| a.name.cmp(&b.name)));
    LaunchTypes { pool: pool.name.clone(), rules: rules(pool), types }
}

/// What the pods of a node ask of its launch candidates.
#[derive(Clone, Debug, Default)]
pub struct Load<'p> {
    pub requests: Resources,
    /// One pod per distinct node-side rule set (node affinity, volume topology, preferences).
    matchers: Vec<&'p Pod>,
    /// Topology keys of spreads and pod (anti-)affinity terms (hostname aside).
    domain_keys: BTreeSet<&'p str>,
    /// The pods' distinct volumes (driver, handle), and per driver the volumes of the further alike pods
    /// `add` was given by count (counted apart: conservative where they share a claim).
    volumes: BTreeSet<(&'p str, &'p str)>,
    more_volumes: BTreeMap<&'p str, i64>,
}

fn node_side_alike(a: &Pod, b: &Pod) -> bool {
    a.node_matcher == b.node_matcher && a.preferred_node == b.preferred_node && a.volumes.node_terms == b.volumes.node_terms && a.volumes.zone_labels == b.volumes.zone_labels
}

impl<'p> Load<'p> {
    /// The load of `count` pods alike to `pod`, added.
    pub fn add(&mut self, pod: &'p Pod, count: u32) {
        self.requests.add(&pod.requests.scaled(count as i64));
        for v in &pod.volumes.attach {
            self.volumes.insert((v.driver.as_str(), v.handle.as_str()));
            if count > 1 {
                *self.more_volumes.entry(v.driver.as_str()).or_default() += i64::from(count - 1);
            }
        }
        let trivial = pod.node_matcher == NodeMatcher::default() && pod.preferred_node.is_empty() && pod.volumes.node_terms.is_empty() && pod.volumes.zone_labels.is_empty();
        if !trivial && !self.matchers.iter().any(|q| node_side_alike(q, pod)) {
            self.matchers.push(pod);
        }
        let topology = pod
            .spread
            .iter()
            .map(|c| c.key.as_str())
            .chain(pod.affinity.iter().chain(&pod.anti_affinity).map(|t| t.key.as_str()))
            .chain(pod.preferred_affinity.iter().chain(&pod.preferred_anti_affinity).map(|t| t.term.key.as_str()));
        self.domain_keys.extend(topology.filter(|k| *k != keys::HOSTNAME));
    }

    pub fn of(pods: impl IntoIterator<Item = &'p Pod>) -> Load<'p> {
        let mut l = Load::default();
        for p in pods {
            l.add(p, 1);
        }
        l
    }

    /// Whether a node of type `t` holds these pods as the planned node (`node_labels`) does.
    pub fn admits(&self, t: &LaunchType, node_labels: &Labels) -> bool {
        self.requests.fits_in(&t.room)
            && self.volumes_fit(&t.attach_limits)
            && self.domain_keys.iter().all(|k| t.labels.get(*k) == node_labels.get(*k))
            && self.matchers.iter().all(|p| {
                node_affinity::matcher_matches(&p.node_matcher, &t.labels, None)
                    && volumes::filter(&p.volumes, &t.labels, None).is_ok()
                    && node_affinity::preferred_score(&p.preferred_node, &t.labels, None) == node_affinity::preferred_score(&p.preferred_node, node_labels, None)
            })
    }
}

impl Load<'_> {
    /// The pods' volumes within `limits` for every limited driver.
    fn volumes_fit(&self, limits: &AttachLimits) -> bool {
        limits.iter().all(|(d, &limit)| {
            let distinct = self.volumes.iter().filter(|(vd, _)| vd == d).count() as i64;
            distinct + self.more_volumes.get(d.as_str()).copied().unwrap_or(0) <= limit
        })
    }
}

/// `launch(node)`: the node's candidates for its pods, cheapest first, at most MAX_LAUNCH_CANDIDATES.
pub fn candidates<'t>(lt: &'t LaunchTypes, node_labels: &Labels, load: &Load) -> Vec<&'t LaunchType> {
    lt.types.iter().filter(|t| load.admits(t, node_labels)).take(MAX_LAUNCH_CANDIDATES).collect()
}

/// A minValues requirement the candidates do not keep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shortfall {
    pub key: String,
    pub min_values: u32,
    /// Distinct values the candidates keep: the relaxed minValues under BestEffort.
    pub kept: u32,
}

/// `kept(node, k)` for a key.
pub fn kept(cands: &[&LaunchType], key: &str) -> u32 {
    cands.iter().filter_map(|t| t.labels.get(key)).collect::<BTreeSet<_>>().len() as u32
}

/// The minValues requirements `cands` do not keep, in the pool's order.
pub fn shortfalls(lt: &LaunchTypes, cands: &[&LaunchType]) -> Vec<Shortfall> {
    lt.rules.iter().filter_map(|(key, m)| Some(Shortfall { key: key.clone(), min_values: *m, kept: kept(cands, key) }).filter(|s| s.kept < *m)).collect()
}

/// The rejection of a node (or of a pod on it) whose candidates do not keep minValues under Strict.
pub fn reject(pool: &str, s: &Shortfall) -> Reject {
    Reject::new(
        Plugin::NodePool,
        format!("NodePool {pool} requires minValues {} for {}, but the instance types a node for these pods may launch as keep {} (minValuesPolicy: Strict)", s.min_values, s.key, s.kept),
    )
}

/// A planned node's launch context in a `FilterState`: its types and how many of its first pods are
/// DaemonSet pods (seated before any workload pod; they are in each type's `room` already).
#[derive(Clone, Debug)]
pub struct NodeLaunch {
    pub types: Arc<LaunchTypes>,
    pub seated: usize,
}

/// Strict's check of a pod joining a planned node: the node's workload pods and the pod must leave
/// candidates that keep every minValues.
pub fn admit(launch: &NodeLaunch, node_labels: &Labels, pods: &[&Pod], pod: &Pod) -> Result<(), Reject> {
    if launch.types.rules.is_empty() {
        return Ok(());
    }
    let load = Load::of(pods.iter().skip(launch.seated).copied().chain([pod]));
    let cands = candidates(&launch.types, node_labels, &load);
    match shortfalls(&launch.types, &cands).first() {
        Some(s) => Err(reject(&launch.types.pool, s)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalog::Offering;
    use crate::domain::labels::{NodeOp, NodeRequirement};
    use crate::domain::nodepool::{ConsolidationPolicy, PoolRequirement};

    fn itype(name: &str, family: &str, cpu_m: i64, price: f64) -> InstanceType {
        InstanceType {
            name: name.into(),
            labels: [(keys::INSTANCE_TYPE.to_string(), name.to_string()), ("karpenter.k8s.aws/instance-family".to_string(), family.to_string())].into_iter().collect(),
            capacity: Resources::new(cpu_m, 1 << 34, 0, 110),
            overhead: Resources::default(),
            offerings: vec![Offering { zone: "z1".into(), capacity_type: "on-demand".into(), price, available: true, synthetic: false, reservation: None }],
            aws: None,
            attach_limits: Default::default(),
        }
    }

    fn pool(min: u32, key: &str) -> NodePool {
        NodePool {
            name: "p".into(),
            weight: 0,
            requirements: vec![PoolRequirement { req: NodeRequirement::new(key, NodeOp::Exists, Vec::<String>::new()), min_values: Some(min) }],
            labels: Labels::new(),
            taints: vec![],
            startup_taints: vec![],
            limits: None,
            node_class: "default".into(),
            consolidation: ConsolidationPolicy::WhenEmpty,
            consolidate_after: None,
            expire_after: None,
        }
    }

    fn pod(cpu_m: i64) -> Pod {
        Pod::new("default", "p", Resources::new(cpu_m, 0, 0, 1))
    }

    fn node_labels() -> Labels {
        [(keys::ZONE.to_string(), "z1".to_string()), (keys::CAPACITY_TYPE.to_string(), "on-demand".to_string())].into_iter().collect()
    }

    #[test]
    fn candidates_are_the_fitting_types_cheapest_first_and_minvalues_counts_their_values() {
        let view = vec![itype("b.2", "b", 2000, 0.2), itype("a.1", "a", 1000, 0.1), itype("a.4", "a", 4000, 0.4), itype("c.8", "c", 8000, 0.8)];
        let lt = launch_types(&pool(3, keys::INSTANCE_TYPE), &view, &node_labels(), None, &[]);
        assert_eq!(lt.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a.1", "b.2", "a.4", "c.8"]);
        let pod = pod(1500);
        let load = Load::of([&pod]);
        let cands = candidates(&lt, &node_labels(), &load);
        assert_eq!(cands.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["b.2", "a.4", "c.8"]);
        assert!(shortfalls(&lt, &cands).is_empty());
        // A second such pod leaves two types: three asked.
        let load = Load::of([&pod, &pod]);
        let cands = candidates(&lt, &node_labels(), &load);
        assert_eq!(shortfalls(&lt, &cands), vec![Shortfall { key: keys::INSTANCE_TYPE.into(), min_values: 3, kept: 2 }]);
        // Families: a and c remain of a, b, c.
        let lt = launch_types(&pool(3, "karpenter.k8s.aws/instance-family"), &view, &node_labels(), None, &[]);
        let load = Load::of([&pod, &pod]);
        assert_eq!(shortfalls(&lt, &candidates(&lt, &node_labels(), &load))[0].kept, 2);
        let launch = NodeLaunch { types: Arc::new(lt), seated: 0 };
        assert!(admit(&launch, &node_labels(), &[], &pod).is_ok());
        assert_eq!(admit(&launch, &node_labels(), &[&pod], &pod).unwrap_err().plugin, Plugin::NodePool);
    }

    #[test]
    fn node_affinity_narrows_the_candidates_and_topology_keys_must_agree() {
        let view = vec![itype("a.1", "a", 1000, 0.1), itype("b.1", "b", 1000, 0.2)];
        let lt = launch_types(&pool(2, keys::INSTANCE_TYPE), &view, &node_labels(), None, &[]);
        let mut pod = pod(100);
        pod.node_matcher.selector.push(("karpenter.k8s.aws/instance-family".into(), "a".into()));
        let mut labels = node_labels();
        labels.insert("karpenter.k8s.aws/instance-family".into(), "a".into());
        assert_eq!(candidates(&lt, &labels, &Load::of([&pod])).len(), 1);
        assert_eq!(candidates(&lt, &labels, &Load::of([&super::tests::pod(100)])).len(), 2);
    }

    #[test]
    fn the_policy_is_spelled_as_karpenter_spells_it() {
        for p in [MinValuesPolicy::Strict, MinValuesPolicy::BestEffort] {
            assert_eq!(MinValuesPolicy::parse(p.as_str()), Some(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.as_str()));
        }
        assert_eq!(MinValuesPolicy::parse("strict"), None);
    }
}
