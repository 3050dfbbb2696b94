//! Property tests of the MILP planner on generated batches (proptest, fixed seed): its plan passes the
//! checker, costs no more than the greedy plan, its lower bound is no higher than its objective, and on
//! tiny batches (at most 8 pods, 3 instance types, 2 zones, both capacity types) its cost equals the
//! optimum found by brute force over every partition of the pods into nodes.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};
use stowage_core::check;
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::weights::Weights;

use common::{NODECLASS, default_pool, pod, pods, pool, small_catalog};

const TYPES: [&str; 3] = ["t.small", "t.medium", "t.large"];
const ZONES: [&str; 2] = ["zone-a", "zone-b"];

#[derive(Clone, Debug)]
struct TinyPod {
    cpu_m: i64,
    zone: Option<&'static str>,
}

fn tiny_pod() -> impl Strategy<Value = TinyPod> {
    (select(vec![250i64, 500, 900, 1000, 1500, 2500, 3500, 6000]), proptest::option::weighted(0.3, select(ZONES.to_vec()))).prop_map(|(cpu_m, zone)| TinyPod { cpu_m, zone })
}

fn render(pods: &[TinyPod]) -> String {
    let mut text = String::from(NODECLASS);
    text.push_str(&pool(
        "tiny",
        &format!("[{{key: node.kubernetes.io/instance-type, operator: In, values: [{}]}}, {{key: topology.kubernetes.io/zone, operator: In, values: [{}]}}]", TYPES.join(", "), ZONES.join(", ")),
    ));
    for (i, p) in pods.iter().enumerate() {
        let spec = p.zone.map(|z| format!("nodeSelector: {{topology.kubernetes.io/zone: {z}}}")).unwrap_or_default();
        text.push_str(&pod(&format!("p{i}"), "", &format!("{}m", p.cpu_m), &spec));
    }
    text
}

/// The cheapest node (price) that holds `block`, or None.
fn cheapest_node(pods: &[TinyPod], block: &[usize]) -> Option<f64> {
    let cpu: i64 = block.iter().map(|&i| pods[i].cpu_m).sum();
    let zones: Vec<&str> = block.iter().filter_map(|&i| pods[i].zone).collect();
    let mut best: Option<f64> = None;
    for t in small_catalog().types.iter().filter(|t| TYPES.contains(&t.name.as_str())) {
        let a = t.allocatable();
        if cpu > a.cpu_m || block.len() as i64 > a.pods {
            continue;
        }
        for o in t.offerings.iter().filter(|o| o.available && ZONES.contains(&o.zone.as_str())) {
            if zones.iter().all(|z| *z == o.zone) {
                best = Some(best.map_or(o.price, |b: f64| b.min(o.price)));
            }
        }
    }
    best
}

/// The optimum over every partition of the pods into nodes (restricted growth strings).
fn brute_force(pods: &[TinyPod]) -> Option<f64> {
    fn go(pods: &[TinyPod], i: usize, blocks: &mut Vec<Vec<usize>>, best: &mut Option<f64>) {
        if i == pods.len() {
            let mut total = 0.0;
            for b in blocks.iter() {
                match cheapest_node(pods, b) {
                    Some(c) => total += c,
                    None => return,
                }
            }
            *best = Some(best.map_or(total, |x: f64| x.min(total)));
            return;
        }
        for k in 0..blocks.len() {
            blocks[k].push(i);
            go(pods, i + 1, blocks, best);
            blocks[k].pop();
        }
        blocks.push(vec![i]);
        go(pods, i + 1, blocks, best);
        blocks.pop();
    }
    let mut best = None;
    go(pods, 0, &mut Vec::new(), &mut best);
    best
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, rng_seed: RngSeed::Fixed(20261129), max_shrink_iters: 256, ..ProptestConfig::default() })]

    #[test]
    fn milp_is_checked_no_dearer_than_greedy_bounded_and_optimal_on_tiny_batches(pods in proptest::collection::vec(tiny_pod(), 1..=8)) {
        let text = render(&pods);
        let w = stowage_input::load_texts([(Path::new("tiny.yaml"), text.as_str())]).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let weights = Weights::default();
        let greedy = plan_cluster(&w.cluster, small_catalog(), &weights, Solver::Greedy).unwrap();
        let milp = plan_cluster(&w.cluster, small_catalog(), &weights, Solver::Milp).unwrap();
        for plan in [&greedy, &milp] {
            let r = check::check(&w.cluster, small_catalog(), plan);
            prop_assert!(r.valid(), "{}: {:?}\n{text}", plan.solver.name, r.violations);
        }
        let eps = 1e-6;
        prop_assert!(milp.cost_per_hour <= greedy.cost_per_hour + eps, "MILP {} > greedy {}\n{text}", milp.cost_per_hour, greedy.cost_per_hour);
        let (obj, lb) = (milp.solver.objective.unwrap(), milp.solver.lower_bound);
        if let Some(lb) = lb {
            prop_assert!(lb <= obj + eps, "lower bound {lb} > objective {obj}\n{text}");
        }
        match brute_force(&pods) {
            Some(opt) => {
                prop_assert!(milp.unschedulable.is_empty(), "pods left pending though a plan exists\n{text}");
                prop_assert!((milp.cost_per_hour - opt).abs() <= 1e-4, "MILP {} vs brute-force optimum {opt}\n{text}", milp.cost_per_hour);
                prop_assert!(greedy.cost_per_hour >= opt - eps, "greedy {} below the optimum {opt}\n{text}", greedy.cost_per_hour);
            }
            None => prop_assert!(!milp.unschedulable.is_empty(), "brute force finds no plan but the MILP placed every pod\n{text}"),
        }
    }
}

