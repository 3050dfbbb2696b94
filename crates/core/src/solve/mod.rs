//! Planners. A planner turns a [`Problem`] into an [`Outcome`]: which new nodes to launch, where each
//! pending pod goes and in which order, and which pods stay pending (with kube-scheduler's reason).
//!
//! * `greedy`: deterministic best-fit-decreasing with cost-aware node choice; fast; the MILP's warm
//!   start and fallback.
//! * `milp` (encoding) and `driver` (budget, warm start, fallback): the batch as a mixed-integer
//!   program on HiGHS.
//!
//! Every outcome is replayed through kube-scheduler's Filter semantics ([`verify`]) before it is
//! returned; planners never return a plan they have not replayed.

pub mod driver;
pub mod greedy;
pub mod improve;
mod launch;
pub mod milp;
pub mod problem;
mod relax;
mod resize;

use std::collections::BTreeMap;

use crate::domain::labels::{Labels, keys};
use crate::domain::pod::{Pod, PodId};
use crate::domain::taints::Taint;
use crate::plan::{self, NewNode, Placement, Plan, PlanTaint, SolverReport, Unschedulable};
use crate::semantics::filter::{FilterState, Prepared, SimNode};
use crate::semantics::spread::HostnameSpread;
use crate::semantics::{Reject, interpod, node_affinity, spread, taints};
use crate::weights::Weights;

pub use driver::{Planner, Solver};
pub use problem::Problem;
pub use relax::plan_cluster;

/// Whether the planner's time budget is spent: phases that may stop early (the local improvement, the
/// steps after the MILP) ask it between units of work. Only the driver reads the clock; a closure keeps
/// it there, and planning without a budget passes [`never`], which keeps plans deterministic.
pub(crate) type Spent<'a> = &'a dyn Fn() -> bool;

/// A budget that is never spent.
pub(crate) fn never() -> bool {
    false
}

/// Where a pod goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// An existing node (index into `Cluster::nodes`).
    Existing(usize),
    /// A new node (index into `Outcome::new_nodes`).
    New(usize),
}

/// A planner's answer, before it is written as a plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Configuration index of each new node.
    pub new_nodes: Vec<usize>,
    /// Bind order.
    pub placements: Vec<(PodId, Target)>,
    pub unschedulable: Vec<(PodId, Reject)>,
    /// Pods the budget cut off before they were planned (`greedy::plan_within`): not part of this
    /// batch's plan, left pending for the next batch, as Karpenter's scheduler leaves to its next loop
    /// what its timeout cut off (docs/formats.md, Time budget).
    pub deferred: Vec<PodId>,
}

/// The pieces of the objective.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Objective {
    pub nodes: f64,
    pub unschedulable: f64,
    pub soft: f64,
}

impl Objective {
    pub fn total(&self) -> f64 {
        self.nodes + self.unschedulable + self.soft
    }
}

/// Name of the `i`-th new node of a plan: `stowage-<i>`, unless the snapshot already has a node of
/// that form (`Problem::node_prefix`).
pub(crate) fn new_node_name(p: &Problem, i: usize) -> String {
    format!("{}-{i}", p.node_prefix)
}

/// The soft cost of one pod on a node (labels, name for existing nodes, taints) that does not depend on
/// the other pods: preferred node affinity (per unit of unsatisfied weight) and PreferNoSchedule taints
/// the pod does not tolerate (per taint), weighted. Shared by the objective, both planners and the
/// local improvement, so that they price a placement alike.
pub(crate) fn placement_soft(w: &Weights, pod: &Pod, labels: &Labels, name: Option<&str>, node_taints: &[Taint]) -> f64 {
    let mut soft = 0.0;
    if !pod.preferred_node.is_empty() {
        soft += w.soft.preferred_node_affinity * node_affinity::preferred_shortfall(&pod.preferred_node, labels, name) as f64;
    }
    if !node_taints.is_empty() {
        soft += w.soft.prefer_no_schedule * taints::untolerated_prefer_no_schedule(node_taints, &pod.tolerations) as f64;
    }
    soft
}

