//! A snapshot of everything the planners look at: pods, nodes, NodePools, DaemonSets, namespaces.

use std::collections::{BTreeMap, HashMap};

use super::labels::Labels;
use super::node::Node;
use super::nodepool::{NodeClass, NodePool};
use super::pod::{Pod, PodId};
use super::spread_defaults::SpreadDefaults;

/// A DaemonSet reduced to the pod it would run on each node it selects.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub template: Pod,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cluster {
    /// Every pod: bound, pending, terminal. `PodId` indexes this list.
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<NodeClass>,
    pub daemonsets: Vec<DaemonSet>,
    /// Namespace name → labels (always including `kubernetes.io/metadata.name`).
    pub namespaces: BTreeMap<String, Labels>,
    /// The cluster-default topology spread the pods' constraints were built under
    /// (`semantics::spread_defaults`; the weights' `topologySpreadDefaults`, applied by the input); plans
    /// record it, so a plan is checked against pods built the same way.
    pub spread_defaults: SpreadDefaults,
}

impl Cluster {
    pub fn pod(&self, id: PodId) -> &Pod {
        &self.pods[id.ix()]
    }

    pub(crate) fn pod_ids(&self) -> impl Iterator<Item = PodId> + '_ {
        (0..self.pods.len() as u32).map(PodId)
    }

    /// The batch: pods waiting for a node.
    pub fn pending(&self) -> Vec<PodId> {
        self.pod_ids().filter(|&id| self.pod(id).is_pending()).collect()
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn nodepool(&self, name: &str) -> Option<&NodePool> {
        self.nodepools.iter().find(|p| p.name == name)
    }

    pub fn nodeclass(&self, name: &str) -> Option<&NodeClass> {
        self.nodeclasses.iter().find(|c| c.name == name)
    }

    /// The pod with `namespace/name` key `key`. It scans every pod: a caller with many keys to look up
    /// builds [`Cluster::pods_by_key`] once instead (the checker looked up each placement this way, which
    /// made a 50,000-pod check take 332 s).
    pub fn find_pod(&self, key: &str) -> Option<PodId> {
        self.pod_ids().find(|&id| self.pod(id).key() == key)
    }

    /// Every pod by its `namespace/name` key; of two pods with one key, the first (as [`Cluster::find_pod`]).
    pub fn pods_by_key(&self) -> HashMap<String, PodId> {
        let mut by_key = HashMap::with_capacity(self.pods.len());
        for id in self.pod_ids() {
            by_key.entry(self.pod(id).key()).or_insert(id);
        }
        by_key
    }
}
