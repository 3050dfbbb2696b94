//! A lower bound that sees per-node rounding: the pattern LP over size classes (docs/design/milp.md,
//! "The size-class bound").
//!
//! The aggregated relaxation (`Master::aggregate`) pools the capacity of a group's nodes, so it never
//! pays for the room a node's integer size leaves over. This relaxation keeps nodes whole and drops
//! instead what couples them:
//! - dropped: spread, domain-level anti-affinity, affinity, hostname spread, host-port and pairwise
//!   hostname conflicts, NodePool limits, and preferred-affinity costs (never negative);
//! - kept: requests against each configuration's room, the configuration groups a class may use, the
//!   existing nodes a class may use (their capacity pooled per node, fractionally), cliques of classes
//!   that may not share a node (hostname anti-affinity matching itself), one-per-node classes, and the
//!   penalty for pending pods.
//!
//! Classes alike in everything kept merge into items `i` (`n_i` pods); groups that admit the same items
//! merge, keeping per distinct room the cheapest configuration and dropping dominated ones. What is left
//! is cutting stock over bins of many sizes:
//!
//! ```text
//!   min  Σ_p κ_p z_p + P Σ_i u_i
//!   s.t. Σ_p a_{i,p} z_p + Σ_e x_{i,e} + u_i ≥ n_i        ∀ i            (duals π_i ≥ 0)
//!        Σ_i req_{i,r} x_{i,e} ≤ free_{e,r}                ∀ e, r         (duals μ_{e,r} ≤ 0)
//!        z, x, u ≥ 0
//! ```
//!
//! solved by column generation with exact pricing, one small integer program per merged group `G`:
//!
//! ```text
//!   min  Σ_f κ_f y_f − Σ_i π_i a_i
//!   s.t. Σ_f y_f ≤ 1;   Σ_i req_{i,r} a_i ≤ Σ_f room_{f,r} y_f  ∀ r;   Σ_{i∈K} a_i ≤ 1  ∀ cliques K;
//!        a_i ∈ {0..ub_i} (ub_i = classes merged if one-per-node, else n_i),  y_f ∈ {0,1}
//! ```
//!
//! Every plan is a feasible point (a new node is a pattern, an existing node's pods are an `x`), so with
//! the LP value `z` and the pricing's proven lower bound `ρ` on any pattern's reduced cost,
//! `z + N · min(0, ρ)` bounds every plan from below, `N` = pods in the batch (a plan's new nodes are
//! never empty). When no pattern prices out, `ρ ≥ 0` and the bound is `z` itself.

use std::time::{Duration, Instant};

use highs::{ColProblem, Sense};
use rustc_hash::FxHashMap;

use super::families::Families;
use super::families::capacity::unit;
use super::highs_lp::{self, MipStatus, Options, SolveError};
use super::structure::Structure;
use crate::solve::problem::Problem;
use crate::solve::{Outcome, Target};

/// What the bound computation produced.
pub struct SizeBound {
    /// A proven lower bound on every plan's objective, if one was reached in time.
    pub bound: Option<f64>,
    pub items: usize,
    pub rounds: usize,
    pub columns: usize,
    /// No pattern prices out under the last duals: the bound is the LP's optimum.
    pub converged: bool,
}

/// Classes merged by everything the relaxation keeps.
struct Item {
    n: f64,
    /// Requests, scaled (`unit`).
    req: Vec<f64>,
    /// Most pods of the item one node can hold by the rules kept (not by resources).
    ub: f64,
    cliques: Vec<usize>,
    /// (target index, most pods of the item the node can hold).
    targets: Vec<(usize, f64)>,
}

/// Groups that admit the same items, with their useful configurations in families.
struct Bin {
    items: Vec<usize>,
    families: Vec<Family>,
    /// The least true cost of any of its configurations.
    cheapest: f64,
}

/// Configurations whose rooms step by one vector: room(s) = `base` + s·`step` for s = 0..len, e.g. a
/// catalog's sizes 1..400 vCPU of one shape. The pricing picks a member with one integer variable
/// instead of one binary per configuration (400 binaries took HiGHS seconds per pricing problem on
/// karpenter-1000; one family takes milliseconds). Its cost is relaxed to the line
/// `cost0 + s·dcost` below every member's cost, so the pricing stays a relaxation.
struct Family {
    /// Scaled rooms (`unit`).
    base: Vec<f64>,
    step: Vec<f64>,
    cost0: f64,
    dcost: f64,
    /// Each member's true cost.
    costs: Vec<f64>,
}

