//! The consolidation benchmark's generated cluster (`stowage_bench::consolidation`): deterministic,
//! what its module doc says, and at 60 nodes a cluster the default planner consolidates, with the
//! displaced pods' placement accepted by the independent checker. Times are measured by the bench and
//! the `consolidation_time` example, never asserted here.

use std::collections::BTreeSet;

use stowage_bench::consolidation::{NODE_TYPES, Spec, cluster, cluster_text, input, measure};
use stowage_core::domain::labels::keys;
use stowage_core::solve::Planner;
use stowage_decide::consolidation::{Consolidation, Outcome, POLISH_MISSES, Settings};

const SMALL: Spec = Spec { nodes: 60, seed: 7 };

#[test]
fn the_generated_cluster_is_seeded_and_at_rest() {
    let text = cluster_text(SMALL).unwrap();
    assert_eq!(text, cluster_text(SMALL).unwrap(), "same seed, same cluster");
    assert_ne!(text, cluster_text(Spec { seed: 8, ..SMALL }).unwrap(), "the seed matters");
    let w = cluster(SMALL).unwrap();
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    let c = &w.cluster;
    assert_eq!(c.nodes.len(), 60);
    assert!(c.pending().is_empty());
    let zones: BTreeSet<&str> = c.nodes.iter().filter_map(|n| n.label(keys::ZONE)).collect();
    assert_eq!(zones.len(), 3);
    let types: BTreeSet<&str> = c.nodes.iter().filter_map(|n| n.label(keys::INSTANCE_TYPE)).collect();
    assert!(types.len() >= 5 && types.iter().all(|t| NODE_TYPES.contains(t)), "{types:?}");
    assert!(!w.objects.pdbs.is_empty(), "some Deployments have a PodDisruptionBudget");
    // Every node runs workload pods owned by a ReplicaSet; some are under a third of their CPU.
    let mut low = 0;
    for n in &c.nodes {
        let on: Vec<_> = c.pods.iter().filter(|p| p.node_name.as_deref() == Some(n.name.as_str()) && !p.is_daemon()).collect();
        assert!(on.iter().all(|p| p.owner.is_some()), "{}: a bare pod", n.name);
        let cpu: i64 = on.iter().map(|p| p.requests.get("cpu")).sum();
        if (cpu as f64) < 0.35 * n.allocatable.get("cpu") as f64 {
            low += 1;
        }
    }
    assert!(low >= 10, "only {low} of 60 nodes are underutilised");
}

/// The default planner (MILP, 1 s budget) consolidates the 60-node cluster; the replacement plan is
/// judged by the checker on the cluster it was planned on, every displaced pod is placed, and the
/// decision's figures are consistent.
#[test]
fn the_generated_cluster_yields_a_decision_the_checker_accepts() {
    let w = cluster(SMALL).unwrap();
    let (m, d) = measure(SMALL, &w, Planner::default()).unwrap();
    let d = d.unwrap_or_else(|| panic!("expected a consolidation: {}", m.render()));
    let report = stowage_core::check::check(&d.planned_on, stowage_input::catalog::default_catalog(), &d.replacements.plan);
    assert!(report.valid(), "the checker rejects the displaced pods' placement: {:?}", report.violations);
    let moved: usize = d.remove.iter().map(|r| r.pods.len()).sum();
    assert!(moved > 0);
    assert_eq!(d.replacements.plan.placements.len(), moved, "every displaced pod is placed");
    assert!(d.replacements.unschedulable.is_empty());
    assert!(d.saving - d.disruption_cost >= stowage_core::weights::Weights::default().consolidation.min_saving - 1e-12);
    assert!(d.cost_after + 1e-9 >= d.lower_bound && d.cost_after < d.cost_before);
    // The budget (10 % of 60) bounds the nodes removed at once.
    assert!(d.remove.len() <= 6, "{} nodes removed", d.remove.len());
    // The measurement reports what the decision is.
    assert_eq!((m.removed_nodes, m.moved_pods, m.evaluations), (d.remove.len(), moved, d.evaluations));
    assert_eq!(m.calls.len(), m.evaluations);
    assert!(m.evaluations >= 1 && m.evaluations <= Settings::default().max_evaluations);
}

/// At 400 nodes the node-set program pools existing room (more than `EXACT_PAIRS` class-target
/// pairs): it starts from the drain heuristic and proposes a set as large as the budget (10 % of 400)
/// allows, which the greedy planner places in one evaluation; the checker accepts it, and the
/// program's bound (a relaxation's) is below what the decision reaches. The program gets a long
/// budget so that the test does not depend on the machine's speed.
#[test]
fn on_a_large_cluster_the_program_proposes_the_whole_budget_in_one_evaluation() {
    let w = cluster(Spec { nodes: 400, seed: 3 }).unwrap();
    let weights = stowage_core::weights::Weights::default();
    let settings = Settings { node_set_budget: std::time::Duration::from_secs(120), ..Settings::default() };
    let mut memory: Consolidation<std::time::Duration> = Consolidation::default();
    memory.observe(&w.cluster, std::time::Duration::ZERO);
    let mut planner = Planner::greedy();
    let outcome = memory.decide(&input(&w, &weights, &settings), &mut planner, std::time::Duration::from_secs(600)).unwrap();
    let Outcome::Consolidate(d) = outcome else { panic!("expected a consolidation, got {outcome:?}") };
    let report = stowage_core::check::check(&d.planned_on, stowage_input::catalog::default_catalog(), &d.replacements.plan);
    assert!(report.valid(), "the checker rejects the displaced pods' placement: {:?}", report.violations);
    assert!(d.replacements.unschedulable.is_empty());
    let program = d.node_set.as_ref().expect("the program ran");
    assert_eq!(program.error, None);
    assert_eq!((program.remove, d.remove.len()), (40, 40), "{program:?}");
    assert!(d.evaluations <= 1 + POLISH_MISSES, "{} evaluations", d.evaluations);
    let bound = program.lower_bound.expect("a bound");
    assert!(bound <= d.cost_after + d.disruption_cost + 1e-6, "bound {bound} above the decision's {}", d.cost_after + d.disruption_cost);
    assert!(d.saving - d.disruption_cost >= weights.consolidation.min_saving);
}
