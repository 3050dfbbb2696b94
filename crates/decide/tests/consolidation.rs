//! Table tests for `stowage_decide::consolidation`, one per rule, on real YAML through
//! `stowage_input`, the real planners (greedy, and the MILP with HiGHS), every decision's placement of
//! the displaced pods judged by `stowage_core::check`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use stowage_core::domain::catalog::Catalog;
use stowage_core::solve::{Planner, Solver};
use stowage_core::weights::Weights;
use stowage_decide::consolidation::{Consolidation, Decision, Input, Outcome, Settings, displaced_cluster};
use stowage_decide::provision::{self, quantities};
use stowage_input::Workload;

fn catalog() -> &'static Catalog {
    stowage_input::catalog::default_catalog()
}

fn nodeclass() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}})
}

/// A NodePool; `families` empty means any family.
fn nodepool(policy: &str, after: &str, budgets: Value, capacity: &str, families: &[&str]) -> Value {
    let mut reqs = vec![json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]}), json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]})];
    if !families.is_empty() {
        reqs.push(json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families}));
    }
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
        "spec": {"disruption": {"consolidationPolicy": policy, "consolidateAfter": after, "budgets": budgets},
                 "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": reqs}}}})
}

fn node(name: &str, it: &str, capacity: &str, annotations: Value) -> Value {
    let t = catalog().get(it).unwrap();
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": annotations, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": it, "karpenter.sh/capacity-type": capacity, "karpenter.sh/nodepool": "np",
            "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true", "topology.kubernetes.io/zone": "us-east-1a",
            "karpenter.k8s.aws/instance-family": it.split('.').next().unwrap()}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
        "status": {"allocatable": quantities(&t.allocatable()), "capacity": quantities(&t.capacity), "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A Running pod of ReplicaSet `web` (or bare with `owner: false`).
fn pod(name: &str, node: &str, cpu: &str, owner: bool, annotations: Value) -> Value {
    let owners = if owner { json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true}]) } else { json!([]) };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": "web"}, "annotations": annotations, "ownerReferences": owners},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Running"}})
}

fn load(items: Vec<Value>) -> Workload {
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    stowage_input::load_texts([(Path::new("test.yaml"), text.as_str())]).unwrap()
}

/// Three m5.xlarge nodes with one 500m pod each, in a pool of m5 on-demand nodes.
fn three_half_empty(pool: Value, node_annotations: [Value; 3], pod_annotations: [Value; 3]) -> Vec<Value> {
    let [na, nb, nc] = node_annotations;
    let [pa, pb, pc] = pod_annotations;
    vec![
        nodeclass(),
        pool,
        node("a", "m5.xlarge", "on-demand", na),
        node("b", "m5.xlarge", "on-demand", nb),
        node("c", "m5.xlarge", "on-demand", nc),
        pod("web-a", "a", "500m", true, pa),
        pod("web-b", "b", "500m", true, pb),
        pod("web-c", "c", "500m", true, pc),
    ]
}

fn m5_pool(policy: &str, after: &str, budgets: Value) -> Value {
    nodepool(policy, after, budgets, "on-demand", &["m5"])
}

fn none3() -> [Value; 3] {
    [json!({}), json!({}), json!({})]
}

fn greedy() -> Planner {
    Planner { solver: Solver::Greedy, ..Planner::default() }
}

/// Observes at 0 and decides at `at` seconds.
fn decide_with(w: &Workload, settings: &Settings, planner: Planner, at: u64) -> Outcome {
    decide_weighted(w, settings, &Weights::default(), planner, at)
}

/// The default weights with consolidation's `podMoveCost` at `cost`.
fn move_cost(cost: f64) -> Weights {
    let mut w = Weights::default();
    w.consolidation.pod_move_cost = cost;
    w
}

fn decide_weighted(w: &Workload, settings: &Settings, weights: &Weights, planner: Planner, at: u64) -> Outcome {
    let mut c: Consolidation<Duration> = Consolidation::default();
    c.observe(&w.cluster, Duration::ZERO);
    let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights, max_instance_types: 20, batch: "consolidation-1" }, settings };
    let mut p = planner;
    c.decide(&input, &mut p, Duration::from_secs(at)).unwrap()
}

fn decide(w: &Workload) -> Outcome {
    decide_with(w, &Settings::default(), greedy(), 0)
}

