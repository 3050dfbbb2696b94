//! Fit cuts: rows added to the aggregated relaxation ([`super::master::Master::aggregate`]) for its
//! integer program ([`super::master::Master::add_fit_cuts`]) that keep a pod class to the part of its
//! group's room that can host it.
//!
//! The aggregated relaxation pools the room of a group's nodes (`Σ_c req_{c,r} x_{c,g} ≤
//! Σ_{f∈g} room_{f,r} y_f`), so a 30-core pod may use the room of four 8-core nodes, and six pods of 6
//! cores fill two 16-core nodes' 32 cores exactly. Two families of valid rows take that freedom away:
//!
//! ```text
//! fit set S ⊂ g:   Σ_{c : F_c ⊆ S} req_{c,r} x_{c,g} ≤ Σ_{f∈S} room_{f,r} y_f              ∀ r
//!     F_c = the configurations of g whose room holds one pod of c in every dimension
//! size s in r:     Σ_{c : req_{c,r} ≥ s} x_{c,g} ≤ Σ_{f∈g} ⌊room_{f,r} / s⌋ y_f
//! ```
//!
//! Both hold for every plan: a pod of class c only sits on a node of F_c, so the pods whose fit sets lie
//! in S use only the room of S's nodes; and a node of room R holds at most ⌊R / s⌋ pods of size s or
//! more. The second is the counting form of a dual feasible function (the step at s), the first the
//! pooled row restricted to where the pods fit. Neither is a row of the pattern master, whose columns
//! are whole nodes and satisfy both by construction, so the rows go only into the aggregated integer
//! program (in the LP they cost more time than they raise its bound on large batches).
//!
//! Rows are kept few: fit sets other than the whole group, at most [`MAX_FIT_SETS`] per group (the
//! smallest first, which cut the most) and [`MAX_BUSY_FIT_SETS`] more (those whose classes have the
//! most pods), and sizes where a node of the group's largest room holds at
//! most [`MAX_PER_NODE`] such pods, at most [`MAX_SIZES`] per group and dimension (the largest first).

use rustc_hash::FxHashMap;

use super::families::capacity::unit;
use super::ids::{Class, Config, Group, Row};
use super::model::{INF, Model};
use super::structure::Structure;
use crate::solve::problem::Problem;

/// Fit sets per group that get rows, the smallest first.
pub const MAX_FIT_SETS: usize = 8;
/// Fit sets per group that get rows beyond those, the ones whose classes have the most pods first.
pub const MAX_BUSY_FIT_SETS: usize = 8;
/// Size thresholds per group and dimension that get rows.
pub const MAX_SIZES: usize = 8;
/// A size gets a row only when a node of the group's largest room holds at most this many pods of it;
/// beyond that the row is about the pooled one.
pub const MAX_PER_NODE: i64 = 8;
/// A size row is made only when whole pods of that size leave the cheapest room at least this much
/// dearer per unit.
pub const MIN_ROUNDING: f64 = 0.01;

/// One cut row: its configurations' and classes' coefficients.
pub struct Cut {
    pub row: Row,
    pub nodes: Vec<(Config, f64)>,
    pub pods: Vec<(Class, f64)>,
}

/// The fit cuts of every group, as rows of `m`.
#[derive(Default)]
pub struct FitCuts {
    /// Per configuration: (row, coefficient) for its node-count column.
    pub node_entries: FxHashMap<Config, Vec<(Row, f64)>>,
    /// Per (class, group): (row, coefficient) for its pod-count column.
    pub pod_entries: FxHashMap<(Class, Group), Vec<(Row, f64)>>,
}

impl FitCuts {
    pub fn build(p: &Problem, s: &Structure, m: &mut Model) -> FitCuts {
        let mut out = FitCuts::default();
        for g in Group::all(p.groups.len()) {
            let classes: Vec<Class> = s.classes().filter(|c| s.class_groups[c.ix()].contains(&g)).collect();
            if classes.is_empty() {
                continue;
            }
            let configs: Vec<Config> = p.groups[g.ix()].iter().map(|&f| Config(f)).collect();
            let rooms: Vec<Vec<i64>> = configs
                .iter()
                .map(|f| {
                    let room = p.configs[f.ix()].room();
                    s.dims.iter().map(|d| room.get(d)).collect()
                })
                .collect();
            let costs: Vec<f64> = configs.iter().map(|f| p.configs[f.ix()].cost).collect();
            for cut in cuts(g, &classes, &configs, &rooms, &costs, s, m) {
                for &(f, v) in &cut.nodes {
                    out.node_entries.entry(f).or_default().push((cut.row, -v));
                }
                for &(c, v) in &cut.pods {
                    out.pod_entries.entry((c, g)).or_default().push((cut.row, v));
                }
            }
        }
        out
    }
}

