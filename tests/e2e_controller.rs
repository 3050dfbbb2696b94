//! The controller end to end: a real control plane (kube-apiserver, kube-scheduler,
//! kube-controller-manager), moto EC2 behind the AWS provider, the kubelet and volume-provisioner
//! stand-ins (`stowage_e2e`, docs/control-plane.md §8), and `stowage_controller` in this process.
//! Every pod placement below is made by the real kube-scheduler; every instance is launched through
//! aws-sdk-ec2 into moto. No mocks.
//!
//! | test | what it shows |
//! |---|---|
//! | `seed_1_statefulset_capacity_spread_3_0_3` | seed-1: 2 on-demand + 1 spot with capacity-spread 1/2/3, zones distinct, PVs in the pods' zones; empty nodes consolidated; the rescale lands again on 2+1 in the PVs' zones |
//! | `seed_1b_zonal_rescale_5_3_5` | seed-1b: zones 2/2/1; two emptied nodes consolidated; exactly two new nodes, each in its pod's PV zone |
//! | `seed_2_anti_affinity_1_3` | seed-2: one m5.16xlarge for three pods; scaling to 3 launches two nodes in one batch in the two other zones |
//! | `capacity_error_marks_the_offering_and_replans` | injected InsufficientInstanceCapacity: the offering is avoided and the pods land elsewhere |
//! | `restart_mid_launch_launches_nothing_twice_and_leaks_nothing` | the controller aborted right after creating a NodeClaim and again right after the instance exists; a fresh one finishes with one instance per NodeClaim; an instance without a NodeClaim is garbage-collected |
//! | `deleting_a_nodeclaim_drains_and_replaces_its_node` | a person deletes a NodeClaim: its Node is tainted and drained through the Eviction API (a pod bound to it just before the deletion too), the instance terminated, the Node and NodeClaim go, and the evicted pod's replacement gets a new node; then a do-not-disrupt pod holds the new node's drain until its NodeClaim's terminationGracePeriod and is deleted, not evicted, in time for it |
//! | `hostname_spread_replicas_get_a_node_each_and_bind_as_planned` | issue 15 behaviour 1: four hostname-spread replicas in an empty pool get four nodes from one batch, and kube-scheduler binds one on each, as the NodeClaims' nominations say |
//! | `a_spot_interruption_through_sqs_drains_and_replaces_the_node` | a spot interruption warning on moto's SQS: the NodeClaim is deleted at once, its Node drained, the pods run again on a node off the interrupted offering; events, metrics, the queue emptied, no leak |
//! | `api_server_restart_is_survived` | kube-apiserver restarted under a running controller; it re-lists and provisions the next batch |
//! | `karpenters_quick_start_launches_a_node_nodeadm_accepts` | issue 16: Karpenter's getting-started NodePool and EC2NodeClass (`role:`, `al2023@latest`) applied unchanged over Karpenter's own CRDs; a pending pod gets a node launched with the instance profile stowage created for the role, and nodeadm's own parser accepts its user data with the cluster's facts, labels and taints |
//! | `unsupported_fields_are_reported_on_the_objects` | an EC2NodeClass with `ipPrefixCount` and a static NodePool (`replicas`) get `UnsupportedFields=True` and a Warning `UnsupportedField` event; the NodeClass stays Ready, a pod gets a node of the dynamic pool only; the condition goes when the field does |
//! | `record_then_plan_offline_gives_the_controllers_plan` | `stowage record` + `stowage plan` on the files equal the NodeClaims the controller creates from the same state |
//!
//! Every control plane here has Karpenter v1.14.1's own NodePool, NodeClaim and EC2NodeClass CRDs
//! installed (`stowage_e2e::karpenter_aws_crds`), so everything stowage writes passes Karpenter's schemas
//! and validation rules.
//!
//! Needs Go and python3 on the first run (scripts/test.sh prepares both; docs/control-plane.md).

mod e2e_setup;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use e2e_setup::{aws_options, chart_rbac_client, controller_config, init_tracing, repo};
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use stowage_aws::{AwsOptions, AwsProvider};
use stowage_controller::Controller;
use stowage_controller::provisioner::BATCH_ANNOTATION;
use stowage_decide::cloud::{CloudProvider, LaunchRequest, OfferingRef};
use stowage_e2e::{CapacityError, ControlPlane, Error, Kubelet, Moto, Probe, VolumeProvisioner, poll_until};
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool};

const CLUSTER: &str = "demo";
const ZONE: &str = "topology.kubernetes.io/zone";
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
const NODEPOOL: &str = "karpenter.sh/nodepool";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
const POLL: Duration = Duration::from_millis(250);
/// Bounds, not sleeps. Generous: CI machines have 2 busy cores.
const SETTLE: Duration = Duration::from_secs(180);

/// One test's world.
struct World {
    name: String,
    cp: ControlPlane,
    moto: Moto,
    kubelet: Kubelet,
    volumes: VolumeProvisioner,
    client: kube::Client,
    aws: Arc<AwsProvider>,
}

impl World {
    async fn start(name: &str) -> World {
        init_tracing(None);
        let (cp, moto) = tokio::try_join!(ControlPlane::start(name), Moto::start(name)).unwrap();
        let client = cp.client();
        let kubelet = Kubelet::start(client.clone(), moto.ec2());
        let volumes = VolumeProvisioner::start(client.clone());
        let aws = Arc::new(AwsProvider::new(&moto.sdk_config(), CLUSTER, aws_options()).unwrap());
        World { name: name.to_string(), cp, moto, kubelet, volumes, client, aws }
    }

    /// The controller, as the ServiceAccount the Helm chart creates, with exactly the chart's RBAC rules
    /// (`charts/stowage/files/*.yaml`): a verb missing there fails these tests.
    async fn controller(&self) -> Controller {
        Controller::start(chart_rbac_client(&self.cp, &self.client).await, self.aws.clone(), controller_config("stowage-0", Some("127.0.0.1:0".parse().unwrap()))).await.unwrap()
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new(self.cp.kubectl()).arg("--kubeconfig").arg(self.cp.kubeconfig()).args(args).output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?}: {text}");
        text
    }

    async fn apply(&self, files: &[&str]) {
        for f in files {
            self.kubectl(&["apply", "-f", repo(f).to_str().unwrap()]).await;
        }
    }

    async fn consolidate_after(&self, pool: &str, after: &str) {
        let api: Api<NodePool> = Api::all(self.client.clone());
        api.patch(pool, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"disruption": {"consolidateAfter": after}}}))).await.unwrap();
    }

    async fn scale(&self, kind: &str, name: &str, replicas: u32) {
        self.kubectl(&["scale", kind, name, &format!("--replicas={replicas}")]).await;
    }

    async fn pods(&self, selector: &str) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), "default").list(&ListParams::default().labels(selector)).await.unwrap().items
    }

    async fn nodes(&self) -> Vec<Node> {
        Api::<Node>::all(self.client.clone()).list(&ListParams::default()).await.unwrap().items
    }

    async fn nodeclaims(&self) -> Vec<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone()).list(&ListParams::default()).await.unwrap().items
    }

    /// Fails the test with what the world looks like.
    async fn fail(&self, what: &str, e: Error) -> ! {
        let mut r = format!("{what}: {e}\n");
        for p in self.pods("").await {
            let s = p.status.clone().unwrap_or_default();
            let conds: Vec<String> = s.conditions.iter().flatten().map(|c| format!("{}={}({})", c.type_, c.status, c.message.clone().unwrap_or_default())).collect();
            r += &format!("pod {}: node {:?} phase {:?} {conds:?}\n", p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name), s.phase);
        }
        for n in self.nodes().await {
            let taints: Vec<String> = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default().iter().map(|t| t.key.clone()).collect();
            r += &format!("node {} {:?} taints {taints:?} deleting {}\n", n.metadata.name.clone().unwrap_or_default(), summary_labels(&n), n.metadata.deletion_timestamp.is_some());
        }
        for c in self.nodeclaims().await {
            let reqs: Vec<String> = c.spec.requirements.iter().map(|r| format!("{} {} {:?}", r.key, r.operator, r.values.iter().take(3).collect::<Vec<_>>())).collect();
            r += &format!("nodeclaim {} status {:?} reqs {reqs:?}\n", c.metadata.name.clone().unwrap_or_default(), c.status);
        }
        if let Ok(evs) = Api::<Event>::all(self.client.clone()).list(&ListParams::default()).await {
            for ev in evs.items.iter().rev().take(30) {
                r += &format!(
                    "event {} {}: {} {}\n",
                    ev.involved_object.kind.clone().unwrap_or_default(),
                    ev.involved_object.name.clone().unwrap_or_default(),
                    ev.reason.clone().unwrap_or_default(),
                    ev.message.clone().unwrap_or_default()
                );
            }
        }
        r += &format!("kubelet errors {:?}\nvolume errors {:?}\nlogs: {}\n", self.kubelet.recent_errors(), self.volumes.recent_errors(), self.cp.run_dir().display());
        panic!("{r}");
    }

    /// Waits until `n` pods match `selector`, all Running and Ready and none pending.
    async fn wait_running(&self, selector: &str, n: usize) -> Vec<Pod> {
        self.wait_replaced(selector, n, &[]).await
    }

    /// As [`World::wait_running`], counting only pods that are not among `old` (so a drain that has not
    /// begun yet is not mistaken for pods running again).
    async fn wait_replaced(&self, selector: &str, n: usize, old: &[Pod]) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let sel = selector.to_string();
        let old: BTreeSet<Option<String>> = old.iter().map(|p| p.metadata.uid.clone()).collect();
        let r = poll_until(format!("{n} pods {selector} Running"), SETTLE, POLL, || {
            let (api, sel, old) = (api.clone(), sel.clone(), old.clone());
            async move {
                let pods = api.list(&ListParams::default().labels(&sel)).await.map_err(|e| Error::kube("listing pods", e))?.items;
                let live: Vec<Pod> = pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none() && !old.contains(&p.metadata.uid)).collect();
                let running = live.iter().filter(|p| running_and_ready(p)).count();
                Ok(if running == n && live.len() == n { Probe::Done(live) } else { Probe::Waiting(format!("{running}/{} running", live.len())) })
            }
        })
        .await;
        match r {
            Ok(p) => p,
            Err(e) => self.fail("waiting for pods", e).await,
        }
    }

    /// Waits until exactly `n` Nodes exist (none being deleted) and as many NodeClaims.
    async fn wait_nodes(&self, n: usize) -> Vec<Node> {
        let (nodes, claims): (Api<Node>, Api<NodeClaim>) = (Api::all(self.client.clone()), Api::all(self.client.clone()));
        let r = poll_until(format!("{n} nodes"), SETTLE, POLL, || {
            let (nodes, claims) = (nodes.clone(), claims.clone());
            async move {
                let ns = nodes.list(&ListParams::default()).await.map_err(|e| Error::kube("listing nodes", e))?.items;
                let cs = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?.items;
                Ok(if ns.len() == n && cs.len() == n && ns.iter().all(|x| x.metadata.deletion_timestamp.is_none()) {
                    Probe::Done(ns)
                } else {
                    Probe::Waiting(format!("{} nodes, {} NodeClaims", ns.len(), cs.len()))
                })
            }
        })
        .await;
        match r {
            Ok(v) => v,
            Err(e) => self.fail("waiting for nodes", e).await,
        }
    }

    /// Every instance the provider lists is tracked by exactly one NodeClaim and vice versa.
    async fn assert_no_leak(&self) {
        let r = poll_until("instances == NodeClaims", Duration::from_secs(60), POLL, || async {
            let instances = self.aws.list().await.map_err(|e| Error::Invalid(e.to_string()))?;
            let live: BTreeSet<String> = instances.iter().filter(|i| !matches!(i.state.as_str(), "shutting-down" | "terminated")).map(|i| i.provider_id.clone()).collect();
            let tracked: BTreeSet<String> = self.nodeclaims().await.iter().filter_map(|c| c.status.as_ref()?.provider_id.clone()).collect();
            Ok(if live == tracked { Probe::Done(()) } else { Probe::Waiting(format!("instances {live:?} vs NodeClaims {tracked:?}")) })
        })
        .await;
        if let Err(e) = r {
            self.fail("leak check", e).await;
        }
    }

    /// Stops everything. Unless `errors_expected`, the controller must have counted no error in a stage
    /// that means a failed write (a missing RBAC verb shows up here first, as `event` or `create`).
    async fn stop(self, controller: Controller, errors_expected: bool) {
        let m = controller.metrics().render();
        if !errors_expected {
            for stage in ["watch", "leader", "event", "create", "register", "terminate", "disrupt", "gc", "plan", "snapshot"] {
                assert!(!m.contains(&format!("stowage_errors_total{{stage=\"{stage}\"}}")), "errors in stage {stage}:\n{m}");
            }
        }
        controller.shutdown().await;
        let (k, v) = (self.kubelet.recent_errors(), self.volumes.recent_errors());
        self.volumes.stop().await;
        self.kubelet.stop().await;
        tokio::try_join!(self.moto.stop(), self.cp.stop()).unwrap();
        eprintln!("{}: stand-in errors: kubelet {k:?}, volumes {v:?}", self.name);
    }
}

