//! EC2NodeClass readiness: each NodeClass is resolved by the cloud (subnets, security groups, AMIs;
//! [`CloudProvider::resolve_nodeclass`], cached by the provider) and the result written to its status
//! with a `Ready` condition. A NodeClass that does not resolve gets `Ready=False` with the reason, and
//! the NodePools that use it are left out of planning (`state::planning_objects`), as Karpenter skips
//! NodePools whose NodeClass is not ready. Status is written only when it changes. As leader, each round
//! also lets the cloud garbage-collect what it made for node classes no EC2NodeClass uses any more
//! ([`CloudProvider::collect_nodeclass_resources`]: instance profiles on AWS).
//!
//! A NodeClass that sets fields stowage reads but does not act on (`stowage_input::unsupported`:
//! `placementGroupSelector`, `networkInterfaces`, ...) is still used; its status gets
//! `UnsupportedFields=True` naming them ([`with_unsupported`]), with a Warning event `UnsupportedField`
//! and a log line when that set changes; the condition goes when none is left.
//!
//! As leader, each round also keeps every EC2NodeClass's own `karpenter.k8s.aws/ec2nodeclass-hash`
//! and `-hash-version` annotations current (`stowage_decide::drift::nodeclass_hash`, stowage's hash
//! version), as Karpenter's `nodeclass.hash` controller does: the value stamped on the NodeClaims
//! launched with it, whose difference is `NodeClassDrift`.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::cloud_metrics::Caller;
use super::conditions::{CONDITION_READY, CONDITION_VALIDATION_SUCCEEDED, set_condition_at, set_unsupported_at};
use super::events::Reason;
use super::{Ctx, kube_status};
use stowage_decide::cloud::{CloudError, CloudProvider};
use stowage_decide::drift;
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

/// What Karpenter's CRD refuses in the NodeClass's spec (kubelet settings; a stowage CRD or a file
/// does not enforce it), one message per problem. Empty: valid.
pub(crate) fn invalid(nc: &EC2NodeClass) -> Vec<String> {
    let mut out = nc.spec.kubelet.as_ref().map(|k| k.validate()).unwrap_or_default();
    for (i, t) in nc.spec.capacity_reservation_selector_terms.iter().flatten().enumerate() {
        out.extend(t.validate(&format!("spec.capacityReservationSelectorTerms[{i}]")));
    }
    out
}

/// The status of a NodeClass whose spec is invalid: `ValidationSucceeded=False` and `Ready=False`
/// with the problems; nothing is resolved or launched for it.
pub(crate) fn invalid_status(current: Option<&EC2NodeClassStatus>, problems: &[String], now: Timestamp) -> EC2NodeClassStatus {
    let mut s = current.cloned().unwrap_or_default();
    let mut conditions = s.conditions.take().unwrap_or_default();
    let message = problems.join("; ");
    set_condition_at(&mut conditions, CONDITION_VALIDATION_SUCCEEDED, "False", "InvalidKubeletConfiguration", &message, now);
    set_condition_at(&mut conditions, CONDITION_READY, "False", "ValidationFailed", &message, now);
    s.conditions = Some(conditions);
    s
}

/// The status a resolution gives a NodeClass (conditions keep their transition times).
pub(crate) fn status_for(current: Option<&EC2NodeClassStatus>, resolved: Result<EC2NodeClassStatus, &CloudError>, now: Timestamp) -> EC2NodeClassStatus {
    let mut conditions = current.and_then(|s| s.conditions.clone()).unwrap_or_default();
    set_condition_at(&mut conditions, CONDITION_VALIDATION_SUCCEEDED, "True", "ValidationSucceeded", "", now);
    match resolved {
        Ok(mut s) => {
            set_condition_at(&mut conditions, CONDITION_READY, "True", "Ready", "", now);
            s.conditions = Some(conditions);
            s
        }
        Err(e) => {
            let reason = if matches!(e, CloudError::NodeClassNotReady(_)) { "NodeClassNotReady" } else { "ResolutionFailed" };
            set_condition_at(&mut conditions, CONDITION_READY, "False", reason, &e.to_string(), now);
            // Keep what was resolved before; only readiness changes.
            let mut s = current.cloned().unwrap_or_default();
            s.conditions = Some(conditions);
            s
        }
    }
}

