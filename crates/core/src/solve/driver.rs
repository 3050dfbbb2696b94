//! The solver driver: greedy plan → MILP under a time budget, started from the greedy plan → replay →
//! the better of the two. It owns the clock and every fallback decision; the encoding never reads the
//! clock.
//!
//! * The greedy plan is the cheaper of two passes (packing order, then size order while the budget
//!   allows); the MILP phase gets what is left of the budget after them.
//! * Its plan is shrunk (`resize::downsize`), ordered and replayed through kube-scheduler's filters,
//!   then improved locally (`improve::shrink`).
//!   If HiGHS fails, finds no integer solution, or its plan does not replay, the greedy plan is
//!   returned with status `fallback` and the reason.
//! * The returned plan never costs more than the greedy plan under the same weights.

use std::time::{Duration, Instant};

use super::milp::{self, MipStatus, Options};
use super::problem::{Problem, ProblemError};
use super::{Outcome, Placements, Target, greedy, improve, new_node_name, objective, order_placements, resize, verify};
use crate::domain::Cluster;
use crate::domain::catalog::Catalog;
use crate::domain::labels::keys;
use crate::domain::node::Node;
use crate::plan::{Phase, SolverReport, Status};
use crate::weights::Weights;

#[derive(Clone, Copy, Debug)]
pub struct DriverOptions {
    pub budget: Duration,
    /// Target relative gap: stop when (objective − lower bound) / objective ≤ gap.
    pub gap: f64,
    pub threads: u32,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions { budget: Duration::from_secs(1), gap: 0.01, threads: 1 }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Which planner: the MILP on HiGHS (started from and falling back to the greedy plan), or the greedy
/// planner alone. Scenario files and command lines spell it `milp` / `greedy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Solver {
    Milp,
    Greedy,
}

impl Solver {
    pub fn as_str(self) -> &'static str {
        match self {
            Solver::Milp => "milp",
            Solver::Greedy => "greedy",
        }
    }
}

/// A planner and its settings: the one type the command line, the benchmark, the simulator and the
/// controller plan with. `time_budget`, `gap` and `threads` are the MILP's; the greedy planner ignores them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Planner {
    pub solver: Solver,
    /// Time budget of the whole MILP driver (problem build, greedy, improvement, HiGHS), counted from the
    /// start of the problem build (docs/formats.md, Budget).
    pub time_budget: Duration,
    /// Target relative gap: stop when (objective − lower bound) / objective ≤ gap.
    pub gap: f64,
    /// HiGHS threads (one value per process).
    pub threads: u32,
}

impl Default for Planner {
    fn default() -> Self {
        Planner { solver: Solver::Milp, time_budget: Duration::from_secs(1), gap: 0.01, threads: 1 }
    }
}

impl Planner {
    pub fn milp() -> Self {
        Planner::default()
    }

    pub fn greedy() -> Self {
        Planner { solver: Solver::Greedy, ..Planner::default() }
    }

    fn driver_options(&self) -> DriverOptions {
        DriverOptions { budget: self.time_budget, gap: self.gap, threads: self.threads }
    }
}

impl From<Solver> for Planner {
    fn from(solver: Solver) -> Self {
        Planner { solver, ..Planner::default() }
    }
}

/// Builds a snapshot's problem and plans it: what `stowage plan`, the simulator and the controller
/// share. The report's first phase is the build. The MILP driver's budget starts before the build, so
/// the whole call ends close to the budget (the build, the replay of the greedy plan and HiGHS's own
/// overrun aside; docs/formats.md, Budget).
pub fn build_and_plan<'a>(cluster: &'a Cluster, catalog: &Catalog, weights: &'a Weights, planner: Planner) -> Result<(Problem<'a>, Outcome, SolverReport), ProblemError> {
    let t0 = Instant::now();
    let problem = Problem::new(cluster, catalog, weights)?;
    let build = t0.elapsed();
    let (o, mut report) = plan_built(&problem, planner, t0);
    report.phases.insert(0, Phase { name: "problem".into(), time_ms: ms(build) });
    report.time_ms += ms(build);
    Ok((problem, o, report))
}