fn running_and_ready(p: &Pod) -> bool {
    let s = p.status.clone().unwrap_or_default();
    s.phase.as_deref() == Some("Running") && s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

fn label(n: &Node, k: &str) -> String {
    n.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or_default()
}

fn summary_labels(n: &Node) -> Vec<String> {
    [NODEPOOL, CAPACITY_TYPE, ZONE, INSTANCE_TYPE, "capacity-spread"].iter().map(|k| label(n, k)).collect()
}

fn node_of<'a>(p: &Pod, nodes: &'a [Node]) -> &'a Node {
    let name = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name.as_str())).unwrap_or_else(|| panic!("pod on unknown node {name}"))
}

/// Pods per value of `key` over all nodes (domains of nodes without pods count as 0).
fn domain_counts(pods: &[Pod], nodes: &[Node], key: &str) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = nodes.iter().map(|n| (label(n, key), 0)).collect();
    for p in pods {
        *m.entry(label(node_of(p, nodes), key)).or_default() += 1;
    }
    m
}

fn skew(counts: &BTreeMap<String, usize>) -> usize {
    counts.values().max().unwrap_or(&0) - counts.values().min().unwrap_or(&0)
}

/// Each pod's claimed PVs allow its node's zone.
async fn assert_pods_in_volume_zones(w: &World, pods: &[Pod], nodes: &[Node]) {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(w.client.clone(), "default");
    let pvs: Api<PersistentVolume> = Api::all(w.client.clone());
    for p in pods {
        let zone = label(node_of(p, nodes), ZONE);
        for v in p.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default() {
            let Some(claim) = v.persistent_volume_claim else { continue };
            let pvc = pvcs.get(&claim.claim_name).await.unwrap();
            let pv_name = pvc.spec.and_then(|s| s.volume_name).expect("claim bound");
            let pv = pvs.get(&pv_name).await.unwrap();
            let zones: Vec<String> = pv
                .spec
                .and_then(|s| s.node_affinity)
                .and_then(|a| a.required)
                .map(|r| r.node_selector_terms.into_iter().flat_map(|t| t.match_expressions.unwrap_or_default()).filter(|e| e.key == ZONE).flat_map(|e| e.values.unwrap_or_default()).collect())
                .unwrap_or_default();
            assert!(zones.contains(&zone), "pod {} on a {zone} node, its PV {pv_name} is in {zones:?}", p.metadata.name.clone().unwrap_or_default());
        }
    }
}

async fn bound_claims(w: &World) -> usize {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(w.client.clone(), "default");
    pvcs.list(&ListParams::default()).await.unwrap().items.iter().filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")).count()
}

/// (nodepool, capacity type, capacity-spread, pods of `selector`) per node, sorted.
fn layout(pods: &[Pod], nodes: &[Node]) -> Vec<(String, String, String, usize)> {
    let mut v: Vec<_> = nodes
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone();
            let count = pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()) == name).count();
            (label(n, NODEPOOL), label(n, CAPACITY_TYPE), label(n, "capacity-spread"), count)
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_1_statefulset_capacity_spread_3_0_3() {
    let t0 = Instant::now();
    let w = World::start("ctl-seed-1").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml", "scenarios/seed-1-statefulset-capacity-spread/storageclass.yaml"]).await;
    for pool in ["on-demand-np", "spot-np"] {
        w.consolidate_after(pool, "5s").await;
    }
    let c = w.controller().await;
    w.apply(&["scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml"]).await;
    let sel = "app.kubernetes.io/name=repro";

    // 1. Three nodes: two on-demand (capacity-spread 1 and 2), one spot (3), one pod each, zones distinct.
    let pods = w.wait_running(sel, 3).await;
    let nodes = w.wait_nodes(3).await;
    let expected = vec![
        ("on-demand-np".to_string(), "on-demand".to_string(), "1".to_string(), 1),
        ("on-demand-np".to_string(), "on-demand".to_string(), "2".to_string(), 1),
        ("spot-np".to_string(), "spot".to_string(), "3".to_string(), 1),
    ];
    assert_eq!(layout(&pods, &nodes), expected);
    assert_eq!(domain_counts(&pods, &nodes, ZONE).values().copied().collect::<Vec<_>>(), vec![1, 1, 1], "one pod per zone");
    assert_eq!(bound_claims(&w).await, 3);
    assert_pods_in_volume_zones(&w, &pods, &nodes).await;
    eprintln!("seed-1 step 1 done at {:.1}s", t0.elapsed().as_secs_f64());

    // 2. Scale to 0: the empty nodes go after consolidateAfter; the claims stay bound.
    w.scale("statefulset", "repro", 0).await;
    w.wait_running(sel, 0).await;
    w.wait_nodes(0).await;
    assert_eq!(bound_claims(&w).await, 3);
    eprintln!("seed-1 step 2 done at {:.1}s", t0.elapsed().as_secs_f64());

    // 3. Scale to 3: again 2 on-demand + 1 spot, each pod in its PV's zone, skews <= 1.
    w.scale("statefulset", "repro", 3).await;
    let pods = w.wait_running(sel, 3).await;
    let nodes = w.wait_nodes(3).await;
    assert_eq!(layout(&pods, &nodes), expected);
    assert_pods_in_volume_zones(&w, &pods, &nodes).await;
    assert!(skew(&domain_counts(&pods, &nodes, ZONE)) <= 1);
    assert!(skew(&domain_counts(&pods, &nodes, "capacity-spread")) <= 1);
    w.assert_no_leak().await;
    eprintln!("seed-1 passed in {:.1}s", t0.elapsed().as_secs_f64());
    w.stop(c, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_1b_zonal_rescale_5_3_5() {
    let t0 = Instant::now();
    let w = World::start("ctl-seed-1b").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/storageclass.yaml"]).await;
    w.consolidate_after("default", "5s").await;
    let c = w.controller().await;
    w.apply(&["scenarios/seed-1b-statefulset-zonal-rescale/statefulset.yaml"]).await;

    // 1. Five nodes, zones 2/2/1.
    let pods = w.wait_running("app=db", 5).await;
    let nodes = w.wait_nodes(5).await;
    let mut zones: Vec<usize> = domain_counts(&pods, &nodes, ZONE).values().copied().collect();
    zones.sort();
    assert_eq!(zones, vec![1, 2, 2]);
    eprintln!("seed-1b step 1 done at {:.1}s", t0.elapsed().as_secs_f64());

    // 2. Scale to 3: the two emptied nodes are consolidated.
    w.scale("statefulset", "db", 3).await;
    w.wait_running("app=db", 3).await;
    let before: BTreeSet<String> = w.wait_nodes(3).await.iter().filter_map(|n| n.metadata.name.clone()).collect();

    // 3. Scale to 5: exactly two new nodes, each in the zone of db-3's and db-4's volume.
    w.scale("statefulset", "db", 5).await;
    let pods = w.wait_running("app=db", 5).await;
    let nodes = w.wait_nodes(5).await;
    let new: Vec<&Node> = nodes.iter().filter(|n| !before.contains(n.metadata.name.as_deref().unwrap_or(""))).collect();
    assert_eq!(new.len(), 2, "exactly two new nodes");
    for name in ["db-3", "db-4"] {
        let p = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).unwrap();
        let n = node_of(p, &nodes);
        assert!(new.iter().any(|x| x.metadata.name == n.metadata.name), "{name} runs on a new node");
    }
    assert_pods_in_volume_zones(&w, &pods, &nodes).await;
    assert!(skew(&domain_counts(&pods, &nodes, ZONE)) <= 1);
    w.assert_no_leak().await;
    eprintln!("seed-1b passed in {:.1}s", t0.elapsed().as_secs_f64());
    w.stop(c, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_2_anti_affinity_1_3() {
    let t0 = Instant::now();
    let w = World::start("ctl-seed-2").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-2-apiserver-anti-affinity/nodepool.yaml"]).await;
    let c = w.controller().await;
    w.apply(&["scenarios/seed-2-apiserver-anti-affinity/deployment.yaml", "scenarios/seed-2-apiserver-anti-affinity/companions.yaml"]).await;

    // 1. One m5.16xlarge holds the three control-plane pods.
    let all = w.wait_running("kit.k8s.sh/app", 3).await;
    let nodes = w.wait_nodes(1).await;
    let first = nodes[0].metadata.name.clone().unwrap();
    assert_eq!(label(&nodes[0], INSTANCE_TYPE), "m5.16xlarge");
    assert_eq!(label(&nodes[0], CAPACITY_TYPE), "on-demand");
    assert!(all.iter().all(|p| node_of(p, &nodes).metadata.name.as_deref() == Some(first.as_str())));
    let first_claims: BTreeSet<String> = w.nodeclaims().await.iter().filter_map(|c| c.metadata.name.clone()).collect();

    // 2. Scale the apiserver to 3: two new m5.16xlarge nodes, in one batch, in the two other zones.
    w.scale("deployment", "example-apiserver", 3).await;
    let api = w.wait_running("kit.k8s.sh/app=example-apiserver", 3).await;
    let all = w.wait_running("kit.k8s.sh/app", 5).await;
    let nodes = w.wait_nodes(3).await;
    assert!(nodes.iter().all(|n| label(n, INSTANCE_TYPE) == "m5.16xlarge" && label(n, CAPACITY_TYPE) == "on-demand"));
    assert_eq!(domain_counts(&api, &nodes, ZONE).values().copied().collect::<Vec<_>>(), vec![1, 1, 1]);
    assert_eq!(domain_counts(&api, &nodes, "kubernetes.io/hostname").values().copied().collect::<Vec<_>>(), vec![1, 1, 1]);
    let on_first = all.iter().filter(|p| node_of(p, &nodes).metadata.name.as_deref() == Some(first.as_str())).count();
    assert_eq!(on_first, 3, "the first node keeps its three pods");
    let batches: BTreeSet<String> = w
        .nodeclaims()
        .await
        .iter()
        .filter(|c| !first_claims.contains(c.metadata.name.as_deref().unwrap_or("")))
        .filter_map(|c| c.metadata.annotations.as_ref()?.get(BATCH_ANNOTATION).cloned())
        .collect();
    assert_eq!(batches.len(), 1, "both new NodeClaims come from one batch: {batches:?}");
    w.assert_no_leak().await;
    eprintln!("seed-2 passed in {:.1}s", t0.elapsed().as_secs_f64());
    w.stop(c, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_error_marks_the_offering_and_replans() {
    let w = World::start("ctl-ice").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-2-apiserver-anti-affinity/nodepool.yaml"]).await;
    // The only type the pool allows has no on-demand capacity in us-east-1a and us-east-1b.
    for zone in ["us-east-1a", "us-east-1b"] {
        w.moto.inject_capacity_error(&CapacityError::offering("on-demand", "m5.16xlarge", zone)).await.unwrap();
    }
    let c = w.controller().await;
    w.apply(&["scenarios/seed-2-apiserver-anti-affinity/deployment.yaml", "scenarios/seed-2-apiserver-anti-affinity/companions.yaml"]).await;
    w.wait_running("kit.k8s.sh/app", 3).await;
    let nodes = w.wait_nodes(1).await;
    assert_eq!(label(&nodes[0], ZONE), "us-east-1c", "the refused zones are avoided");
    let metrics = c.metrics().render();
    assert!(metrics.contains("stowage_launches_total{result=\"insufficient_capacity\"}"), "{metrics}");
    let events = Api::<Event>::all(w.client.clone()).list(&ListParams::default()).await.unwrap().items;
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("InsufficientCapacityError")), "an event says why");
    let state = w.moto.fault_state().await.unwrap();
    assert!(state["iceErrors"].as_u64().unwrap_or(0) >= 1, "{state}");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// A Deployment of `n` pods of 1 CPU, one per node (hostname anti-affinity).
fn spread_deployment(name: &str, n: u32) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": name}}}
                    ]}},
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
                }
            }
        }
    })
}

