//! Karpenter's provisioning loop, the parts that are not planning: the batcher, the cache of offerings
//! the cloud refused, and the NodeClaim and Node objects a plan turns into.
//!
//! Batching (karpenter.md §1): a pod kube-scheduler cannot place triggers the batcher. The window
//! opens at the first trigger and closes when no *new* pod has triggered for `batchIdle` (1 s) or
//! `batchMax` (10 s) after it opened; a pod triggering again does not extend it. The batch is every
//! pending pod at closing time, planned together with the NodeClaims still in flight.
//!
//! A launch refused with insufficient capacity marks its offering unavailable for
//! `unavailableOfferingTTL` (3 minutes, Karpenter's cache); the planner sees the catalog with those
//! offerings marked `available: false`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::time::SimTime;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::domain::resources::Resources;
use stowage_core::plan::NewNode;
use stowage_input::api::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
use stowage_input::quantity;

/// The open batching window.
#[derive(Clone, Debug, PartialEq)]
struct Window {
    opened: SimTime,
    last_new: SimTime,
    pods: BTreeSet<String>,
}

#[derive(Clone, Debug)]
pub struct Batcher {
    idle: Duration,
    max: Duration,
    window: Option<Window>,
}

impl Batcher {
    pub fn new(idle: Duration, max: Duration) -> Self {
        Batcher { idle, max, window: None }
    }

    /// A pod (by uid) was found unschedulable at `now`.
    pub fn trigger(&mut self, uid: &str, now: SimTime) {
        match &mut self.window {
            None => self.window = Some(Window { opened: now, last_new: now, pods: [uid.to_string()].into() }),
            Some(w) => {
                if w.pods.insert(uid.to_string()) {
                    w.last_new = now;
                }
            }
        }
    }

    /// When the open window closes.
    pub fn closes_at(&self) -> Option<SimTime> {
        self.window.as_ref().map(|w| w.last_new.plus(self.idle).min(w.opened.plus(self.max)))
    }

    /// Closes the window; returns how many pods triggered it.
    pub fn close(&mut self) -> usize {
        self.window.take().map(|w| w.pods.len()).unwrap_or(0)
    }
}

/// (instance type, zone, capacity type).
pub type OfferingKey = (String, String, String);

/// Offerings the cloud refused, until when.
#[derive(Clone, Debug, Default)]
pub struct Unavailable {
    until: BTreeMap<OfferingKey, SimTime>,
}

impl Unavailable {
    pub fn mark(&mut self, key: OfferingKey, until: SimTime) {
        let e = self.until.entry(key).or_insert(until);
        *e = (*e).max(until);
    }

    pub fn next_expiry(&self) -> Option<SimTime> {
        self.until.values().min().copied()
    }

    /// Forgets entries whose time has come; returns them.
    pub fn expire(&mut self, now: SimTime) -> Vec<OfferingKey> {
        let gone: Vec<OfferingKey> = self.until.iter().filter(|(_, t)| **t <= now).map(|(k, _)| k.clone()).collect();
        for k in &gone {
            self.until.remove(k);
        }
        gone
    }

    pub fn contains(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.until.contains_key(&(instance_type.to_string(), zone.to_string(), capacity_type.to_string()))
    }

    /// The catalog as the planner must see it now.
    pub fn view(&self, base: &Catalog) -> Catalog {
        let mut c = base.clone();
        if self.until.is_empty() {
            return c;
        }
        for t in &mut c.types {
            for o in &mut t.offerings {
                if self.contains(&t.name, &o.zone, &o.capacity_type) {
                    o.available = false;
                }
            }
        }
        c
    }
}

pub fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter().map(|(n, v)| (n.to_string(), Quantity(quantity::format(n, v)))).collect()
}

fn plan_taints(n: &NewNode) -> Vec<Taint> {
    n.taints.iter().map(|t| Taint { key: t.key.clone(), value: (!t.value.is_empty()).then(|| t.value.clone()), effect: t.effect.clone(), time_added: None }).collect()
}

/// The NodeClaim for a plan's new node: the plan's labels (hostname = the claim's name), the
/// NodePool's taints, and the instance type's capacity already in its status, so that later batches
/// count it as capacity in flight (`input::karpenter::in_flight`).
pub fn node_claim(name: &str, n: &NewNode, node_class: stowage_input::api::NodeClassReference, capacity: &Resources, allocatable: &Resources) -> NodeClaim {
    let mut labels = n.labels.clone();
    labels.insert(keys::HOSTNAME.into(), name.to_string());
    let mut c = NodeClaim::new(
        name,
        NodeClaimSpec {
            taints: Some(plan_taints(n)).filter(|t| !t.is_empty()),
            startup_taints: None,
            requirements: Vec::new(),
            resources: None,
            node_class_ref: node_class,
            expire_after: None,
            termination_grace_period: None,
        },
    );
    c.metadata.labels = Some(labels);
    c.status = Some(NodeClaimStatus { capacity: Some(quantities(capacity)), allocatable: Some(quantities(allocatable)), ..Default::default() });
    c
}

/// The Node a NodeClaim's instance registers: its labels plus Karpenter's registration labels, its
/// taints (startup taints are assumed gone by the time pods schedule), its capacity.
pub fn registered_node(claim: &NodeClaim, provider_id: &str) -> Node {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(keys::HOSTNAME.into(), name.clone());
    labels.insert("karpenter.sh/registered".into(), "true".into());
    labels.insert("karpenter.sh/initialized".into(), "true".into());
    let status = claim.status.clone().unwrap_or_default();
    Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { provider_id: Some(provider_id.to_string()), taints: claim.spec.taints.clone(), ..Default::default() }),
        status: Some(NodeStatus { capacity: status.capacity, allocatable: status.allocatable, ..Default::default() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_closes_after_idle_or_max() {
        let mut b = Batcher::new(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(b.closes_at(), None);
        b.trigger("a", SimTime(0));
        assert_eq!(b.closes_at(), Some(SimTime(1_000)));
        b.trigger("b", SimTime(900));
        assert_eq!(b.closes_at(), Some(SimTime(1_900)), "a new pod extends the idle timer");
        b.trigger("a", SimTime(1_800));
        assert_eq!(b.closes_at(), Some(SimTime(1_900)), "a repeated pod does not");
        for i in 0..20 {
            b.trigger(&format!("p{i}"), SimTime(1_800 + 800 * i));
        }
        assert_eq!(b.closes_at(), Some(SimTime(10_000)), "the max timer bounds the window");
        assert_eq!(b.close(), 22);
        assert_eq!(b.closes_at(), None);
    }
}