/// Plans a problem already built, with the MILP's budget counted from `t0` (the start of its build, or
/// of whatever else the budget covers); what [`build_and_plan`] does after the build.
pub(crate) fn plan_built(problem: &Problem, planner: Planner, t0: Instant) -> (Outcome, SolverReport) {
    let (o, mut report) = match planner.solver {
        Solver::Milp => plan_since(problem, planner.driver_options(), t0),
        Solver::Greedy => plan_greedy(problem),
    };
    let deadline = t0 + planner.time_budget;
    let spent = || planner.solver == Solver::Milp && Instant::now() >= deadline;
    let t = Instant::now();
    let (o, rounds) = queue_repair(problem, o, &spent);
    if rounds > 0 {
        let obj = objective(problem, &o).total();
        report.objective = Some(obj);
        if report.lower_bound.is_some() {
            report.gap = judge(obj, report.lower_bound, false, 0.0).0;
        }
        let sep = if report.detail.is_empty() { "" } else { "; " };
        report.detail = format!("{}{sep}{rounds} pod(s) left pending out of kube-scheduler's queue order were bound and the pods after them replanned", report.detail);
        report.phases.push(Phase { name: "queue-order".into(), time_ms: ms(t.elapsed()) });
        report.time_ms += ms(t.elapsed());
    }
    (o, report)
}

/// The greedy planner alone, with the report every command shows.
pub(crate) fn plan_greedy(p: &Problem) -> (Outcome, SolverReport) {
    let t = Instant::now();
    let o = greedy::plan(p);
    let time_ms = ms(t.elapsed());
    let report = SolverReport {
        name: "greedy".into(),
        status: Status::Heuristic,
        detail: String::new(),
        time_ms,
        objective: Some(objective(p, &o).total()),
        lower_bound: None,
        gap: None,
        phases: vec![Phase { name: "greedy".into(), time_ms }],
    };
    (o, report)
}

/// The second greedy pass runs only if at least this many times the first pass's time is left: it
/// takes up to about twice as long as the first (1.8x at 50,000 pods, Karpenter's shapes), and the
/// bounds after it need time too. With the second pass allowed on as much as the first took, a
/// 50,000-pod batch under an 8 s budget spent it all on the two passes and proved no gap; the size-order
/// plan has not beaten the packing-order plan on the large Karpenter batches.
const SECOND_PASS_ROOM: f64 = 3.0;

/// How much longer than the budget the placement may run before it is cut, as a share of the budget:
/// half of the 10 % the whole call may overrun, the other half for what follows the placement beyond
/// [`REPLAY_SHARE`] (settling, the objective, the report) and the clock's noise.
const CUT_GRACE: f64 = 0.05;

/// The time kept for the replay of the greedy placement, as a share of the time the placement has
/// taken so far: the replay runs every placed pod's filters once more, about a seventh of the careful
/// placement's time at 100,000 pods of Karpenter's shapes (0.45-0.5 s against 3.2 s) and less for the
/// fast pass; a quarter leaves room for a placement that was mostly fast.
const REPLAY_SHARE: f64 = 0.25;

/// The greedy plan in the packing order (`greedy::plan`), then in Karpenter's size order
/// (`greedy::Order::Size`) and in the hosts order (`greedy::Order::Hosts`, where it differs from the
/// packing order), each if what is left of the budget is at least [`SECOND_PASS_ROOM`] times what
/// the first pass took; the cheapest plan, its objective, one phase per pass and how many pods the fast
/// pass placed. Past the deadline the placement goes on with `greedy::Greedy::place_fast`, and it is
/// cut (the rest of the batch deferred) when the budget plus [`CUT_GRACE`] would not hold its replay
/// ([`REPLAY_SHARE`]) any more.
fn greedy_portfolio(p: &Problem, t0: Instant, budget: Duration) -> (Outcome, f64, Vec<Phase>, usize) {
    let deadline = t0 + budget;
    let end = deadline + budget.mul_f64(CUT_GRACE);
    let spent = || Instant::now() >= deadline;
    let start = Instant::now();
    let cut = || {
        let now = Instant::now();
        now + now.duration_since(start).mul_f64(REPLAY_SHARE) >= end
    };
    let (g, fast) = greedy::plan_within(p, greedy::Order::Packing, &spent, &cut);
    let g_obj = objective(p, &g).total();
    let first = start.elapsed();
    let mut phases = vec![Phase { name: "greedy".into(), time_ms: ms(first) }];
    if p.batch.is_empty() || !g.deferred.is_empty() {
        return (g, g_obj, phases, fast);
    }
    let (mut best, mut best_obj) = (g, g_obj);
    for (order, name) in [(greedy::Order::Size, "greedy-size-order"), (greedy::Order::Hosts, "greedy-hosts-order")] {
        if deadline.saturating_duration_since(Instant::now()) < first.mul_f64(SECOND_PASS_ROOM) {
            break;
        }
        // The hosts order only where it differs from the packing order: some class has a hostname spread.
        if order == greedy::Order::Hosts && greedy::class_order(p, order) == greedy::class_order(p, greedy::Order::Packing) {
            continue;
        }
        let t = Instant::now();
        let (alt, _) = greedy::plan_within(p, order, &spent, &cut);
        let alt_obj = objective(p, &alt).total();
        phases.push(Phase { name: name.into(), time_ms: ms(t.elapsed()) });
        tracing::debug!(?order, objective = alt_obj, nodes = alt.new_nodes.len(), kept = best_obj, "greedy portfolio pass");
        if beats(alt_obj, alt.new_nodes.len(), best_obj, best.new_nodes.len()) {
            (best, best_obj) = (alt, alt_obj);
        }
    }
    (best, best_obj, phases, fast)
}