/// Evaluates an outcome under the problem's weights; a pending pod, deferred ones included (a pod
/// the budget cut off saves no money), costs its class's penalty (`Problem::pending_penalty`:
/// `unschedulablePod`, tiered by priority and queue position). Soft
/// terms counted here: `placement_soft` per pod (preferred node affinity, PreferNoSchedule taints),
/// preferred pod (anti-)affinity in the final state (`interpod_soft`) and, under `hostnameSpread:
/// intent`, the ScheduleAnyway hostname spreads' pods beyond maxSkew on new nodes
/// (`spread::intent_soft_units`). Under `Respect` and `Ignore` the soft weights are zero.
pub fn objective(p: &Problem, o: &Outcome) -> Objective {
    let w = p.weights;
    let nodes: f64 = o.new_nodes.iter().map(|&f| p.configs[f].cost).sum();
    let pending = o.unschedulable.iter().map(|(id, _)| id).chain(&o.deferred);
    let unschedulable = pending.map(|id| p.class_of.get(id).map_or(w.unschedulable_pod, |&c| p.pending_penalty[c])).sum();
    let mut soft = 0.0;
    for (pod, t) in &o.placements {
        let pod = p.pod(*pod);
        soft += match *t {
            Target::Existing(n) => {
                let node = &p.cluster.nodes[n];
                placement_soft(w, pod, &node.labels, Some(node.name.as_str()), &node.taints)
            }
            Target::New(k) => {
                let c = &p.configs[o.new_nodes[k]];
                placement_soft(w, pod, &c.labels, None, &c.taints)
            }
        };
    }
    soft += interpod_soft(p, o);
    if w.hostname_spread == HostnameSpread::Intent && w.soft.schedule_anyway_spread > 0.0 {
        let mut on_new: Vec<Vec<&Pod>> = vec![Vec::new(); o.new_nodes.len()];
        for &(id, t) in &o.placements {
            if let Target::New(k) = t {
                on_new[k].push(p.pod(id));
            }
        }
        soft += w.soft.schedule_anyway_spread * on_new.iter().map(|pods| spread::intent_soft_units(pods)).sum::<i64>() as f64;
    }
    Objective { nodes, unschedulable, soft }
}

/// Preferred pod (anti-)affinity left unmet by the placed pods in the outcome's final state
/// (`interpod::preferred_shortfall_in`: existing nodes with their bound pods, new nodes, the batch),
/// weighted. DaemonSet pods the new nodes will get are not counted.
fn interpod_soft(p: &Problem, o: &Outcome) -> f64 {
    let w = &p.weights.soft;
    if (w.preferred_pod_affinity <= 0.0 && w.preferred_pod_anti_affinity <= 0.0)
        || !o.placements.iter().any(|(id, _)| !p.pod(*id).preferred_affinity.is_empty() || !p.pod(*id).preferred_anti_affinity.is_empty())
    {
        return 0.0;
    }
    let cluster = p.cluster;
    let bound = crate::semantics::filter::bound_nodes(cluster);
    let new_labels: Vec<Labels> = (0..o.new_nodes.len())
        .map(|k| {
            let mut l = p.configs[o.new_nodes[k]].labels.clone();
            l.insert(keys::HOSTNAME.into(), new_node_name(p, k));
            l
        })
        .collect();
    let mut nodes: Vec<(&Labels, Vec<&Pod>)> = bound.iter().map(|n| (&n.labels, n.pods.clone())).chain(new_labels.iter().map(|l| (l, Vec::new()))).collect();
    let at = |t: Target| match t {
        Target::Existing(n) => n,
        Target::New(k) => cluster.nodes.len() + k,
    };
    for &(id, t) in &o.placements {
        nodes[at(t)].1.push(p.pod(id));
    }
    let (aff, anti) = interpod::preferred_shortfall_in(&nodes, o.placements.iter().map(|&(id, t)| (p.pod(id), at(t))));
    w.preferred_pod_affinity * aff as f64 + w.preferred_pod_anti_affinity * anti as f64
}

/// The state kube-scheduler starts from: every node of the snapshot with its bound pods and the
/// DaemonSet pods it is about to get (`daemonsets::missing`), then the new nodes of the outcome with
/// their DaemonSet pods. Returns the state and the index of each new node.
pub fn scheduler_state<'a>(p: &Problem<'a>, new_nodes: &[usize]) -> (FilterState<'a>, Vec<usize>) {
    let cluster = p.cluster;
    let mut sims = crate::semantics::filter::bound_nodes(cluster);
    // DaemonSet pods the node will get before anything of this batch lands (the planners' view only).
    for (i, n) in cluster.nodes.iter().enumerate() {
        if n.deleting {
            continue;
        }
        let present = sims[i].pods.clone();
        for ds in crate::semantics::daemonsets::missing(&cluster.daemonsets, n, &present) {
            sims[i].seat(crate::semantics::daemonsets::pod_for(ds, n, &cluster.pods));
        }
    }
    let mut fs = FilterState::new(sims);
    fs.set_hostname_spread(p.weights.hostname_spread);
    fs.set_min_values_policy(p.weights.min_values_policy);
    let mut ix = Vec::new();
    for (k, &f) in new_nodes.iter().enumerate() {
        ix.push(fs.add_planned_node(new_sim_node(p, f, &new_node_name(p, k))));
    }
    (fs, ix)
}

