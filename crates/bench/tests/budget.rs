//! The planner's budget is a budget (issue 20 item 4): with budgets far too small for the batch (zero,
//! 1 ms, 20 ms, counted from before the problem build) the MILP driver still returns a plan the checker
//! accepts, with every pending pod placed, reported unschedulable or deferred to the next batch, and no
//! pod the unbudgeted greedy planner places reported unschedulable. A batch is cut (pods deferred) only
//! after 256 pods are placed, so each batch makes progress; a zero budget is spent before the first
//! pod, so every placed pod goes through the greedy planner's fast pass. No time is asserted: what a
//! budget may cost is measured (README), what it may never cost is validity.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stowage_bench::{corpus, mixed};
use stowage_core::check;
use stowage_core::domain::catalog::Catalog;
use stowage_core::plan::Plan;
use stowage_core::solve::{Planner, Solver, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::Workload;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A corpus entry's workload and catalog.
fn corpus_entry(name: &str) -> (Workload, Catalog) {
    let c = corpus::load_index(&root().join(corpus::STANDARD_INDEX)).expect("the corpus index loads");
    let e = c.workloads.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no corpus entry {name}"));
    let w = corpus::load_workload(&e.files).unwrap_or_else(|err| panic!("{name}: {err}"));
    let cat = e.catalog.load().unwrap_or_else(|err| panic!("{name}: {err}"));
    (w, (*cat).clone())
}

/// The mixed-constraint generator at scale `s` (spreads, anti-affinity, volume zones, weighted
/// NodePools, partly used existing nodes), on the embedded catalog.
fn generated_mixed(s: usize) -> (Workload, Catalog) {
    let text = mixed::workload(s).expect("the generator runs");
    let nodeclass_path = root().join("scenarios/common-ec2nodeclass.yaml");
    let nodeclass = std::fs::read_to_string(&nodeclass_path).expect("the EC2NodeClass file reads");
    let w = stowage_input::load_texts([(Path::new("mixed.json"), text.as_str()), (nodeclass_path.as_path(), nodeclass.as_str())]).expect("the generated workload loads");
    let cat = corpus::CatalogRef::Default.load().expect("the embedded catalog");
    (w, (*cat).clone())
}

fn pending_names(plan: &Plan) -> BTreeSet<String> {
    plan.unschedulable.iter().map(|u| u.pod.clone()).collect()
}

#[test]
fn tiny_budgets_give_valid_plans_that_account_for_every_pod() {
    let weights = Weights::default();
    let cases = [("mixed-5 (generated)", generated_mixed(5)), ("karpenter-1000", corpus_entry("karpenter-1000")), ("mixed-3", corpus_entry("mixed-3"))];
    for (name, (w, cat)) in &cases {
        let pending = w.cluster.pending().len();
        let greedy = plan_cluster(&w.cluster, cat, &weights, Solver::Greedy).expect("the greedy plan");
        let greedy_pending = pending_names(&greedy);
        assert!(check::check(&w.cluster, cat, &greedy).valid(), "{name}: the unbudgeted greedy plan is invalid");
        for budget in [Duration::ZERO, Duration::from_millis(1), Duration::from_millis(20)] {
            let planner = Planner { solver: Solver::Milp, time_budget: budget, ..Planner::default() };
            let plan = plan_cluster(&w.cluster, cat, &weights, planner).unwrap_or_else(|e| panic!("{name} at {budget:?}: {e}"));
            let r = check::check(&w.cluster, cat, &plan);
            assert!(r.valid(), "{name} at {budget:?}: the checker rejects the plan: {:#?}", r.violations);
            assert!(r.stated_order_ok, "{name} at {budget:?}: the bind order does not replay: {:?}", r.notes);
            assert_eq!(plan.placements.len() + plan.unschedulable.len() + plan.deferred.len(), pending, "{name} at {budget:?}: every pending pod appears once");
            let mut seen: BTreeSet<&str> = plan.placements.iter().map(|p| p.pod.as_str()).collect();
            seen.extend(plan.unschedulable.iter().map(|u| u.pod.as_str()));
            seen.extend(plan.deferred.iter().map(String::as_str));
            assert_eq!(seen.len(), pending, "{name} at {budget:?}: a pod is listed twice");
            let lost: Vec<String> = pending_names(&plan).difference(&greedy_pending).cloned().collect();
            assert!(lost.is_empty(), "{name} at {budget:?}: pods greedy places are reported unschedulable: {lost:?}");
            let detail = &plan.solver.detail;
            if !plan.deferred.is_empty() {
                assert!(plan.placements.len() >= 256, "{name} at {budget:?}: a cut batch places 256 pods first, placed {}", plan.placements.len());
                assert_eq!(plan.totals.pods_deferred, plan.deferred.len());
                assert!(detail.contains(&format!("{} pods deferred to the next batch", plan.deferred.len())), "{name} at {budget:?}: {detail}");
            }
            if budget.is_zero() {
                assert!(detail.contains("fast pass"), "{name}: a zero budget must place every pod by the fast pass: {detail}");
                assert!(!plan.deferred.is_empty() || pending <= 256, "{name}: a zero budget cuts the batch after 256 pods: {detail}");
            }
        }
    }
}
