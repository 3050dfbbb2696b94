//! Registration and initialization of a NodeClaim's Node (Karpenter's `nodeclaim/lifecycle`, aws.md §9),
//! and what the shared lifecycle decision (`stowage_decide::lifecycle`) observes of a NodeClaim.
//!
//! - **Registration**: the Node whose `spec.providerID` equals the NodeClaim's is adopted: finalizer
//!   `karpenter.sh/termination`, an owner reference to the NodeClaim, the NodeClaim's labels (with every
//!   single-valued `In` requirement) and taints synced onto it, `karpenter.sh/unregistered` removed,
//!   label `karpenter.sh/registered=true`; the NodeClaim gets `status.nodeName` and `Registered=True`,
//!   and the instance is tagged.
//! - **Initialization**: once the Node is Ready and its startup taints are gone, label
//!   `karpenter.sh/initialized=true`, conditions `Initialized=True` and `Ready=True`.
//!
//! [`observe`] turns a NodeClaim and its Node into the decision's input; the NodeClaim controller
//! (lifecycle.rs) decides and calls [`register`] and [`initialize`]. Node writes carry the resource
//! version they were computed from, so a concurrent change makes them fail (409) and the NodeClaim is
//! reconciled again with a fresh copy rather than overwrite it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::Ctx;
use super::cloud_metrics::Caller;
use super::conditions::{CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED, condition, set_condition_at};
use super::events::Reason;
use super::metrics::{Stage, claim_label};
use super::state::{INITIALIZED_LABEL, REGISTERED_LABEL, TERMINATION_FINALIZER};
use stowage_core::domain::labels::keys;
use stowage_core::domain::taints::well_known;
use stowage_decide::cloud::CloudProvider;
use stowage_decide::launch::claim_labels;
use stowage_decide::lifecycle::{Decision, NodeSeen, Observed};
pub use stowage_decide::lifecycle::{Step, Timeouts};
use stowage_input::api::NodeClaim;

fn is_true(claim: &NodeClaim, type_: &str) -> bool {
    condition(claim, type_).is_some_and(|c| c.status == "True")
}

