//! End-to-end smoke test of the test infrastructure itself: a real control plane (etcd, kube-apiserver,
//! kube-scheduler, kube-controller-manager v1.36.3), the moto EC2 emulator, and the harness's kubelet and
//! volume-provisioner stand-ins. No mocks: instances are launched with aws-sdk-ec2, NodeClaims go through
//! the API server, and every placement below is made by the real kube-scheduler.
//!
//! Needs Go (the first run builds the control plane, minutes) and python3 (the moto venv); scripts/test.sh
//! prepares both before `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stowage_core::domain::resources::format_amount;
use stowage_e2e::{ControlPlane, Error, Kubelet, KubeletConfig, Moto, Probe, UNREGISTERED_TAINT_KEY, VolumeProvisioner, poll_until};
use stowage_input::api::{NodeClaim, NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues};

const INSTANCE_TYPE: &str = "m5.large";
const ZONE_A: &str = "us-east-1a";
const ZONE_B: &str = "us-east-1b";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Bounds, not sleeps: each wait returns as soon as its condition holds. Generous because CI machines
/// have 2 cores that are often busy compiling.
const REGISTER_WAIT: Duration = Duration::from_secs(60);
const SCHEDULE_WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);

/// Everything a failure message should show.
struct Ctx {
    client: kube::Client,
    kubelet: Kubelet,
    volumes: VolumeProvisioner,
    cp_dir: String,
}

impl Ctx {
    /// Panics with the error and what the harness saw (stand-in errors, recent events, pods).
    async fn fail(&self, step: &str, e: Error) -> ! {
        let mut report = format!("{step}: {e}\n");
        report += &format!("kubelet stand-in errors: {:#?}\n", self.kubelet.recent_errors());
        report += &format!("volume provisioner errors: {:#?}\n", self.volumes.recent_errors());
        if let Ok(pods) = Api::<Pod>::all(self.client.clone()).list(&ListParams::default()).await {
            for p in pods.items {
                let s = p.status.unwrap_or_default();
                report += &format!(
                    "pod {}/{}: node {:?} phase {:?} conditions {:?}\n",
                    p.metadata.namespace.unwrap_or_default(),
                    p.metadata.name.unwrap_or_default(),
                    p.spec.and_then(|s| s.node_name),
                    s.phase,
                    s.conditions.unwrap_or_default().iter().map(|c| format!("{}={}", c.type_, c.status)).collect::<Vec<_>>()
                );
            }
        }
        if let Ok(events) = Api::<Event>::all(self.client.clone()).list(&ListParams::default()).await {
            for ev in events.items.iter().rev().take(25) {
                report += &format!(
                    "event {} {}: {} {}\n",
                    ev.involved_object.kind.clone().unwrap_or_default(),
                    ev.involved_object.name.clone().unwrap_or_default(),
                    ev.reason.clone().unwrap_or_default(),
                    ev.message.clone().unwrap_or_default()
                );
            }
        }
        report += &format!("component logs: {}/logs/\n", self.cp_dir);
        panic!("{report}");
    }
}

fn req(key: &str, value: &str) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues { key: key.into(), operator: "In".into(), values: vec![value.into()], min_values: None }
}

