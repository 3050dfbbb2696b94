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

use std::collections::BTreeSet;

use super::time::SimTime;
use stowage_core::domain::Cluster;
use stowage_decide::consolidation::{self as shared, Decision};
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
}

impl Consolidation {
    /// Records the nodes' pods at rest; `enabled` is the scenario's consolidation switch.
    pub fn observe(&mut self, cluster: &Cluster, objects: &Objects, enabled: bool, now: SimTime) {
        self.shared.observe(cluster, now);
        self.next = if enabled && self.in_progress.is_none() { self.shared.next_due(cluster, objects) } else { None };
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
        &mut self.shared
    }

    /// Starts carrying out `d`, whose replacements were launched as `launched` (node names).
    pub fn start(&mut self, d: &Decision, launched: BTreeSet<String>) {
        let reason = if launched.is_empty() {
            "consolidation: underutilized, its pods fit on other nodes".to_string()
        } else {
            format!("consolidation: underutilized, replacement(s) {} Ready", launched.iter().cloned().collect::<Vec<_>>().join(", "))
        };
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
