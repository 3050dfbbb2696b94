//! Pod volumes into node constraints (kubernetes-semantics.md §7): bound claims give their
//! PersistentVolume's node affinity and zone labels; unbound WaitForFirstConsumer claims give their
//! StorageClass's allowedTopologies (or, without a provisioner, the node affinity of the volumes that
//! could bind); unbound Immediate claims make the pod wait.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use super::convert::{Ctx, node_selector_term};
use super::objects::{Obj, Objects};
use super::{InputError, quantity};
use stowage_core::domain::labels::{NodeRequirement, NodeSelectorTerm, keys};
use stowage_core::domain::node::AttachLimits;
use stowage_core::domain::pod::{AttachVolume, VolumeNeeds};

pub(crate) const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
pub(crate) const IMMEDIATE_UNBOUND: &str = "pod has unbound immediate PersistentVolumeClaims";

pub struct Storage<'a> {
    pvcs: BTreeMap<(String, String), &'a Obj<core::PersistentVolumeClaim>>,
    pvs: BTreeMap<String, &'a Obj<core::PersistentVolume>>,
    classes: BTreeMap<String, &'a Obj<StorageClass>>,
    default_class: Option<String>,
}

impl<'a> Storage<'a> {
    pub fn new(o: &'a Objects) -> Self {
        let pvcs = o.pvcs.iter().map(|c| ((c.obj.metadata.namespace.clone().unwrap_or_else(|| "default".into()), c.obj.metadata.name.clone().unwrap_or_default()), c)).collect();
        let pvs = o.pvs.iter().map(|v| (v.obj.metadata.name.clone().unwrap_or_default(), v)).collect();
        let classes: BTreeMap<String, &Obj<StorageClass>> = o.storageclasses.iter().map(|c| (c.obj.metadata.name.clone().unwrap_or_default(), c)).collect();
        let default_class = classes.iter().filter(|(_, c)| c.obj.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_CLASS)).is_some_and(|v| v == "true")).map(|(n, _)| n.clone()).next();
        Storage { pvcs, pvs, classes, default_class }
    }

    /// The StorageClass a claim uses: its own, or the default class when it names none.
    pub fn class_of(&self, spec: &core::PersistentVolumeClaimSpec) -> Option<String> {
        match spec.storage_class_name.as_deref() {
            Some("") => None,
            Some(c) => Some(c.to_string()),
            None => self.default_class.clone(),
        }
    }
}

fn pv_ctx(pv: &Obj<core::PersistentVolume>) -> Ctx<'_> {
    Ctx { source: &pv.source, object: format!("PersistentVolume {}", pv.obj.metadata.name.as_deref().unwrap_or("")) }
}

fn pv_terms(pv: &Obj<core::PersistentVolume>) -> Result<Option<Vec<NodeSelectorTerm>>, InputError> {
    let ctx = pv_ctx(pv);
    let Some(req) = pv.obj.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) else {
        return Ok(None);
    };
    let f = "spec.nodeAffinity.required.nodeSelectorTerms";
    req.node_selector_terms.iter().enumerate().map(|(i, t)| node_selector_term(&ctx, &format!("{f}[{i}]"), t)).collect::<Result<Vec<_>, _>>().map(Some)
}

fn zone_labels(pv: &core::PersistentVolume) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for key in [keys::ZONE, keys::ZONE_BETA, keys::REGION, keys::REGION_BETA] {
        if let Some(v) = pv.metadata.labels.as_ref().and_then(|l| l.get(key)) {
            out.push((key.to_string(), v.split("__").map(str::to_string).collect()));
        }
    }
    out
}

fn request_bytes(spec: &core::PersistentVolumeClaimSpec) -> i64 {
    spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).and_then(|q| quantity::value(&q.0).ok()).unwrap_or(0)
}

/// A volume the pod cannot use as the workload stands: the error naming file, object and field, and
/// kube-scheduler's reason (VolumeBinding's PreFilter wording where it has one).
type Problem = (InputError, String);