/// When the NodeClaim launched: its `Launched=True` transition, else its creation; `None` while it
/// has no provider id.
fn launched_at(claim: &NodeClaim) -> Option<Timestamp> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|p| !p.is_empty())?;
    condition(claim, CONDITION_LAUNCHED)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok())
        .or_else(|| claim.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn node_labels(n: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    n.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

fn node_taints(n: &Node) -> &[Taint] {
    n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
}

/// The Node carries everything registration gives it, and the NodeClaim says so.
pub(crate) fn is_registered(claim: &NodeClaim, node: &Node) -> bool {
    let name = node.metadata.name.as_deref();
    node_labels(node).get(REGISTERED_LABEL).is_some_and(|v| v == "true")
        && !node_taints(node).iter().any(|t| t.key == well_known::KARPENTER_UNREGISTERED)
        && node.metadata.finalizers.iter().flatten().any(|f| f == TERMINATION_FINALIZER)
        && is_true(claim, CONDITION_REGISTERED)
        && claim.status.as_ref().and_then(|s| s.node_name.as_deref()) == name
}

/// Ready, and none of the NodeClaim's startup taints (nor a not-ready taint) left.
pub(crate) fn is_ready_for_pods(claim: &NodeClaim, node: &Node) -> bool {
    let ready = node.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    let startup: Vec<&str> = claim.spec.startup_taints.iter().flatten().map(|t| t.key.as_str()).collect();
    let blocked = node_taints(node)
        .iter()
        .any(|t| startup.contains(&t.key.as_str()) || t.key == well_known::NOT_READY || t.key == well_known::UNREACHABLE || t.key == "node.cloudprovider.kubernetes.io/uninitialized");
    ready && !blocked
}

pub(crate) fn is_initialized(claim: &NodeClaim, node: &Node) -> bool {
    is_true(claim, CONDITION_INITIALIZED) && node_labels(node).get(INITIALIZED_LABEL).is_some_and(|v| v == "true")
}

/// What the lifecycle decision sees of a NodeClaim, its Node (found by provider id) and whether the
/// cloud lost its instance.
pub(crate) fn observe(claim: &NodeClaim, node: Option<&Node>, instance_gone: bool) -> Observed<Timestamp> {
    Observed {
        created: claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
        deleting: claim.metadata.deletion_timestamp.is_some(),
        finalizer: claim.metadata.finalizers.iter().flatten().any(|f| f == TERMINATION_FINALIZER),
        launched: launched_at(claim),
        instance_gone,
        node: node.map(|n| NodeSeen {
            name: n.metadata.name.clone().unwrap_or_default(),
            deleting: n.metadata.deletion_timestamp.is_some(),
            registered: is_registered(claim, n),
            ready: is_ready_for_pods(claim, n),
            initialized: is_initialized(claim, n),
        }),
    }
}

/// The shared lifecycle decision on the controller's objects: a NodeClaim, its Node and whether its
/// instance is gone, at `now` (the controller's clock).
pub fn decision(claim: &NodeClaim, node: Option<&Node>, instance_gone: bool, now: Timestamp, timeouts: &Timeouts) -> Decision<Timestamp> {
    stowage_decide::lifecycle::decide(&observe(claim, node, instance_gone), now, timeouts)
}

/// The next step of a NodeClaim at `now`.
pub fn step(claim: &NodeClaim, node: Option<&Node>, now: Timestamp, timeouts: &Timeouts) -> Step {
    decision(claim, node, false, now, timeouts).step
}

/// The merge patch that adopts a Node: labels, finalizer, owner reference, taints; with the resource
/// version it was computed from.
pub(crate) fn registration_patch(claim: &NodeClaim, node: &Node) -> serde_json::Value {
    let mut labels = claim_labels(claim);
    labels.remove(keys::HOSTNAME);
    labels.insert(REGISTERED_LABEL.into(), "true".into());
    let mut finalizers: Vec<String> = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.into());
    }
    let mut owners: Vec<OwnerReference> = node.metadata.owner_references.clone().unwrap_or_default();
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    if !owners.iter().any(|o| o.uid == uid) {
        owners.push(OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodeClaim".into(),
            name: claim.metadata.name.clone().unwrap_or_default(),
            uid,
            block_owner_deletion: Some(true),
            controller: None,
        });
    }
    let mut taints: Vec<Taint> = node_taints(node).iter().filter(|t| t.key != well_known::KARPENTER_UNREGISTERED).cloned().collect();
    for t in claim.spec.taints.iter().flatten().chain(claim.spec.startup_taints.iter().flatten()) {
        if !taints.iter().any(|x| x.key == t.key && x.effect == t.effect) {
            taints.push(t.clone());
        }
    }
    json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "labels": labels,
            "finalizers": finalizers,
            "ownerReferences": owners,
        },
        "spec": { "taints": taints },
    })
}

/// An API call of registration or initialization failed (a 409 conflict included: someone changed the
/// object since it was read, usually the kubelet's first status updates). The NodeClaim is reconciled
/// again, with backoff, from a fresh copy.
#[derive(Debug, thiserror::Error)]
#[error("NodeClaim {claim}: {what}: {error}")]
pub struct RegistrationError {
    pub claim: String,
    pub what: String,
    #[source]
    pub error: kube::Error,
}

