//! Pattern rules and pricing.
//!
//! A pattern is valid when its pods fit the configuration's room (allocatable minus DaemonSets) in every
//! resource, and it respects what one node may hold: hostname anti-affinity (a class with a self-
//! matching term at most once, conflicting classes never together), host ports, hostname spread (at
//! most maxSkew matching pods where a constrained class is present, maxSkew + mbar under regime 1),
//! and hostname affinity (a free target on the node, or the node is the group's first-pod node).
//!
//! Pricing solves, per configuration, max Σ v_c a_c over valid patterns (v_c: the dual value of one pod
//! of class c on that configuration group) by a density-ordered greedy fill; a column enters when its
//! reduced cost cost_f − node duals − Σ v_c a_c is negative. The greedy is a heuristic, so the lower
//! bound does not rely on it: [`lagrangian_correction`] bounds every configuration's best pattern with a
//! fractional knapsack per resource.

use rustc_hash::FxHashMap;

use super::master::{Master, Pattern};
use crate::domain::labels::keys;

/// Dual value of one pod of class c on configuration group g: Σ rows y_r a_r(c, g) − soft cost.
pub fn values(m: &Master, y: &[f64]) -> Vec<FxHashMap<usize, f64>> {
    (0..m.s.n.len())
        .map(|c| {
            m.s.class_groups[c]
                .iter()
                .map(|&g| {
                    let v: f64 = m.unit_entries_group(c, g).iter().map(|&(r, a)| y[r] * a).sum();
                    (g, v - m.s.soft_group[c].get(&g).copied().unwrap_or(0.0))
                })
                .collect()
        })
        .collect()
}

/// Completes a pattern's flags and checks its rules; None if invalid.
pub fn complete(m: &Master, config: usize, counts: Vec<(usize, u32)>) -> Option<Pattern> {
    validate(m, config, counts).ok()
}

/// The per-node rule a pattern breaks. The pattern cannot be a column: a caller that wanted it (the
/// greedy start) must leave that node out of the model or give up the start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InvalidPattern {
    #[error("class {class} may not use configuration group {group}: leave the class off this configuration")]
    GroupNotAllowed { class: usize, group: usize },
    #[error("class {class} at most once per node, {count} given: split its pods over more nodes")]
    OncePerNode { class: usize, count: u32 },
    #[error("{resource} {used} exceeds room {room}: use a larger configuration or fewer pods")]
    ExceedsRoom { resource: String, used: i64, room: i64 },
    #[error("classes {0} and {1} may not share a node (hostname anti-affinity or host ports): put them on different nodes")]
    Conflict(usize, usize),
    #[error("hostname spread {spread}: {members} members above maxSkew {max_skew} (mbar {mbar}): put fewer of them on the node")]
    HostSpread { spread: usize, members: u32, max_skew: u32, mbar: u32 },
    #[error("hostname affinity group {0} without a target on the node: add a pod the terms match")]
    AffinityWithoutTarget(usize),
}

