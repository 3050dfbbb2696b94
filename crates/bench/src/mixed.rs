//! Mixed-constraint workloads for the corpus, generated deterministically (no randomness: sizes and
//! placements follow the index arithmetic below), at any scale. One file per scale, a `v1 List` of
//! Kubernetes objects to be loaded with `scenarios/common-ec2nodeclass.yaml` on the embedded us-east-1
//! catalog.
//!
//! What a scale-`s` batch holds (pending pods ≈ 113·s):
//!
//! * **NodePools with different weights and prices**: `spot-general` (weight 50, spot, c/m/r,
//!   `capacity-spread` 3), `memory` (weight 20, on-demand r family, label `tier=memory`),
//!   `od-general` (weight 10, on-demand c/m/r generation > 4, `capacity-spread` 1 or 2) and `batch`
//!   (no weight: below the others, c family, spot or on-demand, label and taint `workload=batch`).
//! * **Existing, partly used nodes**: 2·s on-demand m5.2xlarge nodes each holding four 1-CPU pods and
//!   s spot c5.4xlarge nodes each holding six, spread over the three zones and the capacity-spread
//!   values of their pools.
//! * **Zonal and custom-domain spreads**: `web` (40·s, zone and capacity-spread, maxSkew 1) and
//!   `worker` (20·s, capacity-spread maxSkew 2, preferring spot).
//! * **Hostname anti-affinity**: `api` (6·s, one per node, zone spread maxSkew 1).
//! * **Volume zones**: StatefulSet `cache` (3·s) whose claims are already bound to volumes in
//!   us-east-1a/b/c (ordinal mod 3), with a zone spread: each pod must go to its volume's zone.
//! * **Taints, selectors, pools**: `batch` (30·s, tolerates and selects `workload=batch`),
//!   `analytics` (4·s, 4 CPU / 32 GiB, selects `tier=memory`), and 10·s bare pods of five sizes.
//! * **DaemonSets**: the EKS set of [`crate::daemonsets`], with their pods bound on every existing node.

use serde_json::{Value, json};

use stowage_core::domain::labels::keys;
use stowage_input::catalog;

use crate::BenchError;

pub(crate) const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

pub(crate) fn node_class_ref() -> Value {
    json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
}

/// A NodePool; `weight` 0 leaves the weight unset (Karpenter accepts 1-100; unset ranks below them).
fn nodepool(name: &str, weight: i32, requirements: Value, labels: Value, taints: Value, cpu_limit: &str) -> Value {
    let mut pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "weight": weight,
            "limits": {"cpu": cpu_limit},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeClassRef": node_class_ref(), "requirements": requirements, "taints": taints, "expireAfter": "Never"}
            }
        }
    });
    if weight == 0
        && let Some(spec) = pool["spec"].as_object_mut()
    {
        spec.remove("weight");
    }
    pool
}

pub(crate) fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn nodepools() -> Vec<Value> {
    let cat = "karpenter.k8s.aws/instance-category";
    let ct = "karpenter.sh/capacity-type";
    vec![
        nodepool("spot-general", 50, json!([req(cat, "In", &["c", "m", "r"]), req(ct, "In", &["spot"]), req("capacity-spread", "In", &["3"])]), json!({}), json!([]), "4000"),
        nodepool("memory", 20, json!([req(cat, "In", &["r"]), req(ct, "In", &["on-demand"])]), json!({"tier": "memory"}), json!([]), "2000"),
        nodepool(
            "od-general",
            10,
            json!([req(cat, "In", &["c", "m", "r"]), req("karpenter.k8s.aws/instance-generation", "Gt", &["4"]), req(ct, "In", &["on-demand"]), req("capacity-spread", "In", &["1", "2"])]),
            json!({}),
            json!([]),
            "4000",
        ),
        nodepool(
            "batch",
            0,
            json!([req(cat, "In", &["c"]), req(ct, "In", &["spot", "on-demand"])]),
            json!({"workload": "batch"}),
            json!([{"key": "workload", "value": "batch", "effect": "NoSchedule"}]),
            "1000",
        ),
    ]
}

fn resources(cpu: &str, mem: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": mem}})
}

pub(crate) fn container(cpu: &str, mem: &str) -> Value {
    json!([{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources(cpu, mem)}])
}

fn spread(key: &str, skew: i32, app: &str) -> Value {
    json!({"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}})
}

fn deployment(name: &str, replicas: usize, spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
        }
    })
}