/// A NodeClaim as Karpenter would create it for a launched instance, with capacity from stowage's catalog.
async fn create_nodeclaim(client: &kube::Client, name: &str, zone: &str, provider_id: &str) -> NodeClaim {
    let api: Api<NodeClaim> = Api::all(client.clone());
    let mut nc = NodeClaim::new(
        name,
        NodeClaimSpec {
            requirements: vec![req("karpenter.sh/nodepool", "default"), req("node.kubernetes.io/instance-type", INSTANCE_TYPE), req(ZONE_LABEL, zone), req("karpenter.sh/capacity-type", "on-demand")],
            node_class_ref: NodeClassReference { group: "karpenter.k8s.aws".into(), kind: "EC2NodeClass".into(), name: "default".into() },
            ..Default::default()
        },
    );
    nc.metadata.labels = Some(BTreeMap::from([
        ("karpenter.sh/nodepool".to_string(), "default".to_string()),
        ("karpenter.sh/capacity-type".to_string(), "on-demand".to_string()),
        (ZONE_LABEL.to_string(), zone.to_string()),
        ("node.kubernetes.io/instance-type".to_string(), INSTANCE_TYPE.to_string()),
        ("karpenter.k8s.aws/instance-family".to_string(), "m5".to_string()),
    ]));
    api.create(&PostParams::default(), &nc).await.unwrap();

    let t = stowage_input::catalog::default_catalog().get(INSTANCE_TYPE).expect("m5.large is in the embedded catalog");
    let quantities = |r: &stowage_core::domain::resources::Resources| -> BTreeMap<String, Quantity> { r.iter().map(|(n, v)| (n.to_string(), Quantity(format_amount(n, v)))).collect() };
    let status = json!({"status": {
        "providerID": provider_id,
        "capacity": quantities(&t.capacity),
        "allocatable": quantities(&t.allocatable()),
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap()
}

fn labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn running_and_ready(p: &Pod) -> bool {
    let s = p.status.clone().unwrap_or_default();
    s.phase.as_deref() == Some("Running") && s.pod_ip.is_some() && s.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True")
}

// Long on purpose: one control plane and one moto are started once and every stand-in is exercised
// against them in sequence, each step depending on the one before (a node must register before a pod
// binds to it); splitting it would mean passing the whole harness state between helpers or starting a
// control plane per step (tens of seconds each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_moto_and_stand_ins() {
    let t0 = Instant::now();
    let mut timings: Vec<(&str, Duration)> = Vec::new();
    let mut mark = {
        let mut last = Instant::now();
        move |timings: &mut Vec<(&'static str, Duration)>, what: &'static str| {
            timings.push((what, last.elapsed()));
            last = Instant::now();
        }
    };

    let (cp, moto) = tokio::try_join!(ControlPlane::start("smoke"), Moto::start("smoke")).unwrap();
    mark(&mut timings, "start control plane + moto (parallel)");
    let client = cp.client();
    assert_eq!(cp.readyz().await.unwrap(), "ok", "/readyz");
    let ctx = Ctx {
        client: client.clone(),
        // Short periods so the Lease renewal and the Ready heartbeat run (and are checked) within the test.
        kubelet: Kubelet::start_with(client.clone(), moto.ec2(), KubeletConfig { lease_renew: Duration::from_secs(1), status_refresh: Duration::from_secs(2), ..Default::default() }),
        volumes: VolumeProvisioner::start(client.clone()),
        cp_dir: cp.run_dir().display().to_string(),
    };

    // --- two instances, two NodeClaims, two Nodes registered by the kubelet stand-in -----------------
    let mut provider_ids = BTreeMap::new();
    let mut instance_ids = BTreeMap::new();
    for zone in [ZONE_A, ZONE_B] {
        let i = moto.run_instance(zone, INSTANCE_TYPE).await.unwrap();
        let id = i.instance_id.clone().unwrap();
        let placed = i.placement.and_then(|p| p.availability_zone).unwrap();
        assert_eq!(placed, zone, "moto placed {id} in the subnet's zone");
        provider_ids.insert(zone, format!("aws:///{zone}/{id}"));
        instance_ids.insert(zone, id);
    }
    for (zone, claim) in [(ZONE_A, "default-a"), (ZONE_B, "default-b")] {
        let nc = create_nodeclaim(&client, claim, zone, &provider_ids[zone]).await;
        let st = nc.status.unwrap();
        assert_eq!(st.provider_id.as_deref(), Some(provider_ids[zone].as_str()), "status subresource kept providerID");
        assert!(st.allocatable.is_some_and(|a| a.contains_key("pods")), "status subresource kept allocatable");
    }
    mark(&mut timings, "RunInstances x2 + NodeClaims x2");

    let nodes_api: Api<Node> = Api::all(client.clone());
    let wanted = provider_ids.clone();
    let nodes: BTreeMap<&str, Node> = match poll_until("the kubelet stand-in to register both Nodes", REGISTER_WAIT, POLL, || {
        let (api, wanted) = (nodes_api.clone(), wanted.clone());
        async move {
            let list = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing Nodes", e))?;
            let mut found = BTreeMap::new();
            for (zone, pid) in &wanted {
                if let Some(n) = list.items.iter().find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(pid)) {
                    found.insert(*zone, n.clone());
                }
            }
            Ok(if found.len() == wanted.len() { Probe::Done(found) } else { Probe::Waiting(format!("{} of {} Nodes", found.len(), wanted.len())) })
        }
    })
    .await
    {
        Ok(n) => n,
        Err(e) => ctx.fail("registering Nodes", e).await,
    };
    mark(&mut timings, "Nodes registered");

    let catalog_type = stowage_input::catalog::default_catalog().get(INSTANCE_TYPE).unwrap();
    let mut node_names = BTreeMap::new();
    let mut first_renewal = BTreeMap::new();
    for (zone, node) in &nodes {
        let name = node.metadata.name.clone().unwrap();
        let l = labels(node);
        assert!(name.ends_with(".ec2.internal"), "node {name} is named after the instance's PrivateDnsName");
        assert_eq!(l.get("kubernetes.io/hostname"), Some(&name));
        assert_eq!(l.get(ZONE_LABEL).map(String::as_str), Some(*zone));
        assert_eq!(l.get("node.kubernetes.io/instance-type").map(String::as_str), Some(INSTANCE_TYPE));
        assert_eq!(l.get("karpenter.sh/capacity-type").map(String::as_str), Some("on-demand"));
        assert_eq!(l.get("karpenter.sh/nodepool").map(String::as_str), Some("default"));
        assert_eq!(l.get("karpenter.k8s.aws/instance-family").map(String::as_str), Some("m5"));
        assert_eq!(l.get("kubernetes.io/os").map(String::as_str), Some("linux"));
        assert_eq!(l.get("kubernetes.io/arch").map(String::as_str), Some("amd64"));
        let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(taints.iter().any(|t| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute"), "node {name} registers with the unregistered taint: {taints:?}");
        let status = node.status.clone().unwrap();
        let alloc = status.allocatable.unwrap();
        assert_eq!(alloc["cpu"], Quantity(format_amount("cpu", catalog_type.allocatable().cpu_m)), "allocatable cpu");
        assert_eq!(alloc["pods"], Quantity(catalog_type.capacity.pods.to_string()), "allocatable pods");
        assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "Ready" && c.status == "True"), "node {name} Ready");
        let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease").get(&name).await.unwrap();
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()), "lease of {name}");
        first_renewal.insert(name.clone(), spec.renew_time.unwrap());
        node_names.insert(*zone, name);
    }

    // Without a controller, remove the unregistered taint ourselves (stowage's controller will).
    for name in node_names.values() {
        let node = nodes_api.get(name).await.unwrap();
        let keep: Vec<_> = node.spec.and_then(|s| s.taints).unwrap_or_default().into_iter().filter(|t| t.key != UNREGISTERED_TAINT_KEY).collect();
        nodes_api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": keep}}))).await.unwrap();
    }

    // --- Deployment spread over zones: the real scheduler puts one pod on each node -----------------
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "spread", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "spread"}},
            "template": {
                "metadata": {"labels": {"app": "spread"}},
                "spec": {
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "spread"}}
                    }],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]
                }
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "default").create(&PostParams::default(), &deployment).await.unwrap();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let spread = poll_until("2 spread pods bound and Running", SCHEDULE_WAIT, POLL, || {
        let api = pods_api.clone();
        async move {
            let pods = api.list(&ListParams::default().labels("app=spread")).await.map_err(|e| Error::kube("listing the spread pods", e))?;
            let state: Vec<String> = pods.items.iter().map(|p| format!("{:?}/{}", p.spec.as_ref().and_then(|s| s.node_name.clone()), running_and_ready(p))).collect();
            let done = pods.items.len() == 2 && pods.items.iter().all(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) && running_and_ready(p));
            Ok(if done { Probe::Done(pods.items) } else { Probe::Waiting(format!("pods (node/ready): {state:?}")) })
        }
    })
    .await;
    let spread = match spread {
        Ok(p) => p,
        Err(e) => ctx.fail("spreading the Deployment", e).await,
    };
    let used: BTreeSet<String> = spread.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
    let expected: BTreeSet<String> = node_names.values().cloned().collect();
    assert_eq!(used, expected, "kube-scheduler put one spread pod on each zone's node");
    for p in &spread {
        let s = p.status.clone().unwrap();
        assert!(s.pod_ip.as_deref().is_some_and(|ip| ip.starts_with("10.244.")), "pod IP from the stand-in: {:?}", s.pod_ip);
    }
    mark(&mut timings, "Deployment spread, pods Running");

    // --- WaitForFirstConsumer dynamic provisioning through the volume-provisioner stand-in ----------
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "ebs"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"type": "gp3"}
    }))
    .unwrap();
    Api::<StorageClass>::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "serviceName": "db",
            "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "nodeSelector": {ZONE_LABEL: ZONE_B},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "ebs",
                         "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .unwrap();
    Api::<StatefulSet>::namespaced(client.clone(), "default").create(&PostParams::default(), &sts).await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let bound = poll_until("PVC default/data-db-0 Bound and pod db-0 Running", SCHEDULE_WAIT, POLL, || {
        let (pvcs, pods) = (pvcs.clone(), pods_api.clone());
        async move {
            let pvc = pvcs.get_opt("data-db-0").await.map_err(|e| Error::kube("getting PVC data-db-0", e))?;
            let pod = pods.get_opt("db-0").await.map_err(|e| Error::kube("getting pod db-0", e))?;
            let phase = pvc.as_ref().and_then(|c| c.status.as_ref()?.phase.clone());
            let volume = pvc.as_ref().and_then(|c| c.spec.as_ref()?.volume_name.clone());
            let ready = pod.as_ref().is_some_and(running_and_ready);
            Ok(match (phase.as_deref(), volume, pod) {
                (Some("Bound"), Some(v), Some(p)) if ready => Probe::Done((v, p)),
                (phase, v, p) => Probe::Waiting(format!("pvc phase {phase:?} volume {v:?}; pod node {:?} running+ready {ready}", p.and_then(|p| p.spec?.node_name))),
            })
        }
    })
    .await;
    let (pv_name, db0) = match bound {
        Ok(b) => b,
        Err(e) => ctx.fail("binding the StatefulSet's volume", e).await,
    };
    assert_eq!(db0.spec.unwrap().node_name.as_ref(), Some(&node_names[ZONE_B]), "db-0 runs on the us-east-1b node");
    let pv = Api::<PersistentVolume>::all(client.clone()).get(&pv_name).await.unwrap();
    let pv_spec = pv.spec.unwrap();
    let terms = pv_spec.node_affinity.and_then(|a| a.required).unwrap().node_selector_terms;
    let exprs = terms[0].match_expressions.clone().unwrap();
    assert_eq!(exprs[0].key, ZONE_LABEL);
    assert_eq!(exprs[0].values.as_deref(), Some(&[ZONE_B.to_string()][..]), "PV node affinity is the selected node's zone");
    assert_eq!(pv_spec.csi.unwrap().driver, "ebs.csi.aws.com");
    assert_eq!(pv_spec.capacity.unwrap()["storage"], Quantity("1Gi".into()));
    assert_eq!(ctx.volumes.provisioned(), vec![pv_name.clone()], "the stand-in provisioned exactly this PV");
    mark(&mut timings, "StatefulSet volume provisioned + bound, pod Running");

    // --- the instance in us-east-1a goes away: its Node goes with it --------------------------------
    moto.terminate_instance(&instance_ids[ZONE_A]).await.unwrap();
    let gone_name = node_names[ZONE_A].clone();
    let gone = poll_until(format!("Node {gone_name} to be deleted after its instance terminated"), REGISTER_WAIT, POLL, || {
        let (api, name) = (nodes_api.clone(), gone_name.clone());
        async move {
            let n = api.get_opt(&name).await.map_err(|e| Error::kube(format!("getting Node {name}"), e))?;
            Ok(match n {
                None => Probe::Done(()),
                Some(n) => Probe::Waiting(format!("still there (deletionTimestamp {:?})", n.metadata.deletion_timestamp)),
            })
        }
    })
    .await;
    if let Err(e) = gone {
        ctx.fail("deleting the terminated instance's Node", e).await;
    }
    assert!(nodes_api.get_opt(&node_names[ZONE_B]).await.unwrap().is_some(), "the other Node stays");
    assert!(!ctx.kubelet.nodes().contains_key(&instance_ids[ZONE_A]), "the stand-in let go of the terminated instance");
    mark(&mut timings, "terminated instance's Node deleted");

    // The surviving Node's Lease is renewed and its Ready heartbeat refreshed (1 s and 2 s periods here).
    let name_b = node_names[ZONE_B].clone();
    let registered_heartbeat = nodes[ZONE_B].status.clone().unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap().last_heartbeat_time;
    let first_lease = first_renewal[&name_b].clone();
    let alive = poll_until(format!("Lease renewal and Ready heartbeat of {name_b}"), REGISTER_WAIT, POLL, || {
        let (nodes, name, first_lease, registered_heartbeat) = (nodes_api.clone(), name_b.clone(), first_lease.clone(), registered_heartbeat.clone());
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
        async move {
            let renewed = leases.get(&name).await.map_err(|e| Error::kube("getting the Lease", e))?.spec.and_then(|s| s.renew_time);
            let node = nodes.get(&name).await.map_err(|e| Error::kube("getting the Node", e))?;
            let heartbeat = node.status.and_then(|s| s.conditions).unwrap_or_default().into_iter().find(|c| c.type_ == "Ready").and_then(|c| c.last_heartbeat_time);
            Ok(if renewed.as_ref() > Some(&first_lease) && heartbeat > registered_heartbeat {
                Probe::Done(())
            } else {
                Probe::Waiting(format!("lease renewTime {renewed:?} (first {first_lease:?}), Ready heartbeat {heartbeat:?}"))
            })
        }
    })
    .await;
    if let Err(e) = alive {
        ctx.fail("keeping the Node alive", e).await;
    }
    mark(&mut timings, "Lease renewed, Ready heartbeat refreshed");

    assert!(ctx.kubelet.recent_errors().is_empty(), "kubelet stand-in errors: {:#?}", ctx.kubelet.recent_errors());
    assert!(ctx.volumes.recent_errors().is_empty(), "volume provisioner errors: {:#?}", ctx.volumes.recent_errors());
    let Ctx { kubelet, volumes, .. } = ctx;
    volumes.stop().await;
    kubelet.stop().await;
    tokio::try_join!(moto.stop(), cp.stop()).unwrap();
    mark(&mut timings, "stop everything");
    for (what, d) in &timings {
        eprintln!("e2e smoke: {:>6.2}s  {what}", d.as_secs_f64());
    }
    eprintln!("e2e smoke: {:>6.2}s  total", t0.elapsed().as_secs_f64());
}
