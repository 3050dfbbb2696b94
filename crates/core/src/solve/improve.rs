//! Local improvement of a valid plan: move pods out of a new node into room other nodes already have,
//! so that the node can move to a cheaper instance type of its group (or go away), without changing
//! anything kube-scheduler or the objective can see except node prices.
//!
//! A pod `q` may move from node `A` to node `B` only when the move is invisible to every topology rule:
//! for every topology key `K` that `q`'s own spread constraints and (anti-)affinity terms use, or that
//! a spread constraint or (anti-)affinity term of any pod of the snapshot matching `q` uses,
//! `A[K] = B[K]`; hostname is one of those keys only for pods no such rule reads, since `A` and `B`
//! always differ on it. Then every domain count at every step of the bind order is unchanged, and `B`
//! passing kube-scheduler's filters with every other pod of the plan on it (the final state) implies it
//! passes them when `q` binds (pods only arrive). Preferred node affinity and untolerated
//! PreferNoSchedule taints must cost the same on `A` and `B`, so the soft terms of the objective do not
//! change. The moved pod keeps its place in the
//! bind order.
//!
//! Two pods that differ only in their requests (same namespace, labels and constraints) may also
//! exchange nodes *and* places in the bind order: every selector matches both or neither, so every
//! domain count at every step is unchanged, and each node's final load still fits. This moves pods
//! whose hostname a rule reads (one-per-node pods, hostname spreads), which single moves cannot.
//!
//! Node `A` is shrunk step by step: for the next cheaper configuration `g` of its group, pods are moved
//! off it until its requests fit `g`'s allocatable (largest share of the excess first, each to the node
//! that fits it most tightly by cpu), or exchanged for a look-alike on a node with room for it, when
//! that lowers the excess; if the excess cannot be covered the attempt is undone. Each scan ends with
//! pair re-splits (`State::repack_pairs`): two new nodes of one group share out their movable pods
//! again when that makes the pair cheaper, or gathers its free room on one node at equal cost. The plan
//! is replayed at the end, and the original is kept if it does not replay or is not cheaper.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::problem::{Problem, rule_signature, same_rules};
use super::resize::{downsize, remove_empty_nodes};
use super::{Outcome, Target, objective, placement_soft, scheduler_state, verify};
use crate::domain::labels::{Labels, keys};
use crate::domain::pod::PodId;
use crate::domain::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};
use crate::semantics::filter::{FilterState, Prepared};
use crate::semantics::{interpod, node_affinity, selectors};

/// Topology keys whose domain a pod of each class must keep, or `None` when the pod must stay on its
/// node (a rule reads its hostname).
fn pinned_keys(p: &Problem) -> Vec<Option<Vec<String>>> {
    // Every (key, rule) that reads pods: spread selectors and (anti-)affinity terms of every pod.
    let mut spreads: Vec<(&str, &Option<crate::domain::labels::LabelSelector>, &str)> = Vec::new();
    let mut terms: Vec<&crate::domain::pod::PodAffinityTerm> = Vec::new();
    for pod in &p.cluster.pods {
        for c in &pod.spread {
            spreads.push((c.key.as_str(), &c.selector, pod.namespace.as_str()));
        }
        terms.extend(pod.affinity.iter().chain(pod.anti_affinity.iter()));
        terms.extend(pod.preferred_affinity.iter().chain(pod.preferred_anti_affinity.iter()).map(|w| &w.term));
    }
    for d in &p.cluster.daemonsets {
        terms.extend(d.template.affinity.iter().chain(d.template.anti_affinity.iter()));
    }
    spreads.sort();
    spreads.dedup();
    terms.sort();
    terms.dedup();
    p.classes
        .iter()
        .map(|class| {
            let q = p.pod(class.rep);
            let mut ks: Vec<String> = Vec::new();
            ks.extend(q.spread.iter().map(|c| c.key.clone()));
            ks.extend(q.affinity.iter().chain(q.anti_affinity.iter()).map(|t| t.key.clone()));
            ks.extend(q.preferred_affinity.iter().chain(q.preferred_anti_affinity.iter()).map(|w| w.term.key.clone()));
            for (key, sel, ns) in &spreads {
                if *ns == q.namespace && selectors::opt_matches(sel.as_ref(), &q.labels) {
                    ks.push(key.to_string());
                }
            }
            for t in &terms {
                if interpod::term_matches(t, q) {
                    ks.push(t.key.clone());
                }
            }
            ks.sort();
            ks.dedup();
            (!ks.iter().any(|k| k == keys::HOSTNAME) && q.host_ports.is_empty()).then_some(ks)
        })
        .collect()
}

fn same_domains(ks: &[String], a: &Labels, b: &Labels) -> bool {
    ks.iter().all(|k| a.get(k) == b.get(k))
}

/// Scans over the new nodes, at most.
const PASSES: usize = 3;