/// An existing node of `itype` as a Karpenter-launched node would be registered.
pub(crate) fn existing_node(name: &str, itype: &str, pool: &str, zone: &str, capacity_type: &str, spread: Option<&str>) -> Result<Value, BenchError> {
    let it = catalog::default_catalog().get(itype).ok_or_else(|| BenchError::NotInCatalog { instance_type: itype.to_string() })?;
    let mut labels = serde_json::Map::new();
    for (k, v) in &it.labels {
        labels.insert(k.clone(), json!(v));
    }
    for (k, v) in [
        (keys::HOSTNAME, name),
        (keys::ZONE, zone),
        ("topology.kubernetes.io/region", "us-east-1"),
        ("karpenter.sh/capacity-type", capacity_type),
        ("karpenter.sh/nodepool", pool),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ] {
        labels.insert(k.to_string(), json!(v));
    }
    if let Some(spread) = spread {
        labels.insert("capacity-spread".to_string(), json!(spread));
    }
    let q = |r: &stowage_core::domain::resources::Resources| -> Value {
        let m: serde_json::Map<String, Value> = r.iter().map(|(n, v)| (n.to_string(), json!(stowage_input::quantity::format(n, v)))).collect();
        Value::Object(m)
    };
    Ok(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": format!("aws:///{zone}/i-{:0>17}", name.len() * 7919 + name.bytes().map(usize::from).sum::<usize>())},
        "status": {"capacity": q(&it.capacity), "allocatable": q(&it.allocatable()), "conditions": [{"type": "Ready", "status": "True"}]}
    }))
}

fn bound_pod(name: &str, node: &str, app: &str, cpu: &str, mem: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": container(cpu, mem)},
        "status": {"phase": "Running"}
    })
}

/// The scale-`s` batch as a `v1 List` (one item per line). `s` ≥ 1.
pub fn workload(s: usize) -> Result<String, BenchError> {
    if s == 0 {
        return Err(BenchError::Scale);
    }
    let mut items: Vec<Value> = Vec::new();
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "shop"}}}));
    items.push(gp3_storage_class());
    items.extend(crate::daemonsets::namespaces());
    items.extend(crate::daemonsets::eks());
    items.extend(nodepools());
    items.extend(existing_nodes(s)?);
    items.extend(deployments(s));
    items.extend(cache(s));
    items.extend(bare_pods(s));
    crate::corpus::list_text(&items)
}

/// Existing nodes, partly used: 2·s on-demand m5.2xlarge with four 1-CPU pods each, s spot c5.4xlarge
/// with six.
fn existing_nodes(s: usize) -> Result<Vec<Value>, BenchError> {
    let mut items = Vec::new();
    for i in 0..2 * s {
        let name = format!("od-{i:03}");
        items.push(existing_node(&name, "m5.2xlarge", "od-general", ZONES[i % 3], "on-demand", Some(if i % 2 == 0 { "1" } else { "2" }))?);
        items.extend(crate::daemonsets::pods_on(&name));
        for j in 0..4 {
            items.push(bound_pod(&format!("legacy-{i:03}-{j}"), &name, &format!("legacy-{}", (i + j) % 3), "1", "2Gi"));
        }
    }
    for i in 0..s {
        let name = format!("spot-{i:03}");
        items.push(existing_node(&name, "c5.4xlarge", "spot-general", ZONES[(i + 1) % 3], "spot", Some("3"))?);
        items.extend(crate::daemonsets::pods_on(&name));
        for j in 0..6 {
            items.push(bound_pod(&format!("legacy-spot-{i:03}-{j}"), &name, "legacy-spot", "1", "1Gi"));
        }
    }
    Ok(items)
}

/// The Deployments: zonal and custom-domain spreads (`web`, `worker`), hostname anti-affinity
/// (`api`), taints and pool selectors (`batch`, `analytics`).
fn deployments(s: usize) -> Vec<Value> {
    vec![
        deployment("web", 40 * s, json!({"containers": container("500m", "1Gi"), "topologySpreadConstraints": [spread(keys::ZONE, 1, "web"), spread("capacity-spread", 1, "web")]})),
        deployment(
            "worker",
            20 * s,
            json!({
                "containers": container("250m", "512Mi"),
                "topologySpreadConstraints": [spread("capacity-spread", 2, "worker")],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [req("karpenter.sh/capacity-type", "In", &["spot"])]}}
                ]}}
            }),
        ),
        deployment(
            "api",
            6 * s,
            json!({
                "containers": container("2", "4Gi"),
                "topologySpreadConstraints": [spread(keys::ZONE, 1, "api")],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": keys::HOSTNAME, "labelSelector": {"matchLabels": {"app": "api"}}}
                ]}}
            }),
        ),
        deployment(
            "batch",
            30 * s,
            json!({
                "containers": container("1", "1Gi"),
                "nodeSelector": {"workload": "batch"},
                "tolerations": [{"key": "workload", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
            }),
        ),
        deployment("analytics", 4 * s, json!({"containers": container("4", "32Gi"), "nodeSelector": {"tier": "memory"}})),
    ]
}