impl Family {
    /// Splits configurations (room, cost), sorted by cost, into maximal runs with a constant room step.
    fn split(configs: &[(Vec<i64>, f64)], scale: &[f64]) -> Vec<Family> {
        let mut out = Vec::new();
        let mut start = 0;
        while start < configs.len() {
            let mut end = start + 1;
            if end < configs.len() {
                let step: Vec<i64> = configs[end].0.iter().zip(&configs[start].0).map(|(a, b)| a - b).collect();
                while end + 1 < configs.len() && configs[end + 1].0.iter().zip(&configs[end].0).map(|(a, b)| a - b).eq(step.iter().copied()) {
                    end += 1;
                }
                end += 1;
            }
            let run = &configs[start..end];
            let sc = |v: &[i64]| -> Vec<f64> { v.iter().zip(scale).map(|(&q, u)| q as f64 * u).collect() };
            let base = sc(&run[0].0);
            let step = if run.len() > 1 { run[1].0.iter().zip(&run[0].0).map(|(a, b)| (a - b) as f64).zip(scale).map(|(d, u)| d * u).collect() } else { vec![0.0; scale.len()] };
            let cost0 = run[0].1;
            let dcost = (1..run.len()).map(|k| (run[k].1 - cost0) / k as f64).fold(f64::INFINITY, f64::min);
            out.push(Family { base, step, cost0, dcost: if dcost.is_finite() { dcost.max(0.0) } else { 0.0 }, costs: run.iter().map(|c| c.1).collect() });
            start = end;
        }
        out
    }
}

/// A column: counts per item on one node of a bin's configuration, and its cost.
struct Column {
    counts: Vec<(usize, f64)>,
    cost: f64,
}

/// Sizes a reduced cost must beat to count as improving.
const RC_EPS: f64 = 1e-7;
/// The bound counts as converged within this fraction of the LP value.
const CONVERGED: f64 = 1e-4;
/// Greedy fills added per bin and round beside the exact pattern ([`fills`]).
const FILLS_PER_ROUND: usize = 8;

/// The size-class bound of the batch (`s`, `fams`: [`super::families::build`]) from the greedy plan's
/// nodes, until `deadline`.
pub fn size_bound(p: &Problem, s: &Structure, fams: &Families, greedy: &Outcome, deadline: Instant, opts: Options) -> Result<SizeBound, SolveError> {
    let scale: Vec<f64> = s.dims.iter().map(|d| unit(d)).collect();
    let Items { items, groups: item_groups, of_class: item_of_class } = merge_items(s, fams, &scale);
    let Some(bins) = merge_bins(p, s, &item_groups, &scale) else {
        // The node-count argument needs every node to cost something.
        return Ok(SizeBound { bound: None, items: items.len(), rounds: 0, columns: 0, converged: false });
    };

    // Existing-node rows, then the seed columns: the greedy plan's nodes.
    let target_rows: Vec<usize> = {
        let mut ts: Vec<usize> = items.iter().flat_map(|it| it.targets.iter().map(|t| t.0)).collect();
        ts.sort_unstable();
        ts.dedup();
        ts
    };
    let mut columns = greedy_columns(p, greedy, &item_of_class);

    let big_n: f64 = items.iter().map(|it| it.n).sum();
    let mut out = SizeBound { bound: None, items: items.len(), rounds: 0, columns: 0, converged: false };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some((z, pi)) = restricted_master(p, s, &items, &target_rows, &columns, &scale, opts, left)? else { break };
        out.rounds += 1;

        // Pricing, bin by bin: the exact pattern and a few greedy fills that also price out.
        let mut least = 0.0f64;
        let mut ratio = 1.0f64;
        let mut added = 0;
        let mut proven = true;
        for bin in &bins {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                proven = false;
                break;
            }
            let Priced { lower, column } = price(bin, &items, &pi, opts, left)?;
            if lower == f64::NEG_INFINITY {
                proven = false;
            }
            least = least.min(lower);
            ratio = ratio.max(1.0 - lower.min(0.0) / bin.cheapest);
            let exact = column.as_ref().map(|c| c.counts.clone());
            if let Some(col) = column {
                columns.push(col);
                added += 1;
            }
            for col in fills(bin, &items, &pi, FILLS_PER_ROUND) {
                if exact.as_ref() != Some(&col.counts) {
                    columns.push(col);
                    added += 1;
                }
            }
        }
        tracing::debug!(round = out.rounds, lp = z, least_reduced_cost = least, ratio, added, bins = bins.len(), columns = columns.len(), "size bound round");
        if proven {
            // Two arguments, the larger wins. A plan has at most N new nodes: z + N·min(0, ρ). And the
            // duals scaled by 1/λ price no pattern out (π·a_p ≤ κ_p − ρ_b ≤ λ κ_p with λ = max over
            // bins of 1 − ρ_b / (the bin's cheapest node)), so they are dual feasible: z / λ (Farley).
            let b = (z + big_n * least.min(0.0)).max(z / ratio);
            out.bound = Some(out.bound.map_or(b, |o: f64| o.max(b)));
            // Within 0.01 % of the LP value, far below any target gap, what is left is HiGHS's
            // tolerance (karpenter-1000 spent its last 30 rounds, 1 s, on reduced costs of -1e-5).
            if z - b <= CONVERGED * z.abs().max(1.0) {
                out.converged = true;
                break;
            }
        }
        if added == 0 {
            out.converged = proven;
            break;
        }
    }
    out.columns = columns.len();
    Ok(out)
}