/// A Deployment of `n` pods of `cpu` each with a `kubernetes.io/hostname` topology spread of maxSkew 1
/// (DoNotSchedule) over its own pods.
fn hostname_spread_deployment(name: &str, n: u32, cpu: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": name}}}
                    ],
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
                }
            }
        }
    })
}

async fn create_deployment(w: &World, d: serde_json::Value) {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(w.client.clone(), "default");
    api.create(&Default::default(), &serde_json::from_value(d).unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_launch_launches_nothing_twice_and_leaks_nothing() {
    let w = World::start("ctl-restart").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let claims: Api<NodeClaim> = Api::all(w.client.clone());

    // (a) Killed the moment a NodeClaim exists: its launch is in flight (or not yet begun).
    let c = w.controller().await;
    create_deployment(&w, spread_deployment("a", 2)).await;
    let seen = poll_until("a NodeClaim", SETTLE, Duration::from_millis(10), || async {
        let l = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing", e))?;
        Ok(if l.items.is_empty() { Probe::Waiting("none".into()) } else { Probe::Done(l.items) })
    })
    .await
    .unwrap();
    c.abort();
    let unlaunched = seen.iter().filter(|c| c.status.as_ref().and_then(|s| s.provider_id.as_ref()).is_none()).count();
    eprintln!("killed with {} NodeClaim(s), {unlaunched} without providerID", seen.len());
    let c = w.controller().await;
    w.wait_running("app=a", 2).await;
    w.wait_nodes(2).await;
    w.assert_no_leak().await;
    assert_one_instance_per_claim(&w).await;

    // (b) Killed the moment an instance exists: before or just after its NodeClaim's status is written.
    c.abort();
    let c = w.controller().await;
    create_deployment(&w, spread_deployment("b", 2)).await;
    let known: BTreeSet<String> = w.aws.list().await.unwrap().into_iter().map(|i| i.id).collect();
    poll_until("a new instance", SETTLE, Duration::from_millis(10), || async {
        let l = w.aws.list().await.map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(if l.iter().any(|i| !known.contains(&i.id)) { Probe::Done(()) } else { Probe::Waiting("none".into()) })
    })
    .await
    .unwrap();
    c.abort();
    let c = w.controller().await;
    w.wait_running("app=b", 2).await;
    w.wait_nodes(4).await;
    w.assert_no_leak().await;
    assert_one_instance_per_claim(&w).await;

    // (c) An instance launched for a NodeClaim that does not exist is terminated after the grace period.
    let req = LaunchRequest {
        nodeclaim: "ghost".into(),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        offerings: vec![OfferingRef { instance_type: "m5.large".into(), zone: "us-east-1a".into(), capacity_type: "on-demand".into(), price: 0.096, reservation: None }],
        labels: Default::default(),
        taints: vec![],
        tags: Default::default(),
    };
    let ghost = w.aws.launch(&req).await.unwrap();
    poll_until("the ghost instance terminated", Duration::from_secs(60), POLL, || async {
        let l = w.aws.list().await.map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(if l.iter().any(|i| i.id == ghost.id && !matches!(i.state.as_str(), "shutting-down" | "terminated")) { Probe::Waiting("still running".into()) } else { Probe::Done(()) })
    })
    .await
    .unwrap();
    // The round's metrics are written after its terminations.
    poll_until("the GC metric", Duration::from_secs(10), POLL, || async {
        let m = c.metrics().render();
        Ok(if m.contains("stowage_gc_instances_total 1") { Probe::Done(()) } else { Probe::Waiting(m) })
    })
    .await
    .unwrap();
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// No NodeClaim has two instances (the `karpenter.sh/nodeclaim` tag), and none is duplicated.
async fn assert_one_instance_per_claim(w: &World) {
    let instances = w.aws.list().await.unwrap();
    let mut per_claim: BTreeMap<String, usize> = BTreeMap::new();
    for i in instances.iter().filter(|i| !matches!(i.state.as_str(), "shutting-down" | "terminated")) {
        *per_claim.entry(i.nodeclaim.clone().unwrap_or_default()).or_default() += 1;
    }
    assert!(per_claim.values().all(|&n| n == 1), "instances per NodeClaim: {per_claim:?}");
}

/// A test pod's finalizer: keeps it readable once evicted.
const KEEP: &str = "stowage.dev/test-keep";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_nodeclaim_drains_and_replaces_its_node() {
    let w = World::start("ctl-drain").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let pools: Api<NodePool> = Api::all(w.client.clone());
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"template": {"spec": {"terminationGracePeriod": "15s"}}}}))).await.unwrap();
    let c = w.controller().await;
    // Its own grace period under the NodeClaim's, so the drain evicts it (one longer than what is left
    // of the NodeClaim's is deleted instead, below).
    let mut web = spread_deployment("web", 1);
    web["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(5);
    create_deployment(&w, web).await;
    let before = w.wait_running("app=web", 1).await;
    let old_node = w.wait_nodes(1).await[0].metadata.name.clone().unwrap();
    let old_claim = w.nodeclaims().await[0].metadata.name.clone().unwrap();
    let old_instance = w.nodeclaims().await[0].status.as_ref().and_then(|s| s.provider_id.clone()).unwrap();
    let old_zone = w.nodeclaims().await[0].metadata.labels.as_ref().and_then(|l| l.get("topology.kubernetes.io/zone").cloned()).expect("the launched NodeClaim's zone");

    // A pod bound to the node right before its NodeClaim is deleted, as kube-scheduler binds a wave's
    // pods while a node is being removed: the drain must evict it too, not leave it to Pod GC once the
    // node has gone (the controller's watch may not have it yet). Its finalizer keeps it readable after
    // the eviction; grace 0, so the drain does not wait for it.
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let late = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "late", "namespace": "default", "finalizers": [KEEP]},
        "spec": {"nodeName": old_node, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "pause"}]}
    });
    pods.create(&Default::default(), &serde_json::from_value(late).unwrap()).await.unwrap();

    // What `kubectl delete nodeclaim` does. The Node goes once its pods have left through the Eviction
    // API, which takes about a second here (the NodePool's terminationGracePeriod, set above, bounds it
    // at 15 s, and would delete "late" rather than evict it).
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    claims.delete(&old_claim, &Default::default()).await.unwrap();
    let gone = poll_until("the deleted NodeClaim's finalizer removed", SETTLE, POLL, || async {
        Ok(match claims.get_opt(&old_claim).await.map_err(|e| Error::kube("reading the NodeClaim", e))? {
            None => Probe::Done(()),
            Some(c) => Probe::Waiting(format!("finalizers {:?}", c.metadata.finalizers)),
        })
    })
    .await;
    if let Err(e) = gone {
        w.fail("terminating the NodeClaim", e).await;
    }
    let late = pods.get("late").await.unwrap();
    let disruption = late.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().find(|c| c.type_ == "DisruptionTarget").and_then(|c| c.reason.clone());
    assert_eq!(disruption.as_deref(), Some("EvictionByEvictionAPI"), "the pod bound just before the deletion was evicted (not Pod GC's): {:?}", late.status);
    pods.patch("late", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    let after = w.wait_running("app=web", 1).await;
    let nodes = w.wait_nodes(1).await;
    assert_ne!(after[0].metadata.uid, before[0].metadata.uid, "the pod was evicted and replaced");
    assert_ne!(nodes[0].metadata.name.as_deref(), Some(old_node.as_str()), "the replacement runs on a new node");
    let old_state = w.aws.list().await.unwrap().into_iter().find(|i| i.provider_id == old_instance).map(|i| i.state);
    assert!(old_state.as_deref().is_none_or(|s| matches!(s, "shutting-down" | "terminated")), "the old instance is terminated: {old_state:?}");
    poll_until("the termination metric", Duration::from_secs(10), POLL, || async {
        let m = c.metrics().render();
        let karpenter =
            m.contains("karpenter_nodeclaims_terminated_total{nodepool=\"default\"") && m.contains(&format!("karpenter_nodes_terminated_total{{nodepool=\"default\",zone=\"{old_zone}\"}} 1"));
        Ok(if m.contains("stowage_terminations_total 1") && karpenter { Probe::Done(()) } else { Probe::Waiting(m) })
    })
    .await
    .unwrap();

    // A do-not-disrupt pod is not evicted: it holds the drain until the NodeClaim's
    // terminationGracePeriod (15 s), and is deleted once less than its own grace period (3 s) is left.
    let new_node = nodes[0].metadata.name.clone().unwrap();
    let new_claim = w.nodeclaims().await.into_iter().find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(new_node.as_str())).expect("the new node's NodeClaim");
    let new_claim = new_claim.metadata.name.clone().unwrap();
    let held = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "held", "namespace": "default", "finalizers": [KEEP], "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {"nodeName": new_node, "terminationGracePeriodSeconds": 3, "containers": [{"name": "c", "image": "pause"}]}
    });
    pods.create(&Default::default(), &serde_json::from_value(held).unwrap()).await.unwrap();
    let t0 = Instant::now();
    claims.delete(&new_claim, &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let held = pods.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_none(), "a do-not-disrupt pod is not evicted within the grace period: {:?}", held.status);
    let gone = poll_until("the do-not-disrupt pod's NodeClaim gone", SETTLE, POLL, || async {
        Ok(if claims.get_opt(&new_claim).await.map_err(|e| Error::kube("reading the NodeClaim", e))?.is_none() { Probe::Done(()) } else { Probe::Waiting("still there".into()) })
    })
    .await;
    if let Err(e) = gone {
        w.fail("terminating the NodeClaim of a do-not-disrupt pod", e).await;
    }
    let took = t0.elapsed();
    // 15 s less the pod's own 3 s, less up to 1 s for the deletion timestamp's whole seconds.
    assert!(took >= Duration::from_secs(11), "the NodeClaim went after {took:?}, before its grace period let the pod go");
    let held = pods.get("held").await.unwrap();
    let evicted = held.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().any(|c| c.type_ == "DisruptionTarget" && c.reason.as_deref() == Some("EvictionByEvictionAPI"));
    assert!(held.metadata.deletion_timestamp.is_some() && !evicted, "deleted, not evicted: {:?}", held.status);
    pods.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// Issue 16 item 6 on the real control plane: a NodePool that allows `reserved` and an EC2NodeClass that
