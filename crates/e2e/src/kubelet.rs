//! A kubelet stand-in: registers a Node for every running moto instance a NodeClaim points at, keeps it
//! alive, "runs" the pods bound to it and cleans up when the instance goes away.
//!
//! What it does, per tick (default every 250 ms):
//! - DescribeInstances (all states) and list NodeClaims. For each `running` instance whose
//!   `aws:///<zone>/<instance-id>` equals a NodeClaim's `status.providerID`, create the Node once, the way
//!   a kubelet started by Karpenter's user data would register it: name = the instance's PrivateDnsName
//!   (the NodeClaim name if there is none); labels = the NodeClaim's labels, every single-valued `In`
//!   requirement, then hostname, zone, region, instance type (from the instance), os=linux and arch (from
//!   the labels, else amd64); taints = spec.taints + spec.startupTaints + `karpenter.sh/unregistered:NoExecute`;
//!   spec.providerID; capacity/allocatable from the NodeClaim status (`pods` defaults to
//!   [`KubeletConfig::default_pods`] if the NodeClaim has none, since a Node without it fits no pod);
//!   conditions Ready=True and the three pressure conditions False; addresses; nodeInfo. Then a Lease in
//!   `kube-node-lease` (owned by the Node), renewed every [`KubeletConfig::lease_renew`]; the Ready
//!   heartbeat is refreshed every [`KubeletConfig::status_refresh`].
//! - Pods bound to its Nodes: not terminating → status Running, conditions PodReadyToStartContainers,
//!   Initialized, ContainersReady, Ready (PodScheduled kept), a podIP from 10.244.<node>.0/24, hostIP, running
//!   container statuses (init containers terminated with exit 0, sidecars running). Terminating → deleted
//!   with grace period 0 (uid precondition, so a StatefulSet's replacement pod of the same name is safe).
//! - Instance `shutting-down`, `terminated`, `stopping`, `stopped` or gone → delete the Node and its Lease,
//!   force-delete its pods. A Node deleted by someone else is not recreated (a kubelet registers once).
//!
//! What it does not do: remove `karpenter.sh/unregistered` (the controller's job; tests do it by hand
//! without one), set NodeClaim status (nodeName, conditions), labels like `karpenter.sh/registered`, run
//! containers, honour probes, readiness gates, resource limits or eviction, report volumes attached.
//!
//! [`Kubelet::start_kwok`] runs the same stand-in for Nodes that Karpenter's KWOK cloud provider creates
//! itself (`spec.providerID` `kwok://<node>`; in production the KWOK controller, sigs.k8s.io/kwok, plays
//! their kubelets). Such a Node arrives with Karpenter's labels, `karpenter.sh/unregistered:NoExecute`,
//! capacity and allocatable and no conditions; the stand-in adopts it once: conditions Ready=True and the
//! three pressure conditions False, addresses and nodeInfo through the status subresource (`pods`
//! allocatable defaulted as above if missing), then the Lease, the heartbeat and the pods exactly as
//! for a moto Node. It never creates or deletes a KWOK Node, and it lets go of one that is gone. Taints are
//! left alone: Karpenter removes the unregistered taint at registration, as it does for a real kubelet.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::InstanceStateName;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Pod, PodCondition, PodIP, PodStatus,
    Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Error, Result, kube_conflict, kube_not_found, now};
use stowage_input::api::NodeClaim;

/// The taint Karpenter's nodes register with; the controller removes it once it has adopted the Node.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
const LEASE_NAMESPACE: &str = "kube-node-lease";
const KUBELET_VERSION: &str = "v1.36.3";
const MAX_ERRORS: usize = 50;

#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// How often instances, NodeClaims and pods are looked at.
    pub interval: Duration,
    /// Lease renewal period (a real kubelet: 10 s with a 40 s lease).
    pub lease_renew: Duration,
    /// Ready-condition heartbeat period (a real kubelet: on change, else every 5 min).
    pub status_refresh: Duration,
    /// `pods` capacity when the NodeClaim status has none.
    pub default_pods: i64,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig { interval: Duration::from_millis(250), lease_renew: Duration::from_secs(10), status_refresh: Duration::from_secs(60), default_pods: 110 }
    }
}