struct State<'p, 'a> {
    p: &'p Problem<'a>,
    fs: FilterState<'a>,
    /// Per FilterState node: the target it stands for (None: not a target).
    target_of: Vec<Option<Target>>,
    new_ix: Vec<usize>,
    new_nodes: Vec<usize>,
    /// Pods on each FilterState node (plan pods only).
    on: Vec<Vec<PodId>>,
    pinned: Vec<Option<Vec<String>>>,
    /// Index of each pod's placement.
    placement_of: PerPod,
    placements: Vec<(PodId, Target)>,
    /// (free cpu, node) of every target node.
    free: BTreeSet<(i64, usize)>,
    /// FilterState node of each plan pod.
    node_of: PerPod,
    /// Per class: its look-alike group (classes whose pods differ only in their requests).
    look_alike: Vec<usize>,
    /// Plan pods per look-alike group, in bind order.
    /// With each pod its class: peers of one group with equal requests are of one class (the rules
    /// are the same), so the exchange scan tells them apart and reads requests by class, not by pod.
    peers: Vec<Vec<(PodId, usize)>>,
    /// Bumped by every change of the state (`update`).
    version: u64,
    /// (class, node) pairs for which `destination` found nothing, at the state's version then: pods of
    /// a class are alike to every rule and in their requests, so until the state changes the answer is
    /// the same. A node that cannot shed its pods asks once per class instead of once per pod, each a
    /// scan over every node with the cpu (most of the improvement's time at 100,000 pods).
    no_destination: FxHashMap<(usize, usize), u64>,
    /// The same for `exchange_partner`, with the capacity it was asked for.
    no_partner: FxHashMap<(usize, usize), (u64, Resources)>,
    /// Per class: the view its last pod was prepared with (`FilterState::prepare_like`; counters are
    /// never dropped, pods leaving nodes included).
    prepared: Vec<Option<Prepared>>,
}