/// The least cost per unit of room in dimension `d` over the configurations `inside` says, with each
/// one's room taken as `usable(room)`; infinite when none has any.
fn cheapest_unit(rooms: &[Vec<i64>], costs: &[f64], d: usize, inside: impl Fn(usize) -> bool, usable: impl Fn(i64) -> i64) -> f64 {
    (0..rooms.len()).filter(|&i| inside(i) && usable(rooms[i][d]) > 0).map(|i| costs[i] / usable(rooms[i][d]) as f64).fold(f64::INFINITY, f64::min)
}

/// The cuts of group `g`: its `classes`, its `configs` with their `rooms` per dimension of `s.dims` and
/// their `costs`. A row is made only where it can cut the pooled optimum: a fit row where a
/// configuration outside the set has cheaper room in that dimension than every one inside it, a size
/// row where rounding each node's room down to whole pods of that size makes the cheapest room dearer
/// by more than [`MIN_ROUNDING`] (every row costs the integer program time; with every row in the LP,
/// karpenter-1000's ran out of its share).
fn cuts(g: Group, classes: &[Class], configs: &[Config], rooms: &[Vec<i64>], costs: &[f64], s: &Structure, m: &mut Model) -> Vec<Cut> {
    let mut out = Vec::new();
    let dims = s.dims.len();
    // Fit sets: per class, which configurations hold one of its pods.
    let fits = |c: Class| -> Vec<bool> { rooms.iter().map(|room| (0..dims).all(|d| s.req[c.ix()][d] <= room[d])).collect() };
    let mut sets: Vec<Vec<bool>> = Vec::new();
    let class_fit: Vec<Vec<bool>> = classes.iter().map(|&c| fits(c)).collect();
    for f in &class_fit {
        if f.iter().any(|&b| !b) && !sets.contains(f) {
            sets.push(f.clone());
        }
    }
    let members_of = |set: &[bool]| -> Vec<Class> { classes.iter().zip(&class_fit).filter(|(_, f)| f.iter().zip(set).all(|(&a, &b)| !a || b)).map(|(&c, _)| c).collect() };
    // The smallest sets cut the most where they apply; the sets holding the most pods apply the most
    // (openb-7d: dozens of fit sets in its GPU group, the 1-GPU pods of 4 or more cores in one of the
    // larger ones, and pooled, those pods used the cores of 1-GPU nodes they do not fit).
    sets.sort_by_key(|set| set.iter().filter(|&&b| b).count());
    let mut rest = sets.split_off(sets.len().min(MAX_FIT_SETS));
    rest.sort_by_cached_key(|set| std::cmp::Reverse(members_of(set).iter().map(|&c| s.n_of(c)).sum::<u32>()));
    sets.extend(rest.into_iter().take(MAX_BUSY_FIT_SETS));
    for (k, set) in sets.iter().enumerate() {
        let members = members_of(set);
        for d in 0..dims {
            if s.dims[d] == "pods" || cheapest_unit(rooms, costs, d, |i| !set[i], |r| r) >= cheapest_unit(rooms, costs, d, |i| set[i], |r| r) {
                continue;
            }
            let pods: Vec<(Class, f64)> = members.iter().filter(|c| s.req[c.ix()][d] > 0).map(|&c| (c, s.req[c.ix()][d] as f64 * unit(&s.dims[d]))).collect();
            if pods.is_empty() {
                continue;
            }
            let nodes: Vec<(Config, f64)> =
                configs.iter().zip(rooms).zip(set).filter(|&(_, &inside)| inside).map(|((&f, room), _)| (f, room[d] as f64 * unit(&s.dims[d]))).filter(|&(_, v)| v > 0.0).collect();
            let row = m.named(format!("agg.fit[{g}][{k}][{}]", s.dims[d]), -INF, 0.0);
            out.push(Cut { row, nodes, pods });
        }
    }
    // Sizes: per dimension, the largest requests a node of the group's largest room holds few of.
    for d in 0..dims {
        let largest = rooms.iter().map(|r| r[d]).max().unwrap_or(0);
        let mut sizes: Vec<i64> = classes.iter().map(|c| s.req[c.ix()][d]).filter(|&q| q > 0 && largest / q <= MAX_PER_NODE).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        sizes.dedup();
        sizes.truncate(MAX_SIZES);
        let pooled = cheapest_unit(rooms, costs, d, |_| true, |r| r);
        for size in sizes {
            if cheapest_unit(rooms, costs, d, |_| true, |r| r / size * size) <= pooled * (1.0 + MIN_ROUNDING) {
                continue;
            }
            let pods: Vec<(Class, f64)> = classes.iter().filter(|c| s.req[c.ix()][d] >= size).map(|&c| (c, 1.0)).collect();
            let nodes: Vec<(Config, f64)> = configs.iter().zip(rooms).map(|(&f, room)| (f, (room[d] / size) as f64)).filter(|&(_, v)| v > 0.0).collect();
            let row = m.named(format!("agg.size[{g}][{}][{size}]", s.dims[d]), -INF, 0.0);
            out.push(Cut { row, nodes, pods });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn structure(req: Vec<Vec<i64>>) -> Structure {
        let n = req.len();
        Structure {
            n: vec![1; n],
            dims: vec!["cpu".into(), "memory".into()],
            req,
            targets: Vec::new(),
            free: Vec::new(),
            allowed: vec![Vec::new(); n],
            class_groups: vec![[Group(0)].into_iter().collect(); n],
            no_new_nodes: vec![false; n],
            soft_group: vec![FxHashMap::default(); n],
            soft_target: vec![Vec::new(); n],
        }
    }

    const GI: i64 = 1 << 30;

    #[test]
    fn a_class_too_big_for_the_small_configurations_gets_a_row_over_the_large_ones_only() {
        // Configurations: 2 cores / 8 GiB and 16 cores / 64 GiB; classes of 8 cores and of 1 core.
        let s = structure(vec![vec![8000, 4 * GI], vec![1000, GI]]);
        let mut m = Model::default();
        let rooms = vec![vec![2000, 8 * GI], vec![16000, 64 * GI]];
        // The small configuration's room is the cheaper per core (0.05 against 0.0625 $/h).
        let cuts = cuts(Group(0), &[Class(0), Class(1)], &[Config(0), Config(1)], &rooms, &[0.1, 1.0], &s, &mut m);
        // The fit set {16-core}: only class 0 lies in it; one row per dimension.
        let fit: Vec<&Cut> = cuts.iter().filter(|c| m.row_def(c.row).name.starts_with("agg.fit")).collect();
        assert_eq!(fit.len(), 2);
        assert_eq!(fit[0].pods, vec![(Class(0), 8.0)]);
        assert_eq!(fit[0].nodes, vec![(Config(1), 16.0)], "the 2-core nodes' room is not counted for 8-core pods");
        // Sizes: 8 cores (a 16-core node holds 2) and 1 core (16 per node: beyond MAX_PER_NODE) in cpu;
        // in memory 4 GiB (16 per node) and 1 GiB are beyond it too.
        let size: Vec<&Cut> = cuts.iter().filter(|c| m.row_def(c.row).name.starts_with("agg.size")).collect();
        assert_eq!(size.len(), 1);
        assert_eq!(size[0].pods, vec![(Class(0), 1.0)]);
        assert_eq!(size[0].nodes, vec![(Config(1), 2.0)], "⌊2000/8000⌋ = 0 leaves the small configuration out");
    }

    #[test]
    fn beyond_the_smallest_fit_sets_the_ones_holding_the_most_pods_get_rows() {
        // Configurations of 1..=20 cores, the smaller the cheaper per core; class j (j = 1..=20) asks
        // j cores less 500m, so it fits the configurations of j cores and more: 19 fit sets besides
        // the whole group. The 8 smallest (j = 13..=20) get rows, then the 8 whose classes hold the
        // most pods: {j..=20} holds classes j..=20, so j = 2..=9, and not j = 10..=12.
        let n = 20;
        let s = structure((1..=n).map(|j| vec![j * 1000 - 500, 0]).collect());
        let mut m = Model::default();
        let rooms: Vec<Vec<i64>> = (1..=n).map(|i| vec![i * 1000, 64 * GI]).collect();
        let costs: Vec<f64> = (1..=n).map(|i| 0.1 * i as f64 + 0.01 * (i * i) as f64).collect();
        let classes: Vec<Class> = (0..n as u32).map(Class).collect();
        let configs: Vec<Config> = (0..n as u32).map(Config).collect();
        let cuts = cuts(Group(0), &classes, &configs, &rooms, &costs, &s, &mut m);
        let smallest_class: Vec<u32> = cuts.iter().filter(|c| m.row_def(c.row).name.starts_with("agg.fit")).map(|c| c.pods.iter().map(|p| p.0.0).min().expect("members")).collect();
        let mut got = smallest_class.clone();
        got.sort_unstable();
        let want: Vec<u32> = (1..=8).chain(12..=19).collect();
        assert_eq!(got, want, "fit rows by their smallest member class (j - 1)");
    }

    #[test]
    fn classes_that_fit_everywhere_get_no_fit_row() {
        let s = structure(vec![vec![500, GI]]);
        let mut m = Model::default();
        let rooms = vec![vec![2000, 8 * GI], vec![16000, 64 * GI]];
        let cuts = cuts(Group(0), &[Class(0)], &[Config(0), Config(1)], &rooms, &[0.1, 1.0], &s, &mut m);
        assert!(cuts.is_empty(), "the pooled row already says all there is");
    }
}
