//! The cloud provider behind Karpenter's cloud-provider metrics: every call the controller makes is
//! timed into `karpenter_cloudprovider_duration_seconds{controller, method, provider}` and every error
//! counted in `karpenter_cloudprovider_errors_total{controller, method, provider, error}`, with
//! Karpenter's method names where the call is Karpenter's (`Create`, `Delete`, `List`,
//! `GetInstanceTypes`) and stowage's own otherwise (`TagRegistered`, `ResolveNodeClass`,
//! `CollectNodeClassResources`), and Karpenter's error classes (`InsufficientCapacityError`,
//! `NodeClaimNotFoundError`, `NodeClassNotReadyError`, else empty).
//!
//! `controller` is the name of the Karpenter controller that makes the same call in Karpenter
//! ([`Caller`]). A call can only be made through [`Instrumented::by`], which names its caller, so no
//! call goes unlabelled and no global (task-local) state carries the name.

use std::sync::Arc;
use std::time::Instant;

use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{CloudError, CloudProvider, Instance, LaunchRequest};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

use crate::metrics::Metrics;

/// Who makes a cloud call, by the name of the Karpenter v1.14.1 controller (core or AWS provider) that
/// makes the same call there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A batch (the catalog it plans over): Karpenter's `provisioner`.
    Provisioner,
    /// Consolidation's catalog: Karpenter's `disruption`.
    Disruption,
    /// A NodeClaim's launch and termination (Karpenter's `nodeclaim.lifecycle` calls `Create` and, in
    /// its finalizer, `Delete`); stowage also launches a batch's NodeClaims at once, the same step.
    Lifecycle,
    /// Tagging a registered instance: the AWS provider's `nodeclaim.tagging`.
    Tagging,
    /// Listing instances to find NodeClaims whose instance is gone: Karpenter's `nodeclaim.garbagecollection`.
    NodeClaimGc,
    /// Terminating an instance no NodeClaim tracks: the AWS provider's `instance.garbagecollection`.
    InstanceGc,
    /// Resolving an EC2NodeClass: the AWS provider's `nodeclass`.
    NodeClass,
    /// Deleting instance profiles no EC2NodeClass uses: the AWS provider's `instanceprofile.garbagecollection`.
    InstanceProfileGc,
}

impl Caller {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Caller::Provisioner => "provisioner",
            Caller::Disruption => "disruption",
            Caller::Lifecycle => "nodeclaim.lifecycle",
            Caller::Tagging => "nodeclaim.tagging",
            Caller::NodeClaimGc => "nodeclaim.garbagecollection",
            Caller::InstanceGc => "instance.garbagecollection",
            Caller::NodeClass => "nodeclass",
            Caller::InstanceProfileGc => "instanceprofile.garbagecollection",
        }
    }
}

/// `P` with every call measured.
pub(crate) struct Instrumented<P> {
    inner: Arc<P>,
    metrics: Metrics,
}

impl<P: CloudProvider> Instrumented<P> {
    pub(crate) fn new(inner: Arc<P>, metrics: Metrics) -> Self {
        Instrumented { inner, metrics }
    }

    /// The cloud, for calls `caller` makes.
    pub(crate) fn by(&self, caller: Caller) -> By<'_, P> {
        By { cloud: self, caller }
    }

    /// Not a cloud call (the provider drops what it cached for the class): not measured.
    pub(crate) fn forget_nodeclass(&self, name: &str) {
        self.inner.forget_nodeclass(name)
    }

    /// Karpenter's `capacityreservation.expiration` asks its capacity-reservation provider, not its
    /// CloudProvider, so there is no `karpenter_cloudprovider_*` series to count this in: not measured.
    pub(crate) async fn expiring_reservations(&self, ids: &[String]) -> Result<Vec<String>, CloudError> {
        self.inner.expiring_reservations(ids).await
    }
}

/// The cloud's calls, each measured under one caller's name.
pub(crate) struct By<'a, P> {
    cloud: &'a Instrumented<P>,
    caller: Caller,
}

impl<P: CloudProvider> By<'_, P> {
    async fn measure<T>(&self, method: &'static str, call: impl std::future::Future<Output = Result<T, CloudError>>) -> Result<T, CloudError> {
        let start = Instant::now();
        let r = call.await;
        self.cloud.metrics.cloud_call(self.caller.label(), self.cloud.inner.provider_name(), method, start.elapsed().as_secs_f64(), r.as_ref().err());
        r
    }

    pub(crate) async fn catalog(&self) -> Result<Catalog, CloudError> {
        self.measure("GetInstanceTypes", self.cloud.inner.catalog()).await
    }

    pub(crate) async fn launch(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        self.measure("Create", self.cloud.inner.launch(req)).await
    }

    pub(crate) async fn terminate(&self, provider_id: &str) -> Result<(), CloudError> {
        self.measure("Delete", self.cloud.inner.terminate(provider_id)).await
    }

    pub(crate) async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        self.measure("List", self.cloud.inner.list()).await
    }

    pub(crate) async fn tag_registered(&self, provider_id: &str, nodeclaim: &str, node: &str) -> Result<(), CloudError> {
        self.measure("TagRegistered", self.cloud.inner.tag_registered(provider_id, nodeclaim, node)).await
    }

    pub(crate) async fn resolve_nodeclass(&self, nodeclass: &EC2NodeClass) -> Result<EC2NodeClassStatus, CloudError> {
        self.measure("ResolveNodeClass", self.cloud.inner.resolve_nodeclass(nodeclass)).await
    }

    pub(crate) async fn collect_nodeclass_resources(&self, nodeclasses: &[EC2NodeClass]) -> Result<Vec<String>, CloudError> {
        self.measure("CollectNodeClassResources", self.cloud.inner.collect_nodeclass_resources(nodeclasses)).await
    }
}
