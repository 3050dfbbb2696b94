//! The batch as a mixed-integer program on HiGHS (formulation and measurements:
//! docs/design/milp.md).
//!
//! Exact per-node packing with patterns: a pattern is one new node (a configuration) with a count of
//! pods of each class that fits it and respects every per-node rule; an integer variable counts the
//! nodes built from each pattern. Existing nodes are single bins with their own assignment variables.
//! Constraints that couple nodes (spread over zones, capacity types and custom keys; domain-level
//! anti-affinity and affinity; hostname-spread regimes; NodePool limits) are rows over the counts.
//!
//! Each constraint family is one module of [`families`] (its formula at the top) owning its rows,
//! pattern check, auxiliary columns and share of the bounds; [`master`] builds the model by calling them
//! in registration order. Index spaces are types ([`ids`]).
//!
//! Solving: column generation on the LP relaxation (pricing by a greedy knapsack per configuration),
//! then the integer program over the generated columns, started from the greedy plan, under the time
//! budget. The lower bound is the largest of the aggregated relaxation's LP value
//! ([`Master::aggregate`]), the size-class bound ([`bound`]) and HiGHS's dual bound on the aggregated
//! relaxation as an integer program ([`aggregated_integer`]), all valid for the whole model, not only
//! for the generated columns; with every pattern enumerated, HiGHS's dual bound on the pattern model too.
//!
//! The budget, the comparison with greedy and the fallback live in [`crate::solve::driver`].

pub mod bound;
pub mod disaggregate;
pub mod families;
pub mod fit_cuts;
pub mod highs_lp;
pub mod ids;
pub mod master;
pub mod model;
pub mod node_set;
pub mod pricing;
pub mod structure;

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use ids::Target as TargetId;
use ids::{Class, Col, Config, Group};
use master::Master;
use model::{ColKind, Pattern};

use super::problem::Problem;
use super::{Outcome, Target};

pub use highs_lp::{MipStatus, Options, SolveError};

/// What the MILP phase produced.
pub struct Run {
    /// The decoded plan (unordered placements), if HiGHS found an integer solution.
    pub outcome: Option<Outcome>,
    /// A proven lower bound on the model's optimum.
    pub lower_bound: Option<f64>,
    /// How HiGHS's integer program ended, and its objective.
    pub mip_status: Option<MipStatus>,
    pub mip_objective: Option<f64>,
    /// Whether the greedy start was representable in the model.
    pub start_accepted: bool,
    pub columns: usize,
    pub cg_rounds: usize,
    /// Every valid pattern was in the integer program (its bound is a proof).
    pub complete: bool,
    pub phases: Vec<(String, f64)>,
    pub note: String,
}

/// The tracing target of the model dumps: at TRACE, [`solve`] writes each model it hands HiGHS as
/// canonical text ([`Master::dump`]; field `model`, phase in `phase`): the aggregated relaxation, the
/// pattern master before column generation (with the greedy start), the columns each round adds and
/// the integer program. Two builds can then be compared model by model.
pub const MODEL_TRACE: &str = "stowage_core::solve::milp::model";

/// Writes a model dump (see [`MODEL_TRACE`]) if anyone listens.
fn trace_model(phase: &str, model: impl FnOnce() -> String) {
    if tracing::enabled!(target: MODEL_TRACE, tracing::Level::TRACE) {
        tracing::trace!(target: MODEL_TRACE, phase, model = model().as_str());
    }
}

/// The start vector in a model dump.
fn dump_start(start: Option<&[f64]>) -> String {
    match start {
        Some(s) => format!("start {}\n", s.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" ")),
        None => "start none\n".to_string(),
    }
}

