//! Disruption in the controller: the cluster state's NodeClaims as candidates for the shared decision
//! (`stowage_decide::disruption`, which the simulator runs too, and which documents the rules).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::state::{ClusterState, DO_NOT_DISRUPT, is_daemon_pod, is_terminal};
pub use stowage_decide::disruption::{Action, Cause, PoolPolicy, pool_policy};

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
