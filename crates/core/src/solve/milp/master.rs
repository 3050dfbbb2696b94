//! The master problem: rows, the fixed columns (pods on existing nodes, pods left pending, the
//! auxiliary binaries and minima of the spread, anti-affinity and affinity rows) and the pattern
//! columns added by pricing. Formulation: docs/design/milp.md.

use rustc_hash::FxHashMap;

use super::structure::Structure;
use crate::solve::problem::Problem;

/// One new node: a configuration and how many pods of each class it holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub config: usize,
    /// (class, count), sorted by class, counts > 0.
    pub counts: Vec<(usize, u32)>,
    /// Hostname spreads for which the node holds more than maxSkew members (needs regime 1).
    pub regime1: Vec<usize>,
    /// Hostname spreads (with mbar > 0) the node is eligible for and holds fewer than mbar members.
    pub low: Vec<usize>,
    /// Hostname affinity groups for which this node is the first-pod node.
    pub first_pod: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ColKind {
    Pattern(usize),
    Assign {
        class: usize,
        target: usize,
    },
    Pending(usize),
    Aux(Aux),
    /// Aggregated relaxation only: nodes of a configuration.
    AggNodes(usize),
    /// Aggregated relaxation only: pods of a class on nodes of a configuration group.
    AggPods {
        class: usize,
        group: usize,
    },
}

/// Auxiliary columns: indicator binaries and minima of the coupling constraints.
#[derive(Clone, Debug, PartialEq)]
pub enum Aux {
    /// Spread group g: a constrained class lands in domain d.
    SpreadW { g: usize, d: usize },
    /// Spread group g: the global minimum.
    SpreadM { g: usize },
    /// Hostname spread h: regime 1.
    HostRegime { h: usize },
    /// Domain anti-affinity a: the class lands in domain d.
    AntiW { a: usize, d: String },
    /// Affinity group a: a free target lands in domain d.
    AffH { a: usize, d: String },
    /// Affinity group a: domain d is the first pod's.
    AffV { a: usize, d: String },
}

#[derive(Clone, Debug)]
pub struct Column {
    pub cost: f64,
    pub lo: f64,
    pub hi: f64,
    pub integer: bool,
    pub entries: Vec<(usize, f64)>,
    pub kind: ColKind,
}

/// Row indices per constraint family.
#[derive(Default)]
pub struct Rows {
    pub demand: Vec<usize>,
    pub target_cap: Vec<Vec<usize>>,
    /// Per pool: (resource name, row).
    pub pool_limit: Vec<Vec<(String, usize)>>,
    pub pool_nodes: Vec<Option<usize>>,
    /// Per spread group, per domain.
    pub sp_place: Vec<Vec<usize>>,
    pub sp_skew: Vec<Vec<usize>>,
    pub sp_min: Vec<Vec<usize>>,
    /// Per hostname spread: the regime rows (R1, R2).
    pub hs_regime1: Vec<Option<usize>>,
    pub hs_low: Vec<Option<usize>>,
    /// Per domain anti-affinity: domain → (self row, class row, others row).
    pub an_self: Vec<FxHashMap<String, usize>>,
    pub an_class: Vec<FxHashMap<String, usize>>,
    pub an_others: Vec<FxHashMap<String, usize>>,
    /// Per affinity group: (class, domain) → row (non-hostname); h rows; first-pod row.
    pub af_dom: Vec<FxHashMap<(usize, String), usize>>,
    pub af_free: Vec<FxHashMap<String, usize>>,
    pub af_first: Vec<Option<usize>>,
}

pub struct Master<'p, 'a> {
    pub p: &'p Problem<'a>,
    pub s: Structure,
    pub row_lo: Vec<f64>,
    pub row_hi: Vec<f64>,
    /// What each row is (for diagnostics).
    pub row_name: Vec<String>,
    pub cols: Vec<Column>,
    pub rows: Rows,
    pub patterns: Vec<Pattern>,
    pub pattern_ix: FxHashMap<Pattern, usize>,
    /// Per class: its `Pending` column.
    pub pending_col: Vec<usize>,
    /// Per (class, target): the `Assign` column.
    pub assign_col: FxHashMap<(usize, usize), usize>,

    /// Per hostname spread: the regime binary.
    pub hs_r: Vec<Option<usize>>,
    /// Rows shared with the pattern master (all of them, except in the aggregated relaxation).
    pub shared_rows: usize,
}

const INF: f64 = f64::INFINITY;