/// A new node of configuration `f` as kube-scheduler will see it once registered.
pub(crate) fn new_sim_node<'a>(p: &Problem<'a>, f: usize, name: &str) -> SimNode<'a> {
    let c = &p.configs[f];
    let mut labels = c.labels.clone();
    labels.insert(keys::HOSTNAME.into(), name.to_string());
    let mut s = SimNode::new(name, labels, c.taints.clone(), c.allocatable.clone());
    s.attach_limits = c.attach_limits.clone();
    for &d in &c.daemonsets {
        s.seat(&p.cluster.daemonsets[d].template);
    }
    s.launch = p.node_launch(f, s.pods.len());
    s
}

/// Replays an outcome's placements, in order, through kube-scheduler's filters with every new node
/// present from the start. Returns the pods whose placement fails, with the reason.
pub fn verify(p: &Problem, o: &Outcome) -> Vec<(PodId, Reject)> {
    let (mut fs, ix) = scheduler_state(p, &o.new_nodes);
    let mut failures = Vec::new();
    // Pods of a class are alike to every rule: each is prepared from the last one's view.
    let mut prepared: Vec<Option<Prepared>> = vec![None; p.classes.len()];
    for &(pod, t) in &o.placements {
        let node = match t {
            Target::Existing(n) => n,
            Target::New(k) => ix[k],
        };
        let pd = p.pod(pod);
        let class = p.class_of.get(&pod).copied();
        let prep = match class.and_then(|c| prepared[c].as_ref()) {
            Some(like) => fs.prepare_like(like, pd),
            None => fs.prepare(pd),
        };
        let verdict = fs.filter(&prep, pd, node);
        if let Some(c) = class {
            prepared[c] = Some(prep);
        }
        match verdict {
            Ok(()) => fs.add_pod(pd, node),
            Err(r) => {
                failures.push((pod, r));
                // Keep going as kube-scheduler would: the pod stays pending.
            }
        }
    }
    failures
}

/// Writes an outcome as a plan.
pub fn to_plan(p: &Problem, o: &Outcome, report: SolverReport) -> Plan {
    let mut on_new: Vec<Vec<&Pod>> = vec![Vec::new(); o.new_nodes.len()];
    for &(id, t) in &o.placements {
        if let Target::New(k) = t {
            on_new[k].push(p.pod(id));
        }
    }
    let new_nodes = o
        .new_nodes
        .iter()
        .enumerate()
        .map(|(k, &f)| {
            let c = &p.configs[f];
            let name = new_node_name(p, k);
            let mut labels = c.labels.clone();
            labels.insert(keys::HOSTNAME.into(), name.clone());
            let (launch_candidates, min_values_relaxed) = launch::node_candidates(p, f, &on_new[k]);
            NewNode {
                name,
                node_pool: p.cluster.nodepools[c.pool].name.clone(),
                instance_type: c.instance_type.clone(),
                zone: c.zone.clone(),
                capacity_type: c.capacity_type.clone(),
                price_per_hour: c.price,
                price_source: if c.synthetic { "synthetic".into() } else { "catalog".into() },
                labels,
                taints: c.taints.iter().map(|t| PlanTaint { key: t.key.clone(), value: t.value.clone(), effect: t.effect.as_str().into() }).collect(),
                pods: Vec::new(),
                launch_candidates,
                min_values_relaxed,
            }
        })
        .collect();
    let placements = o
        .placements
        .iter()
        .map(|(pod, t)| Placement {
            pod: p.pod(*pod).key(),
            node: match *t {
                Target::Existing(n) => p.cluster.nodes[n].name.clone(),
                Target::New(k) => new_node_name(p, k),
            },
            relaxed: Vec::new(),
        })
        .collect();
    let unschedulable = o.unschedulable.iter().map(|(pod, r)| Unschedulable { pod: p.pod(*pod).key(), plugin: r.plugin.as_str().into(), reason: r.reason.clone() }).collect();
    let deferred = o.deferred.iter().map(|&pod| p.pod(pod).key()).collect();
    let mut plan = Plan {
        schema: plan::SCHEMA.into(),
        solver: report,
        cost_per_hour: 0.0,
        synthetic_prices: false,
        new_nodes,
        existing_nodes: Vec::new(),
        placements,
        unschedulable,
        deferred,
        totals: Default::default(),
        hostname_spread: p.weights.hostname_spread,
        min_values_policy: p.weights.min_values_policy,
        preference_policy: p.weights.preference_policy,
        topology_spread_defaults: p.cluster.spread_defaults.clone(),
    };
    plan.finish();
    plan
}

