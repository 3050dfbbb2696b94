//! Karpenter's disruption of nodes it manages, the two kinds that need no planning:
//!
//! - **Emptiness**: a registered node of a NodePool with no pod on it but DaemonSet and terminal pods,
//!   and no pod nominated to it, is removed once it has been empty for the pool's `consolidateAfter`
//!   (`Never` disables it). Karpenter does this under both consolidation policies; consolidation of
//!   underutilised nodes (moving pods) is `super::consolidation`'s. The decision is the controller's own
//!   (`stowage_decide::disruption`); this module turns the simulated cluster into its candidates.
//!   The pool's disruption budgets for reason `Empty` apply as in the controller
//!   (`stowage_decide::disruption::pool_policy_at`, at the scenario's calendar time when it has a
//!   `start`, else every scheduled budget applies). The simulator removes a node the instant it is
//!   due, so a count or a percentage above zero never binds for long (the next node goes at the same
//!   instant, in the next pass); a budget that allows none keeps the empty nodes until it lets go
//!   (the engine wakes when its window ends, `stowage_decide::disruption::next_budget_change`).
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
use stowage_decide::disruption::{Candidate, Cause, PoolPolicy};
use stowage_input::Objects;

#[derive(Clone, Debug, Default)]
pub struct Disruption {
    shared: stowage_decide::disruption::Disruption<SimTime>,
    /// The candidates and pool policies of the last observation (the cluster at rest).
    candidates: Vec<Candidate<SimTime>>,
    pools: BTreeMap<String, PoolPolicy>,
    /// When the next empty node is due, refreshed by `observe`.
    next: Option<SimTime>,
}

impl Disruption {
    /// Records which managed nodes are empty at `now`. `nominated` are nodes pending pods are
    /// nominated to; `enabled` is the scenario's consolidation switch.
    pub fn observe(&mut self, cluster: &Cluster, objects: &Objects, nominated: &BTreeSet<String>, enabled: bool, now: SimTime, calendar: Option<i64>) {
        let mut workload: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &cluster.pods {
            if let Some(n) = p.node_name.as_deref()
                && !p.is_daemon()
                && !p.is_terminal()
            {
                *workload.entry(n).or_default() += 1;
            }
        }
        let mut candidates = Vec::new();
        let mut pools = BTreeMap::new();
        for n in cluster.nodes.iter().filter(|n| !n.in_flight) {
            let Some(pool) = n.nodepool.as_deref().and_then(|p| cluster.nodepool(p)) else { continue };
            let after = pool.consolidate_after.filter(|_| enabled).map(Duration::from_secs);
            let obj = objects.nodepools.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(pool.name.as_str()));
            let budgets = stowage_decide::disruption::reason_budgets(obj, stowage_decide::disruption::REASON_EMPTY, calendar);
            pools.insert(pool.name.clone(), PoolPolicy { consolidate_after: after, budgets });
            candidates.push(Candidate {
                nodeclaim: n.name.clone(),
                nodepool: pool.name.clone(),
                created: None,
                expire_after: None,
                deleting: false,
                initialized: true,
                workload_pods: workload.get(n.name.as_str()).copied().unwrap_or(0),
                do_not_disrupt: false,
                nominated: nominated.contains(&n.name),
            });
        }
        candidates.sort_by(|a, b| a.nodeclaim.cmp(&b.nodeclaim));
        // Starts and resets the emptiness timers; what is due now is removed when the engine fires.
        self.shared.decide(&candidates, &pools, now);
        // A pool whose budget allows no removal now has nothing due until the budget lets go (the
        // engine wakes then); the simulator removes nodes at once, so no other budget holds one back.
        let open: Vec<Candidate<SimTime>> = candidates
            .iter()
            .filter(|c| {
                let total = candidates.iter().filter(|x| x.nodepool == c.nodepool).count();
                pools.get(&c.nodepool).is_some_and(|p| stowage_decide::disruption::allowed_disruptions(&p.budgets, total) > 0)
            })
            .cloned()
            .collect();
        self.next = self.shared.next_due(&pools, &open);
        self.candidates = candidates;
        self.pools = pools;
    }

    /// The next time an empty node is due.
    pub fn next_due(&self) -> Option<SimTime> {
        self.next
    }

    /// Empty nodes due at `now`, with the reason to show.
    pub fn due(&mut self, now: SimTime) -> Vec<(String, String)> {
        if self.next.is_none_or(|t| t > now) {
            return Vec::new();
        }
        let actions = self.shared.decide(&self.candidates, &self.pools, now);
        self.next = None;
        actions
            .into_iter()
            .map(|a| match a.cause {
                Cause::Empty { for_ } => (a.nodeclaim, format!("empty for {}, consolidateAfter", short(for_))),
                Cause::Expired { age } => (a.nodeclaim, format!("expired after {}", short(age))),
            })
            .collect()
    }

    pub(crate) fn forget(&mut self, node: &str) {
        self.candidates.retain(|c| c.nodeclaim != node);
    }
}
