//! Which existing nodes to remove: consolidation's node-set program, one MILP over every candidate
//! node at once (the decision itself, its rules and its oracle are `stowage_decide::consolidation`).
//!
//! The cluster is given *emptied*: every candidate node is present, and the workload pods that live on
//! candidates are pending, each with its home. The program chooses which candidates to keep, and places
//! every pod whose home goes on a kept node (candidate or not) or on new nodes, at the least cost of the
//! nodes that remain plus the disruption of the pods that move:
//!
//! ```text
//! sets     N candidates, T ⊇ N existing nodes a class may use, C classes of the pending pods,
//!          G configuration groups, F_g configurations of group g, R resources some class requests
//! data     home_{c,n} pods of c living on n; κ_n, δ_n cost and disruption cost of n ($/h);
//!          κ_f cost of a new node of configuration f; free_{t,r}, room_{f,r}; cap_{c,t} copies of c
//!          that fit t alone; budgets (M_b ⊆ N, B_b); PDBs (m_{j,n} of the PDB's pods live on n, A_j)
//! columns  k_n ∈ {0,1} n is kept;  x_{c,t} ∈ ℤ, 0 ≤ x ≤ cap_{c,t} pods of c on existing t;
//!          a_{c,g} ≥ 0 pods of c on new nodes of g;  y_f ∈ ℤ≥0 new nodes of f;  u_c ≥ 0 pods with no place
//! min      Σ_n κ_n k_n + Σ_n δ_n (1 − k_n) + Σ_f κ_f y_f + P Σ_c u_c
//! demand   Σ_t x_{c,t} + Σ_g a_{c,g} + u_c = Σ_n home_{c,n}                         ∀c
//! stay     x_{c,n} ≥ home_{c,n} k_n                     (a kept node keeps its pods)  ∀c, n
//! existing Σ_c req_{c,r} x_{c,t} ≤ free_{t,r}                                          ∀t ∉ N, r
//! kept     Σ_c req_{c,r} x_{c,n} ≤ free_{n,r} k_n                                      ∀n ∈ N, r
//! new      Σ_c req_{c,r} a_{c,g} ≤ Σ_{f∈F_g} room_{f,r} y_f                           ∀g, r
//! budget   Σ_{n∈M_b} (1 − k_n) ≤ B_b                                                  ∀b
//! PDB      Σ_n m_{j,n} (1 − k_n) ≤ A_j                                                 ∀j
//! ```
//!
//! What it leaves out, on purpose: new nodes are pooled per configuration group (capacity summed, as in
//! the batch MILP's aggregated relaxation, [`super::master::Master::aggregate`]), and the constraints that couple
//! nodes (topology spread, pod (anti-)affinity beyond what the filters already exclude on existing
//! nodes, NodePool limits, spot-to-spot, `Balanced`) are not rows. So the program *proposes* a node set;
//! the caller plans the set's displaced pods with the batch planners and judges the result as for any
//! other set (kube-scheduler's filters, the checker). The start is the cluster as it is (every node kept,
//! every pod home), which is always a point of the program.
//!
//! Its dual bound is a lower bound on `Σ kept κ + Σ new κ + Σ removed δ` over the consolidations this
//! program describes (kept nodes keep their pods; the caller adds the cost of the nodes that are not
//! candidates).

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::highs_lp::{self, MipStatus, Options, SolveError};
use super::ids::{Col, Row, Target};
use super::model::{ColKind, INF, Model};
use super::structure::Structure;
use crate::domain::Cluster;
use crate::domain::catalog::{Catalog, SPOT};
use crate::domain::pod::PodId;
use crate::semantics::filter::FilterState;
use crate::solve::problem::{Problem, ProblemError};
use crate::weights::Weights;

/// A node the program may remove.
#[derive(Clone, Debug)]
pub struct Removable {
    /// Index into `Cluster::nodes` (of the emptied cluster).
    pub node: usize,
    /// Cost per hour while kept (weights applied).
    pub cost: f64,
    /// Disruption cost per hour of moving its pods (the caller's unit).
    pub disruption: f64,
}

