//! The constraint families of the MILP, one module each, with the formula at the top of the module.
//!
//! A family owns everything the encoding does for its constraint: the data it derives from the batch
//! (`derive`, called from [`build`]), the rows it adds to the master and the coefficients columns have
//! in them (so their duals' use in pricing), its auxiliary columns, the check of a pattern (one new
//! node) against its per-node rule, and its contribution to the aggregated relaxation and the size-class
//! bound. The master, pricing and the bounds only call the [`Family`] hooks, in registration order
//! ([`Families::all`]); adding a family is one module, one field of [`Families`] and one line in
//! [`build`] and in [`Families::all`].
//!
//! The registration order fixes the row and column indices HiGHS sees (HiGHS's path depends on them):
//! demand, node conflicts, capacity, pool limits, spread, hostname spread, anti-affinity, affinity,
//! minValues, volume limits, preferred pod (anti-)affinity, capacity reservations.

pub mod affinity;
pub mod anti_affinity;
pub mod capacity;
pub mod demand;
pub mod host_spread;
pub mod min_values;
pub mod node_conflicts;
pub mod pool_limits;
pub mod preferred_interpod;
pub mod reservations;
pub mod spread;
pub mod volume_limits;

use rustc_hash::FxHashMap;

use super::ids::{Class, Col, Config, Group, Place, Row, Target};
use super::model::Model;
use super::structure::Structure;
use crate::domain::Labels;
use crate::solve::problem::Problem;

/// What a family's hooks may read: the problem, the batch's structure and the master's assignment
/// columns (empty until the master has made them).
pub struct Cx<'c, 'a> {
    pub p: &'c Problem<'a>,
    pub s: &'c Structure,
    /// Per (class, target): the column of its pods on the target.
    pub assign: &'c FxHashMap<(Class, Target), Col>,
}

impl Cx<'_, '_> {
    /// An upper bound on the number of new nodes any sensible plan uses.
    pub fn big_nodes(&self) -> f64 {
        self.s.big_nodes()
    }

    /// The labels a pod placed at `at` sees: its configuration group's or its target node's.
    pub fn labels(&self, at: Place) -> &Labels {
        match at {
            Place::Group(g) => &self.p.configs[self.p.groups[g.ix()][0] as usize].labels,
            Place::Target(t) => &self.p.cluster.nodes[self.s.targets[t.ix()]].labels,
        }
    }
}

/// The per-node rule a pattern breaks. The pattern cannot be a column: a caller that wanted it (the
/// greedy start) must leave that node out of the model or give up the start.
#[derive(Debug, thiserror::Error)]
pub enum InvalidPattern {
    #[error("class {class} may not use configuration group {group}: leave the class off this configuration")]
    GroupNotAllowed { class: Class, group: Group },
    #[error("class {class} at most once per node, {count} given: split its pods over more nodes")]
    OncePerNode { class: Class, count: u32 },
    #[error("{resource} {used} exceeds room {room}: use a larger configuration or fewer pods")]
    ExceedsRoom { resource: String, used: i64, room: i64 },
    #[error("classes {0} and {1} may not share a node (hostname anti-affinity or host ports): put them on different nodes")]
    Conflict(Class, Class),
    #[error("hostname spread {spread}: {members} members above maxSkew {max_skew} (mbar {mbar}): put fewer of them on the node")]
    HostSpread { spread: usize, members: u32, max_skew: u32, mbar: u32 },
    #[error("hostname affinity group {0} without a target on the node: add a pod the terms match")]
    AffinityWithoutTarget(usize),
    #[error("minValues {min_values} for {key}: the node's launch candidates keep {kept}: put fewer or other pods on it")]
    MinValues { key: String, min_values: u32, kept: u32 },
    #[error("{used} volumes of CSI driver {driver} exceed the node's attach limit {limit}: put fewer of those pods on it or use a type with a higher limit")]
    AttachLimit { driver: String, used: i64, limit: i64 },
}