impl<'a> State<'_, 'a> {
    /// kube-scheduler's PreFilter view for pod `id`, from its class's last one when there is one: the
    /// same view as `FilterState::prepare`, without building and hashing every counter key per pod.
    fn prepare(&mut self, id: PodId) -> Prepared {
        let (pod, class) = (self.p.pod(id), self.p.class_of[&id]);
        let prep = match &self.prepared[class] {
            Some(like) => self.fs.prepare_like(like, pod),
            None => self.fs.prepare(pod),
        };
        self.prepared[class] = Some(prep.clone());
        prep
    }

    /// The tightest node (by cpu left) other than `from` that takes pod `id` invisibly.
    fn destination(&mut self, id: PodId, from: usize) -> Option<usize> {
        let p = self.p;
        let pod = p.pod(id);
        let class = p.class_of[&id];
        if self.pinned[class].is_none() || self.no_destination.get(&(class, from)) == Some(&self.version) {
            return None;
        }
        let prep = self.prepare(id);
        let ks = self.pinned[class].as_ref()?;
        let (from_labels, from_name) = (&self.fs.nodes()[from].labels, self.fs.nodes()[from].name.as_str());
        let soft = placement_soft(p.weights, pod, from_labels, Some(from_name), &self.fs.nodes()[from].taints);
        // Nodes come by increasing free cpu: the first that takes the pod fits it most tightly.
        for &(_, ix) in self.free.range((pod.requests.cpu_m, 0)..) {
            if ix == from {
                continue;
            }
            let n = &self.fs.nodes()[ix];
            if !pod.requests.fits_beside(&n.requested, &n.allocatable) || !same_domains(ks, from_labels, &n.labels) || placement_soft(p.weights, pod, &n.labels, Some(&n.name), &n.taints) != soft {
                continue;
            }
            if self.fs.filter(&prep, pod, ix).is_ok() {
                return Some(ix);
            }
        }
        self.no_destination.insert((class, from), self.version);
        None
    }

    /// Runs `change` on FilterState node `ix` and keeps the free-cpu index current.
    fn update(&mut self, ix: usize, change: impl FnOnce(&mut FilterState<'a>)) {
        let before = self.fs.nodes()[ix].free().cpu_m;
        self.version += 1;
        change(&mut self.fs);
        if self.free.remove(&(before, ix)) {
            self.free.insert((self.fs.nodes()[ix].free().cpu_m, ix));
        }
    }

    fn relocate(&mut self, id: PodId, from: usize, to: usize) {
        let pod = self.p.pod(id);
        self.update(from, |fs| {
            fs.remove_pod(pod, from);
        });
        self.update(to, |fs| fs.add_pod(pod, to));
        self.on[from].retain(|&x| x != id);
        self.on[to].push(id);
        self.node_of.insert(id, to);
        let i = self.placement_of[&id];
        self.placements[i].1 = self.target_of[to].expect("moves go to targets");
    }

    /// The dearest configuration of new node `k`'s group that is cheaper than its current one and still
    /// holds its DaemonSet pods and the pods that cannot move (they may still be exchanged for smaller
    /// look-alikes, which this does not count on).
    fn next_step(&self, k: usize) -> Option<usize> {
        let p = self.p;
        let ix = self.new_ix[k];
        let cur = &p.configs[self.new_nodes[k]];
        let mut floor = self.fs.nodes()[ix].requested.clone();
        for id in &self.on[ix] {
            if self.pinned[p.class_of[id]].is_some() {
                floor.sub(&p.pod(*id).requests);
            }
        }
        p.groups[cur.group]
            .iter()
            .map(|&g| g as usize)
            .filter(|&g| p.configs[g].cost < cur.cost && floor.fits_in(&p.configs[g].allocatable))
            .max_by(|&a, &b| p.configs[a].cost.total_cmp(&p.configs[b].cost).then(b.cmp(&a)))
    }

    /// Moves pods off new node `k` until it fits configuration `g`'s allocatable; undoes the moves and
    /// returns false if it cannot.
    fn shed(&mut self, k: usize, g: Option<usize>) -> bool {
        let p = self.p;
        let ix = self.new_ix[k];
        let cap = g.map_or_else(Resources::default, |g| p.configs[g].allocatable.clone());
        let mut done: Vec<Move> = Vec::new();
        // Emptying takes moves only; stepping down may also exchange pods.
        let mut candidates: Vec<PodId> = self.on[ix].clone();
        if g.is_none() && candidates.iter().any(|id| self.pinned[p.class_of[id]].is_none()) {
            return false; // a pod that cannot move keeps the node
        }
        loop {
            let requested = &self.fs.nodes()[ix].requested;
            let fits = match g {
                None => self.on[ix].is_empty(),
                Some(_) => requested.fits_in(&cap),
            };
            if fits {
                return true;
            }
            let excess = requested.minus(&cap);
            // The pod covering the largest share of the excess (cpu and memory, each relative to it).
            let share = |q: &Resources| -> f64 {
                let c = if excess.cpu_m > 0 { q.cpu_m.min(excess.cpu_m) as f64 / excess.cpu_m as f64 } else { 0.0 };
                let m = if excess.memory > 0 { q.memory.min(excess.memory) as f64 / excess.memory as f64 } else { 0.0 };
                c + m
            };
            candidates.sort_by(|a, b| share(&p.pod(*a).requests).total_cmp(&share(&p.pod(*b).requests)));
            let mut step = None;
            while let Some(id) = candidates.pop() {
                if g.is_some() && share(&p.pod(id).requests) <= 0.0 {
                    break;
                }
                if let Some(to) = self.destination(id, ix) {
                    self.relocate(id, ix, to);
                    step = Some(Move::Relocate(id, to));
                    break;
                }
                if g.is_some()
                    && let Some(other) = self.exchange_partner(id, ix, &cap)
                {
                    self.swap(id, other);
                    // The pod that arrives here may leave again.
                    candidates.push(other);
                    step = Some(Move::Swap(id, other));
                    break;
                }
            }
            match step {
                Some(m) => done.push(m),
                None => {
                    for m in done.into_iter().rev() {
                        match m {
                            Move::Relocate(id, to) => self.relocate(id, to, ix),
                            Move::Swap(a, b) => self.swap(a, b),
                        }
                    }
                    return false;
                }
            }
        }
    }

    /// A pod that kube-scheduler's rules cannot tell from `id` (same namespace, labels and scheduling
    /// constraints; only the requests differ) on another node that has room for `id` in its place, such
    /// that exchanging the two (nodes and places in the bind order) leaves `from` less over `cap`:
    /// every domain count at every step stays as it was. The one leaving the least excess, then the
    /// tightest fit by cpu.
    fn exchange_partner(&mut self, id: PodId, from: usize, cap: &Resources) -> Option<PodId> {
        let p = self.p;
        let q = p.pod(id);
        // Two pods with attach volumes may bring different volumes to a node (NodeVolumeLimits counts
        // distinct volumes): not exchanged, only moved through the filters.
        if !q.volumes.attach.is_empty() {
            return None;
        }
        let class = p.class_of[&id];
        if self.no_partner.get(&(class, from)).is_some_and(|(v, c)| *v == self.version && c == cap) {
            return None;
        }
        let load = &self.fs.nodes()[from].requested;
        let now = excess(load, cap);
        let mut best: Option<(f64, i64, PodId)> = None;
        for &(other, other_class) in self.peers[self.look_alike[class]].iter().take(PEER_SCAN) {
            // The same class: the same requests, nothing to gain.
            if other_class == class {
                continue;
            }
            // The exchange's gain first: it reads the class's requests only and rules out most peers
            // before their node and their own pod (a cache miss each, 512 peers per step) are read.
            let o = p.pod(p.classes[other_class].rep);
            let after = excess_exchanged(load, &q.requests, &o.requests, cap);
            if after >= now - 1e-12 {
                continue;
            }
            let at = self.node_of[&other];
            if at == from || !p.pod(other).volumes.attach.is_empty() {
                continue;
            }
            let node = &self.fs.nodes()[at];
            let Some(left) = room_after_exchange(&node.requested, &o.requests, &q.requests, &node.allocatable) else {
                continue;
            };
            if best.is_none_or(|(b, l, _)| (after, left) < (b, l)) {
                best = Some((after, left, other));
            }
        }
        if best.is_none() {
            self.no_partner.insert((class, from), (self.version, cap.clone()));
        }
        best.map(|(_, _, other)| other)
    }

    /// Exchanges two plan pods' nodes and places in the bind order.
    fn swap(&mut self, a: PodId, b: PodId) {
        let p = self.p;
        let (na, nb) = (self.node_of[&a], self.node_of[&b]);
        self.update(na, |fs| {
            fs.remove_pod(p.pod(a), na);
        });
        self.update(nb, |fs| {
            fs.remove_pod(p.pod(b), nb);
        });
        self.update(na, |fs| fs.add_pod(p.pod(b), na));
        self.update(nb, |fs| fs.add_pod(p.pod(a), nb));
        for id in self.on[na].iter_mut() {
            if *id == a {
                *id = b;
            }
        }
        for id in self.on[nb].iter_mut() {
            if *id == b {
                *id = a;
            }
        }
        self.node_of.insert(a, nb);
        self.node_of.insert(b, na);
        let (i, j) = (self.placement_of[&a], self.placement_of[&b]);
        self.placements[i].0 = b;
        self.placements[j].0 = a;
        self.placement_of.insert(a, j);
        self.placement_of.insert(b, i);
    }
}