/// What the program is built from. Every pending pod of `cluster` must have a home in `homes`.
pub struct NodeSetInput<'a> {
    pub cluster: &'a Cluster,
    pub catalog: &'a Catalog,
    pub weights: &'a Weights,
    pub removable: &'a [Removable],
    /// Per pod of `cluster` (by index): for the pending ones, the index into `removable` of the node it
    /// lives on.
    pub homes: &'a [Option<usize>],
    /// (indices into `removable`, most of them removed).
    pub budgets: &'a [(Vec<usize>, usize)],
    /// (pods among the pending ones, most of them displaced).
    pub pdbs: &'a [(Vec<PodId>, usize)],
}

/// The program's answer.
#[derive(Clone, Debug)]
pub struct NodeSet {
    /// Indices into `removable` of the nodes to remove (empty: keep everything).
    pub remove: Vec<usize>,
    /// The program's objective at its solution, and its proven lower bound (module doc).
    pub objective: f64,
    pub lower_bound: Option<f64>,
    pub status: MipStatus,
    pub columns: usize,
    pub rows: usize,
    pub ms: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeSetError {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error(transparent)]
    Solve(#[from] SolveError),
    #[error("a pending pod has no home among the removable nodes: every pending pod of the emptied cluster must be one a candidate node displaces")]
    Homeless,
}

/// Builds and solves the program (module doc) within `time_limit`.
pub fn propose(input: &NodeSetInput, options: Options, time_limit: Duration) -> Result<NodeSet, NodeSetError> {
    let start = Instant::now();
    let p = Problem::new(input.cluster, input.catalog, input.weights)?;
    let (s, fs, _) = Structure::core(&p);
    let nr = s.dims.len();
    let nc = p.classes.len();
    let nn = input.removable.len();

    let Layout { home, targets, target_of, removable_at, free, allowed } = layout(input, &p, &s, &fs)?;

    let mut m = Model::default();
    let demand: Vec<_> = (0..nc)
        .map(|c| {
            let n = home[c].values().sum::<u32>() as f64;
            m.named(format!("demand c{c}"), n, n)
        })
        .collect();
    // Capacity rows of existing targets (kept rows of candidates get −free·k below).
    let cap_rows: Vec<Vec<_>> = (0..targets.len())
        .map(|t| {
            (0..nr)
                .map(|r| {
                    let hi = if removable_at.contains_key(&t) { 0.0 } else { free[t][r] as f64 };
                    m.named(format!("capacity t{t} r{r}"), -INF, hi)
                })
                .collect()
        })
        .collect();
    // Stay rows: x_{c,n} − home_{c,n} k_n ≥ 0.
    let mut stay: FxHashMap<(usize, usize), _> = FxHashMap::default();
    for (c, h) in home.iter().enumerate() {
        for &n in h.keys() {
            stay.insert((c, n), m.named(format!("stay c{c} n{n}"), 0.0, INF));
        }
    }
    let budget_rows: Vec<_> = input
        .budgets
        .iter()
        .enumerate()
        .filter(|(_, (members, most))| members.len() > *most)
        .map(|(b, (members, most))| (b, m.named(format!("budget {b}"), (members.len() - most) as f64, INF)))
        .collect();
    // PDB j: Σ_n m_{j,n} k_n ≥ Σ_n m_{j,n} − A_j.
    let mut pdb_rows = Vec::new();
    for (j, (pods, most)) in input.pdbs.iter().enumerate() {
        let mut per: FxHashMap<usize, f64> = FxHashMap::default();
        for pod in pods {
            if let Some(&Some(n)) = input.homes.get(pod.0 as usize) {
                *per.entry(n).or_default() += 1.0;
            }
        }
        let total: f64 = per.values().sum();
        if total > *most as f64 {
            pdb_rows.push((per, m.named(format!("pdb {j}"), total - *most as f64, INF)));
        }
    }

    // k_n.
    let mut k_cols = Vec::with_capacity(nn);
    for (n, r) in input.removable.iter().enumerate() {
        let t = target_of[&r.node];
        let mut e: Vec<_> = (0..nr).map(|d| (cap_rows[t][d], -(free[t][d] as f64))).filter(|&(_, v)| v != 0.0).collect();
        for c in 0..nc {
            if let Some(&h) = home[c].get(&n) {
                e.push((stay[&(c, n)], -(h as f64)));
            }
        }
        for (b, row) in &budget_rows {
            if input.budgets[*b].0.contains(&n) {
                e.push((*row, 1.0));
            }
        }
        for (per, row) in &pdb_rows {
            if let Some(&v) = per.get(&n) {
                e.push((*row, v));
            }
        }
        k_cols.push(m.add_col(r.cost - r.disruption, 0.0, 1.0, true, e, ColKind::Aux(format!("keep n{n}"))));
    }
    // x_{c,t}.
    let mut x_cols: FxHashMap<(usize, usize), _> = FxHashMap::default();
    for c in 0..nc {
        let mut ts: Vec<(usize, u32)> = allowed[c].iter().map(|(&t, &cap)| (t, cap)).collect();
        ts.sort_unstable();
        for (t, cap) in ts {
            let mut e: Vec<_> = vec![(demand[c], 1.0)];
            e.extend((0..nr).filter(|&d| s.req[c][d] != 0).map(|d| (cap_rows[t][d], s.req[c][d] as f64)));
            if let Some(&n) = removable_at.get(&t)
                && let Some(row) = stay.get(&(c, n))
            {
                e.push((*row, 1.0));
            }
            x_cols.insert((c, t), m.add_col(0.0, 0.0, cap as f64, true, e, ColKind::Assign { class: super::ids::Class::at(c), target: Target::at(t) }));
        }
    }
    new_nodes(&mut m, input, &p, &s, &demand);
    for (c, &row) in demand.iter().enumerate() {
        m.add_col(input.weights.unschedulable_pod, 0.0, INF, false, vec![(row, 1.0)], ColKind::Pending(super::ids::Class::at(c)));
    }

    // The start: everything kept, every pod home.
    let x0 = start_point(
        m.n_cols(),
        &k_cols,
        home.iter().enumerate().flat_map(|(c, h)| h.iter().map(move |(&n, &count)| (c, n, count))).map(|(c, n, count)| (x_cols[&(c, target_of[&input.removable[n].node])], count)),
    );
    let constant: f64 = input.removable.iter().map(|r| r.disruption).sum();
    let left = time_limit.saturating_sub(start.elapsed());
    let solved = highs_lp::solve_model_mip(&m, "consolidation node-set program", options, left, 1e-6, Some(&x0))?;
    let (columns, rows) = (m.n_cols(), m.n_rows());
    let remove: Vec<usize> = if solved.has_solution { k_cols.iter().enumerate().filter(|(_, k)| solved.columns[k.ix()] < 0.5).map(|(n, _)| n).collect() } else { Vec::new() };
    let objective = if solved.has_solution { solved.objective + constant } else { input.removable.iter().map(|r| r.cost).sum() };
    let lower_bound = solved.dual_bound.filter(|b| b.is_finite()).or((solved.status == MipStatus::Optimal && solved.has_solution).then_some(solved.objective)).map(|b| b + constant);
    Ok(NodeSet { remove, objective, lower_bound, status: solved.status, columns, rows, ms: start.elapsed().as_secs_f64() * 1000.0 })
}

/// Where the displaced pods live and may go (module doc, sets and data).
struct Layout {
    /// Per class: home node (index into `removable`) → pods.
    home: Vec<FxHashMap<usize, u32>>,
    /// Target → node index, and back.
    targets: Vec<usize>,
    target_of: FxHashMap<usize, usize>,
    /// Target → index into `removable`, for candidates.
    removable_at: FxHashMap<usize, usize>,
    /// Per target, per dimension.
    free: Vec<Vec<i64>>,
    /// Per class: target → most pods.
    allowed: Vec<FxHashMap<usize, u32>>,
}

fn layout(input: &NodeSetInput, p: &Problem, s: &Structure, fs: &FilterState) -> Result<Layout, NodeSetError> {
    let nc = p.classes.len();
    // home_{c,n}
    let mut home: Vec<FxHashMap<usize, u32>> = vec![FxHashMap::default(); nc];
    for &pod in &p.batch {
        let n = input.homes.get(pod.0 as usize).copied().flatten().ok_or(NodeSetError::Homeless)?;
        *home[p.class_of[&pod]].entry(n).or_default() += 1;
    }

    // Targets: the structure's, and every removable node (a home is a target even when the filters'
    // first look, made on the emptied cluster with every pod pending, did not list it).
    let mut targets: Vec<usize> = s.targets.clone();
    let mut target_of: FxHashMap<usize, usize> = targets.iter().enumerate().map(|(t, &e)| (e, t)).collect();
    for r in input.removable {
        target_of.entry(r.node).or_insert_with(|| {
            targets.push(r.node);
            targets.len() - 1
        });
    }
    let removable_at: FxHashMap<usize, usize> = input.removable.iter().enumerate().map(|(i, r)| (target_of[&r.node], i)).collect();
    let free: Vec<Vec<i64>> = targets
        .iter()
        .map(|&e| {
            let f = fs.nodes()[e].free();
            s.dims.iter().map(|d| f.get(d)).collect()
        })
        .collect();
    // Allowed (class, target, cap): the structure's, raised to the home count on a home.
    let mut allowed: Vec<FxHashMap<usize, u32>> = s.allowed.iter().map(|a| a.iter().map(|&(t, cap)| (t.ix(), cap)).collect()).collect();
    for (c, h) in home.iter().enumerate() {
        for (&n, &count) in h {
            let t = target_of[&input.removable[n].node];
            let cap = allowed[c].entry(t).or_insert(0);
            *cap = (*cap).max(count);
        }
    }

    Ok(Layout { home, targets, target_of, removable_at, free, allowed })
}

/// The new-node columns: `a_{c,g}` per class and group it may use, `y_f` per configuration of those
/// groups, and the pooled capacity rows of each group.
fn new_nodes(m: &mut Model, input: &NodeSetInput, p: &Problem, s: &Structure, demand: &[Row]) {
    let nr = s.dims.len();
    let mut group_rows: FxHashMap<usize, Vec<_>> = FxHashMap::default();
    for (c, &row) in demand.iter().enumerate() {
        let mut gs: Vec<usize> = s.class_groups[c].iter().map(|g| g.ix()).collect();
        gs.sort_unstable();
        for g in gs {
            let rows = group_rows.entry(g).or_insert_with(|| (0..nr).map(|d| m.named(format!("new g{g} r{d}"), -INF, 0.0)).collect());
            let mut e: Vec<_> = vec![(row, 1.0)];
            e.extend((0..nr).filter(|&d| s.req[c][d] != 0).map(|d| (rows[d], s.req[c][d] as f64)));
            m.add_col(0.0, 0.0, INF, false, e, ColKind::AggPods { class: super::ids::Class::at(c), group: super::ids::Group::at(g) });
        }
    }
    let mut groups: Vec<usize> = group_rows.keys().copied().collect();
    groups.sort_unstable();
    for g in groups {
        for &f in &p.groups[g] {
            let cfg = &p.configs[f as usize];
            let room = cfg.room();
            let e: Vec<_> = (0..nr).map(|d| (group_rows[&g][d], -(room.get(&s.dims[d]) as f64))).filter(|&(_, v)| v != 0.0).collect();
            let cost = input.weights.node_cost(cfg.price, cfg.capacity_type == SPOT, 0);
            m.add_col(cost, 0.0, INF, true, e, ColKind::AggNodes(super::ids::Config::at(f as usize)));
        }
    }
}

/// The cluster as it is: every keep binary 1 and every `(column, pods)` at home.
fn start_point(columns: usize, keep: &[Col], home: impl Iterator<Item = (Col, u32)>) -> Vec<f64> {
    let mut x0 = vec![0.0; columns];
    for k in keep {
        x0[k.ix()] = 1.0;
    }
    for (col, count) in home {
        x0[col.ix()] = count as f64;
    }
    x0
}
