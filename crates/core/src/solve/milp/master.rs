//! The master problem: the rows and auxiliary columns of every constraint family
//! ([`super::families`], in registration order), the fixed columns (pods on existing nodes, pods left
//! pending) and the pattern columns added by pricing. Formulation: docs/design/milp.md.

use rustc_hash::FxHashMap;

use super::families::capacity::unit;
use super::families::{self, AggRow, Cx, Families, Node};
use super::fit_cuts::FitCuts;
use super::ids::{Class, Col, Config, Group, Place, Row, Target};
use super::model::{ColKind, INF, Model, Pattern};
use super::structure::Structure;
use crate::solve::problem::Problem;

pub struct Master<'p, 'a> {
    pub p: &'p Problem<'a>,
    pub s: Structure,
    pub fams: Families,
    pub model: Model,
    pub patterns: Vec<Pattern>,
    pub pattern_ix: FxHashMap<Pattern, Col>,
    /// Per class: its `Pending` column.
    pub pending_col: Vec<Col>,
    /// Per (class, target): the `Assign` column.
    pub assign_col: FxHashMap<(Class, Target), Col>,
    /// Rows shared with the pattern master (all of them, except in the aggregated relaxation).
    pub shared_rows: usize,
}

impl<'p, 'a> Master<'p, 'a> {
    /// What the families' hooks read.
    pub fn cx(&self) -> Cx<'_, 'a> {
        Cx { p: self.p, s: &self.s, assign: &self.assign_col }
    }

    /// The first row (name, activity, lo, hi) or column bound a solution violates, if any: HiGHS has
    /// returned infeasible "optimal" solutions when given a start (see `milp::solve`).
    pub fn violation(&self, x: &[f64]) -> Option<String> {
        let mut act = vec![0.0; self.model.n_rows()];
        for (j, c) in self.model.columns() {
            let v = x.get(j.ix()).copied().unwrap_or(0.0);
            if v < c.lo - 1e-6 || v > c.hi + 1e-6 || c.integer && (v - v.round()).abs() > 1e-6 {
                return Some(format!("column {j} = {v} outside [{}, {}]", c.lo, c.hi));
            }
            for &(r, a) in &c.entries {
                act[r.ix()] += a * v;
            }
        }
        let rows = self.model.rows();
        (0..act.len())
            .find(|&r| act[r] < rows[r].lo - 1e-6 * (1.0 + rows[r].lo.abs()) || act[r] > rows[r].hi + 1e-6 * (1.0 + rows[r].hi.abs()))
            .map(|r| format!("row {r} {} = {} outside [{}, {}]", rows[r].name, act[r], rows[r].lo, rows[r].hi))
    }