impl State<'_, '_> {
    /// Pairs of live new nodes of one group pool the pods that may move between them (`pinned` keys
    /// agree on both, equal preferred-affinity score) and split them again, when another split lets
    /// the two take configurations of the group that cost less in sum: one may grow while the other
    /// shrinks more, which `shed` (moves into room that exists) cannot do. Splits are enumerated over
    /// pod shapes (pods with equal requests are interchangeable), at most `SPLITS` per pair and
    /// `PAIR_WORK` in all. A split that costs the same is taken when it gathers the pair's free room
    /// on one node (`closeness` below), so that a later move or pair completes a step down: on
    /// karpenter-1000 that is worth 1.6 $/h (227.56 → 225.99) where cheaper splits alone find nothing.
    /// Moves go through kube-scheduler's filters on the final nodes; a pair whose moves do not pass is
    /// restored. Returns whether anything changed.
    fn repack_pairs(&mut self, gone: &[bool], spent: super::Spent) -> bool {
        let p = self.p;
        let live: Vec<usize> = (0..self.new_nodes.len()).filter(|&k| !gone[k]).collect();
        let menu = Menu::new(p, &self.fs, live.iter().map(|&k| (self.new_nodes[k], self.new_ix[k])));
        // Requests of every plan pod that may move at all, as dense vectors.
        let mut shape_of: FxHashMap<PodId, Vec<i64>> = FxHashMap::default();
        for &k in &live {
            for id in &self.on[self.new_ix[k]] {
                if self.pinned[p.class_of[id]].is_some() {
                    shape_of.insert(*id, menu.dense(&p.pod(*id).requests));
                }
            }
        }
        let mut changed = false;
        let mut work = 0usize;
        let mut pairs = 0usize;
        for (ai, &a) in live.iter().enumerate() {
            if spent() {
                return changed;
            }
            for &b in &live[ai + 1..] {
                if work >= PAIR_WORK || pairs >= MAX_PAIRS {
                    return changed;
                }
                if p.configs[self.new_nodes[b]].group != p.configs[self.new_nodes[a]].group {
                    continue;
                }
                pairs += 1;
                work += PAIR_COST;
                if let Some((shapes, digits, ca, cb)) = self.best_split(&menu, &shape_of, a, b, &mut work)
                    && self.resplit(a, b, &shapes, &digits, ca, cb)
                {
                    changed = true;
                }
            }
        }
        changed
    }

    /// The movable pods of new nodes `a` and `b` (`pinned` keys agree on both, equal preferred-affinity
    /// score), grouped by shape (dense requests), in the order the nodes hold them.
    fn pair_shapes(&self, shape_of: &FxHashMap<PodId, Vec<i64>>, a: usize, b: usize) -> Shapes {
        let p = self.p;
        let (ia, ib) = (self.new_ix[a], self.new_ix[b]);
        let (na, nb) = (&self.fs.nodes()[ia], &self.fs.nodes()[ib]);
        let movable = |id: &PodId| -> bool {
            let pod = p.pod(*id);
            self.pinned[p.class_of[id]].as_ref().is_some_and(|ks| same_domains(ks, &na.labels, &nb.labels))
                && node_affinity::preferred_shortfall(&pod.preferred_node, &na.labels, Some(&na.name)) == node_affinity::preferred_shortfall(&pod.preferred_node, &nb.labels, Some(&nb.name))
        };
        let mut shapes: Shapes = Vec::new();
        for id in self.on[ia].iter().chain(&self.on[ib]).filter(|id| movable(id)) {
            let r = &shape_of[id];
            match shapes.iter_mut().find(|s| &s.0 == r) {
                Some(s) => s.1.push(*id),
                None => shapes.push((r.clone(), vec![*id])),
            }
        }
        shapes
    }

