//! Pattern rules and pricing.
//!
//! A pattern is valid when its classes may use the configuration's group and every constraint family
//! accepts it ([`super::families::Family::validate`]: resources against the room, node conflicts,
//! hostname spread, hostname affinity); the families also flag the rows the node enters by itself.
//!
//! Pricing solves, per configuration, max Σ v_c a_c over valid patterns (v_c: the dual value of one pod
//! of class c on that configuration group) by a density-ordered greedy fill; a column enters when its
//! reduced cost cost_f − node duals − flag duals − Σ v_c a_c is negative. The greedy is a heuristic, so
//! the lower bounds do not rely on it.

use rustc_hash::FxHashMap;

use super::families::min_values::MinValues;
use super::families::volume_limits::VolumeLimits;
use super::families::{InvalidPattern, Node, Purpose};
use super::ids::{Class, Config, Group};
use super::master::Master;
use super::model::Pattern;

/// Dual value of one pod of class c on configuration group g: Σ rows y_r a_r(c, g) − soft cost.
pub fn values(m: &Master, y: &[f64]) -> Vec<FxHashMap<Group, f64>> {
    m.s.classes()
        .map(|c| {
            m.s.class_groups[c.ix()]
                .iter()
                .map(|&g| {
                    let v: f64 = m.unit_entries_group(c, g).iter().map(|&(r, a)| y[r.ix()] * a).sum();
                    (g, v - m.s.soft_group[c.ix()].get(&g).copied().unwrap_or(0.0))
                })
                .collect()
        })
        .collect()
}

/// Completes a pattern's flags and checks its rules; None if invalid.
pub fn complete(m: &Master, config: Config, counts: Vec<(Class, u32)>) -> Option<Pattern> {
    validate(m, config, counts).ok()
}

/// Like [`complete`], with the rule a pattern breaks.
pub(crate) fn validate(m: &Master, config: Config, mut counts: Vec<(Class, u32)>) -> Result<Pattern, InvalidPattern> {
    counts.retain(|&(_, k)| k > 0);
    counts.sort();
    let group = Group::at(m.p.configs[config.ix()].group);
    for &(c, _) in &counts {
        if !m.s.class_groups[c.ix()].contains(&group) {
            return Err(InvalidPattern::GroupNotAllowed { class: c, group });
        }
    }
    let cx = m.cx();
    let node = Node { config, group, counts: &counts };
    let mut flags = Vec::new();
    for f in m.fams.all() {
        f.validate(&cx, &node, &mut flags)?;
    }
    Ok(Pattern { config, counts, flags })
}

/// Node-level dual value of a configuration (pool limits, node count).
pub(crate) fn node_value(m: &Master, y: &[f64], f: Config) -> f64 {
    m.node_entries(f).iter().map(|&(r, a)| y[r.ix()] * a).sum()
}