/// The items, each item's allowed configuration groups (sorted) and each class's item.
struct Items {
    items: Vec<Item>,
    groups: Vec<Vec<usize>>,
    of_class: Vec<usize>,
}

/// Merges classes alike in everything the relaxation keeps (requests, groups, targets, cliques,
/// one-per-node) into items, in class order.
fn merge_items(s: &Structure, fams: &Families, scale: &[f64]) -> Items {
    let nc = s.n.len();
    // What the node-conflict family leaves the bound: cliques and one-per-node classes.
    let conflicts = &fams.node_conflicts;
    let mut class_cliques: Vec<Vec<usize>> = vec![Vec::new(); nc];
    for (k, members) in conflicts.cliques.iter().enumerate() {
        for &c in members {
            class_cliques[c.ix()].push(k);
        }
    }
    type ItemKey = (Vec<i64>, Vec<usize>, Vec<(usize, u32)>, Vec<usize>, bool);
    let mut item_of_key: FxHashMap<ItemKey, usize> = FxHashMap::default();
    let mut items: Vec<Item> = Vec::new();
    let mut item_groups: Vec<Vec<usize>> = Vec::new();
    let mut item_of_class: Vec<usize> = vec![usize::MAX; nc];
    for c in 0..nc {
        let mut groups: Vec<usize> = if s.no_new_nodes[c] { Vec::new() } else { s.class_groups[c].iter().map(|g| g.ix()).collect() };
        groups.sort_unstable();
        let mut allowed: Vec<(usize, u32)> = s.allowed[c].iter().map(|&(t, cap)| (t.ix(), cap)).collect();
        allowed.sort_unstable();
        let one = conflicts.one_per_node[c] && class_cliques[c].is_empty();
        let key = (s.req[c].clone(), groups.clone(), allowed.clone(), class_cliques[c].clone(), one);
        let i = *item_of_key.entry(key).or_insert_with(|| {
            items.push(Item {
                n: 0.0,
                req: s.req[c].iter().zip(scale).map(|(&q, u)| q as f64 * u).collect(),
                ub: 0.0,
                cliques: class_cliques[c].clone(),
                targets: allowed.iter().map(|&(t, _)| (t, 0.0)).collect(),
            });
            item_groups.push(groups);
            items.len() - 1
        });
        item_of_class[c] = i;
        let it = &mut items[i];
        it.n += s.n[c] as f64;
        it.ub += if one { 1.0 } else { s.n[c] as f64 };
        for (slot, &(_, cap)) in it.targets.iter_mut().zip(&allowed) {
            slot.1 += cap as f64;
        }
    }
    for it in &mut items {
        it.ub = it.ub.min(it.n);
        for t in &mut it.targets {
            t.1 = t.1.min(it.n);
        }
    }
    Items { items, groups: item_groups, of_class: item_of_class }
}