/// Resolves the volumes of a pod. A missing or invalid claim, StorageClass or bound PersistentVolume
/// does not fail the batch: the pod's needs are `blocked` with kube-scheduler's reason (it stays
/// pending, like the claims kube-scheduler cannot find) and the error is returned beside them, for
/// `--strict` and for the report.
pub fn needs(ctx: &Ctx, pod: &core::Pod, st: &Storage) -> (VolumeNeeds, Option<InputError>) {
    match resolve(ctx, pod, st) {
        Ok(v) => (v, None),
        Err((e, reason)) => {
            let claims = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone())).collect();
            (VolumeNeeds { blocked: Some(reason), claims, ..Default::default() }, Some(e))
        }
    }
}

/// The invalid-PersistentVolume problem of `pv`.
fn invalid_pv(pv: &Obj<core::PersistentVolume>, e: InputError) -> Problem {
    let name = pv.obj.metadata.name.clone().unwrap_or_default();
    let reason = format!("invalid PersistentVolume \"{name}\": {}: {}", e.field.clone().unwrap_or_default(), e.message);
    (e, reason)
}

// Long: one pass over the pod's volumes with a branch per kind of claim (bound, WaitForFirstConsumer
// with a selected node, no-provisioner, allowed topologies), each a few lines.
fn resolve(ctx: &Ctx, pod: &core::Pod, st: &Storage) -> Result<VolumeNeeds, Problem> {
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut out = VolumeNeeds::default();
    let Some(spec) = &pod.spec else { return Ok(out) };
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let (claim_name, field, template) = if let Some(pvc) = &v.persistent_volume_claim {
            (pvc.claim_name.clone(), format!("spec.volumes[{i}].persistentVolumeClaim.claimName"), None)
        } else if let Some(eph) = v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) {
            (format!("{pod_name}-{}", v.name), format!("spec.volumes[{i}].ephemeral"), Some(eph.spec.clone()))
        } else {
            continue;
        };
        out.claims.push(claim_name.clone());
        let claim = st.pvcs.get(&(ns.clone(), claim_name.clone()));
        let (claim_spec, claim_ann, claim_ctx) = match (claim, template) {
            (Some(c), _) => (
                c.obj.spec.clone().unwrap_or_default(),
                c.obj.metadata.annotations.clone().unwrap_or_default(),
                Some(Ctx { source: &c.source, object: format!("PersistentVolumeClaim {ns}/{claim_name}") }),
            ),
            (None, Some(t)) => (t, BTreeMap::new(), None),
            (None, None) => {
                let e = ctx.err(field, format!("PersistentVolumeClaim \"{ns}/{claim_name}\" not found (add it to the workload)"));
                return Err((e, format!("persistentvolumeclaim \"{claim_name}\" not found")));
            }
        };
        if let Some(pv_name) = claim_spec.volume_name.as_deref().filter(|n| !n.is_empty()) {
            let Some(pv) = st.pvs.get(pv_name) else {
                let cctx = claim_ctx.unwrap_or(Ctx { source: ctx.source, object: ctx.object.clone() });
                let e = cctx.err("spec.volumeName", format!("PersistentVolume \"{pv_name}\" not found (add it to the workload)"));
                return Err((e, "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)".into()));
            };
            if let Some(terms) = pv_terms(pv).map_err(|e| invalid_pv(pv, e))? {
                out.node_terms.push(terms);
            }
            out.zone_labels.extend(zone_labels(&pv.obj));
            continue;
        }
        let class_name = st.class_of(&claim_spec);
        let class = match &class_name {
            None => None,
            Some(c) => match st.classes.get(c) {
                Some(sc) => Some(*sc),
                None => {
                    let cctx = claim_ctx.unwrap_or(Ctx { source: ctx.source, object: ctx.object.clone() });
                    let e = cctx.err("spec.storageClassName", format!("StorageClass \"{c}\" not found (add it to the workload)"));
                    return Err((e, format!("storageclass.storage.k8s.io \"{c}\" not found")));
                }
            },
        };
        let wffc = class.is_some_and(|c| c.obj.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if !wffc {
            out.blocked = Some(IMMEDIATE_UNBOUND.to_string());
            continue;
        }
        let Some(class) = class else { continue };
        if let Some(node) = claim_ann.get(SELECTED_NODE) {
            out.selected_node = Some(node.clone());
            continue;
        }
        if class.obj.provisioner == NO_PROVISIONER {
            // Only existing, unbound volumes of this class can serve the claim.
            let want = request_bytes(&claim_spec);
            let mut alternatives = Vec::new();
            let mut unconstrained = false;
            for pv in st.pvs.values() {
                let spec = pv.obj.spec.clone().unwrap_or_default();
                let available = spec.claim_ref.is_none() && pv.obj.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Available") == "Available";
                let size = spec.capacity.as_ref().and_then(|c| c.get("storage")).and_then(|q| quantity::value(&q.0).ok()).unwrap_or(0);
                if !available || spec.storage_class_name.as_deref() != class_name.as_deref() || size < want {
                    continue;
                }
                match pv_terms(pv).map_err(|e| invalid_pv(pv, e))? {
                    Some(t) => alternatives.extend(t),
                    None => unconstrained = true,
                }
            }
            if unconstrained {
                continue;
            }
            if alternatives.is_empty() {
                out.blocked = Some(format!("no persistent volumes available for claim {ns}/{claim_name} and StorageClass \"{}\" does not provision", class_name.unwrap_or_default()));
                continue;
            }
            out.node_terms.push(alternatives);
            continue;
        }
        if let Some(topos) = &class.obj.allowed_topologies {
            let terms: Vec<NodeSelectorTerm> = topos
                .iter()
                .map(|t| NodeSelectorTerm {
                    expressions: t.match_label_expressions.iter().flatten().map(|e| NodeRequirement::is_in(e.key.as_str(), e.values.iter().cloned())).collect(),
                    fields: vec![],
                })
                .collect();
            if !terms.is_empty() {
                out.node_terms.push(terms);
            }
        }
    }
    Ok(out)
}

