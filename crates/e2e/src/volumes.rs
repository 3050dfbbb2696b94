//! A dynamic volume provisioner stand-in (what the EBS CSI driver's external-provisioner does), for
//! `WaitForFirstConsumer` StorageClasses.
//!
//! The handshake with the real kube-scheduler and kube-controller-manager, as observed on v1.36.3:
//! 1. A PVC of a WaitForFirstConsumer class stays Pending; the KCM's PV controller only emits a
//!    `WaitForFirstConsumer` event.
//! 2. The scheduler picks a node for the first pod using the PVC (its VolumeBinding plugin checks the class's
//!    `allowedTopologies` and, only if a CSIDriver object asks for it, CSIStorageCapacity) and, in PreBind,
//!    sets the annotation `volume.kubernetes.io/selected-node: <node>` on the PVC. The pod is not bound yet.
//! 3. The PV controller sees the annotation and, because the class's provisioner is not an in-tree one,
//!    annotates the PVC with `volume.kubernetes.io/storage-provisioner` (and the legacy
//!    `volume.beta.kubernetes.io/storage-provisioner`) = the class's provisioner, with an
//!    `ExternalProvisioning` event. This is the hand-over: the external provisioner only acts on PVCs that
//!    carry its own name there (so does this stand-in), which also keeps it off classes it does not serve.
//! 4. The provisioner creates a PV named `pvc-<pvc uid>` pre-bound to the claim (`claimRef` with the uid),
//!    with `pv.kubernetes.io/provisioned-by`, the class name, the requested capacity, access modes and volume
//!    mode, the class's reclaim policy and mount options, and node affinity for the selected node's zone.
//! 5. The PV controller binds the pair (PV `Bound`, PVC `spec.volumeName` + `Bound`) within a second; the
//!    scheduler's PreBind, which polls the claim about once a second, then binds the pod. Nothing else is
//!    needed: no CSIDriver or CSINode object, no finalizers.
//!
//! It also deletes `Released` PVs it provisioned when their reclaim policy is `Delete` (the external
//! provisioner's job too). It does not resize, snapshot, attach or clone, and ignores `Immediate` classes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Error, Result, kube_conflict, kube_not_found};

pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// Marks PVs this stand-in created (so it only ever deletes its own).
const OWNER_ANNOTATION: &str = "stowage.dev/e2e-provisioner";
const MAX_ERRORS: usize = 50;

#[derive(Clone, Debug)]
pub struct VolumeProvisionerConfig {
    /// How often PVCs are looked at.
    pub interval: Duration,
}

impl Default for VolumeProvisionerConfig {
    fn default() -> Self {
        VolumeProvisionerConfig { interval: Duration::from_millis(250) }
    }
}

#[derive(Default)]
struct Shared {
    provisioned: Vec<String>,
    errors: VecDeque<String>,
}

/// The running stand-in. [`VolumeProvisioner::stop`] ends it; dropping it aborts the task.
pub struct VolumeProvisioner {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
}

impl VolumeProvisioner {
    pub fn start(kube: kube::Client) -> Self {
        Self::start_with(kube, VolumeProvisionerConfig::default())
    }

    pub fn start_with(kube: kube::Client, config: VolumeProvisionerConfig) -> Self {
        let (stop, mut stop_rx) = watch::channel(false);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let mut state = State { kube, created: BTreeSet::new(), shared: shared.clone() };
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = state.tick().await {
                    state.record(e);
                }
                tokio::select! {
                    _ = tokio::time::sleep(config.interval) => {}
                    _ = stop_rx.changed() => break,
                }
            }
        });
        VolumeProvisioner { stop, task: Some(task), shared }
    }

    /// Names of the PVs created so far.
    pub fn provisioned(&self) -> Vec<String> {
        lock(&self.shared).provisioned.clone()
    }

    /// The most recent errors (oldest first, at most 50).
    pub fn recent_errors(&self) -> Vec<String> {
        lock(&self.shared).errors.iter().cloned().collect()
    }

    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for VolumeProvisioner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

struct State {
    kube: kube::Client,
    /// PVC uids a PV was created for.
    created: BTreeSet<String>,
    shared: Arc<Mutex<Shared>>,
}

impl State {
    fn record(&self, e: Error) {
        tracing::warn!(error = %e, "volume provisioner stand-in");
        let mut s = lock(&self.shared);
        if s.errors.len() == MAX_ERRORS {
            s.errors.pop_front();
        }
        s.errors.push_back(e.to_string());
    }