/// Whether a plan of objective `a` with `a_nodes` new nodes beats the plan in hand (`b`, `b_nodes`):
/// cheaper beyond float noise, or as cheap with fewer nodes (behaviour 11). The objective's own
/// tie-break (`weights::node_tie_break`) can be finer than the noise allowed here, so the node count is
/// compared explicitly; on a full tie the plan in hand stays (a stable choice).
fn beats(a: f64, a_nodes: usize, b: f64, b_nodes: usize) -> bool {
    let tol = 1e-9 * (1.0 + b.abs());
    a < b - tol || (a <= b + tol && a_nodes < b_nodes)
}

/// The relative gap of `obj` over the bound `lb`, and the status it earns.
fn judge(obj: f64, lb: Option<f64>, timed_out: bool, target_gap: f64) -> (Option<f64>, Status) {
    let gap = lb.map(|b| if obj.abs() < 1e-12 { 0.0 } else { ((obj - b) / obj.abs()).max(0.0) });
    let status = match gap {
        Some(x) if x <= 1e-6 => Status::Optimal,
        Some(x) if x <= target_gap => Status::GapReached,
        _ if timed_out => Status::TimeLimit,
        _ => Status::Heuristic,
    };
    (gap, status)
}

/// The MILP driver with the budget counted from now.
pub fn plan(p: &Problem, opts: DriverOptions) -> (Outcome, SolverReport) {
    plan_since(p, opts, Instant::now())
}