/// The decision, with its displaced pods' placement judged by the checker and its costs consistent.
fn consolidated(o: Outcome) -> Decision {
    let Outcome::Consolidate(d) = o else { panic!("expected a consolidation, got {o:?}") };
    let report = stowage_core::check::check(&d.planned_on, catalog(), &d.replacements.plan);
    assert!(report.valid(), "the checker rejects the displaced pods' placement: {:?}", report.violations);
    let left = stowage_core::check::scheduler_leaves(&d.planned_on, catalog(), &d.replacements.plan);
    assert!(left.is_empty(), "kube-scheduler's own order leaves displaced pods: {left:?}");
    let moved: usize = d.remove.iter().map(|r| r.pods.len()).sum();
    assert_eq!(d.replacements.plan.placements.len(), moved, "every displaced pod is placed");
    assert!(d.replacements.unschedulable.is_empty());
    assert!(d.saving - d.disruption_cost >= Weights::default().consolidation.min_saving - 1e-12);
    assert!(d.cost_after + 1e-9 >= d.lower_bound, "cost after {} is below the lower bound {}", d.cost_after, d.lower_bound);
    assert!(d.cost_after < d.cost_before);
    *d
}

fn removed(d: &Decision) -> Vec<&str> {
    d.remove.iter().map(|r| r.node.as_str()).collect()
}

#[test]
fn underutilised_nodes_are_replaced_by_one_cheaper_node() {
    let w = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    let d = consolidated(decide(&w));
    assert_eq!(removed(&d), vec!["a", "b", "c"]);
    assert_eq!(d.replacements.claims.len(), 1);
    let claim = &d.replacements.claims[0];
    assert_eq!(claim.instance_type, "m5.large", "the cheapest m5 that holds 1.5 cpu");
    assert_eq!(claim.pods.len(), 3);
    assert_eq!(d.evaluations, 1, "the node-set program's proposal was the decision, and nothing added to it paid");
    let program = d.node_set.as_ref().expect("the node-set program ran");
    assert_eq!((program.remove, program.error.as_deref()), (3, None));
    let bound = program.lower_bound.expect("a proven bound");
    assert!(bound <= d.cost_after + d.disruption_cost + 1e-9, "the program's bound {bound} is above the decision's cost and disruption");
    // Without the program, the augmentation finds the same set, one candidate at a time.
    let alone = Settings { node_set_budget: Duration::ZERO, ..Settings::default() };
    let by_augmentation = consolidated(decide_with(&w, &alone, greedy(), 0));
    assert_eq!(removed(&by_augmentation), vec!["a", "b", "c"]);
    assert!(by_augmentation.evaluations >= 3, "single-node, then multi-node candidate sets were planned");
    assert!(by_augmentation.node_set.is_none());
    // 1.5 cpu at the cheapest cost per allocatable millicore of the NodePool's m5 on-demand offerings
    // (about $0.048/h per core): the pool's offerings, not the whole catalog's (spot, Graviton: ten
    // times less), bound the replacement.
    assert!(d.lower_bound > 0.07 && d.lower_bound <= d.cost_after, "lower bound {}", d.lower_bound);
    // The same decision through the MILP (HiGHS).
    let milp = consolidated(decide_with(&w, &Settings::default(), Planner { solver: Solver::Milp, ..Planner::default() }, 0));
    assert_eq!(removed(&milp), vec!["a", "b", "c"]);
    assert_eq!(milp.replacements.claims.iter().map(|c| c.instance_type.as_str()).collect::<Vec<_>>(), vec!["m5.large"]);
}

/// `n` m5.xlarge nodes (3.92 allocatable cpu) with one 500m pod each.
fn half_empty(n: usize) -> Workload {
    let mut items = vec![nodeclass(), m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}]))];
    for i in 0..n {
        items.push(node(&format!("n{i}"), "m5.xlarge", "on-demand", json!({})));
        items.push(pod(&format!("web-{i}"), &format!("n{i}"), "500m", true, json!({})));
    }
    load(items)
}