#[derive(Default)]
struct Shared {
    /// instance id → node name, for Nodes the stand-in currently keeps alive.
    nodes: BTreeMap<String, String>,
    errors: VecDeque<String>,
    ticks: u64,
}

/// Where Nodes come from.
enum Source {
    /// The stand-in registers a Node for each running moto instance a NodeClaim points at.
    Moto(aws_sdk_ec2::Client),
    /// Karpenter's KWOK cloud provider creates the Nodes (`kwok://` provider IDs); the stand-in adopts them.
    Kwok,
}

/// The provider-ID prefix of the Nodes Karpenter's KWOK cloud provider creates.
pub const KWOK_PROVIDER_PREFIX: &str = "kwok://";

/// The running stand-in. [`Kubelet::stop`] ends it; dropping it aborts the task.
pub struct Kubelet {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
}

impl Kubelet {
    pub fn start(kube: kube::Client, ec2: aws_sdk_ec2::Client) -> Self {
        Self::start_with(kube, ec2, KubeletConfig::default())
    }

    pub fn start_with(kube: kube::Client, ec2: aws_sdk_ec2::Client, config: KubeletConfig) -> Self {
        Self::spawn(kube, Source::Moto(ec2), config)
    }

    /// The stand-in for the Nodes of Karpenter's KWOK cloud provider (module docs).
    pub fn start_kwok(kube: kube::Client) -> Self {
        Self::start_kwok_with(kube, KubeletConfig::default())
    }

    pub fn start_kwok_with(kube: kube::Client, config: KubeletConfig) -> Self {
        Self::spawn(kube, Source::Kwok, config)
    }

    fn spawn(kube: kube::Client, source: Source, config: KubeletConfig) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = State { kube, source, config, nodes: BTreeMap::new(), done: BTreeSet::new(), next_index: 1, shared: shared.clone() };
        let task = tokio::spawn(run(state, stop_rx));
        Kubelet { stop, task: Some(task), shared }
    }

    /// instance id (moto) or provider ID (KWOK) → node name of the Nodes it currently keeps alive.
    pub fn nodes(&self) -> BTreeMap<String, String> {
        lock(&self.shared).nodes.clone()
    }

    /// The most recent errors (oldest first, at most 50); useful in a test's failure message.
    pub fn recent_errors(&self) -> Vec<String> {
        lock(&self.shared).errors.iter().cloned().collect()
    }

    /// Completed ticks.
    pub fn ticks(&self) -> u64 {
        lock(&self.shared).ticks
    }

    /// Stops after the current tick and waits for it.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

async fn run(mut state: State, mut stop: watch::Receiver<bool>) {
    loop {
        state.tick().await;
        lock(&state.shared).ticks += 1;
        tokio::select! {
            _ = tokio::time::sleep(state.config.interval) => {}
            _ = stop.changed() => break,
        }
    }
}

/// What the stand-in needs of an instance.
struct InstanceInfo {
    state: InstanceStateName,
    zone: String,
    instance_type: String,
    private_dns: Option<String>,
    private_ip: Option<String>,
}

struct ManagedNode {
    name: String,
    uid: String,
    ip: String,
    index: u32,
    next_pod_ip: u32,
    lease_renewed: Instant,
    status_refreshed: Instant,
}

struct State {
    kube: kube::Client,
    source: Source,
    config: KubeletConfig,
    /// instance id (moto) or provider ID (KWOK) → the Node kept alive for it.
    nodes: BTreeMap<String, ManagedNode>,
    /// Instances (provider IDs) whose Node was registered (adopted) once and is gone now: never again.
    done: BTreeSet<String>,
    next_index: u32,
    shared: Arc<Mutex<Shared>>,
}

impl State {
    fn record(&self, e: Error) {
        tracing::warn!(error = %e, "kubelet stand-in");
        let mut s = lock(&self.shared);
        if s.errors.len() == MAX_ERRORS {
            s.errors.pop_front();
        }
        s.errors.push_back(e.to_string());
    }

    fn publish(&self) {
        let nodes = self.nodes.iter().map(|(i, n)| (i.clone(), n.name.clone())).collect();
        lock(&self.shared).nodes = nodes;
    }