/// `status` with the NodeClass's `UnsupportedFields` condition, and the message of a newly reported
/// set of fields (an event is due).
pub(crate) fn with_unsupported(mut status: EC2NodeClassStatus, nc: &EC2NodeClass, now: Timestamp) -> (EC2NodeClassStatus, Option<String>) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    let (_, reported) = set_unsupported_at(&mut conditions, &stowage_input::unsupported::nodeclass(nc), now);
    status.conditions = Some(conditions);
    (status, reported)
}

/// Whether two statuses differ in anything but condition timestamps.
fn differs(a: Option<&EC2NodeClassStatus>, b: &EC2NodeClassStatus) -> bool {
    let strip = |s: &EC2NodeClassStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_transition_time = None;
        }
        s
    };
    a.map(strip) != Some(strip(b))
}

/// The hash annotations `nc` should carry, if it does not carry them yet (module doc).
pub(crate) fn stale_hash(nc: &EC2NodeClass) -> Option<BTreeMap<String, String>> {
    let mut want = BTreeMap::new();
    drift::stamp_nodeclass(nc, &mut want);
    let have = nc.metadata.annotations.as_ref();
    want.iter().any(|(k, v)| have.and_then(|a| a.get(k)) != Some(v)).then_some(want)
}

/// Writes `annotations` on the EC2NodeClass `name` (a merge patch of its metadata).
async fn write_hash<P: CloudProvider>(ctx: &Ctx<P>, api: &Api<EC2NodeClass>, name: &str, annotations: &BTreeMap<String, String>) {
    match api.patch(name, &PatchParams::default(), &Patch::Merge(&json!({ "metadata": { "annotations": annotations } }))).await {
        Ok(c) => super::lock(&ctx.state).apply(c),
        Err(e) if kube_status(&e) == Some(404) => {}
        Err(e) => {
            ctx.metrics.error(super::metrics::Stage::Cloud);
            tracing::warn!(nodeclass = %name, error = %e, "writing the EC2NodeClass hash annotations failed");
        }
    }
}

/// Resolves every NodeClass and, as leader, writes the statuses that changed. Throttling and API errors of the
/// cloud leave the status as it is (the provider keeps the last good resolution).
pub(crate) async fn reconcile_all<P: CloudProvider>(ctx: &Ctx<P>) {
    let classes: Vec<EC2NodeClass> = super::lock(&ctx.state).nodeclasses.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).cloned().collect();
    let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
    for nc in classes {
        let name = nc.metadata.name.clone().unwrap_or_default();
        if ctx.is_leader()
            && let Some(annotations) = stale_hash(&nc)
        {
            write_hash(ctx, &api, &name, &annotations).await;
        }
        let problems = invalid(&nc);
        if !problems.is_empty() {
            let (status, reported) = with_unsupported(invalid_status(nc.status.as_ref(), &problems, ctx.clock.now()), &nc, ctx.clock.now());
            if differs(nc.status.as_ref(), &status) && ctx.is_leader() {
                tracing::warn!(nodeclass = %name, problems = ?problems, "EC2NodeClass is invalid; its NodePools are not planned");
                report_unsupported(ctx, &nc, reported);
                write_status(ctx, &api, &name, &status).await;
            }
            continue;
        }
        let resolved = ctx.cloud.by(Caller::NodeClass).resolve_nodeclass(&nc).await;
        if let Err(e) = &resolved
            && !matches!(e, CloudError::NodeClassNotReady(_))
        {
            tracing::warn!(nodeclass = %name, error = %e, "resolving the EC2NodeClass failed; status left as it is");
            ctx.metrics.error(super::metrics::Stage::Cloud);
            continue;
        }
        let (status, reported) = with_unsupported(status_for(nc.status.as_ref(), resolved.as_ref().cloned(), ctx.clock.now()), &nc, ctx.clock.now());
        // Followers resolve too (their provider's cache stays warm for a takeover) but never write.
        if !differs(nc.status.as_ref(), &status) || !ctx.is_leader() {
            continue;
        }
        report_unsupported(ctx, &nc, reported);
        if let Err(e) = &resolved {
            tracing::warn!(nodeclass = %name, error = %e, "EC2NodeClass not ready; its NodePools are not planned");
        }
        write_status(ctx, &api, &name, &status).await;
    }
    collect_resources(ctx).await;
}