#[test]
fn the_node_set_program_chooses_the_whole_set_in_one_evaluation() {
    // Six pods of 500m: the cheapest cluster keeps one m5.xlarge and moves five pods onto it (a new
    // node for all six would be an m5.xlarge too, and move one pod more).
    let w = half_empty(6);
    let one = Settings { max_evaluations: 1, ..Settings::default() };
    let d = consolidated(decide_with(&w, &one, greedy(), 0));
    assert_eq!(d.remove.len(), 5, "removed {:?}", removed(&d));
    assert!(d.replacements.claims.is_empty(), "the pods fit the kept node");
    assert_eq!(d.evaluations, 1);
    let program = d.node_set.as_ref().expect("the node-set program ran");
    assert_eq!((program.remove, program.error.as_deref()), (5, None));
    let bound = program.lower_bound.expect("a proven bound");
    assert!((bound - (d.cost_after + d.disruption_cost)).abs() < 1e-6, "the program proves its plan optimal: bound {bound}, cost {} + disruption {}", d.cost_after, d.disruption_cost);
    // The same limit without the program: one evaluation, one node.
    let alone = Settings { max_evaluations: 1, node_set_budget: Duration::ZERO, ..Settings::default() };
    assert_eq!(consolidated(decide_with(&w, &alone, greedy(), 0)).remove.len(), 1);
    // Through the MILP planner as the oracle, the same set.
    assert_eq!(consolidated(decide_with(&w, &one, Planner { solver: Solver::Milp, ..Planner::default() }, 0)).remove.len(), 5);
}

#[test]
fn the_node_set_program_keeps_to_the_budget_and_the_pdb() {
    // A budget of two nodes: the program removes two, and moves their pods to kept nodes.
    let mut items = vec![nodeclass(), m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "2"}]))];
    for i in 0..6 {
        items.push(node(&format!("n{i}"), "m5.xlarge", "on-demand", json!({})));
        items.push(pod(&format!("web-{i}"), &format!("n{i}"), "500m", true, json!({})));
    }
    let d = consolidated(decide(&load(items.clone())));
    assert_eq!(d.remove.len(), 2);
    assert_eq!(d.node_set.as_ref().map(|p| p.remove), Some(2));
    // A PDB that lets one pod of `web` go at a time: one node.
    items.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}));
    let d = consolidated(decide(&load(items)));
    assert_eq!(d.remove.len(), 1);
    assert_eq!(d.node_set.as_ref().map(|p| p.remove), Some(1));
}

#[test]
fn a_workload_moved_recently_costs_more_to_move_again() {
    // Three m5.xlarge ($0.192/h) with a 500m pod each, moving a pod costs $0.10/h: the best is to keep
    // one node and move two pods onto it (saves $0.384/h for $0.20/h; all three onto an m5.large saves
    // $0.48/h for $0.30/h). Just after web was moved every pod costs about twice as much and nothing
    // pays; halfway through the hour 1.5 times; after the hour, as before.
    let w = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    let (settings, weights) = (Settings::default(), move_cost(0.1));
    let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights: &weights, max_instance_types: 20, batch: "c" }, settings: &settings };
    let mut memory: Consolidation<Duration> = Consolidation::default();
    memory.observe(&w.cluster, Duration::ZERO);
    let mut planner = greedy();
    let first = consolidated(memory.decide(&input, &mut planner, Duration::ZERO).unwrap());
    assert_eq!(first.remove.len(), 2);
    assert!((first.disruption_cost - 0.2).abs() < 1e-9, "{}", first.disruption_cost);
    memory.moved(&first, Duration::ZERO);
    assert!(matches!(memory.decide(&input, &mut planner, Duration::from_secs(60)).unwrap(), Outcome::Nothing { .. }), "web was just moved: no move pays");
    let later = consolidated(memory.decide(&input, &mut planner, Duration::from_secs(1800)).unwrap());
    assert!((later.disruption_cost - 0.3).abs() < 1e-9, "two pods at 1.5 × $0.10/h: {}", later.disruption_cost);
    let forgotten = consolidated(memory.decide(&input, &mut planner, Duration::from_secs(3600)).unwrap());
    assert!((forgotten.disruption_cost - 0.2).abs() < 1e-9, "{}", forgotten.disruption_cost);
}

/// A Running pod of Job `batch` that started at `started` (Unix seconds).
fn job_pod(name: &str, node: &str, started: i64) -> Value {
    let mut p = pod(name, node, "500m", true, json!({}));
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "batch", "uid": "job-uid", "controller": true}]);
    p["metadata"]["labels"] = json!({"job-name": "batch"});
    let at = k8s_openapi::jiff::Timestamp::from_second(started).unwrap();
    p["status"] = json!({"phase": "Running", "startTime": at.to_string()});
    p
}