/// Density order of the candidate classes for a room: value per dominant share, densest first.
fn density_order(m: &Master, room: &crate::domain::resources::Resources, cand: &[(Class, f64)]) -> Vec<(Class, f64)> {
    let s = &m.s;
    let roomv: Vec<f64> = s.dims.iter().map(|d| room.get(d) as f64).collect();
    let mut order: Vec<(f64, Class, f64)> = cand
        .iter()
        .filter_map(|&(c, v)| {
            let req = &s.req[c.ix()];
            let size = (0..s.dims.len())
                .map(|d| {
                    if roomv[d] > 0.0 {
                        req[d] as f64 / roomv[d]
                    } else if req[d] > 0 {
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

/// The most pods of class `c` the families let a node holding `counts` take for `purpose`, starting
/// from `k`.
fn family_cap(m: &Master, c: Class, counts: &[(Class, u32)], purpose: Purpose, mut k: i64) -> i64 {
    let cx = m.cx();
    for f in m.fams.all() {
        if let Some(cap) = f.cap(&cx, c, counts, purpose) {
            k = k.min(cap);
        }
    }
    k
}

/// The most pods of class `c` (at most `k`) a node of configuration `f` holding `counts` takes under
/// every family's cap (for a fill, in its first pass or not), its volume limits and strict minValues
/// (resources aside).
pub(crate) fn cap(m: &Master, f: Config, c: Class, counts: &[(Class, u32)], k: i64, first_pass: bool) -> i64 {
    let mut k = family_cap(m, c, counts, Purpose::Fill { first_pass }, k);
    if let Some(cap) = VolumeLimits::cap_on(&m.cx(), f, c, counts) {
        k = k.min(cap);
    }
    if k > 0 && m.p.strict_min_values(f.ix()) {
        k = MinValues::cap_on(&m.cx(), f, c, counts, k as u32) as i64;
    }
    k
}

/// Greedy fill of configuration `f` with the classes of positive value, in the given order.
fn fill(m: &Master, f: Config, order: &[(Class, f64)]) -> Option<Pattern> {
    let room = m.p.configs[f.ix()].room();
    let s = &m.s;
    let mut left: Vec<i64> = s.dims.iter().map(|d| room.get(d)).collect();
    let mut counts: Vec<(Class, u32)> = Vec::new();
    // Two passes: hostname-affinity classes may need their free target added first.
    for pass in 0..2 {
        for &(c, _) in order {
            if counts.iter().any(|x| x.0 == c) {
                continue;
            }
            let mut k = s.n_of(c) as i64;
            for (l, &q) in left.iter().zip(&s.req[c.ix()]) {
                if q > 0 {
                    k = k.min(l / q);
                }
            }
            let k = cap(m, f, c, &counts, k, pass == 0);
            if k <= 0 {
                continue;
            }
            for (l, &q) in left.iter_mut().zip(&s.req[c.ix()]) {
                *l -= q * k;
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

fn priced_configs(configs: &[u32]) -> Vec<Config> {
    if configs.len() <= PRICED_PER_GROUP {
        return configs.iter().map(|&f| Config(f)).collect();
    }
    let mut out: Vec<Config> = configs.iter().take(PRICED_PER_GROUP / 3).map(|&f| Config(f)).collect();
    let n = configs.len();
    let rest = PRICED_PER_GROUP - out.len();
    for i in 0..rest {
        let ix = ((n as f64).powf((i + 1) as f64 / rest as f64) as usize).clamp(1, n) - 1;
        out.push(Config(configs[ix]));
    }
    out.sort();
    out.dedup();
    out
}

/// Columns with negative reduced cost: the best pattern of the best configurations of each group.
pub fn price(m: &Master, y: &[f64], vals: &[FxHashMap<Group, f64>], per_group: usize) -> Vec<(f64, Pattern)> {
    let p = m.p;
    let mut by_group: FxHashMap<Group, Vec<(Class, f64)>> = FxHashMap::default();
    for (c, vs) in m.s.classes().zip(vals) {
        for (&g, &v) in vs {
            if v > 1e-9 {
                by_group.entry(g).or_default().push((c, v));
            }
        }
    }
    let mut out = Vec::new();
    let mut groups: Vec<Group> = by_group.keys().copied().collect();
    groups.sort();
    for g in groups {
        let cand = &by_group[&g];
        let mut best: Vec<(f64, Pattern)> = Vec::new();
        let configs = priced_configs(&p.groups[g.ix()]);
        // Densities do not depend much on the size within a group: order once, by the largest room.
        let largest = configs.iter().copied().max_by_key(|&f| p.configs[f.ix()].room().cpu_m).unwrap_or(configs[0]);
        let order = density_order(m, &p.configs[largest.ix()].room(), cand);
        for f in configs {
            let Some(pat) = fill(m, f, &order) else { continue };
            let value: f64 = pat.counts.iter().map(|&(c, k)| k as f64 * vals[c.ix()][&g]).sum();
            let flags: f64 = pat.flags.iter().map(|rows| rows.iter().map(|r| y[r.ix()]).sum::<f64>()).sum();
            let cost = p.configs[f.ix()].cost;
            let rc = cost + m.node_soft(&pat) - node_value(m, y, f) - flags - value;
            if rc < -1e-7 * cost.max(1e-3) {
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
        let g = Group::at(g);
        let classes: Vec<Class> = s.classes().filter(|&c| s.class_groups[c.ix()].contains(&g)).collect();
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
        let mut vectors: Vec<Vec<(Class, u32)>> = Vec::new();
        let mut cur: Vec<(Class, u32)> = Vec::new();
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
                if let Some(pat) = complete(m, Config(f), v.clone()) {
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

fn enum_rec(m: &Master, classes: &[Class], i: usize, cur: &mut Vec<(Class, u32)>, left: &mut [i64], out: &mut Vec<Vec<(Class, u32)>>, limit: usize) -> bool {
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
    let req = &s.req[c.ix()];
    let mut cap = family_cap(m, c, cur, Purpose::Enumerate, s.n_of(c) as i64);
    for (l, &q) in left.iter().zip(req) {
        if q > 0 {
            cap = cap.min(l / q);
        }
    }
    for k in 0..=cap.max(0) {
        if k > 0 {
            for (l, &q) in left.iter_mut().zip(req) {
                *l -= q * k;
            }
            cur.push((c, k as u32));
        }
        let ok = enum_rec(m, classes, i + 1, cur, left, out, limit);
        if k > 0 {
            cur.pop();
            for (l, &q) in left.iter_mut().zip(req) {
                *l += q * k;
            }
        }
        if !ok {
            return false;
        }
    }
    true
}
