//! The workload controllers of kube-controller-manager, reduced to what decides which pods exist:
//!
//! - **Deployment** → one ReplicaSet per pod template (`<name>-<template hash>`); a new template scales
//!   the old ReplicaSets to 0 at once (no rolling surge: pods are created and deleted instantly here).
//! - **ReplicaSet** → pods `<rs>-<5 chars>`; surplus pods are deleted unbound first, then newest.
//! - **StatefulSet** → pods `<sts>-<ordinal>` and claims `<template>-<sts>-<ordinal>`. OrderedReady (the
//!   default) creates the next ordinal only when every lower one is Running; Parallel creates all.
//!   Scale-down deletes the highest ordinals; their claims stay unless
//!   `persistentVolumeClaimRetentionPolicy.whenScaled` is Delete.
//! - **DaemonSet** → a pod bound to every registered node it selects (`semantics::daemonsets`), removed
//!   from nodes it no longer selects.
//! - **Job** → `min(parallelism, completions − succeeded)` pods. Simulated pods never finish, so a Job
//!   never completes.
//! - **Pod GC** → pods bound to a node that no longer exists are deleted (their controllers recreate
//!   them).
//!
//! Termination is instant: a deleted pod is gone in the same instant, which is what lets OrderedReady
//! scale-down remove every condemned ordinal at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::events::EventKind;
use super::world::{World, ident, key_of};
use stowage_core::domain::Cluster;
use stowage_core::semantics::daemonsets;
use stowage_input::expand::expand_statefulset;
use stowage_input::ids::{stable_hash, stable_uid};
use stowage_input::objects::Obj;

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A name suffix in the alphabet Kubernetes uses for generated names.
pub fn suffix(h: u64, len: usize) -> String {
    let mut h = h;
    (0..len)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn ns_of(md: &ObjectMeta) -> String {
    md.namespace.clone().unwrap_or_else(|| "default".into())
}

fn controller_of(md: &ObjectMeta) -> Option<(&str, &str)> {
    md.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| (o.kind.as_str(), o.name.as_str()))
}

fn owned_by(md: &ObjectMeta, kind: &str, ns: &str, name: &str) -> bool {
    ns_of(md) == ns && controller_of(md) == Some((kind, name))
}