    async fn tick(&mut self) {
        let ec2 = match &self.source {
            Source::Moto(ec2) => Some(ec2.clone()),
            Source::Kwok => None,
        };
        let Some(ec2) = ec2 else { return self.tick_kwok().await };
        let instances = match self.instances(&ec2).await {
            Ok(i) => i,
            Err(e) => return self.record(e),
        };
        if let Err(e) = self.register(&instances).await {
            self.record(e);
        }
        self.reap(&instances).await;
        self.heartbeat().await;
        if let Err(e) = self.pods().await {
            self.record(e);
        }
    }

    async fn tick_kwok(&mut self) {
        if let Err(e) = self.adopt_kwok().await {
            self.record(e);
        }
        self.heartbeat().await;
        if let Err(e) = self.pods().await {
            self.record(e);
        }
    }

    /// Adopts new KWOK Nodes and lets go of the ones that are gone (Karpenter deleted them).
    async fn adopt_kwok(&mut self) -> Result<()> {
        let api: Api<Node> = Api::all(self.kube.clone());
        let list = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing Nodes", e))?;
        let mut present = BTreeSet::new();
        for node in &list.items {
            let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|p| p.starts_with(KWOK_PROVIDER_PREFIX)) else { continue };
            present.insert(provider_id.to_string());
            if self.nodes.contains_key(provider_id) || self.done.contains(provider_id) {
                continue;
            }
            if let Err(e) = self.adopt_kwok_one(provider_id, node).await {
                self.record(e);
            }
        }
        let gone: Vec<String> = self.nodes.keys().filter(|id| !present.contains(*id)).cloned().collect();
        for id in gone {
            if let Some(node) = self.nodes.remove(&id) {
                tracing::info!(node = %node.name, "kubelet stand-in: KWOK Node gone; releasing it");
            }
            self.done.insert(id);
        }
        self.publish();
        Ok(())
    }

    async fn adopt_kwok_one(&mut self, provider_id: &str, node: &Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let index = self.next_index;
        let ip = format!("10.0.{}.{}", 100 + index / 250 % 100, index % 250 + 1);
        let arch = node.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/arch")).cloned().unwrap_or_else(|| "amd64".to_string());
        let mut status = json!({
            "conditions": node_conditions(),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": node_info(&name, &arch),
        });
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        if allocatable.is_none_or(|a| !a.contains_key("pods")) {
            let mut a = allocatable.cloned().unwrap_or_default();
            a.insert("pods".to_string(), Quantity(self.config.default_pods.to_string()));
            status["allocatable"] = json!(a);
        }
        let api: Api<Node> = Api::all(self.kube.clone());
        match api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&json!({ "status": status }))).await {
            Ok(_) => {}
            // Deleted between the list and now: nothing to adopt.
            Err(e) if kube_not_found(&e) => return Ok(()),
            Err(e) => return Err(Error::kube(format!("adopting KWOK Node {name} ({provider_id})"), e)),
        }
        let uid = node.metadata.uid.clone().unwrap_or_default();
        self.next_index += 1;
        tracing::info!(node = %name, provider_id, "kubelet stand-in adopted a KWOK Node");
        let mut managed = ManagedNode { name, uid, ip, index, next_pod_ip: 2, lease_renewed: Instant::now(), status_refreshed: Instant::now() };
        let lease = self.ensure_lease(&managed).await;
        managed.lease_renewed = Instant::now();
        self.nodes.insert(provider_id.to_string(), managed);
        lease
    }

    async fn instances(&self, ec2: &aws_sdk_ec2::Client) -> Result<BTreeMap<String, InstanceInfo>> {
        let reservations = ec2.describe_instances().into_paginator().items().send().try_collect().await.map_err(|e| Error::aws("DescribeInstances", e))?;
        let mut out = BTreeMap::new();
        for i in reservations.into_iter().flat_map(|r| r.instances.unwrap_or_default()) {
            let (Some(id), Some(state)) = (i.instance_id, i.state.and_then(|s| s.name)) else { continue };
            out.insert(
                id,
                InstanceInfo {
                    state,
                    zone: i.placement.and_then(|p| p.availability_zone).unwrap_or_default(),
                    instance_type: i.instance_type.map(|t| t.as_str().to_string()).unwrap_or_default(),
                    private_dns: i.private_dns_name.filter(|s| !s.is_empty()),
                    private_ip: i.private_ip_address.filter(|s| !s.is_empty()),
                },
            );
        }
        Ok(out)
    }

    async fn register(&mut self, instances: &BTreeMap<String, InstanceInfo>) -> Result<()> {
        let waiting: Vec<&String> = instances.iter().filter(|(id, i)| i.state == InstanceStateName::Running && !self.nodes.contains_key(*id) && !self.done.contains(*id)).map(|(id, _)| id).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        let claims = Api::<NodeClaim>::all(self.kube.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing NodeClaims", e))?;
        for id in waiting {
            let info = &instances[id];
            let provider_id = format!("aws:///{}/{id}", info.zone);
            let claim = claims.items.iter().find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id.as_str()));
            if let Some(claim) = claim
                && let Err(e) = self.register_one(id, info, &provider_id, claim).await
            {
                self.record(e);
            }
        }
        Ok(())
    }

    async fn register_one(&mut self, id: &str, info: &InstanceInfo, provider_id: &str, claim: &NodeClaim) -> Result<()> {
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let name = info.private_dns.clone().unwrap_or_else(|| claim_name.clone());
        let index = self.next_index;
        let ip = info.private_ip.clone().unwrap_or_else(|| format!("10.0.255.{}", index % 250 + 1));
        let node = node_object(&name, &ip, info, provider_id, claim, self.config.default_pods);
        let api: Api<Node> = Api::all(self.kube.clone());
        let created = match api.create(&PostParams::default(), &node).await {
            Ok(n) => n,
            Err(e) if kube_conflict(&e) => {
                let existing = api.get(&name).await.map_err(|e| Error::kube(format!("getting Node {name}"), e))?;
                let theirs = existing.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                if theirs != Some(provider_id) {
                    // A Node of a terminated instance whose private IP (hence DNS name) was reused and which is
                    // still finalising: register once it is gone.
                    tracing::info!(node = %name, existing = ?theirs, provider_id, "kubelet stand-in: name taken; waiting");
                    return Ok(());
                }
                // Registered before (a restarted stand-in): adopt it.
                existing
            }
            Err(e) => return Err(Error::kube(format!("creating Node {name} for NodeClaim {claim_name} ({provider_id})"), e)),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        self.next_index += 1;
        tracing::info!(node = %name, nodeclaim = %claim_name, provider_id, "kubelet stand-in registered a Node");
        let mut managed = ManagedNode { name, uid, ip, index, next_pod_ip: 2, lease_renewed: Instant::now(), status_refreshed: Instant::now() };
        let lease = self.ensure_lease(&managed).await;
        managed.lease_renewed = Instant::now();
        self.nodes.insert(id.to_string(), managed);
        self.publish();
        lease
    }

    async fn ensure_lease(&self, node: &ManagedNode) -> Result<()> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(node.name.clone()),
                namespace: Some(LEASE_NAMESPACE.to_string()),
                owner_references: Some(vec![OwnerReference { api_version: "v1".to_string(), kind: "Node".to_string(), name: node.name.clone(), uid: node.uid.clone(), ..Default::default() }]),
                ..Default::default()
            },
            spec: Some(LeaseSpec { holder_identity: Some(node.name.clone()), lease_duration_seconds: Some(40), renew_time: Some(MicroTime(now())), ..Default::default() }),
        };
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), LEASE_NAMESPACE);
        match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(e) if kube_conflict(&e) => self.renew_lease(&node.name).await.map(|_| ()),
            Err(e) => Err(Error::kube(format!("creating Lease {LEASE_NAMESPACE}/{}", node.name), e)),
        }
    }

    /// Ok(false) if the Lease does not exist.
    async fn renew_lease(&self, name: &str) -> Result<bool> {
        let api: Api<Lease> = Api::namespaced(self.kube.clone(), LEASE_NAMESPACE);
        let patch = json!({"spec": {"renewTime": MicroTime(now()), "holderIdentity": name}});
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(true),
            Err(e) if kube_not_found(&e) => Ok(false),
            Err(e) => Err(Error::kube(format!("renewing Lease {LEASE_NAMESPACE}/{name}"), e)),
        }
    }

    async fn reap(&mut self, instances: &BTreeMap<String, InstanceInfo>) {
        let gone: Vec<String> = self.nodes.keys().filter(|id| instances.get(*id).is_none_or(|i| !matches!(i.state, InstanceStateName::Pending | InstanceStateName::Running))).cloned().collect();
        for id in gone {
            let Some(node) = self.nodes.remove(&id) else { continue };
            self.done.insert(id.clone());
            // Observers (`Kubelet::nodes`) never see a Node listed that is already being deleted.
            self.publish();
            tracing::info!(node = %node.name, instance = %id, "kubelet stand-in: instance gone, deleting its Node");
            if let Err(e) = self.delete_node(&node).await {
                self.record(e);
            }
        }
    }

    async fn delete_node(&self, node: &ManagedNode) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        match nodes.delete(&node.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if kube_not_found(&e) => {}
            Err(e) => return Err(Error::kube(format!("deleting Node {}", node.name), e)),
        }
        let leases: Api<Lease> = Api::namespaced(self.kube.clone(), LEASE_NAMESPACE);
        match leases.delete(&node.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if kube_not_found(&e) => {}
            Err(e) => return Err(Error::kube(format!("deleting Lease {LEASE_NAMESPACE}/{}", node.name), e)),
        }
        let pods: Api<Pod> = Api::all(self.kube.clone());
        let on_node = pods.list(&ListParams::default().fields(&format!("spec.nodeName={}", node.name))).await.map_err(|e| Error::kube(format!("listing pods on Node {}", node.name), e))?;
        for pod in &on_node.items {
            force_delete(&self.kube, pod).await?;
        }
        Ok(())
    }

    async fn heartbeat(&mut self) {
        let mut released = Vec::new();
        let ids: Vec<String> = self.nodes.keys().cloned().collect();
        for id in ids {
            let Some(node) = self.nodes.get(&id) else { continue };
            let name = node.name.clone();
            let mut alive = true;
            if node.lease_renewed.elapsed() >= self.config.lease_renew {
                match self.renew_lease(&name).await {
                    Ok(true) => {}
                    Ok(false) => match self.node_exists(&name).await {
                        Ok(true) => {
                            if let Err(e) = self.ensure_lease(node).await {
                                self.record(e);
                            }
                        }
                        Ok(false) => alive = false,
                        Err(e) => self.record(e),
                    },
                    Err(e) => self.record(e),
                }
                if let Some(n) = self.nodes.get_mut(&id) {
                    n.lease_renewed = Instant::now();
                }
            }
            let due = self.nodes.get(&id).is_some_and(|n| n.status_refreshed.elapsed() >= self.config.status_refresh);
            if alive && due {
                let api: Api<Node> = Api::all(self.kube.clone());
                let patch = json!({"status": {"conditions": node_conditions()}});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                    Ok(_) => {}
                    Err(e) if kube_not_found(&e) => alive = false,
                    Err(e) => self.record(Error::kube(format!("refreshing the Ready heartbeat of Node {name}"), e)),
                }
                if let Some(n) = self.nodes.get_mut(&id) {
                    n.status_refreshed = Instant::now();
                }
            }
            if !alive {
                released.push(id);
            }
        }
        for id in released {
            // Deleted by someone else (the controller): a kubelet does not register again.
            if let Some(node) = self.nodes.remove(&id) {
                tracing::info!(node = %node.name, "kubelet stand-in: Node deleted by someone else; releasing it");
            }
            self.done.insert(id);
            self.publish();
        }
    }

    async fn node_exists(&self, name: &str) -> Result<bool> {
        match Api::<Node>::all(self.kube.clone()).get_opt(name).await {
            Ok(n) => Ok(n.is_some()),
            Err(e) => Err(Error::kube(format!("getting Node {name}"), e)),
        }
    }

    async fn pods(&mut self) -> Result<()> {
        if self.nodes.is_empty() {
            return Ok(());
        }
        let by_name: BTreeMap<String, String> = self.nodes.iter().map(|(id, n)| (n.name.clone(), id.clone())).collect();
        let api: Api<Pod> = Api::all(self.kube.clone());
        let pods = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing pods", e))?;
        for pod in &pods.items {
            let Some(id) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).and_then(|n| by_name.get(n)) else { continue };
            let result = if pod.metadata.deletion_timestamp.is_some() {
                force_delete(&self.kube, pod).await
            } else if needs_start(pod) {
                let Some(node) = self.nodes.get_mut(id) else { continue };
                let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_else(|| {
                    let ip = format!("10.244.{}.{}", node.index % 256, node.next_pod_ip);
                    node.next_pod_ip = if node.next_pod_ip >= 254 { 2 } else { node.next_pod_ip + 1 };
                    ip
                });
                let host_ip = node.ip.clone();
                start_pod(&self.kube, pod, &ip, &host_ip).await
            } else {
                Ok(())
            };
            if let Err(e) = result {
                self.record(e);
            }
        }
        Ok(())
    }
}