/// Pods and where they go, in bind order.
pub type Placements = Vec<(PodId, Target)>;

/// Orders an outcome's placements so that kube-scheduler, binding them one at a time, accepts each: the
/// order a replay of the plan and the controller's nominations follow. Returns the placements in that
/// order and the pods no order found (with the last rejection).
///
/// 1. Pods with required affinity first (a first pod of a group needs an empty world), in passes.
/// 2. Pods with hard spreads or anti-affinity one at a time, each step taking a pod that passes from the
///    (class, spread domains) bucket with the most pods left. With maxSkew 1 every step must land in a
///    domain at the minimum of every constraint at once; a final state balanced on two keys (zone and a
///    capacity split) is a sum of such rounds (König), and draining the fullest bucket first finds them
///    where interleaving each class's domains in turn gets stuck. Classes that do not count each other
///    (no hard spread or anti-affinity term of one selects the other) are ordered one group at a time,
///    so that a dead end in one is backtracked within it, not through the other classes' steps.
/// 3. The rest, then anything left over, in passes until a pass places nothing.
pub fn order_placements<'a>(p: &Problem<'a>, o: &Outcome) -> (Placements, Vec<(PodId, Reject)>) {
    let (mut fs, ix) = scheduler_state(p, &o.new_nodes);
    let node_of = |t: Target| match t {
        Target::Existing(n) => n,
        Target::New(k) => ix[k],
    };
    let (first, mut buckets, rest) = Buckets::split(p, &fs, &node_of, &o.placements);
    let mut done = Vec::new();
    let mut last: BTreeMap<PodId, Reject> = BTreeMap::new();
    let mut left = replay_passes(p, &mut fs, &node_of, first, &mut done, &mut last);
    for group in buckets.groups(p) {
        let base = done.len();
        if let Some(best) = buckets.drain(p, &group, &mut fs, &node_of, &mut done, &mut last) {
            // No complete order within the budget: keep the deepest partial order found, and leave the
            // group's other pods to the passes below, in plan order. Where the search stopped, the
            // group's pods are those it bound (`done[base..]`) and those still in its buckets.
            let mut others: std::collections::BTreeSet<PodId> = done[base..].iter().map(|x| x.0).collect();
            for &b in &group {
                others.extend(buckets.pods[b].drain(..).map(|x| x.0));
            }
            for &(id, t) in done[base..].iter().rev() {
                fs.remove_pod(p.pod(id), node_of(t));
            }
            done.truncate(base);
            for &(id, t) in &best {
                fs.add_pod(p.pod(id), node_of(t));
                done.push((id, t));
                others.remove(&id);
            }
            left.extend(o.placements.iter().copied().filter(|(id, _)| others.contains(id)));
        }
    }
    left.extend(buckets.pods.into_iter().flat_map(|mut b| {
        b.reverse();
        b
    }));
    left.extend(rest);
    let left = replay_passes(p, &mut fs, &node_of, left, &mut done, &mut last);
    let failures = left.into_iter().map(|(id, _)| (id, last.remove(&id).expect("a rejection was recorded"))).collect();
    (done, failures)
}

/// The pods `order_placements` binds one at a time (hard spreads or anti-affinity), bucketed by class
/// and spread domains, with the count of pods left per (spread key, domain) pair.
struct Buckets {
    /// Pods left per bucket; `pop()` takes them in plan order.
    pods: Vec<Vec<(PodId, Target)>>,
    /// Per bucket: its (spread key, domain) pairs, as indices into `left`.
    pairs: Vec<Vec<usize>>,
    /// Per (spread key, domain) pair: the pods left in every bucket that has it.
    left: Vec<usize>,
    /// Per bucket: a pod of its class, which stands for the class's spreads, terms and labels.
    sample: Vec<PodId>,
}