/// selects a reservation by tag (Karpenter's CRDs, tests/fixtures/karpenter-reserved.yaml). The first
/// node goes into the reservation (free), the second, with the reservation full, on-demand; the
/// EC2NodeClass's status lists the reservation, the reserved node carries Karpenter's labels, and the
/// emulated EC2 counts exactly one launch into the reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_capacity_is_used_before_on_demand_and_never_beyond_the_reservation() {
    let w = World::start("ctl-reserved").await;
    w.moto.seed_capacity_reservations(json!([{"id": "cr-0e2e", "instanceType": "m5.large", "zone": "us-east-1b", "count": 1, "tags": {"team": "ml"}}])).await.unwrap();
    w.apply(&["tests/fixtures/karpenter-reserved.yaml"]).await;
    let c = w.controller().await;
    // 1.5 cpu each: one pod per m5.large (1.93 cpu allocatable).
    create_deployment(&w, plain_deployment("train", 2, "1500m")).await;
    w.wait_running("app=train", 2).await;
    let nodes = w.wait_nodes(2).await;
    let reserved: Vec<&Node> = nodes.iter().filter(|n| label(n, CAPACITY_TYPE) == "reserved").collect();
    assert_eq!(reserved.len(), 1, "one node in the reservation: {:?}", nodes.iter().map(|n| n.metadata.labels.clone()).collect::<Vec<_>>());
    let r = reserved[0];
    assert_eq!((label(r, INSTANCE_TYPE).as_str(), label(r, "topology.kubernetes.io/zone").as_str()), ("m5.large", "us-east-1b"));
    assert_eq!(label(r, "karpenter.k8s.aws/capacity-reservation-id"), "cr-0e2e");
    assert_eq!(label(r, "karpenter.k8s.aws/capacity-reservation-type"), "default");
    let other = nodes.iter().find(|n| label(n, CAPACITY_TYPE) != "reserved").unwrap();
    assert_eq!(label(other, CAPACITY_TYPE), "on-demand", "the reservation is full: the second node is on-demand");

    let nc = Api::<EC2NodeClass>::all(w.client.clone()).get("default").await.unwrap();
    let listed: Vec<String> = nc.status.as_ref().and_then(|s| s.capacity_reservations.clone()).unwrap_or_default().into_iter().map(|r| r.id).collect();
    assert_eq!(listed, vec!["cr-0e2e".to_string()], "status.capacityReservations");
    let st = w.moto.fault_state().await.unwrap();
    assert_eq!(st["reservationLaunches"]["cr-0e2e"], 1, "{st}");
    assert_eq!(st["reservations"]["cr-0e2e"]["available"], 0, "{st}");

    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// A capacity block that ends (Karpenter's `capacityreservation.expiration`): a pod runs on a node in a
/// capacity block; when the block comes within 40 minutes of its end, the controller deletes its
/// NodeClaim (event `CapacityReservationExpiring`), the node drains, and the pod runs again on an
/// on-demand node, the expiring block being no longer offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_capacity_block_is_drained_before_it_ends() {
    let w = World::start("ctl-capacity-block").await;
    let at = |secs: u64| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + secs;
        aws_sdk_ec2::primitives::DateTime::from_secs(t as i64).fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime).unwrap()
    };
    let block =
        |count: u32, end: String| json!([{"id": "cr-0b10c", "instanceType": "m5.large", "zone": "us-east-1b", "count": count, "tags": {"team": "ml"}, "type": "capacity-block", "endDate": end}]);
    w.moto.seed_capacity_reservations(block(1, at(3 * 3600))).await.unwrap();
    w.apply(&["tests/fixtures/karpenter-reserved.yaml"]).await;
    let c = w.controller().await;
    create_deployment(&w, plain_deployment("train", 1, "1500m")).await;
    w.wait_running("app=train", 1).await;
    let nodes = w.wait_nodes(1).await;
    assert_eq!(label(&nodes[0], CAPACITY_TYPE), "reserved");
    assert_eq!(label(&nodes[0], "karpenter.k8s.aws/capacity-reservation-type"), "capacity-block");
    let claim = w.nodeclaims().await.into_iter().find(|c| c.metadata.labels.as_ref().and_then(|l| l.get("karpenter.k8s.aws/capacity-reservation-id")).map(String::as_str) == Some("cr-0b10c"));
    let claim = claim.expect("the NodeClaim in the block").metadata.name.unwrap();
    // The launch template of a capacity block: reservations only, the block as target, its market type.
    let lts = w.moto.ec2().describe_launch_templates().send().await.unwrap();
    let mut blocks = 0;
    for lt in lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))) {
        let v = w.moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap();
        let spec = data.capacity_reservation_specification().unwrap();
        if spec.capacity_reservation_target().and_then(|t| t.capacity_reservation_id()) == Some("cr-0b10c") {
            assert_eq!(spec.capacity_reservation_preference().map(|p| p.as_str()), Some("capacity-reservations-only"));
            assert_eq!(data.instance_market_options().and_then(|m| m.market_type()).map(|m| m.as_str()), Some("capacity-block"));
            blocks += 1;
        }
    }
    assert_eq!(blocks, 1, "one launch template targets the block");

    // Time passes: the block now ends in 10 minutes.
    w.moto.seed_capacity_reservations(block(0, at(600))).await.unwrap();
    let r = poll_until("the pod on an on-demand node, the block's NodeClaim gone", Duration::from_secs(120), POLL, || async {
        let claims = w.nodeclaims().await;
        let gone = !claims.iter().any(|c| c.metadata.name.as_deref() == Some(claim.as_str()));
        let pods = w.pods("app=train").await;
        let nodes = w.nodes().await;
        let on_demand = pods
            .iter()
            .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
            .any(|n| nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n.as_str()) && label(x, CAPACITY_TYPE) == "on-demand"));
        Ok(if gone && on_demand { Probe::Done(()) } else { Probe::Waiting(format!("claim gone {gone}, pod on on-demand {on_demand}")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("draining the expiring capacity block", e).await;
    }
    let evs = Api::<k8s_openapi::api::events::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.unwrap().items;
    assert!(
        evs.iter().any(|e| e.reason.as_deref() == Some("CapacityReservationExpiring") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(claim.as_str())),
        "the expiration event on the NodeClaim"
    );
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// A Deployment of `n` pods of `cpu` each, no placement constraint.
fn plain_deployment(name: &str, n: u32, cpu: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]}}
        }
    })
}

/// The offering price of a Node from the embedded catalog (moto prices nothing).
fn node_price(n: &Node) -> f64 {
    let (it, zone, ct) = (label(n, INSTANCE_TYPE), label(n, "topology.kubernetes.io/zone"), label(n, "karpenter.sh/capacity-type"));
    let t = stowage_input::catalog::default_catalog().get(&it).unwrap_or_else(|| panic!("{it} is not in the catalog"));
    t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct).unwrap_or_else(|| panic!("no {it} {zone} {ct} offering")).price
}