/// Bins: configuration groups keyed by the items they admit, with the cheapest configuration per
/// distinct room, dominated rooms dropped, in families. None if some configuration costs nothing.
fn merge_bins(p: &Problem, s: &Structure, item_groups: &[Vec<usize>], scale: &[f64]) -> Option<Vec<Bin>> {
    let ng = p.groups.len();
    let mut admits: Vec<Vec<usize>> = vec![Vec::new(); ng];
    for (i, gs) in item_groups.iter().enumerate() {
        for &g in gs {
            admits[g].push(i);
        }
    }
    let mut bin_of_items: FxHashMap<Vec<usize>, usize> = FxHashMap::default();
    let mut raw: Vec<FxHashMap<Vec<i64>, f64>> = Vec::new();
    let mut bin_items: Vec<Vec<usize>> = Vec::new();
    for (g, admitted) in admits.iter().enumerate() {
        if admitted.is_empty() {
            continue;
        }
        let b = *bin_of_items.entry(admitted.clone()).or_insert_with(|| {
            raw.push(FxHashMap::default());
            bin_items.push(admitted.clone());
            raw.len() - 1
        });
        for &f in &p.groups[g] {
            let cfg = &p.configs[f as usize];
            if cfg.cost <= 0.0 {
                return None;
            }
            let room = cfg.room();
            let key: Vec<i64> = s.dims.iter().map(|d| room.get(d)).collect();
            let slot = raw[b].entry(key).or_insert(f64::INFINITY);
            *slot = slot.min(cfg.cost);
        }
    }
    let bins = raw
        .into_iter()
        .zip(bin_items)
        .map(|(rooms, items)| {
            let mut all: Vec<(Vec<i64>, f64)> = rooms.into_iter().collect();
            all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
            let mut kept: Vec<(Vec<i64>, f64)> = Vec::new();
            for (room, cost) in all {
                if !kept.iter().any(|(r, _)| r.iter().zip(&room).all(|(a, b)| a >= b)) {
                    kept.push((room, cost));
                }
            }
            let cheapest = kept.iter().map(|k| k.1).fold(f64::INFINITY, f64::min);
            Bin { items, families: Family::split(&kept, scale), cheapest }
        })
        .collect();
    Some(bins)
}

/// The greedy plan's new nodes as columns (counts per item), so the first LP holds a feasible plan.
fn greedy_columns(p: &Problem, greedy: &Outcome, item_of_class: &[usize]) -> Vec<Column> {
    let mut columns: Vec<Column> = Vec::new();
    let mut per_node: Vec<FxHashMap<usize, f64>> = vec![FxHashMap::default(); greedy.new_nodes.len()];
    for (id, t) in &greedy.placements {
        if let Target::New(k) = *t {
            *per_node[k].entry(item_of_class[p.class_of[id]]).or_default() += 1.0;
        }
    }
    for (k, counts) in per_node.into_iter().enumerate() {
        let mut counts: Vec<(usize, f64)> = counts.into_iter().collect();
        counts.sort_unstable_by_key(|a| a.0);
        columns.push(Column { counts, cost: p.configs[greedy.new_nodes[k]].cost });
    }
    columns
}