    /// The best split of the movable pods of new nodes `a` and `b` (of one group) over two
    /// configurations of the group, if one costs less than the pair now or the same and gathers more
    /// free room on one node: the pods by shape, how many of each shape go to `b`, and the two
    /// configurations. Counts configurations checked in `work`.
    fn best_split(&self, menu: &Menu, shape_of: &FxHashMap<PodId, Vec<i64>>, a: usize, b: usize, work: &mut usize) -> Option<(Shapes, Vec<usize>, usize, usize)> {
        let p = self.p;
        let (fa, fb) = (self.new_nodes[a], self.new_nodes[b]);
        let g = p.configs[fa].group;
        let (ia, ib) = (self.new_ix[a], self.new_ix[b]);
        let (na, nb) = (&self.fs.nodes()[ia], &self.fs.nodes()[ib]);
        let shapes = self.pair_shapes(shape_of, a, b);
        let splits = shapes.iter().try_fold(1usize, |acc, s| acc.checked_mul(s.1.len() + 1)).unwrap_or(usize::MAX);
        if shapes.is_empty() || splits > SPLITS {
            return None;
        }
        // Fixed load of each node: everything but its movable pods.
        let (now_a, now_b) = (menu.dense(&na.requested), menu.dense(&nb.requested));
        let mut load_a = now_a.clone();
        let mut load_b = now_b.clone();
        let sub = |x: &mut [i64], r: &[i64]| x.iter_mut().zip(r).for_each(|(v, d)| *v -= d);
        let add = |x: &mut [i64], r: &[i64]| x.iter_mut().zip(r).for_each(|(v, d)| *v += d);
        for (r, ids) in &shapes {
            for id in ids {
                if self.node_of[id] == ia { sub(&mut load_a, r) } else { sub(&mut load_b, r) }
            }
        }
        // Start with every movable pod on a; digit s = pods of shape s on b.
        for (r, ids) in &shapes {
            for _ in ids {
                add(&mut load_a, r);
            }
        }
        // Lower cost first (prices closer than `tol` count as equal: catalogs round them), then
        // more free room gathered on one node: Φ = closeness(a) + closeness(b) rises, so a later
        // move or pair can complete a step down. Φ is bounded, so equal-cost splits end.
        let now = p.configs[fa].cost + p.configs[fb].cost;
        let tol = 1e-6 * now;
        let floor = p.configs[menu.by_cost[&g][0]].cost;
        let phi_now = menu.closeness(fa, &now_a) + menu.closeness(fb, &now_b);
        let mut best: Option<(f64, f64, Vec<usize>, usize, usize)> = None;
        let mut digits = vec![0usize; shapes.len()];
        loop {
            if let Some(ca) = menu.cheapest(g, &load_a, now + tol - floor, work)
                && let Some(cb) = menu.cheapest(g, &load_b, now + tol - p.configs[ca].cost, work)
            {
                let c = p.configs[ca].cost + p.configs[cb].cost;
                if c < now + tol {
                    let phi = menu.closeness(ca, &load_a) + menu.closeness(cb, &load_b);
                    let gain = if c < now - tol { true } else { phi > phi_now + 1e-9 };
                    let better = best.as_ref().is_none_or(|b| if (c - b.0).abs() <= tol { phi > b.1 + 1e-9 } else { c < b.0 });
                    if gain && better {
                        best = Some((c, phi, digits.clone(), ca, cb));
                    }
                }
            }
            // Next split: move one more pod of the first shape that has one left to b.
            let mut s = 0;
            while s < shapes.len() && digits[s] == shapes[s].1.len() {
                for _ in 0..digits[s] {
                    sub(&mut load_b, &shapes[s].0);
                    add(&mut load_a, &shapes[s].0);
                }
                digits[s] = 0;
                s += 1;
            }
            if s == shapes.len() {
                break;
            }
            digits[s] += 1;
            sub(&mut load_a, &shapes[s].0);
            add(&mut load_b, &shapes[s].0);
        }
        best.map(|(_, _, digits, ca, cb)| (shapes, digits, ca, cb))
    }

    /// Puts `digits[s]` pods of shape `s` on new node `b` and the rest on `a`, and gives the nodes
    /// configurations `ca` and `cb`; every pod that changes node must pass the filters there. Restores
    /// everything and returns false if one does not.
    fn resplit(&mut self, a: usize, b: usize, shapes: &[(Vec<i64>, Vec<PodId>)], digits: &[usize], ca: usize, cb: usize) -> bool {
        let p = self.p;
        let (ia, ib) = (self.new_ix[a], self.new_ix[b]);
        // Which pods go where: keep pods in place where the split allows.
        let mut moves: Vec<(PodId, usize, usize)> = Vec::new();
        for ((_, ids), &on_b) in shapes.iter().zip(digits) {
            let at_b: Vec<PodId> = ids.iter().copied().filter(|id| self.node_of[id] == ib).collect();
            let at_a: Vec<PodId> = ids.iter().copied().filter(|id| self.node_of[id] == ia).collect();
            if at_b.len() > on_b {
                moves.extend(at_b[on_b..].iter().map(|&id| (id, ib, ia)));
            } else {
                moves.extend(at_a[..on_b - at_b.len()].iter().map(|&id| (id, ia, ib)));
            }
        }
        let old = (self.new_nodes[a], self.new_nodes[b]);
        for &(id, from, _) in &moves {
            self.update(from, |fs| {
                fs.remove_pod(p.pod(id), from);
            });
        }
        let (alloc_a, alloc_b) = (p.configs[ca].allocatable.clone(), p.configs[cb].allocatable.clone());
        self.update(ia, |fs| fs.set_allocatable(ia, alloc_a));
        self.update(ib, |fs| fs.set_allocatable(ib, alloc_b));
        let mut added: Vec<(PodId, usize)> = Vec::new();
        let mut ok = true;
        for &(id, _, to) in &moves {
            let pod = p.pod(id);
            let prep = self.prepare(id);
            if self.fs.filter(&prep, pod, to).is_err() {
                ok = false;
                break;
            }
            self.update(to, |fs| fs.add_pod(pod, to));
            added.push((id, to));
        }
        if !ok {
            for &(id, to) in &added {
                self.update(to, |fs| {
                    fs.remove_pod(p.pod(id), to);
                });
            }
            let (alloc_a, alloc_b) = (p.configs[old.0].allocatable.clone(), p.configs[old.1].allocatable.clone());
            self.update(ia, |fs| fs.set_allocatable(ia, alloc_a));
            self.update(ib, |fs| fs.set_allocatable(ib, alloc_b));
            for &(id, from, _) in &moves {
                self.update(from, |fs| fs.add_pod(p.pod(id), from));
            }
            return false;
        }
        for &(id, from, to) in &moves {
            self.on[from].retain(|&x| x != id);
            self.on[to].push(id);
            self.node_of.insert(id, to);
            let i = self.placement_of[&id];
            self.placements[i].1 = self.target_of[to].expect("pairs are new nodes");
        }
        self.new_nodes[a] = ca;
        self.new_nodes[b] = cb;
        true
    }
}