/// The CSI driver an in-tree volume plugin (or in-tree provisioner) is migrated to, for the plugins
/// kube-scheduler's NodeVolumeLimits counts that way (`isCSIMigrationOn`: AWS EBS, GCE PD, Azure Disk,
/// Cinder; Portworx only behind a feature gate, and the others not at all).
fn migrated_driver(in_tree: &str) -> Option<&'static str> {
    match in_tree {
        "kubernetes.io/aws-ebs" => Some("ebs.csi.aws.com"),
        "kubernetes.io/gce-pd" => Some("pd.csi.storage.gke.io"),
        "kubernetes.io/azure-disk" => Some("disk.csi.azure.com"),
        "kubernetes.io/cinder" => Some("cinder.csi.openstack.org"),
        _ => None,
    }
}

/// In-tree provisioners whose volumes NodeVolumeLimits does not count (not migrated for it).
fn uncounted_in_tree(provisioner: &str) -> bool {
    provisioner.starts_with("kubernetes.io/")
}

/// A PersistentVolume's driver and volume handle as NodeVolumeLimits counts it, if it counts it.
fn pv_volume(pv: &core::PersistentVolume) -> Option<AttachVolume> {
    let spec = pv.spec.as_ref()?;
    let (driver, handle) = if let Some(csi) = &spec.csi {
        (csi.driver.clone(), csi.volume_handle.clone())
    } else if let Some(ebs) = &spec.aws_elastic_block_store {
        // `aws://<zone>/vol-…` and `vol-…` name the same volume (the translation keeps the ID).
        ("ebs.csi.aws.com".to_string(), ebs.volume_id.rsplit('/').next().unwrap_or_default().to_string())
    } else if let Some(pd) = &spec.gce_persistent_disk {
        ("pd.csi.storage.gke.io".to_string(), pd.pd_name.clone())
    } else if let Some(d) = &spec.azure_disk {
        ("disk.csi.azure.com".to_string(), d.disk_uri.clone())
    } else if let Some(c) = &spec.cinder {
        ("cinder.csi.openstack.org".to_string(), c.volume_id.clone())
    } else {
        return None;
    };
    (!driver.is_empty() && !handle.is_empty()).then_some(AttachVolume { driver, handle })
}

