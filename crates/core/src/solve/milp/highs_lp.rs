//! The HiGHS adapter: the master problem handed to HiGHS through the `highs` crate (row duals,
//! incremental columns, MIP starts and the MIP dual bound; docs/design/milp.md, "Why not good_lp"),
//! and the one place where HiGHS's model status becomes stowage's [`MipStatus`] and its errors become
//! [`SolveError`]. Nothing outside this module's results sees a `highs` type.

use std::time::Duration;

use highs::{ColProblem, HighsModelStatus, Model, Row, Sense};

use super::master::Master;
use super::model::Model as Rows;

/// How a HiGHS run ended, as stowage acts on it. HiGHS's statuses map here in [`MipStatus::of`] and
/// nowhere else; several of HiGHS's error statuses fold into [`MipStatus::Error`], because the caller
/// does the same for all of them (it falls back to the greedy plan), but a time limit is never confused
/// with an infeasible model or an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MipStatus {
    /// Solved to optimality (for a MIP: within the relative gap it was given).
    Optimal,
    /// The model has no feasible point.
    Infeasible,
    /// The objective is unbounded below.
    Unbounded,
    /// HiGHS proved that the model is infeasible or unbounded without telling which.
    UnboundedOrInfeasible,
    /// Stopped at the time limit; the solution, if any, is feasible but not proven optimal.
    TimeLimit,
    /// Stopped at another work limit (iterations, solutions, objective bound or target, memory) or
    /// interrupted; the solution, if any, is feasible but not proven optimal.
    OtherLimit,
    /// HiGHS ran without a verdict (e.g. interior point without crossover): look at the solution's
    /// feasibility, not at the status.
    Unknown,
    /// The model has no columns.
    Empty,
    /// HiGHS could not load, presolve, solve or postsolve the model.
    Error,
}

impl MipStatus {
    /// The one mapping from HiGHS's model status.
    pub(super) fn of(status: HighsModelStatus) -> Self {
        use HighsModelStatus as H;
        match status {
            H::Optimal => MipStatus::Optimal,
            H::Infeasible => MipStatus::Infeasible,
            H::Unbounded => MipStatus::Unbounded,
            H::UnboundedOrInfeasible => MipStatus::UnboundedOrInfeasible,
            H::ReachedTimeLimit => MipStatus::TimeLimit,
            H::ReachedIterationLimit | H::ReachedSolutionLimit | H::ObjectiveBound | H::ObjectiveTarget | H::ReachedInterrupt | H::ReachedMemoryLimit => MipStatus::OtherLimit,
            H::Unknown => MipStatus::Unknown,
            H::ModelEmpty => MipStatus::Empty,
            H::NotSet | H::LoadError | H::ModelError | H::PresolveError | H::SolveError | H::PostsolveError => MipStatus::Error,
            // `HighsModelStatus` is non-exhaustive: a status a later HiGHS adds is judged by its solution.
            _ => MipStatus::Unknown,
        }
    }
}

/// A HiGHS call that failed outright (not a model status: the call itself returned an error). The
/// model is then unusable; the caller should fall back to a plan it already has (the driver keeps the
/// greedy plan) and report the batch, since a well-formed model never gets here.
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("HiGHS rejected a column added to the LP relaxation ({0}): the column is malformed; keep the greedy plan")]
    ColumnRejected(String),
    #[error("HiGHS failed to solve the {model} ({detail}); keep the greedy plan")]
    Failed { model: &'static str, detail: String },
    #[error("the LP relaxation was lost after an earlier HiGHS error: build a new `Lp` before solving again")]
    LpLost,
}

/// `Failed` for the model named `model`, from HiGHS's error value.
pub(super) fn failed(model: &'static str) -> impl FnOnce(highs::HighsStatus) -> SolveError {
    move |e| SolveError::Failed { model, detail: format!("{e:?}") }
}

/// HiGHS options shared by every solve. HiGHS's thread pool is process-global and fixed by the first
/// solve, so one thread count is used everywhere in a process.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub threads: u32,
    pub seed: i32,
}

pub(crate) struct Solved {
    pub status: MipStatus,
    pub objective: f64,
    pub columns: Vec<f64>,
    pub row_duals: Vec<f64>,
    /// MIP only: HiGHS's dual bound (over the columns it was given).
    pub dual_bound: Option<f64>,
    pub has_solution: bool,
}

fn base(m: &Rows, integer: bool, from: usize, rows_out: &mut Vec<Row>) -> ColProblem {
    let mut pb = ColProblem::default();
    rows_out.clear();
    for r in m.rows() {
        rows_out.push(pb.add_row(r.lo..=r.hi));
    }
    for c in &m.cols()[..from] {
        let e: Vec<(Row, f64)> = c.entries.iter().map(|&(r, v)| (rows_out[r.ix()], v)).collect();
        pb.add_column_with_integrality(c.cost, c.lo..=c.hi, e, integer && c.integer);
    }
    pb
}