/// Scale of a resource in the rows: cores, GiB, counts. In millicores and bytes the coefficients reach
/// 1e10 and HiGHS's presolve mis-maps the objective of a start solution (mixed-25: a start at 388.48
/// reported as 387.80 in the reduced space) and its cut rounds overrun the time limit.
pub fn unit(resource: &str) -> f64 {
    match resource {
        "cpu" => 1e-3,
        "memory" | "ephemeral-storage" => 1.0 / (1u64 << 30) as f64,
        r if r.starts_with("hugepages-") => 1.0 / (1u64 << 30) as f64,
        _ => 1.0,
    }
}

impl<'p, 'a> Master<'p, 'a> {
    /// The first row (name, activity, lo, hi) or column bound a solution violates, if any: HiGHS has
    /// returned infeasible "optimal" solutions when given a start (see `milp::solve`).
    pub fn violation(&self, x: &[f64]) -> Option<String> {
        let mut act = vec![0.0; self.row_lo.len()];
        for (j, c) in self.cols.iter().enumerate() {
            let v = x.get(j).copied().unwrap_or(0.0);
            if v < c.lo - 1e-6 || v > c.hi + 1e-6 || c.integer && (v - v.round()).abs() > 1e-6 {
                return Some(format!("column {j} = {v} outside [{}, {}]", c.lo, c.hi));
            }
            for &(r, a) in &c.entries {
                act[r] += a * v;
            }
        }
        (0..act.len())
            .find(|&r| act[r] < self.row_lo[r] - 1e-6 * (1.0 + self.row_lo[r].abs()) || act[r] > self.row_hi[r] + 1e-6 * (1.0 + self.row_hi[r].abs()))
            .map(|r| format!("row {r} {} = {} outside [{}, {}]", self.row_name[r], act[r], self.row_lo[r], self.row_hi[r]))
    }

