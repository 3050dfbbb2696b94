//! Typing raw objects into k8s-openapi and stowage's Karpenter types.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::de::DeserializeOwned;

use super::InputError;
use super::read::{RawObject, Source};
use crate::api::{EC2NodeClass, NodeClaim, NodePool};

/// An object with where it came from.
#[derive(Clone, Debug)]
pub struct Obj<T> {
    pub source: Source,
    pub obj: T,
}

/// Every understood object of a workload, typed.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub pods: Vec<Obj<Pod>>,
    pub deployments: Vec<Obj<Deployment>>,
    pub replicasets: Vec<Obj<ReplicaSet>>,
    pub statefulsets: Vec<Obj<StatefulSet>>,
    pub jobs: Vec<Obj<Job>>,
    pub daemonsets: Vec<Obj<DaemonSet>>,
    pub nodes: Vec<Obj<Node>>,
    pub nodepools: Vec<Obj<NodePool>>,
    pub nodeclaims: Vec<Obj<NodeClaim>>,
    pub nodeclasses: Vec<Obj<EC2NodeClass>>,
    pub pvcs: Vec<Obj<PersistentVolumeClaim>>,
    pub pvs: Vec<Obj<PersistentVolume>>,
    pub storageclasses: Vec<Obj<StorageClass>>,
    /// Per node, the volumes each CSI driver may attach (NodeVolumeLimits).
    pub csinodes: Vec<Obj<CSINode>>,
    pub namespaces: Vec<Obj<Namespace>>,
    /// Read for consolidation (how many pods a decision may evict at once); planning ignores them.
    pub pdbs: Vec<Obj<PodDisruptionBudget>>,
    /// Read for the cluster-default topology spread (their selectors select the pods it applies to:
    /// `spread_defaults`); planning reads nothing else of them.
    pub services: Vec<Obj<Service>>,
    /// Read for the cluster-default topology spread only; stowage does not expand them into pods.
    pub replicationcontrollers: Vec<Obj<ReplicationController>>,
}

fn typed<T: DeserializeOwned>(raw: &RawObject) -> Result<Obj<T>, InputError> {
    match serde_path_to_error::deserialize::<_, T>(&raw.value) {
        Ok(obj) => Ok(Obj { source: raw.source.clone(), obj }),
        Err(e) => {
            let path = e.path().to_string();
            let field = if path == "." { None } else { Some(path) };
            Err(InputError::at(&raw.source, Some(raw.describe()), field.as_deref(), e.into_inner().to_string()))
        }
    }
}

/// One warning per Karpenter field of `raw` stowage does not act on: `set` (typed, read and not acted
/// on) and the fields of the file stowage's types drop ([`crate::unsupported::dropped`]).
fn unsupported_warnings<T: serde::Serialize>(raw: &RawObject, obj: &T, set: Vec<crate::unsupported::Unsupported>) -> Vec<String> {
    let back = serde_json::to_value(obj).unwrap_or(serde_json::Value::Null);
    set.into_iter().chain(crate::unsupported::dropped(&raw.value, &back)).map(|u| format!("{}: {}: {}: not supported by stowage: {}", raw.source, raw.describe(), u.path, u.note)).collect()
}

/// Types every object; unknown kinds become warnings, and so do Karpenter fields stowage does not act
/// on. All errors are collected.
pub fn type_all(raws: &[RawObject]) -> (Objects, Vec<String>, Vec<InputError>) {
    let mut t = Typer::default();
    for raw in raws {
        t.add(raw);
    }
    t.finish()
}

/// Types objects one at a time, as [`type_all`] does, so that a reader can drop each document as soon
/// as it is typed.
#[derive(Default)]
pub struct Typer {
    objects: Objects,
    warnings: Vec<String>,
    errors: Vec<InputError>,
}