/// The seed-1b NodePool `default` (types of categories c, m and r, three zones), on-demand only, with
/// `disruption` merged into its spec's (`{}` keeps the file's).
async fn on_demand_pool(w: &World, disruption: serde_json::Value) {
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let requirements = json!([
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]);
    let patch = json!({"spec": {"disruption": disruption, "template": {"spec": {"requirements": requirements}}}});
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// A node sized for a 3-CPU pod and a 0.5-CPU pod, on-demand only (replacing a spot node with a spot
/// node needs Karpenter's SpotToSpotConsolidation gate, off by default in both), consolidating after
/// 2 s; the 3-CPU pod is then deleted. Returns the controller, the node and its price.
async fn underutilised_node(w: &World) -> (Controller, String, f64) {
    on_demand_pool(w, json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "2s"})).await;
    let c = w.controller().await;
    create_deployment(w, plain_deployment("big", 1, "3")).await;
    create_deployment(w, plain_deployment("small", 1, "500m")).await;
    w.wait_running("app=big", 1).await;
    w.wait_running("app=small", 1).await;
    let node = w.wait_nodes(1).await.remove(0);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(w.client.clone(), "default");
    deployments.delete("big", &Default::default()).await.unwrap();
    (c, node.metadata.name.clone().unwrap(), node_price(&node))
}

fn is_replacement(c: &NodeClaim) -> bool {
    c.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(stowage_controller::consolidation::DECISION_ANNOTATION))
}

/// Waits until a consolidation replacement is the only NodeClaim and the small pod runs on its node;
/// returns the replacement NodeClaim's and its node's names.
async fn consolidated(w: &World) -> (String, String) {
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let r = poll_until("a consolidation replacement alone, with the small pod on it", SETTLE, POLL, || async {
        let cs = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?.items;
        let pods = w.pods("app=small").await;
        let replacement = cs.iter().find(|c| is_replacement(c));
        let node = replacement.and_then(|c| c.status.as_ref()?.node_name.clone());
        let on_it = pods.iter().filter(|p| running_and_ready(p) && p.spec.as_ref().and_then(|s| s.node_name.clone()) == node).count();
        Ok(match (replacement.and_then(|c| c.metadata.name.clone()), node.clone()) {
            (Some(c), Some(n)) if cs.len() == 1 && on_it == 1 && pods.len() == 1 => Probe::Done((c, n)),
            _ => Probe::Waiting(format!("{} NodeClaims, replacement node {node:?}, {on_it} small pod on it of {}", cs.len(), pods.len())),
        })
    })
    .await;
    match r {
        Ok(x) => x,
        Err(e) => w.fail("consolidating", e).await,
    }
}

/// Underutilised consolidation on the real control plane (issue 17): a node sized for a 3-CPU pod and a
/// 0.5-CPU pod keeps only the small one; the controller launches a cheaper replacement, waits until it
/// is Initialized, then drains the old node, and the small pod lands on the replacement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underutilised_node_is_replaced_by_a_cheaper_one() {
    let w = World::start("ctl-consolidate").await;
    let (c, old_node, cost_before) = underutilised_node(&w).await;
    let (_, new_node) = consolidated(&w).await;
    let nodes = w.wait_nodes(1).await;
    assert_ne!(new_node, old_node, "the small pod moved to a new node");
    let cost_after = node_price(&nodes[0]);
    assert!(cost_after < cost_before, "the replacement ({} at ${cost_after}/h) is cheaper than what it replaced (${cost_before}/h)", label(&nodes[0], INSTANCE_TYPE));
    let m = c.metrics().render();
    assert!(m.contains("cause=\"underutilized\""), "the disruption is counted as consolidation:\n{m}");
    assert!(m.contains("karpenter_voluntary_disruption_decisions_total{decision=\"replace\",reason=\"underutilized\",consolidation_type=\"single\"} 1"), "{m}");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// The controller killed mid-consolidation (issue 17): the moment the replacement NodeClaim exists,
/// before it is Initialized and before the old node drains. The restarted controller reads the
/// decision back from the NodeClaims and finishes it with that same replacement: one replacement
/// launched in all, the small pod on it, the old instance terminated, nothing leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consolidation_interrupted_by_a_restart_finishes_without_a_second_launch() {
    let w = World::start("ctl-consolidate-kill").await;
    let (c, _, _) = underutilised_node(&w).await;
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let seen = poll_until("a replacement NodeClaim", SETTLE, Duration::from_millis(10), || async {
        let cs = claims.list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?.items;
        Ok(match cs.iter().find(|c| is_replacement(c)) {
            Some(r) => Probe::Done(r.clone()),
            None => Probe::Waiting(format!("{} NodeClaims", cs.len())),
        })
    })
    .await
    .unwrap();
    c.abort();
    let initialized = seen.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|x| x.type_ == "Initialized" && x.status == "True"));
    eprintln!("killed with replacement {} (Initialized: {initialized})", seen.metadata.name.clone().unwrap_or_default());
    let c = w.controller().await;
    let (replacement, _) = consolidated(&w).await;
    assert_eq!(Some(replacement), seen.metadata.name, "the restarted controller finished the decision with the replacement it found, launching no other");
    // Every launch is one CreateFleet (a relaunch of a NodeClaim that has an instance finds it first).
    let fleets = w.moto.fault_state().await.unwrap()["requests"]["CreateFleet"].as_u64().unwrap_or(0);
    assert_eq!(fleets, 2, "two launches in all, the first node's and one replacement's");
    w.wait_nodes(1).await;
    w.assert_no_leak().await;
    assert_one_instance_per_claim(&w).await;
    w.stop(c, true).await;
}

/// Drift on the real control plane (issue 17): a label added to the NodePool's template drifts every
/// NodeClaim made before (`NodePoolDrifted`); the controller replaces them one at a time (each
/// replacement Initialized before its node drains), and the replicas end on nodes with the new label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_nodepool_template_rolls_its_nodes() {
    let w = World::start("ctl-drift").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let c = w.controller().await;
    create_deployment(&w, spread_deployment("web", 2)).await;
    w.wait_running("app=web", 2).await;
    w.wait_nodes(2).await;
    let old: BTreeSet<String> = w.nodeclaims().await.iter().filter_map(|c| c.metadata.name.clone()).collect();

    let pools: Api<NodePool> = Api::all(w.client.clone());
    pools.patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}))).await.unwrap();
    let r = poll_until("every NodeClaim replaced by one with the new label", SETTLE, POLL, || async {
        let cs = w.nodeclaims().await;
        let fresh = cs.iter().filter(|c| !old.contains(c.metadata.name.as_deref().unwrap_or("")) && c.metadata.labels.as_ref().and_then(|l| l.get("team")).map(String::as_str) == Some("blue")).count();
        let running = w.pods("app=web").await.iter().filter(|p| running_and_ready(p)).count();
        Ok(if cs.len() == 2 && fresh == 2 && running == 2 { Probe::Done(()) } else { Probe::Waiting(format!("{} NodeClaims, {fresh} new with the label, {running} pods running", cs.len())) })
    })
    .await;
    if let Err(e) = r {
        w.fail("rolling drifted nodes", e).await;
    }
    let nodes = w.wait_nodes(2).await;
    assert!(nodes.iter().all(|n| label(n, "team") == "blue"), "{:?}", nodes.iter().map(summary_labels).collect::<Vec<_>>());
    let m = c.metrics().render();
    assert!(m.contains("cause=\"drifted\"") && !m.contains("cause=\"underutilized\""), "both replacements are counted as drift:\n{m}");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// Security-group drift on the real control plane with moto (issue 17): one instance moved out of the
