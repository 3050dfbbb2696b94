//! Volumes: what the PV controller and a CSI provisioner (the EBS driver, say) do with claims.
//!
//! - A **WaitForFirstConsumer** claim is provisioned when kube-scheduler binds its first pod: the new
//!   PersistentVolume gets node affinity (and the `topology.kubernetes.io/zone` label) for the zone of
//!   the chosen node. From then on the claim, and every pod using it, is pinned to that zone: this is
//!   what makes a StatefulSet scaled 3 → 0 → 3 need nodes in specific zones.
//! - An **Immediate** claim is provisioned as soon as it exists, in a zone picked deterministically from
//!   the class's allowedTopologies, or else from the catalog's zones.
//! - A class with provisioner `kubernetes.io/no-provisioner` provisions nothing: its claims bind to an
//!   existing Available volume of the class that is large enough (and, for WaitForFirstConsumer,
//!   whose node affinity the chosen node matches).
//!
//! Generic ephemeral volumes get their claim `<pod>-<volume>` when the pod is bound.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::events::EventKind;
use super::world::{World, ident, key_of, sim_source};
use stowage_core::domain::labels::{Labels, keys};
use stowage_core::semantics::node_affinity;
use stowage_input::ids::{stable_hash, stable_uid};
use stowage_input::objects::Obj;
use stowage_input::quantity;
use stowage_input::volumes::{DEFAULT_CLASS, NO_PROVISIONER};

fn class_of<'a>(world: &'a World, spec: &PersistentVolumeClaimSpec) -> Option<&'a StorageClass> {
    let name = match spec.storage_class_name.as_deref() {
        Some("") => return None,
        Some(c) => c.to_string(),
        None => world
            .objects
            .storageclasses
            .iter()
            .filter(|c| c.obj.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_CLASS)).is_some_and(|v| v == "true"))
            .filter_map(|c| c.obj.metadata.name.clone())
            .min()?,
    };
    world.objects.storageclasses.iter().find(|c| c.obj.metadata.name.as_deref() == Some(name.as_str())).map(|c| &c.obj)
}

fn wffc(c: &StorageClass) -> bool {
    c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

fn unbound(c: &PersistentVolumeClaim) -> bool {
    c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty) && c.metadata.deletion_timestamp.is_none()
}

fn request_bytes(spec: &PersistentVolumeClaimSpec) -> i64 {
    spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).and_then(|q| quantity::value(&q.0).ok()).unwrap_or(0)
}

/// Zones a class allows (`allowedTopologies` on the zone key), if it restricts them.
fn allowed_zones(c: &StorageClass) -> Vec<String> {
    let mut z: Vec<String> = c
        .allowed_topologies
        .iter()
        .flatten()
        .flat_map(|t| t.match_label_expressions.iter().flatten())
        .filter(|e| e.key == keys::ZONE || e.key == keys::ZONE_BETA)
        .flat_map(|e| e.values.iter().cloned())
        .collect();
    z.sort();
    z.dedup();
    z
}

/// Provisions every unbound Immediate claim. `zones` are the cluster's zones (from the catalog).
pub(crate) fn provision_immediate(world: &mut World, zones: &[String]) -> Vec<EventKind> {
    let mut ev = Vec::new();
    for ci in 0..world.objects.pvcs.len() {
        let claim = world.objects.pvcs[ci].obj.clone();
        if !unbound(&claim) {
            continue;
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let Some(class) = class_of(world, &spec).cloned() else { continue };
        if wffc(&class) {
            continue;
        }
        if class.provisioner == NO_PROVISIONER {
            if let Some(e) = bind_existing(world, ci, &class, None) {
                ev.push(e);
            }
            continue;
        }
        let mut candidates = allowed_zones(&class);
        if candidates.is_empty() {
            candidates = zones.to_vec();
        }
        let (ns, name) = ident(&claim);
        let zone = (!candidates.is_empty()).then(|| candidates[(stable_hash(&[&ns, &name]) % candidates.len() as u64) as usize].clone());
        ev.push(provision(world, ci, &class, zone, "Immediate"));
    }
    if !ev.is_empty() {
        world.touch();
    }
    ev
}

/// Gives the claims of a pod just bound to `node` their volumes (WaitForFirstConsumer, and the
/// claims of generic ephemeral volumes).
pub(crate) fn bind_for_pod(world: &mut World, pod: &Pod, node_name: &str, node_labels: &Labels) -> Vec<EventKind> {
    let mut ev = Vec::new();
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let claim_name = if let Some(c) = &v.persistent_volume_claim {
            c.claim_name.clone()
        } else if let Some(t) = v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) {
            let name = format!("{pod_name}-{}", v.name);
            if !world.objects.pvcs.iter().any(|c| ident(&c.obj) == (ns.clone(), name.clone())) {
                let claim = PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(ns.clone()),
                        uid: Some(stable_uid(&["PersistentVolumeClaim", &ns, &name])),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: pod_name.clone(),
                            uid: pod.metadata.uid.clone().unwrap_or_default(),
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        }]),
                        ..Default::default()
                    },
                    spec: Some(t.spec.clone()),
                    status: Some(PersistentVolumeClaimStatus { phase: Some("Pending".into()), ..Default::default() }),
                };
                ev.push(EventKind::ClaimCreated { claim: format!("{ns}/{name}"), owner: format!("ephemeral volume of {ns}/{pod_name}") });
                world.objects.pvcs.push(Obj { source: sim_source("ephemeral volume controller"), obj: claim });
            }
            name
        } else {
            continue;
        };
        let Some(ci) = world.objects.pvcs.iter().position(|c| ident(&c.obj) == (ns.clone(), claim_name.clone())) else { continue };
        let claim = world.objects.pvcs[ci].obj.clone();
        if !unbound(&claim) {
            continue;
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let Some(class) = class_of(world, &spec).cloned() else { continue };
        if !wffc(&class) {
            continue;
        }
        if class.provisioner == NO_PROVISIONER {
            ev.extend(bind_existing(world, ci, &class, Some((node_name, node_labels))));
        } else {
            ev.push(provision(world, ci, &class, node_labels.get(keys::ZONE).cloned(), "WaitForFirstConsumer"));
        }
    }
    if !ev.is_empty() {
        world.touch();
    }
    ev
}

