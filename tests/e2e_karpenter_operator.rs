//! Karpenter's own operator (sigs.k8s.io/karpenter v1.14.1, its KWOK cloud provider, built from the Go
//! module by peers/karpenter/build-operator.sh) on the real control plane: the foundation of the lifetime
//! benchmark of issue 19. Nothing here is stowage's controller.
//!
//! The instance types are a few of stowage's embedded catalog (prices, zones, allocatable), written in
//! the KWOK format. A KWOKNodeClass, a NodePool (WhenEmptyOrUnderutilized, consolidateAfter 5 s) and a Deployment of three
//! pods: Karpenter must create NodeClaims, its KWOK provider the Nodes; the kubelet stand-in makes them
//! Ready; Karpenter must register and initialise them (unregistered taint gone, NodeClaim Ready); the real
//! kube-scheduler binds the pods and they run. Scaled to zero, Karpenter must consolidate the empty Nodes
//! away (NodeClaims and Nodes gone).
//!
//! Needs Go (the first run builds the control plane and the operator, minutes).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stowage_e2e::{ControlPlane, Error, InstanceTypes, KWOK_PROVIDER_PREFIX, KarpenterConfig, KarpenterOperator, Kubelet, Probe, UNREGISTERED_TAINT_KEY, poll_until};

/// Bounds, not sleeps: every wait returns as soon as its condition holds. Generous: 2 busy cores, and
/// Karpenter's own timers (batching up to 10 s, consolidateAfter, a 15 s disruption validation) add up.
const PROVISION_WAIT: Duration = Duration::from_secs(180);
const CONSOLIDATE_WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);
const REPLICAS: i32 = 3;
/// A few types of stowage's embedded catalog, written as the KWOK instance-types file.
const TYPES: [&str; 5] = ["c5.large", "c5.xlarge", "m5.large", "m5.xlarge", "r5.large"];

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn nodeclaims_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims"))
}

fn condition(obj: &serde_json::Value, type_: &str) -> Option<String> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).and_then(|c| c["status"].as_str()).map(str::to_string)
}

fn is_kwok(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).is_some_and(|p| p.starts_with(KWOK_PROVIDER_PREFIX))
}

fn node_ready(n: &Node) -> bool {
    n.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn has_taint(n: &Node, key: &str) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == key))
}

fn running_and_ready(p: &Pod) -> bool {
    let Some(s) = &p.status else { return false };
    s.phase.as_deref() == Some("Running") && s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Panics with the error, the stand-in's errors, the cluster's Karpenter objects and the operator's log tail.
async fn fail(step: &str, e: Error, client: &kube::Client, kubelet: &Kubelet, op: &KarpenterOperator) -> ! {
    let mut report = format!("{step}: {e}\nkubelet stand-in errors: {:#?}\n", kubelet.recent_errors());
    if let Ok(list) = nodeclaims_api(client).list(&ListParams::default()).await {
        for nc in list.items {
            report += &format!("nodeclaim {}: {}\n", nc.metadata.name.unwrap_or_default(), nc.data["status"]);
        }
    }
    if let Ok(nodes) = Api::<Node>::all(client.clone()).list(&ListParams::default()).await {
        for n in nodes.items {
            report += &format!(
                "node {}: ready {} taints {:?}\n",
                n.metadata.name.clone().unwrap_or_default(),
                node_ready(&n),
                n.spec.and_then(|s| s.taints).unwrap_or_default().iter().map(|t| t.key.clone()).collect::<Vec<_>>()
            );
        }
    }
    if let Ok(pods) = Api::<Pod>::all(client.clone()).list(&ListParams::default()).await {
        for p in pods.items {
            report += &format!("pod {}: node {:?} phase {:?}\n", p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name), p.status.and_then(|s| s.phase));
        }
    }
    report += &format!("operator log {} (tail):\n{}\n", op.log_file().display(), op.log_tail(30));
    panic!("{report}");
}

/// The operator's log lines whose message is one of `messages`, as "time message" (for the report).
fn log_events(op: &KarpenterOperator, messages: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(op.log_file()).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"].as_str().is_some_and(|m| messages.contains(&m)))
        .map(|v| {
            let detail = v.get("command").or_else(|| v.get("reason")).or_else(|| v.get("NodeClaim")).map(|d| d.to_string()).unwrap_or_default();
            format!("{} {} {}", v["time"].as_str().unwrap_or(""), v["message"].as_str().unwrap_or(""), detail)
        })
        .collect()
}