#[test]
fn a_running_jobs_lost_work_is_charged_by_how_long_it_has_run() {
    // Three m5.xlarge ($0.192/h), each with a 500m pod of a Job started at `t0`. Moving one throws
    // away its run time × its share of the node × $0.192/h, charged as repaid within 60 s. After a
    // minute that is share × $0.192/h a pod, and consolidation goes ahead; after an hour it is
    // 60 × share × $0.192/h (about $1.47/h a pod), more than any set saves, and the nodes stay.
    let t0 = 1_800_000_000;
    let mut items = vec![nodeclass(), m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}]))];
    for n in ["a", "b", "c"] {
        items.push(node(n, "m5.xlarge", "on-demand", json!({})));
        items.push(job_pod(&format!("batch-{n}"), n, t0));
    }
    let w = load(items);
    let alloc = catalog().get("m5.xlarge").unwrap().allocatable();
    let share = (500.0 / alloc.get("cpu") as f64).max(256.0 * 1024.0 * 1024.0 / alloc.get("memory") as f64);
    let settings = Settings::default();
    let at = |weights: &Weights, age: i64| {
        let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights, max_instance_types: 20, batch: "c" }, settings: &settings };
        let mut memory: Consolidation<Duration> = Consolidation::default();
        memory.observe(&w.cluster, Duration::ZERO);
        memory.decide_at(&input, &mut greedy(), Duration::from_secs(age as u64), Some(t0 + age)).unwrap()
    };
    let young = consolidated(at(&Weights::default(), 60));
    let moved: usize = young.remove.iter().map(|r| r.pods.len()).sum();
    let expected = moved as f64 * (0.002 + 60.0 / 60.0 * share * 0.192);
    assert!((young.disruption_cost - expected).abs() < 1e-9, "{moved} pods a minute old: disruption {} against {expected}", young.disruption_cost);
    assert!(matches!(at(&Weights::default(), 3600), Outcome::Nothing { .. }), "an hour's work on each node is not thrown away");
    let mut off = Weights::default();
    off.consolidation.job_lost_work_payback_seconds = 0.0;
    let old = consolidated(at(&off, 3600));
    assert!((old.disruption_cost - 0.002 * old.remove.len() as f64).abs() < 1e-9, "with the charge off a Job's pod is an ordinary pod: {}", old.disruption_cost);
}