/// A step of the depth-first search in `Buckets::drain`: the buckets to try in order, the next one to
/// try, and the bucket whose pod this step bound.
struct Frame {
    cands: Vec<usize>,
    next: usize,
    placed: Option<usize>,
}

impl Buckets {
    /// Splits placements into the pods with required affinity (bound first, in passes), the buckets,
    /// and the rest.
    fn split(p: &Problem, fs: &FilterState, node_of: &dyn Fn(Target) -> usize, placements: &[(PodId, Target)]) -> (Placements, Buckets, Placements) {
        let mut first: Vec<(PodId, Target)> = Vec::new();
        let mut buckets: BTreeMap<(usize, String), Vec<(PodId, Target)>> = BTreeMap::new();
        let mut pairs: BTreeMap<(usize, String), Vec<(String, String)>> = BTreeMap::new();
        let mut rest: Vec<(PodId, Target)> = Vec::new();
        for &(id, t) in placements {
            let pod = p.pod(id);
            if !pod.affinity.is_empty() {
                first.push((id, t));
            } else if pod.spread.iter().any(|s| s.is_hard()) || !pod.anti_affinity.is_empty() {
                let c = p.class_of.get(&id).copied().unwrap_or(usize::MAX);
                let labels = &fs.nodes()[node_of(t)].labels;
                let dom: String = pod.spread.iter().map(|s| labels.get(&s.key).cloned().unwrap_or_default()).collect::<Vec<_>>().join("/");
                let kd: Vec<(String, String)> = pod.spread.iter().filter(|s| s.is_hard()).map(|s| (s.key.clone(), labels.get(&s.key).cloned().unwrap_or_default())).collect();
                pairs.entry((c, dom.clone())).or_insert(kd);
                buckets.entry((c, dom)).or_default().push((id, t));
            } else {
                rest.push((id, t));
            }
        }
        let mut pair_ix: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut out = Buckets { pods: Vec::new(), pairs: Vec::new(), left: Vec::new(), sample: Vec::new() };
        for (k, mut v) in buckets {
            out.sample.push(v[0].0);
            let ixs = pairs[&k]
                .iter()
                .map(|x| {
                    let n = pair_ix.len();
                    *pair_ix.entry(x.clone()).or_insert(n)
                })
                .collect();
            out.pairs.push(ixs);
            v.reverse(); // pop() takes them in plan order
            out.pods.push(v);
        }
        // Counted per group when it is drained.
        out.left = vec![0usize; pair_ix.len()];
        (first, out, rest)
    }

