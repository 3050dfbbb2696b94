//! kube-scheduler's Filter phase over a set of nodes and the pods on them, with the per-cycle
//! precomputation kept incrementally: the semantic model that the checker and the simulator's binder
//! run pods through one at a time. Planners do not use it for their search.
//!
//! Plugins run in kube-scheduler's default order and the first rejection wins: NodeUnschedulable,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, NodeVolumeLimits, VolumeBinding/VolumeZone,
//! PodTopologySpread, InterPodAffinity.
//!
//! Counts for spread constraints and pod (anti-)affinity terms are built lazily the first time a pod
//! needs them (kube-scheduler's PreFilter) and then updated as pods are added, so placing n pods costs
//! O(n × distinct constraint signatures) rather than O(n²). Adding nodes or removing pods drops the
//! caches; they are rebuilt on the next query.
//!
//! kube-scheduler alone is the default. The planners and the checker add stowage's hostname rule
//! (`spread::HostnameSpread::Intent`) on the nodes a plan launches: [`FilterState::set_hostname_spread`]
//! and [`FilterState::add_planned_node`], and Karpenter's minValues under Strict on planned nodes
//! that carry a launch context (`min_values`, [`FilterState::set_min_values_policy`]).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::domain::labels::{LabelSelector, Labels, NodeMatcher, keys};
use crate::domain::pod::{HostPort, InclusionPolicy, Pod, PodAffinityTerm};
use crate::domain::resources::Resources;
use crate::domain::taints::{Taint, Toleration};

use super::min_values::{self, MinValuesPolicy};
use super::spread::HostnameSpread;
use super::{Reject, interpod, node_affinity, ports, resources, selectors, spread, taints, volume_limits, volumes};
use crate::domain::node::AttachLimits;

/// A node as the scheduler sees it.
#[derive(Clone, Debug)]
pub struct SimNode<'a> {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Resources,
    pub requested: Resources,
    pub ports: Vec<HostPort>,
    pub pods: Vec<&'a Pod>,
    /// On a node the plan launches whose NodePool has minValues: its launch types (`min_values`).
    pub launch: Option<min_values::NodeLaunch>,
    /// Volumes per CSI driver the node may have (its CSINode; a planned node's instance type).
    pub attach_limits: AttachLimits,
}

/// The snapshot's nodes as kube-scheduler sees them: each with the pods bound to it (terminal pods
/// free their resources). Both the planners' replay and the independent checker start from it.
pub fn bound_nodes(cluster: &crate::domain::Cluster) -> Vec<SimNode<'_>> {
    let mut nodes: Vec<SimNode> = cluster
        .nodes
        .iter()
        .map(|n| {
            let mut s = SimNode::new(n.name.clone(), n.labels.clone(), n.taints.clone(), n.allocatable.clone());
            s.unschedulable = n.unschedulable;
            s.attach_limits = n.attach_limits.clone();
            s
        })
        .collect();
    let index: std::collections::BTreeMap<&str, usize> = cluster.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    for pod in &cluster.pods {
        if let Some(n) = pod.node_name.as_deref()
            && !pod.is_terminal()
            && let Some(&i) = index.get(n)
        {
            nodes[i].seat(pod);
        }
    }
    nodes
}

impl<'a> SimNode<'a> {
    pub fn new(name: impl Into<String>, labels: Labels, taints: Vec<Taint>, allocatable: Resources) -> Self {
        SimNode {
            name: name.into(),
            labels,
            taints,
            unschedulable: false,
            allocatable,
            requested: Resources::default(),
            ports: Vec::new(),
            pods: Vec::new(),
            launch: None,
            attach_limits: AttachLimits::new(),
        }
    }

    pub fn free(&self) -> Resources {
        self.allocatable.minus(&self.requested)
    }

    /// Puts a pod on the node (for nodes built outside a `FilterState`).
    pub fn seat(&mut self, pod: &'a Pod) {
        self.requested.add(&pod.requests);
        self.ports.extend(pod.host_ports.iter().cloned());
        self.pods.push(pod);
    }
}

/// What makes two spread constraints count the same pods on the same nodes.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SpreadKey {
    all_keys: Vec<String>,
    matcher: Option<NodeMatcher>,
    tolerations: Option<Vec<Toleration>>,
    key: String,
    selector: Option<LabelSelector>,
    namespace: String,
}

