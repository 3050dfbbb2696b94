//! An event-driven replay of a pod trace through a planner, for what a cluster run that way costs over
//! time (node-hours × price), not only per batch.
//!
//! Why not the simulator (`src/sim`): it replays scenario files step by step through controllers, the
//! binder and a cloud with boot delays, which is the right tool for behaviour, but a trace of hundreds
//! of arrivals per day would need a generated scenario with one step per event. This replay is the
//! bookkeeping a cost comparison needs and nothing more:
//!
//! * time advances in windows of `window` seconds; the pods created in a window form one batch,
//!   planned at the window's end (plus pods of earlier batches that could not be placed, retried);
//! * pods whose `deletion_time` has passed leave first, freeing their node's capacity (a pod that
//!   leaves before it was ever placed is dropped and counted as never placed);
//! * the batch is planned on the cluster as it is (existing nodes with their pods, free capacity
//!   used first, as every planner here does), every plan is judged by the checker, and its new nodes
//!   join the cluster at once (no boot delay);
//! * nodes left without pods after the batch is bound are removed (Karpenter's consolidation of empty
//!   nodes with `consolidateAfter: 0s`); non-empty nodes are never moved or replaced;
//! * at the end of the span every node is removed. Cost = Σ nodes (removal − launch) / 3600 × price.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::corpus::{self, Replay};
use super::openb;
use stowage_core::check;
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::domain::node::Node;
use stowage_core::domain::taints::{Effect, Taint};
use stowage_core::solve::{Planner, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::{self, Workload};

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayRow {
    pub name: String,
    pub planner: String,
    /// Trace pods created in the span.
    pub pods: usize,
    pub windows: usize,
    /// Windows with pods to place (planner runs).
    pub batches: usize,
    /// USD over the span: Σ node lifetime (hours) × price per hour.
    pub total_cost: f64,
    pub node_hours: f64,
    pub nodes_launched: usize,
    pub peak_nodes: usize,
    /// Pods that were never placed (left before a node was found for them, or still waiting at the end).
    pub never_placed: usize,
    /// Plans the checker rejected.
    pub invalid_plans: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_violation: Option<String>,
    /// Planner time summed over the batches.
    pub plan_ms: f64,
    /// Batches whose MILP plan was the greedy fallback (status `fallback`).
    pub fallbacks: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReplayRow {
    pub fn error(r: &Replay, planner: &str, msg: String) -> ReplayRow {
        ReplayRow { name: r.name.clone(), planner: planner.into(), error: Some(msg), ..Default::default() }
    }
}

struct Live {
    node: Node,
    price: f64,
    launched: u64,
}

/// Runs one replay with one planner. Errors (unreadable trace, a NodePool file that does not load, a
/// planner error) come back in the row.
pub fn run(r: &Replay, cat: &Catalog, weights: &Weights, args: &Planner) -> ReplayRow {
    let planner = args.solver.as_str();
    match run_inner(r, cat, weights, args, planner) {
        Ok(row) => row,
        Err(msg) => ReplayRow::error(r, planner, msg),
    }
}

/// The trace rows of a replay and the base workload: the NodePool files plus every replayed pod,
/// pending. `PodId`s of the base cluster index `rows`.
pub fn base(r: &Replay) -> Result<(Vec<openb::TracePod>, Workload), String> {
    let trace = openb::parse_trace(&corpus::read_text(&r.trace)?).map_err(|e| format!("{}: {e}", r.trace.display()))?;
    let rows = openb::window(&trace, r.start, r.span);
    let mut texts = Vec::new();
    for f in &r.nodepools {
        texts.push((f.clone(), corpus::read_text(f)?));
    }
    texts.push((Path::new("replay-pods.json").to_path_buf(), openb::batch_text(&rows)?));
    let w = stowage_input::load_texts(texts.iter().map(|(f, t)| (f.as_path(), t.as_str()))).and_then(stowage_input::Workload::strict).map_err(|e| e.to_string())?;
    if w.cluster.pods.len() != rows.len() {
        return Err(format!("the NodePool files of replay {} hold pods; they must hold only NodePools and EC2NodeClasses", r.name));
    }
    Ok((rows, w))
}

fn run_inner(r: &Replay, cat: &Catalog, weights: &Weights, args: &Planner, planner: &str) -> Result<ReplayRow, String> {
    let (rows, base) = base(r)?;
    let end = r.start + r.span;
    let ix_of: BTreeMap<String, usize> = base.cluster.pods.iter().enumerate().map(|(i, p)| (p.key(), i)).collect();
    // Capacity of a new node = its type as its NodePool's EC2NodeClass sees the catalog.
    let views: BTreeMap<String, Catalog> = base.cluster.nodeclasses.iter().map(|nc| (nc.name.clone(), stowage_core::catalog::for_nodeclass(cat, nc))).collect();

    let mut out = ReplayRow { name: r.name.clone(), planner: planner.into(), pods: rows.len(), ..Default::default() };
    let mut bound: BTreeMap<usize, String> = BTreeMap::new();
    let mut waiting: BTreeSet<usize> = BTreeSet::new();
    let mut ever_placed: BTreeSet<usize> = BTreeSet::new();
    let mut nodes: Vec<Live> = Vec::new();
    let mut next_node = 0usize;
    let mut arrived = 0usize;
    let departs = |i: usize| rows[i].deletion.unwrap_or(u64::MAX);

    let windows = r.span.div_ceil(r.window) as usize;
    out.windows = windows;
    for k in 0..windows {
        let t = (r.start + (k as u64 + 1) * r.window).min(end);
        // Departures up to t free capacity; pods that leave while waiting never ran.
        bound.retain(|&i, _| departs(i) > t);
        waiting.retain(|&i| departs(i) > t);
        // Arrivals of this window.
        while arrived < rows.len() && rows[arrived].creation < t {
            if departs(arrived) > t {
                waiting.insert(arrived);
            }
            arrived += 1;
        }
        if !waiting.is_empty() {
            out.batches += 1;
            let cluster = snapshot(&base.cluster, &nodes, &bound, &waiting);
            let w = Workload { cluster, objects: Default::default(), warnings: Vec::new(), rejected: Vec::new(), invalid_templates: Vec::new(), skipped: Vec::new(), selection: Default::default() };
            let t0 = Instant::now();
            let plan = plan_cluster(&w.cluster, cat, weights, *args).map_err(|e| format!("window {k} (t = {t}): {e}"))?;
            out.plan_ms += t0.elapsed().as_secs_f64() * 1000.0;
            if plan.solver.status == stowage_core::plan::Status::Fallback {
                out.fallbacks += 1;
            }
            let verdict = check::check(&w.cluster, cat, &plan);
            if !verdict.valid() {
                out.invalid_plans += 1;
                if out.first_violation.is_none() {
                    out.first_violation = verdict.violations.first().map(|v| format!("window {k}: {v}"));
                }
            }
            // Launch the new nodes under replay-wide names.
            let mut renamed: BTreeMap<&str, String> = BTreeMap::new();
            for n in &plan.new_nodes {
                let name = format!("replay-{next_node}");
                next_node += 1;
                let pool = base.cluster.nodepool(&n.node_pool).ok_or_else(|| format!("plan names unknown NodePool {}", n.node_pool))?;
                let view = views.get(&pool.node_class).unwrap_or(cat);
                let it = view.get(&n.instance_type).ok_or_else(|| format!("plan names unknown instance type {}", n.instance_type))?;
                let mut labels = n.labels.clone();
                labels.insert(keys::HOSTNAME.into(), name.clone());
                let taints = n
                    .taints
                    .iter()
                    .map(|t| Effect::parse(&t.effect).map(|e| Taint::new(t.key.clone(), t.value.clone(), e)).ok_or_else(|| format!("taint effect {:?}", t.effect)))
                    .collect::<Result<Vec<_>, _>>()?;
                nodes.push(Live {
                    node: Node {
                        name: name.clone(),
                        labels,
                        taints,
                        allocatable: it.allocatable(),
                        capacity: it.capacity.clone(),
                        unschedulable: false,
                        provider_id: Some(format!("replay:///{name}")),
                        deleting: false,
                        in_flight: false,
                        nodepool: Some(n.node_pool.clone()),
                        attach_limits: it.attach_limits.clone(),
                    },
                    price: n.price_per_hour,
                    launched: t,
                });
                renamed.insert(n.name.as_str(), name);
                out.nodes_launched += 1;
            }
            for p in &plan.placements {
                let Some(&i) = ix_of.get(&p.pod) else { return Err(format!("plan places unknown pod {}", p.pod)) };
                let node = renamed.get(p.node.as_str()).cloned().unwrap_or_else(|| p.node.clone());
                bound.insert(i, node);
                waiting.remove(&i);
                ever_placed.insert(i);
            }
        }
        // Empty nodes go (consolidateAfter: 0s).
        let used: BTreeSet<&str> = bound.values().map(String::as_str).collect();
        let mut kept = Vec::new();
        for n in nodes.drain(..) {
            if used.contains(n.node.name.as_str()) {
                kept.push(n);
            } else {
                let hours = (t - n.launched) as f64 / 3600.0;
                out.node_hours += hours;
                out.total_cost += hours * n.price;
            }
        }
        nodes = kept;
        out.peak_nodes = out.peak_nodes.max(nodes.len());
    }
    for n in nodes {
        let hours = (end - n.launched) as f64 / 3600.0;
        out.node_hours += hours;
        out.total_cost += hours * n.price;
    }
    out.never_placed = rows.len() - ever_placed.len();
    Ok(out)
}

/// The cluster a batch is planned on: the live nodes, the pods bound to them and the waiting pods.
fn snapshot(base: &Cluster, nodes: &[Live], bound: &BTreeMap<usize, String>, waiting: &BTreeSet<usize>) -> Cluster {
    let mut c = Cluster {
        pods: Vec::with_capacity(bound.len() + waiting.len()),
        nodes: nodes.iter().map(|n| n.node.clone()).collect(),
        nodepools: base.nodepools.clone(),
        nodeclasses: base.nodeclasses.clone(),
        daemonsets: base.daemonsets.clone(),
        namespaces: base.namespaces.clone(),
        spread_defaults: base.spread_defaults.clone(),
    };
    // In trace order, bound or not, so that `seq` (creation order) keeps its meaning.
    let all: BTreeSet<usize> = bound.keys().chain(waiting.iter()).copied().collect();
    for i in all {
        let mut p = base.pods[i].clone();
        p.node_name = bound.get(&i).cloned();
        c.pods.push(p);
    }
    c
}
