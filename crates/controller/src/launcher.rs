//! Launching a NodeClaim's instance through the [`CloudProvider`], and the cache of offerings the
//! cloud refused.
//!
//! Invariants:
//! - **A NodeClaim exists before its instance.** Only NodeClaims read back from the API server are
//!   launched, so every instance is tracked by a NodeClaim from the moment it is requested (or, if the
//!   process dies between the two, found by garbage collection).
//! - **Nothing is launched twice.** At most one launch per NodeClaim runs in this process (`launching`
//!   set), and the provider's launch is idempotent per NodeClaim name, so a launch retried after a crash
//!   or an API error adopts the instance of the first attempt instead of starting another.
//! - **Labels before providerID.** The instance's labels (type, zone, capacity type, the type's catalog
//!   labels) are written to the NodeClaim before `status.providerID`: a kubelet registers its Node with
//!   the labels the NodeClaim has when it finds its provider id.
//! - An insufficient-capacity error marks the refused offerings unavailable for `unavailable_ttl`
//!   (3 minutes, as Karpenter's cache), deletes the NodeClaim and asks for a new batch, which plans
//!   those pods again without the refused offerings.

use std::time::Duration;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

use super::cloud_metrics::Caller;
use super::conditions::{CONDITION_LAUNCHED, set_condition};
use super::events::Reason;
use super::metrics::Stage;
use super::state::quantities;
use super::{Ctx, kube_status};
use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{CloudError, CloudProvider, Instance, LaunchRequest};
use stowage_decide::launch::{self, RequestError, instance_labels};
use stowage_input::api::{EC2NodeClass, NodeClaim};

/// The refused-offering cache on the controller's clock (`stowage_decide::offerings`, which the
/// simulator runs too).
pub type Unavailable = stowage_decide::offerings::Unavailable<Instant>;
pub use stowage_decide::offerings::OfferingKey;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The NodeClaim's requirements cannot be read; it is deleted (nothing was launched).
    #[error("NodeClaim {claim}: {message}")]
    InvalidClaim { claim: String, message: String },
    /// No offering of the catalog satisfies the NodeClaim now (all refused recently, or none match); it is
    /// deleted and its pods planned again.
    #[error("NodeClaim {claim}: no available offering satisfies its requirements")]
    NoOffering { claim: String },
    /// The cloud refused; what to do depends on the kind (see [`CloudError`]).
    #[error("NodeClaim {claim}: launch failed: {error}")]
    Cloud { claim: String, error: CloudError },
    /// Writing the result to the API server failed; the launch is retried (idempotent) on the next tick.
    #[error("NodeClaim {claim}: {what}: {error}")]
    Kube { claim: String, what: String, error: kube::Error },
}

/// The catalog as a node class sees it (capacity and overhead for its AMI family and kubelet settings),
/// as the planner sized the node.
fn nodeclass_view(catalog: &Catalog, nodeclass: Option<&EC2NodeClass>) -> Catalog {
    let src = stowage_input::Source { file: "<cluster>".into(), doc: 0, item: None };
    let domain = nodeclass.and_then(|nc| stowage_input::karpenter::nodeclass(&stowage_input::objects::Obj { source: src, obj: nc.clone() }).ok());
    match domain {
        Some(d) => stowage_core::catalog::for_nodeclass(catalog, &d),
        None => catalog.clone(),
    }
}

/// The launch request for a NodeClaim (`stowage_decide::launch`, which the simulator runs too), with
/// the offerings refused recently left out.
pub(crate) fn launch_request(claim: &NodeClaim, catalog: &Catalog, nodeclass: Option<&EC2NodeClass>, unavailable: &Unavailable, now: Instant) -> Result<LaunchRequest, LaunchError> {
    launch::launch_request(claim, &unavailable.view(catalog, now), nodeclass).map_err(|e| match e {
        RequestError::InvalidClaim { claim, message } => LaunchError::InvalidClaim { claim, message },
        RequestError::NoOffering { claim } => LaunchError::NoOffering { claim },
    })
}

/// What a launch attempt did.
#[derive(Debug, PartialEq, Eq)]
pub enum Launched {
    /// The instance runs and the NodeClaim says so.
    Done { provider_id: String },
    /// Another launch of this NodeClaim is running, or it needs none any more.
    Skipped,
    /// The offerings were refused: the NodeClaim was deleted and a new batch requested.
    Refused,
    /// A retryable failure; the next attempt waits until the backoff has passed.
    Retry { after: Duration },
}

/// Removes a NodeClaim from the `launching` set when the launch ends, however it ends.
struct LaunchGuard<'a> {
    set: &'a std::sync::Mutex<std::collections::BTreeSet<String>>,
    name: String,
}

impl Drop for LaunchGuard<'_> {
    fn drop(&mut self) {
        super::lock(self.set).remove(&self.name);
    }
}