struct SpreadCounter {
    spec: SpreadKey,
    /// The constraint's inclusion policies, to judge nodes added later.
    eligible: Vec<bool>,
    counts: FxHashMap<String, i64>,
    /// count → number of domains with that count, for the global minimum.
    hist: BTreeMap<i64, usize>,
}

impl SpreadCounter {
    /// Whether a node counts for this constraint (all keys present, inclusion policies).
    fn includes(&self, labels: &Labels, node_taints: &[Taint], node_name: Option<&str>) -> bool {
        let s = &self.spec;
        s.all_keys.iter().all(|k| labels.contains_key(k))
            && s.matcher.as_ref().is_none_or(|m| node_affinity::matcher_matches(m, labels, node_name))
            && s.tolerations.as_ref().is_none_or(|t| taints::first_untolerated(node_taints, t).is_none())
    }

    fn counts_pod(&self, pod: &Pod) -> bool {
        !pod.terminating && pod.namespace == self.spec.namespace && selectors::opt_matches(self.spec.selector.as_ref(), &pod.labels)
    }

    fn add_domain(&mut self, domain: &str) {
        if !self.counts.contains_key(domain) {
            self.counts.insert(domain.to_string(), 0);
            *self.hist.entry(0).or_default() += 1;
        }
    }

    fn bump(&mut self, domain: &str) {
        self.shift(domain, 1);
    }

    /// Adds `delta` to a domain's count, keeping the histogram.
    fn shift(&mut self, domain: &str, delta: i64) {
        self.add_domain(domain);
        let c = self.counts.get_mut(domain).expect("domain added above");
        let old = *c;
        *c += delta;
        if let Some(n) = self.hist.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                self.hist.remove(&old);
            }
        }
        *self.hist.entry(old + delta).or_default() += 1;
    }

    fn min(&self) -> Option<i64> {
        self.hist.keys().next().copied()
    }
}

/// Pods matching one anti-affinity term, per value of its topology key.
struct TermCounter {
    term: PodAffinityTerm,
    counts: FxHashMap<String, i64>,
}

/// Pods matching all of an incoming pod's affinity terms, per (key, value).
struct AffinityCounter {
    terms: Vec<PodAffinityTerm>,
    counts: FxHashMap<(String, String), i64>,
}

/// The per-pod view prepared once and then used for every node (kube-scheduler's PreFilter result).
#[derive(Clone)]
pub struct Prepared {
    spread: Vec<(usize, usize)>,
    anti: Vec<usize>,
    affinity: Option<usize>,
    symmetric: Vec<usize>,
    /// How many symmetric anti-affinity counters existed when it was prepared (`prepare_like`).
    symmetric_seen: usize,
}

pub struct FilterState<'a> {
    nodes: Vec<SimNode<'a>>,
    node_ix: FxHashMap<String, usize>,
    spread: Vec<SpreadCounter>,
    spread_ix: FxHashMap<SpreadKey, usize>,
    anti: Vec<TermCounter>,
    anti_ix: FxHashMap<PodAffinityTerm, usize>,
    affinity: Vec<AffinityCounter>,
    affinity_ix: FxHashMap<Vec<PodAffinityTerm>, usize>,
    /// Required anti-affinity terms of pods on nodes, per value of the term's key (always maintained).
    symmetric: Vec<TermCounter>,
    symmetric_ix: FxHashMap<PodAffinityTerm, usize>,
    /// Per node: launched by the plan being judged (`add_planned_node`).
    planned: Vec<bool>,
    /// The hostname rule on planned nodes; `Exact` (kube-scheduler alone) unless set.
    hostname: HostnameSpread,
    /// minValues on planned nodes with a launch context: Strict rejects a pod that breaks it.
    min_values: MinValuesPolicy,
}

/// One fewer pod counted under `key`; keys counting none are removed, as if never counted.
fn drop_one<K: std::hash::Hash + Eq>(counts: &mut FxHashMap<K, i64>, key: &K) {
    if let Some(c) = counts.get_mut(key) {
        *c -= 1;
        if *c <= 0 {
            counts.remove(key);
        }
    }
}

