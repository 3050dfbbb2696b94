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
pub mod milp;
pub mod problem;

use std::collections::BTreeMap;

use crate::domain::labels::keys;
use crate::domain::pod::PodId;
use crate::plan::{self, NewNode, Placement, Plan, PlanTaint, SolverReport, Unschedulable};
use crate::semantics::filter::{FilterState, SimNode};
use crate::semantics::{node_affinity, Reject};

pub use problem::Problem;

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

/// Name of the `i`-th new node of a plan.
pub fn new_node_name(i: usize) -> String {
    format!("stowage-{i}")
}

/// Evaluates an outcome under the problem's weights. Soft terms counted here: preferred node
/// affinity (per pod, unsatisfied weight).
pub fn objective(p: &Problem, o: &Outcome) -> Objective {
    let w = p.weights;
    let nodes: f64 = o.new_nodes.iter().map(|&f| p.configs[f].cost).sum();
    let unschedulable = o.unschedulable.len() as f64 * w.unschedulable_pod;
    let mut soft = 0.0;
    for (pod, t) in &o.placements {
        let pod = p.pod(*pod);
        if pod.preferred_node.is_empty() {
            continue;
        }
        let (labels, name) = match *t {
            Target::Existing(n) => (&p.cluster.nodes[n].labels, Some(p.cluster.nodes[n].name.as_str())),
            Target::New(k) => (&p.configs[o.new_nodes[k]].labels, None),
        };
        let total: i64 = pod.preferred_node.iter().map(|t| t.weight as i64).sum();
        let got = node_affinity::preferred_score(&pod.preferred_node, labels, name);
        soft += w.soft.preferred_node_affinity * (total - got) as f64;
    }
    Objective { nodes, unschedulable, soft }
}

/// The state kube-scheduler starts from: every node of the snapshot with its bound pods and the
/// DaemonSet pods it is about to get (`daemonsets::missing`), then the new nodes of the outcome with
/// their DaemonSet pods. Returns the state and the index of each new node.
pub fn scheduler_state<'a>(p: &Problem<'a>, new_nodes: &[usize]) -> (FilterState<'a>, Vec<usize>) {
    let cluster = p.cluster;
    let mut sims: Vec<SimNode<'a>> = cluster
        .nodes
        .iter()
        .map(|n| {
            let mut s = SimNode::new(n.name.clone(), n.labels.clone(), n.taints.clone(), n.allocatable.clone());
            s.unschedulable = n.unschedulable;
            s
        })
        .collect();
    let index: BTreeMap<&str, usize> = cluster.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    for pod in &cluster.pods {
        if let Some(n) = pod.node_name.as_deref()
            && !pod.is_terminal()
            && let Some(&i) = index.get(n)
        {
            sims[i].seat(pod);
        }
    }
    // DaemonSet pods the node will get before anything of this batch lands (the planners' view only).
    for (i, n) in cluster.nodes.iter().enumerate() {
        if n.deleting {
            continue;
        }
        let present = sims[i].pods.clone();
        for ds in crate::semantics::daemonsets::missing(&cluster.daemonsets, n, &present) {
            sims[i].seat(&ds.template);
        }
    }
    let mut fs = FilterState::new(sims);
    let mut ix = Vec::new();
    for (k, &f) in new_nodes.iter().enumerate() {
        ix.push(fs.add_node(new_sim_node(p, f, &new_node_name(k))));
    }
    (fs, ix)
}

/// A new node of configuration `f` as kube-scheduler will see it once registered.
pub fn new_sim_node<'a>(p: &Problem<'a>, f: usize, name: &str) -> SimNode<'a> {
    let c = &p.configs[f];
    let mut labels = c.labels.clone();
    labels.insert(keys::HOSTNAME.into(), name.to_string());
    let mut s = SimNode::new(name, labels, c.taints.clone(), c.allocatable.clone());
    for &d in &c.daemonsets {
        s.seat(&p.cluster.daemonsets[d].template);
    }
    s
}

