//! A plan from the aggregated integer program's solution: its whole nodes per configuration and whole
//! pods per configuration group, packed into nodes.
//!
//! The aggregated integer program ([`super::aggregated_integer`], with the fit cuts) counts nodes per
//! configuration `y_f` and pods per group `x_{c,g}`, and holds every row that couples nodes (spread,
//! affinity, limits, existing nodes) over those counts. What it does not know is which pods share a
//! node. Per group this packs its pods into its nodes, best fit by decreasing size, class by class:
//!
//! ```text
//! for c in classes of g, largest dominant share of the group's largest room first:
//!     for each node of g with room for one pod of c, least room left after it first:
//!         put min(left_c, what the residual room and the per-node rules (Family::cap,
//!         Family::validate) allow) pods of c on it
//! ```
//!
//! Best fit runs once per class order (dominant share, then each resource alone) and the cheapest
//! packing is kept. Pods that find no room go where they add the least cost: on a node moved to the
//! cheapest configuration of its group that holds it and them, or on a node of their own. Every node
//! of every packing becomes a pattern column of the pattern master, so the integer program can
//! combine the tight nodes of one packing with those of another. Every pod
//! keeps its group, so every domain count the coupling rows read is the aggregated solution's; the
//! result is checked against the whole pattern model all the same ([`Master::violation`]) before it is
//! used. When every pod packs into the solution's own nodes the plan costs what the aggregated
//! solution costs, and where that program was solved to its gap the plan is proven within it: the
//! column-generated integer program, which only knows the patterns it priced, may never find it
//! (openb: 27 columns, optimal over them, 4 % above this bound).

use rustc_hash::FxHashMap;

use super::families;
use super::ids::{Class, Config, Group};
use super::master::Master;
use super::model::{ColKind, Pattern};
use super::point;
use super::pricing;

/// A full column vector of the pattern master built from the aggregated solution, its objective, and
/// how many pods needed nodes the aggregated solution did not have.
pub struct Packed {
    pub start: Vec<f64>,
    pub objective: f64,
    pub extra_nodes: usize,
}

/// Packs the aggregated integer solution `sol` (columns of `agg`) into patterns of `m`, adds them as
/// columns, and returns the start vector if it holds every row of `m`.
pub fn pack(m: &mut Master, agg: &Master, sol: &[f64]) -> Option<Packed> {
    let p = m.p;
    let mut nodes: FxHashMap<Group, Vec<Config>> = FxHashMap::default();
    let mut want: FxHashMap<Group, Vec<(Class, u32)>> = FxHashMap::default();
    let mut assign: Vec<((Class, super::ids::Target), f64)> = Vec::new();
    let mut pending: Vec<(Class, f64)> = Vec::new();
    for (j, col) in agg.model.columns() {
        let v = sol.get(j.ix()).copied().unwrap_or(0.0).round();
        if v <= 0.0 {
            continue;
        }
        match col.kind {
            ColKind::AggNodes(f) => nodes.entry(Group::at(p.configs[f.ix()].group)).or_default().extend(std::iter::repeat_n(f, v as usize)),
            ColKind::AggPods { class, group } => want.entry(group).or_default().push((class, v as u32)),
            ColKind::Assign { class, target } => assign.push(((class, target), v)),
            ColKind::Pending(c) => pending.push((c, v)),
            _ => {}
        }
    }
    let mut groups: Vec<Group> = want.keys().copied().collect();
    groups.sort();
    let mut patterns: Vec<Pattern> = Vec::new();
    let mut also: Vec<Pattern> = Vec::new();
    let mut extra_nodes = 0;
    for g in groups {
        let mut on = nodes.remove(&g).unwrap_or_default();
        // Largest room first (by cpu, then memory): the tie-break of the best fit.
        on.sort_by_key(|&f| std::cmp::Reverse(room_of(m, f)));
        let pk = pack_group(m, g, &on, &want[&g])?;
        patterns.extend(pk.patterns);
        also.extend(pk.also);
        extra_nodes += pk.extra;
    }
    let z: Vec<(super::ids::Col, f64)> = patterns.into_iter().map(|pat| (m.add_pattern(pat), 1.0)).collect();
    // The nodes of the dearer packings are columns too: the integer program may combine a tight node
    // of one with the nodes of another.
    for pat in also {
        m.add_pattern(pat);
    }
    let x = point(m, z, assign, pending)?;
    if let Some(why) = m.violation(&x) {
        tracing::debug!("the packed aggregated solution breaks {why}");
        return None;
    }
    let objective = m.model.objective(&x);
    Some(Packed { start: x, objective, extra_nodes })
}

/// One group packed: the nodes of its cheapest packing, how many pods of it needed a node the
/// aggregated solution did not have, and the nodes of its other packings.
struct Packing {
    patterns: Vec<Pattern>,
    extra: usize,
    also: Vec<Pattern>,
}