/// Creates a volume for claim `ci` in `zone` and binds the two.
fn provision(world: &mut World, ci: usize, class: &StorageClass, zone: Option<String>, mode: &str) -> EventKind {
    let claim = world.objects.pvcs[ci].obj.clone();
    let (ns, name) = ident(&claim);
    let uid = claim.metadata.uid.clone().unwrap_or_else(|| stable_uid(&["PersistentVolumeClaim", &ns, &name]));
    let pv_name = format!("pvc-{uid}");
    let spec = claim.spec.clone().unwrap_or_default();
    let mut labels = BTreeMap::new();
    let node_affinity = zone.as_ref().map(|z| {
        labels.insert(keys::ZONE.to_string(), z.clone());
        VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement { key: keys::ZONE.into(), operator: "In".into(), values: Some(vec![z.clone()]) }]),
                    match_fields: None,
                }],
            }),
        }
    });
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(pv_name.clone()),
            labels: Some(labels),
            annotations: Some([("pv.kubernetes.io/provisioned-by".to_string(), class.provisioner.clone())].into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity(quantity::format("memory", request_bytes(&spec))))].into()),
            access_modes: spec.access_modes.clone(),
            storage_class_name: class.metadata.name.clone(),
            persistent_volume_reclaim_policy: Some(class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into())),
            claim_ref: Some(ObjectReference { namespace: Some(ns.clone()), name: Some(name.clone()), uid: Some(uid), kind: Some("PersistentVolumeClaim".into()), ..Default::default() }),
            node_affinity,
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus { phase: Some("Bound".into()), ..Default::default() }),
    };
    world.objects.pvs.push(Obj { source: sim_source("volume provisioner"), obj: pv });
    set_bound(world, ci, &pv_name);
    EventKind::VolumeBound { claim: format!("{ns}/{name}"), volume: pv_name, zone, mode: format!("{mode}, provisioned") }
}

/// Binds claim `ci` to an Available pre-created volume of its class; for WaitForFirstConsumer only one
/// whose node affinity the node matches. The smallest that fits wins, then the first by name.
fn bind_existing(world: &mut World, ci: usize, class: &StorageClass, node: Option<(&str, &Labels)>) -> Option<EventKind> {
    let claim = world.objects.pvcs[ci].obj.clone();
    let (ns, name) = ident(&claim);
    let want = request_bytes(&claim.spec.clone().unwrap_or_default());
    let class_name = class.metadata.name.clone();
    let mut best: Option<(i64, String, usize)> = None;
    for (vi, pv) in world.objects.pvs.iter().enumerate() {
        let spec = pv.obj.spec.clone().unwrap_or_default();
        let available = spec.claim_ref.is_none() && pv.obj.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Available") == "Available";
        let size = spec.capacity.as_ref().and_then(|c| c.get("storage")).and_then(|q| quantity::value(&q.0).ok()).unwrap_or(0);
        if !available || spec.storage_class_name != class_name || size < want {
            continue;
        }
        if let Some((node_name, labels)) = node {
            let terms = spec.node_affinity.as_ref().and_then(|a| a.required.as_ref()).map(|r| &r.node_selector_terms);
            if let Some(terms) = terms {
                let source = sim_source("volume binder");
                let ctx = stowage_input::convert::Ctx { source: &source, object: key_of(&pv.obj) };
                let ok = terms.iter().any(|t| stowage_input::convert::node_selector_term(&ctx, "spec.nodeAffinity", t).is_ok_and(|t| node_affinity::term_matches(&t, labels, Some(node_name))));
                if !ok {
                    continue;
                }
            }
        }
        let pv_name = pv.obj.metadata.name.clone().unwrap_or_default();
        if best.as_ref().is_none_or(|(s, n, _)| (size, &pv_name) < (*s, n)) {
            best = Some((size, pv_name, vi));
        }
    }
    let (_, pv_name, vi) = best?;
    let pv = &mut world.objects.pvs[vi].obj;
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.claim_ref = Some(ObjectReference { namespace: Some(ns.clone()), name: Some(name.clone()), uid: claim.metadata.uid.clone(), kind: Some("PersistentVolumeClaim".into()), ..Default::default() });
    pv.status = Some(PersistentVolumeStatus { phase: Some("Bound".into()), ..Default::default() });
    let zone = pv.metadata.labels.as_ref().and_then(|l| l.get(keys::ZONE)).cloned();
    set_bound(world, ci, &pv_name);
    Some(EventKind::VolumeBound { claim: format!("{ns}/{name}"), volume: pv_name, zone, mode: "pre-created volume".into() })
}

fn set_bound(world: &mut World, ci: usize, pv_name: &str) {
    let c = &mut world.objects.pvcs[ci].obj;
    c.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.to_string());
    c.status = Some(PersistentVolumeClaimStatus { phase: Some("Bound".into()), ..Default::default() });
}

/// Claims that are bound to a volume.
pub fn bound_claims(world: &World) -> usize {
    world.objects.pvcs.iter().filter(|c| !unbound(&c.obj)).count()
}
