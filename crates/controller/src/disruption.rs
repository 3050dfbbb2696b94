//! Disruption in the controller: the cluster state's NodeClaims as candidates for the shared decision
//! (`stowage_decide::disruption`, which the simulator runs too, and which documents the rules).
//!
//! A node is *nominated* (not empty, whatever its pods) while a recent plan put pods on it that are
//! still pending: in memory for at most `nomination_ttl` after the batch (the controller's own plans,
//! on Nodes and NodeClaims alike), and, read back from the NodeClaims so that it survives a restart,
//! while a pod the NodeClaim's nominated-pods annotation names is still pending and the NodeClaim has
//! not been initialized for `nomination_ttl` yet ([`persisted_nominations`]). Once the plan's pods
//! are bound (or gone) the node is judged by what it holds: a Job pod that ends a minute after its
//! node came up leaves the node empty from then, not from the end of the nomination.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::conditions::{CONDITION_INITIALIZED, condition};
use super::state::{ClusterState, DO_NOT_DISRUPT, is_daemon_pod, is_terminal};
pub use stowage_decide::disruption::{Action, Cause, PoolPolicy, pool_policy, pool_policy_at};
use stowage_decide::provision::nominated_pods;

pub type Candidate = stowage_decide::disruption::Candidate<Timestamp>;
pub type Disruption = stowage_decide::disruption::Disruption<Timestamp>;

/// The candidates of a cluster state: every NodeClaim of a NodePool. `nominated` names NodeClaims and
/// Nodes a recent plan put pods on.
pub fn candidates(s: &ClusterState, nominated: &dyn Fn(&str) -> bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for c in s.nodeclaims.iter() {
        let name = c.metadata.name.clone().unwrap_or_default();
        let Some(pool) = c.metadata.labels.as_ref().and_then(|l| l.get(stowage_core::domain::labels::keys::NODEPOOL)).cloned() else { continue };
        let node = s.node_of(c);
        let node_name = node.and_then(|n| n.metadata.name.clone());
        let initialized = node.is_some_and(|n| super::registration::is_initialized(c, n));
        let workload_pods = node_name.as_deref().map(|n| s.pods_on(n).filter(|p| !is_daemon_pod(p) && !is_terminal(p)).count()).unwrap_or(0);
        let annotated = |a: Option<&BTreeMap<String, String>>| a.and_then(|a| a.get(DO_NOT_DISRUPT)).is_some_and(|v| v == "true");
        let do_not_disrupt = annotated(c.metadata.annotations.as_ref()) || node.is_some_and(|n| annotated(n.metadata.annotations.as_ref()));
        out.push(Candidate {
            nominated: nominated(&name) || node_name.as_deref().is_some_and(nominated),
            nodeclaim: name,
            nodepool: pool,
            created: c.metadata.creation_timestamp.as_ref().map(|t| t.0),
            expire_after: c.spec.expire_after.as_deref().filter(|v| *v != "Never").and_then(|v| humantime::parse_duration(v).ok()),
            deleting: c.metadata.deletion_timestamp.is_some(),
            initialized,
            workload_pods,
            do_not_disrupt,
        });
    }
    out
}

/// The uids of the pods that are pending: unbound, not deleting, not terminal.
pub fn pending_uids(s: &ClusterState) -> BTreeSet<&str> {
    s.pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|x| x.node_name.as_deref()).is_none_or(str::is_empty) && p.metadata.deletion_timestamp.is_none() && !is_terminal(p))
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect()
}

/// NodeClaims whose persisted nominations still hold at `now`: one of the pods they were created for
/// is still `pending` ([`pending_uids`]), and they have not been initialized (ready for pods) for `ttl`
/// yet.
pub fn persisted_nominations(s: &ClusterState, pending: &BTreeSet<&str>, now: Timestamp, ttl: Duration) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in s.nodeclaims.iter() {
        let initialized_at = condition(c, CONDITION_INITIALIZED).filter(|x| x.status == "True").and_then(|x| x.last_transition_time.as_deref()).and_then(|t| t.parse::<Timestamp>().ok());
        if initialized_at.is_some_and(|t| now.duration_since(t).unsigned_abs() >= ttl) {
            continue;
        }
        if nominated_pods(c).iter().any(|uid| pending.contains(uid.as_str())) {
            out.extend(c.metadata.name.clone());
        }
    }
    out
}