/// Dominant share of a class's requests in `room`.
fn share(m: &Master, c: Class, room: &[i64]) -> f64 {
    m.s.req[c.ix()]
        .iter()
        .zip(room)
        .map(|(&q, &r)| {
            if r > 0 {
                q as f64 / r as f64
            } else if q > 0 {
                f64::INFINITY
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max)
}

/// One node being packed: its configuration, pods per class and the room left.
struct Bin {
    f: Config,
    counts: Vec<(Class, u32)>,
    left: Vec<i64>,
}

/// The orders the classes are packed in: by dominant share of the group's largest room, then by each
/// dimension's request alone (largest first). The cheapest packing is kept.
fn orders(m: &Master, want: &[(Class, u32)], largest: &[i64]) -> Vec<Vec<(Class, u32)>> {
    let mut out: Vec<Vec<(Class, u32)>> = Vec::new();
    let mut by_share = want.to_vec();
    by_share.sort_by(|a, b| share(m, b.0, largest).total_cmp(&share(m, a.0, largest)).then(a.0.cmp(&b.0)));
    out.push(by_share);
    for d in 0..m.s.dims.len() {
        if m.s.dims[d] == "pods" || want.iter().all(|&(c, _)| m.s.req[c.ix()][d] == 0) {
            continue;
        }
        let mut by_dim = want.to_vec();
        by_dim.sort_by(|a, b| m.s.req[b.0.ix()][d].cmp(&m.s.req[a.0.ix()][d]).then(share(m, b.0, largest).total_cmp(&share(m, a.0, largest))).then(a.0.cmp(&b.0)));
        if !out.contains(&by_dim) {
            out.push(by_dim);
        }
    }
    out
}

/// The patterns of one group: its pods `want` on its nodes `on`, then what did not fit on larger
/// configurations of those nodes or on nodes of their own; the cheapest of the packings, with the
/// others' nodes beside it. None if some pod fits no configuration of the group.
fn pack_group(m: &Master, g: Group, on: &[Config], want: &[(Class, u32)]) -> Option<Packing> {
    let p = m.p;
    let dims = &m.s.dims;
    let largest: Vec<i64> = (0..dims.len()).map(|d| p.groups[g.ix()].iter().map(|&f| room_of(m, Config(f))[d]).max().unwrap_or(0)).collect();
    let mut by_cost: Vec<Config> = p.groups[g.ix()].iter().map(|&f| Config(f)).collect();
    by_cost.sort_by(|&a, &b| p.configs[a.ix()].cost.total_cmp(&p.configs[b.ix()].cost).then(a.cmp(&b)));
    let mut best: Option<(f64, Vec<Bin>, usize)> = None;
    let mut also: Vec<Pattern> = Vec::new();
    for order in orders(m, want, &largest) {
        let mut bins: Vec<Bin> = on.iter().map(|&f| Bin { f, counts: Vec::new(), left: room_of(m, f) }).collect();
        let rest = best_fit(m, &mut bins, &order, &largest);
        let before = bins.len();
        let mut upgraded = 0;
        repair(m, &mut bins, rest, &by_cost, &mut upgraded)?;
        let extra = bins.len() - before + upgraded;
        bins.retain(|b| !b.counts.is_empty());
        let cost: f64 = bins.iter().map(|b| p.configs[b.f.ix()].cost).sum();
        tracing::debug!(group = %g, nodes = on.len(), extra, cost, "packed a group");
        if best.as_ref().is_none_or(|(c, _, _)| cost < *c) {
            if let Some((_, old, _)) = best.replace((cost, bins, extra)) {
                also.extend(old.into_iter().filter_map(|b| pricing::validate(m, b.f, b.counts).ok()));
            }
        } else {
            also.extend(bins.into_iter().filter_map(|b| pricing::validate(m, b.f, b.counts).ok()));
        }
    }
    let (_, bins, extra) = best?;
    let pats: Option<Vec<Pattern>> = bins.into_iter().map(|b| pricing::validate(m, b.f, b.counts).ok()).collect();
    Some(Packing { patterns: pats?, extra, also })
}

fn room_of(m: &Master, f: Config) -> Vec<i64> {
    let r = m.p.configs[f.ix()].room();
    m.s.dims.iter().map(|d| r.get(d)).collect()
}

/// Best fit by decreasing size: each class in `order` takes the nodes it leaves the least room on
/// (summed over the resources, each as a share of the group's `largest` room), as many pods at a time
/// as a node takes. Returns the pods that found no room. Sizes in one group are not nested (a GPU pod
/// with few cores against a many-core pod without GPUs), so the tightest node, not the first, keeps
/// the nodes the later classes need.
fn best_fit(m: &Master, bins: &mut [Bin], order: &[(Class, u32)], largest: &[i64]) -> Vec<(Class, u32)> {
    let slack = |l: &[i64], req: &[i64]| -> f64 { l.iter().zip(req).zip(largest).map(|((&l, &q), &r)| if r > 0 { (l - q) as f64 / r as f64 } else { 0.0 }).sum() };
    let mut rest = Vec::new();
    for &(c, n) in order {
        let req = &m.s.req[c.ix()];
        let mut n = n;
        let mut cand: Vec<(f64, usize)> = (0..bins.len()).filter(|&k| bins[k].left.iter().zip(req).all(|(&l, &q)| l >= q)).map(|k| (slack(&bins[k].left, req), k)).collect();
        cand.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, k) in cand {
            if n == 0 {
                break;
            }
            let b = &mut bins[k];
            n -= place(m, b.f, &mut b.counts, &mut b.left, c, n);
        }
        if n > 0 {
            rest.push((c, n));
        }
    }
    rest
}

/// Places the pods `rest` that found no room: each class's pods go, as many at a time as fit, where
/// they add the least cost: on a node moved to the cheapest configuration of its group that holds its
/// pods and them (counted in `upgraded`), or on a new node of the cheapest configuration that takes
/// them. None if a pod fits no configuration.
fn repair(m: &Master, bins: &mut Vec<Bin>, rest: Vec<(Class, u32)>, by_cost: &[Config], upgraded: &mut usize) -> Option<()> {
    let p = m.p;
    let rooms: Vec<Vec<i64>> = by_cost.iter().map(|&f| room_of(m, f)).collect();
    for (c, mut n) in rest {
        let req = m.s.req[c.ix()].clone();
        while n > 0 {
            // (added cost, bin or None for a new node, configuration), cheapest first.
            let mut options: Vec<(f64, Option<usize>, usize)> = Vec::new();
            for (k, b) in bins.iter().enumerate() {
                let room_f = room_of(m, b.f);
                let used: Vec<i64> = room_f.iter().zip(&b.left).map(|(r, l)| r - l).collect();
                if let Some(i) = (0..by_cost.len()).find(|&i| rooms[i].iter().zip(&used).zip(&req).all(|((&r, &u), &q)| r >= u + q)) {
                    options.push((p.configs[by_cost[i].ix()].cost - p.configs[b.f.ix()].cost, Some(k), i));
                }
            }
            if let Some(i) = (0..by_cost.len()).find(|&i| rooms[i].iter().zip(&req).all(|(&r, &q)| r >= q)) {
                options.push((p.configs[by_cost[i].ix()].cost, None, i));
            }
            options.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut placed = 0;
            for (_, k, i) in options {
                let f = by_cost[i];
                let (mut counts, mut left) = match k {
                    Some(k) => {
                        let b = &bins[k];
                        let room_f = room_of(m, b.f);
                        (b.counts.clone(), rooms[i].iter().zip(&room_f).zip(&b.left).map(|((r, rf), l)| r - (rf - l)).collect::<Vec<i64>>())
                    }
                    None => (Vec::new(), rooms[i].clone()),
                };
                placed = place(m, f, &mut counts, &mut left, c, n);
                if placed > 0 {
                    match k {
                        Some(k) => {
                            if bins[k].f != f {
                                *upgraded += 1;
                            }
                            bins[k] = Bin { f, counts, left };
                        }
                        None => bins.push(Bin { f, counts, left }),
                    }
                    break;
                }
            }
            if placed == 0 {
                return None;
            }
            n -= placed;
        }
    }
    Some(())
}

/// Puts as many of `n` pods of class `c` as the node of configuration `f` holding `counts` (residual
/// room `left`) takes under the per-node rules; returns how many.
fn place(m: &Master, f: Config, counts: &mut Vec<(Class, u32)>, left: &mut [i64], c: Class, n: u32) -> u32 {
    let req = &m.s.req[c.ix()];
    let had = counts.iter().find(|x| x.0 == c).map_or(0, |x| x.1);
    let others: Vec<(Class, u32)> = counts.iter().copied().filter(|x| x.0 != c).collect();
    let mut k = n as i64;
    for (l, &q) in left.iter().zip(req) {
        if q > 0 {
            k = k.min(l / q);
        }
    }
    // The families' caps count the pods of c already there: ask for the total, take the difference.
    k = k.min(pricing::cap(m, f, c, &others, had as i64 + k, false) - had as i64);
    // The caps are each family's own; together (and the rules without a cap) the validation decides.
    if k <= 0 {
        return 0;
    }
    let k = families::most_that_fit(k as u32, |k| {
        let mut trial = others.clone();
        trial.push((c, had + k));
        pricing::validate(m, f, trial).is_ok()
    });
    if k == 0 {
        return 0;
    }
    for (l, &q) in left.iter_mut().zip(req) {
        *l -= q * k as i64;
    }
    match counts.iter_mut().find(|x| x.0 == c) {
        Some(x) => x.1 += k,
        None => counts.push((c, k)),
    }
    k
}