fn node_object(name: &str, ip: &str, info: &InstanceInfo, provider_id: &str, claim: &NodeClaim, default_pods: i64) -> Node {
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    for r in &claim.spec.requirements {
        if r.operator == "In"
            && let [value] = r.values.as_slice()
        {
            labels.insert(r.key.clone(), value.clone());
        }
    }
    let arch = labels.get("kubernetes.io/arch").cloned().unwrap_or_else(|| "amd64".to_string());
    labels.insert("kubernetes.io/hostname".into(), name.to_string());
    labels.insert("topology.kubernetes.io/zone".into(), info.zone.clone());
    if let Some(region) = info.zone.get(..info.zone.len().saturating_sub(1)).filter(|r| !r.is_empty()) {
        labels.insert("topology.kubernetes.io/region".into(), region.to_string());
    }
    labels.insert("node.kubernetes.io/instance-type".into(), info.instance_type.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), arch.clone());

    let mut taints: Vec<Taint> = Vec::new();
    for t in claim.spec.taints.iter().flatten().chain(claim.spec.startup_taints.iter().flatten()) {
        if !taints.iter().any(|x| x.key == t.key && x.effect == t.effect) {
            taints.push(t.clone());
        }
    }
    if !taints.iter().any(|t| t.key == UNREGISTERED_TAINT_KEY) {
        taints.push(Taint { key: UNREGISTERED_TAINT_KEY.into(), effect: "NoExecute".into(), ..Default::default() });
    }

    let status = claim.status.clone().unwrap_or_default();
    let mut capacity = status.capacity.clone().unwrap_or_default();
    let mut allocatable = status.allocatable.clone().unwrap_or_else(|| capacity.clone());
    for r in [&mut capacity, &mut allocatable] {
        r.entry("pods".to_string()).or_insert_with(|| Quantity(default_pods.to_string()));
    }
    let mut addresses = vec![NodeAddress { type_: "InternalIP".into(), address: ip.to_string() }, NodeAddress { type_: "Hostname".into(), address: name.to_string() }];
    if let Some(dns) = &info.private_dns {
        addresses.push(NodeAddress { type_: "InternalDNS".into(), address: dns.clone() });
    }
    Node {
        metadata: ObjectMeta { name: Some(name.to_string()), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { provider_id: Some(provider_id.to_string()), taints: Some(taints), ..Default::default() }),
        status: Some(NodeStatus {
            capacity: Some(capacity),
            allocatable: Some(allocatable),
            conditions: Some(node_conditions()),
            addresses: Some(addresses),
            node_info: Some(node_info(name, &arch)),
            ..Default::default()
        }),
    }
}

