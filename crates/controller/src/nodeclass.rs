//! EC2NodeClass readiness: each NodeClass is resolved by the cloud (subnets, security groups, AMIs;
//! [`CloudProvider::resolve_nodeclass`], cached by the provider) and the result written to its status
//! with a `Ready` condition. A NodeClass that does not resolve gets `Ready=False` with the reason, and
//! the NodePools that use it are left out of planning (`state::planning_objects`), as Karpenter skips
//! NodePools whose NodeClass is not ready. Status is written only when it changes.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::conditions::{CONDITION_READY, set_condition_at};
use super::{Ctx, kube_status};
use stowage_decide::cloud::{CloudError, CloudProvider};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

/// The status a resolution gives a NodeClass (conditions keep their transition times).
pub(crate) fn status_for(current: Option<&EC2NodeClassStatus>, resolved: Result<EC2NodeClassStatus, &CloudError>, now: Timestamp) -> EC2NodeClassStatus {
    let mut conditions = current.and_then(|s| s.conditions.clone()).unwrap_or_default();
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

/// Resolves every NodeClass and, as leader, writes the statuses that changed. Throttling and API errors of the
/// cloud leave the status as it is (the provider keeps the last good resolution).
pub(crate) async fn reconcile_all<P: CloudProvider>(ctx: &Ctx<P>) {
    let classes: Vec<EC2NodeClass> = super::lock(&ctx.state).nodeclasses.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).cloned().collect();
    let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
    for nc in classes {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let resolved = ctx.cloud.resolve_nodeclass(&nc).await;
        if let Err(e) = &resolved
            && !matches!(e, CloudError::NodeClassNotReady(_))
        {
            tracing::warn!(nodeclass = %name, error = %e, "resolving the EC2NodeClass failed; status left as it is");
            ctx.metrics.error(super::metrics::Stage::Cloud);
            continue;
        }
        let status = status_for(nc.status.as_ref(), resolved.as_ref().cloned(), ctx.clock.now());
        // Followers resolve too (their provider's cache stays warm for a takeover) but never write.
        if !differs(nc.status.as_ref(), &status) || !ctx.is_leader() {
            continue;
        }
        if let Err(e) = &resolved {
            tracing::warn!(nodeclass = %name, error = %e, "EC2NodeClass not ready; its NodePools are not planned");
        }
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await {
            Ok(c) => super::lock(&ctx.state).apply(c),
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                ctx.metrics.error(super::metrics::Stage::Cloud);
                tracing::warn!(nodeclass = %name, error = %e, "writing the EC2NodeClass status failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stowage_input::api::ec2nodeclass::SubnetStatus;

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
}