/// One new node being checked: its configuration, its group and its pods per class (sorted, > 0).
pub struct Node<'n> {
    pub config: Config,
    pub group: Group,
    pub counts: &'n [(Class, u32)],
}

/// The most pods, at most `most`, that `fits` accepts: `most` itself, or a bisection between 0 and
/// `most`. The per-node rules only tighten as pods are added, so the counts that fit are a prefix;
/// halving from `most` instead could stop at half of a count one short of it. 0 when none fits; only
/// counts in `1..=most` are asked.
pub(crate) fn most_that_fit(most: u32, fits: impl Fn(u32) -> bool) -> u32 {
    if most == 0 || fits(most) {
        return most;
    }
    let (mut lo, mut hi) = (0, most);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// What a per-node cap is for. The pattern heuristics prune differently (the enumeration's count limit
/// depends on what it prunes), so a family says per use how many pods it lets a node take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Enumerating every count vector (`pricing::enumerate`).
    Enumerate,
    /// The greedy fill of pricing; `first_pass` before the second pass that lets first-pod nodes in.
    Fill { first_pass: bool },
    /// The single-class seed columns.
    Seed,
}

/// A row of the aggregated relaxation for one configuration group: `Σ_{c ∈ members} x_{c,g} ≤ per_node
/// · Σ_{f∈g} y_f`, the row holding `−per_node` for each node.
pub struct AggRow {
    pub row: Row,
    pub per_node: f64,
    pub members: Vec<Class>,
}

/// The hooks of a constraint family. Every hook has a default that adds nothing, so a family implements
/// what its constraint needs.
pub trait Family {
    /// Marks the classes whose demand row must be an equality (a phantom pod would loosen this family).
    fn exact_demand(&self, _exact: &mut [bool]) {}
    /// The family's rows of the master (before any column).
    fn rows(&mut self, _cx: &Cx, _m: &mut Model) {}
    /// Rows over the pods on existing targets that the assignment columns enter at creation.
    fn target_rows(&mut self, _cx: &Cx, _m: &mut Model) {}
    /// Coefficients of one pod of class `c` placed at `at` in the family's rows that couple nodes.
    fn pod_entries(&self, _cx: &Cx, _c: Class, _at: Place, _out: &mut Vec<(Row, f64)>) {}
    /// Coefficients of one pod of class `c` on existing target `t` in the family's per-target rows.
    fn target_entries(&self, _cx: &Cx, _c: Class, _t: Target, _out: &mut Vec<(Row, f64)>) {}
    /// Coefficients of a new node of configuration `f` itself.
    fn node_entries(&self, _cx: &Cx, _f: Config, _out: &mut Vec<(Row, f64)>) {}
    /// The family's auxiliary columns, after the master's fixed columns (and rows that need those).
    fn aux_columns(&mut self, _cx: &Cx, _m: &mut Model) {}
    /// Checks one new node against the family's per-node rule; pushes the rows the node enters as flags.
    fn validate(&self, _cx: &Cx, _node: &Node, _flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        Ok(())
    }
    /// Most pods of class `c` a node already holding `counts` may take for `purpose` (None: no limit).
    fn cap(&self, _cx: &Cx, _c: Class, _counts: &[(Class, u32)], _purpose: Purpose) -> Option<i64> {
        None
    }
    /// A cost of one new node beyond its configuration's and its pods' own (a soft rule that depends on
    /// how many pods share the node); never negative, so the bounds, which leave it out, stay bounds.
    fn node_soft(&self, _cx: &Cx, _node: &Node) -> f64 {
        0.0
    }
    /// Sets the family's auxiliary columns in `x` from the row activities `act` of the other columns.
    fn fill_aux(&self, _cx: &Cx, _act: &[f64], _x: &mut [f64]) {}
    /// The family's rows of the aggregated relaxation for configuration group `g`.
    fn aggregate_rows(&self, _cx: &Cx, _g: Group, _m: &mut Model, _out: &mut Vec<AggRow>) {}
}

