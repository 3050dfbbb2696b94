//! The cloud stowage's controller runs against in the benchmark: the same behaviour as Karpenter's KWOK
//! cloud provider (sigs.k8s.io/karpenter `kwok/cloudprovider`), in process, so that both controllers meet
//! one cloud.
//!
//! | | Karpenter's KWOK provider | [`FakeCloud`] |
//! |---|---|---|
//! | offerings | the instance-types file (written from [`crate::setup::Setup::catalog`]) | the same catalog |
//! | launch | the NodeClaim's cheapest compatible offering; always available | the plan's first offering (the launch request lists them cheapest first); always available |
//! | the Node | created by the provider after `nodeRegistrationDelay`: labels, `karpenter.sh/unregistered:NoExecute`, allocatable of the type, `kwok://` provider id | the same, after [`FakeCloud::boot`] |
//! | Ready | the kubelet stand-in (`Kubelet::start_kwok`) adopts `kwok://` Nodes | the same stand-in |
//! | terminate | the instance is gone; the controller deletes the Node | the same |
//!
//! Capacity errors are not modelled on either side (KWOK marks every offering available).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ObjectMeta, PostParams};
use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{CloudError, CloudProvider, Instance, LaunchRequest};
use stowage_e2e::{KWOK_PROVIDER_PREFIX, UNREGISTERED_TAINT_KEY};

/// Well-known node labels the fake cloud sets, as a cloud's kubelet and node controller would.
const HOSTNAME: &str = "kubernetes.io/hostname";
const OS: &str = "kubernetes.io/os";
const ARCH: &str = "kubernetes.io/arch";

#[derive(Default)]
struct Inner {
    /// NodeClaim name → its instance (idempotent launches).
    instances: BTreeMap<String, Instance>,
    next: u64,
    /// Launches and terminations (the report's cross-check of the NodeClaim history).
    launched: u64,
    terminated: u64,
}

/// An in-process cloud that creates KWOK-style Nodes; see the module docs.
#[derive(Clone)]
pub struct FakeCloud {
    kube: kube::Client,
    catalog: Catalog,
    /// From launch to the Node object (Karpenter's KWOK `nodeRegistrationDelay`).
    pub boot: Duration,
    inner: Arc<Mutex<Inner>>,
}

impl FakeCloud {
    pub fn new(kube: kube::Client, catalog: Catalog, boot: Duration) -> Self {
        FakeCloud { kube, catalog, boot, inner: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// (instances launched, instances terminated) so far.
    pub fn counts(&self) -> (u64, u64) {
        let i = self.lock();
        (i.launched, i.terminated)
    }

    /// The Node a launched instance registers as.
    fn node(&self, req: &LaunchRequest, inst: &Instance, name: &str) -> Result<Node, CloudError> {
        let t = self.catalog.get(&inst.instance_type).ok_or_else(|| CloudError::Fatal(format!("instance type {} is not in the catalog", inst.instance_type)))?;
        let mut labels = req.labels.clone();
        labels.extend(stowage_decide::launch::instance_labels(inst, &self.catalog));
        labels.insert(HOSTNAME.into(), name.to_string());
        labels.insert(OS.into(), "linux".into());
        labels.entry(ARCH.into()).or_insert_with(|| t.aws.as_ref().map_or("amd64", |f| f.arch.as_str()).to_string());
        let mut taints: Vec<Taint> =
            req.taints.iter().map(|t| Taint { key: t.key.clone(), value: (!t.value.is_empty()).then(|| t.value.clone()), effect: t.effect.as_str().to_string(), time_added: None }).collect();
        taints.push(Taint { key: UNREGISTERED_TAINT_KEY.into(), effect: "NoExecute".into(), ..Default::default() });
        let a = t.allocatable();
        let c = &t.capacity;
        let q = |name: &str, v: i64| Quantity(stowage_input::quantity::format(name, v));
        let resources = |r: &stowage_core::domain::resources::Resources| -> BTreeMap<String, Quantity> {
            [("cpu", r.cpu_m), ("memory", r.memory), ("ephemeral-storage", r.ephemeral), ("pods", r.pods)].into_iter().map(|(n, v)| (n.to_string(), q(n, v))).collect()
        };
        Ok(Node {
            metadata: ObjectMeta { name: Some(name.to_string()), labels: Some(labels), ..Default::default() },
            spec: Some(NodeSpec { provider_id: Some(inst.provider_id.clone()), taints: Some(taints), ..Default::default() }),
            status: Some(NodeStatus { capacity: Some(resources(c)), allocatable: Some(resources(&a)), phase: Some("Pending".into()), ..Default::default() }),
        })
    }
}

impl CloudProvider for FakeCloud {
    fn provider_name(&self) -> &'static str {
        "fake"
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        Ok(self.catalog.clone())
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        let inst = {
            let mut inner = self.lock();
            if let Some(i) = inner.instances.get(&req.nodeclaim) {
                return Ok(i.clone());
            }
            let o = req
                .offerings
                .iter()
                .find(|o| self.catalog.get(&o.instance_type).is_some_and(|t| t.offerings.iter().any(|x| x.zone == o.zone && x.capacity_type == o.capacity_type)))
                .ok_or_else(|| CloudError::Fatal(format!("NodeClaim {}: no offering of the launch request is in the catalog", req.nodeclaim)))?;
            inner.next += 1;
            inner.launched += 1;
            let name = req.nodeclaim.clone();
            let inst = Instance {
                id: format!("i-fake{:011}", inner.next),
                provider_id: format!("{KWOK_PROVIDER_PREFIX}{name}"),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                state: "running".into(),
                nodepool: Some(req.nodepool.clone()),
                nodeclaim: Some(req.nodeclaim.clone()),
                launched_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
                image_id: None,
                subnet_id: None,
                security_group_ids: None,
                capacity_reservation_id: None,
            };
            inner.instances.insert(req.nodeclaim.clone(), inst.clone());
            inst
        };
        let node = self.node(req, &inst, &req.nodeclaim)?;
        let (cloud, claim) = (self.clone(), req.nodeclaim.clone());
        // The instance boots, then its kubelet registers the Node (unless it was terminated meanwhile).
        tokio::spawn(async move {
            tokio::time::sleep(cloud.boot).await;
            if !cloud.lock().instances.contains_key(&claim) {
                return;
            }
            let api: Api<Node> = Api::all(cloud.kube.clone());
            match api.create(&PostParams::default(), &node).await {
                Ok(_) => tracing::debug!(node = %claim, "fake cloud: Node registered"),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => tracing::warn!(node = %claim, error = %e, "fake cloud: creating the Node failed"),
            }
        });
        Ok(inst)
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), CloudError> {
        let mut inner = self.lock();
        let claim = inner.instances.iter().find(|(_, i)| i.provider_id == provider_id).map(|(c, _)| c.clone());
        match claim {
            Some(c) => {
                inner.instances.remove(&c);
                inner.terminated += 1;
                Ok(())
            }
            None => Err(CloudError::NotFound(provider_id.to_string())),
        }
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        Ok(self.lock().instances.values().cloned().collect())
    }

    async fn tag_registered(&self, _provider_id: &str, _nodeclaim: &str, _node: &str) -> Result<(), CloudError> {
        Ok(())
    }
}