    /// The model as canonical text: the rows (bounds and name) if `rows`, then the columns from `from` on
    /// (kind, cost, bounds, integrality and entries, in order). `milp::solve` traces it (target
    /// [`super::MODEL_TRACE`]) so that a change of the encoding can be shown to hand HiGHS the same model.
    pub fn dump(&self, rows: bool, from: usize) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        if rows {
            let _ = writeln!(out, "rows {}", self.model.n_rows());
            for (r, row) in self.model.rows().iter().enumerate() {
                let _ = writeln!(out, "r{r} {:?} {:?} {}", row.lo, row.hi, row.name);
            }
        }
        let _ = writeln!(out, "cols {}..{}", from, self.model.n_cols());
        for (j, c) in self.model.columns().skip(from) {
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
                let p = &self.patterns[i.ix()];
                let counts: Vec<String> = p.counts.iter().map(|(c, k)| format!("{c}x{k}")).collect();
                format!("pattern config={} counts={}", p.config, counts.join(","))
            }
            ColKind::Assign { class, target } => format!("assign class={class} target={target}"),
            ColKind::Pending(c) => format!("pending class={c}"),
            ColKind::AggNodes(f) => format!("agg-nodes config={f}"),
            ColKind::AggPods { class, group } => format!("agg-pods class={class} group={group}"),
            ColKind::Aux(name) => name.clone(),
        }
    }

    /// The pattern master before pricing: every family's rows, then the rows over existing targets that
    /// the assignment columns enter, the fixed columns (pending pods, pods on existing nodes) and every
    /// family's auxiliary columns (and the rows those need). The order fixes the indices HiGHS sees.
    pub fn new(p: &'p Problem<'a>) -> Self {
        let (s, mut fams) = families::build(p);
        let mut model = Model::default();
        let mut assign_col = FxHashMap::default();
        let none = FxHashMap::default();
        let cx = Cx { p, s: &s, assign: &none };
        for f in fams.all_mut() {
            f.rows(&cx, &mut model);
        }
        for f in fams.all_mut() {
            f.target_rows(&cx, &mut model);
        }
        // Tiered by priority and queue position (`semantics::queue`), not flat, so that the pods left
        // pending are the ones kube-scheduler's queue would leave.
        let pending_col: Vec<Col> = s.classes().map(|c| model.add_col(p.pending_penalty[c.ix()], 0.0, s.n_of(c) as f64, true, vec![(fams.demand.row(c), 1.0)], ColKind::Pending(c))).collect();
        for c in s.classes() {
            for &(t, cap) in &s.allowed[c.ix()] {
                let mut e = unit_entries(&fams, &cx, c, Place::Target(t));
                for f in fams.all() {
                    f.target_entries(&cx, c, t, &mut e);
                }
                let cost = s.soft_target[c.ix()][t.ix()];
                let col = model.add_col(cost, 0.0, cap as f64, true, e, ColKind::Assign { class: c, target: t });
                assign_col.insert((c, t), col);
            }
        }
        let cx = Cx { p, s: &s, assign: &assign_col };
        for f in fams.all_mut() {
            f.aux_columns(&cx, &mut model);
        }
        let shared_rows = model.n_rows();
        Master { p, s, fams, model, patterns: Vec::new(), pattern_ix: FxHashMap::default(), pending_col, assign_col, shared_rows }
    }

    /// The group-aggregated relaxation: the same rows and fixed columns, but instead of patterns, per
    /// configuration the number of nodes `y_f` and per (class, group) the number of pods `x_{c,g}`, with
    ///
    /// ```text
    /// capacity  Σ_c req_{c,r} x_{c,g} ≤ Σ_{f∈g} room_{f,r} y_f          ∀ g, r
    /// per node  Σ_{c∈members} x_{c,g} ≤ k Σ_{f∈g} y_f    each family's rows (`Family::aggregate_rows`):
    ///           cliques and one-per-node classes (k = 1), hostname spreads (k = maxSkew + mbar; maxSkew under intent)
    /// ```
    ///
    /// [`Master::add_fit_cuts`] adds the fit cuts to it for its integer program.
    ///
    /// Every plan maps onto it (y_f counts nodes, x_{c,g} pods per group), so its LP value is a lower
    /// bound on the optimum, and its row duals on the shared rows (same indices as the pattern master)
    /// are a stable start for pricing.
    pub fn aggregate(p: &'p Problem<'a>) -> Self {
        let mut m = Master::new(p);
        m.shared_rows = m.model.n_rows();
        let groups: Vec<Group> = Group::all(p.groups.len()).collect();
        let cap_rows: Vec<Vec<Row>> = groups.iter().map(|g| m.s.dims.iter().map(|dim| m.model.named(format!("agg.capacity[{g}][{dim}]"), -INF, 0.0)).collect()).collect();
        let mut node_rows: Vec<Vec<(Row, f64)>> = vec![Vec::new(); groups.len()];
        let mut member_rows: FxHashMap<(Class, Group), Vec<Row>> = FxHashMap::default();
        let cx = Cx { p, s: &m.s, assign: &m.assign_col };
        for &g in &groups {
            let mut rows: Vec<AggRow> = Vec::new();
            for f in m.fams.all() {
                f.aggregate_rows(&cx, g, &mut m.model, &mut rows);
            }
            for r in rows {
                node_rows[g.ix()].push((r.row, -r.per_node));
                for c in r.members {
                    member_rows.entry((c, g)).or_default().push(r.row);
                }
            }
        }
        let big = m.s.big_nodes();
        for &g in &groups {
            if !m.s.class_groups.iter().any(|gs| gs.contains(&g)) {
                continue;
            }
            for &f in &p.groups[g.ix()] {
                let f = Config(f);
                let room = p.configs[f.ix()].room();
                let mut e = node_entries(&m.fams, &cx, f);
                for (dim, &row) in m.s.dims.iter().zip(&cap_rows[g.ix()]) {
                    let v = room.get(dim) as f64 * unit(dim);
                    if v != 0.0 {
                        e.push((row, -v));
                    }
                }
                e.extend(node_rows[g.ix()].iter().copied());
                m.model.add_col(p.configs[f.ix()].cost, 0.0, big, true, e, ColKind::AggNodes(f));
            }
        }
        for c in m.s.classes() {
            let mut gs: Vec<Group> = m.s.class_groups[c.ix()].iter().copied().collect();
            gs.sort();
            for g in gs {
                let mut e = unit_entries(&m.fams, &cx, c, Place::Group(g));
                for ((&q, &row), dim) in m.s.req[c.ix()].iter().zip(&cap_rows[g.ix()]).zip(&m.s.dims) {
                    if q != 0 {
                        e.push((row, q as f64 * unit(dim)));
                    }
                }
                for &r in member_rows.get(&(c, g)).map(Vec::as_slice).unwrap_or(&[]) {
                    e.push((r, 1.0));
                }
                let cost = m.s.soft_group[c.ix()].get(&g).copied().unwrap_or(0.0);
                m.model.add_col(cost, 0.0, m.s.n_of(c) as f64, true, e, ColKind::AggPods { class: c, group: g });
            }
        }
        m
    }

    /// Adds the fit cuts ([`super::fit_cuts`]: capacity over only the configurations a class fits,
    /// per-node counts of large pods) to the aggregated relaxation. The driver adds them after the
    /// relaxation's LP has given its bound and duals, for the integer program only: in the LP they
    /// cost more time than they raise its bound on large batches (mixed-25's LP ran out of its share).
    pub fn add_fit_cuts(&mut self) {
        let mut fit = FitCuts::build(self.p, &self.s, &mut self.model);
        let cols: Vec<(Col, Vec<(Row, f64)>)> = self
            .model
            .columns()
            .filter_map(|(j, c)| {
                let e = match c.kind {
                    ColKind::AggNodes(f) => fit.node_entries.remove(&f),
                    ColKind::AggPods { class, group } => fit.pod_entries.remove(&(class, group)),
                    _ => None,
                }?;
                Some((j, e))
            })
            .collect();
        for (j, e) in cols {
            self.model.extend_col(j, e);
        }
    }

    /// Row coefficients of one pod of class `c` on a new node of configuration group `g`.
    pub(crate) fn unit_entries_group(&self, c: Class, g: Group) -> Vec<(Row, f64)> {
        unit_entries(&self.fams, &self.cx(), c, Place::Group(g))
    }

    /// Row coefficients of a new node of configuration `f` itself.
    pub(crate) fn node_entries(&self, f: Config) -> Vec<(Row, f64)> {
        node_entries(&self.fams, &self.cx(), f)
    }

    pub(crate) fn pattern_cost(&self, pat: &Pattern) -> f64 {
        let cfg = &self.p.configs[pat.config.ix()];
        let g = Group::at(cfg.group);
        let soft: f64 = pat.counts.iter().map(|&(c, k)| k as f64 * self.s.soft_group[c.ix()].get(&g).copied().unwrap_or(0.0)).sum();
        cfg.cost + soft + self.node_soft(pat)
    }

    /// The families' per-node soft cost of a pattern (`Family::node_soft`).
    pub(crate) fn node_soft(&self, pat: &Pattern) -> f64 {
        let g = Group::at(self.p.configs[pat.config.ix()].group);
        let node = Node { config: pat.config, group: g, counts: &pat.counts };
        let cx = self.cx();
        self.fams.all().iter().map(|f| f.node_soft(&cx, &node)).sum()
    }

    pub(crate) fn pattern_entries(&self, pat: &Pattern) -> Vec<(Row, f64)> {
        let g = Group::at(self.p.configs[pat.config.ix()].group);
        let mut acc: FxHashMap<Row, f64> = FxHashMap::default();
        for &(c, k) in &pat.counts {
            for (r, v) in self.unit_entries_group(c, g) {
                *acc.entry(r).or_default() += v * k as f64;
            }
        }
        for (r, v) in self.node_entries(pat.config) {
            *acc.entry(r).or_default() += v;
        }
        for &r in pat.flags.iter().flatten() {
            *acc.entry(r).or_default() += 1.0;
        }
        let mut v: Vec<(Row, f64)> = acc.into_iter().filter(|(_, v)| *v != 0.0).collect();
        v.sort_by_key(|(r, _)| *r);
        v
    }

    /// Adds a pattern column (once). Returns its column.
    pub(crate) fn add_pattern(&mut self, pat: Pattern) -> Col {
        if let Some(&i) = self.pattern_ix.get(&pat) {
            return i;
        }
        let cost = self.pattern_cost(&pat);
        let entries = self.pattern_entries(&pat);
        self.patterns.push(pat.clone());
        let pi = super::ids::PatternId::at(self.patterns.len() - 1);
        let hi = self.s.big_nodes();
        let col = self.model.add_col(cost, 0.0, hi, true, entries, ColKind::Pattern(pi));
        self.pattern_ix.insert(pat, col);
        col
    }
}

/// Row coefficients of one pod of class `c` at `at`, in every family's rows that couple nodes.
fn unit_entries(fams: &Families, cx: &Cx, c: Class, at: Place) -> Vec<(Row, f64)> {
    let mut e = Vec::new();
    for f in fams.all() {
        f.pod_entries(cx, c, at, &mut e);
    }
    e
}

/// Row coefficients of a new node of configuration `f` itself (pool limits and node count).
fn node_entries(fams: &Families, cx: &Cx, f: Config) -> Vec<(Row, f64)> {
    let mut e = Vec::new();
    for fam in fams.all() {
        fam.node_entries(cx, f, &mut e);
    }
    e
}
