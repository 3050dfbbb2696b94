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
//! other set (kube-scheduler's filters, the checker).
//!
//! The start is the **drain heuristic**'s point ([`drain`]): candidates in the caller's ranking, each
//! removed when all its pods fit, first fit, in the room left on nodes that stay; with no removal it is
//! the cluster as it is (every node kept, every pod home), always a point of the program. HiGHS
//! improves on it within the budget (presolve probing off: with many binaries in few dense rows it can
//! take the whole budget before the first LP).
//!
//! **Scale.** Exact as above up to [`EXACT_PAIRS`] `(class, target)` pairs. Above, targets that admit
//! the same classes are pooled ([`Pools`], candidates apart): `t` in the rows above stands for a pool,
//! its `free` and `cap` the sums over its targets, and a candidate pool's kept row is
//! `Σ_c req_{c,r} x_{c,q} ≤ Σ_{n∈q} free_{n,r} k_n`. The pooled rows are sums of the exact ones, so the
//! program is a relaxation of the exact one (its bound stays valid) and packs existing room in
//! aggregate too; its proposal is judged like any other. Resource rows are in units of the largest
//! request of their resource (memory in bytes beside pod counts is badly scaled for HiGHS); a resource
//! no class requests has no rows.
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

    let lay = layout(input, &p, &s, &fs)?;
    let Layout { home, target_of, free, allowed, .. } = &lay;

    let pools = Pools::of(&lay);
    // Every resource row in units of the largest request of its resource: memory in bytes would put
    // coefficients near 1e12 beside pod counts, which HiGHS's presolve struggles with.
    // A resource no class requests gets no entries (its rows are empty).
    let unit: Vec<f64> = (0..nr).map(|d| s.req.iter().map(|r| r[d]).max().unwrap_or(0) as f64).collect();

    let mut m = Model::default();
    let demand: Vec<_> = (0..nc)
        .map(|c| {
            let n = home[c].values().sum::<u32>() as f64;
            m.named(format!("demand c{c}"), n, n)
        })
        .collect();
    // Capacity rows of existing pools (kept rows of candidates get −free·k below).
    let cap_rows: Vec<Vec<_>> = pools
        .members
        .iter()
        .enumerate()
        .map(|(q, ts)| {
            (0..nr)
                .map(|r| {
                    let hi = if pools.candidate[q] {
                        0.0
                    } else if unit[r] > 0.0 {
                        ts.iter().map(|&t| free[t][r] as f64).sum::<f64>() / unit[r]
                    } else {
                        INF
                    };
                    m.named(format!("capacity q{q} r{r}"), -INF, hi)
                })
                .collect()
        })
        .collect();
    // Stay rows: x_{c,q} − Σ_{n∈q} home_{c,n} k_n ≥ 0.
    let mut stay: FxHashMap<(usize, usize), _> = FxHashMap::default();
    for (c, h) in home.iter().enumerate() {
        for &n in h.keys() {
            let q = pools.of[target_of[&input.removable[n].node]];
            stay.entry((c, q)).or_insert_with(|| m.named(format!("stay c{c} q{q}"), 0.0, INF));
        }
    }
    let (budget_rows, pdb_rows) = limit_rows(&mut m, input);

    // k_n.
    let mut k_cols = Vec::with_capacity(nn);
    for (n, r) in input.removable.iter().enumerate() {
        let t = target_of[&r.node];
        let q = pools.of[t];
        let mut e: Vec<_> = (0..nr).filter(|&d| unit[d] > 0.0).map(|d| (cap_rows[q][d], -(free[t][d] as f64) / unit[d])).filter(|&(_, v)| v != 0.0).collect();
        for c in 0..nc {
            if let Some(&h) = home[c].get(&n) {
                e.push((stay[&(c, q)], -(h as f64)));
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
    // x_{c,q}, at most the sum of the class's caps over the pool's targets.
    let mut x_cols: FxHashMap<(usize, usize), _> = FxHashMap::default();
    for c in 0..nc {
        let mut caps: FxHashMap<usize, u32> = FxHashMap::default();
        for (&t, &cap) in &allowed[c] {
            *caps.entry(pools.of[t]).or_default() += cap;
        }
        let mut qs: Vec<(usize, u32)> = caps.into_iter().collect();
        qs.sort_unstable();
        for (q, cap) in qs {
            let mut e: Vec<_> = vec![(demand[c], 1.0)];
            e.extend((0..nr).filter(|&d| s.req[c][d] != 0).map(|d| (cap_rows[q][d], s.req[c][d] as f64 / unit[d])));
            if let Some(row) = stay.get(&(c, q)) {
                e.push((*row, 1.0));
            }
            x_cols.insert((c, q), m.add_col(0.0, 0.0, cap as f64, true, e, ColKind::Assign { class: super::ids::Class::at(c), target: Target::at(pools.members[q][0]) }));
        }
    }
    new_nodes(&mut m, input, &p, &s, &demand, &unit);
    for (c, &row) in demand.iter().enumerate() {
        m.add_col(input.weights.unschedulable_pod, 0.0, INF, false, vec![(row, 1.0)], ColKind::Pending(super::ids::Class::at(c)));
    }

    // The start: the drain heuristic's deletions (every node kept and every pod home if it finds none).
    let drained = drain(input, &lay, &s.req);
    let x0 = start_point(m.n_cols(), &k_cols, &drained, &pools, &x_cols);
    let constant: f64 = input.removable.iter().map(|r| r.disruption).sum();
    let left = time_limit.saturating_sub(start.elapsed());
    let solved = highs_lp::solve_model_mip(&m, "consolidation node-set program", options, left, 1e-6, Some(&x0), false)?;
    let (columns, rows) = (m.n_cols(), m.n_rows());
    let remove: Vec<usize> = if solved.has_solution { k_cols.iter().enumerate().filter(|(_, k)| solved.columns[k.ix()] < 0.5).map(|(n, _)| n).collect() } else { Vec::new() };
    let objective = if solved.has_solution { solved.objective + constant } else { input.removable.iter().map(|r| r.cost).sum() };
    let lower_bound = solved.dual_bound.filter(|b| b.is_finite()).or((solved.status == MipStatus::Optimal && solved.has_solution).then_some(solved.objective)).map(|b| b + constant);
    Ok(NodeSet { remove, objective, lower_bound, status: solved.status, columns, rows, ms: start.elapsed().as_secs_f64() * 1000.0 })
}

/// The budget rows (`Σ_{n∈M_b} k_n ≥ |M_b| − B_b`, only where the budget can bind) and the PDB rows
/// (`Σ_n m_{j,n} k_n ≥ Σ_n m_{j,n} − A_j`, with `m_{j,n}` per node).
#[allow(clippy::type_complexity)]
fn limit_rows(m: &mut Model, input: &NodeSetInput) -> (Vec<(usize, Row)>, Vec<(FxHashMap<usize, f64>, Row)>) {
    let budget_rows: Vec<_> = input
        .budgets
        .iter()
        .enumerate()
        .filter(|(_, (members, most))| members.len() > *most)
        .map(|(b, (members, most))| (b, m.named(format!("budget {b}"), (members.len() - most) as f64, INF)))
        .collect();
    // PDB j: Σ_n m_{j,n} k_n ≥ Σ_n m_{j,n} − A_j.
    let mut pdb_rows = Vec::new();
    for (j, (per, (_, most))) in pdb_homes(input).into_iter().zip(input.pdbs).enumerate() {
        let total: usize = per.values().sum();
        if total > *most {
            let per: FxHashMap<usize, f64> = per.into_iter().map(|(n, k)| (n, k as f64)).collect();
            pdb_rows.push((per, m.named(format!("pdb {j}"), (total - most) as f64, INF)));
        }
    }
    (budget_rows, pdb_rows)
}

/// Per PodDisruptionBudget: how many of its pods each candidate node holds (`m_{j,n}`).
fn pdb_homes(input: &NodeSetInput) -> Vec<FxHashMap<usize, usize>> {
    input
        .pdbs
        .iter()
        .map(|(pods, _)| {
            let mut per: FxHashMap<usize, usize> = FxHashMap::default();
            for pod in pods {
                if let Some(&Some(n)) = input.homes.get(pod.0 as usize) {
                    *per.entry(n).or_default() += 1;
                }
            }
            per
        })
        .collect()
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
fn new_nodes(m: &mut Model, input: &NodeSetInput, p: &Problem, s: &Structure, demand: &[Row], unit: &[f64]) {
    let nr = s.dims.len();
    let mut group_rows: FxHashMap<usize, Vec<_>> = FxHashMap::default();
    for (c, &row) in demand.iter().enumerate() {
        let mut gs: Vec<usize> = s.class_groups[c].iter().map(|g| g.ix()).collect();
        gs.sort_unstable();
        for g in gs {
            let rows = group_rows.entry(g).or_insert_with(|| (0..nr).map(|d| m.named(format!("new g{g} r{d}"), -INF, 0.0)).collect());
            let mut e: Vec<_> = vec![(row, 1.0)];
            e.extend((0..nr).filter(|&d| s.req[c][d] != 0).map(|d| (rows[d], s.req[c][d] as f64 / unit[d])));
            m.add_col(0.0, 0.0, INF, false, e, ColKind::AggPods { class: super::ids::Class::at(c), group: super::ids::Group::at(g) });
        }
    }
    let mut groups: Vec<usize> = group_rows.keys().copied().collect();
    groups.sort_unstable();
    for g in groups {
        for &f in &p.groups[g] {
            let cfg = &p.configs[f as usize];
            let room = cfg.room();
            let e: Vec<_> = (0..nr).filter(|&d| unit[d] > 0.0).map(|d| (group_rows[&g][d], -(room.get(&s.dims[d]) as f64) / unit[d])).filter(|&(_, v)| v != 0.0).collect();
            let cost = input.weights.node_cost(cfg.price, cfg.capacity_type == SPOT, 0);
            m.add_col(cost, 0.0, INF, true, e, ColKind::AggNodes(super::ids::Config::at(f as usize)));
        }
    }
}

/// The program's start from the drain heuristic: keep binaries 1 except on drained nodes, and every
/// `x_{c,t}` at its count.
fn start_point(columns: usize, keep: &[Col], d: &Drained, pools: &Pools, x_cols: &FxHashMap<(usize, usize), Col>) -> Vec<f64> {
    let mut x0 = vec![0.0; columns];
    for (n, k) in keep.iter().enumerate() {
        x0[k.ix()] = if d.removed[n] { 0.0 } else { 1.0 };
    }
    for (&(c, t), &count) in &d.x {
        x0[x_cols[&(c, pools.of[t])].ix()] += count as f64;
    }
    x0
}

/// Above this many `(class, target)` pairs the program pools targets ([`Pools`]).
pub const EXACT_PAIRS: usize = 20_000;

/// The targets as the program sees them. Exact (every target its own pool) up to [`EXACT_PAIRS`]
/// pairs; above, the targets that admit the same classes are pooled, candidates apart from the
/// others: a pool's capacity is the sum of its targets' (a candidate's counted while it is kept) and
/// its cap per class the sum of theirs. Pooling sums the rows of the exact program, so it is a
/// relaxation: its bound stays valid, and its set, like every proposal, is judged by the planners.
struct Pools {
    /// Per target, its pool.
    of: Vec<usize>,
    /// Per pool, its targets.
    members: Vec<Vec<usize>>,
    /// Per pool, whether its targets are candidates.
    candidate: Vec<bool>,
}

impl Pools {
    fn of(lay: &Layout) -> Pools {
        let nt = lay.targets.len();
        let pairs: usize = lay.allowed.iter().map(FxHashMap::len).sum();
        let mut classes: Vec<Vec<usize>> = vec![Vec::new(); nt];
        for (c, a) in lay.allowed.iter().enumerate() {
            for &t in a.keys() {
                classes[t].push(c);
            }
        }
        let mut by_key: FxHashMap<(bool, Vec<usize>), usize> = FxHashMap::default();
        let mut pools = Pools { of: Vec::with_capacity(nt), members: Vec::new(), candidate: Vec::new() };
        for (t, cs) in classes.into_iter().enumerate() {
            let candidate = lay.removable_at.contains_key(&t);
            let q = if pairs <= EXACT_PAIRS {
                pools.members.len()
            } else {
                let next = pools.members.len();
                *by_key.entry((candidate, cs)).or_insert(next)
            };
            if q == pools.members.len() {
                pools.members.push(Vec::new());
                pools.candidate.push(candidate);
            }
            pools.members[q].push(t);
            pools.of.push(q);
        }
        pools
    }
}

/// A point of the program found by draining candidates one by one into the room of kept nodes.
struct Drained {
    /// Per index into `removable`: drained (removed).
    removed: Vec<bool>,
    /// `x_{c,t}`: pods of class c on target t (every pod of a kept candidate at home).
    x: FxHashMap<(usize, usize), u32>,
}

/// The drain heuristic, the program's start: candidates are taken in the caller's order (its ranking)
/// and a candidate is removed when every pod it hosts fits, first fit and largest pod first, in the
/// room left on existing nodes (the class's allowed targets and caps) that are not removed, and
/// removing it saves more than its disruption and stays within every budget and PDB. Non-candidates
/// are filled first, then candidates from the end of the ranking (the least likely to be drained); a
/// candidate that received pods is never drained afterwards. No new node is opened: the start is a
/// set of pure deletions (HiGHS looks for replacements from there). With no deletion it is the cluster
/// as it is, which is always a point of the program.
fn drain(input: &NodeSetInput, lay: &Layout, req: &[Vec<i64>]) -> Drained {
    let nn = input.removable.len();
    let nt = lay.targets.len();
    let nr = req.first().map_or(0, Vec::len);
    // Room left per target: a candidate's free room less its own pods'.
    let mut left: Vec<Vec<i64>> = lay.free.clone();
    let mut x: FxHashMap<(usize, usize), u32> = FxHashMap::default();
    let mut hosted: Vec<Vec<(usize, u32)>> = vec![Vec::new(); nn];
    for (c, h) in lay.home.iter().enumerate() {
        for (&n, &count) in h {
            let t = lay.target_of[&input.removable[n].node];
            *x.entry((c, t)).or_default() += count;
            for (d, l) in left[t].iter_mut().enumerate() {
                *l -= req[c][d] * count as i64;
            }
            hosted[n].push((c, count));
        }
    }
    for h in &mut hosted {
        // Largest pods first (by the sum of requests over the resources, each scaled by the largest).
        h.sort_by_key(|&(c, _)| std::cmp::Reverse(req[c].iter().sum::<i64>()));
    }
    // Fill order: non-candidates, then candidates from the last ranked to the first.
    let mut order: Vec<usize> = (0..nt).filter(|t| !lay.removable_at.contains_key(t)).collect();
    order.extend((0..nn).rev().map(|n| lay.target_of[&input.removable[n].node]));
    let mut budget_left: Vec<usize> = input.budgets.iter().map(|(_, most)| *most).collect();
    let budgets_of: Vec<Vec<usize>> = (0..nn).map(|n| input.budgets.iter().enumerate().filter(|(_, (members, _))| members.contains(&n)).map(|(b, _)| b).collect()).collect();
    let mut pdb_left: Vec<usize> = input.pdbs.iter().map(|(_, most)| *most).collect();
    let pdb_counts = pdb_homes(input);
    let mut removed = vec![false; nn];
    let mut receiver = vec![false; nn];
    for n in 0..nn {
        let r = &input.removable[n];
        if receiver[n] || r.cost <= r.disruption || budgets_of[n].iter().any(|&b| budget_left[b] == 0) {
            continue;
        }
        if pdb_counts.iter().zip(&pdb_left).any(|(per, &most)| per.get(&n).is_some_and(|&k| k > most)) {
            continue;
        }
        let own = lay.target_of[&r.node];
        let mut moves: Vec<(usize, usize)> = Vec::new();
        let mut fits = true;
        'pods: for &(c, count) in &hosted[n] {
            for _ in 0..count {
                let found = order.iter().copied().find(|&t| {
                    t != own
                        && !lay.removable_at.get(&t).is_some_and(|&m| removed[m])
                        && lay.allowed[c].get(&t).is_some_and(|&cap| x.get(&(c, t)).copied().unwrap_or(0) < cap)
                        && (0..nr).all(|d| left[t][d] >= req[c][d])
                });
                let Some(t) = found else {
                    fits = false;
                    break 'pods;
                };
                *x.entry((c, t)).or_default() += 1;
                for d in 0..nr {
                    left[t][d] -= req[c][d];
                }
                moves.push((c, t));
            }
        }
        if !fits {
            for (c, t) in moves {
                *x.get_mut(&(c, t)).expect("a move made above") -= 1;
                for d in 0..nr {
                    left[t][d] += req[c][d];
                }
            }
            continue;
        }
        removed[n] = true;
        for &(c, count) in &hosted[n] {
            *x.get_mut(&(c, own)).expect("every home is counted") -= count;
        }
        for &(_, t) in &moves {
            if let Some(&m) = lay.removable_at.get(&t) {
                receiver[m] = true;
            }
        }
        for &b in &budgets_of[n] {
            budget_left[b] -= 1;
        }
        for (per, most) in pdb_counts.iter().zip(pdb_left.iter_mut()) {
            *most -= per.get(&n).copied().unwrap_or(0);
        }
    }
    x.retain(|_, v| *v > 0);
    Drained { removed, x }
}