/// Replays an outcome's placements, in order, through kube-scheduler's filters with every new node
/// present from the start. Returns the pods whose placement fails, with the reason.
pub fn verify(p: &Problem, o: &Outcome) -> Vec<(PodId, Reject)> {
    let (mut fs, ix) = scheduler_state(p, &o.new_nodes);
    let mut failures = Vec::new();
    for &(pod, t) in &o.placements {
        let node = match t {
            Target::Existing(n) => n,
            Target::New(k) => ix[k],
        };
        let pd = p.pod(pod);
        match fs.check(pd, node) {
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
    let new_nodes = o
        .new_nodes
        .iter()
        .enumerate()
        .map(|(k, &f)| {
            let c = &p.configs[f];
            let name = new_node_name(k);
            let mut labels = c.labels.clone();
            labels.insert(keys::HOSTNAME.into(), name.clone());
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
                Target::New(k) => new_node_name(k),
            },
        })
        .collect();
    let unschedulable = o
        .unschedulable
        .iter()
        .map(|(pod, r)| Unschedulable { pod: p.pod(*pod).key(), plugin: r.plugin.as_str().into(), reason: r.reason.clone() })
        .collect();
    let mut plan = Plan {
        schema: plan::SCHEMA.into(),
        solver: report,
        cost_per_hour: 0.0,
        synthetic_prices: false,
        new_nodes,
        existing_nodes: Vec::new(),
        placements,
        unschedulable,
        totals: Default::default(),
    };
    plan.finish();
    plan
}

/// Pods and where they go, in bind order.
pub type Placements = Vec<(PodId, Target)>;

/// Finds a bind order for an outcome's placements in which every pod passes kube-scheduler's filters
/// (all new nodes present from the start), if the simple search finds one: pods of required-affinity
/// groups that start a domain go first (the first-pod exception needs an empty world), then pods are
/// interleaved across domains per class (water-filling for spreads), and whatever fails is retried
/// after the others until a pass places nothing. Returns the ordered placements and the failures.
pub fn order_placements(p: &Problem, o: &Outcome) -> (Placements, Vec<(PodId, Reject)>) {
    let (mut fs, ix) = scheduler_state(p, &o.new_nodes);
    let node_of = |t: Target| match t {
        Target::Existing(n) => n,
        Target::New(k) => ix[k],
    };
    // Interleave each class's pods across the domains (labels) of their nodes.
    let mut by_class: BTreeMap<usize, BTreeMap<String, Vec<(PodId, Target)>>> = BTreeMap::new();
    for &(id, t) in &o.placements {
        let c = p.class_of.get(&id).copied().unwrap_or(usize::MAX);
        let pod = p.pod(id);
        let labels = &fs.nodes()[node_of(t)].labels;
        let dom: String = pod.spread.iter().map(|s| labels.get(&s.key).cloned().unwrap_or_default()).collect::<Vec<_>>().join("/");
        by_class.entry(c).or_default().entry(dom).or_default().push((id, t));
    }
    // Affinity pods first (a first pod needs an empty world), then pods with hard spreads or
    // anti-affinity (they count the members placed before them), then the rest.
    let mut first: Vec<(PodId, Target)> = Vec::new();
    let mut middle: Vec<(PodId, Target)> = Vec::new();
    let mut rest: Vec<(PodId, Target)> = Vec::new();
    for (_, doms) in by_class {
        let mut lists: Vec<Vec<(PodId, Target)>> = doms.into_values().collect();
        let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
        for lst in &mut lists {
            lst.reverse();
        }
        for _ in 0..longest {
            for lst in &mut lists {
                if let Some(x) = lst.pop() {
                    let pod = p.pod(x.0);
                    if !pod.affinity.is_empty() {
                        first.push(x);
                    } else if pod.spread.iter().any(|s| s.is_hard()) || !pod.anti_affinity.is_empty() {
                        middle.push(x);
                    } else {
                        rest.push(x);
                    }
                }
            }
        }
    }
    first.extend(middle);
    first.extend(rest);
    let mut todo = first;
    let mut done = Vec::new();
    let mut last: BTreeMap<PodId, Reject> = BTreeMap::new();
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
            let failures = left.into_iter().map(|(id, _)| (id, last.remove(&id).expect("a rejection was recorded"))).collect();
            return (done, failures);
        }
        todo = left;
    }
}