/// Like [`complete`], with the rule a pattern breaks.
pub(crate) fn validate(m: &Master, config: usize, mut counts: Vec<(usize, u32)>) -> Result<Pattern, InvalidPattern> {
    counts.retain(|&(_, k)| k > 0);
    counts.sort();
    let p = m.p;
    let cfg = &p.configs[config];
    let room = cfg.room();
    let s = &m.s;
    let mut used = vec![0i64; s.dims.len()];
    for &(c, k) in &counts {
        if !s.class_groups[c].contains(&cfg.group) {
            return Err(InvalidPattern::GroupNotAllowed { class: c, group: cfg.group });
        }
        if s.one_per_node[c] && k > 1 {
            return Err(InvalidPattern::OncePerNode { class: c, count: k });
        }
        for (d, u) in used.iter_mut().enumerate() {
            *u += s.req[c][d] * k as i64;
        }
    }
    for (d, name) in s.dims.iter().enumerate() {
        if used[d] > room.get(name) {
            return Err(InvalidPattern::ExceedsRoom { resource: name.clone(), used: used[d], room: room.get(name) });
        }
    }
    for &(c, _) in &counts {
        for &(q, _) in &counts {
            if q != c && (s.host_conflicts[c].contains(&q) || s.port_conflicts[c].contains(&q)) {
                return Err(InvalidPattern::Conflict(c, q));
            }
        }
    }
    let count_of = |c: usize| counts.binary_search_by_key(&c, |x| x.0).map_or(0, |i| counts[i].1);
    let mut regime1 = Vec::new();
    let mut low = Vec::new();
    for (h, hs) in s.hspread.iter().enumerate() {
        let members: u32 = counts.iter().filter(|(c, _)| hs.members.binary_search(c).is_ok()).map(|x| x.1).sum();
        // Constrained members bind first on the node; other members after them.
        let limited: u32 = counts.iter().filter(|(c, _)| hs.members.binary_search(c).is_ok() && hs.constrained.binary_search(c).is_ok()).map(|x| x.1).sum();
        if limited > hs.max_skew {
            let members = limited;
            if hs.mbar == 0 || members > hs.max_skew + hs.mbar {
                return Err(InvalidPattern::HostSpread { spread: h, members, max_skew: hs.max_skew, mbar: hs.mbar });
            }
            regime1.push(h);
        }
        if hs.mbar > 0 && hs.group_eligible.contains(&cfg.group) && members < hs.mbar {
            low.push(h);
        }
    }
    let mut first_pod = Vec::new();
    for (a, g) in s.affinity.iter().enumerate() {
        if g.key != keys::HOSTNAME || !g.classes.iter().any(|&c| count_of(c) > 0) {
            continue;
        }
        if g.free_targets.iter().any(|&q| count_of(q) > 0) {
            continue;
        }
        if !g.self_match || g.any_existing {
            return Err(InvalidPattern::AffinityWithoutTarget(a));
        }
        first_pod.push(a);
    }
    Ok(Pattern { config, counts, regime1, low, first_pod })
}

/// Node-level dual value of a configuration (pool limits, node count).
pub(crate) fn node_value(m: &Master, y: &[f64], f: usize) -> f64 {
    m.node_entries(f).iter().map(|&(r, a)| y[r] * a).sum()
}

/// Density order of the candidate classes for a room: value per dominant share, densest first.
fn density_order(m: &Master, room: &crate::domain::resources::Resources, cand: &[(usize, f64)]) -> Vec<(usize, f64)> {
    let s = &m.s;
    let roomv: Vec<f64> = s.dims.iter().map(|d| room.get(d) as f64).collect();
    let mut order: Vec<(f64, usize, f64)> = cand
        .iter()
        .filter_map(|&(c, v)| {
            let size = (0..s.dims.len())
                .map(|d| {
                    if roomv[d] > 0.0 {
                        s.req[c][d] as f64 / roomv[d]
                    } else if s.req[c][d] > 0 {
                        f64::INFINITY
                    } else {
                        0.0
                    }
                })
                .fold(0.0, f64::max);
            size.is_finite().then_some((v / size.max(1e-9), c, v))
        })
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    order.into_iter().map(|(_, c, v)| (c, v)).collect()
}