/// The MILP driver with the budget counted from `t0` (before the problem build, in [`build_and_plan`]).
/// The report's time is counted from the start of this call (the caller adds the build).
fn plan_since(p: &Problem, opts: DriverOptions, t0: Instant) -> (Outcome, SolverReport) {
    let start = Instant::now();
    let deadline = t0 + opts.budget;
    let (g, g_obj, mut phases, fast) = greedy_portfolio(p, t0, opts.budget);
    let cut = match (fast, g.deferred.len()) {
        (0, 0) => String::new(),
        (f, 0) => format!("; the budget ran out during the greedy placement: {f} pods placed by its fast pass, no improvement, no MILP"),
        (f, d) => format!("; the budget ran out during the greedy placement: {f} pods placed by its fast pass, {d} pods deferred to the next batch, no improvement, no MILP"),
    };
    let report = |status: Status, detail: String, obj: f64, lb: Option<f64>, phases: Vec<Phase>| {
        let (gap, _) = judge(obj, lb, false, 0.0);
        SolverReport { name: "milp".into(), status, detail: format!("{detail}{cut}"), time_ms: ms(start.elapsed()), objective: Some(obj), lower_bound: lb, gap, phases }
    };
    if p.batch.is_empty() {
        return (g, report(Status::Optimal, "no pending pods".into(), 0.0, Some(0.0), phases));
    }
    if !g.deferred.is_empty() {
        return (g, report(Status::TimeLimit, format!("greedy {g_obj:.6}"), g_obj, None, phases));
    }
    if g_obj <= 0.0 {
        // Every term of the objective is non-negative (prices, and weights validated so): a plan that
        // costs nothing, such as every pod on existing room, is optimal.
        return (g, report(Status::Optimal, "greedy 0: every objective term is non-negative, so nothing can be cheaper".into(), 0.0, Some(0.0), phases));
    }
    let run = match milp::solve(p, &g, deadline, opts.gap, Options { threads: opts.threads, seed: 0 }) {
        Ok(r) => r,
        Err(e) => return (g, report(Status::Fallback, format!("MILP failed: {e}"), g_obj, None, phases)),
    };
    phases.extend(run.phases.iter().map(|(n, t)| Phase { name: n.clone(), time_ms: *t }));
    let lb = run.lower_bound.map(|lb| lb.min(g_obj));
    let summary = if run.mip_status.is_none() {
        run.note.trim_end_matches("; ").to_string()
    } else {
        format!(
            "{} columns, {} column-generation rounds, MIP {:?}{}{}",
            run.columns,
            run.cg_rounds,
            run.mip_status,
            if run.start_accepted { ", started from greedy" } else { ", greedy start not representable" },
            if run.note.is_empty() { String::new() } else { format!("; {}", run.note.trim_end_matches("; ")) }
        )
    };
    let Some(mut o) = run.outcome else {
        if run.mip_status.is_none() {
            // The budget ran out before the integer program, or a bound proved the greedy plan within
            // the target gap: the greedy plan, with the bound if any.
            let (_, status) = judge(g_obj, lb, true, opts.gap);
            return (g, report(status, format!("greedy {g_obj:.6}; {summary}"), g_obj, lb, phases));
        }
        return (g, report(Status::Fallback, format!("no integer solution within the budget ({summary})"), g_obj, lb, phases));
    };
    // An integer solution no cheaper than the start is the greedy plan again, up to which pod of a class
    // goes where: keep the greedy plan and its bind order.
    if run.mip_objective.is_some_and(|v| !beats(v, o.new_nodes.len(), g_obj, g.new_nodes.len())) {
        let timed_out = run.mip_status == Some(MipStatus::TimeLimit) || Instant::now() >= deadline;
        let (_, status) = judge(g_obj, lb, timed_out, opts.gap);
        return (g, report(status, format!("greedy {g_obj:.6}, MILP no cheaper; the greedy plan is kept; {summary}"), g_obj, lb, phases));
    }
    let t3 = Instant::now();
    resize::downsize(p, &mut o);
    let (ordered, failures) = order_placements(p, &o);
    let mut repaired = String::new();
    if failures.is_empty() {
        o.placements = ordered;
    } else {
        // Some pods only fit in an order the search did not find: keep what replays, place the rest
        // greedily on top of it.
        let (id, r) = &failures[0];
        if tracing::enabled!(tracing::Level::DEBUG) {
            debug_replay_failures(p, &o, &ordered, &failures);
        }
        // The repair plans the batch greedily again: only while budget is left.
        let fixed = if Instant::now() < deadline { repair(p, &o, &ordered, greedy::Order::Packing, &|| Instant::now() >= deadline) } else { None };
        match fixed {
            Some(fixed) => {
                repaired = format!("; {} pods did not replay (first {}: {r}) and were placed greedily", failures.len(), p.pod(*id).key());
                o = fixed;
            }
            None => {
                phases.push(Phase { name: "replay".into(), time_ms: ms(t3.elapsed()) });
                let late = if Instant::now() >= deadline { "; the budget was spent before a repair" } else { "" };
                return (g, report(Status::Fallback, format!("the MILP plan does not replay ({} pods; {}: {r}{late}) ({summary})", failures.len(), p.pod(*id).key()), g_obj, lb, phases));
            }
        }
    }
    // The same local improvement the greedy plans get.
    if let Some(better) = improve::shrink_within(p, &o, &|| Instant::now() >= deadline) {
        o = better;
    }
    phases.push(Phase { name: "replay".into(), time_ms: ms(t3.elapsed()) });
    // Reasons for pods left pending come from the greedy pass where it agrees.
    for (id, r) in &mut o.unschedulable {
        if let Some((_, gr)) = g.unschedulable.iter().find(|(gid, _)| gid == id) {
            *r = gr.clone();
        }
    }
    let m_obj = objective(p, &o).total();
    let (best, obj, kept) = if beats(m_obj, o.new_nodes.len(), g_obj, g.new_nodes.len()) { (o, m_obj, "") } else { (g, g_obj, "; the greedy plan is as good, kept") };
    let lb = lb.map(|b| b.min(obj));
    let timed_out = Instant::now() >= deadline || run.mip_status == Some(MipStatus::TimeLimit);
    let (_, status) = judge(obj, lb, timed_out, opts.gap);
    let detail = format!("greedy {g_obj:.6}, MILP {m_obj:.6}{kept}{repaired}; {summary}");
    (best, report(status, detail, obj, lb, phases))
}