/// Launches one NodeClaim if it needs it. Errors that leave the NodeClaim as it was are returned for the
/// caller to count and retry; capacity errors are handled here.
pub async fn launch<P: CloudProvider>(ctx: &Ctx<P>, name: &str) -> Result<Launched, LaunchError> {
    if !super::lock(&ctx.launching).insert(name.to_string()) {
        return Ok(Launched::Skipped);
    }
    let _guard = LaunchGuard { set: &ctx.launching, name: name.to_string() };
    let (claim, nodeclass) = {
        let s = super::lock(&ctx.state);
        let Some(c) = s.nodeclaim(name).cloned() else { return Ok(Launched::Skipped) };
        let nc = s.nodeclasses.get("", &c.spec.node_class_ref.name).cloned();
        (c, nc)
    };
    let launched = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()).is_some_and(|p| !p.is_empty());
    if launched || claim.metadata.deletion_timestamp.is_some() {
        return Ok(Launched::Skipped);
    }
    let catalog = match ctx.catalog(Caller::Lifecycle).await {
        Ok(c) => nodeclass_view(&c, nodeclass.as_ref()),
        Err(error) => {
            tracing::warn!(nodeclaim = name, %error, "no catalog from the cloud yet; launch retried");
            return Ok(Launched::Retry { after: Duration::from_secs(5) });
        }
    };
    let now = Instant::now();
    let req = {
        let unavailable = super::lock(&ctx.unavailable);
        launch_request(&claim, &catalog, nodeclass.as_ref(), &unavailable, now)
    };
    let req = match req {
        Ok(r) => r,
        Err(LaunchError::NoOffering { .. }) => {
            ctx.events.nodeclaim(&claim, Reason::InsufficientCapacity, "every offering the NodeClaim allows was refused recently or is unavailable; planning its pods again".into());
            delete_claim(ctx, &claim).await?;
            ctx.request_batch("replan/no-offering");
            ctx.metrics.launch("insufficient_capacity");
            return Ok(Launched::Refused);
        }
        Err(e @ LaunchError::InvalidClaim { .. }) => {
            ctx.events.nodeclaim(&claim, Reason::LaunchFailed, e.to_string());
            delete_claim(ctx, &claim).await?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    tracing::info!(nodeclaim = name, offerings = req.offerings.len(), first = ?req.offerings.first(), "launching");
    let result = ctx.cloud.by(Caller::Lifecycle).launch(&req).await;
    match result {
        Ok(instance) => record_launch(ctx, &claim, &instance, &catalog).await,
        Err(CloudError::InsufficientCapacity { offerings, message }) => {
            let refused = if offerings.is_empty() { req.offerings.clone() } else { offerings };
            let until = Instant::now() + ctx.config.unavailable_ttl;
            {
                let mut u = super::lock(&ctx.unavailable);
                for o in &refused {
                    u.mark((o.instance_type.clone(), o.zone.clone(), o.capacity_type.clone()), until);
                }
            }
            let which: Vec<String> = refused.iter().map(|o| format!("{} {} {}", o.instance_type, o.zone, o.capacity_type)).collect();
            tracing::warn!(nodeclaim = name, refused = ?which, %message, "insufficient capacity; offerings marked unavailable, pods planned again");
            ctx.events.nodeclaim(&claim, Reason::InsufficientCapacity, format!("insufficient capacity for {}: {message}", which.join(", ")));
            ctx.metrics.launch("insufficient_capacity");
            delete_claim(ctx, &claim).await?;
            ctx.request_batch("replan/insufficient-capacity");
            Ok(Launched::Refused)
        }
        Err(error) => {
            let retryable = error.retryable();
            let after = if retryable { Duration::from_secs(2) } else { Duration::from_secs(10) };
            let reason = match &error {
                CloudError::NodeClassNotReady(_) => "NodeClassNotReady",
                CloudError::Throttled(_) => "Throttled",
                _ => "LaunchFailed",
            };
            ctx.metrics.launch("error");
            ctx.metrics.error(Stage::Launch);
            ctx.events.nodeclaim(&claim, Reason::LaunchFailed, format!("{reason}: {error}"));
            tracing::warn!(nodeclaim = name, %error, retryable, "launch failed; will retry until the launch timeout");
            let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            set_condition(&mut conditions, CONDITION_LAUNCHED, "Unknown", reason, &error.to_string());
            let patch = json!({ "status": { "conditions": conditions } });
            let api: Api<NodeClaim> = Api::all(ctx.client.clone());
            if let Ok(c) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                super::lock(&ctx.state).apply(c);
            }
            Ok(Launched::Retry { after })
        }
    }
}

