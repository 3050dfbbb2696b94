//! The provisioning decision carries the plan's minValues into the NodeClaim (issue 15, behaviour 5):
//! the instance-type requirement lists the plan's launch candidates (chosen type first) with the
//! NodePool's minValues, keeps enough of them even above `max_instance_types`, and under BestEffort
//! lowers a relaxed minValues and annotates the NodeClaim `karpenter.sh/nodeclaim-min-values-relaxed`.
//! Real YAML through `stowage_input`, both planners, every plan judged by `stowage_core::check`.

use std::path::Path;

use serde_json::{Value, json};
use stowage_core::domain::catalog::Catalog;
use stowage_core::solve::{Planner, Solver};
use stowage_core::weights::{MinValuesPolicy, Weights};
use stowage_decide::provision::{self, Decision, MIN_VALUES_RELAXED_ANNOTATION};
use stowage_input::Workload;
use stowage_input::api::NodeSelectorRequirementWithMinValues;

fn catalog() -> &'static Catalog {
    stowage_input::catalog::default_catalog()
}

fn load(requirements: Value, cpu: &str) -> Workload {
    let items = vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": requirements}}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
    ];
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    stowage_input::load_texts([(Path::new("test.yaml"), text.as_str())]).unwrap()
}

fn decide(w: &Workload, policy: MinValuesPolicy, max_types: usize, solver: Solver) -> Decision {
    let weights = Weights { min_values_policy: policy, ..Weights::default() };
    let input = provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog(), weights: &weights, max_instance_types: max_types, batch: "b" };
    let mut planner = Planner { solver, ..Planner::default() };
    let d = provision::decide(&input, &mut planner).expect("decides");
    let r = stowage_core::check::check(&w.cluster, catalog(), &d.plan);
    assert!(r.valid(), "{solver:?}: {:#?}", r.violations);
    d
}

fn type_requirement(d: &Decision) -> NodeSelectorRequirementWithMinValues {
    d.claims[0].nodeclaim.spec.requirements.iter().find(|r| r.key == "node.kubernetes.io/instance-type").cloned().expect("an instance-type requirement")
}

const ON_DEMAND: &str = "karpenter.sh/capacity-type";

#[test]
fn the_nodeclaim_keeps_min_values_above_max_instance_types() {
    let w = load(
        json!([{"key": ON_DEMAND, "operator": "In", "values": ["on-demand"]}, {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 5}, {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 3}]),
        "1",
    );
    for solver in [Solver::Greedy, Solver::Milp] {
        let d = decide(&w, MinValuesPolicy::Strict, 2, solver);
        assert_eq!(d.claims.len(), 1, "{solver:?}");
        let req = type_requirement(&d);
        let node = &d.plan.new_nodes[0];
        assert_eq!(req.values[0], node.instance_type, "{solver:?}: the chosen type first");
        assert!(req.values.len() >= 5 && req.min_values == Some(5), "{solver:?}: {req:?}");
        assert!(req.values.iter().all(|t| node.launch_candidates.contains(t)), "{solver:?}: only the plan's candidates");
        let families: std::collections::BTreeSet<&str> = req.values.iter().map(|t| t.split('.').next().unwrap()).collect();
        assert!(families.len() >= 3, "{solver:?}: {families:?}");
        let fam = d.claims[0].nodeclaim.spec.requirements.iter().find(|r| r.key == "karpenter.k8s.aws/instance-family").expect("the pool's family requirement");
        assert_eq!(fam.min_values, Some(3));
        assert!(!d.claims[0].min_values_relaxed(), "{solver:?}");
    }
}

#[test]
fn best_effort_relaxes_and_annotates_strict_leaves_the_pod_pending() {
    // 3 cpu does not fit m5.large (2 vCPU): two of the three listed types remain.
    let w = load(
        json!([{"key": ON_DEMAND, "operator": "In", "values": ["on-demand"]}, {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"], "minValues": 3}]),
        "3",
    );
    for solver in [Solver::Greedy, Solver::Milp] {
        let strict = decide(&w, MinValuesPolicy::Strict, 20, solver);
        assert!(strict.claims.is_empty(), "{solver:?}");
        assert!(strict.unschedulable.iter().any(|(_, why)| why.contains("minValues 3")), "{solver:?}: {:?}", strict.unschedulable);

        let relaxed = decide(&w, MinValuesPolicy::BestEffort, 20, solver);
        assert_eq!(relaxed.claims.len(), 1, "{solver:?}");
        let c = &relaxed.claims[0];
        assert!(c.min_values_relaxed(), "{solver:?}");
        assert_eq!(c.nodeclaim.metadata.annotations.as_ref().unwrap()[MIN_VALUES_RELAXED_ANNOTATION], "true");
        let req = type_requirement(&relaxed);
        assert_eq!(req.values, ["m5.xlarge", "m5.2xlarge"], "{solver:?}");
        assert_eq!(req.min_values, Some(2), "{solver:?}: relaxed to what the candidates keep");
    }
}
