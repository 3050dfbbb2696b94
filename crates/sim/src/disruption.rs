//! Karpenter's disruption of nodes it manages, the two kinds that need no planning:
//!
//! - **Emptiness**: a registered node of a NodePool with no pod on it but DaemonSet pods, and no pod
//!   nominated to it, is removed once it has been empty for the pool's `consolidateAfter` (`Never`
//!   disables it). Karpenter does this under both consolidation policies; consolidation of
//!   underutilised nodes (moving pods) is not simulated. Disruption budgets are not modelled: every
//!   node that is due goes.
//! - **Expiration**: a node launched by the simulation is removed at its launch time plus the pool's
//!   `expireAfter` (fixed when it is launched; the engine keeps it with the NodeClaim); its pods are
//!   evicted and their controllers recreate them.
//!
//! Nodes from the scenario's manifests count for emptiness (they carry `karpenter.sh/nodepool`) but not
//! for expiration (their age is unknown).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::time::{SimTime, short};
use stowage_core::domain::Cluster;

#[derive(Clone, Debug, Default)]
pub struct Disruption {
    /// Node → when it was first seen empty (since then continuously).
    empty_since: BTreeMap<String, SimTime>,
    /// Node → when it is due for consolidation, refreshed by `observe`.
    consolidate_at: BTreeMap<String, SimTime>,
}

impl Disruption {
    /// Records which managed nodes are empty at `now`. `nominated` are nodes pending pods are
    /// nominated to; `enabled` is the scenario's consolidation switch.
    pub fn observe(&mut self, cluster: &Cluster, nominated: &BTreeSet<String>, enabled: bool, now: SimTime) {
        let mut busy: BTreeSet<&str> = BTreeSet::new();
        for p in &cluster.pods {
            if let Some(n) = p.node_name.as_deref()
                && !p.is_daemon()
                && !p.is_terminal()
            {
                busy.insert(n);
            }
        }
        let mut seen = BTreeMap::new();
        let mut due = BTreeMap::new();
        for n in cluster.nodes.iter().filter(|n| !n.in_flight) {
            let Some(pool) = n.nodepool.as_deref().and_then(|p| cluster.nodepool(p)) else { continue };
            if busy.contains(n.name.as_str()) || nominated.contains(&n.name) {
                continue;
            }
            let since = self.empty_since.get(&n.name).copied().unwrap_or(now);
            seen.insert(n.name.clone(), since);
            if let (true, Some(after)) = (enabled, pool.consolidate_after) {
                due.insert(n.name.clone(), since.plus(Duration::from_secs(after)));
            }
        }
        self.empty_since = seen;
        self.consolidate_at = due;
    }

    /// The next time an empty node is due.
    pub fn next_due(&self) -> Option<SimTime> {
        self.consolidate_at.values().min().copied()
    }

    /// Empty nodes due at `now`, with the reason to show.
    pub fn due(&self, now: SimTime) -> Vec<(String, String)> {
        self.consolidate_at
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(n, _)| {
                let since = self.empty_since.get(n).copied().unwrap_or(now);
                (n.clone(), format!("empty for {}, consolidateAfter", short(now.since(since))))
            })
            .collect()
    }

    pub fn forget(&mut self, node: &str) {
        self.empty_since.remove(node);
        self.consolidate_at.remove(node);
    }
}
