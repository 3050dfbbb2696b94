//! Workloads shaped like a recorded production cluster (issue 18: "a corpus that looks like
//! production"), drawn from a seeded generator so that the corpus file is reproducible
//! (`stowage corpus cluster --shape S --seed N`; the test below checks the committed files).
//!
//! What production clusters look like, and what this draws (the shares are the generator's, stated
//! so that a reader can judge them, not measurements of a particular cluster):
//!
//! * **Many Deployments with mixed requests** across team namespaces: replicas heavy-tailed (most 1-4, a
//!   few 10-40), CPU requests from 50m to 4 cores with 1-8 GiB per core, a fifth of them memory-heavy.
//! * **PodDisruptionBudgets** for every Deployment of two or more replicas (maxUnavailable 1, or
//!   minAvailable 50 %): they do not change a provisioning batch but do bind consolidation.
//! * **Spread**: 40 % of Deployments spread over zones (maxSkew 1, DoNotSchedule), a quarter spread over
//!   hostnames (maxSkew 1, ScheduleAnyway, as Helm charts commonly default), small critical ones
//!   (≤ 6 replicas, 8 %) keep one replica per node by required anti-affinity; 10 % require on-demand.
//! * **StatefulSets with zonal volumes**: databases and queues of 3 replicas whose claims are bound to
//!   volumes in us-east-1a/b/c (ordinal mod 3), with a zone spread; each pod must go to its volume's zone.
//! * **GPU pools**: inference Deployments asking for one `nvidia.com/gpu` on a tainted g-family pool.
//! * The EKS DaemonSets of [`crate::daemonsets`].
//!
//! Shapes: `saas` (60 Deployments, 4 StatefulSets, 2 GPU Deployments; every pod pending, as when a
//! cluster is provisioned from nothing) and `platform` (160 Deployments, 10 StatefulSets, 4 GPU
//! Deployments, and 24 existing nodes that already run part of it: the batch is what a scale-up
//! leaves pending).

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use stowage_core::domain::labels::keys;

use crate::BenchError;
use crate::corpus::list_text;
use crate::mixed::{ZONES, ZonalSet, container, existing_node, gp3_storage_class, node_class_ref, req, zonal_statefulset};

/// The generator's shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Saas,
    Platform,
}

impl Shape {
    pub fn parse(s: &str) -> Result<Shape, BenchError> {
        match s {
            "saas" => Ok(Shape::Saas),
            "platform" => Ok(Shape::Platform),
            other => Err(BenchError::Shape(other.to_string())),
        }
    }

    /// (Deployments, StatefulSets, GPU Deployments, existing nodes).
    fn sizes(self) -> (usize, usize, usize, usize) {
        match self {
            Shape::Saas => (60, 4, 2, 0),
            Shape::Platform => (160, 10, 4, 24),
        }
    }
}

const CPU: [(&str, u32); 7] = [("50m", 50), ("100m", 100), ("250m", 250), ("500m", 500), ("1", 1000), ("2", 2000), ("4", 4000)];
const CPU_WEIGHTS: [u32; 7] = [10, 20, 25, 20, 15, 7, 3];
const REPLICAS: [usize; 14] = [1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 6, 10, 20, 40];

fn nodepool(name: &str, requirements: Value, taints: Value, cpu_limit: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "limits": {"cpu": cpu_limit},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
            "template": {"spec": {"nodeClassRef": node_class_ref(), "requirements": requirements, "taints": taints, "expireAfter": "720h"}}
        }
    })
}

/// Karpenter's getting-started pool (c/m/r, generation > 2, spot and on-demand, amd64) and a GPU pool.
fn nodepools() -> Vec<Value> {
    let cat = "karpenter.k8s.aws/instance-category";
    vec![
        nodepool(
            "default",
            json!([
                req(cat, "In", &["c", "m", "r"]),
                req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
                req("karpenter.sh/capacity-type", "In", &["spot", "on-demand"]),
                req("kubernetes.io/arch", "In", &["amd64"])
            ]),
            json!([]),
            "20000",
        ),
        nodepool(
            "gpu",
            json!([req("karpenter.k8s.aws/instance-family", "In", &["g5", "g6"]), req("karpenter.sh/capacity-type", "In", &["on-demand"])]),
            json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]),
            "2000",
        ),
    ]
}

/// One Deployment as drawn, before it becomes objects.
struct Drawn {
    ns: String,
    name: String,
    replicas: usize,
    cpu: &'static str,
    memory: String,
    zone_spread: bool,
    host_spread: bool,
    anti_affinity: bool,
    on_demand: bool,
}