/// Movable pods of a pair of nodes grouped by shape (dense requests): each shape with its pods.
type Shapes = Vec<(Vec<i64>, Vec<PodId>)>;

/// What `repack_pairs` looks up for every split: the configurations of the live nodes' groups with
/// their allocatable as dense vectors over the resources any live node uses, so the split search
/// neither allocates nor compares resource names.
struct Menu {
    dims: Vec<String>,
    /// Per group of a live node: its configurations in cost order.
    by_cost: FxHashMap<usize, Vec<usize>>,
    alloc: FxHashMap<usize, Vec<i64>>,
    /// Room a step down from each configuration gives up: its allocatable minus that of the dearest
    /// cheaper configuration of its group.
    step: FxHashMap<usize, Vec<i64>>,
    /// Per group, in cost order: (configuration, cost, allocatable).
    menu: FxHashMap<usize, Vec<(usize, f64, Vec<i64>)>>,
}

impl Menu {
    /// The menu for live new nodes given as (configuration, FilterState node).
    fn new(p: &Problem, fs: &FilterState, live: impl Iterator<Item = (usize, usize)> + Clone) -> Menu {
        let mut by_cost: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
        for (f, _) in live.clone() {
            let g = p.configs[f].group;
            by_cost.entry(g).or_insert_with(|| {
                let mut v: Vec<usize> = p.groups[g].iter().map(|&f| f as usize).collect();
                v.sort_by(|&a, &b| p.configs[a].cost.total_cmp(&p.configs[b].cost).then(a.cmp(&b)));
                v
            });
        }
        let mut dims: Vec<String> = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS].iter().map(|d| d.to_string()).collect();
        for (_, ix) in live {
            for (name, _) in fs.nodes()[ix].requested.extended() {
                if !dims.contains(name) {
                    dims.push(name.clone());
                }
            }
        }
        let mut m = Menu { dims, by_cost, alloc: FxHashMap::default(), step: FxHashMap::default(), menu: FxHashMap::default() };
        m.alloc = m.by_cost.values().flatten().map(|&f| (f, m.dense(&p.configs[f].allocatable))).collect();
        for list in m.by_cost.values() {
            let mut below: Option<usize> = None;
            for (i, &f) in list.iter().enumerate() {
                if i > 0 && p.configs[list[i - 1]].cost < p.configs[f].cost {
                    below = Some(list[i - 1]);
                }
                if let Some(b) = below {
                    m.step.insert(f, m.alloc[&f].iter().zip(&m.alloc[&b]).map(|(x, y)| x - y).collect());
                }
            }
        }
        m.menu = m.by_cost.iter().map(|(&g, list)| (g, list.iter().map(|&f| (f, p.configs[f].cost, m.alloc[&f].clone())).collect())).collect();
        m
    }

    fn dense(&self, r: &Resources) -> Vec<i64> {
        self.dims.iter().map(|d| r.get(d)).collect()
    }

    /// The cheapest configuration of group g that holds `load` and costs less than `limit`
    /// (NodeResourcesFit: only requested resources are compared); `checks` counts the work.
    fn cheapest(&self, g: usize, load: &[i64], limit: f64, checks: &mut usize) -> Option<usize> {
        for (f, cost, a) in &self.menu[&g] {
            if *cost >= limit {
                return None;
            }
            *checks += 1;
            if load.iter().zip(a).all(|(l, a)| *l <= 0 || l <= a) {
                return Some(*f);
            }
        }
        None
    }

    /// How much of a step down a node of configuration f with `load` has gathered: per resource the
    /// share of the step that is free, squared (so gathering it on one node counts), summed.
    fn closeness(&self, f: usize, load: &[i64]) -> f64 {
        let Some(st) = self.step.get(&f) else { return 0.0 };
        st.iter().zip(&self.alloc[&f]).zip(load).filter(|((v, _), _)| **v > 0).map(|((v, a), l)| ((a - l) as f64 / *v as f64).clamp(0.0, 1.0).powi(2)).sum::<f64>()
    }
}