/// Adopts the NodeClaim's Node and marks the NodeClaim registered.
pub(crate) async fn register<P: CloudProvider>(ctx: &Ctx<P>, claim: &NodeClaim, node: &Node) -> Result<(), RegistrationError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let kube_err = |what: String, error: kube::Error| RegistrationError { claim: name.clone(), what, error };
    let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let patch = registration_patch(claim, node);
    let n = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| kube_err(format!("adopting Node {node_name}"), e))?;
    super::lock(&ctx.state).apply(n);
    let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    set_condition_at(&mut conditions, CONDITION_REGISTERED, "True", "Registered", &format!("Node {node_name} registered"), ctx.clock.now());
    let status = json!({ "status": { "nodeName": node_name, "conditions": conditions } });
    let c = claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.map_err(|e| kube_err("writing Registered".into(), e))?;
    super::lock(&ctx.state).apply(c);
    if let Some(pid) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
        && let Err(e) = ctx.cloud.by(Caller::Tagging).tag_registered(pid, &name, &node_name).await
    {
        // Tags are informational (GC matches instances by provider id); never block registration.
        tracing::warn!(nodeclaim = %name, error = %e, "tagging the registered instance failed");
        ctx.metrics.error(Stage::Register);
    }
    tracing::info!(nodeclaim = %name, node = %node_name, "registered");
    ctx.events.nodeclaim(claim, Reason::Registered, format!("Node {node_name} registered"));
    ctx.metrics.registered(claim_label(Some(claim), keys::NODEPOOL), claim_label(Some(claim), keys::ZONE));
    Ok(())
}