#[test]
fn when_empty_pools_never_consolidate_non_empty_nodes() {
    let w = load(three_half_empty(m5_pool("WhenEmpty", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    assert!(matches!(decide(&w), Outcome::Nothing { candidates: 0, .. }));
}

/// Balanced approves a move whose share of the pool's price saved is at least half its share of the
/// pool's disruption: three half-empty m5.xlarge nodes (one pod each) into one m5.large saves
/// $0.48 of $0.576/h (0.83) for all the pool's disruption (6 of 6): score 0.83 >= 0.5.
#[test]
fn balanced_approves_a_move_that_saves_more_than_it_disrupts() {
    let w = load(three_half_empty(m5_pool("Balanced", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    let d = consolidated(decide(&w));
    assert_eq!(removed(&d), vec!["a", "b", "c"]);
    let score = d.balanced.get("np").expect("the Balanced pool is scored");
    assert!(score.approved() && (score.value() - (0.48 / 0.576)).abs() < 0.02, "score {}", score.value());
    assert!(d.reason().contains("Balanced pool np: score"), "{}", d.reason());
    let plain = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    assert!(consolidated(decide(&plain)).balanced.is_empty(), "other policies are not scored");
}

/// An m5.2xlarge holding six 500m pods next to two m5.2xlarge nodes each filled by one 7-cpu pod: the
/// six pods need a new m5.xlarge (the full nodes take one each at most), saving $0.192 of the pool's
/// $1.152/h (0.17) for 7 of its 11 units of disruption (0.64): score 0.26 < 0.5. Under
/// WhenEmptyOrUnderutilized the same move is taken.
fn crowded_pool(policy: &str) -> Workload {
    let mut items = vec![nodeclass(), m5_pool(policy, "0s", json!([{"nodes": "100%"}]))];
    for n in ["a", "b", "c"] {
        items.push(node(n, "m5.2xlarge", "on-demand", json!({})));
    }
    for i in 0..6 {
        items.push(pod(&format!("web-a{i}"), "a", "500m", true, json!({})));
    }
    items.push(pod("big-b", "b", "7", true, json!({})));
    items.push(pod("big-c", "c", "7", true, json!({})));
    load(items)
}

#[test]
fn balanced_rejects_a_move_whose_disruption_outweighs_its_saving() {
    let taken = consolidated(decide(&crowded_pool("WhenEmptyOrUnderutilized")));
    assert_eq!(removed(&taken), vec!["a"]);
    assert!(taken.saving > 0.15, "the move saves ${}/h", taken.saving);
    match decide(&crowded_pool("Balanced")) {
        Outcome::Nothing { candidates, .. } => assert!(candidates >= 1, "a is a candidate (its outright deletion would pass), its best move does not"),
        o => panic!("Balanced took a move it must reject: {o:?}"),
    }
    // Through the MILP (HiGHS) too.
    let milp = Planner { solver: Solver::Milp, ..Planner::default() };
    assert!(matches!(decide_with(&crowded_pool("Balanced"), &Settings::default(), milp, 0), Outcome::Nothing { .. }));
}

/// Empty nodes are the emptiness decision's under every policy, Balanced included: never scored,
/// never a consolidation candidate, removed once consolidateAfter has passed.
#[test]
fn balanced_pools_lose_their_empty_nodes_without_a_score() {
    let mut items = three_half_empty(m5_pool("Balanced", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    items.push(node("e", "m5.2xlarge", "on-demand", json!({})));
    let w = load(items);
    let d = consolidated(decide(&w));
    assert!(!removed(&d).contains(&"e"), "the empty node is not consolidation's");
    let pool = w.objects.nodepools[0].obj.clone();
    let pools = [("np".to_string(), stowage_decide::disruption::pool_policy(&pool))].into();
    let cand = |name: &str, pods: usize| stowage_decide::disruption::Candidate {
        nodeclaim: name.into(),
        nodepool: "np".into(),
        created: Some(Duration::ZERO),
        expire_after: None,
        deleting: false,
        initialized: true,
        workload_pods: pods,
        do_not_disrupt: false,
        nominated: false,
    };
    let mut empty: stowage_decide::disruption::Disruption<Duration> = Default::default();
    let actions = empty.decide(&[cand("a", 1), cand("b", 1), cand("c", 1), cand("e", 0)], &pools, Duration::ZERO);
    assert_eq!(actions.iter().map(|a| a.nodeclaim.as_str()).collect::<Vec<_>>(), vec!["e"]);
}

#[test]
fn consolidate_after_counts_from_the_last_change_of_the_nodes_pods_and_never_disables() {
    let w = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "10m", json!([{"nodes": "100%"}])), none3(), none3()));
    assert!(matches!(decide_with(&w, &Settings::default(), greedy(), 599), Outcome::Nothing { candidates: 0, .. }));
    consolidated(decide_with(&w, &Settings::default(), greedy(), 600));
    let mut c: Consolidation<Duration> = Consolidation::default();
    c.observe(&w.cluster, Duration::ZERO);
    assert_eq!(c.next_due(&w.cluster, &w.objects), Some(Duration::from_secs(600)));
    // A pod leaving node c restarts c's timer only.
    let mut later = w.cluster.clone();
    later.pods.retain(|p| p.name != "web-c");
    c.observe(&later, Duration::from_secs(300));
    assert_eq!(c.next_due(&later, &w.objects), Some(Duration::from_secs(600)));
    let never = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "Never", json!([{"nodes": "100%"}])), none3(), none3()));
    assert!(matches!(decide_with(&never, &Settings::default(), greedy(), 1_000_000), Outcome::Nothing { candidates: 0, .. }));
}

#[test]
fn do_not_disrupt_on_a_pod_or_a_node_blocks_that_node() {
    let dnd = json!({"karpenter.sh/do-not-disrupt": "true"});
    let on_pod = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), [dnd.clone(), json!({}), json!({})]));
    let d = consolidated(decide(&on_pod));
    assert_eq!(removed(&d), vec!["b", "c"], "a keeps its pod; b's and c's pods move to a");
    assert!(d.replacements.claims.is_empty());
    assert!(d.replacements.nominations.iter().all(|(_, n)| *n == stowage_decide::provision::Nominated::Node("a".into())));
    let on_node = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), [json!({}), dnd.clone(), json!({})], none3()));
    assert!(!removed(&consolidated(decide(&on_node))).contains(&"b"));
    let everywhere = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), [dnd.clone(), dnd.clone(), dnd], none3()));
    assert!(matches!(decide(&everywhere), Outcome::Nothing { candidates: 0, .. }));
}