    /// The buckets in groups that are ordered apart: two buckets are in one group when a hard spread
    /// or a required anti-affinity term of one's pods selects the other's (either way), or through a
    /// chain of such buckets. The pods of one group never enter another's filter checks for spread or
    /// anti-affinity, so any order of one group's pods composes with any order of another's. Classes
    /// are compared once each (the buckets of a class share its spec and labels).
    fn groups(&self, p: &Problem) -> Vec<Vec<usize>> {
        let counts = |a: &Pod, b: &Pod| {
            a.spread.iter().any(|s| s.is_hard() && a.namespace == b.namespace && crate::semantics::selectors::opt_matches(s.selector.as_ref(), &b.labels))
                || a.anti_affinity.iter().any(|t| interpod::term_matches(t, b))
        };
        // One representative bucket per class: buckets of one class are always grouped.
        let mut rep: BTreeMap<usize, usize> = BTreeMap::new();
        let mut parent: Vec<usize> = (0..self.pods.len()).collect();
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        for b in 0..self.pods.len() {
            let c = p.class_of.get(&self.sample[b]).copied().unwrap_or(usize::MAX - b);
            let r = *rep.entry(c).or_insert(b);
            let (x, y) = (root(&mut parent, b), root(&mut parent, r));
            parent[x] = y;
        }
        let reps: Vec<usize> = rep.values().copied().collect();
        for (i, &a) in reps.iter().enumerate() {
            for &b in &reps[i + 1..] {
                let (pa, pb) = (p.pod(self.sample[a]), p.pod(self.sample[b]));
                if counts(pa, pb) || counts(pb, pa) {
                    let (x, y) = (root(&mut parent, a), root(&mut parent, b));
                    parent[x] = y;
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for b in 0..self.pods.len() {
            groups.entry(root(&mut parent, b)).or_default().push(b);
        }
        let mut out: Vec<Vec<usize>> = groups.into_values().collect();
        out.sort();
        out
    }

    /// Non-empty buckets of `group`, those whose (key, domain) pairs have the most pods left first,
    /// then the fullest.
    fn candidates(&self, group: &[usize]) -> Vec<usize> {
        let mut c: Vec<(usize, usize, usize)> =
            group.iter().copied().filter(|&b| !self.pods[b].is_empty()).map(|b| (self.pairs[b].iter().map(|&x| self.left[x]).sum::<usize>(), self.pods[b].len(), b)).collect();
        c.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        c.into_iter().map(|x| x.2).collect()
    }

    /// Binds every pod of the buckets `group`, depth-first over them (most constrained domains first),
    /// with backtracking under a budget of `5 · pods + 1000` filter checks. Returns None when every pod
    /// is bound (appended to `done`), else the deepest partial order found, `done` then holding
    /// wherever the search stopped.
    fn drain<'a>(
        &mut self,
        p: &Problem<'a>,
        group: &[usize],
        fs: &mut FilterState<'a>,
        node_of: &dyn Fn(Target) -> usize,
        done: &mut Placements,
        last: &mut BTreeMap<PodId, Reject>,
    ) -> Option<Placements> {
        let total: usize = group.iter().map(|&b| self.pods[b].len()).sum();
        // The pods left per (key, domain) pair count this group's pods only.
        self.left.fill(0);
        for &b in group {
            for &x in &self.pairs[b] {
                self.left[x] += self.pods[b].len();
            }
        }
        let mut budget = 5 * total + 1_000;
        let mut best_depth = 0;
        let mut best_done: Option<Placements> = None;
        let base = done.len();
        let mut stack = vec![Frame { cands: self.candidates(group), next: 0, placed: None }];
        while let Some(top) = stack.last_mut() {
            if done.len() - base == total {
                break;
            }
            let mut moved = false;
            while top.next < top.cands.len() && budget > 0 {
                let b = top.cands[top.next];
                top.next += 1;
                budget -= 1;
                let &(id, t) = self.pods[b].last().expect("candidates are not empty");
                let pod = p.pod(id);
                match fs.check(pod, node_of(t)) {
                    Ok(()) => {
                        fs.add_pod(pod, node_of(t));
                        done.push((id, t));
                        self.pods[b].pop();
                        for &x in &self.pairs[b] {
                            self.left[x] -= 1;
                        }
                        top.placed = Some(b);
                        moved = true;
                        break;
                    }
                    Err(r) => {
                        last.insert(id, r);
                    }
                }
            }
            if moved {
                stack.push(Frame { cands: self.candidates(group), next: 0, placed: None });
                continue;
            }
            if done.len() - base > best_depth || best_done.is_none() {
                best_depth = done.len() - base;
                best_done = Some(done[base..].to_vec());
            }
            if budget == 0 {
                break;
            }
            // Dead end: undo the placement that led here and try the next candidate there.
            stack.pop();
            let Some(parent) = stack.last_mut() else {
                break;
            };
            if let Some(b) = parent.placed.take() {
                let (id, t) = done.pop().expect("placed");
                fs.remove_pod(p.pod(id), node_of(t));
                self.pods[b].push((id, t));
                for &x in &self.pairs[b] {
                    self.left[x] += 1;
                }
            }
        }
        if done.len() - base < total { best_done.filter(|b| b.len() > done.len() - base) } else { None }
    }
}

/// Binds pods in the given order, retrying the rejected ones after each pass until a pass binds
/// nothing; returns those left.
fn replay_passes<'a>(
    p: &Problem<'a>,
    fs: &mut FilterState<'a>,
    node_of: &dyn Fn(Target) -> usize,
    mut todo: Vec<(PodId, Target)>,
    done: &mut Placements,
    last: &mut BTreeMap<PodId, Reject>,
) -> Vec<(PodId, Target)> {
    loop {
        let mut left = Vec::new();
        for (id, t) in todo.iter().copied() {
            let pod = p.pod(id);
            match fs.check(pod, node_of(t)) {
                Ok(()) => {
                    fs.add_pod(pod, node_of(t));
                    done.push((id, t));
                }
                Err(r) => {
                    last.insert(id, r);
                    left.push((id, t));
                }
            }
        }
        if left.is_empty() || left.len() == todo.len() {
            return left;
        }
        todo = left;
    }
}
