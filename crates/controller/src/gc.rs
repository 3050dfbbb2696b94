//! Garbage collection between the cloud and the API server (Karpenter's `nodeclaim/garbagecollection`).
//!
//! - An instance the cloud lists for this controller (by tags) that no NodeClaim tracks (no NodeClaim has
//!   its provider id, and no NodeClaim still launching carries its name in the instance's
//!   `karpenter.sh/nodeclaim` tag) is terminated once it is older than the grace period (30 s by
//!   default), which covers a launch whose NodeClaim status is not written yet.
//! - A launched NodeClaim whose instance is gone (not listed, or shutting down / terminated) for longer
//!   than the grace period since its launch is deleted; its termination finds nothing to terminate.
//!
//! Together with the launcher's invariants this keeps "every instance is tracked by a NodeClaim or
//! garbage-collected". [`decide`] is pure; the loop runs only as leader, on a synced state and on a
//! complete instance list.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use stowage_decide::cloud::Instance;
use stowage_input::api::NodeClaim;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcActions {
    /// Provider ids of leaked instances.
    pub terminate: Vec<String>,
    /// NodeClaims whose instance vanished.
    pub delete: Vec<String>,
}

fn gone(state: &str) -> bool {
    matches!(state, "shutting-down" | "terminated")
}

fn age(now: Timestamp, then: Timestamp) -> Duration {
    Duration::from_millis((now.as_millisecond() - then.as_millisecond()).max(0) as u64)
}

/// Decides what to collect. `launching` holds NodeClaims whose launch is running in this process.
pub fn decide(instances: &[Instance], claims: &[NodeClaim], launching: &BTreeSet<String>, now: Timestamp, grace: Duration) -> GcActions {
    let mut out = GcActions::default();
    let tracked: BTreeMap<&str, &NodeClaim> = claims.iter().filter_map(|c| Some((c.status.as_ref()?.provider_id.as_deref().filter(|p| !p.is_empty())?, c))).collect();
    let unlaunched: BTreeSet<&str> = claims.iter().filter(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()).is_none_or(str::is_empty)).filter_map(|c| c.metadata.name.as_deref()).collect();
    for i in instances {
        if gone(&i.state) || tracked.contains_key(i.provider_id.as_str()) {
            continue;
        }
        // Still being launched (or relaunched after a crash): the launcher will record it.
        if i.nodeclaim.as_deref().is_some_and(|n| unlaunched.contains(n) || launching.contains(n)) {
            continue;
        }
        let launched = Timestamp::from_second(i.launched_at).unwrap_or(now);
        if age(now, launched) >= grace {
            out.terminate.push(i.provider_id.clone());
        }
    }
    let live: BTreeSet<&str> = instances.iter().filter(|i| !gone(&i.state)).map(|i| i.provider_id.as_str()).collect();
    for (pid, c) in &tracked {
        if live.contains(pid) || c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = c.metadata.name.clone().unwrap_or_default();
        if launching.contains(&name) {
            continue;
        }
        let launched = super::conditions::condition(c, super::conditions::CONDITION_LAUNCHED)
            .and_then(|c| c.last_transition_time.as_deref())
            .and_then(|t| t.parse::<Timestamp>().ok())
            .or_else(|| c.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .unwrap_or(now);
        if age(now, launched) >= grace {
            out.delete.push(name);
        }
    }
    out.terminate.sort();
    out.delete.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use stowage_input::api::{NodeClaimSpec, NodeClaimStatus};

    const T0: i64 = 1_800_000_000;

    fn inst(id: &str, state: &str, launched: i64, claim: Option<&str>) -> Instance {
        Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
            state: state.into(),
            nodepool: Some("np".into()),
            nodeclaim: claim.map(str::to_string),
            launched_at: T0 + launched,
            image_id: None,
            subnet_id: None,
            security_group_ids: None,
            capacity_reservation_id: None,
        }
    }

    fn claim(name: &str, pid: Option<&str>, created: i64) -> NodeClaim {
        let mut c = NodeClaim::new(name, NodeClaimSpec::default());
        c.metadata.creation_timestamp = Some(Time(Timestamp::from_second(T0 + created).unwrap()));
        c.status = pid.map(|p| NodeClaimStatus { provider_id: Some(format!("aws:///us-east-1a/{p}")), ..Default::default() });
        c
    }

    fn now(s: i64) -> Timestamp {
        Timestamp::from_second(T0 + s).unwrap()
    }

    #[test]
    fn leaked_instances_are_terminated_after_the_grace_period() {
        let instances = vec![inst("i-tracked", "running", 0, None), inst("i-leak", "running", 0, None), inst("i-new", "pending", 50, None), inst("i-dead", "terminated", 0, None)];
        let claims = vec![claim("a", Some("i-tracked"), 0)];
        let g = decide(&instances, &claims, &BTreeSet::new(), now(60), Duration::from_secs(30));
        assert_eq!(g.terminate, vec!["aws:///us-east-1a/i-leak"]);
        assert!(g.delete.is_empty());
    }

    #[test]
    fn an_instance_whose_nodeclaim_is_still_launching_is_kept() {
        let instances = vec![inst("i-1", "running", 0, Some("b")), inst("i-2", "running", 0, Some("c"))];
        let claims = vec![claim("b", None, 0)];
        let launching: BTreeSet<String> = ["c".to_string()].into();
        let g = decide(&instances, &claims, &launching, now(600), Duration::from_secs(30));
        assert!(g.terminate.is_empty(), "{g:?}");
        // Without its NodeClaim it is a leak.
        let g = decide(&instances, &[], &BTreeSet::new(), now(600), Duration::from_secs(30));
        assert_eq!(g.terminate.len(), 2);
    }

    #[test]
    fn nodeclaims_whose_instance_vanished_are_deleted() {
        let instances = vec![inst("i-1", "terminated", 0, None)];
        let claims = vec![claim("a", Some("i-1"), 0), claim("b", Some("i-2"), 100), claim("c", None, 0)];
        let g = decide(&instances, &claims, &BTreeSet::new(), now(120), Duration::from_secs(30));
        assert_eq!(g.delete, vec!["a"], "b launched too recently; c never launched (the launch timeout handles it)");
    }
}