#[test]
fn disruption_budgets_bound_the_nodes_removed_and_reasons_select_budgets() {
    let one = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "1"}])), none3(), none3()));
    let d = consolidated(decide(&one));
    assert_eq!(d.remove.len(), 1);
    assert!(d.replacements.claims.is_empty(), "its pod moves to another node");
    let zero = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "0", "reasons": ["Underutilized"]}])), none3(), none3()));
    assert!(matches!(decide(&zero), Outcome::Nothing { .. }));
    // A budget for other reasons does not limit consolidation of underutilised nodes.
    let other = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "0", "reasons": ["Drifted"]}])), none3(), none3()));
    assert_eq!(consolidated(decide(&other)).remove.len(), 3);
    // No budgets field: Karpenter's default 10%, of 3 nodes rounded up to one.
    let default = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", Value::Null), none3(), none3()));
    assert_eq!(consolidated(decide(&default)).remove.len(), 1);
    // `budgets: []`: no budget at all, so no limit (Karpenter defaults only an absent field).
    let unlimited = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([])), none3(), none3()));
    assert_eq!(consolidated(decide(&unlimited)).remove.len(), 3);
}

#[test]
fn pod_disruption_budgets_bound_simultaneous_evictions() {
    let pdb = |spec: Value, status: Value| json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"}, "spec": spec, "status": status});
    let mut items = three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    items.push(pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}), Value::Null));
    let d = consolidated(decide(&load(items)));
    assert_eq!(d.remove.len(), 1, "one web pod may be evicted at a time");
    let mut items = three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    items.push(pdb(json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}), Value::Null));
    assert_eq!(consolidated(decide(&load(items))).remove.len(), 2, "two of three may go with minAvailable 1");
    let mut items = three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    items.push(pdb(
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
        json!({"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3, "observedGeneration": 1}),
    ));
    assert!(matches!(decide(&load(items)), Outcome::Nothing { .. }), "the PDB's status allows no eviction now");
}

#[test]
fn bare_pods_block_their_node() {
    let mut items = three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    items.push(pod("bare", "a", "100m", false, json!({})));
    let d = consolidated(decide(&load(items)));
    assert!(!removed(&d).contains(&"a"));
    assert_eq!(removed(&d), vec!["b", "c"]);
}

#[test]
fn pending_pods_mean_the_cluster_is_not_settled() {
    let mut items = three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3());
    let mut p = pod("waiting", "", "100m", true, json!({}));
    p["spec"].as_object_mut().unwrap().remove("nodeName");
    p["status"]["phase"] = json!("Pending");
    items.push(p);
    let w = load(items);
    let mut c: Consolidation<Duration> = Consolidation::default();
    c.observe(&w.cluster, Duration::ZERO);
    assert_eq!(c.next_due(&w.cluster, &w.objects), Some(Duration::ZERO));
    let weights = Weights::default();
    let input =
        Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights: &weights, max_instance_types: 20, batch: "b" }, settings: &Settings::default() };
    assert!(matches!(c.decide(&input, &mut greedy(), Duration::ZERO).unwrap(), Outcome::NotSettled));
    // The round is remembered: not due again until the cluster changes (a loop on the simulated clock
    // would otherwise ask again at the same instant forever).
    assert_eq!(c.next_due(&w.cluster, &w.objects), None);
    let mut bound = w.cluster.clone();
    let waiting = bound.pods.iter_mut().find(|p| p.name == "waiting").unwrap();
    waiting.node_name = Some("a".into());
    waiting.phase = stowage_core::domain::pod::PodPhase::Running;
    c.observe(&bound, Duration::from_secs(5));
    assert_eq!(c.next_due(&bound, &w.objects), Some(Duration::ZERO), "b and c are due again (a's timer restarted at 5s)");
}