/// Splits enumerated for one pair of nodes, at most; work (configurations checked against a split's
/// loads, and `PAIR_COST` per pair looked at) per `repack_pairs`, at most: a count, unlike a clock,
/// keeps plans deterministic. karpenter-1000 takes about 720,000 per call; karpenter-5000 and openb-7d
/// (hundreds of configurations per group) reach the cap.
const SPLITS: usize = 4096;
const PAIR_COST: usize = 16;
const PAIR_WORK: usize = 1_000_000;
/// Pairs of one group looked at per `repack_pairs`, at most: karpenter-1000 has about 6,600; at
/// karpenter-20000 (4,000 nodes) this bounds the time the pairs add.
const MAX_PAIRS: usize = 20_000;

/// One change `shed` made, to undo it.
#[derive(Clone, Copy)]
enum Move {
    Relocate(PodId, usize),
    Swap(PodId, PodId),
}

/// Exchange partners examined per pod, at most.
/// A value per plan pod, indexed by `PodId::ix`: the dense form of a map from pods, read in the
/// inner loops (the exchange scan looks up hundreds of pods per step; hashing them was a fifth of the
/// greedy time at 100,000 pods).
#[derive(Default)]
struct PerPod(Vec<usize>);

impl PerPod {
    fn insert(&mut self, id: PodId, v: usize) {
        let i = id.ix();
        if self.0.len() <= i {
            self.0.resize(i + 1, usize::MAX);
        }
        self.0[i] = v;
    }
}

impl std::ops::Index<&PodId> for PerPod {
    type Output = usize;
    fn index(&self, id: &PodId) -> &usize {
        &self.0[id.ix()]
    }
}

impl FromIterator<(PodId, usize)> for PerPod {
    fn from_iter<I: IntoIterator<Item = (PodId, usize)>>(iter: I) -> Self {
        let mut m = PerPod::default();
        for (id, v) in iter {
            m.insert(id, v);
        }
        m
    }
}

const PEER_SCAN: usize = 512;

/// How far `load` is over `cap`: the sum over resources of the excess relative to the cap. Exchanges
/// must lower it, so `shed` ends.
fn excess(load: &Resources, cap: &Resources) -> f64 {
    load.iter()
        .map(|(name, v)| {
            let c = cap.get(name);
            if v > c { (v - c) as f64 / c.max(1) as f64 } else { 0.0 }
        })
        .sum()
}

/// `excess(&load.minus(out).plus(inn), cap)` without building the vector: the exchange scan asks it of
/// hundreds of peers per pod (a tenth of the greedy time at 100,000 pods, most of it allocation). The
/// same terms in the same order, so the same value; vectors with extended resources take the long way.
fn excess_exchanged(load: &Resources, out: &Resources, inn: &Resources, cap: &Resources) -> f64 {
    if !(load.extended().is_empty() && out.extended().is_empty() && inn.extended().is_empty()) {
        return excess(&load.minus(out).plus(inn), cap);
    }
    let term = |l: i64, o: i64, i: i64, c: i64| {
        let v = l.saturating_sub(o).saturating_add(i);
        if v != 0 && v > c { (v - c) as f64 / c.max(1) as f64 } else { 0.0 }
    };
    [
        term(load.cpu_m, out.cpu_m, inn.cpu_m, cap.cpu_m),
        term(load.memory, out.memory, inn.memory, cap.memory),
        term(load.ephemeral, out.ephemeral, inn.ephemeral, cap.ephemeral),
        term(load.pods, out.pods, inn.pods, cap.pods),
    ]
    .into_iter()
    .sum()
}

/// The cpu left on a node with `requested` on it once `out` leaves and `inn` arrives, if `inn` then
/// fits (`requested.minus(out).plus(inn).fits_in(allocatable)`, without building the vectors).
fn room_after_exchange(requested: &Resources, out: &Resources, inn: &Resources, allocatable: &Resources) -> Option<i64> {
    if !(requested.extended().is_empty() && out.extended().is_empty() && inn.extended().is_empty()) {
        let there = requested.minus(out).plus(inn);
        return there.fits_in(allocatable).then(|| allocatable.cpu_m - there.cpu_m);
    }
    let after = |r: i64, o: i64, i: i64| r.saturating_sub(o).saturating_add(i);
    let cpu = after(requested.cpu_m, out.cpu_m, inn.cpu_m);
    let fits = |v: i64, a: i64| v <= 0 || v <= a;
    (fits(cpu, allocatable.cpu_m)
        && fits(after(requested.memory, out.memory, inn.memory), allocatable.memory)
        && fits(after(requested.ephemeral, out.ephemeral, inn.ephemeral), allocatable.ephemeral)
        && fits(after(requested.pods, out.pods, inn.pods), allocatable.pods))
    .then(|| allocatable.cpu_m - cpu)
}

