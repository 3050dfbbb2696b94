//! Consolidation of underutilised nodes in the simulator. The decision is the controller's own
//! (`stowage_decide::consolidation`: which nodes to remove, which replacements to launch, under
//! `consolidateAfter`, do-not-disrupt, budgets, PodDisruptionBudgets and the spot-to-spot rules); this
//! module keeps its memory on the simulated clock and the decision being carried out.
//!
//! When a node's pods have been unchanged for its pool's `consolidateAfter` and the cluster is at rest,
//! the engine asks for a decision. A round that finds nothing is not repeated until the cluster
//! changes or another node becomes due, so `settle` ends. A decision is executed in Karpenter's order:
//! its replacements are launched at once; when every one has registered (a simulated Node is Ready on
//! registration) the removed nodes go, their pods are recreated by their controllers and
//! kube-scheduler places them. If a replacement cannot be launched, nothing is removed (the launched
//! replacements, empty, go by emptiness).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::time::SimTime;
use stowage_core::domain::Cluster;
use stowage_decide::consolidation::{self as shared, Decision};
use stowage_decide::drift;
use stowage_input::Objects;

/// A decision being carried out.
#[derive(Clone, Debug)]
pub struct InProgress {
    pub remove: Vec<String>,
    /// Replacement NodeClaims (node names), and those not registered yet.
    pub replacements: BTreeSet<String>,
    pub waiting: BTreeSet<String>,
    pub reason: String,
}

#[derive(Clone, Debug, Default)]
pub struct Consolidation {
    shared: shared::Consolidation<SimTime>,
    next: Option<SimTime>,
    pub in_progress: Option<InProgress>,
    /// Drifted NodeClaims whose pods found no place, and when (tried again after [`DRIFT_RETRY`], at
    /// the next time the cluster comes to rest).
    drift_failed: BTreeMap<String, SimTime>,
    /// A disruption budget that blocked let go: a round is due at the next observation even if the
    /// cluster did not change.
    woken: bool,
}

/// What a drift pass reads of the simulated cloud and calendar.
pub struct DriftFacts<'a> {
    /// The cloud's description of its instances (`CloudProvider::list`).
    pub instances: &'a [stowage_decide::cloud::Instance],
    /// Now in Unix seconds, if the scenario has a `start`.
    pub calendar: Option<i64>,
}

/// How long a drifted NodeClaim whose replacement failed waits (the controller's value).
pub const DRIFT_RETRY: Duration = Duration::from_secs(60);

impl Consolidation {
    /// Records the nodes' pods at rest; `enabled` is the scenario's consolidation switch. A drifted
    /// NodeClaim makes a round due at once whatever the switch (drift is not consolidation; as in
    /// Karpenter, it always runs).
    pub fn observe(&mut self, cluster: &Cluster, objects: &Objects, facts: &DriftFacts, enabled: bool, now: SimTime) {
        self.shared.observe(cluster, now);
        self.drift_failed.retain(|_, t| now.since(*t) < DRIFT_RETRY);
        if self.in_progress.is_some() {
            self.next = None;
            return;
        }
        let consolidation = if enabled { self.shared.next_due(cluster, objects) } else { None };
        let woken = (enabled && self.woken).then_some(now);
        let drift = self.drifted(cluster, objects, facts, &BTreeSet::new()).map(|_| now);
        self.next = consolidation.into_iter().chain(woken).chain(drift).min();
    }

    /// A budget that blocked disruptions of a pool let go: the next observation makes a round due.
    pub fn wake(&mut self) {
        self.woken = true;
    }

    /// The drifted NodeClaim a drift pass replaces (`stowage_decide::drift::candidate`), the
    /// NodeClaims in `disrupting` (removed this round) counted against their pools' budgets.
    pub fn drifted(&self, cluster: &Cluster, objects: &Objects, facts: &DriftFacts, disrupting: &BTreeSet<String>) -> Option<drift::Drifted> {
        let skip = |n: &str| self.drift_failed.contains_key(n);
        // No catalog: the scenario's never changes, so no instance type stops being offered
        // (`InstanceTypeNotFound` is not judged here).
        drift::candidate(cluster, objects, &drift::Round { instances: facts.instances, now: facts.calendar, disrupting, skip: &skip, catalog: None })
    }

    /// A drifted NodeClaim's pods found no place: not tried again for [`DRIFT_RETRY`].
    pub fn drift_failed(&mut self, claim: &str, now: SimTime) {
        self.drift_failed.insert(claim.to_string(), now);
    }

    /// When a round is due (none while a decision is being carried out).
    pub fn next_due(&self) -> Option<SimTime> {
        self.next
    }

    pub fn is_due(&self, now: SimTime) -> bool {
        self.next.is_some_and(|t| t <= now)
    }

    pub fn shared(&mut self) -> &mut shared::Consolidation<SimTime> {
        self.next = None;
        self.woken = false;
        &mut self.shared
    }

    /// Starts carrying out `d`, whose replacements were launched as `launched` (node names); `cause`
    /// names it in the removed nodes' reason (`underutilized`, or a drift cause).
    pub fn start(&mut self, d: &Decision, launched: BTreeSet<String>, cause: &str, now: SimTime) {
        self.shared.moved(d, now);
        let reason =
            if launched.is_empty() { format!("{cause}, its pods fit on other nodes") } else { format!("{cause}, replacement(s) {} Ready", launched.iter().cloned().collect::<Vec<_>>().join(", ")) };
        self.in_progress = Some(InProgress { remove: d.remove.iter().map(|r| r.node.clone()).collect(), replacements: launched.clone(), waiting: launched, reason });
    }

    /// Nodes that must not be judged empty meanwhile (the replacements waiting for their pods).
    pub fn protected(&self) -> BTreeSet<String> {
        self.in_progress.as_ref().map(|p| p.replacements.clone()).unwrap_or_default()
    }

    /// A replacement registered; returns the decision when every replacement has.
    pub fn registered(&mut self, node: &str) -> Option<InProgress> {
        let p = self.in_progress.as_mut()?;
        p.waiting.remove(node);
        if p.waiting.is_empty() { self.in_progress.take() } else { None }
    }
}