#[test]
fn the_saving_must_beat_the_disruption_cost_by_the_margin() {
    let w = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    assert!(matches!(decide_weighted(&w, &Settings::default(), &move_cost(1.0), greedy(), 0), Outcome::Nothing { .. }), "moving a pod costs more than any node saves");
    // A high pod-deletion-cost makes one pod dear to move; its node stays.
    let dear_pod = json!({"controller.kubernetes.io/pod-deletion-cost": "2147483647"});
    let w2 = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), [dear_pod, json!({}), json!({})]));
    let d = consolidated(decide_weighted(&w2, &Settings::default(), &move_cost(0.02), greedy(), 0));
    assert_eq!(removed(&d), vec!["b", "c"]);
    // The margin: the best move nets $0.48 − 3 × $0.002 = $0.474/h, so a minSaving of $0.50/h keeps
    // everything, one of $0.40/h does not.
    let mut margin = Weights::default();
    margin.consolidation.min_saving = 0.5;
    assert!(matches!(decide_weighted(&w, &Settings::default(), &margin, greedy(), 0), Outcome::Nothing { .. }));
    margin.consolidation.min_saving = 0.4;
    consolidated(decide_weighted(&w, &Settings::default(), &margin, greedy(), 0));
}

/// One m5.2xlarge spot node holding a single small pod, in a spot-only pool.
fn lone_spot(families: &[&str]) -> Workload {
    load(vec![
        nodeclass(),
        nodepool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}]), "spot", families),
        node("s", "m5.2xlarge", "spot", json!({})),
        pod("web-s", "s", "250m", true, json!({})),
    ])
}

#[test]
fn spot_to_spot_needs_the_gate_a_single_node_and_fifteen_cheaper_types() {
    let gate = Settings { spot_to_spot: true, ..Settings::default() };
    assert!(matches!(decide_with(&lone_spot(&[]), &Settings::default(), greedy(), 0), Outcome::Nothing { .. }), "the feature gate is off by default");
    let d = consolidated(decide_with(&lone_spot(&[]), &gate, greedy(), 0));
    assert_eq!(removed(&d), vec!["s"]);
    assert_eq!(d.replacements.claims.len(), 1);
    assert_eq!(d.replacements.claims[0].capacity_type, "spot");
    // Only m5 types: fewer than 15 are cheaper than an m5.2xlarge.
    assert!(matches!(decide_with(&lone_spot(&["m5"]), &gate, greedy(), 0), Outcome::Nothing { .. }));
}

#[test]
fn the_displaced_cluster_has_the_nodes_gone_and_their_pods_pending() {
    let w = load(three_half_empty(m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])), none3(), none3()));
    let c = displaced_cluster(&w.cluster, &["a".to_string()].into());
    assert_eq!(c.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), vec!["b", "c"]);
    let pending: Vec<&str> = c.pending().into_iter().map(|id| c.pod(id).name.as_str()).collect();
    assert_eq!(pending, vec!["web-a"]);
}

/// Drift's forced replacement (`consolidation::replace`): the node goes whatever it saves, its pods
/// placed where the checker accepts; a pod that cannot move keeps it.
#[test]
fn a_forced_replacement_moves_the_pods_whatever_it_saves() {
    let w = load(three_half_empty(m5_pool("WhenEmpty", "0s", json!([])), none3(), none3()));
    let weights = Weights::default();
    let settings = Settings::default();
    let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights: &weights, max_instance_types: 20, batch: "drift-1" }, settings: &settings };
    let mut p = greedy();
    let d = stowage_decide::consolidation::replace(&input, &mut p, "a").unwrap().expect("node a is replaceable");
    assert_eq!(removed(&d), vec!["a"]);
    let report = stowage_core::check::check(&d.planned_on, catalog(), &d.replacements.plan);
    assert!(report.valid(), "{:?}", report.violations);
    assert_eq!(d.replacements.plan.placements.len(), 1, "the displaced pod is placed");
    assert!(d.replacements.claims.is_empty(), "it fits on b or c: no new node");
    // A bare pod (no controller) cannot move: no forced replacement.
    let mut items = three_half_empty(m5_pool("WhenEmpty", "0s", json!([])), none3(), none3());
    items.push(pod("bare", "b", "100m", false, json!({})));
    let w = load(items);
    let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, ..input.base }, settings: &settings };
    assert!(stowage_decide::consolidation::replace(&input, &mut p, "b").unwrap().is_none());
}