/// Marks a registered Node that is ready for pods initialized, on the Node and the NodeClaim.
pub(crate) async fn initialize<P: CloudProvider>(ctx: &Ctx<P>, claim: &NodeClaim, node_name: &str) -> Result<(), RegistrationError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let kube_err = |what: String, error: kube::Error| RegistrationError { claim: name.clone(), what, error };
    let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let patch = json!({ "metadata": { "labels": { INITIALIZED_LABEL: "true" } } });
    let n = nodes.patch(node_name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| kube_err(format!("labelling Node {node_name} initialized"), e))?;
    super::lock(&ctx.state).apply(n);
    let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let now = ctx.clock.now();
    set_condition_at(&mut conditions, CONDITION_INITIALIZED, "True", "Initialized", &format!("Node {node_name} is ready"), now);
    set_condition_at(&mut conditions, CONDITION_READY, "True", "Ready", "", now);
    let status = json!({ "status": { "conditions": conditions } });
    let c = claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.map_err(|e| kube_err("writing Initialized".into(), e))?;
    super::lock(&ctx.state).apply(c);
    ctx.events.nodeclaim(claim, Reason::Initialized, format!("Node {node_name} initialized"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{set_condition_at, timestamp};
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::time::Duration;
    use stowage_input::api::{NodeClaimSpec, NodeClaimStatus, NodeSelectorRequirementWithMinValues};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn claim(created: i64) -> NodeClaim {
        let mut c = NodeClaim::new(
            "np-a",
            NodeClaimSpec {
                requirements: vec![NodeSelectorRequirementWithMinValues { key: keys::ZONE.into(), operator: "In".into(), values: vec!["us-east-1a".into()], min_values: None }],
                taints: Some(vec![Taint { key: "team".into(), value: Some("a".into()), effect: "NoSchedule".into(), time_added: None }]),
                startup_taints: Some(vec![Taint { key: "agent-not-ready".into(), effect: "NoSchedule".into(), ..Default::default() }]),
                ..Default::default()
            },
        );
        c.metadata.uid = Some("uid-np-a".into());
        c.metadata.creation_timestamp = Some(Time(t(created)));
        c.metadata.finalizers = Some(vec![TERMINATION_FINALIZER.into()]);
        c.metadata.labels = Some([(keys::NODEPOOL.to_string(), "np".to_string())].into());
        c
    }

    fn launched(mut c: NodeClaim, at: i64) -> NodeClaim {
        let mut conditions = Vec::new();
        set_condition_at(&mut conditions, CONDITION_LAUNCHED, "True", "Launched", "", t(at));
        c.status = Some(NodeClaimStatus { provider_id: Some("aws:///us-east-1a/i-1".into()), conditions: Some(conditions), ..Default::default() });
        c
    }

    fn node(taints: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta { name: Some("ip-10-0-1-4.ec2.internal".into()), resource_version: Some("42".into()), ..Default::default() },
            spec: Some(NodeSpec {
                provider_id: Some("aws:///us-east-1a/i-1".into()),
                taints: Some(taints.iter().map(|k| Taint { key: k.to_string(), effect: "NoSchedule".into(), ..Default::default() }).collect()),
                ..Default::default()
            }),
            status: Some(NodeStatus { conditions: Some(vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]), ..Default::default() }),
        }
    }

    #[test]
    fn launch_and_registration_timeouts() {
        let to = Timeouts { launch: Duration::from_secs(300), registration: Duration::from_secs(900) };
        assert_eq!(step(&claim(0), None, t(299), &to), Step::Launch);
        assert_eq!(step(&claim(0), None, t(300), &to), Step::LaunchTimeout { age: Duration::from_secs(300) });
        let c = launched(claim(0), 100);
        assert_eq!(step(&c, None, t(999), &to), Step::AwaitNode, "registration is timed from the launch, not the creation");
        assert_eq!(step(&c, None, t(1000), &to), Step::RegistrationTimeout { since_launch: Duration::from_secs(900) });
        let mut deleting = c.clone();
        deleting.metadata.deletion_timestamp = Some(Time(t(5)));
        assert_eq!(step(&deleting, None, t(10), &to), Step::Terminate);
        deleting.metadata.finalizers = None;
        assert_eq!(step(&deleting, None, t(10), &to), Step::Nothing);
    }

    #[test]
    fn registration_adopts_the_node_then_initialization_waits_for_startup_taints() {
        let to = Timeouts::default();
        let c = launched(claim(0), 1);
        let n = node(&[well_known::KARPENTER_UNREGISTERED, "agent-not-ready"]);
        assert_eq!(step(&c, Some(&n), t(5), &to), Step::Register { node: "ip-10-0-1-4.ec2.internal".into() });

        let patch = registration_patch(&c, &n);
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["metadata"]["labels"][REGISTERED_LABEL], "true");
        assert_eq!(patch["metadata"]["labels"][keys::ZONE], "us-east-1a", "single-valued requirements become labels");
        assert_eq!(patch["metadata"]["labels"][keys::NODEPOOL], "np");
        assert_eq!(patch["metadata"]["finalizers"], json!([TERMINATION_FINALIZER]));
        assert_eq!(patch["metadata"]["ownerReferences"][0]["kind"], "NodeClaim");
        let taints: Vec<&str> = patch["spec"]["taints"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(taints, vec!["agent-not-ready", "team"], "unregistered removed, the NodeClaim's taints added once");

        // Apply the patch and the status by hand: registered, not yet initialized (startup taint).
        let mut n2 = n.clone();
        n2.metadata.labels = Some(serde_json::from_value(patch["metadata"]["labels"].clone()).unwrap());
        n2.metadata.finalizers = Some(vec![TERMINATION_FINALIZER.into()]);
        n2.spec.as_mut().unwrap().taints = Some(serde_json::from_value(patch["spec"]["taints"].clone()).unwrap());
        let mut c2 = c.clone();
        let st = c2.status.as_mut().unwrap();
        st.node_name = Some("ip-10-0-1-4.ec2.internal".into());
        set_condition_at(st.conditions.as_mut().unwrap(), CONDITION_REGISTERED, "True", "Registered", "", t(6));
        assert!(is_registered(&c2, &n2));
        assert_eq!(step(&c2, Some(&n2), t(7), &to), Step::AwaitInitialization, "the startup taint is still there");
        n2.spec.as_mut().unwrap().taints.as_mut().unwrap().retain(|t| t.key != "agent-not-ready");
        assert_eq!(step(&c2, Some(&n2), t(8), &to), Step::Initialize { node: "ip-10-0-1-4.ec2.internal".into() });
    }

    #[test]
    fn conditions_keep_their_transition_time_while_unchanged() {
        let mut cs = Vec::new();
        set_condition_at(&mut cs, "Launched", "Unknown", "Throttled", "", t(1));
        set_condition_at(&mut cs, "Launched", "Unknown", "Throttled", "again", t(5));
        assert_eq!(cs[0].last_transition_time.as_deref(), Some(timestamp(t(1)).as_str()));
        set_condition_at(&mut cs, "Launched", "True", "Launched", "", t(9));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].last_transition_time.as_deref(), Some(timestamp(t(9)).as_str()));
        assert_eq!(timestamp(t(9)).parse::<Timestamp>().unwrap(), t(9));
    }
}