/// Solves the restricted master over `columns`: its LP value and the items' duals (clamped at 0), or
/// None if HiGHS did not prove it optimal.
#[allow(clippy::too_many_arguments)]
fn restricted_master(
    p: &Problem,
    s: &Structure,
    items: &[Item],
    target_rows: &[usize],
    columns: &[Column],
    scale: &[f64],
    opts: Options,
    left: Duration,
) -> Result<Option<(f64, Vec<f64>)>, SolveError> {
    let nd = s.dims.len();
    let penalty = p.weights.unschedulable_pod;
    let mut pb = ColProblem::default();
    let demand: Vec<_> = items.iter().map(|it| pb.add_row(it.n..)).collect();
    let mut cap_row: FxHashMap<(usize, usize), highs::Row> = FxHashMap::default();
    for &t in target_rows {
        for (d, u) in scale.iter().enumerate() {
            cap_row.insert((t, d), pb.add_row(..=s.free[t][d] as f64 * u));
        }
    }
    for (i, it) in items.iter().enumerate() {
        pb.add_column(penalty, 0.0..=it.n, [(demand[i], 1.0)]);
        for &(t, cap) in &it.targets {
            let mut e = vec![(demand[i], 1.0)];
            for d in 0..nd {
                if it.req[d] != 0.0 {
                    e.push((cap_row[&(t, d)], it.req[d]));
                }
            }
            pb.add_column(0.0, 0.0..=cap, e);
        }
    }
    for col in columns {
        pb.add_column(col.cost, 0.0.., col.counts.iter().map(|&(i, a)| (demand[i], a)));
    }
    let mut model = pb.optimise(Sense::Minimise);
    highs_lp::configure(&mut model, &opts, left);
    let solved = model.try_solve().map_err(highs_lp::failed("size-class bound's LP"))?;
    if MipStatus::of(solved.status()) != MipStatus::Optimal {
        return Ok(None);
    }
    let z = solved.objective_value();
    let duals = solved.get_solution().dual_rows().to_vec();
    Ok(Some((z, duals[..items.len()].iter().map(|&v| v.max(0.0)).collect())))
}

/// Up to `k` patterns of the bin that price out under `pi`, the best first: per configuration of every
/// family, the items taken by dual value per unit of the room they use, as many copies as fit and the
/// rules kept allow. They cost no exact pricing problem and give column generation several columns a
/// round (karpenter-100 converged after 145 rounds without them, 80 with eight).
fn fills(bin: &Bin, items: &[Item], pi: &[f64], k: usize) -> Vec<Column> {
    let useful: Vec<usize> = bin.items.iter().copied().filter(|&i| pi[i] > 0.0).collect();
    if useful.is_empty() || k == 0 {
        return Vec::new();
    }
    // (reduced cost, pattern) of every fill that prices out.
    let mut found: Vec<(f64, Column)> = Vec::new();
    let mut order: Vec<(f64, usize)> = Vec::with_capacity(useful.len());
    for fam in &bin.families {
        for (size, &cost) in fam.costs.iter().enumerate() {
            let room: Vec<f64> = fam.base.iter().zip(&fam.step).map(|(b, st)| b + size as f64 * st).collect();
            order.clear();
            for &i in &useful {
                let used: f64 = items[i].req.iter().zip(&room).map(|(q, r)| if *q > 0.0 { if *r > 0.0 { q / r } else { f64::INFINITY } } else { 0.0 }).sum();
                if used.is_finite() {
                    order.push((pi[i] / used.max(1e-12), i));
                }
            }
            order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut left = room.clone();
            let mut clique_used: Vec<usize> = Vec::new();
            let mut counts: Vec<(usize, f64)> = Vec::new();
            let mut value = 0.0;
            for &(_, i) in &order {
                let it = &items[i];
                if it.cliques.iter().any(|q| clique_used.contains(q)) {
                    continue;
                }
                let mut n = it.ub;
                for (q, l) in it.req.iter().zip(&left) {
                    if *q > 0.0 {
                        n = n.min((l / q + 1e-9).floor());
                    }
                }
                if !it.cliques.is_empty() {
                    n = n.min(1.0);
                }
                if n < 1.0 {
                    continue;
                }
                for (l, q) in left.iter_mut().zip(&it.req) {
                    *l -= n * q;
                }
                clique_used.extend(it.cliques.iter().copied());
                counts.push((i, n));
                value += pi[i] * n;
            }
            if cost - value < -RC_EPS {
                counts.sort_unstable_by_key(|a| a.0);
                found.push((cost - value, Column { counts, cost }));
            }
        }
    }
    // The best k by reduced cost; the same counts on a dearer configuration add nothing.
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Column> = Vec::with_capacity(k);
    for (_, c) in found {
        if out.len() == k {
            break;
        }
        if !out.iter().any(|o| o.counts == c.counts) {
            out.push(c);
        }
    }
    out
}