/// Groups the classes whose pods differ only in their requests (`same_rules`): the group of each class.
fn look_alike_groups(p: &Problem) -> Vec<usize> {
    let mut reps: FxHashMap<u64, Vec<(usize, PodId)>> = FxHashMap::default();
    let mut groups = 0;
    p.classes
        .iter()
        .map(|c| {
            let q = p.pod(c.rep);
            let bucket = reps.entry(rule_signature(q)).or_default();
            match bucket.iter().find(|(_, r)| same_rules(q, p.pod(*r))) {
                Some(&(g, _)) => g,
                None => {
                    bucket.push((groups, c.rep));
                    groups += 1;
                    groups - 1
                }
            }
        })
        .collect()
}

/// A cheaper plan than `o` by moving pods into room other nodes already have, or `None`.
pub fn shrink(p: &Problem, o: &Outcome) -> Option<Outcome> {
    shrink_within(p, o, &super::never)
}

/// [`shrink`] that stops scanning once `spent()` says the planner's budget is gone (asked before each
/// node and each pair scan); what it changed until then is kept if it replays and is cheaper.
pub(crate) fn shrink_within(p: &Problem, o: &Outcome, spent: super::Spent) -> Option<Outcome> {
    if o.new_nodes.is_empty() {
        return None;
    }
    let pinned = pinned_keys(p);
    let (mut fs, new_ix) = scheduler_state(p, &o.new_nodes);
    let mut target_of = vec![None; fs.nodes().len()];
    for &n in &p.existing {
        target_of[n] = Some(Target::Existing(n));
    }
    for (k, &ix) in new_ix.iter().enumerate() {
        target_of[ix] = Some(Target::New(k));
    }
    let mut on = vec![Vec::new(); fs.nodes().len()];
    for &(id, t) in &o.placements {
        let ix = match t {
            Target::Existing(n) => n,
            Target::New(k) => new_ix[k],
        };
        fs.add_pod(p.pod(id), ix);
        on[ix].push(id);
    }
    let mut s = State {
        p,
        fs,
        target_of,
        new_ix,
        new_nodes: o.new_nodes.clone(),
        on,
        pinned,
        placement_of: o.placements.iter().enumerate().map(|(i, (id, _))| (*id, i)).collect(),
        placements: o.placements.clone(),
        free: BTreeSet::new(),
        node_of: PerPod::default(),
        look_alike: look_alike_groups(p),
        peers: Vec::new(),
        version: 0,
        no_destination: FxHashMap::default(),
        no_partner: FxHashMap::default(),
        prepared: vec![None; p.classes.len()],
    };
    s.peers = vec![Vec::new(); s.look_alike.iter().max().map_or(0, |m| m + 1)];
    for &(id, _) in &o.placements {
        let c = p.class_of[&id];
        s.peers[s.look_alike[c]].push((id, c));
    }
    for (ix, ids) in s.on.iter().enumerate() {
        for &id in ids {
            s.node_of.insert(id, ix);
        }
    }
    for ix in 0..s.fs.nodes().len() {
        if s.target_of[ix].is_some() {
            s.free.insert((s.fs.nodes()[ix].free().cpu_m, ix));
        }
    }
    // Dearest nodes first: their steps down save the most. Moves open room elsewhere, so the scan
    // repeats while it changes something (at most PASSES times).
    let mut order: Vec<usize> = (0..s.new_nodes.len()).collect();
    order.sort_by(|&a, &b| p.configs[s.new_nodes[b]].cost.total_cmp(&p.configs[s.new_nodes[a]].cost).then(a.cmp(&b)));
    let mut gone = vec![false; s.new_nodes.len()];
    'passes: for _ in 0..PASSES {
        let mut changed = false;
        for &k in &order {
            if spent() {
                break 'passes;
            }
            if gone[k] {
                continue;
            }
            // Emptying the node saves it all; it then takes no pods either.
            if s.shed(k, None) {
                let ix = s.new_ix[k];
                let free_cpu = s.fs.nodes()[ix].free().cpu_m;
                s.free.remove(&(free_cpu, ix));
                gone[k] = true;
                changed = true;
                continue;
            }
            // Else step down while a cheaper type can be reached.
            while let Some(g) = s.next_step(k) {
                if !s.shed(k, Some(g)) {
                    break;
                }
                s.new_nodes[k] = g;
                let alloc = p.configs[g].allocatable.clone();
                let ix = s.new_ix[k];
                s.update(ix, |fs| fs.set_allocatable(ix, alloc));
                changed = true;
            }
        }
        if spent() {
            break;
        }
        if s.repack_pairs(&gone, spent) {
            changed = true;
        }
        if !changed {
            break;
        }
    }
    let mut out = Outcome { new_nodes: s.new_nodes, placements: s.placements, unschedulable: o.unschedulable.clone(), deferred: o.deferred.clone() };
    remove_empty_nodes(&mut out);
    downsize(p, &mut out);
    let better = objective(p, &out).total() < objective(p, o).total() - 1e-9;
    (better && verify(p, &out).is_empty()).then_some(out)
}