/// A KWOKNodeClass and a NodePool with Karpenter's defaults checked.
async fn create_nodepool(client: &kube::Client) {
    let nodeclasses: Api<DynamicObject> = Api::all_with(client.clone(), &resource("karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass", "kwoknodeclasses"));
    let nodepools: Api<DynamicObject> = Api::all_with(client.clone(), &resource("karpenter.sh", "v1", "NodePool", "nodepools"));
    let nodeclass: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {}
    }))
    .unwrap();
    nodeclasses.create(&PostParams::default(), &nodeclass).await.unwrap();
    let nodepool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "expireAfter": "Never"
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s"}
        }
    }))
    .unwrap();
    let created = nodepools.create(&PostParams::default(), &nodepool).await.unwrap();
    // Karpenter's own NodePool CRD replaced stowage's: its schema defaults the budgets (`nodes: 10%`).
    assert_eq!(created.data["spec"]["disruption"]["budgets"], json!([{"nodes": "10%"}]), "Karpenter's CRD defaults: {}", created.data);
}

/// Three pods of a Deployment, as in a cluster; the hostname anti-affinity spreads them over three Nodes
/// so several NodeClaims are exercised.
async fn create_deployment(client: &kube::Client) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]}},
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
                }
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
}

/// Waits until there are REPLICAS NodeClaims, each Ready with a Ready Node without the unregistered taint;
/// returns the Node names.
async fn wait_provisioned(client: &kube::Client) -> Result<BTreeSet<String>, Error> {
    let claims = nodeclaims_api(client);
    let nodes_api: Api<Node> = Api::all(client.clone());
    poll_until("every NodeClaim Ready and its Node Ready and registered", PROVISION_WAIT, POLL, || {
        let (claims, nodes_api) = (claims.clone(), nodes_api.clone());
        async move {
            let list = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?;
            let nodes = nodes_api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing Nodes", e))?;
            if list.items.len() < REPLICAS as usize {
                return Ok(Probe::Waiting(format!("{} NodeClaims", list.items.len())));
            }
            let mut names = BTreeSet::new();
            for nc in &list.items {
                let name = nc.metadata.name.clone().unwrap_or_default();
                let ready = condition(&nc.data, "Ready");
                let node_name = nc.data["status"]["nodeName"].as_str().unwrap_or("").to_string();
                let Some(node) = nodes.items.iter().find(|n| n.metadata.name.as_deref() == Some(node_name.as_str())) else {
                    return Ok(Probe::Waiting(format!("NodeClaim {name}: no Node yet (nodeName {node_name:?})")));
                };
                if ready.as_deref() != Some("True") || !node_ready(node) || has_taint(node, UNREGISTERED_TAINT_KEY) {
                    return Ok(Probe::Waiting(format!("NodeClaim {name}: Ready {ready:?}, Node ready {}, unregistered taint {}", node_ready(node), has_taint(node, UNREGISTERED_TAINT_KEY))));
                }
                names.insert(node_name);
            }
            Ok(Probe::Done(names))
        }
    })
    .await
}

/// Each Node is a KWOK Node of the NodePool, registered and initialised by Karpenter, of one of the
/// catalog types, with the catalog's allocatable (the file compensates KWOK's fixed overhead).
async fn check_nodes(client: &kube::Client, names: &BTreeSet<String>) {
    let nodes_api: Api<Node> = Api::all(client.clone());
    for name in names {
        let node = nodes_api.get(name).await.unwrap();
        assert!(is_kwok(&node), "Node {name} is not a KWOK Node: {:?}", node.spec);
        let labels = node.metadata.labels.clone().unwrap_or_default();
        for (key, value) in [("karpenter.sh/nodepool", "default"), ("karpenter.sh/registered", "true"), ("karpenter.sh/initialized", "true")] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "label {key} of {name}: {labels:?}");
        }
        let itype = labels.get("node.kubernetes.io/instance-type").cloned().unwrap_or_default();
        assert!(TYPES.contains(&itype.as_str()), "Node {name} has instance type {itype:?}, not one of {TYPES:?}");
        let want = stowage_input::catalog::default_catalog().get(&itype).unwrap().allocatable();
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default();
        for (res, want) in [("cpu", want.cpu_m), ("memory", want.memory), ("pods", want.pods)] {
            let got = allocatable.get(res).map(|q| stowage_input::quantity::amount(res, &q.0).unwrap());
            assert_eq!(got, Some(want), "allocatable {res} of {name} ({itype}): {allocatable:?}");
        }
    }
}

/// Waits until the Deployment's REPLICAS pods run, one on each of `nodes` (placed by kube-scheduler).
async fn wait_running(client: &kube::Client, nodes: &BTreeSet<String>) -> Result<(), Error> {
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    poll_until("the Deployment's pods Running on KWOK Nodes", PROVISION_WAIT, POLL, || {
        let pods_api = pods_api.clone();
        async move {
            let pods = pods_api.list(&ListParams::default().labels("app=web")).await.map_err(|e| Error::kube("listing pods", e))?;
            let placed: Vec<(String, bool)> = pods.items.iter().map(|p| (p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(), running_and_ready(p))).collect();
            let hosts: BTreeSet<&String> = placed.iter().map(|(n, _)| n).collect();
            if placed.len() == REPLICAS as usize && placed.iter().all(|(n, r)| *r && nodes.contains(n)) && hosts.len() == REPLICAS as usize {
                Ok(Probe::Done(()))
            } else {
                Ok(Probe::Waiting(format!("pods (node, running): {placed:?}")))
            }
        }
    })
    .await
}