    async fn tick(&mut self) -> Result<()> {
        let classes = Api::<StorageClass>::all(self.kube.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing StorageClasses", e))?;
        let served: BTreeMap<String, StorageClass> = classes
            .items
            .into_iter()
            .filter(|c| c.provisioner != NO_PROVISIONER && c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
            .filter_map(|c| Some((c.metadata.name.clone()?, c)))
            .collect();
        if served.is_empty() {
            return Ok(());
        }
        let claims = Api::<PersistentVolumeClaim>::all(self.kube.clone()).list(&ListParams::default()).await.map_err(|e| Error::kube("listing PersistentVolumeClaims", e))?;
        for pvc in &claims.items {
            let Some(class) = pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_ref()).and_then(|c| served.get(c)) else {
                continue;
            };
            if let Err(e) = self.provision(pvc, class).await {
                self.record(e);
            }
        }
        self.delete_released(&served).await
    }

    async fn provision(&mut self, pvc: &PersistentVolumeClaim, class: &StorageClass) -> Result<()> {
        let uid = pvc.metadata.uid.clone().unwrap_or_default();
        let unbound = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty);
        if !unbound || self.created.contains(&uid) || pvc.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let annotations = pvc.metadata.annotations.clone().unwrap_or_default();
        let Some(node_name) = annotations.get(SELECTED_NODE_ANNOTATION) else { return Ok(()) };
        // Step 3 of the handshake: wait until the PV controller hands the claim to this provisioner.
        if annotations.get(STORAGE_PROVISIONER_ANNOTATION) != Some(&class.provisioner) {
            return Ok(());
        }
        let (ns, name) = (pvc.metadata.namespace.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
        let node = Api::<Node>::all(self.kube.clone()).get(node_name).await.map_err(|e| Error::kube(format!("getting selected node {node_name} of PVC {ns}/{name}"), e))?;
        let zone =
            node.metadata.labels.as_ref().and_then(|l| l.get(ZONE_LABEL)).cloned().ok_or_else(|| Error::Invalid(format!("selected node {node_name} of PVC {ns}/{name} has no {ZONE_LABEL} label")))?;
        let spec = pvc.spec.clone().unwrap_or_default();
        let storage =
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned().ok_or_else(|| Error::Invalid(format!("PVC {ns}/{name} requests no storage")))?;
        let pv_name = format!("pvc-{uid}");
        let pv = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(pv_name.clone()),
                labels: Some([(ZONE_LABEL.to_string(), zone.clone())].into()),
                annotations: Some([(PROVISIONED_BY_ANNOTATION.to_string(), class.provisioner.clone()), (OWNER_ANNOTATION.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some([("storage".to_string(), storage)].into()),
                access_modes: spec.access_modes.clone(),
                volume_mode: spec.volume_mode.clone(),
                storage_class_name: class.metadata.name.clone(),
                persistent_volume_reclaim_policy: Some(class.reclaim_policy.clone().unwrap_or_else(|| "Delete".to_string())),
                mount_options: class.mount_options.clone(),
                claim_ref: Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(ns.clone()),
                    name: Some(name.clone()),
                    uid: Some(uid.clone()),
                    resource_version: pvc.metadata.resource_version.clone(),
                    ..Default::default()
                }),
                csi: Some(CSIPersistentVolumeSource {
                    driver: class.provisioner.clone(),
                    volume_handle: format!("vol-{}", uid.replace('-', "").get(..17).unwrap_or("0")),
                    fs_type: class.parameters.as_ref().and_then(|p| p.get("csi.storage.k8s.io/fstype")).cloned().or(Some("ext4".into())),
                    ..Default::default()
                }),
                node_affinity: Some(VolumeNodeAffinity {
                    required: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement { key: ZONE_LABEL.to_string(), operator: "In".to_string(), values: Some(vec![zone]) }]),
                            ..Default::default()
                        }],
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        match Api::<PersistentVolume>::all(self.kube.clone()).create(&PostParams::default(), &pv).await {
            Ok(_) => {}
            Err(e) if kube_conflict(&e) => {}
            Err(e) => return Err(Error::kube(format!("creating PV {pv_name} for PVC {ns}/{name}"), e)),
        }
        tracing::info!(pv = %pv_name, pvc = %format!("{ns}/{name}"), node = %node_name, "volume provisioner stand-in created a PV");
        self.created.insert(uid);
        lock(&self.shared).provisioned.push(pv_name);
        Ok(())
    }

    async fn delete_released(&self, served: &BTreeMap<String, StorageClass>) -> Result<()> {
        let api: Api<PersistentVolume> = Api::all(self.kube.clone());
        let pvs = api.list(&ListParams::default()).await.map_err(|e| Error::kube("listing PersistentVolumes", e))?;
        for pv in &pvs.items {
            let ours = pv.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(OWNER_ANNOTATION));
            let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
            let spec = pv.spec.as_ref();
            let delete = spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
            let class_served = spec.and_then(|s| s.storage_class_name.as_ref()).is_some_and(|c| served.contains_key(c));
            if !(ours && released && delete && class_served) || pv.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = pv.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if kube_not_found(&e) => {}
                Err(e) => self.record(Error::kube(format!("deleting released PV {name}"), e)),
            }
        }
        Ok(())
    }
}