/// At most this many rounds of [`queue_repair`]: each round plans the pods after one pod greedily
/// again, so the cap bounds the work on a batch where many pods are left pending out of order.
const QUEUE_ROUNDS: usize = 16;

/// Makes the pods left pending the ones kube-scheduler's queue would leave (`semantics::queue`):
/// while some pending pod P would be bound at its turn (a node of the plan takes it with only the
/// pods before it in the queue placed), the pods before P keep their places, P is bound to that node,
/// and the pods after it are planned greedily on top, in queue order ([`repair`] with
/// `greedy::Order::Queue`, so that one round usually leaves pending only the latest pods; the plan's
/// nodes stay, more may open). The pods before P and their pending set are unchanged, so the next
/// such pod comes later in the queue: the loop ends. Pods with a spread over another key than the
/// hostname are left as the planner left them (its wider domain universe is the more careful rule;
/// ARCHITECTURE.md, Spread domains). A round whose result does not replay is dropped (the plan as it
/// was is kept), and so are rounds past [`QUEUE_ROUNDS`] and, but the first, past the budget. Returns
/// the plan and the rounds done.
fn queue_repair<'a>(p: &Problem<'a>, mut o: Outcome, spent: super::Spent) -> (Outcome, usize) {
    let mut rounds = 0;
    // The first round runs even when the budget is spent (its greedy pass is then the fast pass, bounded
    // work per pod): who stays pending is a rule of the batch, not a matter of cost.
    while rounds < QUEUE_ROUNDS && !o.unschedulable.is_empty() && (rounds == 0 || !spent()) {
        let (mut fs, ix) = super::scheduler_state(p, &o.new_nodes);
        let node_of = |t: Target| match t {
            Target::Existing(n) => n,
            Target::New(k) => ix[k],
        };
        let placed: Vec<(usize, usize)> = o.placements.iter().map(|&(id, t)| (id.ix(), node_of(t))).collect();
        // A pod with a spread over another key than the hostname is judged by stowage's wider domain
        // universe (NodePool domains count), more carefully than by kube-scheduler's: it is no
        // candidate here, where only kube-scheduler's filters are run.
        // One pod per class, its earliest: the others of its class are alike to every filter and
        // come later, with more pods bound before them, so this bounds the scan by the classes with
        // pods pending rather than by the pending pods.
        let mut seen = std::collections::BTreeSet::new();
        let mut pending: Vec<usize> = o.unschedulable.iter().map(|(id, _)| id.ix()).filter(|&i| p.cluster.pods[i].spread.iter().all(|c| c.key == keys::HOSTNAME)).collect();
        crate::semantics::queue::sort(&mut pending, |i| i, &p.cluster.pods);
        pending.retain(|&i| seen.insert(p.class_of.get(&crate::domain::pod::PodId(i as u32)).copied()));
        let existing = p.cluster.nodes.len();
        let usable = |n: usize| n >= existing || p.existing.contains(&n);
        let found = crate::semantics::queue::out_of_order(&p.cluster.pods, &mut fs, &placed, &pending, &usable);
        let Some(first) = found.first() else { break };
        let target = if first.node < existing { Target::Existing(first.node) } else { Target::New(ix.iter().position(|&i| i == first.node).expect("a new node of the plan")) };
        let pod = crate::domain::pod::PodId(first.pod as u32);
        let key = crate::semantics::queue::key(p.pod(pod));
        let kept: Placements = o.placements.iter().filter(|(id, _)| crate::semantics::queue::key(p.pod(*id)) < key).copied().chain(std::iter::once((pod, target))).collect();
        let Some(mut fixed) = repair(p, &o, &kept, greedy::Order::Queue, spent) else { break };
        let before = fixed.clone();
        resize::downsize(p, &mut fixed);
        o = if verify(p, &fixed).is_empty() { fixed } else { before };
        rounds += 1;
    }
    (o, rounds)
}