/// Greedy fill of configuration `f` with the classes of positive value, in the given order.
fn fill(m: &Master, f: usize, order: &[(usize, f64)]) -> Option<Pattern> {
    let p = m.p;
    let cfg = &p.configs[f];
    let room = cfg.room();
    let s = &m.s;
    let mut left: Vec<i64> = s.dims.iter().map(|d| room.get(d)).collect();
    let mut counts: Vec<(usize, u32)> = Vec::new();
    let mut host_members: Vec<u32> = vec![0; s.hspread.len()];
    // Two passes: hostname-affinity classes may need their free target added first.
    for pass in 0..2 {
        for &(c, _) in order {
            if counts.iter().any(|x| x.0 == c) {
                continue;
            }
            if counts.iter().any(|&(q, _)| s.host_conflicts[c].contains(&q) || s.port_conflicts[c].contains(&q)) {
                continue;
            }
            if let Some(a) = s.class_affinity[c] {
                let g = &s.affinity[a];
                if g.key == keys::HOSTNAME {
                    let has_target = g.free_targets.iter().any(|&q| counts.iter().any(|x| x.0 == q));
                    let first_ok = g.self_match && !g.any_existing;
                    if !(has_target || first_ok && pass == 1) {
                        continue;
                    }
                }
            }
            let mut k = s.n[c] as i64;
            if s.one_per_node[c] {
                k = k.min(1);
            }
            for (l, &q) in left.iter().zip(&s.req[c]) {
                if q > 0 {
                    k = k.min(l / q);
                }
            }
            for (h, hs) in s.hspread.iter().enumerate() {
                if hs.members.binary_search(&c).is_ok() && hs.constrained.binary_search(&c).is_ok() {
                    k = k.min((hs.max_skew + hs.mbar) as i64 - host_members[h] as i64);
                }
            }
            if k <= 0 {
                continue;
            }
            for (l, &q) in left.iter_mut().zip(&s.req[c]) {
                *l -= q * k;
            }
            for (h, hs) in s.hspread.iter().enumerate() {
                if hs.members.binary_search(&c).is_ok() && hs.constrained.binary_search(&c).is_ok() {
                    host_members[h] += k as u32;
                }
            }
            counts.push((c, k as u32));
        }
    }
    if counts.is_empty() {
        return None;
    }
    complete(m, f, counts)
}

/// Configurations priced per group: the cheapest few and a geometric sample over the rest by size.
const PRICED_PER_GROUP: usize = 24;

fn priced_configs(configs: &[u32]) -> Vec<usize> {
    if configs.len() <= PRICED_PER_GROUP {
        return configs.iter().map(|&f| f as usize).collect();
    }
    let mut out: Vec<usize> = configs.iter().take(PRICED_PER_GROUP / 3).map(|&f| f as usize).collect();
    let n = configs.len();
    let rest = PRICED_PER_GROUP - out.len();
    for i in 0..rest {
        let ix = ((n as f64).powf((i + 1) as f64 / rest as f64) as usize).clamp(1, n) - 1;
        out.push(configs[ix] as usize);
    }
    out.sort();
    out.dedup();
    out
}

/// Columns with negative reduced cost: the best pattern of the best configurations of each group.
pub fn price(m: &Master, y: &[f64], vals: &[FxHashMap<usize, f64>], per_group: usize) -> Vec<(f64, Pattern)> {
    let p = m.p;
    let mut by_group: FxHashMap<usize, Vec<(usize, f64)>> = FxHashMap::default();
    for (c, vs) in vals.iter().enumerate() {
        for (&g, &v) in vs {
            if v > 1e-9 {
                by_group.entry(g).or_default().push((c, v));
            }
        }
    }
    let mut out = Vec::new();
    let mut groups: Vec<usize> = by_group.keys().copied().collect();
    groups.sort();
    for g in groups {
        let cand = &by_group[&g];
        let mut best: Vec<(f64, Pattern)> = Vec::new();
        let configs = priced_configs(&p.groups[g]);
        // Densities do not depend much on the size within a group: order once, by the largest room.
        let largest = configs.iter().copied().max_by_key(|&f| p.configs[f].room().cpu_m).unwrap_or(configs[0]);
        let order = density_order(m, &p.configs[largest].room(), cand);
        for f in configs {
            let Some(pat) = fill(m, f, &order) else { continue };
            let value: f64 = pat.counts.iter().map(|&(c, k)| k as f64 * vals[c][&g]).sum();
            let flags: f64 = pat.regime1.iter().filter_map(|&h| m.rows.hs_regime1[h]).map(|r| y[r]).sum::<f64>()
                + pat.low.iter().filter_map(|&h| m.rows.hs_low[h]).map(|r| y[r]).sum::<f64>()
                + pat.first_pod.iter().filter_map(|&a| m.rows.af_first[a]).map(|r| y[r]).sum::<f64>();
            let rc = p.configs[f].cost - node_value(m, y, f) - flags - value;
            if rc < -1e-7 * p.configs[f].cost.max(1e-3) {
                best.push((rc, pat));
            }
        }
        best.sort_by(|a, b| a.0.total_cmp(&b.0));
        best.truncate(per_group);
        out.extend(best);
    }
    out
}