pub(super) fn configure(model: &mut Model, o: &Options, time_limit: Duration) {
    // HiGHS's own log (on stdout) when tracing is at TRACE for this module, e.g.
    // RUST_LOG=stowage_core::solve::milp=trace.
    if !tracing::enabled!(tracing::Level::TRACE) {
        model.make_quiet();
    } else {
        model.set_option("output_flag", true);
        model.set_option("log_to_console", true);
    }
    model.set_option("threads", o.threads as i32);
    model.set_option("random_seed", o.seed);
    model.set_option("time_limit", time_limit.as_secs_f64().max(0.001));
}

fn extract(solved: &highs::SolvedModel, mip: bool) -> Solved {
    let status = MipStatus::of(solved.status());
    let has_solution = matches!(solved.primal_solution_status(), highs::HighsSolutionStatus::Feasible);
    let sol = solved.get_solution();
    let dual_bound = if mip { solved.double_info_value(c"mip_dual_bound").ok() } else { None };
    Solved { status, objective: solved.objective_value(), columns: sol.columns().to_vec(), row_duals: if mip { Vec::new() } else { sol.dual_rows().to_vec() }, dual_bound, has_solution }
}

/// The LP relaxation, kept alive across column generation rounds (HiGHS re-solves warm).
pub(crate) struct Lp {
    model: Option<Model>,
    rows: Vec<Row>,
    cols: usize,
    options: Options,
}

impl Lp {
    pub fn new(m: &Master, options: Options) -> Self {
        let mut rows = Vec::new();
        let pb = base(&m.model, false, m.model.n_cols(), &mut rows);
        let model = pb.optimise(Sense::Minimise);
        Lp { model: Some(model), rows, cols: m.model.n_cols(), options }
    }

    /// Adds the master's new columns and re-solves.
    pub fn solve(&mut self, m: &Master, time_limit: Duration) -> Result<Solved, SolveError> {
        let mut model = self.model.take().ok_or(SolveError::LpLost)?;
        for c in &m.model.cols()[self.cols..] {
            let e: Vec<(Row, f64)> = c.entries.iter().map(|&(r, v)| (self.rows[r.ix()], v)).collect();
            model.try_add_column(c.cost, c.lo..=c.hi, e).map_err(|e| SolveError::ColumnRejected(format!("{e:?}")))?;
        }
        self.cols = m.model.n_cols();
        configure(&mut model, &self.options, time_limit);
        let solved = model.try_solve().map_err(failed("LP relaxation"))?;
        let out = extract(&solved, false);
        self.model = Some(Model::from(solved));
        Ok(out)
    }
}

/// Solves a master's LP relaxation once (every column continuous).
pub(crate) fn solve_lp(m: &Master, options: Options, time_limit: Duration) -> Result<Solved, SolveError> {
    let mut rows = Vec::new();
    let pb = base(&m.model, false, m.model.n_cols(), &mut rows);
    let mut model = pb.optimise(Sense::Minimise);
    configure(&mut model, &options, time_limit);
    let solved = model.try_solve().map_err(failed("LP relaxation"))?;
    Ok(extract(&solved, false))
}

/// The integer master over the generated columns, started from `start` (a full column vector).
pub(crate) fn solve_mip(m: &Master, options: Options, time_limit: Duration, rel_gap: f64, start: Option<&[f64]>) -> Result<Solved, SolveError> {
    solve_model_mip(&m.model, "integer program", options, time_limit, rel_gap, start, true)
}

/// Any model's integer program (`model` names it in errors), started from `start` (a full column vector).
/// `probing: false` switches HiGHS's presolve probing off: on a model with many binaries in a few
/// dense rows (the node-set program's pooled capacities) probing alone can spend the whole budget
/// before the first LP, leaving no bound.
pub(crate) fn solve_model_mip(m: &Rows, model_name: &'static str, options: Options, time_limit: Duration, rel_gap: f64, start: Option<&[f64]>, probing: bool) -> Result<Solved, SolveError> {
    let mut rows = Vec::new();
    let pb = base(m, true, m.n_cols(), &mut rows);
    let mut model = pb.optimise(Sense::Minimise);
    configure(&mut model, &options, time_limit);
    model.set_option("mip_rel_gap", rel_gap);
    // Feasibility matters most under a short budget.
    model.set_option("mip_heuristic_effort", 0.2);
    if !probing {
        // HiGHS's presolve rule bit for probing.
        model.set_option("presolve_rule_off", 1 << 15);
    }
    if let Some(s) = start
        && s.len() == m.n_cols()
    {
        // A rejected start is not fatal: HiGHS searches without it.
        let _ = model.try_set_solution(Some(s), None, None, None);
    }
    let solved = model.try_solve().map_err(failed(model_name))?;
    Ok(extract(&solved, true))
}