/// Keeps the placements that replay (`ordered`) and places the other pods of the batch greedily (in
/// `order`) on top of them: a snapshot in which the plan's new nodes exist and the kept pods are bound
/// is planned again with the same configurations (under the same budget). Returns the merged outcome
/// if it replays.
fn repair(p: &Problem, o: &Outcome, ordered: &Placements, order: greedy::Order, spent: super::Spent) -> Option<Outcome> {
    let mut cluster = p.cluster.clone();
    let base = cluster.nodes.len();
    for (k, &f) in o.new_nodes.iter().enumerate() {
        let c = &p.configs[f];
        let name = new_node_name(p, k);
        let mut labels = c.labels.clone();
        labels.insert(keys::HOSTNAME.into(), name.clone());
        cluster.nodes.push(Node {
            name: name.clone(),
            labels,
            taints: c.taints.clone(),
            allocatable: c.allocatable.clone(),
            capacity: c.capacity.clone(),
            unschedulable: false,
            provider_id: None,
            deleting: false,
            in_flight: true,
            nodepool: Some(p.cluster.nodepools[c.pool].name.clone()),
            attach_limits: c.attach_limits.clone(),
        });
        for &d in &c.daemonsets {
            let mut pod = p.cluster.daemonsets[d].template.clone();
            pod.name = format!("{}-{name}", pod.name);
            pod.node_name = Some(name.clone());
            cluster.pods.push(pod);
        }
    }
    for &(id, t) in ordered {
        cluster.pods[id.ix()].node_name = Some(match t {
            Target::Existing(n) => p.cluster.nodes[n].name.clone(),
            Target::New(k) => new_node_name(p, k),
        });
    }
    let p2 = p.rebase(&cluster);
    let (g2, _) = greedy::plan_within(&p2, order, spent, &super::never);
    let offset = o.new_nodes.len();
    let mut merged = Outcome { new_nodes: o.new_nodes.clone(), placements: ordered.clone(), unschedulable: g2.unschedulable, deferred: Vec::new() };
    merged.new_nodes.extend(g2.new_nodes.iter().copied());
    for (id, t) in g2.placements {
        merged.placements.push((
            id,
            match t {
                Target::Existing(i) if i >= base => Target::New(i - base),
                Target::Existing(i) => Target::Existing(i),
                Target::New(k) => Target::New(offset + k),
            },
        ));
    }
    resize::remove_empty_nodes(&mut merged);
    verify(p, &merged).is_empty().then_some(merged)
}

/// At DEBUG (RUST_LOG=stowage_core=debug): why a MILP plan did not replay (each failure, and for the first one the spread
/// counts of the pods ordered so far).
fn debug_replay_failures(p: &Problem, o: &Outcome, ordered: &Placements, failures: &[(crate::domain::pod::PodId, crate::semantics::Reject)]) {
    let (id, _) = &failures[0];
    for (fid, fr) in failures {
        let t = o.placements.iter().find(|x| x.0 == *fid).map(|x| x.1);
        tracing::debug!("failed {} -> {:?}: {fr}", p.pod(*fid).key(), t);
    }
    let pod = p.pod(*id);
    let (fs, ix) = super::scheduler_state(p, &o.new_nodes);
    let node_of = |t: Target| match t {
        Target::Existing(n) => n,
        Target::New(k) => ix[k],
    };
    for c in &pod.spread {
        let mut counts: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
        for &(q, t) in ordered {
            let qp = p.pod(q);
            if crate::semantics::selectors::opt_matches(c.selector.as_ref(), &qp.labels) && qp.namespace == pod.namespace {
                let d = fs.nodes()[node_of(t)].labels.get(&c.key).cloned().unwrap_or_else(|| "<none>".into());
                counts.entry(d).or_default().0 += 1;
            }
        }
        for n in fs.nodes() {
            for qp in &n.pods {
                if crate::semantics::selectors::opt_matches(c.selector.as_ref(), &qp.labels) && qp.namespace == pod.namespace {
                    let d = n.labels.get(&c.key).cloned().unwrap_or_else(|| "<none>".into());
                    counts.entry(d).or_default().1 += 1;
                }
            }
        }
        tracing::debug!("{} spread {} (new, existing) {:?}", pod.key(), c.key, counts);
    }
    let t = o.placements.iter().find(|x| x.0 == *id).map(|x| x.1);
    if let Some(t) = t {
        tracing::debug!("on {:?} labels {:?}", t, fs.nodes()[node_of(t)].labels);
    }
}