/// The event and the log line of a newly reported set of unsupported fields.
fn report_unsupported<P: CloudProvider>(ctx: &Ctx<P>, nc: &EC2NodeClass, reported: Option<String>) {
    if let Some(message) = reported {
        tracing::warn!(nodeclass = nc.metadata.name.as_deref().unwrap_or(""), fields = %message, "EC2NodeClass sets fields stowage does not act on");
        ctx.events.object(nc, Reason::UnsupportedField, message);
    }
}

async fn write_status<P: CloudProvider>(ctx: &Ctx<P>, api: &Api<EC2NodeClass>, name: &str, status: &EC2NodeClassStatus) {
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await {
        Ok(c) => super::lock(&ctx.state).apply(c),
        Err(e) if kube_status(&e) == Some(404) => {}
        Err(e) => {
            ctx.metrics.error(super::metrics::Stage::Cloud);
            tracing::warn!(nodeclass = %name, error = %e, "writing the EC2NodeClass status failed");
        }
    }
}

/// As leader, lets the cloud delete what it made for node classes that no EC2NodeClass uses any more
/// (instance profiles made for `spec.role`; the provider decides how often). Every EC2NodeClass is
/// passed, those being deleted included, with the statuses the watch delivered.
async fn collect_resources<P: CloudProvider>(ctx: &Ctx<P>) {
    if !ctx.is_leader() {
        return;
    }
    let all: Vec<EC2NodeClass> = super::lock(&ctx.state).nodeclasses.iter().cloned().collect();
    match ctx.cloud.by(Caller::InstanceProfileGc).collect_nodeclass_resources(&all).await {
        Ok(deleted) if !deleted.is_empty() => tracing::info!(deleted = ?deleted, "deleted cloud resources no EC2NodeClass uses"),
        Ok(_) => {}
        Err(e) => {
            ctx.metrics.error(super::metrics::Stage::Cloud);
            tracing::warn!(error = %e, "collecting unused node class resources failed; retried next round");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stowage_input::api::ec2nodeclass::{KubeletConfiguration, SubnetStatus};

    #[test]
    fn readiness_follows_resolution_and_keeps_what_was_resolved() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let ok = EC2NodeClassStatus { subnets: Some(vec![SubnetStatus { id: "subnet-1".into(), zone: "us-east-1a".into(), zone_id: None }]), ..Default::default() };
        let s = status_for(None, Ok(ok.clone()), t);
        assert_eq!(s.subnets, ok.subnets);
        assert_eq!(s.conditions.as_ref().unwrap()[0].status, "True");
        let err = CloudError::NodeClassNotReady("no subnet matches".into());
        let s2 = status_for(Some(&s), Err(&err), t);
        assert_eq!(s2.subnets, ok.subnets, "kept");
        let c = &s2.conditions.as_ref().unwrap()[0];
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("NodeClassNotReady")));
        assert!(differs(Some(&s), &s2));
        let later = Timestamp::from_second(1_800_000_100).unwrap();
        assert!(!differs(Some(&s), &status_for(Some(&s), Ok(ok), later)), "same content: no write");
        let mut nc = EC2NodeClass::new("x", Default::default());
        assert!(!crate::conditions::nodeclass_not_ready(&nc));
        nc.status = Some(s2);
        assert!(crate::conditions::nodeclass_not_ready(&nc));
    }

    #[test]
    fn unsupported_fields_are_a_condition_on_a_nodeclass_that_is_still_ready() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let mut nc = EC2NodeClass::new("x", Default::default());
        nc.spec.placement_group_selector = Some(serde_json::json!({"name": "pg"}));
        nc.spec.ip_prefix_count = Some(1);
        let (s, reported) = with_unsupported(status_for(None, Ok(EC2NodeClassStatus::default()), t), &nc, t);
        let cond = |s: &EC2NodeClassStatus, ty: &str| s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == ty).cloned();
        let u = cond(&s, "UnsupportedFields").expect("reported");
        assert_eq!(u.status, "True");
        assert_eq!(u.message.as_deref(), Some("stowage does not act on: spec.placementGroupSelector (read, not acted on); spec.ipPrefixCount (read, not acted on)"));
        assert_eq!(reported, u.message, "an event with the same text");
        assert_eq!(cond(&s, "Ready").unwrap().status, "True", "still used");
        nc.status = Some(s.clone());
        // The next round: nothing new, no write, no event.
        let (again, reported) = with_unsupported(status_for(nc.status.as_ref(), Ok(EC2NodeClassStatus::default()), t), &nc, t);
        assert!(!differs(nc.status.as_ref(), &again) && reported.is_none());
        // An invalid NodeClass keeps the report beside its validation failure.
        nc.spec.kubelet = Some(KubeletConfiguration { max_pods: Some(-1), ..Default::default() });
        let (bad, _) = with_unsupported(invalid_status(nc.status.as_ref(), &invalid(&nc), t), &nc, t);
        assert!(cond(&bad, "UnsupportedFields").is_some() && cond(&bad, "Ready").unwrap().status == "False");
        // Fields removed: the condition goes.
        nc.spec.placement_group_selector = None;
        nc.spec.ip_prefix_count = None;
        let (fixed, reported) = with_unsupported(status_for(nc.status.as_ref(), Ok(EC2NodeClassStatus::default()), t), &nc, t);
        assert!(cond(&fixed, "UnsupportedFields").is_none() && reported.is_none());
        assert!(differs(nc.status.as_ref(), &fixed), "written");
    }

    #[test]
    fn the_hash_annotations_are_written_until_they_are_current() {
        let mut nc = EC2NodeClass::new("x", Default::default());
        let want = stale_hash(&nc).expect("none yet");
        assert_eq!(want.get(drift::EC2NODECLASS_HASH_VERSION).map(String::as_str), Some(drift::HASH_VERSION));
        assert_eq!(want.get(drift::EC2NODECLASS_HASH), Some(&drift::nodeclass_hash(&nc)));
        // Karpenter's own annotations (its hash version) are replaced by stowage's.
        nc.metadata.annotations = Some([(drift::EC2NODECLASS_HASH.to_string(), "123".to_string()), (drift::EC2NODECLASS_HASH_VERSION.to_string(), "v5".to_string())].into());
        assert_eq!(stale_hash(&nc), Some(want.clone()));
        nc.metadata.annotations.as_mut().unwrap().extend(want);
        assert_eq!(stale_hash(&nc), None, "current: no write");
        nc.spec.user_data = Some("#!/bin/sh\n".into());
        assert!(stale_hash(&nc).is_some_and(|w| w.get(drift::EC2NODECLASS_HASH) != nc.metadata.annotations.as_ref().unwrap().get(drift::EC2NODECLASS_HASH)), "a changed userData changes the hash");
    }

    #[test]
    fn an_invalid_kubelet_configuration_is_a_condition_not_a_launch_failure() {
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        let mut nc = EC2NodeClass::new("x", Default::default());
        assert!(invalid(&nc).is_empty());
        nc.spec.kubelet = Some(KubeletConfiguration {
            eviction_soft: Some([("memory.available".to_string(), "10%".to_string())].into_iter().collect()),
            image_gc_high_threshold_percent: Some(50),
            image_gc_low_threshold_percent: Some(60),
            ..Default::default()
        });
        let problems = invalid(&nc);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("imageGCHighThresholdPercent (50) must be greater"), "{problems:?}");
        assert!(problems[1].contains("evictionSoft.memory.available has no evictionSoftGracePeriod"), "{problems:?}");
        let ok = status_for(None, Ok(EC2NodeClassStatus::default()), t);
        let s = invalid_status(Some(&ok), &problems, t);
        let cond = |ty: &str| s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == ty).cloned().unwrap();
        assert_eq!((cond("ValidationSucceeded").status.as_str(), cond("ValidationSucceeded").reason.as_deref()), ("False", Some("InvalidKubeletConfiguration")));
        assert!(cond("ValidationSucceeded").message.unwrap().contains("evictionSoftGracePeriod"));
        assert_eq!(cond("Ready").status, "False");
        nc.status = Some(s);
        assert!(crate::conditions::nodeclass_not_ready(&nc), "its NodePools are left out of planning");
        let fixed = status_for(nc.status.as_ref(), Ok(EC2NodeClassStatus::default()), t);
        assert!(fixed.conditions.unwrap().iter().all(|c| c.status == "True"));
    }
}