/// Waits until no NodeClaim and no KWOK Node is left.
async fn wait_all_gone(client: &kube::Client) -> Result<(), Error> {
    let claims = nodeclaims_api(client);
    let nodes_api: Api<Node> = Api::all(client.clone());
    poll_until("every NodeClaim and KWOK Node gone after scaling to 0", CONSOLIDATE_WAIT, POLL, || {
        let (claims, nodes_api) = (claims.clone(), nodes_api.clone());
        async move {
            let list = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?;
            let nodes = nodes_api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing Nodes", e))?;
            let kwok: Vec<String> = nodes.items.iter().filter(|n| is_kwok(n)).filter_map(|n| n.metadata.name.clone()).collect();
            if list.items.is_empty() && kwok.is_empty() {
                Ok(Probe::Done(()))
            } else {
                let claims: Vec<String> =
                    list.items.iter().map(|nc| format!("{} (Consolidatable {:?})", nc.metadata.name.clone().unwrap_or_default(), condition(&nc.data, "Consolidatable"))).collect();
                Ok(Probe::Waiting(format!("NodeClaims {claims:?}, KWOK Nodes {kwok:?}")))
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenter_kwok_operator_provisions_and_consolidates() {
    let t0 = Instant::now();
    let cp = ControlPlane::start("e2e-karpenter-operator").await.unwrap();
    let client = cp.client();
    let kubelet = Kubelet::start_kwok(client.clone());
    let config = KarpenterConfig { instance_types: InstanceTypes::from_default_catalog(&TYPES).unwrap(), ..KarpenterConfig::default() };
    let mut op = match KarpenterOperator::start(&cp, config).await {
        Ok(op) => op,
        Err(e) => panic!("starting the Karpenter operator: {e}\nkubelet stand-in errors: {:#?}", kubelet.recent_errors()),
    };
    eprintln!("control plane {:.1}s, operator {:.1}s", cp.started_in().as_secs_f64(), op.started_in().as_secs_f64());

    create_nodepool(&client).await;
    create_deployment(&client).await;
    let created_at = Instant::now();

    // NodeClaims launched, registered and initialised; their Nodes Ready; the pods running on them.
    let kwok_nodes = match wait_provisioned(&client).await {
        Ok(n) => n,
        Err(e) => fail("provisioning", e, &client, &kubelet, &op).await,
    };
    let provisioned_in = created_at.elapsed();
    check_nodes(&client, &kwok_nodes).await;
    if let Err(e) = wait_running(&client, &kwok_nodes).await {
        fail("pods running", e, &client, &kubelet, &op).await;
    }
    eprintln!("{} NodeClaims Ready in {:.1}s and {REPLICAS} pods Running {:.1}s after the Deployment was created", kwok_nodes.len(), provisioned_in.as_secs_f64(), created_at.elapsed().as_secs_f64());

    // Scale to zero: the Nodes are empty; Karpenter must consolidate them away.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    let scaled_at = Instant::now();
    if let Err(e) = wait_all_gone(&client).await {
        fail("consolidation", e, &client, &kubelet, &op).await;
    }
    let consolidated_in = scaled_at.elapsed();

    // It was Karpenter's disruption controller that removed them, through emptiness consolidation.
    let disruptions = log_events(&op, &["disrupting node(s)"]);
    assert!(!disruptions.is_empty() && disruptions.iter().all(|d| d.contains("Empty/")), "expected Empty disruption commands in {}:\n{disruptions:#?}", op.log_file().display());
    assert_eq!(op.exited(), None, "the operator exited during the test; log {}", op.log_file().display());
    assert_eq!(kubelet.recent_errors(), Vec::<String>::new(), "kubelet stand-in errors");

    eprintln!("consolidated in {:.1}s after scaling to 0; Karpenter's log:", consolidated_in.as_secs_f64());
    let timeline = log_events(
        &op,
        &[
            "found provisionable pod(s)",
            "created nodeclaim",
            "launched nodeclaim",
            "registered nodeclaim",
            "initialized nodeclaim",
            "marking consolidatable",
            "disrupting node(s)",
            "tainted node",
            "deleted node",
            "deleted nodeclaim",
        ],
    );
    for line in &timeline {
        eprintln!("  {line}");
    }
    kubelet.stop().await;
    op.stop().await.unwrap();
    cp.stop().await.unwrap();
    eprintln!("whole test {:.1}s", t0.elapsed().as_secs_f64());
}
