//! The DaemonSets every benchmark node runs (issue 18: "the corpus has no DaemonSets"). Every node of
//! an EKS cluster runs the VPC CNI, kube-proxy and the EBS CSI node plugin, and most run a log and a
//! metrics agent; their requests come off every node's allocatable, which changes which plans are
//! cheap (small nodes pay the overhead once per node). The set below is written into
//! `benches/workloads/daemonsets/eks.json` (`stowage corpus daemonsets`), which every corpus entry
//! loads, and the mixed workloads' existing nodes carry the pods these DaemonSets put on them.
//!
//! Requests, tolerations and node affinity are the published defaults of each manifest (facts; the
//! manifests themselves are not copied):
//!
//! | DaemonSet | namespace | requests per node | tolerates | source |
//! |---|---|---|---|---|
//! | aws-node | kube-system | cpu 25m | every taint | aws/amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml (`resources.requests.cpu: 25m`, node affinity linux, amd64/arm64, not Fargate) |
//! | kube-proxy | kube-system | cpu 100m | every taint | the EKS kube-proxy add-on DaemonSet (`requests.cpu: 100m`) |
//! | ebs-csi-node | kube-system | cpu 10m, memory 40Mi | every taint | kubernetes-sigs/aws-ebs-csi-driver charts values.yaml (`node.resources`, `tolerateAllTaints: true`; the sidecars request nothing; not Fargate, not a1) |
//! | aws-for-fluent-bit | amazon-cloudwatch | cpu 50m, memory 50Mi | none | aws/eks-charts stable/aws-for-fluent-bit values.yaml (`tolerations: []`) |
//! | cloudwatch-agent | amazon-cloudwatch | cpu 400m, memory 400Mi | none | aws-samples/amazon-cloudwatch-container-insights cwagent-daemonset.yaml at 0662c7ef (agent 1.300032.3b392; nodeSelector linux) |
//!
//! On an untainted node that is 585m CPU and 490Mi of memory; on a tainted one (the GPU pools) the two
//! agents without tolerations stay off and 135m / 40Mi remain.

use serde_json::{Value, json};

use crate::BenchError;

/// The node affinity of the EKS add-ons: Linux on amd64 or arm64, never Fargate; `extra` adds
/// expressions (the EBS plugin's a1 exclusion).
fn eks_affinity(extra: &[Value]) -> Value {
    let mut exprs = vec![
        json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}),
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}),
        json!({"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]}),
    ];
    exprs.extend(extra.iter().cloned());
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}})
}

fn requests(cpu: &str, memory: Option<&str>) -> Value {
    match memory {
        Some(m) => json!({"requests": {"cpu": cpu, "memory": m}}),
        None => json!({"requests": {"cpu": cpu}}),
    }
}

/// One DaemonSet: its pod template's `spec` (containers, tolerations, affinity, selector).
fn daemonset(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": name}}, "spec": spec}
        }
    })
}

/// The five DaemonSets of the table above, in that order.
pub fn eks() -> Vec<Value> {
    let all = json!([{"operator": "Exists"}]);
    // The EKS add-ons run as system-node-critical; the two agents set no priority class.
    let critical = "system-node-critical";
    let a1 = json!({"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["a1.medium", "a1.large", "a1.xlarge", "a1.2xlarge", "a1.4xlarge"]});
    vec![
        daemonset(
            "kube-system",
            "aws-node",
            json!({"containers": [{"name": "aws-node", "resources": requests("25m", None)}], "tolerations": all, "affinity": eks_affinity(&[]), "priorityClassName": critical}),
        ),
        daemonset(
            "kube-system",
            "kube-proxy",
            json!({"containers": [{"name": "kube-proxy", "resources": requests("100m", None)}], "tolerations": all, "affinity": eks_affinity(&[]), "priorityClassName": critical}),
        ),
        daemonset(
            "kube-system",
            "ebs-csi-node",
            json!({
                "containers": [
                    {"name": "ebs-plugin", "resources": requests("10m", Some("40Mi"))},
                    {"name": "node-driver-registrar", "resources": {}},
                    {"name": "liveness-probe", "resources": {}}
                ],
                "tolerations": all,
                "affinity": eks_affinity(&[a1]),
                "priorityClassName": critical
            }),
        ),
        daemonset("amazon-cloudwatch", "aws-for-fluent-bit", json!({"containers": [{"name": "aws-for-fluent-bit", "resources": requests("50m", Some("50Mi"))}]})),
        daemonset(
            "amazon-cloudwatch",
            "cloudwatch-agent",
            json!({"containers": [{"name": "cloudwatch-agent", "resources": requests("400m", Some("400Mi"))}], "nodeSelector": {"kubernetes.io/os": "linux"}}),
        ),
    ]
}

/// The pods the DaemonSets run on an existing, untainted Linux amd64 node `node` (every one of
/// them), bound and Running, owned by their DaemonSet as the DaemonSet controller makes them.
pub fn pods_on(node: &str) -> Vec<Value> {
    eks()
        .into_iter()
        .map(|ds| {
            let name = ds["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let namespace = ds["metadata"]["namespace"].clone();
            let mut spec = ds["spec"]["template"]["spec"].clone();
            if let Some(m) = spec.as_object_mut() {
                m.insert("nodeName".into(), json!(node));
            }
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": format!("{name}-{node}"), "namespace": namespace,
                    "labels": ds["spec"]["template"]["metadata"]["labels"].clone(),
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": format!("ds-{name}"), "controller": true}]
                },
                "spec": spec,
                "status": {"phase": "Running"}
            })
        })
        .collect()
}