/// kube-scheduler's own order must bind every displaced pod, not just the plan's. `keep` (m5.xlarge,
/// 3.92 cpu) holds a bare 2-cpu pod, so 1.92 cpu free and never a candidate; `c1` (m5.xlarge) holds
/// web-a, `c2` (m5.2xlarge) web-b, one of 1.5 and one of 3 cpu. Removing both with one new m5.xlarge
/// saves the most: the small pod on keep, the big one on the new node, a valid plan. But when the
/// small pod comes first, kube-scheduler sends it to the emptier new node, and the big one then fits
/// nowhere. Listed small first, the queue's order shows it; listed big first, the queue's order binds
/// both, but recreated pods may arrive smallest first, which `scheduler_leaves` tries when the plan
/// launches nodes. Either way the decision removes one node only, and kube-scheduler's order binds it.
#[test]
fn a_set_kube_schedulers_own_order_cannot_bind_is_not_acted_on() {
    for (small_first, a_cpu, b_cpu) in [(true, "1500m", "3"), (false, "3", "1500m")] {
        let big = if small_first { "default/web-b" } else { "default/web-a" };
        let w = load(vec![
            nodeclass(),
            m5_pool("WhenEmptyOrUnderutilized", "0s", json!([{"nodes": "100%"}])),
            node("keep", "m5.xlarge", "on-demand", json!({})),
            node("c1", "m5.xlarge", "on-demand", json!({})),
            node("c2", "m5.2xlarge", "on-demand", json!({})),
            pod("web-a", "c1", a_cpu, true, json!({})),
            pod("web-b", "c2", b_cpu, true, json!({})),
            pod("pinned", "keep", "2", false, json!({})),
        ]);
        // The plan for both nodes gone is valid, and kube-scheduler leaves the big pod of it.
        let both = displaced_cluster(&w.cluster, &["c1".to_string(), "c2".to_string()].into_iter().collect());
        let input = provision::Input { cluster: &both, objects: &w.objects, catalog: catalog(), weights: &Weights::default(), max_instance_types: 20, batch: "b" };
        let plan = provision::decide(&input, &mut greedy()).unwrap();
        assert!(plan.unschedulable.is_empty());
        assert_eq!(plan.claims.iter().map(|c| c.instance_type.as_str()).collect::<Vec<_>>(), ["m5.xlarge"]);
        assert!(stowage_core::check::check(&both, catalog(), &plan.plan).valid());
        let left = stowage_core::check::scheduler_leaves(&both, catalog(), &plan.plan);
        assert_eq!(left.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), [big], "small first {small_first}: {left:?}");
        // So each planner's decision removes one node, a set kube-scheduler binds.
        for planner in [greedy(), Planner { solver: Solver::Milp, ..Planner::default() }] {
            let d = consolidated(decide_with(&w, &Settings::default(), planner, 0));
            assert_eq!(d.remove.len(), 1, "small first {small_first}: {:?}", removed(&d));
        }
    }
}

/// A forced replacement (drift) goes ahead even when kube-scheduler's own order would leave a displaced
/// pod (it waits for the next batch, as under Karpenter): node `x` (m5.2xlarge) holds web-a (1.5 cpu,
/// first in the queue) and web-b (3 cpu); `keep` has 1.92 cpu free. The plan puts web-a on keep and
/// web-b on a new m5.xlarge; kube-scheduler would send web-a to the new node and leave web-b.
#[test]
fn a_forced_replacement_is_not_held_back_by_kube_schedulers_order() {
    let w = load(vec![
        nodeclass(),
        m5_pool("WhenEmpty", "0s", json!([])),
        node("keep", "m5.xlarge", "on-demand", json!({})),
        node("x", "m5.2xlarge", "on-demand", json!({})),
        pod("web-a", "x", "1500m", true, json!({})),
        pod("web-b", "x", "3", true, json!({})),
        pod("pinned", "keep", "2", false, json!({})),
    ]);
    let (weights, settings) = (Weights::default(), Settings::default());
    let input = Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights: &weights, max_instance_types: 20, batch: "drift-1" }, settings: &settings };
    let d = stowage_decide::consolidation::replace(&input, &mut greedy(), "x").unwrap().expect("x is replaced");
    assert_eq!(removed(&d), vec!["x"]);
    assert!(stowage_core::check::check(&d.planned_on, catalog(), &d.replacements.plan).valid());
    assert_eq!(d.replacements.claims.iter().map(|c| c.instance_type.as_str()).collect::<Vec<_>>(), ["m5.xlarge"]);
    let left = stowage_core::check::scheduler_leaves(&d.planned_on, catalog(), &d.replacements.plan);
    assert_eq!(left.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["default/web-b"], "{left:?}");
}