fn draw(rng: &mut ChaCha8Rng, i: usize, teams: usize) -> Drawn {
    let (cpu, millis) = {
        let total: u32 = CPU_WEIGHTS.iter().sum();
        let mut x = rng.random_range(0..total);
        let mut k = 0;
        while x >= CPU_WEIGHTS[k] {
            x -= CPU_WEIGHTS[k];
            k += 1;
        }
        CPU[k]
    };
    let per_core_gib = if rng.random_bool(0.2) { *[4u32, 8].choose(rng).unwrap_or(&4) } else { *[1u32, 2, 2, 4].choose(rng).unwrap_or(&2) };
    let memory = format!("{}Mi", (millis as u64 * per_core_gib as u64 * 1024 / 1000).max(64));
    let replicas = *REPLICAS.choose(rng).unwrap_or(&2);
    Drawn {
        ns: format!("team-{}", i % teams + 1),
        name: format!("svc-{i:03}"),
        replicas,
        cpu,
        memory,
        zone_spread: rng.random_bool(0.4),
        host_spread: rng.random_bool(0.25),
        anti_affinity: replicas <= 6 && rng.random_bool(0.08),
        on_demand: rng.random_bool(0.1),
    }
}

fn labels(d: &Drawn) -> Value {
    json!({"app": d.name})
}

fn pod_spec(d: &Drawn) -> Value {
    let mut spec = json!({"containers": container(d.cpu, &d.memory)});
    let mut tsc = Vec::new();
    if d.zone_spread {
        tsc.push(json!({"maxSkew": 1, "topologyKey": keys::ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels(d)}}));
    }
    if d.host_spread {
        tsc.push(json!({"maxSkew": 1, "topologyKey": keys::HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": labels(d)}}));
    }
    if !tsc.is_empty() {
        spec["topologySpreadConstraints"] = json!(tsc);
    }
    let mut affinity = serde_json::Map::new();
    if d.anti_affinity {
        affinity.insert("podAntiAffinity".into(), json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": keys::HOSTNAME, "labelSelector": {"matchLabels": labels(d)}}]}));
    }
    if d.on_demand {
        affinity.insert(
            "nodeAffinity".into(),
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [req("karpenter.sh/capacity-type", "In", &["on-demand"])]}]}}),
        );
    }
    if !affinity.is_empty() {
        spec["affinity"] = Value::Object(affinity);
    }
    spec
}

fn deployment(d: &Drawn, replicas: usize) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": d.name, "namespace": d.ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels(d)}, "template": {"metadata": {"labels": labels(d)}, "spec": pod_spec(d)}}
    })
}

fn pdb(d: &Drawn, rng: &mut ChaCha8Rng) -> Value {
    let rule = if rng.random_bool(0.5) { json!({"maxUnavailable": 1}) } else { json!({"minAvailable": "50%"}) };
    let mut spec = json!({"selector": {"matchLabels": labels(d)}});
    if let (Some(s), Some(r)) = (spec.as_object_mut(), rule.as_object()) {
        s.extend(r.clone());
    }
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": d.name, "namespace": d.ns}, "spec": spec})
}

/// A StatefulSet of 3 replicas whose claims are bound to volumes in the three zones, and its PDB.
fn statefulset(ns: &str, name: &str, cpu: &str, memory: &str) -> Vec<Value> {
    let pv_name = |i: usize| format!("pv-{ns}-{name}-{i}");
    let handle = |i: usize| format!("vol-{:017x}", pv_name(i).bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)) & 0xffff_ffff_ffff);
    let mut items = zonal_statefulset(&ZonalSet { ns, name, replicas: 3, cpu, memory, storage: "100Gi", pv_name: &pv_name, handle: &handle });
    items.push(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns}, "spec": {"selector": {"matchLabels": {"app": name}}, "maxUnavailable": 1}}),
    );
    items
}

fn gpu_deployment(i: usize, replicas: usize) -> Value {
    let name = format!("inference-{i}");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": keys::ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": name}}}]
        }}}
    })
}

/// A running replica of `d` bound to `node`, as its ReplicaSet made it.
fn running_pod(d: &Drawn, k: usize, node: &str) -> Value {
    let mut spec = pod_spec(d);
    spec["nodeName"] = json!(node);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{}-running-{k}", d.name), "namespace": d.ns, "labels": labels(d),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{}-rs", d.name), "uid": format!("rs-{}-{}", d.ns, d.name), "controller": true}]},
        "spec": spec,
        "status": {"phase": "Running"}
    })
}