fn alive(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && p.metadata.deletion_timestamp.is_none()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn owner_ref(kind: &str, api_version: &str, md: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: md.name.clone().unwrap_or_default(),
        uid: md.uid.clone().unwrap_or_else(|| stable_uid(&[kind, md.namespace.as_deref().unwrap_or(""), md.name.as_deref().unwrap_or("")])),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A pod from a template, pending. The uid includes a serial so that a recreated pod of the same name
/// is a different pod (as it is in Kubernetes).
fn new_pod(world: &mut World, name: String, ns: &str, template: &PodTemplateSpec, extra: &[(String, String)], owner: OwnerReference) -> Pod {
    let tmd = template.metadata.clone().unwrap_or_default();
    let mut labels = tmd.labels.clone().unwrap_or_default();
    for (k, v) in extra {
        labels.insert(k.clone(), v.clone());
    }
    let serial = world.next_serial().to_string();
    Pod {
        metadata: ObjectMeta {
            uid: Some(stable_uid(&["Pod", ns, &name, &serial])),
            name: Some(name),
            namespace: Some(ns.to_string()),
            labels: Some(labels),
            annotations: tmd.annotations.clone(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(template.spec.clone().unwrap_or_default()),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    }
}

/// Runs every controller once and reports what it created or deleted. Changes that are not events
/// (a ReplicaSet scaled) still bump the world's generation.
pub fn reconcile(world: &mut World, cluster: &Cluster) -> Vec<EventKind> {
    let mut ev = Vec::new();
    pod_gc(world, &mut ev);
    deployments(world);
    replicasets(world, &mut ev);
    statefulsets(world, &mut ev);
    daemonsets(world, cluster, &mut ev);
    jobs(world, &mut ev);
    if !ev.is_empty() {
        world.touch();
    }
    ev
}

fn pod_gc(world: &mut World, ev: &mut Vec<EventKind>) {
    let nodes: BTreeSet<String> = world.objects.nodes.iter().filter_map(|n| n.obj.metadata.name.clone()).collect();
    let gone = world.remove_pods(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| !n.is_empty() && !nodes.contains(n)));
    ev.extend(gone.into_iter().map(|pod| EventKind::PodDeleted { pod, reason: "its node is gone".into() }));
}

fn template_hash(ns: &str, name: &str, template: &PodTemplateSpec) -> String {
    let json = serde_json::to_string(template).unwrap_or_default();
    suffix(stable_hash(&[ns, name, &json]), 10)
}

fn deployments(world: &mut World) {
    let mut new_rs = Vec::new();
    let mut scale: Vec<((String, String), i32)> = Vec::new();
    for d in &world.objects.deployments {
        let md = &d.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let Some(spec) = &d.obj.spec else { continue };
        let hash = template_hash(&ns, &name, &spec.template);
        let current = format!("{name}-{hash}");
        let want = spec.replicas.unwrap_or(1).max(0);
        for rs in world.objects.replicasets.iter().filter(|rs| owned_by(&rs.obj.metadata, "Deployment", &ns, &name)) {
            let rs_name = rs.obj.metadata.name.clone().unwrap_or_default();
            let target = if rs_name == current { want } else { 0 };
            if rs.obj.spec.as_ref().and_then(|s| s.replicas) != Some(target) {
                scale.push(((ns.clone(), rs_name), target));
            }
        }
        let exists = world.objects.replicasets.iter().any(|rs| ident(&rs.obj) == (ns.clone(), current.clone()));
        if !exists {
            let mut template = spec.template.clone();
            let tmd = template.metadata.get_or_insert_with(Default::default);
            tmd.labels.get_or_insert_with(BTreeMap::new).insert("pod-template-hash".into(), hash.clone());
            let mut selector = spec.selector.clone();
            selector.match_labels.get_or_insert_with(BTreeMap::new).insert("pod-template-hash".into(), hash.clone());
            let rs = ReplicaSet {
                metadata: ObjectMeta {
                    name: Some(current.clone()),
                    namespace: Some(ns.clone()),
                    uid: Some(stable_uid(&["ReplicaSet", &ns, &current])),
                    labels: tmd.labels.clone(),
                    owner_references: Some(vec![owner_ref("Deployment", "apps/v1", md)]),
                    ..Default::default()
                },
                spec: Some(ReplicaSetSpec { replicas: Some(want), selector, template: Some(template), min_ready_seconds: None }),
                status: None,
            };
            new_rs.push(Obj { source: d.source.clone(), obj: rs });
        }
    }
    for ((ns, name), target) in scale {
        if let Some(rs) = world.objects.replicasets.iter_mut().find(|rs| ident(&rs.obj) == (ns.clone(), name.clone()))
            && let Some(spec) = rs.obj.spec.as_mut()
        {
            spec.replicas = Some(target);
            world.touch();
        }
    }
    if !new_rs.is_empty() {
        world.objects.replicasets.extend(new_rs);
        world.touch();
    }
}

fn replicasets(world: &mut World, ev: &mut Vec<EventKind>) {
    let sets: Vec<(String, String, i32, PodTemplateSpec, ObjectMeta, stowage_input::read::Source)> = world
        .objects
        .replicasets
        .iter()
        .filter_map(|rs| {
            let spec = rs.obj.spec.as_ref()?;
            let md = &rs.obj.metadata;
            Some((ns_of(md), md.name.clone().unwrap_or_default(), spec.replicas.unwrap_or(1).max(0), spec.template.clone()?, md.clone(), rs.source.clone()))
        })
        .collect();
    for (ns, name, want, template, md, source) in sets {
        let owned: Vec<usize> = (0..world.objects.pods.len())
            .filter(|&i| {
                let p = &world.objects.pods[i].obj;
                owned_by(&p.metadata, "ReplicaSet", &ns, &name) && alive(p)
            })
            .collect();
        let have = owned.len() as i32;
        let owner = format!("ReplicaSet {ns}/{name}");
        if have < want {
            for _ in have..want {
                let pod_name = loop {
                    let serial = world.next_serial();
                    let candidate = format!("{name}-{}", suffix(stable_hash(&[&ns, &name, &serial.to_string()]), 5));
                    if world.pod_index(&ns, &candidate).is_none() {
                        break candidate;
                    }
                };
                let p = new_pod(world, pod_name, &ns, &template, &[], owner_ref("ReplicaSet", "apps/v1", &md));
                ev.push(EventKind::PodCreated { pod: key_of(&p), owner: owner.clone() });
                world.objects.pods.push(Obj { source: source.clone(), obj: p });
            }
        } else if have > want {
            // kube-controller-manager deletes unassigned pods first, then the newest.
            let mut ranked = owned.clone();
            ranked.sort_by_key(|&i| {
                let bound = world.objects.pods[i].obj.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                (bound, std::cmp::Reverse(i))
            });
            let doomed: BTreeSet<(String, String)> = ranked.iter().take((have - want) as usize).map(|&i| ident(&world.objects.pods[i].obj)).collect();
            let gone = world.remove_pods(|p| doomed.contains(&ident(p)));
            ev.extend(gone.into_iter().map(|pod| EventKind::PodDeleted { pod, reason: format!("{owner} scaled down") }));
        }
    }
}

/// The ordinal of a StatefulSet pod named `<sts>-<i>`.
fn ordinal(sts: &str, pod: &str) -> Option<i32> {
    pod.strip_prefix(sts)?.strip_prefix('-')?.parse().ok()
}

fn statefulsets(world: &mut World, ev: &mut Vec<EventKind>) {
    for si in 0..world.objects.statefulsets.len() {
        let sts = world.objects.statefulsets[si].clone();
        let md = &sts.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let Some(spec) = &sts.obj.spec else { continue };
        let owner = format!("StatefulSet {ns}/{name}");
        let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
        let end = start + spec.replicas.unwrap_or(1).max(0);
        let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");

        // Scale-down: every ordinal outside [start, end), highest first.
        let mut condemned: Vec<(i32, String)> = world
            .objects
            .pods
            .iter()
            .filter(|p| owned_by(&p.obj.metadata, "StatefulSet", &ns, &name))
            .filter_map(|p| {
                let pn = p.obj.metadata.name.clone().unwrap_or_default();
                ordinal(&name, &pn).filter(|i| *i < start || *i >= end).map(|i| (i, pn))
            })
            .collect();
        condemned.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
        let delete_claims = spec.persistent_volume_claim_retention_policy.as_ref().and_then(|r| r.when_scaled.as_deref()) == Some("Delete");
        for (i, pn) in &condemned {
            for pod in world.remove_pods(|p| ident(p) == (ns.clone(), pn.clone())) {
                ev.push(EventKind::PodDeleted { pod, reason: format!("{owner} scaled down") });
            }
            if delete_claims {
                let claims: BTreeSet<String> = spec.volume_claim_templates.iter().flatten().map(|t| format!("{}-{name}-{i}", t.metadata.name.clone().unwrap_or_default())).collect();
                let before = world.objects.pvcs.len();
                world.objects.pvcs.retain(|c| !(ns_of(&c.obj.metadata) == ns && c.obj.metadata.name.as_ref().is_some_and(|n| claims.contains(n))));
                if world.objects.pvcs.len() != before {
                    for c in claims {
                        ev.push(EventKind::ClaimDeleted { claim: format!("{ns}/{c}"), reason: "whenScaled: Delete".into() });
                    }
                }
            }
        }

        // Scale-up: which missing ordinals may be created now.
        let pod_of = |world: &World, i: i32| world.pod_index(&ns, &format!("{name}-{i}")).map(|ix| world.objects.pods[ix].obj.clone());
        let mut create: BTreeSet<i32> = BTreeSet::new();
        for i in start..end {
            match pod_of(world, i) {
                Some(p) if parallel || running(&p) => continue,
                Some(_) => break,
                None => {
                    create.insert(i);
                    if !parallel {
                        break;
                    }
                }
            }
        }
        if create.is_empty() {
            continue;
        }
        let (pods, pvcs) = expand_statefulset(&sts, &world.objects.pods, &world.objects.pvcs);
        let mut wanted_claims: BTreeSet<String> = BTreeSet::new();
        for i in &create {
            for t in spec.volume_claim_templates.iter().flatten() {
                wanted_claims.insert(format!("{}-{name}-{i}", t.metadata.name.clone().unwrap_or_default()));
            }
        }
        for c in pvcs {
            if c.obj.metadata.name.as_ref().is_some_and(|n| wanted_claims.contains(n)) {
                ev.push(EventKind::ClaimCreated { claim: key_of(&c.obj), owner: owner.clone() });
                world.objects.pvcs.push(c);
            }
        }
        for mut p in pods {
            let pn = p.obj.metadata.name.clone().unwrap_or_default();
            if !ordinal(&name, &pn).is_some_and(|i| create.contains(&i)) {
                continue;
            }
            let serial = world.next_serial().to_string();
            p.obj.metadata.uid = Some(stable_uid(&["Pod", &ns, &pn, &serial]));
            ev.push(EventKind::PodCreated { pod: key_of(&p.obj), owner: owner.clone() });
            world.objects.pods.push(p);
        }
    }
}

fn daemonsets(world: &mut World, cluster: &Cluster, ev: &mut Vec<EventKind>) {
    // `input::build` converts DaemonSets in order and fails on any error, so indices line up.
    if cluster.daemonsets.len() != world.objects.daemonsets.len() {
        return;
    }
    let nodes: Vec<&stowage_core::domain::Node> = cluster.nodes.iter().filter(|n| !n.in_flight && !n.deleting).collect();
    let mut add = Vec::new();
    let mut remove: BTreeSet<(String, String)> = BTreeSet::new();
    for (di, ds) in world.objects.daemonsets.iter().enumerate() {
        let md = &ds.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let template = ds.obj.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
        let mut on: BTreeMap<String, (String, String)> = BTreeMap::new();
        for p in world.objects.pods.iter().filter(|p| owned_by(&p.obj.metadata, "DaemonSet", &ns, &name)) {
            if let Some(n) = p.obj.spec.as_ref().and_then(|s| s.node_name.clone()) {
                on.insert(n, ident(&p.obj));
            }
        }
        for n in &nodes {
            let should = daemonsets::runs_on(&cluster.daemonsets[di], &n.labels, &n.taints, Some(&n.name));
            match (should, on.get(&n.name)) {
                (true, None) => {
                    let pod_name = format!("{name}-{}", suffix(stable_hash(&[&ns, &name, &n.name]), 5));
                    let mut t = template.clone();
                    let spec: &mut PodSpec = t.spec.get_or_insert_with(Default::default);
                    spec.node_name = Some(n.name.clone());
                    add.push((pod_name, ns.clone(), t, owner_ref("DaemonSet", "apps/v1", md), ds.source.clone(), format!("DaemonSet {ns}/{name}")));
                }
                (false, Some(id)) => {
                    remove.insert(id.clone());
                }
                _ => {}
            }
        }
    }
    for pod in world.remove_pods(|p| remove.contains(&ident(p))) {
        ev.push(EventKind::PodDeleted { pod, reason: "the DaemonSet no longer selects its node".into() });
    }
    for (pod_name, ns, t, owner, source, owner_text) in add {
        let mut p = new_pod(world, pod_name, &ns, &t, &[], owner);
        // Bound by the DaemonSet controller's node affinity; the kubelet starts it at once.
        p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
        ev.push(EventKind::PodCreated { pod: key_of(&p), owner: owner_text });
        world.objects.pods.push(Obj { source, obj: p });
    }
}

fn jobs(world: &mut World, ev: &mut Vec<EventKind>) {
    let jobs: Vec<_> = world.objects.jobs.clone();
    for job in jobs {
        let md = &job.obj.metadata;
        let (ns, name) = (ns_of(md), md.name.clone().unwrap_or_default());
        let Some((spec, want)) = stowage_input::expand::job_pods_wanted(&job.obj) else { continue };
        let have = world.objects.pods.iter().filter(|p| owned_by(&p.obj.metadata, "Job", &ns, &name) && alive(&p.obj)).count();
        for _ in have..want {
            let serial = world.next_serial();
            let pod_name = format!("{name}-{}", suffix(stable_hash(&[&ns, &name, &serial.to_string()]), 5));
            let extra = [("job-name".to_string(), name.clone()), ("batch.kubernetes.io/job-name".to_string(), name.clone())];
            let p = new_pod(world, pod_name, &ns, &spec.template, &extra, owner_ref("Job", "batch/v1", md));
            ev.push(EventKind::PodCreated { pod: key_of(&p), owner: format!("Job {ns}/{name}") });
            world.objects.pods.push(Obj { source: job.source.clone(), obj: p });
        }
    }
}

/// Deletes an object and what it controls (background cascading deletion): a Deployment its
/// ReplicaSets and their pods, a ReplicaSet, StatefulSet, DaemonSet or Job its pods. StatefulSet
/// claims stay. Returns false if there is no such object.
pub(crate) fn delete_workload(world: &mut World, kind: &str, ns: &str, name: &str, ev: &mut Vec<EventKind>) -> bool {
    let id = (ns.to_string(), name.to_string());
    let found = match kind {
        "Deployment" => {
            let before = world.objects.deployments.len();
            world.objects.deployments.retain(|d| ident(&d.obj) != id);
            let rs: Vec<String> = world.objects.replicasets.iter().filter(|r| owned_by(&r.obj.metadata, "Deployment", ns, name)).filter_map(|r| r.obj.metadata.name.clone()).collect();
            for r in rs {
                delete_workload(world, "ReplicaSet", ns, &r, ev);
            }
            world.objects.deployments.len() != before
        }
        "ReplicaSet" => remove_named(&mut world.objects.replicasets, &id),
        "StatefulSet" => remove_named(&mut world.objects.statefulsets, &id),
        "DaemonSet" => remove_named(&mut world.objects.daemonsets, &id),
        "Job" => remove_named(&mut world.objects.jobs, &id),
        _ => false,
    };
    if found && kind != "Deployment" {
        let owner = format!("{kind} {ns}/{name} deleted");
        for pod in world.remove_pods(|p| owned_by(&p.metadata, kind, ns, name)) {
            ev.push(EventKind::PodDeleted { pod, reason: owner.clone() });
        }
    }
    if found {
        world.touch();
    }
    found
}

/// Removes the object with this `(namespace, name)`; returns whether there was one.
pub(crate) fn remove_named<K: kube::Resource>(list: &mut Vec<Obj<K>>, id: &(String, String)) -> bool {
    let before = list.len();
    list.retain(|o| &ident(&o.obj) != id);
    list.len() != before
}

/// Sets `spec.replicas` of a Deployment, ReplicaSet or StatefulSet. Returns false if there is none.
pub fn scale(world: &mut World, kind: &str, ns: &str, name: &str, replicas: i32) -> bool {
    let id = (ns.to_string(), name.to_string());
    let done = match kind {
        "Deployment" => world.objects.deployments.iter_mut().find(|o| ident(&o.obj) == id).and_then(|o| o.obj.spec.as_mut()).map(|s| s.replicas = Some(replicas)),
        "ReplicaSet" => world.objects.replicasets.iter_mut().find(|o| ident(&o.obj) == id).and_then(|o| o.obj.spec.as_mut()).map(|s| s.replicas = Some(replicas)),
        "StatefulSet" => world.objects.statefulsets.iter_mut().find(|o| ident(&o.obj) == id).and_then(|o| o.obj.spec.as_mut()).map(|s| s.replicas = Some(replicas)),
        _ => None,
    };
    if done.is_some() {
        world.touch();
    }
    done.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_parse_only_their_own_pods() {
        assert_eq!(ordinal("db", "db-3"), Some(3));
        assert_eq!(ordinal("db", "db-x"), None);
        assert_eq!(ordinal("db", "dbx-1"), None);
    }
}