/// EC2NodeClass's security group (ModifyInstanceAttribute) is `SecurityGroupDrift` as Karpenter's AWS
/// provider judges it, from garbage collection's DescribeInstances listing; the controller marks its
/// NodeClaim `Drifted=True` with that reason and replaces it (replacement Initialized first), and the
/// other NodeClaim, untouched, stays. On-demand nodes, and the provider reporting security groups
/// (`security_group_facts`, off elsewhere in these tests): moto lists an on-demand instance launched
/// from a template in no group, which is unknown, not drift, until the test moves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_moved_to_another_security_group_is_replaced() {
    let w = World::start("ctl-sg-drift").await;
    on_demand_pool(&w, json!({})).await;
    let aws = Arc::new(AwsProvider::new(&w.moto.sdk_config(), CLUSTER, AwsOptions { security_group_facts: true, ..aws_options() }).unwrap());
    let c = Controller::start(chart_rbac_client(&w.cp, &w.client).await, aws, controller_config("stowage-0", Some("127.0.0.1:0".parse().unwrap()))).await.unwrap();
    create_deployment(&w, spread_deployment("web", 2)).await;
    w.wait_running("app=web", 2).await;
    w.wait_nodes(2).await;
    let claims = w.nodeclaims().await;
    let (moved, kept) = (&claims[0], claims[1].metadata.name.clone().unwrap_or_default());
    let moved_name = moved.metadata.name.clone().unwrap_or_default();
    let instance = moved.status.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(|p| p.rsplit('/').next()).expect("a launched NodeClaim has a provider id").to_string();
    let vpc = w.moto.network().vpc_id.clone();
    let other = w.moto.ec2().create_security_group().group_name("not-the-nodeclass").description("drift").vpc_id(vpc).send().await.unwrap().group_id.unwrap();
    w.moto.ec2().modify_instance_attribute().instance_id(&instance).groups(&other).send().await.unwrap();

    let r = poll_until("the drifted NodeClaim replaced", SETTLE, POLL, || async {
        let cs = w.nodeclaims().await;
        let names: BTreeSet<String> = cs.iter().filter_map(|c| c.metadata.name.clone()).collect();
        let running = w.pods("app=web").await.iter().filter(|p| running_and_ready(p)).count();
        Ok(if !names.contains(&moved_name) && names.contains(&kept) && cs.len() == 2 && running == 2 {
            Probe::Done(())
        } else {
            Probe::Waiting(format!("NodeClaims {names:?}, {running} pods running"))
        })
    })
    .await;
    if let Err(e) = r {
        w.fail("replacing the drifted NodeClaim", e).await;
    }
    // The Disrupting event on the drifted NodeClaim names Karpenter's AWS provider's reason.
    let r = poll_until("the drift event", Duration::from_secs(30), POLL, || async {
        let evs = Api::<k8s_openapi::api::events::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing events", e))?.items;
        let notes: Vec<String> = evs.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(moved_name.as_str())).filter_map(|e| e.note.clone()).collect();
        Ok(if notes.iter().any(|n| n.contains("SecurityGroupDrift")) { Probe::Done(()) } else { Probe::Waiting(format!("{notes:?}")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("the drift event", e).await;
    }
    assert!(
        !w.nodeclaims().await.iter().any(|c| c.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|x| x.type_ == "Drifted"))),
        "the untouched NodeClaim and the replacement are not drifted"
    );
    let m = c.metrics().render();
    assert!(m.contains("cause=\"drifted\""), "the replacement is counted as drift:\n{m}");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// NodeClassDrift on the real control plane (issue 17): the controller keeps the EC2NodeClass's own
/// `karpenter.k8s.aws/ec2nodeclass-hash` annotation current (under the chart's RBAC) and stamps the
/// same hash on the NodeClaims it launches; a changed `spec.tags` (a field the hash covers, which no
/// running instance picks up) drifts both NodeClaims, which are replaced within the pool's default
/// budget, each `Drifted=True` with Karpenter's AWS provider's reason; the replacements carry the
/// new hash and are not drifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_nodeclass_field_replaces_its_nodes() {
    use stowage_decide::drift::{EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION, HASH_VERSION};
    let w = World::start("ctl-nodeclass-drift").await;
    on_demand_pool(&w, json!({})).await;
    let c = w.controller().await;
    create_deployment(&w, spread_deployment("web", 2)).await;
    w.wait_running("app=web", 2).await;
    w.wait_nodes(2).await;
    let classes: Api<EC2NodeClass> = Api::all(w.client.clone());
    let hash_of = |a: Option<&BTreeMap<String, String>>| a.and_then(|a| Some((a.get(EC2NODECLASS_HASH)?.clone(), a.get(EC2NODECLASS_HASH_VERSION)?.clone())));
    let before = w.nodeclaims().await;
    let first: BTreeSet<String> = before.iter().filter_map(|c| c.metadata.name.clone()).collect();
    let r = poll_until("the EC2NodeClass's hash annotation", Duration::from_secs(60), POLL, || async {
        let nc = classes.get("default").await.map_err(|e| Error::kube("getting the EC2NodeClass", e))?;
        let on_class = hash_of(nc.metadata.annotations.as_ref());
        Ok(match on_class {
            Some((h, v)) if v == HASH_VERSION => Probe::Done(h),
            other => Probe::Waiting(format!("{other:?}")),
        })
    })
    .await;
    let launched_with = match r {
        Ok(h) => h,
        Err(e) => w.fail("the EC2NodeClass's hash annotation", e).await,
    };
    for claim in &before {
        assert_eq!(
            hash_of(claim.metadata.annotations.as_ref()),
            Some((launched_with.clone(), HASH_VERSION.to_string())),
            "NodeClaim {:?} is stamped with the EC2NodeClass's hash",
            claim.metadata.name
        );
    }

    classes.patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"tags": {"team": "blue"}}}))).await.unwrap();
    let r = poll_until("both drifted NodeClaims replaced", SETTLE, POLL, || async {
        let cs = w.nodeclaims().await;
        let names: BTreeSet<String> = cs.iter().filter_map(|c| c.metadata.name.clone()).collect();
        let running = w.pods("app=web").await.iter().filter(|p| running_and_ready(p)).count();
        Ok(if names.is_disjoint(&first) && cs.len() == 2 && running == 2 { Probe::Done(cs) } else { Probe::Waiting(format!("NodeClaims {names:?}, {running} pods running")) })
    })
    .await;
    let after = match r {
        Ok(cs) => cs,
        Err(e) => w.fail("replacing the drifted NodeClaims", e).await,
    };
    let nc = classes.get("default").await.unwrap();
    let current = hash_of(nc.metadata.annotations.as_ref()).expect("the EC2NodeClass keeps its hash annotations");
    assert_ne!(current.0, launched_with, "the changed tags changed the EC2NodeClass's hash");
    for claim in &after {
        assert_eq!(hash_of(claim.metadata.annotations.as_ref()), Some(current.clone()), "replacement {:?} carries the new hash", claim.metadata.name);
        assert!(!claim.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|x| x.type_ == "Drifted")), "replacement {:?} is not drifted", claim.metadata.name);
    }
    let r = poll_until("the drift events", Duration::from_secs(30), POLL, || async {
        let evs = Api::<k8s_openapi::api::events::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing events", e))?.items;
        let named: BTreeSet<String> = evs
            .iter()
            .filter(|e| e.note.as_deref().is_some_and(|n| n.contains("NodeClassDrift")))
            .filter_map(|e| e.regarding.as_ref().and_then(|r| r.name.clone()))
            .filter(|n| first.contains(n))
            .collect();
        Ok(if named == first { Probe::Done(()) } else { Probe::Waiting(format!("NodeClassDrift events on {named:?}")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("the drift events", e).await;
    }
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// Hostname spread keeps its intent on new capacity (issue 15 behaviour 1) on the real control plane:
/// four replicas with a `kubernetes.io/hostname` spread of maxSkew 1 in an empty pool get four nodes
/// from one batch, where kube-scheduler's rule alone (one new node is one domain, skew 0) would accept
/// a single node for all four. kube-scheduler then binds them as planned: every node holds as many
/// replicas as its NodeClaim nominated (the `stowage.dev/nominated-pods` annotation), one. The
/// pods ask for 1.5 CPU so that none of the planned nodes fits two of them: which replica binds first
/// may not pile the others onto the first Ready node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_spread_replicas_get_a_node_each_and_bind_as_planned() {
    let w = World::start("ctl-hostname").await;
    on_demand_pool(&w, json!({})).await;
    let c = w.controller().await;
    create_deployment(&w, hostname_spread_deployment("web", 4, "1500m")).await;
    let pods = w.wait_running("app=web", 4).await;
    let nodes = w.wait_nodes(4).await;
    assert_eq!(domain_counts(&pods, &nodes, "kubernetes.io/hostname").values().copied().collect::<Vec<_>>(), vec![1, 1, 1, 1], "one replica per node");

    let claims = w.nodeclaims().await;
    let batches: BTreeSet<String> = claims.iter().filter_map(|c| c.metadata.annotations.as_ref()?.get(BATCH_ANNOTATION).cloned()).collect();
    assert_eq!(batches.len(), 1, "the four NodeClaims come from one batch: {batches:?}");
    // The replicas are alike, so kube-scheduler may bind any of them on any planned node: what the plan
    // fixes is how many each node holds.
    let uids: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let mut nominated_all = BTreeSet::new();
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let nominated = stowage_decide::provision::nominated_pods(claim);
        assert_eq!(nominated.len(), 1, "NodeClaim {name} nominates one replica: {nominated:?}");
        let node = claim.status.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_else(|| panic!("NodeClaim {name} has no node"));
        let on_node = pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())).count();
        assert_eq!(on_node, nominated.len(), "node {node} of NodeClaim {name} holds as many replicas as the plan put there");
        nominated_all.extend(nominated);
    }
    assert_eq!(nominated_all, uids, "the plan nominated every replica");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// Interruption through moto's SQS (issue 17 acceptance): the controller reads the queue
/// (`interruptionQueue`); a spot interruption warning for the instance of a spot NodeClaim, sent as
/// EventBridge would, deletes that NodeClaim at once: its Node is tainted and drained, the instance
/// terminated, the pods run again on a replacement that avoids the interrupted offering (the pool allows
/// one type in two zones, so the other zone), Karpenter's events and metrics are written, the message is
/// deleted from the queue, and nothing leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_through_sqs_drains_and_replaces_the_node() {
    use stowage_decide::interruption::{Kind, event_body};
    let w = World::start("ctl-interrupt").await;
    let queue_url = w.moto.create_queue("demo-interruptions").await.unwrap();
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/interruption-1-spot-warning/nodepool.yaml"]).await;
    let queue = stowage_aws::sqs::SqsQueue::new(&w.moto.sdk_config(), "demo-interruptions", aws_options().retry).unwrap().with_wait_seconds(2);
    let mut config = controller_config("stowage-0", Some("127.0.0.1:0".parse().unwrap()));
    config.interruption_queue = Some(stowage_controller::interruption::QueueHandle(Arc::new(queue)));
    let c = Controller::start(chart_rbac_client(&w.cp, &w.client).await, w.aws.clone(), config).await.unwrap();
    create_deployment(&w, plain_deployment("web", 2, "700m")).await;
    let before = w.wait_running("app=web", 2).await;
    let old_node = w.wait_nodes(1).await.remove(0);
    let old_claim = w.nodeclaims().await.remove(0);
    let (old_zone, old_type) = (label(&old_node, ZONE), label(&old_node, INSTANCE_TYPE));
    assert_eq!((label(&old_node, CAPACITY_TYPE).as_str(), old_type.as_str()), ("spot", "m5.large"));
    let provider_id = old_claim.status.as_ref().and_then(|s| s.provider_id.clone()).unwrap();
    let instance = stowage_decide::interruption::instance_id(&provider_id).unwrap().to_string();
    let claim_name = old_claim.metadata.name.clone().unwrap();

    // A message about an instance that is not ours, and one that is not an event, come first: both are
    // read and deleted, neither disrupts anything.
    w.moto.send_message(&queue_url, &event_body(Kind::SpotInterrupted, "i-0000000000000dead", "us-east-1", "2026-12-01T12:00:00Z")).await.unwrap();
    w.moto.send_message(&queue_url, "not an event").await.unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let t = Instant::now();
    w.moto.send_message(&queue_url, &event_body(Kind::SpotInterrupted, &instance, "us-east-1", &now)).await.unwrap();

    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let deleting = poll_until("the interrupted NodeClaim deleted", SETTLE, POLL, || async {
        Ok(match claims.get_opt(&claim_name).await.map_err(|e| Error::kube("reading the NodeClaim", e))? {
            Some(c) if c.metadata.deletion_timestamp.is_none() => Probe::Waiting("not deleted yet".into()),
            _ => Probe::Done(()),
        })
    })
    .await;
    if let Err(e) = deleting {
        w.fail("the interruption message", e).await;
    }
    let cordoned_in = t.elapsed();
    let after = w.wait_replaced("app=web", 2, &before).await;
    let replaced_in = t.elapsed();
    let nodes = w.wait_nodes(1).await;
    let new_node = &nodes[0];
    eprintln!("interruption: NodeClaim deleted {:.1}s after the message, pods running again after {:.1}s", cordoned_in.as_secs_f64(), replaced_in.as_secs_f64());
    assert_ne!(new_node.metadata.name, old_node.metadata.name, "the pods run on a new node");
    assert!(after.iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()) == new_node.metadata.name), "both pods on the replacement");
    let before_uids: BTreeSet<_> = before.iter().map(|p| p.metadata.uid.clone()).collect();
    assert!(after.iter().all(|p| !before_uids.contains(&p.metadata.uid)), "the pods were evicted and recreated");
    assert_eq!(label(new_node, CAPACITY_TYPE), "spot");
    assert_ne!(label(new_node, ZONE), old_zone, "the interrupted offering (m5.large spot {old_zone}) is not reused");
    let old_state = w.aws.list().await.unwrap().into_iter().find(|i| i.provider_id == provider_id).map(|i| i.state);
    assert!(old_state.as_deref().is_none_or(|s| matches!(s, "shutting-down" | "terminated")), "the interrupted instance is terminated: {old_state:?}");

    // Karpenter's events, on the NodeClaim and on the Node.
    let r = poll_until("the interruption events", Duration::from_secs(30), POLL, || async {
        let evs = Api::<k8s_openapi::api::events::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing events", e))?.items;
        let seen: BTreeSet<(String, String)> =
            evs.iter().filter_map(|e| Some((e.regarding.as_ref()?.kind.clone()?, e.reason.clone()?))).filter(|(_, r)| r == "SpotInterrupted" || r == "TerminatingOnInterruption").collect();
        Ok(if seen.len() == 4 { Probe::Done(()) } else { Probe::Waiting(format!("{seen:?}")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("interruption events", e).await;
    }
    // Every message read and deleted; only ours disrupted a NodeClaim.
    let r = poll_until("the queue empty and the metrics counted", Duration::from_secs(60), POLL, || async {
        let depth = w.moto.queue_depth(&queue_url).await.map_err(|e| Error::Invalid(e.to_string()))?;
        let m = c.metrics().render();
        let counted = m.contains("karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 2")
            && m.contains("karpenter_interruption_deleted_messages_total 3")
            && m.contains("karpenter_interruption_message_queue_duration_seconds_count 2")
            && m.contains("karpenter_nodeclaims_disrupted_total{reason=\"spot_interrupted\",nodepool=\"spot\",capacity_type=\"spot\"} 1");
        Ok(if depth == 0 && counted {
            Probe::Done(())
        } else {
            Probe::Waiting(format!("queue depth {depth}\n{}", m.lines().filter(|l| l.contains("interruption") || l.contains("disrupted")).collect::<Vec<_>>().join("\n")))
        })
    })
    .await;
    if let Err(e) = r {
        w.fail("the interruption queue", e).await;
    }
    let m = c.metrics().render();
    assert!(!m.contains("stowage_errors_total{stage=\"interruption\"}"), "{m}");
    w.assert_no_leak().await;
    assert_one_instance_per_claim(&w).await;
    w.stop(c, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_is_survived() {
    let w = World::start("ctl-apiserver").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let c = w.controller().await;
    create_deployment(&w, spread_deployment("web", 1)).await;
    w.wait_running("app=web", 1).await;
    w.wait_nodes(1).await;

    let t = Instant::now();
    w.cp.restart_apiserver().await.unwrap();
    eprintln!("kube-apiserver restarted in {:.1}s", t.elapsed().as_secs_f64());
    w.scale("deployment", "web", 3).await;
    w.wait_running("app=web", 3).await;
    w.wait_nodes(3).await;
    w.assert_no_leak().await;
    let m = c.metrics().render();
    assert!(m.contains("stowage_state_synced 1"), "{m}");
    w.stop(c, true).await;
}

/// Fields stowage reads but does not act on are reported on their objects, which are still used
/// (docs/aws-provider.md §8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_fields_are_reported_on_the_objects() {
    let w = World::start("ctl-unsupported").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml"]).await;
    let classes: Api<stowage_input::api::EC2NodeClass> = Api::all(w.client.clone());
    classes.patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"ipPrefixCount": 1}}))).await.unwrap();
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let mut fixed = pools.get("default").await.unwrap();
    fixed.metadata = kube::api::ObjectMeta { name: Some("fixed".into()), ..Default::default() };
    // Karpenter's CRD refuses a weight on a static pool ("'weight' is not supported on static NodePools").
    fixed.spec.replicas = Some(2);
    fixed.spec.weight = None;
    fixed.status = None;
    pools.create(&Default::default(), &fixed).await.unwrap();
    let c = w.controller().await;
    create_deployment(&w, plain_deployment("web", 1, "500m")).await;
    w.wait_running("app=web", 1).await;
    let node = w.wait_nodes(1).await.remove(0);
    assert_eq!(label(&node, NODEPOOL), "default", "the static pool launches nothing for pending pods");

    let condition = |conds: Option<&Vec<stowage_input::api::Condition>>, ty: &str| conds.into_iter().flatten().find(|c| c.type_ == ty).cloned();
    let r = poll_until("UnsupportedFields conditions and events", Duration::from_secs(60), POLL, || async {
        let nc = classes.get("default").await.map_err(|e| Error::kube("getting the EC2NodeClass", e))?;
        let np = pools.get("fixed").await.map_err(|e| Error::kube("getting the NodePool", e))?;
        let on_class = condition(nc.status.as_ref().and_then(|s| s.conditions.as_ref()), "UnsupportedFields");
        let on_pool = condition(np.status.as_ref().and_then(|s| s.conditions.as_ref()), "UnsupportedFields");
        let evs = Api::<k8s_openapi::api::events::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing events", e))?.items;
        let seen: BTreeSet<String> =
            evs.iter().filter(|e| e.reason.as_deref() == Some("UnsupportedField") && e.type_.as_deref() == Some("Warning")).filter_map(|e| e.regarding.as_ref()?.kind.clone()).collect();
        let ok = on_class.as_ref().is_some_and(|c| c.status == "True" && c.message.as_deref().is_some_and(|m| m.contains("spec.ipPrefixCount")))
            && on_pool.as_ref().is_some_and(|c| c.status == "True" && c.message.as_deref().is_some_and(|m| m.contains("spec.replicas")))
            && seen.len() == 2;
        Ok(if ok { Probe::Done(nc) } else { Probe::Waiting(format!("EC2NodeClass {on_class:?}, NodePool {on_pool:?}, events on {seen:?}")) })
    })
    .await;
    let nc = match r {
        Ok(nc) => nc,
        Err(e) => w.fail("unsupported fields reported", e).await,
    };
    assert_eq!(condition(nc.status.as_ref().and_then(|s| s.conditions.as_ref()), "Ready").map(|c| c.status), Some("True".to_string()), "the NodeClass is still used");

    classes.patch("default", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"ipPrefixCount": null}}))).await.unwrap();
    let r = poll_until("the EC2NodeClass's condition removed", Duration::from_secs(60), POLL, || async {
        let nc = classes.get("default").await.map_err(|e| Error::kube("getting the EC2NodeClass", e))?;
        let on_class = condition(nc.status.as_ref().and_then(|s| s.conditions.as_ref()), "UnsupportedFields");
        Ok(if on_class.is_none() { Probe::Done(()) } else { Probe::Waiting(format!("{on_class:?}")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("condition removed", e).await;
    }
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// (nodepool, instance type, zone, capacity type, capacity-spread) of a plan's new nodes.
fn planned(plan: &serde_json::Value) -> Vec<(String, String, String, String, String)> {
    let mut v: Vec<_> = plan["newNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
            (s("nodePool"), s("instanceType"), s("zone"), s("capacityType"), n["labels"]["capacity-spread"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    v.sort();
    v
}

fn claimed(claims: &[NodeClaim]) -> Vec<(String, String, String, String, String)> {
    let mut v: Vec<_> = claims
        .iter()
        .map(|c| {
            let first = |k: &str| c.spec.requirements.iter().find(|r| r.key == k).and_then(|r| r.values.first().cloned()).unwrap_or_default();
            let l = c.metadata.labels.clone().unwrap_or_default();
            (l.get(NODEPOOL).cloned().unwrap_or_default(), first(INSTANCE_TYPE), first(ZONE), first(CAPACITY_TYPE), first("capacity-spread"))
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_then_plan_offline_gives_the_controllers_plan() {
    let w = World::start("ctl-record").await;
    w.apply(&["scenarios/common-ec2nodeclass.yaml", "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml"]).await;
    // seed-1's spread (capacity-spread and zone, one pod per host) on a Deployment: three pods at once.
    let mut d = spread_deployment("spread", 3);
    d["spec"]["template"]["spec"]["topologySpreadConstraints"] = json!([
        {"maxSkew": 1, "topologyKey": "capacity-spread", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "spread"}}},
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "spread"}}}
    ]);
    create_deployment(&w, d).await;
    // No controller yet: kube-scheduler marks the pods unschedulable.
    let api: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    poll_until("3 unschedulable pods", SETTLE, POLL, || async {
        let pods = api.list(&ListParams::default().labels("app=spread")).await.map_err(|e| Error::kube("listing", e))?.items;
        let n = pods.iter().filter(|p| stowage_controller::state::is_provisionable(p)).count();
        Ok(if n == 3 { Probe::Done(()) } else { Probe::Waiting(format!("{n} unschedulable")) })
    })
    .await
    .unwrap();

    let dir = stowage_e2e::e2e_root().join(&w.name).join("record");
    std::fs::create_dir_all(&dir).unwrap();
    let (workload, catalog) = (dir.join("workload.json"), dir.join("catalog.json"));
    let bin = env!("CARGO_BIN_EXE_stowage");
    let rec = tokio::process::Command::new(bin)
        .args(["record", "--kubeconfig", w.cp.kubeconfig().to_str().unwrap(), "--cluster-name", CLUSTER, "--plain-al2023-fallback", "-o"])
        .arg(&workload)
        .arg("--catalog-out")
        .arg(&catalog)
        .envs(w.moto.env_vars())
        .output()
        .await
        .unwrap();
    assert!(rec.status.success(), "stowage record: {}", String::from_utf8_lossy(&rec.stderr));
    let plan = tokio::process::Command::new(bin).arg("plan").arg(&workload).arg("--catalog").arg(&catalog).args(["-o", "json"]).output().await.unwrap();
    assert!(plan.status.success(), "stowage plan: {}", String::from_utf8_lossy(&plan.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let offline = planned(&plan);
    assert_eq!(offline.len(), 3, "{plan}");

    let c = w.controller().await;
    w.wait_running("app=spread", 3).await;
    w.wait_nodes(3).await;
    assert_eq!(claimed(&w.nodeclaims().await), offline, "the controller made the plan stowage plan made offline");
    w.assert_no_leak().await;
    w.stop(c, false).await;
}

/// Karpenter's pod and node series of the quick start: the running `app=inflate` pod's state with its
/// node's labels and its ReplicaSet as owner, one observation of each of its durations (bound, started,
/// decided, and bound and started after its placement), and its node's allocatable CPU in cores,
/// labelled with the node's name, pool and instance type.
async fn assert_pod_and_node_series(w: &World, c: &Controller, node: &Node) {
    let node_name = node.metadata.name.clone().unwrap();
    let (instance_type, zone) = (label(node, "node.kubernetes.io/instance-type"), label(node, "topology.kubernetes.io/zone"));
    assert!(!instance_type.is_empty() && !zone.is_empty(), "{:?}", node.metadata.labels);
    let cpu = node.status.as_ref().and_then(|s| s.allocatable.as_ref()?.get("cpu").cloned()).expect("the node's allocatable cpu").0;
    let cores: f64 = match cpu.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
        None => cpu.parse().unwrap(),
    };
    let r = poll_until("karpenter_pods_state and karpenter_nodes_allocatable", Duration::from_secs(60), POLL, || async {
        let pod = w.pods("app=inflate").await.into_iter().next().expect("the inflate pod");
        let owner = &pod.metadata.owner_references.as_ref().expect("the pod's ReplicaSet")[0];
        assert_eq!((owner.api_version.as_str(), owner.kind.as_str()), ("apps/v1", "ReplicaSet"));
        let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")).is_some_and(|c| c.status == "True");
        let state = format!(
            "karpenter_pods_state{{arch=\"amd64\",capacity_type=\"on-demand\",instance_type=\"{instance_type}\",managed=\"true\",name=\"{}\",namespace=\"default\",node=\"{node_name}\",nodepool=\"default\",owner=\"/apis/apps/v1/namespaces/default/replicasets/{}\",phase=\"Running\",ready=\"{ready}\",scheduled=\"true\",zone=\"{zone}\"}} 1",
            pod.metadata.name.as_deref().unwrap(),
            owner.name
        );
        let m = c.metrics().render();
        let has_state = m.lines().any(|l| l == state);
        let allocatable = m.lines().filter(|l| l.starts_with("karpenter_nodes_allocatable{") && l.contains("resource_type=\"cpu\"")).find(|l| l.contains(&format!("node_name=\"{node_name}\"")));
        let node_ok = allocatable.is_some_and(|l| {
            let value: f64 = l.rsplit_once(' ').unwrap().1.parse().unwrap();
            [format!("instance_type=\"{instance_type}\""), "nodepool=\"default\"".into(), "managed=\"true\"".into(), "capacity_type=\"on-demand\"".into(), format!("zone=\"{zone}\"")].iter().all(|x| l.contains(x.as_str()))
                && value == cores
        });
        // The pod was seen pending, placed by a batch, bound and started: one observation each.
        let timed = [
            "karpenter_pods_bound_duration_seconds_count 1",
            "karpenter_pods_startup_duration_seconds_count 1",
            "karpenter_pods_scheduling_decision_duration_seconds_count 1",
            "karpenter_pods_provisioning_bound_duration_seconds_count 1",
            "karpenter_pods_provisioning_startup_duration_seconds_count 1",
        ]
        .iter()
        .all(|t| m.lines().any(|l| l == *t));
        Ok(if has_state && node_ok && timed {
            Probe::Done(())
        } else {
            let shown = |l: &&str| l.starts_with("karpenter_pods_state") || l.starts_with("karpenter_nodes_allocatable{") || (l.starts_with("karpenter_pods_") && l.contains("_count"));
            Probe::Waiting(format!("want {state}, the node's allocatable cpu {cores} and one observation of each pod duration; have: {}", m.lines().filter(shown).collect::<Vec<_>>().join("; ")))
        })
    })
    .await;
    if let Err(e) = r {
        w.fail("pod and node metrics", e).await;
    }
}

/// Issue 16's acceptance: a Karpenter v1 quick-start setup, end to end. Karpenter's own CRDs (every
/// control plane here has them), its getting-started NodePool and EC2NodeClass applied as its docs write
/// them (`role: KarpenterNodeRole-demo`, `al2023@latest`; tests/fixtures/karpenter-quick-start.yaml), one
/// pending pod; `al2023@latest` resolved through the public SSM parameters of Kubernetes 1.31. The pod
/// runs on a new node; the EC2NodeClass is Ready with an instance profile stowage
/// created for the role (in IAM, holding the role); the launch template the instance came from names that
/// profile and the resolved AMI; and nodeadm's own parser and validation (peers/nodeadm) accept its user
/// data, reading the cluster's facts, the node's labels and the unregistered taint from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenters_quick_start_launches_a_node_nodeadm_accepts() {
    let mut w = World::start("ctl-quick-start").await;
    let checker = stowage_e2e::nodeadm_checker(&w.cp.run_dir().join("nodeadm-check.log")).await.unwrap();
    // `al2023@latest` the way it resolves on EKS: the public SSM parameters of the cluster's Kubernetes
    // version (seeded into moto, which has none, pointing at copies of its plain images named like the
    // EKS images), with no emulator fallback.
    let eks = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023";
    let mut standard = BTreeMap::new();
    for arch in ["x86_64", "arm64"] {
        let plain = w.moto.plain_al2023_image(arch).await.unwrap();
        let id = w.moto.copy_image(&plain, &format!("amazon-eks-node-al2023-{arch}-standard-1.31-v20261201")).await.unwrap();
        w.moto.put_public_parameters(&[(&format!("{eks}/{arch}/standard/recommended/image_id"), &id)]).await.unwrap();
        standard.insert(arch, id);
    }
    let mut opts = aws_options();
    opts.alias.plain_al2023_fallback = false;
    opts.alias.kubernetes_version = Some("1.31".into());
    w.aws = Arc::new(AwsProvider::new(&w.moto.sdk_config(), CLUSTER, opts).unwrap());
    w.apply(&["tests/fixtures/karpenter-quick-start.yaml"]).await;
    let c = w.controller().await;
    create_deployment(&w, plain_deployment("inflate", 1, "1")).await;
    let pods = w.wait_running("app=inflate", 1).await;
    let nodes = w.wait_nodes(1).await;
    assert_eq!(pods[0].spec.as_ref().unwrap().node_name, nodes[0].metadata.name);
    assert_eq!(label(&nodes[0], NODEPOOL), "default");
    assert_eq!(label(&nodes[0], CAPACITY_TYPE), "on-demand");
    assert_eq!(label(&nodes[0], "kubernetes.io/arch"), "amd64");

    // The EC2NodeClass: Ready, with the profile stowage made for the role.
    let nc = Api::<EC2NodeClass>::all(w.client.clone()).get("default").await.unwrap();
    let status = nc.status.clone().expect("EC2NodeClass status");
    let ready = status.conditions.iter().flatten().find(|c| c.type_ == "Ready").map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("True"), "{status:?}");
    let profile = status.instance_profile.clone().expect("status.instanceProfile");
    let got = w.moto.iam().get_instance_profile().instance_profile_name(&profile).send().await.unwrap();
    let roles: Vec<&str> = got.instance_profile().unwrap().roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, vec![stowage_e2e::NODE_ROLE], "the profile holds the EC2NodeClass's role");
    let amis: BTreeSet<String> = status.amis.iter().flatten().map(|a| a.id.clone()).collect();

    // The launch template(s) stowage made: the profile, the AMI, and user data nodeadm accepts.
    let lts = w.moto.ec2().describe_launch_templates().send().await.unwrap();
    let ours: Vec<_> = lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))).collect();
    assert!(!ours.is_empty(), "no launch template: {lts:?}");
    for lt in ours {
        let v = w.moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap();
        assert_eq!(data.iam_instance_profile().and_then(|p| p.name()), Some(profile.as_str()));
        assert!(data.image_id().is_some_and(|id| amis.contains(id)), "{:?} not among {amis:?}", data.image_id());
        assert_eq!(data.image_id(), Some(standard["x86_64"].as_str()), "an amd64 c/m/r type gets the standard x86_64 EKS image of 1.31");
        let user_data = stowage_aws::userdata::base64_decode(data.user_data().unwrap()).unwrap();
        let config = match stowage_e2e::nodeadm_reads(&checker, &user_data).unwrap() {
            Ok(c) => c,
            Err(e) => panic!("nodeadm refuses the user data: {e}\n{}", String::from_utf8_lossy(&user_data)),
        };
        let cluster = &config["spec"]["cluster"];
        assert_eq!(cluster["name"], CLUSTER);
        let info = e2e_setup::aws_options().cluster;
        assert_eq!(cluster["apiServerEndpoint"], info.endpoint.as_str());
        assert_eq!(cluster["certificateAuthority"], info.ca_bundle.as_str(), "nodeadm decodes it from base64; Go re-encodes it the same");
        assert_eq!(cluster["cidr"], info.service_cidr.as_deref().unwrap());
        let kubelet = &config["spec"]["kubelet"];
        assert!(kubelet["config"]["maxPods"].as_i64().is_some_and(|n| n > 0), "{kubelet}");
        let flags: Vec<&str> = kubelet["flags"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
        let labels = flags.iter().find_map(|f| f.strip_prefix("--node-labels=")).unwrap_or_else(|| panic!("no --node-labels in {flags:?}"));
        assert!(labels.split(',').any(|l| l == "karpenter.sh/nodepool=default"), "{labels}");
        let taints = flags.iter().find_map(|f| f.strip_prefix("--register-with-taints=")).unwrap_or_else(|| panic!("no --register-with-taints in {flags:?}"));
        assert!(taints.split(',').any(|t| t == "karpenter.sh/unregistered:NoExecute"), "{taints}");
    }

    // Karpenter's NodePool series: the pool's limit, and its one node's capacity once a batch has seen it.
    let r = poll_until("karpenter_nodepools_* for the quick-start pool", Duration::from_secs(60), POLL, || async {
        let m = c.metrics().render();
        let limit = m.contains("karpenter_nodepools_limit{resource_type=\"cpu\",nodepool=\"default\"} 1000.0");
        let nodes = m.contains("karpenter_nodepools_usage{resource_type=\"nodes\",nodepool=\"default\"} 1.0");
        Ok(if limit && nodes { Probe::Done(()) } else { Probe::Waiting(m.lines().filter(|l| l.starts_with("karpenter_nodepools")).collect::<Vec<_>>().join("; ")) })
    })
    .await;
    if let Err(e) = r {
        w.fail("NodePool metrics", e).await;
    }
    let m = c.metrics().render();
    assert!(m.contains("karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"aws\"} 1"), "one launch measured:\n{m}");

    assert_pod_and_node_series(&w, &c, &nodes[0]).await;

    // A user data nodeadm refuses is told apart (the checker can fail): the same NodeConfig without the
    // service CIDR, as stowage wrote it before it asked EKS.
    let broken = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n    apiServerEndpoint: https://127.0.0.1:6443\n    certificateAuthority: Q0EK\n--B--\n";
    let refused = stowage_e2e::nodeadm_reads(&checker, broken.as_bytes()).unwrap().unwrap_err();
    assert!(refused.contains("CIDR"), "{refused}");

    w.assert_no_leak().await;
    w.stop(c, false).await;
}