/// Writes a launched instance to its NodeClaim: labels first, then status. If the NodeClaim vanished
/// meanwhile, the instance is terminated at once.
async fn record_launch<P: CloudProvider>(ctx: &Ctx<P>, claim: &NodeClaim, instance: &Instance, catalog: &Catalog) -> Result<Launched, LaunchError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let kube_err = |what: &str, error: kube::Error| LaunchError::Kube { claim: name.clone(), what: what.into(), error };
    let labels = instance_labels(instance, catalog);
    let label_patch = json!({ "metadata": { "labels": labels } });
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&label_patch)).await {
        Ok(c) => super::lock(&ctx.state).apply(c),
        Err(e) if kube_status(&e) == Some(404) => return orphaned(ctx, &name, instance).await,
        Err(e) => return Err(kube_err("writing the instance's labels", e)),
    }
    let (capacity, allocatable) = match catalog.get(&instance.instance_type) {
        Some(t) => (quantities(&t.capacity), quantities(&t.allocatable())),
        None => (Default::default(), Default::default()),
    };
    let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conditions, CONDITION_LAUNCHED, "True", "Launched", &format!("{} {} {} ({})", instance.instance_type, instance.zone, instance.capacity_type, instance.id));
    let status = json!({ "status": {
        "providerID": instance.provider_id,
        "imageID": instance.image_id,
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions,
    }});
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
        Ok(c) => super::lock(&ctx.state).apply(c),
        Err(e) if kube_status(&e) == Some(404) => return orphaned(ctx, &name, instance).await,
        Err(e) => return Err(kube_err("writing status.providerID", e)),
    }
    tracing::info!(nodeclaim = %name, instance = %instance.id, instance_type = %instance.instance_type, zone = %instance.zone, capacity_type = %instance.capacity_type, "launched");
    ctx.metrics.launch("launched");
    ctx.events.nodeclaim(claim, Reason::Launched, format!("launched {} in {} ({}), {}", instance.instance_type, instance.zone, instance.capacity_type, instance.provider_id));
    ctx.wake_lifecycle(&name);
    Ok(Launched::Done { provider_id: instance.provider_id.clone() })
}

/// The NodeClaim was removed while its instance started: nothing tracks the instance, so terminate it.
async fn orphaned<P: CloudProvider>(ctx: &Ctx<P>, name: &str, instance: &Instance) -> Result<Launched, LaunchError> {
    tracing::warn!(nodeclaim = name, instance = %instance.id, "NodeClaim deleted during its launch; terminating the instance");
    match ctx.cloud.by(Caller::Lifecycle).terminate(&instance.provider_id).await {
        Ok(()) | Err(CloudError::NotFound(_)) => Ok(Launched::Skipped),
        // Garbage collection terminates it after its grace period.
        Err(error) => Err(LaunchError::Cloud { claim: name.to_string(), error }),
    }
}

async fn delete_claim<P: CloudProvider>(ctx: &Ctx<P>, claim: &NodeClaim) -> Result<(), LaunchError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(either) => {
            if let Some(c) = either.left() {
                super::lock(&ctx.state).apply(c);
            }
            Ok(())
        }
        Err(e) if kube_status(&e) == Some(404) => Ok(()),
        Err(error) => Err(LaunchError::Kube { claim: name, what: "deleting it".into(), error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stowage_core::domain::labels::keys;
    use stowage_input::api::{NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues};

    fn claim(reqs: &[(&str, &[&str])]) -> NodeClaim {
        NodeClaim::new(
            "np-abc",
            NodeClaimSpec {
                requirements: reqs
                    .iter()
                    .map(|(k, v)| NodeSelectorRequirementWithMinValues { key: k.to_string(), operator: "In".into(), values: v.iter().map(|s| s.to_string()).collect(), min_values: None })
                    .collect(),
                node_class_ref: NodeClassReference { group: "karpenter.k8s.aws".into(), kind: "EC2NodeClass".into(), name: "default".into() },
                ..Default::default()
            },
        )
    }

    /// The controller's cache on tokio's clock hides refused offerings from the launch until the TTL.
    #[test]
    fn refused_offerings_are_skipped_until_their_ttl_has_passed() {
        let c = claim(&[(keys::INSTANCE_TYPE, &["m5.xlarge", "m5.large"]), (keys::ZONE, &["us-east-1b"]), (keys::CAPACITY_TYPE, &["spot"])]);
        let cat = stowage_input::catalog::default_catalog();
        let now = Instant::now();
        let mut u = Unavailable::default();
        u.mark(("m5.xlarge".into(), "us-east-1b".into(), "spot".into()), now + Duration::from_secs(180));
        assert_eq!(launch_request(&c, cat, None, &u, now).unwrap().offerings[0].instance_type, "m5.large");
        let later = now + Duration::from_secs(181);
        assert_eq!(launch_request(&c, cat, None, &u, later).unwrap().offerings[0].instance_type, "m5.xlarge");
        u.mark(("m5.large".into(), "us-east-1b".into(), "spot".into()), now + Duration::from_secs(180));
        assert!(matches!(launch_request(&c, cat, None, &u, now), Err(LaunchError::NoOffering { .. })));
        let mut bad = claim(&[]);
        bad.spec.requirements.push(NodeSelectorRequirementWithMinValues { key: "x".into(), operator: "Near".into(), values: vec![], min_values: None });
        assert!(matches!(launch_request(&bad, cat, None, &u, now), Err(LaunchError::InvalidClaim { .. })));
    }
}