impl<'a> FilterState<'a> {
    pub fn new(nodes: Vec<SimNode<'a>>) -> Self {
        let mut s = FilterState {
            nodes: Vec::new(),
            node_ix: FxHashMap::default(),
            spread: Vec::new(),
            spread_ix: FxHashMap::default(),
            anti: Vec::new(),
            anti_ix: FxHashMap::default(),
            affinity: Vec::new(),
            affinity_ix: FxHashMap::default(),
            symmetric: Vec::new(),
            symmetric_ix: FxHashMap::default(),
            planned: Vec::new(),
            hostname: HostnameSpread::Exact,
            min_values: MinValuesPolicy::Strict,
        };
        for n in nodes {
            s.add_node(n);
        }
        s
    }

    /// Judges hard hostname spreads on planned nodes by `mode` from now on (`Exact` by default).
    pub fn set_hostname_spread(&mut self, mode: HostnameSpread) {
        self.hostname = mode;
    }

    /// Judges minValues on planned nodes that carry a launch context (`SimNode::launch`) by `policy`
    /// from now on (Strict by default; BestEffort never rejects).
    pub fn set_min_values_policy(&mut self, policy: MinValuesPolicy) {
        self.min_values = policy;
    }

    /// Adds a node the plan launches (`add_node` otherwise): the intent rule applies to it.
    pub fn add_planned_node(&mut self, node: SimNode<'a>) -> usize {
        let ix = self.add_node(node);
        self.planned[ix] = true;
        ix
    }