struct Priced {
    /// A proven lower bound on the reduced cost of any pattern of the bin (−∞ if none was proven).
    lower: f64,
    /// The best pattern found, if it prices out.
    column: Option<Column>,
}

/// The pricing integer program of one bin under item duals `pi`.
fn price(bin: &Bin, items: &[Item], pi: &[f64], opts: Options, left: Duration) -> Result<Priced, SolveError> {
    // Items with no dual value never improve a pattern.
    let useful: Vec<usize> = bin.items.iter().copied().filter(|&i| pi[i] > 0.0).collect();
    if useful.is_empty() {
        // Every pattern costs more than nothing.
        return Ok(Priced { lower: 0.0, column: None });
    }
    let nd = items[useful[0]].req.len();
    let mut pb = ColProblem::default();
    let choose = pb.add_row(..=1.0);
    let dims: Vec<_> = (0..nd).map(|_| pb.add_row(..=0.0)).collect();
    let mut clique_row: FxHashMap<usize, highs::Row> = FxHashMap::default();
    for &i in &useful {
        for &k in &items[i].cliques {
            clique_row.entry(k).or_insert_with(|| pb.add_row(..=1.0));
        }
    }
    for &i in &useful {
        let it = &items[i];
        let mut e: Vec<(highs::Row, f64)> = (0..nd).filter(|&d| it.req[d] != 0.0).map(|d| (dims[d], it.req[d])).collect();
        e.extend(it.cliques.iter().map(|k| (clique_row[k], 1.0)));
        pb.add_column_with_integrality(-pi[i], 0.0..=it.ub, e, true);
    }
    // Per family: y (the node is of this family) and s (its size step), s ≤ (len − 1)·y.
    for fam in &bin.families {
        let link = pb.add_row(..=0.0);
        let e: Vec<(highs::Row, f64)> = [(choose, 1.0), (link, -((fam.costs.len() - 1) as f64))].into_iter().chain((0..nd).filter(|&d| fam.base[d] != 0.0).map(|d| (dims[d], -fam.base[d]))).collect();
        pb.add_column_with_integrality(fam.cost0, 0.0..=1.0, e, true);
        let e: Vec<(highs::Row, f64)> = std::iter::once((link, 1.0)).chain((0..nd).filter(|&d| fam.step[d] != 0.0).map(|d| (dims[d], -fam.step[d]))).collect();
        pb.add_column_with_integrality(fam.dcost, 0.0..=(fam.costs.len() - 1) as f64, e, true);
    }
    let mut model = pb.optimise(Sense::Minimise);
    highs_lp::configure(&mut model, &opts, left);
    model.set_option("mip_rel_gap", 0.0);
    model.set_option("mip_abs_gap", 1e-7);
    let solved = model.try_solve().map_err(highs_lp::failed("size-class bound's pricing problem"))?;
    let status = MipStatus::of(solved.status());
    let dual = solved.double_info_value(c"mip_dual_bound").ok().filter(|b| b.is_finite());
    let lower = match (status, dual) {
        (MipStatus::Optimal, Some(b)) => b.min(solved.objective_value()),
        (_, Some(b)) => b,
        _ => f64::NEG_INFINITY,
    };
    let has_solution = matches!(solved.primal_solution_status(), highs::HighsSolutionStatus::Feasible);
    let mut column = None;
    if has_solution {
        let x = solved.get_solution().columns().to_vec();
        let counts: Vec<(usize, f64)> = useful.iter().enumerate().map(|(j, &i)| (i, x[j].round())).filter(|a| a.1 > 0.0).collect();
        let value: f64 = counts.iter().map(|&(i, a)| pi[i] * a).sum();
        let mut j = useful.len();
        let mut cost = None;
        for fam in &bin.families {
            if x[j] > 0.5 {
                cost = fam.costs.get(x[j + 1].round() as usize).copied();
            }
            j += 2;
        }
        // The member's true cost can be a little above the relaxed line.
        if let Some(cost) = cost
            && !counts.is_empty()
            && cost - value < -RC_EPS
        {
            column = Some(Column { counts, cost });
        }
    }
    Ok(Priced { lower, column })
}