/// A StatefulSet whose claims are bound to volumes in the three zones (ordinal mod 3), with a zone
/// spread: each pod must go to its volume's zone. `pv_name` and `handle` name ordinal i's volume.
pub(crate) struct ZonalSet<'a> {
    pub ns: &'a str,
    pub name: &'a str,
    pub replicas: usize,
    pub cpu: &'a str,
    pub memory: &'a str,
    pub storage: &'a str,
    pub pv_name: &'a dyn Fn(usize) -> String,
    pub handle: &'a dyn Fn(usize) -> String,
}

/// The volumes, claims and StatefulSet of `z`.
pub(crate) fn zonal_statefulset(z: &ZonalSet) -> Vec<Value> {
    let (ns, name, storage) = (z.ns, z.name, z.storage);
    let mut items = Vec::new();
    for i in 0..z.replicas {
        let zone = ZONES[i % 3];
        let (pv, pvc) = ((z.pv_name)(i), format!("data-{name}-{i}"));
        items.push(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {keys::ZONE: zone}},
            "spec": {
                "capacity": {"storage": storage}, "accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                "claimRef": {"namespace": ns, "name": pvc},
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": (z.handle)(i)},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [req(keys::ZONE, "In", &[zone])]}]}}
            },
            "status": {"phase": "Bound"}
        }));
        items.push(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "namespace": ns, "labels": {"app": name}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": pv, "resources": {"requests": {"storage": storage}}},
            "status": {"phase": "Bound"}
        }));
    }
    items.push(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": z.replicas, "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "containers": container(z.cpu, z.memory),
                "topologySpreadConstraints": [spread(keys::ZONE, 1, name)]
            }},
            "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "labels": {"app": name}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "resources": {"requests": {"storage": storage}}}}]
        }
    }));
    items
}

/// Volume zones: the StatefulSet `cache` (3·s) whose claims survived a scale-down and are bound to
/// volumes in the three zones.
fn cache(s: usize) -> Vec<Value> {
    zonal_statefulset(&ZonalSet {
        ns: "shop",
        name: "cache",
        replicas: 3 * s,
        cpu: "1",
        memory: "8Gi",
        storage: "20Gi",
        pv_name: &|i| format!("pv-cache-{i}"),
        handle: &|i| format!("vol-{:017}", 1000 + i),
    })
}

/// The gp3 StorageClass every generated workload's volumes use.
pub(crate) fn gp3_storage_class() -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete", "parameters": {"type": "gp3"}
    })
}

/// 10·s bare pods of five sizes.
fn bare_pods(s: usize) -> Vec<Value> {
    let sizes = [("100m", "128Mi"), ("250m", "256Mi"), ("1", "4Gi"), ("2", "2Gi"), ("3", "12Gi")];
    (0..10 * s)
        .map(|i| {
            let (cpu, mem) = sizes[i % sizes.len()];
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("misc-{i:04}"), "namespace": "shop", "labels": {"app": format!("misc-{}", i % 4)}},
                "spec": {"containers": container(cpu, mem)}
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corpus files are what the generator writes (benches/workloads/README.md).
    #[test]
    fn the_corpus_files_are_the_generators_output() {
        for s in [3, 10, 25] {
            let p = crate::repo_root().join(format!("benches/workloads/mixed/mixed-{s}.json.gz"));
            let text = stowage_input::read::read_text(&p).unwrap();
            assert!(text == workload(s).unwrap(), "{}: not what `stowage corpus mixed --scale {s}` writes", p.display());
        }
    }

    #[test]
    fn scale_one_loads_and_is_deterministic() {
        let a = workload(1).unwrap();
        assert_eq!(a, workload(1).unwrap());
        let nc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/common-ec2nodeclass.yaml")).unwrap();
        let w = stowage_input::load_texts([(std::path::Path::new("nc.yaml"), nc.as_str()), (std::path::Path::new("mixed.json"), a.as_str())]).unwrap();
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
        assert_eq!(w.cluster.pending().len(), 113);
        assert_eq!(w.cluster.nodes.len(), 3);
        assert_eq!(w.cluster.nodepools.len(), 4);
        assert!(workload(0).is_err());
    }
}
