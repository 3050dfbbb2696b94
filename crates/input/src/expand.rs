//! Controllers into pods, as their Kubernetes controllers would create them: Deployments through a
//! ReplicaSet (with `pod-template-hash`), ReplicaSets, StatefulSets (ordinals, `<template>-<sts>-<i>`
//! claims), Jobs. Pods already present in the input (a kubectl dump lists them with their owners)
//! count towards the replicas; only the missing ones are created, pending. DaemonSets are not
//! expanded: their pods follow nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodStatus, PodTemplateSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::InputError;
use super::ids::{stable_hash, stable_uid};
use super::objects::{Obj, Objects};
use super::read::Source;

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A short suffix in the alphabet Kubernetes uses for generated names.
fn suffix(h: u64, len: usize) -> String {
    let mut h = h;
    (0..len)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn owner(kind: &str, api_version: &str, md: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: md.name.clone().unwrap_or_default(),
        uid: md.uid.clone().unwrap_or_else(|| stable_uid(&[kind, md.namespace.as_deref().unwrap_or(""), md.name.as_deref().unwrap_or("")])),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn owned_by(md: &ObjectMeta, kind: &str, name: &str, uid: Option<&str>) -> bool {
    md.owner_references.iter().flatten().any(|o| o.kind == kind && (o.name == name || uid.is_some_and(|u| u == o.uid)) && o.controller.unwrap_or(false))
}

fn ns_of(md: &ObjectMeta) -> String {
    md.namespace.clone().unwrap_or_else(|| "default".into())
}

fn new_pod(name: String, ns: &str, template: &PodTemplateSpec, extra_labels: &[(String, String)], owner_ref: OwnerReference) -> Pod {
    let tmd = template.metadata.clone().unwrap_or_default();
    let mut labels = tmd.labels.clone().unwrap_or_default();
    for (k, v) in extra_labels {
        labels.insert(k.clone(), v.clone());
    }
    Pod {
        metadata: ObjectMeta {
            uid: Some(stable_uid(&["Pod", ns, &name])),
            name: Some(name),
            namespace: Some(ns.to_string()),
            labels: Some(labels),
            annotations: tmd.annotations.clone(),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: Some(template.spec.clone().unwrap_or_default()),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    }
}

/// Whether a label selector selects an object (an invalid selector selects nothing).
fn selects(sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector, md: &ObjectMeta) -> bool {
    let empty = BTreeMap::new();
    selects_labels(sel, md.labels.as_ref().unwrap_or(&empty))
}

/// Whether a label selector selects these labels (an invalid selector selects nothing).
pub fn selects_labels(sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let source = super::read::Source { file: Default::default(), doc: 0, item: None };
    let ctx = super::convert::Ctx { source: &source, object: String::new() };
    match super::convert::label_selector(&ctx, "", sel) {
        Ok(s) => stowage_core::semantics::selectors::matches(&s, labels),
        Err(_) => false,
    }
}

fn live(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && p.metadata.deletion_timestamp.is_none()
}

/// A controller's count field (`spec.replicas`, `spec.parallelism`, ...) as the API server validates
/// it: not negative.
fn count(source: &Source, what: &str, field: &str, v: Option<i32>, default: i32) -> Result<i32, InputError> {
    let v = v.unwrap_or(default);
    if v < 0 {
        return Err(InputError::at(source, Some(what.to_string()), Some(field), format!("must be at least 0, got {v}")));
    }
    Ok(v)
}

/// Room for `new` more pods in a batch of `total` pods under the limit `max_pods`, or an error at the
/// controller field that asks for them.
fn room(source: &Source, what: &str, field: &str, new: usize, total: usize, max_pods: usize) -> Result<(), InputError> {
    if total.saturating_add(new) > max_pods {
        return Err(InputError::at(
            source,
            Some(what.to_string()),
            Some(field),
            format!("{new} more pods would take the batch past the limit of {max_pods} pods per batch; lower {field}, plan in smaller batches, or raise the limit with --max-pods"),
        ));
    }
    Ok(())
}

/// Checks the counts of every controller before anything is expanded: none negative (the API server
/// refuses them), none alone above `max_pods` (so that `replicas: 2000000000` fails before any
/// allocation), StatefulSet ordinals in range. The simulator checks a scenario's manifests with it
/// too, before its own controllers expand them.
pub fn check_counts(o: &Objects, max_pods: usize) -> Result<(), InputError> {
    let what = |kind: &str, md: &ObjectMeta| format!("{kind} {}/{}", ns_of(md), md.name.as_deref().unwrap_or(""));
    for d in &o.deployments {
        let w = what("Deployment", &d.obj.metadata);
        let n = count(&d.source, &w, "spec.replicas", d.obj.spec.as_ref().and_then(|s| s.replicas), 1)?;
        room(&d.source, &w, "spec.replicas", n as usize, 0, max_pods)?;
    }
    for r in &o.replicasets {
        let w = what("ReplicaSet", &r.obj.metadata);
        let n = count(&r.source, &w, "spec.replicas", r.obj.spec.as_ref().and_then(|s| s.replicas), 1)?;
        room(&r.source, &w, "spec.replicas", n as usize, 0, max_pods)?;
    }
    for s in &o.statefulsets {
        let w = what("StatefulSet", &s.obj.metadata);
        let n = count(&s.source, &w, "spec.replicas", s.obj.spec.as_ref().and_then(|s| s.replicas), 1)?;
        room(&s.source, &w, "spec.replicas", n as usize, 0, max_pods)?;
        count(&s.source, &w, "spec.ordinals.start", s.obj.spec.as_ref().and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start), 0)?;
    }
    for j in &o.jobs {
        let w = what("Job", &j.obj.metadata);
        let spec = j.obj.spec.as_ref();
        let p = count(&j.source, &w, "spec.parallelism", spec.and_then(|s| s.parallelism), 1)?;
        count(&j.source, &w, "spec.completions", spec.and_then(|s| s.completions), 0)?;
        room(&j.source, &w, "spec.parallelism", p as usize, 0, max_pods)?;
    }
    Ok(())
}

/// Expands controllers in `o`, appending created pods and claims. At most `max_pods` pods in all: the
/// controller whose pods would pass it is named in the error.
pub(crate) fn expand(o: &mut Objects, max_pods: usize) -> Result<(), InputError> {
    check_counts(o, max_pods)?;
    // Deployments without a ReplicaSet in the input get one, as the Deployment controller would.
    let mut all_rs: Vec<(Obj<ReplicaSet>, String)> =
        o.replicasets.iter().map(|rs| (rs.clone(), format!("ReplicaSet {}/{}", ns_of(&rs.obj.metadata), rs.obj.metadata.name.as_deref().unwrap_or("")))).collect();
    for d in &o.deployments {
        let md = &d.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let has_rs = o.replicasets.iter().any(|rs| ns_of(&rs.obj.metadata) == ns && owned_by(&rs.obj.metadata, "Deployment", &name, md.uid.as_deref()));
        if has_rs {
            continue;
        }
        let Some(spec) = &d.obj.spec else { continue };
        // Pods of this Deployment listed without their ReplicaSet (a partial dump) still count.
        let have = o.pods.iter().filter(|p| ns_of(&p.obj.metadata) == ns && live(&p.obj) && selects(&spec.selector, &p.obj.metadata)).count() as i32;
        let template_json = serde_json::to_string(&spec.template).unwrap_or_default();
        let hash = suffix(stable_hash(&[&ns, &name, &template_json]), 10);
        let mut template = spec.template.clone();
        let tmd = template.metadata.get_or_insert_with(Default::default);
        tmd.labels.get_or_insert_with(BTreeMap::new).insert("pod-template-hash".into(), hash.clone());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{hash}")),
                namespace: Some(ns.clone()),
                uid: Some(stable_uid(&["ReplicaSet", &ns, &name, &hash])),
                labels: tmd.labels.clone(),
                owner_references: Some(vec![owner("Deployment", "apps/v1", md)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec { replicas: Some((spec.replicas.unwrap_or(1) - have).max(0)), selector: spec.selector.clone(), template: Some(template), min_ready_seconds: None }),
            status: None,
        };
        all_rs.push((Obj { source: d.source.clone(), obj: rs }, format!("Deployment {ns}/{name}")));
    }

    let mut new_pods = Vec::new();
    for (rs, what) in &all_rs {
        let md = &rs.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let Some(spec) = &rs.obj.spec else { continue };
        let Some(template) = &spec.template else { continue };
        let replicas = spec.replicas.unwrap_or(1).max(0) as usize;
        let have = o.pods.iter().filter(|p| ns_of(&p.obj.metadata) == ns && owned_by(&p.obj.metadata, "ReplicaSet", &name, md.uid.as_deref()) && live(&p.obj)).count();
        room(&rs.source, what, "spec.replicas", replicas.saturating_sub(have), o.pods.len() + new_pods.len(), max_pods)?;
        for i in have..replicas {
            let pod_name = format!("{name}-{}", suffix(stable_hash(&[&ns, &name, &i.to_string()]), 5));
            let p = new_pod(pod_name, &ns, template, &[], owner("ReplicaSet", "apps/v1", md));
            new_pods.push(Obj { source: rs.source.clone(), obj: p });
        }
    }

    let mut new_pvcs = Vec::new();
    for sts in &o.statefulsets {
        let (pods, pvcs) = expand_statefulset(sts, &o.pods, &o.pvcs);
        let what = format!("StatefulSet {}/{}", ns_of(&sts.obj.metadata), sts.obj.metadata.name.as_deref().unwrap_or(""));
        room(&sts.source, &what, "spec.replicas", pods.len(), o.pods.len() + new_pods.len(), max_pods)?;
        new_pods.extend(pods);
        new_pvcs.extend(pvcs);
    }

    for job in &o.jobs {
        let md = &job.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let Some((spec, want)) = job_pods_wanted(&job.obj) else { continue };
        let have = o.pods.iter().filter(|p| ns_of(&p.obj.metadata) == ns && owned_by(&p.obj.metadata, "Job", &name, md.uid.as_deref()) && live(&p.obj)).count();
        room(&job.source, &format!("Job {ns}/{name}"), "spec.parallelism", want.saturating_sub(have), o.pods.len() + new_pods.len(), max_pods)?;
        for i in have..want {
            let pod_name = format!("{name}-{}", suffix(stable_hash(&[&ns, &name, &i.to_string()]), 5));
            let extra = [("job-name".to_string(), name.clone()), ("batch.kubernetes.io/job-name".to_string(), name.clone())];
            let p = new_pod(pod_name, &ns, &spec.template, &extra, owner("Job", "batch/v1", md));
            new_pods.push(Obj { source: job.source.clone(), obj: p });
        }
    }

    o.pods.extend(new_pods);
    o.pvcs.extend(new_pvcs);
    Ok(())
}

/// The pods and claims a StatefulSet's controller creates for the ordinals that have none yet.
pub fn expand_statefulset(sts: &Obj<StatefulSet>, pods: &[Obj<Pod>], pvcs: &[Obj<PersistentVolumeClaim>]) -> (Vec<Obj<Pod>>, Vec<Obj<PersistentVolumeClaim>>) {
    let md = &sts.obj.metadata;
    let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
    let mut out_pods = Vec::new();
    let mut out_pvcs = Vec::new();
    let Some(spec) = &sts.obj.spec else { return (out_pods, out_pvcs) };
    let replicas = i64::from(spec.replicas.unwrap_or(1).max(0));
    let start = i64::from(spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0));
    // Sets, not scans: a StatefulSet of n replicas costs O(n), not O(n × pods).
    let pod_names: std::collections::HashSet<&str> = pods.iter().filter(|p| ns_of(&p.obj.metadata) == ns).filter_map(|p| p.obj.metadata.name.as_deref()).collect();
    let claim_names: std::collections::HashSet<&str> = pvcs.iter().filter(|c| ns_of(&c.obj.metadata) == ns).filter_map(|c| c.obj.metadata.name.as_deref()).collect();
    let mut new_claims: std::collections::HashSet<String> = std::collections::HashSet::new();
    for i in start..start + replicas {
        let pod_name = format!("{name}-{i}");
        let exists = pod_names.contains(pod_name.as_str());
        let mut volumes = spec.template.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default();
        for t in spec.volume_claim_templates.iter().flatten() {
            let tname = t.metadata.name.clone().unwrap_or_default();
            let claim = format!("{tname}-{name}-{i}");
            if !claim_names.contains(claim.as_str()) && new_claims.insert(claim.clone()) {
                let mut labels = t.metadata.labels.clone().unwrap_or_default();
                if let Some(sel) = spec.selector.match_labels.as_ref() {
                    for (k, v) in sel {
                        labels.insert(k.clone(), v.clone());
                    }
                }
                out_pvcs.push(Obj {
                    source: sts.source.clone(),
                    obj: PersistentVolumeClaim {
                        metadata: ObjectMeta {
                            name: Some(claim.clone()),
                            namespace: Some(ns.clone()),
                            uid: Some(stable_uid(&["PersistentVolumeClaim", &ns, &claim])),
                            labels: Some(labels),
                            annotations: t.metadata.annotations.clone(),
                            ..Default::default()
                        },
                        spec: t.spec.clone(),
                        status: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimStatus { phase: Some("Pending".into()), ..Default::default() }),
                    },
                });
            }
            volumes.retain(|v| v.name != tname);
            volumes.push(Volume { name: tname, persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: claim, read_only: None }), ..Default::default() });
        }
        if exists {
            continue;
        }
        let mut template = spec.template.clone();
        let pspec: &mut PodSpec = template.spec.get_or_insert_with(Default::default);
        pspec.volumes = if volumes.is_empty() { None } else { Some(volumes) };
        pspec.hostname = Some(pod_name.clone());
        if !spec.service_name.as_deref().unwrap_or("").is_empty() {
            pspec.subdomain = spec.service_name.clone();
        }
        let extra = [("statefulset.kubernetes.io/pod-name".to_string(), pod_name.clone()), ("apps.kubernetes.io/pod-index".to_string(), i.to_string())];
        let p = new_pod(pod_name, &ns, &template, &extra, owner("StatefulSet", "apps/v1", md));
        out_pods.push(Obj { source: sts.source.clone(), obj: p });
    }
    (out_pods, out_pvcs)
}

/// A Job's spec and how many pods it runs at once (the Job controller's
/// `min(parallelism, completions - succeeded)`); `None` for a Job without a spec or suspended. The
/// simulator's Job controller uses it too.
pub fn job_pods_wanted(job: &k8s_openapi::api::batch::v1::Job) -> Option<(&k8s_openapi::api::batch::v1::JobSpec, usize)> {
    let spec = job.spec.as_ref()?;
    if spec.suspend == Some(true) {
        return None;
    }
    let parallelism = i64::from(spec.parallelism.unwrap_or(1).max(0));
    let succeeded = i64::from(job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0));
    let remaining = spec.completions.map(|c| (i64::from(c) - succeeded).max(0)).unwrap_or(parallelism);
    Some((spec, parallelism.min(remaining) as usize))
}
