//! NodePools stowage cannot read are reported on the object, never dropped with only a log line: each
//! batch's snapshot names the NodePools it left out (`state::Snapshot::excluded`); as leader, each of
//! them gets `ValidationSucceeded=False` (reason `InvalidNodePool`, the input error as message; Karpenter
//! sets the same condition type) and a Warning event `InvalidNodePool` when the condition turns False.
//! A NodePool read again gets `ValidationSucceeded=True`. Status is written only when the condition's
//! status or message changes.
//!
//! NodePools that set fields stowage reads but does not act on (`stowage_input::unsupported`:
//! `spec.replicas`, a static pool, which is left out of planning) are still planned; as leader, each
//! gets `UnsupportedFields=True` with the fields in the message, a Warning event `UnsupportedField` and
//! a log line when that set changes, and the condition is removed when none is left ([`unsupported`],
//! every batch and every NodeClass round).

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::conditions::{CONDITION_VALIDATION_SUCCEEDED, set_condition_at, set_unsupported_at};
use super::events::Reason;
use super::state::Excluded;
use super::{Ctx, kube_status};
use stowage_decide::cloud::CloudProvider;
use stowage_input::api::NodePool;
use stowage_input::api::nodepool::NodePoolStatus;

/// The NodePools whose `ValidationSucceeded` condition must change, with their new status and whether
/// it turned False (an event is due). `excluded` names objects as `input` does (`NodePool <name>`).
pub(crate) fn changes(pools: &[NodePool], excluded: &[Excluded], now: Timestamp) -> Vec<(String, NodePoolStatus, bool)> {
    let mut out = Vec::new();
    for p in pools {
        let Some(name) = p.metadata.name.clone() else { continue };
        let problem = excluded.iter().find(|x| x.object == format!("NodePool {name}")).map(|x| x.reason.clone());
        let current = p.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED));
        let (status, reason, message) = match &problem {
            Some(m) => ("False", "InvalidNodePool", m.as_str()),
            None => ("True", "ValidationSucceeded", ""),
        };
        let unchanged = current.is_some_and(|c| c.status == status && c.message.as_deref().unwrap_or("") == message);
        // A NodePool never reported invalid needs no condition written to say it is valid.
        if unchanged || (current.is_none() && problem.is_none()) {
            continue;
        }
        let mut s = p.status.clone().unwrap_or_default();
        let mut conditions = s.conditions.take().unwrap_or_default();
        set_condition_at(&mut conditions, CONDITION_VALIDATION_SUCCEEDED, status, reason, message, now);
        s.conditions = Some(conditions);
        let turned_false = problem.is_some() && current.is_none_or(|c| c.status != "False");
        out.push((name, s, turned_false));
    }
    out
}

/// The NodePools whose `UnsupportedFields` condition must change: their new conditions, and the
/// message of a newly reported set of fields (an event is due).
pub(crate) fn unsupported(pools: &[NodePool], now: Timestamp) -> Vec<(String, Vec<stowage_input::api::Condition>, Option<String>)> {
    let mut out = Vec::new();
    for p in pools {
        let Some(name) = p.metadata.name.clone() else { continue };
        let mut conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let (changed, reported) = set_unsupported_at(&mut conditions, &stowage_input::unsupported::nodepool(p), now);
        if changed {
            out.push((name, conditions, reported));
        }
    }
    out
}

/// Writes the `UnsupportedFields` conditions [`unsupported`] asks for (leader only), with the events and
/// log lines.
pub(crate) async fn report_unsupported<P: CloudProvider>(ctx: &Ctx<P>) {
    if !ctx.is_leader() {
        return;
    }
    let pools: Vec<NodePool> = super::lock(&ctx.state).nodepools.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).cloned().collect();
    let api: Api<NodePool> = Api::all(ctx.client.clone());
    for (name, conditions, reported) in unsupported(&pools, ctx.clock.now()) {
        if let (Some(message), Some(p)) = (&reported, pools.iter().find(|p| p.metadata.name.as_deref() == Some(name.as_str()))) {
            tracing::warn!(nodepool = %name, fields = %message, "NodePool sets fields stowage does not act on");
            ctx.events.object(p, Reason::UnsupportedField, message.clone());
        }
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({ "status": { "conditions": conditions } }))).await {
            Ok(p) => super::lock(&ctx.state).apply(p),
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                ctx.metrics.error(super::metrics::Stage::Snapshot);
                tracing::warn!(nodepool = %name, error = %e, "writing the NodePool's UnsupportedFields condition failed");
            }
        }
    }
}