impl Typer {
    pub fn add(&mut self, raw: &RawObject) {
        let o = &mut self.objects;
        let (group, version) = raw.api_version.split_once('/').unwrap_or(("", raw.api_version.as_str()));
        if (group == "karpenter.sh" || group == "karpenter.k8s.aws") && version != "v1" {
            let msg = format!("{} is not supported: stowage reads Karpenter's v1 API ({group}/v1); convert the object as Karpenter's v1 migration guide says", raw.api_version);
            self.errors.push(InputError::at(&raw.source, Some(raw.describe()), Some("apiVersion"), msg));
            return;
        }
        let warnings = &mut self.warnings;
        let r = match (raw.kind.as_str(), group) {
            ("Pod", _) => typed(raw).map(|x| o.pods.push(x)),
            ("Deployment", _) => typed(raw).map(|x| o.deployments.push(x)),
            ("ReplicaSet", _) => typed(raw).map(|x| o.replicasets.push(x)),
            ("StatefulSet", _) => typed(raw).map(|x| o.statefulsets.push(x)),
            ("Job", _) => typed(raw).map(|x| o.jobs.push(x)),
            ("DaemonSet", _) => typed(raw).map(|x| o.daemonsets.push(x)),
            ("Node", _) => typed(raw).map(|x| o.nodes.push(x)),
            ("NodePool", "karpenter.sh") => typed::<NodePool>(raw).map(|x| {
                warnings.extend(unsupported_warnings(raw, &x.obj, crate::unsupported::nodepool(&x.obj)));
                o.nodepools.push(x)
            }),
            ("NodeClaim", "karpenter.sh") => typed(raw).map(|x| o.nodeclaims.push(x)),
            ("EC2NodeClass", "karpenter.k8s.aws") => typed::<EC2NodeClass>(raw).map(|x| {
                warnings.extend(unsupported_warnings(raw, &x.obj, crate::unsupported::nodeclass(&x.obj)));
                o.nodeclasses.push(x)
            }),
            ("PersistentVolumeClaim", _) => typed(raw).map(|x| o.pvcs.push(x)),
            ("PersistentVolume", _) => typed(raw).map(|x| o.pvs.push(x)),
            ("StorageClass", _) => typed(raw).map(|x| o.storageclasses.push(x)),
            ("CSINode", "storage.k8s.io") => typed(raw).map(|x| o.csinodes.push(x)),
            ("Namespace", _) => typed(raw).map(|x| o.namespaces.push(x)),
            ("PodDisruptionBudget", "policy") => typed(raw).map(|x| o.pdbs.push(x)),
            ("Service", "") => typed(raw).map(|x| o.services.push(x)),
            ("ReplicationController", "") => typed(raw).map(|x| o.replicationcontrollers.push(x)),
            _ => {
                warnings.push(format!("{}: {} ({}): kind not used by stowage, skipped", raw.source, raw.describe(), raw.api_version));
                Ok(())
            }
        };
        if let Err(e) = r {
            self.errors.push(e);
        }
    }

    /// How many errors typing has found so far.
    pub fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// Forgets the errors found after the first `n`: those of a file that then turned out unreadable,
    /// which is reported instead, as when it was read whole before typing.
    pub fn forget_errors_after(&mut self, n: usize) {
        self.errors.truncate(n);
    }

    /// The objects, the warnings and the errors, in the order the objects were added.
    pub fn finish(self) -> (Objects, Vec<String>, Vec<InputError>) {
        (self.objects, self.warnings, self.errors)
    }
}

/// Where the first copy of an object came from, and what it is.
fn first_copy<T: kube::Resource>(kind: &str, objs: &[Obj<T>], namespaced: bool, errors: &mut Vec<InputError>) {
    let mut seen: std::collections::HashMap<(String, String), &Source> = std::collections::HashMap::new();
    for o in objs {
        let md = o.obj.meta();
        let Some(name) = md.name.clone() else { continue };
        let ns = if namespaced { md.namespace.clone().unwrap_or_else(|| "default".into()) } else { String::new() };
        let what = if namespaced { format!("{kind} {ns}/{name}") } else { format!("{kind} {name}") };
        match seen.entry((ns, name)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(&o.source);
            }
            std::collections::hash_map::Entry::Occupied(first) => {
                let msg = format!("duplicate: {what} is already defined in {}; the API server holds one object per name, so remove one copy (or name the file once)", first.get());
                errors.push(InputError::at(&o.source, Some(what), Some("metadata.name"), msg));
            }
        }
    }
}

/// Objects defined twice (same kind, namespace and name), each reported at its second copy: the API
/// server would refuse it, and planning both copies would double the batch.
pub fn duplicates(o: &Objects) -> Vec<InputError> {
    let mut errors = Vec::new();
    first_copy("Pod", &o.pods, true, &mut errors);
    first_copy("Deployment", &o.deployments, true, &mut errors);
    first_copy("ReplicaSet", &o.replicasets, true, &mut errors);
    first_copy("StatefulSet", &o.statefulsets, true, &mut errors);
    first_copy("Job", &o.jobs, true, &mut errors);
    first_copy("DaemonSet", &o.daemonsets, true, &mut errors);
    first_copy("Node", &o.nodes, false, &mut errors);
    first_copy("NodePool", &o.nodepools, false, &mut errors);
    first_copy("NodeClaim", &o.nodeclaims, false, &mut errors);
    first_copy("EC2NodeClass", &o.nodeclasses, false, &mut errors);
    first_copy("PersistentVolumeClaim", &o.pvcs, true, &mut errors);
    first_copy("PersistentVolume", &o.pvs, false, &mut errors);
    first_copy("StorageClass", &o.storageclasses, false, &mut errors);
    first_copy("CSINode", &o.csinodes, false, &mut errors);
    first_copy("Namespace", &o.namespaces, false, &mut errors);
    first_copy("PodDisruptionBudget", &o.pdbs, true, &mut errors);
    first_copy("Service", &o.services, true, &mut errors);
    first_copy("ReplicationController", &o.replicationcontrollers, true, &mut errors);
    errors
}