/// The batch of `shape` drawn with `seed`, as a `v1 List` (one item per line).
pub fn workload(shape: Shape, seed: u64) -> Result<String, BenchError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (deployments, statefulsets, gpus, existing) = shape.sizes();
    let teams = (deployments / 20).max(3);
    let mut items: Vec<Value> = Vec::new();
    for t in 1..=teams {
        items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("team-{t}")}}));
    }
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data"}}));
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
    items.push(gp3_storage_class());
    items.extend(crate::daemonsets::namespaces());
    items.extend(crate::daemonsets::eks());
    items.extend(nodepools());

    // Existing nodes (platform): m5/c5/r5 of 4-16 cores, each with its DaemonSet pods; the first
    // replicas of Deployments without required anti-affinity or on-demand pins run on them until a
    // node's CPU is 60 % requested.
    let node_types = [("m5.2xlarge", 8000u32), ("m5.4xlarge", 16000), ("c5.4xlarge", 16000), ("r5.2xlarge", 8000)];
    let mut nodes: Vec<(String, u32)> = Vec::new();
    for n in 0..existing {
        let (it, cpu) = node_types[n % node_types.len()];
        let name = format!("ip-10-0-{}-{}.ec2.internal", n / 250, n % 250 + 10);
        let capacity_type = if n % 3 == 0 { "on-demand" } else { "spot" };
        items.push(existing_node(&name, it, "default", ZONES[n % 3], capacity_type, None)?);
        items.extend(crate::daemonsets::pods_on(&name));
        nodes.push((name, cpu * 6 / 10 - 585));
    }

    let mut next_node = 0;
    for i in 0..deployments {
        let d = draw(&mut rng, i, teams);
        let millis = CPU.iter().find(|(c, _)| *c == d.cpu).map(|(_, m)| *m).unwrap_or(0);
        // A scale-up: on a platform cluster, half of each eligible Deployment already runs.
        let mut running = 0;
        if !nodes.is_empty() && !d.anti_affinity && !d.on_demand && !d.zone_spread {
            let want = d.replicas / 2;
            while running < want && next_node < nodes.len() {
                if nodes[next_node].1 >= millis {
                    nodes[next_node].1 -= millis;
                    items.push(running_pod(&d, running, &nodes[next_node].0));
                    running += 1;
                } else {
                    next_node += 1;
                }
            }
        }
        items.push(deployment(&d, d.replicas));
        if d.replicas >= 2 {
            items.push(pdb(&d, &mut rng));
        }
    }
    let stateful = [("postgres", "2", "8Gi"), ("redis", "1", "6Gi"), ("kafka", "2", "8Gi"), ("elasticsearch", "2", "16Gi"), ("rabbitmq", "1", "2Gi")];
    for s in 0..statefulsets {
        let (name, cpu, mem) = stateful[s % stateful.len()];
        items.extend(statefulset("data", &format!("{name}-{}", s / stateful.len() + 1), cpu, mem));
    }
    for g in 0..gpus {
        items.push(gpu_deployment(g + 1, if g % 2 == 0 { 4 } else { 2 }));
    }
    list_text(&items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corpus files are what the generator writes (benches/workloads/README.md).
    #[test]
    fn the_corpus_files_are_the_generators_output() {
        for (shape, name) in [(Shape::Saas, "saas"), (Shape::Platform, "platform")] {
            let p = crate::repo_root().join(format!("benches/workloads/cluster/{name}-1.json.gz"));
            let text = stowage_input::read::read_text(&p).unwrap();
            assert!(text == workload(shape, 1).unwrap(), "{}: not what `stowage corpus cluster --shape {name} --seed 1` writes", p.display());
        }
    }

    /// Both shapes load without warnings and hold what the module says: pending pods of every kind,
    /// PDBs, bound zonal volumes, GPU requests; the platform shape has existing nodes running part of it.
    #[test]
    fn the_shapes_load_and_hold_what_they_say() {
        let nc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/common-ec2nodeclass.yaml")).unwrap();
        for shape in [Shape::Saas, Shape::Platform] {
            let text = workload(shape, 1).unwrap();
            assert_eq!(text, workload(shape, 1).unwrap(), "deterministic");
            assert_ne!(text, workload(shape, 2).unwrap(), "the seed matters");
            let w = stowage_input::load_texts([(std::path::Path::new("nc.yaml"), nc.as_str()), (std::path::Path::new("cluster.json"), text.as_str())]).unwrap();
            assert!(w.warnings.is_empty(), "{shape:?}: {:?}", w.warnings);
            let c = &w.cluster;
            let pending: Vec<_> = c.pending().into_iter().map(|id| c.pod(id)).collect();
            assert!(pending.len() > 200, "{shape:?}: {} pending", pending.len());
            assert!(pending.iter().any(|p| p.requests.get("nvidia.com/gpu") == 1));
            assert!(pending.iter().any(|p| !p.spread.is_empty()) && pending.iter().any(|p| !p.anti_affinity.is_empty()));
            assert!(pending.iter().any(|p| !p.volumes.zone_labels.is_empty() || !p.volumes.node_terms.is_empty()), "{shape:?}: no zonal volume");
            assert_eq!(c.daemonsets.len(), 5);
            assert!(text.contains("\"PodDisruptionBudget\""));
            match shape {
                Shape::Saas => assert!(c.nodes.is_empty()),
                Shape::Platform => {
                    assert_eq!(c.nodes.len(), 24);
                    let bound = c.pods.iter().filter(|p| p.node_name.is_some()).count();
                    assert!(bound > 24 * 5, "{bound} bound pods: DaemonSet pods and running replicas");
                }
            }
        }
        assert!(Shape::parse("nope").is_err());
    }
}