    pub fn nodes(&self) -> &[SimNode<'a>] {
        &self.nodes
    }

    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.node_ix.get(name).copied()
    }

    /// Adds a node with the pods already on it. Caches are extended, not dropped, so `Prepared`
    /// values stay valid.
    pub(crate) fn add_node(&mut self, mut node: SimNode<'a>) -> usize {
        let pods = std::mem::take(&mut node.pods);
        node.requested = Resources::default();
        node.ports.clear();
        let ix = self.nodes.len();
        self.node_ix.insert(node.name.clone(), ix);
        self.planned.push(false);
        for sc in &mut self.spread {
            let inc = sc.includes(&node.labels, &node.taints, Some(&node.name));
            sc.eligible.push(inc);
            if inc {
                sc.add_domain(&node.labels[&sc.spec.key]);
            }
        }
        self.nodes.push(node);
        for p in pods {
            self.add_pod(p, ix);
        }
        ix
    }

    /// Gives a node another allocatable: a planned node grown to a larger instance type whose labels
    /// agree on everything a constraint reads (the planners' configuration groups).
    pub(crate) fn set_allocatable(&mut self, node: usize, allocatable: Resources) {
        self.nodes[node].allocatable = allocatable;
    }

    /// Gives a planned node its new instance type's attach limits (with `set_allocatable`; the
    /// planners' configuration groups agree on them for the drivers the batch uses).
    pub(crate) fn set_attach_limits(&mut self, node: usize, limits: AttachLimits) {
        self.nodes[node].attach_limits = limits;
    }

    /// Places a pod on a node (binding or assuming it), whether or not it passes the filters.
    pub fn add_pod(&mut self, pod: &'a Pod, node: usize) {
        let n = &mut self.nodes[node];
        n.requested.add(&pod.requests);
        n.ports.extend(pod.host_ports.iter().cloned());
        n.pods.push(pod);
        let n = &self.nodes[node];
        for sc in &mut self.spread {
            if sc.eligible[node]
                && sc.counts_pod(pod)
                && let Some(d) = n.labels.get(&sc.spec.key)
            {
                sc.bump(d);
            }
        }
        for tc in &mut self.anti {
            if let Some(v) = n.labels.get(&tc.term.key)
                && interpod::term_matches(&tc.term, pod)
            {
                *tc.counts.entry(v.clone()).or_default() += 1;
            }
        }
        for ac in &mut self.affinity {
            if interpod::matches_all(&ac.terms, pod) {
                for t in &ac.terms {
                    if let Some(v) = n.labels.get(&t.key) {
                        *ac.counts.entry((t.key.clone(), v.clone())).or_default() += 1;
                    }
                }
            }
        }
        for t in pod.symmetric_anti_affinity() {
            if let Some(v) = n.labels.get(&t.key) {
                let ix = match self.symmetric_ix.get(t) {
                    Some(&i) => i,
                    None => {
                        self.symmetric.push(TermCounter { term: t.clone(), counts: FxHashMap::default() });
                        self.symmetric_ix.insert(t.clone(), self.symmetric.len() - 1);
                        self.symmetric.len() - 1
                    }
                };
                *self.symmetric[ix].counts.entry(v.clone()).or_default() += 1;
            }
        }
    }

    /// Removes a pod from a node (deletion, or undoing an assumption). Returns false if it was not there.
    pub fn remove_pod(&mut self, pod: &Pod, node: usize) -> bool {
        let n = &mut self.nodes[node];
        let Some(pos) = n.pods.iter().position(|p| std::ptr::eq(*p, pod) || (p.namespace == pod.namespace && p.name == pod.name)) else {
            return false;
        };
        let p = n.pods.remove(pos);
        n.requested.sub(&p.requests);
        for hp in &p.host_ports {
            if let Some(i) = n.ports.iter().position(|x| x == hp) {
                n.ports.remove(i);
            }
        }
        // Every counter add_pod bumped for this pod goes down by one; `Prepared` values stay valid.
        let n = &self.nodes[node];
        for sc in &mut self.spread {
            if sc.eligible[node]
                && sc.counts_pod(p)
                && let Some(d) = n.labels.get(&sc.spec.key)
            {
                sc.shift(d, -1);
            }
        }
        for tc in &mut self.anti {
            if let Some(v) = n.labels.get(&tc.term.key)
                && interpod::term_matches(&tc.term, p)
            {
                drop_one(&mut tc.counts, v);
            }
        }
        for ac in &mut self.affinity {
            if interpod::matches_all(&ac.terms, p) {
                for t in &ac.terms {
                    if let Some(v) = n.labels.get(&t.key) {
                        drop_one(&mut ac.counts, &(t.key.clone(), v.clone()));
                    }
                }
            }
        }
        for t in p.symmetric_anti_affinity() {
            if let (Some(v), Some(&ix)) = (n.labels.get(&t.key), self.symmetric_ix.get(t)) {
                drop_one(&mut self.symmetric[ix].counts, v);
            }
        }
        true
    }

    /// kube-scheduler's PreFilter for one pod: builds (or finds) the counts its constraints need.
    pub fn prepare(&mut self, pod: &Pod) -> Prepared {
        let mut all_keys: Vec<String> = spread::hard(pod).map(|c| c.key.clone()).collect();
        all_keys.sort();
        all_keys.dedup();
        let mut spread_refs = Vec::new();
        for (ci, c) in pod.spread.iter().enumerate() {
            if !c.is_hard() {
                continue;
            }
            let key = SpreadKey {
                all_keys: all_keys.clone(),
                matcher: (c.node_affinity_policy == InclusionPolicy::Honor).then(|| pod.node_matcher.clone()),
                tolerations: (c.node_taints_policy == InclusionPolicy::Honor).then(|| pod.tolerations.clone()),
                key: c.key.clone(),
                selector: c.selector.clone(),
                namespace: pod.namespace.clone(),
            };
            let ix = match self.spread_ix.get(&key) {
                Some(&i) => i,
                None => {
                    let sc = self.build_spread(key.clone());
                    self.spread.push(sc);
                    self.spread_ix.insert(key, self.spread.len() - 1);
                    self.spread.len() - 1
                }
            };
            spread_refs.push((ix, ci));
        }
        let mut anti = Vec::new();
        for t in &pod.anti_affinity {
            let ix = match self.anti_ix.get(t) {
                Some(&i) => i,
                None => {
                    let mut tc = TermCounter { term: t.clone(), counts: FxHashMap::default() };
                    for n in &self.nodes {
                        if let Some(v) = n.labels.get(&t.key) {
                            let c = n.pods.iter().filter(|q| interpod::term_matches(t, q)).count() as i64;
                            if c > 0 {
                                *tc.counts.entry(v.clone()).or_default() += c;
                            }
                        }
                    }
                    self.anti.push(tc);
                    self.anti_ix.insert(t.clone(), self.anti.len() - 1);
                    self.anti.len() - 1
                }
            };
            anti.push(ix);
        }
        let affinity = if pod.affinity.is_empty() {
            None
        } else {
            Some(match self.affinity_ix.get(&pod.affinity) {
                Some(&i) => i,
                None => {
                    let mut ac = AffinityCounter { terms: pod.affinity.clone(), counts: FxHashMap::default() };
                    for n in &self.nodes {
                        let c = n.pods.iter().filter(|q| interpod::matches_all(&pod.affinity, q)).count() as i64;
                        if c > 0 {
                            for t in &pod.affinity {
                                if let Some(v) = n.labels.get(&t.key) {
                                    *ac.counts.entry((t.key.clone(), v.clone())).or_default() += c;
                                }
                            }
                        }
                    }
                    self.affinity.push(ac);
                    self.affinity_ix.insert(pod.affinity.clone(), self.affinity.len() - 1);
                    self.affinity.len() - 1
                }
            })
        };
        let symmetric = (0..self.symmetric.len()).filter(|&i| interpod::term_matches(&self.symmetric[i].term, pod)).collect();
        Prepared { spread: spread_refs, anti, affinity, symmetric, symmetric_seen: self.symmetric.len() }
    }

    /// `prepare` for a pod the rules treat exactly like the one `prep` was prepared for (same namespace,
    /// labels and constraints; `solve::problem::same_rules`), from `prep`: counters are never dropped,
    /// so its indices still hold, and only the anti-affinity terms of pods added since that repel the
    /// pod are new. The same result as `prepare`, without rebuilding and hashing every counter key
    /// for every pod of a class.
    pub(crate) fn prepare_like(&self, prep: &Prepared, pod: &Pod) -> Prepared {
        let mut out = prep.clone();
        out.symmetric.extend((prep.symmetric_seen..self.symmetric.len()).filter(|&i| interpod::term_matches(&self.symmetric[i].term, pod)));
        out.symmetric_seen = self.symmetric.len();
        out
    }

    fn build_spread(&self, spec: SpreadKey) -> SpreadCounter {
        let mut sc = SpreadCounter { spec, eligible: vec![false; self.nodes.len()], counts: FxHashMap::default(), hist: BTreeMap::new() };
        for (i, n) in self.nodes.iter().enumerate() {
            if !sc.includes(&n.labels, &n.taints, Some(&n.name)) {
                continue;
            }
            sc.eligible[i] = true;
            let d = n.labels[&sc.spec.key].clone();
            let cnt = n.pods.iter().filter(|q| sc.counts_pod(q)).count() as i64;
            *sc.counts.entry(d).or_default() += cnt;
        }
        for &v in sc.counts.values() {
            *sc.hist.entry(v).or_default() += 1;
        }
        sc
    }

    /// Runs every Filter plugin for `pod` on node `node`; the first rejection wins.
    pub fn filter(&self, prep: &Prepared, pod: &Pod, node: usize) -> Result<(), Reject> {
        self.filter_node(prep, pod, &self.nodes[node], self.planned[node], true)
    }

    /// Runs every Filter plugin for `pod` on a node the plan would launch that is not in the state yet,
    /// as if it were added with `add_planned_node` (empty apart from the pods it carries): what
    /// kube-scheduler would say once the node exists, and the hostname rule on planned nodes.
    pub(crate) fn filter_new(&self, prep: &Prepared, pod: &Pod, node: &SimNode<'_>) -> Result<(), Reject> {
        self.filter_node(prep, pod, node, true, false)
    }

    fn filter_node(&self, prep: &Prepared, pod: &Pod, n: &SimNode<'_>, planned: bool, in_state: bool) -> Result<(), Reject> {
        let intent = planned && self.hostname == HostnameSpread::Intent;
        super::invalid_spec(pod)?;
        taints::filter(&n.taints, n.unschedulable, &pod.tolerations, pod.hardened.prefer_no_schedule)?;
        node_affinity::filter(&pod.node_matcher, &n.labels, Some(&n.name))?;
        ports::filter(&n.ports, &pod.host_ports)?;
        resources::fit(&pod.requests, &n.free())?;
        volume_limits::filter(&n.attach_limits, n.pods.iter().copied(), pod)?;
        volumes::filter(&pod.volumes, &n.labels, Some(&n.name))?;
        for &(sci, ci) in &prep.spread {
            let c = &pod.spread[ci];
            let Some(d) = n.labels.get(&c.key) else {
                return Err(spread::reject_missing_label());
            };
            let sc = &self.spread[sci];
            let mut match_num = sc.counts.get(d).copied().unwrap_or(0);
            let mut min = sc.min();
            let mut domains = sc.counts.len();
            if !in_state && sc.includes(&n.labels, &n.taints, Some(&n.name)) {
                let own = n.pods.iter().filter(|q| sc.counts_pod(q)).count() as i64;
                if sc.counts.contains_key(d) {
                    match_num += own;
                } else {
                    domains += 1;
                    min = Some(min.map_or(own, |m| m.min(own)));
                    match_num = own;
                }
            }
            let min = spread::global_min(min, domains, c.min_domains);
            let self_match = spread::self_match(c, pod);
            if !spread::skew_ok(match_num, self_match, min, c.max_skew) {
                return Err(spread::reject_skew());
            }
            if intent && c.key == keys::HOSTNAME && !c.defaulted && !spread::intent_ok(match_num, self_match, c.max_skew) {
                return Err(spread::reject_intent());
            }
        }
        if let Some(ai) = prep.affinity {
            let ac = &self.affinity[ai];
            let own = if in_state { 0 } else { n.pods.iter().filter(|q| interpod::matches_all(&ac.terms, q)).count() as i64 };
            let mut pods_exist = true;
            for t in &ac.terms {
                let Some(v) = n.labels.get(&t.key) else {
                    return Err(interpod::reject_affinity_missing_key());
                };
                if ac.counts.get(&(t.key.clone(), v.clone())).copied().unwrap_or(0) + own <= 0 {
                    pods_exist = false;
                }
            }
            let first_pod = ac.counts.is_empty() && own == 0 && interpod::matches_all(&ac.terms, pod);
            if !(pods_exist || first_pod) {
                return Err(interpod::reject_affinity());
            }
        }
        for &ai in &prep.anti {
            let tc = &self.anti[ai];
            if let Some(v) = n.labels.get(&tc.term.key) {
                let own = if in_state { 0 } else { n.pods.iter().filter(|q| interpod::term_matches(&tc.term, q)).count() as i64 };
                if tc.counts.get(v).copied().unwrap_or(0) + own > 0 {
                    return Err(interpod::reject_anti_affinity());
                }
            }
        }
        for &si in &prep.symmetric {
            let tc = &self.symmetric[si];
            if let Some(v) = n.labels.get(&tc.term.key)
                && tc.counts.get(v).copied().unwrap_or(0) > 0
            {
                return Err(interpod::reject_existing_anti_affinity());
            }
        }
        if !in_state {
            // Pods already on the new node with required anti-affinity that repel this pod.
            for q in &n.pods {
                for t in q.symmetric_anti_affinity() {
                    if n.labels.contains_key(&t.key) && interpod::term_matches(t, pod) {
                        return Err(interpod::reject_existing_anti_affinity());
                    }
                }
            }
        }
        // Not kube-scheduler's: the node's launch must keep its NodePool's minValues (Strict).
        if planned
            && self.min_values == MinValuesPolicy::Strict
            && let Some(l) = &n.launch
        {
            min_values::admit(l, &n.labels, &n.pods, pod)?;
        }
        Ok(())
    }

    /// For the pod's `k`-th hard spread constraint (in `Prepared` order): the index of the constraint in
    /// `pod.spread`, the per-domain counts over eligible nodes, and the smallest count.
    pub(crate) fn spread_view(&self, prep: &Prepared, k: usize) -> (usize, &FxHashMap<String, i64>, Option<i64>) {
        let (sci, ci) = prep.spread[k];
        let sc = &self.spread[sci];
        (ci, &sc.counts, sc.min())
    }

    pub(crate) fn spread_len(prep: &Prepared) -> usize {
        prep.spread.len()
    }

    /// Prepares and filters in one call.
    pub fn check(&mut self, pod: &Pod, node: usize) -> Result<(), Reject> {
        let prep = self.prepare(pod);
        self.filter(&prep, pod, node)
    }

    /// Every node's verdict for the pod.
    pub fn verdicts(&mut self, pod: &Pod) -> Vec<Result<(), Reject>> {
        let prep = self.prepare(pod);
        (0..self.nodes.len()).map(|i| self.filter(&prep, pod, i)).collect()
    }
}
