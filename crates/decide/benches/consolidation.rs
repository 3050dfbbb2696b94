//! Consolidation decision time on a 1,000-node cluster (issue 17's measurement), with the greedy
//! planner and with the default planner (MILP, 1 s budget per evaluation, as the controller runs it).
//!
//! The cluster: 1,000 m5.xlarge on-demand nodes over three zones in one `WhenEmptyOrUnderutilized`
//! pool (budget 10 %); every third node holds one 500m pod (12.5 % of its CPU), the others four
//! (50 %), all owned by ReplicaSets: many nodes are worth consolidating, so the search uses all of
//! its evaluations (`Settings::max_evaluations`, 16).
//!
//! Run: `cargo bench -p stowage-decide --bench consolidation`. Times are for this machine only.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use stowage_core::solve::{Planner, Solver};
use stowage_core::weights::Weights;
use stowage_decide::consolidation::{Consolidation, Input, Outcome, Settings};
use stowage_decide::provision::{self, quantities};

const NODES: usize = 1_000;

fn cluster() -> stowage_input::Workload {
    let catalog = stowage_input::catalog::default_catalog();
    let t = catalog.get("m5.xlarge").expect("m5.xlarge in the catalog");
    let mut items: Vec<Value> = vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
            "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
                     "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                         {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}]}}}}),
    ];
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    for i in 0..NODES {
        let name = format!("n{i:04}");
        items.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.xlarge", "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "np",
                "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true", "topology.kubernetes.io/zone": zones[i % 3]}},
            "spec": {"providerID": format!("aws:///{}/i-{name}", zones[i % 3])},
            "status": {"allocatable": quantities(&t.allocatable()), "capacity": quantities(&t.capacity), "conditions": [{"type": "Ready", "status": "True"}]}}));
        for j in 0..if i % 3 == 0 { 1 } else { 4 } {
            let pod = format!("web-{i}-{j}");
            items.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": "default", "uid": format!("uid-{pod}"), "labels": {"app": format!("web-{}", i % 20)},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("web-{}", i % 20), "uid": format!("rs-{}", i % 20), "controller": true}]},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]},
                "status": {"phase": "Running"}}));
        }
    }
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).expect("json");
    stowage_input::load_texts([(Path::new("consolidation-1000.json"), text.as_str())]).expect("the generated cluster loads")
}

fn decide(w: &stowage_input::Workload, planner: Planner) -> Outcome {
    let weights = Weights::default();
    let settings = Settings::default();
    let input = Input {
        base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: stowage_input::catalog::default_catalog(), weights: &weights, max_instance_types: 20, batch: "bench" },
        settings: &settings,
    };
    let mut c: Consolidation<Duration> = Consolidation::default();
    c.observe(&w.cluster, Duration::ZERO);
    let mut p = planner;
    c.decide(&input, &mut p, Duration::from_secs(1)).expect("a decision")
}

fn consolidation_benches(c: &mut Criterion) {
    let w = cluster();
    let mut g = c.benchmark_group("consolidation-1000-nodes");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(100));
    for (name, planner) in [("greedy", Planner { solver: Solver::Greedy, ..Planner::default() }), ("milp-1s", Planner::default())] {
        let o = decide(&w, planner);
        assert!(matches!(o, Outcome::Consolidate(_)), "{name}: the cluster is meant to be consolidated: {o:?}");
        g.bench_function(name, |b| b.iter(|| black_box(decide(black_box(&w), planner))));
    }
    g.finish();
}

criterion_group!(benches, consolidation_benches);
criterion_main!(benches);
