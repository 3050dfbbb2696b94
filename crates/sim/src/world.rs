//! The simulated API server: every object of the cluster as typed Kubernetes objects (the same
//! [`Objects`] the workload loader produces), with create-or-replace, delete and the domain snapshot
//! ([`World::build`]) every other part of the simulator reads.
//!
//! Keeping the world as Kubernetes objects, not as a domain `Cluster`, means the simulator sees pods,
//! claims, volumes and nodes through exactly the conversion `stowage plan` uses (`input::build`): a
//! bound PersistentVolume's node affinity, a WaitForFirstConsumer claim, a NodeClaim in flight all mean
//! the same thing to the binder, the planners and the checker.

use kube::Resource;

use stowage_core::domain::Cluster;
use stowage_input::objects::{Obj, Objects};
use stowage_input::read::Source;
use stowage_input::{self, LoadError};

#[derive(Clone, Debug, Default)]
pub struct World {
    pub objects: Objects,
    /// Bumped by every change kube-scheduler could react to (not by NodeClaim changes, which it does
    /// not watch). The binder runs when it moved.
    generation: u64,
    /// Source of unique names and uids for created objects.
    serial: u64,
}

/// `(namespace, name)` of an object; cluster-scoped objects have an empty namespace.
pub fn ident<K: Resource>(o: &K) -> (String, String) {
    let m = o.meta();
    (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default())
}

pub fn key_of<K: Resource>(o: &K) -> String {
    let (ns, name) = ident(o);
    if ns.is_empty() { name } else { format!("{ns}/{name}") }
}

/// Where objects the simulator creates come from, for error messages.
pub(crate) fn sim_source(what: &str) -> Source {
    Source { file: format!("<simulated {what}>").into(), doc: 1, item: None }
}

/// Replaces the object with the same namespace and name, or appends it. Returns true if created.
fn upsert<K: Resource>(list: &mut Vec<Obj<K>>, item: Obj<K>) -> bool {
    let id = ident(&item.obj);
    match list.iter_mut().find(|x| ident(&x.obj) == id) {
        Some(x) => {
            *x = item;
            false
        }
        None => {
            list.push(item);
            true
        }
    }
}

/// Namespaced objects applied without a namespace live in `default`, as kubectl puts them.
fn default_namespace<K: Resource>(list: &mut [Obj<K>]) {
    for o in list {
        o.obj.meta_mut().namespace.get_or_insert_with(|| "default".into());
    }
}

impl World {
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Marks a change kube-scheduler would see.
    pub(crate) fn touch(&mut self) {
        self.generation += 1;
    }

    /// A fresh number for generated names and uids.
    pub(crate) fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// `kubectl apply`: creates or replaces each object. Returns one line per kind and verb
    /// (`created PersistentVolume pv-a, pv-b`).
    pub fn apply(&mut self, mut new: Objects) -> Vec<String> {
        default_namespace(&mut new.pods);
        default_namespace(&mut new.deployments);
        default_namespace(&mut new.replicasets);
        default_namespace(&mut new.statefulsets);
        default_namespace(&mut new.jobs);
        default_namespace(&mut new.daemonsets);
        default_namespace(&mut new.pvcs);
        default_namespace(&mut new.pdbs);
        default_namespace(&mut new.services);
        default_namespace(&mut new.replicationcontrollers);
        let mut log = Vec::new();
        macro_rules! merge {
            ($field:ident, $kind:literal) => {
                let (mut created, mut configured) = (Vec::new(), Vec::new());
                for o in std::mem::take(&mut new.$field) {
                    let k = key_of(&o.obj);
                    if upsert(&mut self.objects.$field, o) { created.push(k) } else { configured.push(k) }
                }
                for (verb, names) in [("created", created), ("configured", configured)] {
                    if !names.is_empty() {
                        log.push(format!("{verb} {} {}", $kind, names.join(", ")));
                    }
                }
            };
        }
        merge!(namespaces, "Namespace");
        merge!(nodeclasses, "EC2NodeClass");
        merge!(nodepools, "NodePool");
        merge!(storageclasses, "StorageClass");
        merge!(csinodes, "CSINode");
        merge!(pvs, "PersistentVolume");
        merge!(pvcs, "PersistentVolumeClaim");
        merge!(nodes, "Node");
        merge!(nodeclaims, "NodeClaim");
        merge!(daemonsets, "DaemonSet");
        merge!(deployments, "Deployment");
        merge!(replicasets, "ReplicaSet");
        merge!(statefulsets, "StatefulSet");
        merge!(jobs, "Job");
        merge!(pods, "Pod");
        merge!(pdbs, "PodDisruptionBudget");
        merge!(services, "Service");
        merge!(replicationcontrollers, "ReplicationController");
        self.touch();
        log
    }

    /// The domain snapshot of the world now (kube-scheduler's default cluster-default spread).
    pub fn build(&self) -> Result<Cluster, LoadError> {
        stowage_input::build(&self.objects).map_err(LoadError)
    }

    /// The domain snapshot of the world now, under the scenario's cluster-default topology spread (its
    /// weights' `topologySpreadDefaults`).
    pub fn build_spread(&self, defaults: &stowage_core::semantics::spread_defaults::SpreadDefaults) -> Result<Cluster, LoadError> {
        stowage_input::build_spread(&self.objects, defaults).map_err(LoadError)
    }

    pub(crate) fn pod_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.objects.pods.iter().position(|p| ident(&p.obj) == (namespace.to_string(), name.to_string()))
    }

    /// Removes pods matching `pred`; returns their keys.
    pub(crate) fn remove_pods(&mut self, mut pred: impl FnMut(&k8s_openapi::api::core::v1::Pod) -> bool) -> Vec<String> {
        let mut removed = Vec::new();
        self.objects.pods.retain(|p| {
            if pred(&p.obj) {
                removed.push(key_of(&p.obj));
                false
            } else {
                true
            }
        });
        if !removed.is_empty() {
            self.touch();
        }
        removed
    }

    pub fn node_exists(&self, name: &str) -> bool {
        self.objects.nodes.iter().any(|n| n.obj.metadata.name.as_deref() == Some(name))
    }
}