fn node_info(name: &str, arch: &str) -> NodeSystemInfo {
    NodeSystemInfo {
        architecture: arch.to_string(),
        operating_system: "linux".into(),
        kubelet_version: KUBELET_VERSION.into(),
        kube_proxy_version: KUBELET_VERSION.into(),
        container_runtime_version: "stowage-e2e://0".into(),
        os_image: "stowage e2e kubelet stand-in".into(),
        kernel_version: "0".into(),
        machine_id: name.to_string(),
        system_uuid: name.to_string(),
        boot_id: name.to_string(),
        swap: None,
    }
}

fn node_conditions() -> Vec<NodeCondition> {
    let t = Time(now());
    let cond = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(t.clone()),
        last_transition_time: Some(t.clone()),
    };
    vec![
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond("Ready", "True", "KubeletReady", "stowage e2e kubelet stand-in is posting ready status"),
    ]
}

/// Not yet Running+Ready with an IP, and not finished.
fn needs_start(pod: &Pod) -> bool {
    let Some(s) = &pod.status else { return true };
    if matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return false;
    }
    let ready = s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    !(s.phase.as_deref() == Some("Running") && s.pod_ip.is_some() && ready)
}

async fn start_pod(kube: &kube::Client, pod: &Pod, ip: &str, host_ip: &str) -> Result<()> {
    let (Some(name), Some(ns)) = (pod.metadata.name.as_deref(), pod.metadata.namespace.as_deref()) else { return Ok(()) };
    let t = Time(now());
    let spec = pod.spec.clone().unwrap_or_default();
    let mut conditions: Vec<PodCondition> = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    for type_ in ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"] {
        conditions.retain(|c| c.type_ != type_);
        conditions.push(PodCondition { type_: type_.into(), status: "True".into(), last_transition_time: Some(t.clone()), ..Default::default() });
    }
    let running = |c: &k8s_openapi::api::core::v1::Container| ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        container_id: Some(format!("stowage-e2e://{}-{}", pod.metadata.uid.as_deref().unwrap_or(name), c.name)),
        ready: true,
        started: Some(true),
        restart_count: 0,
        state: Some(ContainerState { running: Some(ContainerStateRunning { started_at: Some(t.clone()) }), ..Default::default() }),
        ..Default::default()
    };
    let init: Vec<ContainerStatus> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            if c.restart_policy.as_deref() == Some("Always") {
                return running(c); // a sidecar
            }
            ContainerStatus {
                ready: true,
                started: Some(false),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated { exit_code: 0, reason: Some("Completed".into()), started_at: Some(t.clone()), finished_at: Some(t.clone()), ..Default::default() }),
                    ..Default::default()
                }),
                ..running(c)
            }
        })
        .collect();
    let status = PodStatus {
        phase: Some("Running".into()),
        conditions: Some(conditions),
        pod_ip: Some(ip.to_string()),
        pod_ips: Some(vec![PodIP { ip: ip.to_string() }]),
        host_ip: Some(host_ip.to_string()),
        host_ips: Some(vec![k8s_openapi::api::core::v1::HostIP { ip: host_ip.to_string() }]),
        start_time: pod.status.as_ref().and_then(|s| s.start_time.clone()).or(Some(t.clone())),
        container_statuses: Some(spec.containers.iter().map(running).collect()),
        init_container_statuses: if init.is_empty() { None } else { Some(init) },
        ..Default::default()
    };
    // A merge patch replaces the lists wholesale, which is what the kubelet's status manager does too.
    let patch = json!({"status": status});
    let api: Api<Pod> = Api::namespaced(kube.clone(), ns);
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if kube_not_found(&e) => Ok(()),
        Err(e) => Err(Error::kube(format!("setting pod {ns}/{name} Running"), e)),
    }
}

/// Deletes a pod with grace period 0, only if it is still the same pod (uid).
async fn force_delete(kube: &kube::Client, pod: &Pod) -> Result<()> {
    let (Some(name), Some(ns)) = (pod.metadata.name.as_deref(), pod.metadata.namespace.as_deref()) else { return Ok(()) };
    let api: Api<Pod> = Api::namespaced(kube.clone(), ns);
    let dp = DeleteParams { grace_period_seconds: Some(0), preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }), ..Default::default() };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        // Gone already, or replaced by a pod of the same name (uid precondition failed).
        Err(e) if kube_not_found(&e) || kube_conflict(&e) => Ok(()),
        Err(e) => Err(Error::kube(format!("force-deleting pod {ns}/{name}"), e)),
    }
}