/// The namespaces the DaemonSets live in.
pub fn namespaces() -> Vec<Value> {
    ["kube-system", "amazon-cloudwatch"].iter().map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})).collect()
}

/// `benches/workloads/daemonsets/eks.json`: the namespaces and the DaemonSets as a `v1 List`.
pub fn text() -> Result<String, BenchError> {
    let mut items = namespaces();
    items.extend(eks());
    crate::corpus::list_text(&items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corpus file is what the generator writes (benches/workloads/README.md).
    #[test]
    fn the_corpus_file_is_the_generators_output() {
        let p = crate::repo_root().join("benches/workloads/daemonsets/eks.json");
        let file = stowage_input::read::read_text(&p).unwrap();
        assert!(file == text().unwrap(), "{}: not what `stowage corpus daemonsets` writes", p.display());
    }

    /// Loaded beside a batch, the DaemonSets are per-node overhead of 585m CPU and 490Mi on an
    /// untainted Linux node and 135m / 40Mi on a tainted one, and every existing node's DaemonSet pods
    /// are bound to it.
    #[test]
    fn the_overhead_is_what_the_table_says() {
        use stowage_core::domain::taints::{Effect, Taint};
        use stowage_core::semantics::daemonsets::overhead;
        let list = text().unwrap();
        let nc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/common-ec2nodeclass.yaml")).unwrap();
        let w = stowage_input::load_texts([(std::path::Path::new("nc.yaml"), nc.as_str()), (std::path::Path::new("eks.json"), list.as_str())]).unwrap();
        assert_eq!(w.cluster.daemonsets.len(), 5, "{:?}", w.warnings);
        let it = stowage_input::catalog::default_catalog().get("m5.large").unwrap().clone();
        let (plain, _) = overhead(&w.cluster.daemonsets, &it.labels, &[], None);
        assert_eq!((plain.get("cpu"), plain.get("memory")), (585, 490 * 1024 * 1024));
        let gpu = Taint { key: "nvidia.com/gpu".into(), value: "true".into(), effect: Effect::NoSchedule };
        let (tainted, _) = overhead(&w.cluster.daemonsets, &it.labels, &[gpu], None);
        assert_eq!((tainted.get("cpu"), tainted.get("memory")), (135, 40 * 1024 * 1024));
        let graviton = stowage_input::catalog::default_catalog().get("m6g.large").unwrap().clone();
        let (arm, _) = overhead(&w.cluster.daemonsets, &graviton.labels, &[], None);
        assert_eq!(arm.get("cpu"), 585, "arm64 runs the whole set");
        let mut a1 = graviton.labels.clone();
        a1.insert("node.kubernetes.io/instance-type".into(), "a1.large".into());
        let (a1, _) = overhead(&w.cluster.daemonsets, &a1, &[], None);
        assert_eq!(a1.get("cpu"), 575, "the EBS plugin stays off a1");
        assert_eq!(pods_on("n1").len(), 5);
    }
}