/// Enumerates every valid pattern when there are few: per configuration group, every count vector
/// that fits the group's largest room and respects the per-node rules, each on the cheapest
/// configuration of the group that holds it (every configuration that holds it, for NodePools with
/// limits, where a cheaper node may use more of the limit). Returns None when more than `limit` count
/// vectors exist; then the column set is not complete and column generation takes over.
pub fn enumerate(m: &Master, limit: usize) -> Option<Vec<Pattern>> {
    let p = m.p;
    let s = &m.s;
    let mut out = Vec::new();
    let mut seen = 0usize;
    for (g, configs) in p.groups.iter().enumerate() {
        let classes: Vec<usize> = (0..s.n.len()).filter(|&c| s.class_groups[c].contains(&g)).collect();
        if classes.is_empty() {
            continue;
        }
        let mut maxroom = vec![0i64; s.dims.len()];
        for &f in configs {
            let room = p.configs[f as usize].room();
            for (d, name) in s.dims.iter().enumerate() {
                maxroom[d] = maxroom[d].max(room.get(name));
            }
        }
        let mut vectors: Vec<Vec<(usize, u32)>> = Vec::new();
        let mut cur: Vec<(usize, u32)> = Vec::new();
        if !enum_rec(m, &classes, 0, &mut cur, &mut maxroom.clone(), &mut vectors, limit.saturating_sub(seen)) {
            return None;
        }
        seen += vectors.len();
        let limited = p.cluster.nodepools[p.configs[configs[0] as usize].pool].limits.is_some();
        // Cheapest first: without limits a vector takes the first configuration that holds it.
        let mut by_cost: Vec<u32> = configs.clone();
        by_cost.sort_by(|&a, &b| p.configs[a as usize].cost.total_cmp(&p.configs[b as usize].cost).then(a.cmp(&b)));
        for v in vectors {
            for &f in &by_cost {
                if let Some(pat) = complete(m, f as usize, v.clone()) {
                    out.push(pat);
                    if !limited {
                        break;
                    }
                }
            }
        }
    }
    Some(out)
}

fn enum_rec(m: &Master, classes: &[usize], i: usize, cur: &mut Vec<(usize, u32)>, left: &mut [i64], out: &mut Vec<Vec<(usize, u32)>>, limit: usize) -> bool {
    let s = &m.s;
    if i == classes.len() {
        if !cur.is_empty() {
            if out.len() >= limit {
                return false;
            }
            out.push(cur.clone());
        }
        return true;
    }
    let c = classes[i];
    let mut cap = s.n[c] as i64;
    if s.one_per_node[c] {
        cap = cap.min(1);
    }
    for (l, &q) in left.iter().zip(&s.req[c]) {
        if q > 0 {
            cap = cap.min(l / q);
        }
    }
    if cur.iter().any(|&(q, _)| s.host_conflicts[c].contains(&q) || s.port_conflicts[c].contains(&q)) {
        cap = 0;
    }
    for k in 0..=cap.max(0) {
        if k > 0 {
            for (l, &q) in left.iter_mut().zip(&s.req[c]) {
                *l -= q * k;
            }
            cur.push((c, k as u32));
        }
        let ok = enum_rec(m, classes, i + 1, cur, left, out, limit);
        if k > 0 {
            cur.pop();
            for (l, &q) in left.iter_mut().zip(&s.req[c]) {
                *l += q * k;
            }
        }
        if !ok {
            return false;
        }
    }
    true
}