/// The volumes of a pod NodeVolumeLimits counts (`semantics::volume_limits`), bound or pending: per
/// claim (or generic ephemeral volume), its PersistentVolume's CSI driver and handle when bound, else
/// its StorageClass's provisioner with the claim as handle. Like kube-scheduler, a claim that cannot be
/// resolved (missing claim, class or volume) is not counted; for a pending pod it blocks it anyway
/// (`needs`).
pub fn attach(pod: &core::Pod, st: &Storage) -> Vec<AttachVolume> {
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut out: Vec<AttachVolume> = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let (claim_name, template) = if let Some(pvc) = &v.persistent_volume_claim {
            (pvc.claim_name.clone(), None)
        } else if let Some(eph) = v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) {
            (format!("{pod_name}-{}", v.name), Some(&eph.spec))
        } else {
            continue;
        };
        let spec = match (st.pvcs.get(&(ns.clone(), claim_name.clone())), template) {
            (Some(c), _) => c.obj.spec.clone().unwrap_or_default(),
            (None, Some(t)) => t.clone(),
            (None, None) => continue,
        };
        // A bound claim counts as its volume; one whose volume is missing falls back to its class.
        if let Some(pv) = spec.volume_name.as_deref().filter(|n| !n.is_empty()).and_then(|n| st.pvs.get(n)) {
            out.extend(pv_volume(&pv.obj));
            continue;
        }
        let Some(class) = st.class_of(&spec).and_then(|c| st.classes.get(&c)) else { continue };
        let provisioner = class.obj.provisioner.as_str();
        let driver = match migrated_driver(provisioner) {
            Some(d) => d,
            None if uncounted_in_tree(provisioner) => continue,
            None => provisioner,
        };
        out.push(AttachVolume { driver: driver.to_string(), handle: format!("pvc:{ns}/{claim_name}") });
    }
    out.sort();
    out.dedup();
    out
}

/// Per node name, the attach limits of its CSINode (`spec.drivers[].allocatable.count`; a driver
/// without a count has no limit). A negative count, an unnamed driver or a driver listed twice is an
/// error naming the CSINode and the field: the API server refuses such a CSINode.
pub fn csinode_limits(csinodes: &[Obj<CSINode>]) -> (BTreeMap<String, AttachLimits>, Vec<InputError>) {
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    for c in csinodes {
        let name = c.obj.metadata.name.clone().unwrap_or_default();
        let ctx = Ctx { source: &c.source, object: format!("CSINode {name}") };
        if name.is_empty() {
            errors.push(ctx.err("metadata.name", "missing name (a CSINode is named after its Node)"));
            continue;
        }
        let mut limits = AttachLimits::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, d) in c.obj.spec.drivers.iter().enumerate() {
            if d.name.is_empty() {
                errors.push(ctx.err(format!("spec.drivers[{i}].name"), "missing driver name"));
                continue;
            }
            if !seen.insert(d.name.clone()) {
                errors.push(ctx.err(format!("spec.drivers[{i}].name"), format!("driver {:?} listed twice", d.name)));
                continue;
            }
            if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
                if count < 0 {
                    errors.push(ctx.err(format!("spec.drivers[{i}].allocatable.count"), format!("{count}: must be non-negative")));
                    continue;
                }
                limits.insert(d.name.clone(), i64::from(count));
            }
        }
        out.insert(name, limits);
    }
    (out, errors)
}