/// Up to this many count vectors, every pattern is enumerated instead of generated.
const ENUMERATION_LIMIT: usize = 4000;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Counts per class on each greedy node, as patterns, and the greedy plan as a full column vector.
fn warm_start(m: &mut Master, greedy: &Outcome) -> Option<Vec<f64>> {
    let p = m.p;
    let mut per_node: Vec<FxHashMap<Class, u32>> = vec![FxHashMap::default(); greedy.new_nodes.len()];
    let mut assign: FxHashMap<(Class, TargetId), u32> = FxHashMap::default();
    let target_of: FxHashMap<usize, TargetId> = m.s.targets.iter().enumerate().map(|(t, &e)| (e, TargetId::at(t))).collect();
    let mut ok = true;
    for (id, t) in &greedy.placements {
        let c = Class::at(p.class_of[id]);
        match *t {
            Target::New(k) => *per_node[k].entry(c).or_default() += 1,
            Target::Existing(e) => match target_of.get(&e) {
                Some(&ti) if m.assign_col.contains_key(&(c, ti)) => *assign.entry((c, ti)).or_default() += 1,
                _ => ok = false,
            },
        }
    }
    let mut z: Vec<(Col, f64)> = Vec::new();
    for (k, counts) in per_node.into_iter().enumerate() {
        let counts: Vec<(Class, u32)> = counts.into_iter().collect();
        match pricing::validate(m, Config::at(greedy.new_nodes[k]), counts) {
            Ok(pat) => {
                let col = m.add_pattern(pat);
                z.push((col, 1.0));
            }
            Err(why) => {
                tracing::debug!("greedy node {k} is not a valid pattern: {why}");
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    let pending = greedy.unschedulable.iter().map(|(id, _)| (Class::at(p.class_of[id]), 1.0));
    let x = point(m, z, assign.into_iter().map(|(k, v)| (k, v as f64)), pending)?;
    if tracing::enabled!(tracing::Level::DEBUG) {
        for v in violations(m, &x) {
            tracing::debug!("greedy start violates {v}");
        }
    }
    Some(x)
}

/// Rows a full column vector violates (diagnostics).
pub fn violations(m: &Master, x: &[f64]) -> Vec<String> {
    let act = m.model.activities(x, |_, _| false);
    let rows = m.model.rows();
    (0..act.len()).filter(|&r| act[r] < rows[r].lo - 1e-6 || act[r] > rows[r].hi + 1e-6).map(|r| format!("row {r} {}: {} not in [{}, {}]", rows[r].name, act[r], rows[r].lo, rows[r].hi)).collect()
}

/// The full column vector of `m` with the given pattern-column counts, pods per (class, existing
/// target) and pending pods per class (each summed), its auxiliary columns set by [`fill_aux`]. None
/// if a (class, target) pair has no assignment column.
fn point(m: &Master, patterns: impl IntoIterator<Item = (Col, f64)>, assign: impl IntoIterator<Item = ((Class, TargetId), f64)>, pending: impl IntoIterator<Item = (Class, f64)>) -> Option<Vec<f64>> {
    let mut x = vec![0.0; m.model.n_cols()];
    for (col, v) in patterns {
        x[col.ix()] += v;
    }
    for (key, v) in assign {
        x[m.assign_col.get(&key)?.ix()] += v;
    }
    for (c, v) in pending {
        x[m.pending_col[c.ix()].ix()] += v;
    }
    fill_aux(m, &mut x);
    Some(x)
}

/// Sets the auxiliary columns to values consistent with the other columns: each family sets its own
/// from the row activities of the others.
fn fill_aux(m: &Master, x: &mut [f64]) {
    let act = m.model.activities(x, |c, v| matches!(c.kind, ColKind::Aux(_)) || v == 0.0);
    let cx = m.cx();
    for f in m.fams.all() {
        f.fill_aux(&cx, &act, x);
    }
}

/// Single-class patterns on the cheapest configurations of every group a class may use, so the first
/// LP sees every class on new nodes.
fn seed_columns(m: &mut Master) {
    let p = m.p;
    for c in m.s.classes() {
        let mut groups: Vec<Group> = m.s.class_groups[c.ix()].iter().copied().collect();
        groups.sort();
        for g in groups {
            for &f in p.groups[g.ix()].iter().take(3) {
                let f = Config(f);
                let room = p.configs[f.ix()].room();
                let pod = p.pod(p.classes[c.ix()].rep);
                let k = pod.requests.copies_in(&room).min(m.s.n_of(c)) as i64;
                let cx = m.cx();
                let k = m.fams.all().iter().filter_map(|fam| fam.cap(&cx, c, &[], families::Purpose::Seed)).fold(k, i64::min);
                let k = families::volume_limits::VolumeLimits::cap_on(&cx, f, c, &[]).map_or(k, |v| k.min(v));
                if k <= 0 {
                    continue;
                }
                if let Some(pat) = pricing::complete(m, f, vec![(c, k as u32)]) {
                    m.add_pattern(pat);
                }
            }
        }
    }
}

/// Share of the budget for the aggregated relaxation (the lower bound and the first duals). Every later
/// phase builds on it (the size-class bound and column generation start from its duals), so it gets a
/// large share: at 0.2, a 50,000-pod batch under a 7 s budget lost it to the time limit in one run of
/// three, and with it every bound but a weak one (39.5 % where the others proved 5.0 %).
const AGGREGATE_SHARE: f64 = 0.4;
/// Share of the budget left for the size-class bound.
const SIZE_BOUND_SHARE: f64 = 0.2;
/// Share of the budget left for the aggregated integer program's bound.
const AGGREGATE_MIP_SHARE: f64 = 0.25;
/// A broken HiGHS answer is solved again without the start only if this much budget is left.
const RESOLVE_MIN: Duration = Duration::from_millis(20);
/// The pattern model starts only with this many times the aggregated relaxation's time left (`solve`).
const PATTERN_MODEL_ROOM: u32 = 2;

/// Share of the remaining budget given to HiGHS for the integer program.
const MIP_SHARE: f64 = 0.9;
/// Dual smoothing (Wentges): price with α·center + (1 − α)·current duals.
const SMOOTHING: f64 = 0.5;

/// Reduced cost of a pattern under row duals `y`.
fn reduced_cost(m: &Master, pat: &Pattern, y: &[f64]) -> f64 {
    m.pattern_cost(pat) - m.pattern_entries(pat).iter().map(|&(r, a)| y[r.ix()] * a).sum::<f64>()
}

/// Why a MIP answer cannot be used as HiGHS gave it: its solution breaks a row or bound, or its
/// objective is not the one the solution has. A solution that holds keeps its recomputed objective; one
/// that breaks a row is dropped. Either way HiGHS's dual bound from that run is not trusted.
fn check_answer(m: &Master, mip: &mut highs_lp::Solved) -> Option<String> {
    if let Some(v) = m.violation(&mip.columns) {
        mip.has_solution = false;
        mip.dual_bound = None;
        return Some(v);
    }
    let obj = m.model.objective(&mip.columns);
    if (obj - mip.objective).abs() <= 1e-6 * (1.0 + obj.abs()) {
        return None;
    }
    let why = format!("objective {} reported, {obj} recomputed", mip.objective);
    mip.objective = obj;
    mip.dual_bound = None;
    Some(why)
}

/// What the phases have found so far: their times, the notes for the report and the best lower bound.
#[derive(Default)]
struct Log {
    phases: Vec<(String, f64)>,
    note: String,
    lower_bound: Option<f64>,
    /// Why the model is no relaxation of kube-scheduler's rules, if it is not: its own bounds (the
    /// aggregated relaxation, its integer program, an enumerated model's dual bound) then bound the
    /// model's plans only, and are not reported (the note says why).
    model_narrower: bool,
}

impl Log {
    fn phase(&mut self, name: &str, started: Instant) {
        self.phases.push((name.to_string(), ms(started.elapsed())));
    }

    fn raise_bound(&mut self, b: f64) {
        self.lower_bound = Some(self.lower_bound.map_or(b, |l: f64| l.max(b)));
    }

    /// A bound taken from the model: kept only while the model is a relaxation.
    fn raise_model_bound(&mut self, b: f64) {
        if !self.model_narrower {
            self.raise_bound(b);
        }
    }

    /// The run that ends because the budget was spent before `phase`.
    fn out_of_time(self, phase: &str) -> Run {
        let why = format!("the budget was spent before {phase}");
        self.without_mip(&why)
    }

    /// The run ends before the integer program, for `why`: the caller keeps the greedy plan, with the
    /// bound if any.
    fn without_mip(self, why: &str) -> Run {
        Run {
            outcome: None,
            lower_bound: self.lower_bound,
            mip_status: None,
            mip_objective: None,
            start_accepted: false,
            columns: 0,
            cg_rounds: 0,
            complete: false,
            phases: self.phases,
            note: format!("{}{why}; ", self.note),
        }
    }
}

/// Runs the aggregated relaxation, column generation and the integer program until `deadline`.
///
/// Each phase starts only while budget is left: building and solving a model that cannot be used would
/// only make the batch late.
pub fn solve(p: &Problem, greedy: &Outcome, deadline: Instant, gap: f64, opts: Options) -> Result<Run, SolveError> {
    let mut log = Log::default();
    if Instant::now() >= deadline {
        return Ok(log.out_of_time("the aggregated relaxation"));
    }

    // The aggregated relaxation's model (its structure serves the size-class bound too).
    let t0 = Instant::now();
    let mut agg = Master::aggregate(p);
    trace_model("aggregate", || agg.dump(true, 0));
    if let Some((h, why)) = agg.fams.host_spread.narrower_than_rule(&agg.s) {
        log.note.push_str(&format!("hostname spread {h}: {why}, so only the size-class bound bounds every plan; "));
        log.model_narrower = true;
    }
    if Instant::now() >= deadline {
        return Ok(log.out_of_time("the aggregated relaxation"));
    }
    let mut center = aggregated_relaxation(&agg, deadline, opts, &mut log)?;
    log.phase("aggregated-relaxation", t0);
    let aggregated = t0.elapsed();

    // The size-class bound: whole nodes, so it sees what integer node sizes leave over. Only when the
    // aggregated bound does not already prove the target gap for the greedy plan.
    let greedy_objective = crate::solve::objective(p, greedy).total();
    let proven = |log: &Log| log.lower_bound.is_some_and(|b| greedy_objective - b <= gap * greedy_objective.abs());
    if proven(&log) {
        return Ok(log.without_mip("the aggregated relaxation proves the greedy plan within the target gap"));
    }
    if Instant::now() < deadline {
        size_class_bound(p, &agg, greedy, deadline, opts, &mut log)?;
        if proven(&log) {
            return Ok(log.without_mip("the size-class bound proves the greedy plan within the target gap"));
        }
    }
    // Its bound would not be reported when the model is narrower than the rules.
    let mut agg_solution = None;
    if Instant::now() < deadline && !log.model_narrower {
        agg.add_fit_cuts();
        agg_solution = aggregated_integer_bound(&agg, deadline, gap, opts, &mut log)?;
        if proven(&log) {
            return Ok(log.without_mip("the aggregated integer program proves the greedy plan within the target gap"));
        }
    }

    if Instant::now() >= deadline {
        return Ok(log.out_of_time("the pattern model"));
    }
    // The pattern model of the batch takes about as long to build as the aggregated relaxation took to
    // build and solve (250 ms against 218 ms at karpenter-5000). With less than twice that left it would
    // end past the deadline with nothing left for the integer program (1.16 s for a 1 s budget there).
    if deadline.saturating_duration_since(Instant::now()) < aggregated * PATTERN_MODEL_ROOM {
        return Ok(log.without_mip("too little budget was left to build the pattern model"));
    }
    let t1 = Instant::now();
    let mut m = Master::new(p);
    let mut start = warm_start(&mut m, greedy);
    let start_greedy = start.is_some();
    let packed = agg_solution.and_then(|sol| packed_start(&mut m, &agg, &sol, greedy_objective, &mut log));
    let complete = initial_columns(&mut m, center.as_deref());
    log.phase("milp-model", t1);
    if let Some(mut pk) = packed {
        pk.start.resize(m.model.n_cols(), 0.0);
        // Within the target gap of the bound: nothing the integer program could find would be proven
        // better, so the packed plan is the answer.
        if log.lower_bound.is_some_and(|b| pk.objective - b <= gap * pk.objective.abs()) {
            return Ok(packed_answer(&m, &pk, log, start_greedy, complete));
        }
        if start.is_none() || pk.objective < greedy_objective {
            log.note.push_str("the integer program starts from it; ");
            start = Some(pk.start);
        }
    }
    trace_model("initial", || format!("{}{}", m.dump(true, 0), dump_start(start.as_deref())));
    if Instant::now() >= deadline {
        return Ok(log.out_of_time("the integer program"));
    }

    // Column generation (skipped when the enumeration already gave every column): at most about half of
    // the remaining time.
    let t2 = Instant::now();
    let rounds = if complete { 0 } else { column_generation(&mut m, &mut center, t2 + deadline.saturating_duration_since(t2).mul_f64(0.5), opts, &mut log)? };
    log.phase("column-generation", t2);

    // The integer program over the generated columns.
    let t3 = Instant::now();
    let start_vec = start.map(|mut s| {
        s.resize(m.model.n_cols(), 0.0);
        s
    });
    trace_model("mip", || format!("{}{}", m.dump(true, 0), dump_start(start_vec.as_deref())));
    let mip = integer_program(&m, start_vec.as_deref(), deadline, gap, opts, &mut log)?;
    log.phase("integer-program", t3);
    let outcome = if mip.has_solution { Some(decode(&m, &mip.columns)) } else { None };
    if complete {
        log.note.push_str("every pattern enumerated; ");
        if let Some(db) = mip.dual_bound.filter(|b| b.is_finite()) {
            log.raise_model_bound(db);
        }
    }
    Ok(Run {
        outcome,
        lower_bound: log.lower_bound,
        mip_status: Some(mip.status),
        mip_objective: mip.has_solution.then_some(mip.objective),
        start_accepted: start_greedy,
        columns: m.patterns.len(),
        cg_rounds: rounds,
        complete,
        phases: log.phases,
        note: log.note,
    })
}

/// The run that ends with the packed aggregated solution `pk`, within the target gap of the bound: the
/// integer program could find nothing proven better.
fn packed_answer(m: &Master, pk: &disaggregate::Packed, mut log: Log, start_greedy: bool, complete: bool) -> Run {
    log.note.push_str("the packed aggregated solution is within the target gap; ");
    Run {
        outcome: Some(decode(m, &pk.start)),
        lower_bound: log.lower_bound,
        mip_status: None,
        mip_objective: Some(pk.objective),
        start_accepted: start_greedy,
        columns: m.patterns.len(),
        cg_rounds: 0,
        complete,
        phases: log.phases,
        note: log.note,
    }
}

/// The aggregated integer solution packed into nodes ([`disaggregate`]), as columns of `m` and, if it
/// holds every row, a start; noted in the log.
fn packed_start(m: &mut Master, agg: &Master, sol: &[f64], greedy_objective: f64, log: &mut Log) -> Option<disaggregate::Packed> {
    let t = Instant::now();
    let packed = disaggregate::pack(m, agg, sol);
    let agg_objective = agg.model.objective(sol);
    match &packed {
        Some(pk) => log.note.push_str(&format!(
            "aggregated integer solution at {agg_objective:.4} packed at {:.4}{} ({}); ",
            pk.objective,
            if pk.extra_nodes > 0 { format!(" with {} more nodes", pk.extra_nodes) } else { String::new() },
            if pk.objective < greedy_objective { "below greedy" } else { "not below greedy" }
        )),
        None => log.note.push_str("the aggregated integer solution did not pack; "),
    }
    // The master's rows hold the plan's final state; kube-scheduler binds one pod at a time. A packing
    // the bind-order search cannot order (mixed-3's web pods, spread maxSkew 1 over zones and over a
    // capacity split, at a 60 s budget) would be repaired greedily at a far higher cost than column
    // generation finds, so it is neither the answer nor the start.
    let packed = packed.filter(|pk| {
        let unordered = super::order_placements(m.p, &decode(m, &pk.start)).1.len();
        if unordered > 0 {
            log.note.push_str(&format!("no bind order found for {unordered} of its pods, so it is dropped; "));
        }
        unordered == 0
    });
    log.phase("pack-aggregated", t);
    packed
}

/// The aggregated relaxation: a lower bound valid for the whole model, and stable duals on the rows
/// it shares with the pattern master (the first dual center of column generation), if it solved.
fn aggregated_relaxation(agg: &Master, deadline: Instant, opts: Options, log: &mut Log) -> Result<Option<Vec<f64>>, SolveError> {
    let agg_left = deadline.saturating_duration_since(Instant::now()).mul_f64(AGGREGATE_SHARE);
    let agg_sol = highs_lp::solve_lp(agg, opts, agg_left)?;
    let agg_bound = (agg_sol.status == MipStatus::Optimal).then_some(agg_sol.objective);
    match agg_bound {
        Some(b) => log.raise_model_bound(b),
        None => log.note.push_str(&format!("aggregated relaxation ended {:?}; ", agg_sol.status)),
    }
    Ok((agg_sol.row_duals.len() >= agg.shared_rows && agg_bound.is_some()).then(|| agg_sol.row_duals[..agg.shared_rows].to_vec()))
}

/// What the aggregated relaxation's integer program ([`aggregated_integer`]) proved.
#[derive(Debug)]
pub struct IntegerBound {
    /// HiGHS's dual bound, a lower bound on every plan's objective; None when HiGHS had none or its
    /// answer broke the model.
    pub bound: Option<f64>,
    pub status: MipStatus,
    /// The row or bound HiGHS's answer broke, or how its reported objective disagrees with its
    /// solution's, if it did (the bound is then void).
    pub broken: Option<String>,
    /// HiGHS's solution (columns of the aggregated model), if it had one that holds.
    pub solution: Option<Vec<f64>>,
}

/// The aggregated relaxation `agg` ([`Master::aggregate`]) as an integer program, for at most `time`:
/// whole nodes per configuration, whole pods per group, the spread and affinity binaries binary. Every
/// plan is one of its points, so HiGHS's dual bound, even at its time limit, bounds every plan. The LP
/// value spreads a node's fixed cost (the NodePool-weight term, `perNode`) over fractions of nodes:
/// forty pods that a spread needs in a domain only one NodePool offers cost a fraction of that pool's
/// per-node term in the LP and a whole node here. A solution that breaks a row of the model, or whose
/// objective is not the one HiGHS reports, voids the bound, as in the integer program.
pub fn aggregated_integer(agg: &Master, time: Duration, gap: f64, opts: Options) -> Result<IntegerBound, SolveError> {
    let mut sol = highs_lp::solve_model_mip(&agg.model, "aggregated integer program", opts, time, gap, None, true)?;
    // HiGHS's presolve has had bugs that cut off feasible points (its reported objective then disagrees
    // with its own solution's): a bound from such a run could claim a proof that does not hold.
    let broken = if sol.has_solution { check_answer(agg, &mut sol) } else { None };
    let bound = sol.dual_bound.filter(|b| b.is_finite() && broken.is_none());
    let solution = (sol.has_solution && broken.is_none()).then_some(sol.columns);
    Ok(IntegerBound { bound, status: sol.status, broken, solution })
}

/// [`aggregated_integer`] on its share of what is left of the budget; returns its solution, if any.
fn aggregated_integer_bound(agg: &Master, deadline: Instant, gap: f64, opts: Options, log: &mut Log) -> Result<Option<Vec<f64>>, SolveError> {
    let t = Instant::now();
    let share = deadline.saturating_duration_since(t).mul_f64(AGGREGATE_MIP_SHARE);
    let ib = aggregated_integer(agg, share, gap, opts)?;
    match (ib.bound, ib.broken) {
        (Some(b), _) => {
            log.raise_model_bound(b);
            log.note.push_str(&format!("aggregated integer bound {b:.4} ({:?}); ", ib.status));
        }
        (None, Some(why)) => log.note.push_str(&format!("the aggregated integer program's answer does not hold ({why}), no bound from it; ")),
        (None, None) => log.note.push_str(&format!("aggregated integer program ended {:?} without a bound; ", ib.status)),
    }
    log.phase("aggregated-integer-bound", t);
    Ok(ib.solution)
}

/// The size-class bound ([`bound`]) on its share of what is left of the budget.
fn size_class_bound(p: &Problem, agg: &Master, greedy: &Outcome, deadline: Instant, opts: Options, log: &mut Log) -> Result<(), SolveError> {
    let tb = Instant::now();
    let share = deadline.saturating_duration_since(tb).mul_f64(SIZE_BOUND_SHARE);
    let sb = bound::size_bound(p, &agg.s, &agg.fams, greedy, tb + share, opts)?;
    tracing::debug!(bound = ?sb.bound, items = sb.items, rounds = sb.rounds, columns = sb.columns, converged = sb.converged, "size bound");
    if let Some(b) = sb.bound {
        log.raise_bound(b);
    }
    log.note.push_str(&format!("size-class bound {} after {} rounds{}; ", sb.bound.map_or("none".to_string(), |b| format!("{b:.4}")), sb.rounds, if sb.converged { ", converged" } else { "" }));
    log.phase("size-bound", tb);
    Ok(())
}

/// The first pattern columns. Few possible patterns: all of them, and the integer program is then the
/// whole model, so HiGHS's bound is a proof (returns true). Otherwise seed columns and the patterns
/// that price out under the aggregated relaxation's duals `center`; column generation adds the rest.
fn initial_columns(m: &mut Master, center: Option<&[f64]>) -> bool {
    match pricing::enumerate(m, ENUMERATION_LIMIT) {
        Some(all) => {
            for pat in all {
                m.add_pattern(pat);
            }
            true
        }
        None => {
            seed_columns(m);
            if let Some(y) = center {
                let vals = pricing::values(m, y);
                for (_, pat) in pricing::price(m, y, &vals, 5) {
                    m.add_pattern(pat);
                }
            }
            false
        }
    }
}

/// Column generation on the LP relaxation until no column prices out or `cg_deadline`; returns the
/// number of LP rounds. Prices with duals smoothed towards `center` (Wentges), which it moves.
fn column_generation(m: &mut Master, center: &mut Option<Vec<f64>>, cg_deadline: Instant, opts: Options, log: &mut Log) -> Result<usize, SolveError> {
    let mut lp = highs_lp::Lp::new(m, opts);
    let mut rounds = 0;
    loop {
        let left = cg_deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            log.note.push_str("column generation stopped at its time share; ");
            break;
        }
        let sol = lp.solve(m, left)?;
        if sol.status != MipStatus::Optimal {
            log.note.push_str(&format!("LP relaxation ended {:?}; ", sol.status));
            break;
        }
        rounds += 1;
        let cols = improving_columns(m, center, &sol.row_duals);
        tracing::debug!(round = rounds, lp = sol.objective, columns = cols.len(), "column generation round");
        if cols.is_empty() {
            break;
        }
        let before = m.model.n_cols();
        for pat in cols {
            m.add_pattern(pat);
        }
        trace_model(&format!("round-{rounds}"), || m.dump(false, before));
        if m.model.n_cols() == before {
            break;
        }
    }
    Ok(rounds)
}

/// Prices with smoothed duals and keeps the columns that improve under the current duals `y`. If none
/// does (a mis-price), prices with the current duals alone.
fn improving_columns(m: &Master, center: &mut Option<Vec<f64>>, y: &[f64]) -> Vec<Pattern> {
    let mut cols: Vec<Pattern> = Vec::new();
    if let Some(c) = center.as_ref() {
        let smoothed: Vec<f64> = c.iter().zip(y).map(|(a, b)| SMOOTHING * a + (1.0 - SMOOTHING) * b).collect();
        let vals = pricing::values(m, &smoothed);
        cols = pricing::price(m, &smoothed, &vals, 3).into_iter().map(|(_, pat)| pat).filter(|pat| reduced_cost(m, pat, y) < -1e-7).collect();
        *center = Some(smoothed);
    }
    if cols.is_empty() {
        let vals = pricing::values(m, y);
        cols = pricing::price(m, y, &vals, 3).into_iter().map(|(_, pat)| pat).collect();
    }
    cols
}

/// The integer program over the generated columns, started from `start`, with its answer checked.
fn integer_program(m: &Master, start: Option<&[f64]>, deadline: Instant, gap: f64, opts: Options, log: &mut Log) -> Result<highs_lp::Solved, SolveError> {
    // HiGHS checks its clock between nodes and overshoots by up to a tenth (karpenter-1000: 410 ms
    // used of 370 ms given); it gets nine tenths of what is left, and the decode needs a little too.
    let left = deadline.saturating_duration_since(Instant::now()).mul_f64(MIP_SHARE);
    let mut mip = highs_lp::solve_mip(m, opts, left, gap, start)?;
    tracing::debug!(status = ?mip.status, objective = mip.objective, dual_bound = ?mip.dual_bound, has_solution = mip.has_solution, "MIP");
    // HiGHS given a start solution has answered `Optimal` with the start's solution but an objective and
    // dual bound below it (a 6-pod batch: the start at 0.224 reported as 0.144; without the start it
    // finds the true optimum 0.184). Every answer is checked: the solution against the rows, and its
    // objective recomputed. A broken answer is solved again without the start.
    if mip.has_solution
        && let Some(why) = check_answer(m, &mut mip)
    {
        log.note.push_str(&format!("HiGHS's answer did not hold ({why}); "));
        // The same share as the first solve: HiGHS's overshoot on a large model came on top of the
        // budget (50,000 pods at 30 s: 33.8 s).
        let left = deadline.saturating_duration_since(Instant::now()).mul_f64(MIP_SHARE);
        if left >= RESOLVE_MIN {
            log.note.push_str("solved again without the greedy start; ");
            let mut again = highs_lp::solve_mip(m, opts, left, gap, None)?;
            if again.has_solution
                && let Some(why) = check_answer(m, &mut again)
            {
                log.note.push_str(&format!("nor without it ({why}); "));
            }
            if !mip.has_solution || again.has_solution && again.objective < mip.objective {
                mip = again;
            }
        } else if mip.has_solution {
            log.note.push_str("its solution is kept with the recomputed objective; ");
        }
    }
    Ok(mip)
}

/// Turns integer column values into a plan: pods of each class go to existing nodes, then to new
/// nodes pattern by pattern, the rest stays pending.
fn decode(m: &Master, x: &[f64]) -> Outcome {
    let p = m.p;
    let mut next: Vec<usize> = vec![0; m.s.n.len()];
    let mut o = Outcome::default();
    let take = |c: Class, next: &mut Vec<usize>| {
        let pods = &p.classes[c.ix()].pods;
        let id = pods.get(next[c.ix()]).copied();
        next[c.ix()] += 1;
        id
    };
    for (j, col) in m.model.columns() {
        let v = x[j.ix()].round() as i64;
        if v <= 0 {
            continue;
        }
        if let ColKind::Assign { class, target } = col.kind {
            for _ in 0..v {
                if let Some(id) = take(class, &mut next) {
                    o.placements.push((id, Target::Existing(m.s.targets[target.ix()])));
                }
            }
        }
    }
    for (j, col) in m.model.columns() {
        let v = x[j.ix()].round() as i64;
        if v <= 0 {
            continue;
        }
        if let ColKind::Pattern(pi) = col.kind {
            let pat: &Pattern = &m.patterns[pi.ix()];
            for _ in 0..v {
                let k = o.new_nodes.len();
                o.new_nodes.push(pat.config.ix());
                for &(c, cnt) in &pat.counts {
                    for _ in 0..cnt {
                        if let Some(id) = take(c, &mut next) {
                            o.placements.push((id, Target::New(k)));
                        }
                    }
                }
            }
        }
    }
    for c in m.s.classes() {
        while let Some(id) = take(c, &mut next) {
            o.unschedulable.push((id, crate::semantics::Reject::new(crate::semantics::Plugin::NodePool, "left pending by the integer program")));
        }
    }
    super::resize::remove_empty_nodes(&mut o);
    o
}