/// Writes the conditions [`changes`] asks for (leader only) and the events.
pub(crate) async fn report<P: CloudProvider>(ctx: &Ctx<P>, excluded: &[Excluded]) {
    if !ctx.is_leader() {
        return;
    }
    let pools: Vec<NodePool> = super::lock(&ctx.state).nodepools.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).cloned().collect();
    let api: Api<NodePool> = Api::all(ctx.client.clone());
    for (name, status, turned_false) in changes(&pools, excluded, ctx.clock.now()) {
        if turned_false && let Some(p) = pools.iter().find(|p| p.metadata.name.as_deref() == Some(name.as_str())) {
            let message = status.conditions.iter().flatten().find(|c| c.type_ == CONDITION_VALIDATION_SUCCEEDED).and_then(|c| c.message.clone()).unwrap_or_default();
            ctx.events.object(p, Reason::InvalidNodePool, format!("not planned: {message}"));
        }
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({ "status": { "conditions": status.conditions } }))).await {
            Ok(p) => super::lock(&ctx.state).apply(p),
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                ctx.metrics.error(super::metrics::Stage::Snapshot);
                tracing::warn!(nodepool = %name, error = %e, "writing the NodePool's ValidationSucceeded condition failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> NodePool {
        NodePool::new(name, Default::default())
    }

    #[test]
    fn unsupported_fields_get_a_condition_and_one_event_per_change_and_none_when_gone() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let mut pools = vec![pool("dynamic"), pool("fixed")];
        pools[1].spec.replicas = Some(3);
        let c = unsupported(&pools, t);
        assert_eq!(c.len(), 1, "a pool with nothing to report gets no condition");
        let (name, conditions, event) = &c[0];
        assert_eq!(name, "fixed");
        let cond = conditions.iter().find(|c| c.type_ == "UnsupportedFields").unwrap();
        assert_eq!(cond.status, "True");
        let message = cond.message.clone().unwrap();
        assert!(message.contains("spec.replicas (static NodePool"), "{message}");
        assert_eq!(event.as_deref(), Some(message.as_str()), "the event says what the condition says");
        pools[1].status = Some(NodePoolStatus { conditions: Some(conditions.clone()), ..Default::default() });
        assert!(unsupported(&pools, t).is_empty(), "written once: no second event while nothing changes");
        pools[1].spec.replicas = None;
        let gone = unsupported(&pools, t);
        assert_eq!(gone.len(), 1);
        assert!(gone[0].1.iter().all(|c| c.type_ != "UnsupportedFields"), "removed when none is left");
        assert!(gone[0].2.is_none(), "no event for a fix");
    }

    #[test]
    fn an_unreadable_nodepool_gets_a_false_condition_once_and_true_when_fixed() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let bad = Excluded { object: "NodePool b".into(), reason: "NodePool b: spec.weight: must be 1-100".into() };
        let mut pools = vec![pool("a"), pool("b")];
        let c = changes(&pools, std::slice::from_ref(&bad), t);
        assert_eq!(c.len(), 1, "a valid pool without a condition is left alone");
        let (name, status, event) = &c[0];
        assert_eq!((name.as_str(), *event), ("b", true));
        let cond = status.conditions.as_ref().unwrap().iter().find(|c| c.type_ == "ValidationSucceeded").unwrap();
        assert_eq!((cond.status.as_str(), cond.reason.as_deref(), cond.message.as_deref()), ("False", Some("InvalidNodePool"), Some(bad.reason.as_str())));
        pools[1].status = Some(status.clone());
        assert!(changes(&pools, std::slice::from_ref(&bad), t).is_empty(), "written once");
        let fixed = changes(&pools, &[], t);
        assert_eq!(fixed.len(), 1);
        assert!(!fixed[0].2);
        assert_eq!(fixed[0].1.conditions.as_ref().unwrap()[0].status, "True");
    }
}
