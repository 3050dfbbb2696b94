//! The provisioning decision keeps volume attach limits (issue 15, behaviour 8) into the NodeClaim: the
//! instance types it may launch as are those whose EBS CSI driver takes the node's volumes, so a
//! cheaper type that holds the pods' cpu and memory but not their volumes is not offered. Real YAML
//! through `stowage_input`, the embedded catalog (its EBS limits from the driver's rule), both planners,
//! every plan judged by `stowage_core::check`.

use std::path::Path;

use serde_json::json;
use stowage_core::solve::{Planner, Solver};
use stowage_core::weights::Weights;
use stowage_decide::provision;

#[test]
fn the_nodeclaim_offers_only_types_that_take_its_volumes() {
    // 28 pods with one EBS claim each. By cpu, memory and pods an m5.large ($0.096) takes them all, but
    // its EBS limit is 26; an m7i.large ($0.1008) has a dedicated limit of 31.
    let mut items = vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m7i.large"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}}}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}),
    ];
    for i in 0..28 {
        items.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": format!("data-{i}"), "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "resources": {"requests": {"storage": "1Gi"}}}}));
        items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p-{i}"), "namespace": "default", "uid": format!("uid-{i}")},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": format!("data-{i}")}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
    }
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    let w = stowage_input::load_texts([(Path::new("test.yaml"), text.as_str())]).unwrap();
    let catalog = stowage_input::catalog::default_catalog();
    for solver in [Solver::Greedy, Solver::Milp] {
        let weights = Weights::default();
        let input = provision::Input { cluster: &w.cluster, objects: &w.objects, catalog, weights: &weights, max_instance_types: 20, batch: "b" };
        let d = provision::decide(&input, &mut Planner { solver, ..Planner::default() }).expect("decides");
        let r = stowage_core::check::check(&w.cluster, catalog, &d.plan);
        assert!(r.valid(), "{solver:?}: {:#?}", r.violations);
        assert!(d.plan.unschedulable.is_empty(), "{solver:?}: {:?}", d.plan.unschedulable);
        assert_eq!(d.claims.len(), 1, "{solver:?}: one m7i.large beats two m5.large");
        let types = d.claims[0].nodeclaim.spec.requirements.iter().find(|r| r.key == "node.kubernetes.io/instance-type").expect("an instance-type requirement");
        assert_eq!(types.values, vec!["m7i.large".to_string()], "{solver:?}: m5.large holds the pods but not 28 volumes");
    }
}
