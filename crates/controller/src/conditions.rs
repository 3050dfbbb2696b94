//! Status conditions as Karpenter v1 writes them on NodeClaims and EC2NodeClasses: the condition types,
//! setting one (the transition time moves only when the status changes), reading one. Shared by
//! registration, the launcher, garbage collection, NodeClass readiness and the state index, and
//! depending on none of them.

use k8s_openapi::jiff::Timestamp;
use stowage_input::api::{Condition, EC2NodeClass, NodeClaim};
use stowage_input::unsupported::Unsupported;

pub(crate) const CONDITION_LAUNCHED: &str = "Launched";
pub(crate) const CONDITION_REGISTERED: &str = "Registered";
pub(crate) const CONDITION_INITIALIZED: &str = "Initialized";
pub(crate) const CONDITION_READY: &str = "Ready";
/// EC2NodeClass: the spec passes the validation Karpenter's CRD enforces (kubelet settings).
pub(crate) const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// NodePool and EC2NodeClass: fields are set that stowage reads but does not act on
/// (`stowage_input::unsupported`); True with the fields in the message, absent when there are none.
pub(crate) const CONDITION_UNSUPPORTED_FIELDS: &str = "UnsupportedFields";

/// `now` as a condition timestamp.
pub fn timestamp(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Sets a condition, keeping its transition time when the status does not change.
pub(crate) fn set_condition(conditions: &mut Vec<Condition>, type_: &str, status: &str, reason: &str, message: &str) {
    set_condition_at(conditions, type_, status, reason, message, Timestamp::now());
}

pub(crate) fn set_condition_at(conditions: &mut Vec<Condition>, type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) {
    let transition = conditions.iter().find(|c| c.type_ == type_ && c.status == status).and_then(|c| c.last_transition_time.clone()).unwrap_or_else(|| timestamp(now));
    conditions.retain(|c| c.type_ != type_);
    conditions.push(Condition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(transition),
        observed_generation: None,
    });
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

/// Sets `UnsupportedFields` to True naming `fields`, or removes it when there are none. `Some(message)`
/// when it changed to name another set of fields (a Warning event and a log line are due); whether it
/// changed at all.
pub(crate) fn set_unsupported_at(conditions: &mut Vec<Condition>, fields: &[Unsupported], now: Timestamp) -> (bool, Option<String>) {
    let current = conditions.iter().find(|c| c.type_ == CONDITION_UNSUPPORTED_FIELDS);
    if fields.is_empty() {
        if current.is_none() {
            return (false, None);
        }
        conditions.retain(|c| c.type_ != CONDITION_UNSUPPORTED_FIELDS);
        return (true, None);
    }
    let message = format!("stowage does not act on: {}", stowage_input::unsupported::message(fields));
    if current.is_some_and(|c| c.status == "True" && c.message.as_deref() == Some(message.as_str())) {
        return (false, None);
    }
    set_condition_at(conditions, CONDITION_UNSUPPORTED_FIELDS, "True", "UnsupportedFields", &message, now);
    (true, Some(message))
}

pub fn condition<'a>(claim: &'a NodeClaim, type_: &str) -> Option<&'a Condition> {
    claim.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// True if the NodeClass says it is not ready (no condition at all counts as ready: files written by
/// hand or by `stowage record` of a cluster without a controller).
pub(crate) fn nodeclass_not_ready(nc: &EC2NodeClass) -> bool {
    nc.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().any(|c| c.type_ == CONDITION_READY && c.status == "False")
}