/// Every constraint family of the encoding, with its derived data and its rows.
pub struct Families {
    pub demand: demand::Demand,
    pub node_conflicts: node_conflicts::NodeConflicts,
    pub capacity: capacity::Capacity,
    pub pool_limits: pool_limits::PoolLimits,
    pub spread: spread::Spread,
    pub host_spread: host_spread::HostSpreads,
    pub anti_affinity: anti_affinity::AntiAffinity,
    pub affinity: affinity::Affinity,
    pub min_values: min_values::MinValues,
    pub volume_limits: volume_limits::VolumeLimits,
    pub preferred_interpod: preferred_interpod::PreferredInterPod,
    pub reservations: reservations::Reservations,
}

impl Families {
    /// The families in registration order.
    pub fn all(&self) -> [&dyn Family; 12] {
        [
            &self.demand,
            &self.node_conflicts,
            &self.capacity,
            &self.pool_limits,
            &self.spread,
            &self.host_spread,
            &self.anti_affinity,
            &self.affinity,
            &self.min_values,
            &self.volume_limits,
            &self.preferred_interpod,
            &self.reservations,
        ]
    }

    /// The families in registration order, to add rows and columns.
    pub fn all_mut(&mut self) -> [&mut dyn Family; 12] {
        [
            &mut self.demand,
            &mut self.node_conflicts,
            &mut self.capacity,
            &mut self.pool_limits,
            &mut self.spread,
            &mut self.host_spread,
            &mut self.anti_affinity,
            &mut self.affinity,
            &mut self.min_values,
            &mut self.volume_limits,
            &mut self.preferred_interpod,
            &mut self.reservations,
        ]
    }
}

/// The batch's structure and every family's data. The order of the derivations matters where one
/// restricts what a class may use (the configuration groups, the existing targets) before the next one
/// reads it.
pub fn build(p: &Problem) -> (Structure, Families) {
    let (mut s, mut fs, cx) = Structure::core(p);
    let spread = spread::Spread::derive(&cx, &fs);
    let host_spread = host_spread::HostSpreads::derive(&cx, &fs);
    let node_conflicts = node_conflicts::NodeConflicts::derive(&cx, &mut s);
    let anti_affinity = anti_affinity::AntiAffinity::derive(&cx, &fs, &mut s);
    let affinity = affinity::Affinity::derive(&cx, &mut fs, &mut s);
    let preferred_interpod = preferred_interpod::PreferredInterPod::derive(&cx);
    s.finish(&cx, &fs);
    let mut fams = Families {
        demand: demand::Demand::default(),
        node_conflicts,
        capacity: capacity::Capacity::default(),
        pool_limits: pool_limits::PoolLimits::default(),
        spread,
        host_spread,
        anti_affinity,
        affinity,
        min_values: min_values::MinValues,
        volume_limits: volume_limits::VolumeLimits::default(),
        preferred_interpod,
        reservations: reservations::Reservations::default(),
    };
    let mut exact = vec![false; s.n.len()];
    for f in fams.all() {
        f.exact_demand(&mut exact);
    }
    fams.demand.exact = exact;
    (s, fams)
}

#[cfg(test)]
mod tests {
    use super::most_that_fit;

    #[test]
    fn the_most_that_fit_is_the_largest_count_the_rules_accept() {
        // A node with room for 7 by resources whose rules take 6: halving from 7 would have stopped at 3.
        assert_eq!(most_that_fit(7, |k| k <= 6), 6);
        assert_eq!(most_that_fit(7, |k| k <= 7), 7);
        assert_eq!(most_that_fit(100, |k| k <= 37), 37);
        assert_eq!(most_that_fit(5, |k| k == 0), 0);
        assert_eq!(most_that_fit(0, |_| true), 0);
        // Only counts in 1..=most are asked.
        assert_eq!(
            most_that_fit(9, |k| {
                assert!((1..=9).contains(&k), "asked {k}");
                k <= 4
            }),
            4
        );
    }
}