/// `n` pods of `cpu` alike on the default pool, loaded.
fn alike_pods(n: usize, cpu: &str) -> stowage_input::Workload {
    let text = format!("{NODECLASS}{}{}", default_pool(), pods(n, "p", "", cpu, ""));
    stowage_input::load_texts([(Path::new("alike.yaml"), text.as_str())]).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Seven 1000m pods: a t.large (7.9 cpu allocatable, 0.36 $/h) holds all seven, which is optimal. The
/// aggregated relaxation pools capacity and proves only 7/7.9 of that; the size-class bound keeps nodes
/// whole and proves 0.36.
#[test]
fn the_size_class_bound_sees_whole_nodes() {
    use std::time::{Duration, Instant};
    use stowage_core::solve::milp::{Options, bound, families};
    use stowage_core::solve::{greedy, problem::Problem};

    let w = alike_pods(7, "1000m");
    let weights = Weights::default();
    let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
    let (s, fams) = families::build(&p);
    let start = greedy::plan(&p);
    let sb = bound::size_bound(&p, &s, &fams, &start, Instant::now() + Duration::from_secs(30), Options { threads: 1, seed: 0 }).expect("solves");
    assert!(sb.converged, "no pattern prices out at the end");
    let b = sb.bound.expect("a bound");
    assert!((b - 0.36).abs() < 1e-6, "size-class bound {b}, optimum 0.36");
    let volume = 0.36 * 7.0 / 7.9;
    assert!(b > volume + 0.04, "{b} is no better than the volume bound {volume}");
}

/// The aggregated integer program `agg` solved to optimality (30 s at most), its answer holding.
fn solve_aggregated(agg: &stowage_core::solve::milp::master::Master) -> stowage_core::solve::milp::IntegerBound {
    use stowage_core::solve::milp::{Options, aggregated_integer};
    let ib = aggregated_integer(agg, std::time::Duration::from_secs(30), 0.0, Options { threads: 1, seed: 0 }).expect("solves");
    assert!(ib.broken.is_none(), "{:?}", ib.broken);
    ib
}

/// The MILP's plan for `w` passes the checker, costs `optimum` and is proven optimal by its bound.
fn assert_milp_proves(w: &stowage_input::Workload, weights: &Weights, optimum: f64) {
    let plan = plan_cluster(&w.cluster, small_catalog(), weights, Solver::Milp).expect("plans");
    assert!(check::check(&w.cluster, small_catalog(), &plan).valid());
    let (obj, lb) = (plan.solver.objective.expect("an objective"), plan.solver.lower_bound.expect("a bound"));
    assert!((obj - optimum).abs() < 1e-4 && lb >= obj - 1e-4, "objective {obj}, bound {lb}, optimum {optimum}");
}

/// Three 100m pods under weights that charge $10/h per new node: one t.small holds them, so the optimum
/// is 10 + 0.10 (on-demand, the default pool). The aggregated relaxation's LP pays only the fraction of
/// a node the pods fill (about 10 × 0.3 / 7.9 on a t.large); its integer program pays for a whole node
/// and proves the optimum.
#[test]
fn the_aggregated_integer_program_pays_for_whole_nodes() {
    use stowage_core::solve::milp::master::Master;
    use stowage_core::solve::problem::Problem;

    let w = alike_pods(3, "100m");
    let weights = Weights { per_node: 10.0, ..Weights::default() };
    let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
    let ib = solve_aggregated(&Master::aggregate(&p));
    let b = ib.bound.expect("a bound");
    assert!((b - 10.10).abs() < 1e-4, "aggregated integer bound {b}, optimum 10.10");

    assert_milp_proves(&w, &weights, 10.10);
}

/// Three 5000m pods: only a t.large (7.9 cpu allocatable, 0.36 $/h on demand) holds one, and no node
/// holds two, so the optimum is three t.large, 1.08. Pooled capacity lets the aggregated integer
/// program put the 15 cores on two t.large (15.8 cores, 0.72); the fit cuts (`milp::fit_cuts`: at
/// most ⌊7900 / 5000⌋ = 1 such pod per t.large, none on the smaller types) prove the optimum.
#[test]
fn the_fit_cuts_keep_large_pods_to_the_nodes_that_hold_them() {
    use stowage_core::solve::milp::master::Master;
    use stowage_core::solve::problem::Problem;

    let w = alike_pods(3, "5000m");
    let weights = Weights::default();
    let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
    let mut agg = Master::aggregate(&p);
    agg.add_fit_cuts();
    assert!(agg.model.rows().iter().any(|r| r.name.starts_with("agg.size[")), "a size row for the 5000m pods");
    let ib = solve_aggregated(&agg);
    let b = ib.bound.expect("a bound");
    assert!((b - 1.08).abs() < 1e-4, "aggregated integer bound {b}, optimum 1.08 (0.72 with pooled capacity only)");

    assert_milp_proves(&w, &weights, 1.08);
}

/// The aggregated integer program's solution packed into nodes (`milp::disaggregate`). Three 5000m
/// pods: without the fit cuts the program pools two t.large's 15.8 cores for the 15 cores (0.72 $/h);
/// each t.large holds one pod, so the third gets a node of its own, the cheapest that holds it, a
/// t.large: 1.08. With the fit cuts the solution is three t.large already and packs as it is. Either
/// way the packed start holds every row and bound of the pattern model and leaves no pod pending.
#[test]
fn the_aggregated_integer_solution_packs_into_nodes_and_a_pod_without_room_gets_its_own() {
    use stowage_core::solve::milp::{disaggregate, master::Master, model::ColKind};
    use stowage_core::solve::problem::Problem;

    let w = alike_pods(3, "5000m");
    let weights = Weights::default();
    let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
    for (cuts, aggregated, extra) in [(false, 0.72, 1), (true, 1.08, 0)] {
        let mut agg = Master::aggregate(&p);
        if cuts {
            agg.add_fit_cuts();
        }
        let ib = solve_aggregated(&agg);
        let sol = ib.solution.expect("a solution");
        let agg_obj = agg.model.objective(&sol);
        assert!((agg_obj - aggregated).abs() < 1e-4, "fit cuts {cuts}: aggregated solution {agg_obj}, expected {aggregated}");
        let mut m = Master::new(&p);
        let pk = disaggregate::pack(&mut m, &agg, &sol).expect("packs");
        assert_eq!(pk.extra_nodes, extra, "fit cuts {cuts}");
        assert!((pk.objective - 1.08).abs() < 1e-4, "fit cuts {cuts}: packed at {}", pk.objective);
        assert_eq!(m.violation(&pk.start), None, "fit cuts {cuts}");
        let pending: f64 = m.model.columns().filter(|(_, c)| matches!(c.kind, ColKind::Pending(_))).map(|(j, _)| pk.start[j.ix()]).sum();
        assert_eq!(pending, 0.0, "fit cuts {cuts}: no pod left pending");
        let nodes: f64 = m.model.columns().filter(|(_, c)| matches!(c.kind, ColKind::Pattern(_))).map(|(j, _)| pk.start[j.ix()]).sum();
        assert_eq!(nodes, 3.0, "fit cuts {cuts}: one t.large per pod");
    }
}

/// Four 1000m pods under a hostname spread (maxSkew 1). Under `hostnameSpread: intent` (the default)
/// every valid plan puts each on its own new node: four t.small, 0.40 $/h. Under `exact` one t.large
/// holding all four is valid (0.36). The size-class bound drops hostname spread, so it converges at
/// or below the optimum under both rules (never above: its value is a dual bound of its LP, whichever
/// of `z + N·ρ` and Farley's `z / λ` is larger), and so does the bound the driver reports.
#[test]
fn the_size_class_bound_stays_below_the_optimum_under_hostname_spread() {
    use std::time::{Duration, Instant};
    use stowage_core::semantics::spread::HostnameSpread;
    use stowage_core::solve::milp::{Options, bound, families};
    use stowage_core::solve::{greedy, problem::Problem};

    let spread = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]";
    let text = format!("{NODECLASS}{}{}", default_pool(), pods(4, "web", "{app: web}", "1000m", spread));
    let w = stowage_input::load_texts([(Path::new("spread.yaml"), text.as_str())]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for (rule, optimum) in [(HostnameSpread::Intent, 0.40), (HostnameSpread::Exact, 0.36)] {
        let weights = Weights { hostname_spread: rule, ..Weights::default() };
        let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
        let (s, fams) = families::build(&p);
        let start = greedy::plan(&p);
        let sb = bound::size_bound(&p, &s, &fams, &start, Instant::now() + Duration::from_secs(30), Options { threads: 1, seed: 0 }).expect("solves");
        let b = sb.bound.expect("a bound");
        assert!(sb.converged, "{rule:?}: not converged");
        assert!(b <= optimum + 1e-6, "{rule:?}: size-class bound {b} above the optimum {optimum}");
        let plan = plan_cluster(&w.cluster, small_catalog(), &weights, Solver::Milp).expect("plans");
        let r = check::check(&w.cluster, small_catalog(), &plan);
        assert!(r.valid(), "{rule:?}: {:?}", r.violations);
        // Under exact the MILP model keeps to regime 0 without existing nodes (host_spread.rs), so its
        // own bounds would say 0.40; the driver knows the model is narrower than the rule there and
        // reports only the size-class bound. The planners still miss the t.large under exact (they
        // keep a new node to maxSkew members), so the plan is held to the optimum under intent only.
        assert!(plan.solver.lower_bound.is_some_and(|lb| lb <= optimum + 1e-6), "{rule:?}: reported bound {:?}, optimum {optimum}", plan.solver.lower_bound);
        if rule == HostnameSpread::Intent {
            assert!((plan.cost_per_hour - optimum).abs() < 1e-6, "{rule:?}: plan {} $/h, optimum {optimum}", plan.cost_per_hour);
        } else {
            assert!(plan.solver.detail.contains("only the size-class bound"), "{rule:?}: {}", plan.solver.detail);
        }
    }
}

/// Four existing nodes (labelled `tier: old`) hold one web replica each; the web replicas select
/// `tier: old` under a hostname spread (maxSkew 1, the default `intent`), and a 6-cpu pod needs a new
/// node. kube-scheduler lets the four nodes take five more web replicas in rounds (the minimum rises to
/// 2). The MILP model keeps the minimum at 1 (each node takes one more), so its own bounds would leave
/// a replica pending at the penalty; the driver sees the batch can raise the minimum and reports only
/// bounds that hold for every plan. Two replicas cannot raise it (four nodes sit at the minimum), and
/// the model's bounds stand.
#[test]
fn the_driver_reports_no_model_bound_when_the_batch_can_raise_a_hostname_minimum() {
    let spread =
        "nodeSelector: {tier: old}, topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]";
    let nodes: String = (0..4).map(|i| common::node(&format!("n-{i}"), "zone-a", "4", "tier: old", "") + &pod(&format!("old-{i}"), "{app: web}", "100m", &format!("nodeName: n-{i}"))).collect();
    for (n, narrower) in [(5, true), (2, false)] {
        let text = format!("{NODECLASS}{}{nodes}{}{}", default_pool(), pods(n, "web", "{app: web}", "100m", spread), pod("big", "", "6000m", ""));
        let w = stowage_input::load_texts([(Path::new("raise.yaml"), text.as_str())]).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let plan = plan_cluster(&w.cluster, small_catalog(), &Weights::default(), Solver::Milp).expect("plans");
        let r = check::check(&w.cluster, small_catalog(), &plan);
        assert!(r.valid(), "{n} replicas: {:?}", r.violations);
        assert!(plan.new_nodes.len() == 1 && plan.unschedulable.is_empty(), "{n} replicas: {}", common::summary(&plan));
        let lb = plan.solver.lower_bound;
        assert!(lb.is_none_or(|lb| lb <= plan.solver.objective.expect("an objective") + 1e-9), "{n} replicas: bound {lb:?} above the plan");
        let said = plan.solver.detail.contains("raise the minimum");
        assert_eq!(said, narrower, "{n} replicas: {}", plan.solver.detail);
    }
}