    /// The model as canonical text: the rows (bounds and name) if `rows`, then the columns from `from` on
    /// (kind, cost, bounds, integrality and entries, in order). `milp::solve` traces it (target
    /// [`super::MODEL_TRACE`]) so that a change of the encoding can be shown to hand HiGHS the same model.
    pub fn dump(&self, rows: bool, from: usize) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        if rows {
            let _ = writeln!(out, "rows {}", self.row_lo.len());
            for r in 0..self.row_lo.len() {
                let _ = writeln!(out, "r{r} {:?} {:?} {}", self.row_lo[r], self.row_hi[r], self.row_name[r]);
            }
        }
        let _ = writeln!(out, "cols {}..{}", from, self.cols.len());
        for (j, c) in self.cols.iter().enumerate().skip(from) {
            let _ = write!(out, "c{j} {} cost={:?} [{:?}, {:?}] int={} :", self.describe(&c.kind), c.cost, c.lo, c.hi, c.integer);
            for &(r, v) in &c.entries {
                let _ = write!(out, " {r}:{v:?}");
            }
            out.push('\n');
        }
        out
    }

    /// A column's kind in [`Master::dump`]'s words.
    fn describe(&self, kind: &ColKind) -> String {
        match kind {
            ColKind::Pattern(i) => {
                let p = &self.patterns[*i];
                let counts: Vec<String> = p.counts.iter().map(|(c, k)| format!("{c}x{k}")).collect();
                format!("pattern config={} counts={}", p.config, counts.join(","))
            }
            ColKind::Assign { class, target } => format!("assign class={class} target={target}"),
            ColKind::Pending(c) => format!("pending class={c}"),
            ColKind::AggNodes(f) => format!("agg-nodes config={f}"),
            ColKind::AggPods { class, group } => format!("agg-pods class={class} group={group}"),
            ColKind::Aux(a) => match a {
                Aux::SpreadW { g, d } => format!("spread-w {g} {d}"),
                Aux::SpreadM { g } => format!("spread-m {g}"),
                Aux::HostRegime { h } => format!("host-regime {h}"),
                Aux::AntiW { a, d } => format!("anti-w {a} {d}"),
                Aux::AffH { a, d } => format!("aff-h {a} {d}"),
                Aux::AffV { a, d } => format!("aff-v {a} {d}"),
            },
        }
    }

    fn row(&mut self, lo: f64, hi: f64) -> usize {
        self.row_lo.push(lo);
        self.row_hi.push(hi);
        self.row_name.push(String::new());
        self.row_lo.len() - 1
    }

    fn named(&mut self, name: impl Into<String>, lo: f64, hi: f64) -> usize {
        let r = self.row(lo, hi);
        self.row_name[r] = name.into();
        r
    }

    fn col(&mut self, cost: f64, lo: f64, hi: f64, integer: bool, entries: Vec<(usize, f64)>, kind: ColKind) -> usize {
        self.cols.push(Column { cost, lo, hi, integer, entries, kind });
        self.cols.len() - 1
    }

    fn aux_col(&mut self, kind: Aux, lo: f64, hi: f64, integer: bool, entries: Vec<(usize, f64)>) -> usize {
        self.col(0.0, lo, hi, integer, entries, ColKind::Aux(kind))
    }

    pub fn new(p: &'p Problem<'a>) -> Self {
        let s = Structure::build(p);
        let mut m = Master {
            p,
            s,
            row_lo: Vec::new(),
            row_hi: Vec::new(),
            row_name: Vec::new(),
            cols: Vec::new(),
            rows: Rows::default(),
            patterns: Vec::new(),
            pattern_ix: FxHashMap::default(),
            pending_col: Vec::new(),
            assign_col: FxHashMap::default(),
            hs_r: Vec::new(),
            shared_rows: 0,
        };
        m.build_rows();
        m.build_fixed_columns();
        m.shared_rows = m.row_lo.len();
        m
    }

    /// Every row of the model except those the fixed columns add, family by family (the order fixes
    /// the row indices HiGHS sees).
    fn build_rows(&mut self) {
        self.demand_rows();
        self.target_capacity_rows();
        self.pool_limit_rows();
        self.spread_rows();
        self.host_spread_rows();
        self.anti_affinity_rows();
        self.affinity_rows();
    }

    fn demand_rows(&mut self) {
        let nc = self.s.n.len();
        // Demand rows are covering rows (≥ n_c) for classes whose extra, unfilled slots cannot loosen
        // any constraint: their dual values stay non-negative and bounded, which keeps column
        // generation out of the degenerate swamps of equality rows. Classes counted by a spread
        // minimum or serving as affinity targets must be exact: a phantom pod there would lift a
        // minimum or open a domain.
        let mut exact = vec![false; nc];
        for sg in &self.s.spread {
            for &c in &sg.members {
                exact[c] = true;
            }
        }
        for g in &self.s.affinity {
            for &c in &g.free_targets {
                exact[c] = true;
            }
        }
        for (c, &exact) in exact.iter().enumerate().take(nc) {
            let n = self.s.n[c] as f64;
            let hi = if exact { n } else { INF };
            let r = self.named(format!("demand[{c}]"), n, hi);
            self.rows.demand.push(r);
        }
    }

    /// Per existing target and resource: what the assigned pods request ≤ the node's free room.
    fn target_capacity_rows(&mut self) {
        for t in 0..self.s.targets.len() {
            let mut v = Vec::new();
            for d in 0..self.s.dims.len() {
                let f = self.s.free[t][d] as f64 * unit(&self.s.dims[d]);
                v.push(self.row(-INF, f));
            }
            self.rows.target_cap.push(v);
        }
    }

    /// Per NodePool with limits: the new nodes' capacity ≤ what the limits leave, and their number ≤
    /// the node limit left.
    fn pool_limit_rows(&mut self) {
        let p = self.p;
        for (pi, pool) in p.cluster.nodepools.iter().enumerate() {
            let mut lim = Vec::new();
            let mut nodes = None;
            if let Some(l) = &pool.limits {
                for name in &l.limited {
                    let room = (l.resources.get(name) - p.usage[pi].capacity.get(name)).max(0) as f64 * unit(name);
                    lim.push((name.clone(), self.row(-INF, room)));
                }
                if let Some(n) = l.nodes {
                    nodes = Some(self.row(-INF, (n - p.usage[pi].nodes).max(0) as f64));
                }
            }
            self.rows.pool_limit.push(lim);
            self.rows.pool_nodes.push(nodes);
        }
    }

    /// Per hard spread group and domain: the place, skew and minimum rows (docs/design/milp.md).
    fn spread_rows(&mut self) {
        for g in 0..self.s.spread.len() {
            let (hard, nd) = (self.s.spread[g].hard, self.s.spread[g].domains.len());
            let mut place = Vec::new();
            let mut skew = Vec::new();
            let mut min = Vec::new();
            let members: f64 = self.s.spread[g].counted.iter().map(|&c| self.s.n[c] as f64).sum();
            let unconditional = self.s.spread[g].unconditional;
            for d in 0..nd {
                let e = self.s.spread[g].existing[d];
                let s = self.s.spread[g].max_skew;
                let big = e + members + s;
                if hard {
                    if !unconditional {
                        place.push(self.named(format!("spread[{g}].place[{d}]"), -INF, 0.0));
                    }
                    let rhs = if unconditional { s - e } else { s + big - e };
                    skew.push(self.named(format!("spread[{g}].skew[{d}]"), -INF, rhs));
                    min.push(self.named(format!("spread[{g}].min[{d}]"), -INF, e));
                }
            }
            self.rows.sp_place.push(place);
            self.rows.sp_skew.push(skew);
            self.rows.sp_min.push(min);
        }
    }

    /// Per hostname spread with mbar > 0: the two regime rows (R1, R2).
    fn host_spread_rows(&mut self) {
        for h in 0..self.s.hspread.len() {
            if self.s.hspread[h].mbar > 0 {
                let r1 = self.row(-INF, 0.0);
                let big = self.big_nodes();
                let r2 = self.row(-INF, big);
                self.rows.hs_regime1.push(Some(r1));
                self.rows.hs_low.push(Some(r2));
            } else {
                self.rows.hs_regime1.push(None);
                self.rows.hs_low.push(None);
            }
        }
    }

    /// Per domain anti-affinity term and domain: the self, class and others rows.
    fn anti_affinity_rows(&mut self) {
        for a in 0..self.s.anti.len() {
            let mut selfr = FxHashMap::default();
            let mut cr = FxHashMap::default();
            let mut or = FxHashMap::default();
            let domains = self.s.anti[a].domains.clone();
            let others: f64 = self.s.anti[a].others.iter().map(|&q| self.s.n[q] as f64).sum();
            for d in domains {
                if self.s.anti[a].self_match {
                    selfr.insert(d.clone(), self.named(format!("anti[{a}].self[{d}]"), -INF, 1.0));
                }
                if others > 0.0 {
                    cr.insert(d.clone(), self.named(format!("anti[{a}].class[{d}]"), -INF, 0.0));
                    or.insert(d.clone(), self.named(format!("anti[{a}].others[{d}]"), -INF, others));
                }
            }
            self.rows.an_self.push(selfr);
            self.rows.an_class.push(cr);
            self.rows.an_others.push(or);
        }
    }

    /// Per affinity group: per class and domain with no matching pod yet, the domain row; per domain the
    /// free-target row; and the first-pod row.
    fn affinity_rows(&mut self) {
        for a in 0..self.s.affinity.len() {
            let g = self.s.affinity[a].clone();
            let mut dom = FxHashMap::default();
            let mut free = FxHashMap::default();
            let allow_first = g.self_match && !g.any_existing;
            if g.key != crate::domain::labels::keys::HOSTNAME {
                for d in &g.domains {
                    if g.existing.contains(d) {
                        continue;
                    }
                    for &c in &g.classes {
                        dom.insert((c, d.clone()), self.named(format!("affinity[{a}].class[{c}].dom[{d}]"), -INF, 0.0));
                    }
                    if !g.free_targets.is_empty() {
                        free.insert(d.clone(), self.named(format!("affinity[{a}].free[{d}]"), -INF, 0.0));
                    }
                }
            }
            let first = self.named(format!("affinity[{a}].first"), -INF, if allow_first { 1.0 } else { 0.0 });
            self.rows.af_first.push(Some(first));
            self.rows.af_dom.push(dom);
            self.rows.af_free.push(free);
        }
    }

    /// The group-aggregated relaxation: the same rows and fixed columns, but instead of patterns, per
    /// configuration the number of nodes `y_f` and per (class, group) the number of pods `x_{c,g}`, with
    ///
    /// ```text
    /// capacity  Σ_c req_{c,r} x_{c,g} ≤ Σ_{f∈g} room_{f,r} y_f          ∀ g, r
    /// cliques   Σ_{c∈K} x_{c,g} ≤ Σ_{f∈g} y_f    classes carrying the same self-matching hostname
    ///                                           anti-affinity term repel each other pairwise
    /// one/node  x_{c,g} ≤ Σ_{f∈g} y_f            other classes with at most one pod per node
    /// h-spread  Σ_{c ∈ constrained ∩ members} x_{c,g} ≤ (maxSkew + mbar) Σ_{f∈g} y_f
    /// ```
    ///
    /// Every plan maps onto it (y_f counts nodes, x_{c,g} pods per group), so its LP value is a lower
    /// bound on the optimum, and its row duals on the shared rows (same indices as the pattern master)
    /// are a stable start for pricing.
    pub fn aggregate(p: &'p Problem<'a>) -> Self {
        let mut m = Master::new(p);
        m.shared_rows = m.row_lo.len();
        let ng = p.groups.len();
        let nd = m.s.dims.len();
        let mut cap_rows: Vec<Vec<usize>> = Vec::new();
        for g in 0..ng {
            cap_rows.push((0..nd).map(|d| m.named(format!("agg.capacity[{g}][{}]", m.s.dims[d]), -INF, 0.0)).collect());
        }
        let cliques = m.s.hostname_cliques(p);
        let in_clique: Vec<bool> = (0..m.s.n.len()).map(|c| cliques.iter().any(|k| k.contains(&c))).collect();
        let singles: Vec<usize> = (0..m.s.n.len()).filter(|&c| m.s.one_per_node[c] && !in_clique[c]).collect();
        let mut node_rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ng];
        let mut member_rows: FxHashMap<(usize, usize), Vec<usize>> = FxHashMap::default();
        for (g, rows) in node_rows.iter_mut().enumerate() {
            for (k, clique) in cliques.iter().enumerate() {
                if clique.iter().any(|&c| m.s.class_groups[c].contains(&g)) {
                    let r = m.named(format!("agg.clique[{k}][{g}]"), -INF, 0.0);
                    rows.push((r, -1.0));
                    for &c in clique {
                        member_rows.entry((c, g)).or_default().push(r);
                    }
                }
            }
            for &c in &singles {
                if m.s.class_groups[c].contains(&g) {
                    let r = m.named(format!("agg.one[{c}][{g}]"), -INF, 0.0);
                    rows.push((r, -1.0));
                    member_rows.entry((c, g)).or_default().push(r);
                }
            }
            for h in 0..m.s.hspread.len() {
                let hs = &m.s.hspread[h];
                let limited: Vec<usize> = hs.members.iter().copied().filter(|c| hs.constrained.contains(c) && m.s.class_groups[*c].contains(&g)).collect();
                if limited.is_empty() {
                    continue;
                }
                let cap = (hs.max_skew + hs.mbar) as f64;
                let r = m.named(format!("agg.hostspread[{h}][{g}]"), -INF, 0.0);
                rows.push((r, -cap));
                for c in limited {
                    member_rows.entry((c, g)).or_default().push(r);
                }
            }
        }
        let big = m.big_nodes();
        for g in 0..ng {
            if !(0..m.s.n.len()).any(|c| m.s.class_groups[c].contains(&g)) {
                continue;
            }
            for &f in &p.groups[g] {
                let f = f as usize;
                let room = p.configs[f].room();
                let mut e = m.node_entries(f);
                for (dim, &row) in m.s.dims.iter().zip(&cap_rows[g]) {
                    let v = room.get(dim) as f64 * unit(dim);
                    if v != 0.0 {
                        e.push((row, -v));
                    }
                }
                e.extend(node_rows[g].iter().copied());
                m.col(p.configs[f].cost, 0.0, big, true, e, ColKind::AggNodes(f));
            }
        }
        for c in 0..m.s.n.len() {
            let mut groups: Vec<usize> = m.s.class_groups[c].iter().copied().collect();
            groups.sort();
            for g in groups {
                let mut e = m.unit_entries_group(c, g);
                for ((&q, &row), dim) in m.s.req[c].iter().zip(&cap_rows[g]).zip(&m.s.dims) {
                    if q != 0 {
                        e.push((row, q as f64 * unit(dim)));
                    }
                }
                for &r in member_rows.get(&(c, g)).map(Vec::as_slice).unwrap_or(&[]) {
                    e.push((r, 1.0));
                }
                let cost = m.s.soft_group[c].get(&g).copied().unwrap_or(0.0);
                m.col(cost, 0.0, m.s.n[c] as f64, true, e, ColKind::AggPods { class: c, group: g });
            }
        }
        m
    }

    /// An upper bound on the number of new nodes any sensible plan uses.
    pub(crate) fn big_nodes(&self) -> f64 {
        self.s.n.iter().map(|&n| n as f64).sum::<f64>().max(1.0)
    }

    /// The columns that exist before pricing, family by family (the order fixes the column indices):
    /// pending pods, pods on existing nodes, then the auxiliary columns of spread, hostname spread,
    /// anti-affinity and affinity. Host conflicts on existing nodes and hostname spread on existing
    /// nodes add their rows here, after every row of `build_rows`.
    fn build_fixed_columns(&mut self) {
        self.pending_columns();
        self.assign_columns();
        self.spread_columns();
        self.host_spread_columns();
        self.anti_affinity_columns();
        self.affinity_columns();
    }

    fn pending_columns(&mut self) {
        let penalty = self.p.weights.unschedulable_pod;
        for c in 0..self.s.n.len() {
            let r = self.rows.demand[c];
            let n = self.s.n[c] as f64;
            let col = self.col(penalty, 0.0, n, true, vec![(r, 1.0)], ColKind::Pending(c));
            self.pending_col.push(col);
        }
    }

    /// Pods of a class on an existing target, with the rows of pairs of classes that may not share it.
    fn assign_columns(&mut self) {
        let nc = self.s.n.len();
        // Classes that may not share an existing node (structure.rs: one-per-node pairs).
        let mut conflict: FxHashMap<(usize, usize), Vec<(usize, f64)>> = FxHashMap::default();
        let cap_of = |c: usize, t: usize| self.s.allowed[c].iter().find(|a| a.0 == t).map(|a| a.1);
        let mut pairs = Vec::new();
        for c in 0..nc {
            for q in c + 1..nc {
                if !(self.s.host_conflicts[c].contains(&q) || self.s.port_conflicts[c].contains(&q)) {
                    continue;
                }
                for &(t, cap_c) in &self.s.allowed[c] {
                    if let Some(cap_q) = cap_of(q, t) {
                        pairs.push((c, q, t, cap_c, cap_q));
                    }
                }
            }
        }
        for (c, q, t, cap_c, cap_q) in pairs {
            let (one_c, one_q) = (self.s.one_per_node[c], self.s.one_per_node[q]);
            let (a, b, big) = match (one_c, one_q) {
                (true, true) => (1.0, 1.0, 1.0),
                (true, false) => (cap_q as f64, 1.0, cap_q as f64),
                (false, true) => (1.0, cap_c as f64, cap_c as f64),
                (false, false) => continue, // structure.rs leaves the node to one of them
            };
            let r = self.named(format!("hostconflict[{c}][{q}][{t}]"), -INF, big);
            conflict.entry((c, t)).or_default().push((r, a));
            conflict.entry((q, t)).or_default().push((r, b));
        }
        for c in 0..nc {
            for (t, cap) in self.s.allowed[c].clone() {
                let mut e = self.unit_entries_target(c, t);
                e.extend(conflict.get(&(c, t)).into_iter().flatten().copied());
                for d in 0..self.s.dims.len() {
                    let q = self.s.req[c][d];
                    if q != 0 {
                        e.push((self.rows.target_cap[t][d], q as f64 * unit(&self.s.dims[d])));
                    }
                }
                let cost = self.s.soft_target[c][t];
                let col = self.col(cost, 0.0, cap as f64, true, e, ColKind::Assign { class: c, target: t });
                self.assign_col.insert((c, t), col);
            }
        }
    }

    fn spread_columns(&mut self) {
        // Spread: W_d (a constrained class lands in d) and M (global minimum).
        for g in 0..self.s.spread.len() {
            let sg = self.s.spread[g].clone();
            if !sg.hard {
                continue;
            }
            let kp: f64 = sg.counted.iter().map(|&c| self.s.n[c] as f64).sum();
            let members: f64 = sg.counted.iter().map(|&c| self.s.n[c] as f64).sum();
            let mut mentries = Vec::new();
            for d in 0..sg.domains.len() {
                if !sg.unconditional {
                    let big = sg.existing[d] + members + sg.max_skew;
                    let e = vec![(self.rows.sp_place[g][d], -kp), (self.rows.sp_skew[g][d], big)];
                    self.aux_col(Aux::SpreadW { g, d }, 0.0, 1.0, true, e);
                }
                mentries.push((self.rows.sp_skew[g][d], -1.0));
                mentries.push((self.rows.sp_min[g][d], 1.0));
            }
            let hi = if sg.min_zero { 0.0 } else { INF };
            self.aux_col(Aux::SpreadM { g }, 0.0, hi, false, mentries);
        }
    }

    fn host_spread_columns(&mut self) {
        // Hostname spread: the regime binary, and per-target caps on members.
        for h in 0..self.s.hspread.len() {
            let hs = self.s.hspread[h].clone();
            let big = self.big_nodes();
            let r = if hs.mbar > 0 {
                let e = vec![(self.rows.hs_regime1[h].unwrap(), -big), (self.rows.hs_low[h].unwrap(), big)];
                Some(self.aux_col(Aux::HostRegime { h }, 0.0, 1.0, true, e))
            } else {
                None
            };
            self.hs_r.push(r);
            for (t, cnt) in hs.target_count.iter().enumerate() {
                let Some(cnt) = *cnt else { continue };
                let s = hs.max_skew as f64;
                let (e, mbar) = (cnt as f64, hs.mbar as f64);
                let cap0 = (s - e).max(0.0);
                let cap1 = (s + mbar - e).max(0.0);
                // Constrained members bind first on the node.
                let members: Vec<usize> = hs.members.iter().copied().filter(|&c| hs.constrained.contains(&c) && self.assign_col.contains_key(&(c, t))).collect();
                let constrained: Vec<usize> = hs.constrained.iter().copied().filter(|&c| self.assign_col.contains_key(&(c, t))).collect();
                if constrained.is_empty() {
                    continue;
                }
                // Members on the node: ≤ cap0, or ≤ cap1 under regime 1.
                let row = self.row(-INF, cap0);
                for &c in &members {
                    let col = self.assign_col[&(c, t)];
                    self.cols[col].entries.push((row, 1.0));
                }
                if let Some(r) = r {
                    self.cols[r].entries.push((row, -(cap1 - cap0)));
                }
                // Constrained pods on a node already above maxSkew: only under regime 1 (and only if
                // regime 1 lets it hold them).
                if e > s {
                    let n: f64 = constrained.iter().map(|&c| self.s.n[c] as f64).sum();
                    let row = self.row(-INF, 0.0);
                    for &c in &constrained {
                        let col = self.assign_col[&(c, t)];
                        self.cols[col].entries.push((row, 1.0));
                        if e >= s + mbar {
                            self.cols[col].hi = 0.0;
                        }
                    }
                    if let Some(r) = r {
                        self.cols[r].entries.push((row, -n));
                    }
                }
            }
        }
    }

    fn anti_affinity_columns(&mut self) {
        // Domain anti-affinity pairs: w_d (the class lands in d).
        for a in 0..self.s.anti.len() {
            let an = self.s.anti[a].clone();
            let nc = self.s.n[an.class] as f64;
            let others: f64 = an.others.iter().map(|&q| self.s.n[q] as f64).sum();
            for d in &an.domains {
                if let (Some(&cr), Some(&or)) = (self.rows.an_class[a].get(d), self.rows.an_others[a].get(d)) {
                    self.aux_col(Aux::AntiW { a, d: d.clone() }, 0.0, 1.0, true, vec![(cr, -nc), (or, others)]);
                }
            }
        }
    }

    fn affinity_columns(&mut self) {
        // Affinity: h_d (a free target lands in d), v_d (the first pod's domain).
        for a in 0..self.s.affinity.len() {
            let g = self.s.affinity[a].clone();
            if g.key == crate::domain::labels::keys::HOSTNAME {
                continue;
            }
            for d in &g.domains {
                // Per class: placed_{c,d} ≤ n_c (h_d + v_d), disaggregated for a tighter relaxation.
                let dom: Vec<(usize, f64)> = g.classes.iter().filter_map(|&c| self.rows.af_dom[a].get(&(c, d.clone())).map(|&r| (r, -(self.s.n[c] as f64)))).collect();
                if dom.is_empty() {
                    continue;
                }
                if let Some(&fr) = self.rows.af_free[a].get(d) {
                    let mut e = dom.clone();
                    e.push((fr, 1.0));
                    self.aux_col(Aux::AffH { a, d: d.clone() }, 0.0, 1.0, true, e);
                }
                let first = self.rows.af_first[a].expect("every affinity group has a first-pod row");
                let mut e = dom;
                e.push((first, 1.0));
                self.aux_col(Aux::AffV { a, d: d.clone() }, 0.0, 1.0, true, e);
            }
        }
    }

    /// Row coefficients of one pod of class `c` in domain labels `labels` (a configuration group's or a
    /// target's), for the constraints that couple nodes. `group`/`target` select the eligibility maps.
    fn unit_entries(&self, c: usize, group: Option<usize>, target: Option<usize>, labels: &crate::domain::Labels) -> Vec<(usize, f64)> {
        let s = &self.s;
        let mut e = vec![(self.rows.demand[c], 1.0)];
        for (g, sg) in s.spread.iter().enumerate() {
            if !sg.hard {
                continue;
            }
            let d = match (group, target) {
                (Some(gr), _) => sg.group_domain.get(&gr).copied(),
                (_, Some(t)) => sg.target_domain[t],
                _ => None,
            };
            let Some(d) = d else { continue };
            let counted = sg.counted.binary_search(&c).is_ok();
            if counted {
                e.push((self.rows.sp_skew[g][d], 1.0));
                if !sg.unconditional {
                    e.push((self.rows.sp_place[g][d], 1.0));
                }
            }
            if sg.members.binary_search(&c).is_ok() {
                e.push((self.rows.sp_min[g][d], -1.0));
            }
        }
        for (a, an) in s.anti.iter().enumerate() {
            let Some(d) = labels.get(&an.key) else { continue };
            if an.class == c {
                if let Some(&r) = self.rows.an_self[a].get(d) {
                    e.push((r, 1.0));
                }
                if let Some(&r) = self.rows.an_class[a].get(d) {
                    e.push((r, 1.0));
                }
            } else if an.others.binary_search(&c).is_ok()
                && let Some(&r) = self.rows.an_others[a].get(d)
            {
                e.push((r, 1.0));
            }
        }
        for (a, g) in s.affinity.iter().enumerate() {
            let Some(d) = labels.get(&g.key) else { continue };
            if let Some(&r) = self.rows.af_dom[a].get(&(c, d.clone())) {
                e.push((r, 1.0));
            }
            if g.free_targets.binary_search(&c).is_ok()
                && let Some(&r) = self.rows.af_free[a].get(d)
            {
                e.push((r, -1.0));
            }
        }
        e
    }

    fn unit_entries_target(&self, c: usize, t: usize) -> Vec<(usize, f64)> {
        let e = self.s.targets[t];
        let labels = &self.p.cluster.nodes[e].labels;
        self.unit_entries(c, None, Some(t), labels)
    }

    pub(crate) fn unit_entries_group(&self, c: usize, g: usize) -> Vec<(usize, f64)> {
        let labels = &self.p.configs[self.p.groups[g][0] as usize].labels;
        self.unit_entries(c, Some(g), None, labels)
    }

    /// Row coefficients of a new node of configuration `f` itself (pool limits and node count).
    pub(crate) fn node_entries(&self, f: usize) -> Vec<(usize, f64)> {
        let cfg = &self.p.configs[f];
        let mut e = Vec::new();
        for (name, r) in &self.rows.pool_limit[cfg.pool] {
            let v = cfg.capacity.get(name);
            if v != 0 {
                e.push((*r, v as f64 * unit(name)));
            }
        }
        if let Some(r) = self.rows.pool_nodes[cfg.pool] {
            e.push((r, 1.0));
        }
        e
    }

    pub(crate) fn pattern_cost(&self, pat: &Pattern) -> f64 {
        let cfg = &self.p.configs[pat.config];
        let soft: f64 = pat.counts.iter().map(|&(c, k)| k as f64 * self.s.soft_group[c].get(&cfg.group).copied().unwrap_or(0.0)).sum();
        cfg.cost + soft
    }

    pub(crate) fn pattern_entries(&self, pat: &Pattern) -> Vec<(usize, f64)> {
        let g = self.p.configs[pat.config].group;
        let mut acc: FxHashMap<usize, f64> = FxHashMap::default();
        for &(c, k) in &pat.counts {
            for (r, v) in self.unit_entries_group(c, g) {
                *acc.entry(r).or_default() += v * k as f64;
            }
        }
        for (r, v) in self.node_entries(pat.config) {
            *acc.entry(r).or_default() += v;
        }
        for &h in &pat.regime1 {
            if let Some(r) = self.rows.hs_regime1[h] {
                *acc.entry(r).or_default() += 1.0;
            }
        }
        for &h in &pat.low {
            if let Some(r) = self.rows.hs_low[h] {
                *acc.entry(r).or_default() += 1.0;
            }
        }
        for &a in &pat.first_pod {
            if let Some(r) = self.rows.af_first[a] {
                *acc.entry(r).or_default() += 1.0;
            }
        }
        let mut v: Vec<(usize, f64)> = acc.into_iter().filter(|(_, v)| *v != 0.0).collect();
        v.sort_by_key(|(r, _)| *r);
        v
    }

    /// Adds a pattern column (once). Returns its column index.
    pub(crate) fn add_pattern(&mut self, pat: Pattern) -> usize {
        if let Some(&i) = self.pattern_ix.get(&pat) {
            return i;
        }
        let cost = self.pattern_cost(&pat);
        let entries = self.pattern_entries(&pat);
        self.patterns.push(pat.clone());
        let pi = self.patterns.len() - 1;
        let hi = self.big_nodes();
        let col = self.col(cost, 0.0, hi, true, entries, ColKind::Pattern(pi));
        self.pattern_ix.insert(pat, col);
        col
    }
}
