//! The cloud provider behind Karpenter's cloud-provider metrics: every call the controller makes is
//! timed into `karpenter_cloudprovider_duration_seconds{controller, method, provider}` and every error
//! counted in `karpenter_cloudprovider_errors_total{controller, method, provider, error}`, with
//! Karpenter's method names where the call is Karpenter's (`Create`, `Delete`, `List`,
//! `GetInstanceTypes`) and stowage's own otherwise (`TagRegistered`, `ResolveNodeClass`,
//! `CollectNodeClassResources`), and Karpenter's error classes (`InsufficientCapacityError`,
//! `NodeClaimNotFoundError`, `NodeClassNotReadyError`, else empty). `controller` is empty: stowage's
//! calls do not carry the name of the loop that made them.

use std::sync::Arc;
use std::time::Instant;

use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{CloudError, CloudProvider, Instance, LaunchRequest};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

use crate::metrics::Metrics;

/// `P` with every call measured.
pub(crate) struct Instrumented<P> {
    inner: Arc<P>,
    metrics: Metrics,
}

impl<P: CloudProvider> Instrumented<P> {
    pub(crate) fn new(inner: Arc<P>, metrics: Metrics) -> Self {
        Instrumented { inner, metrics }
    }

    async fn measure<T>(&self, method: &'static str, call: impl std::future::Future<Output = Result<T, CloudError>>) -> Result<T, CloudError> {
        let start = Instant::now();
        let r = call.await;
        self.metrics.cloud_call(self.inner.provider_name(), method, start.elapsed().as_secs_f64(), r.as_ref().err());
        r
    }
}

impl<P: CloudProvider> CloudProvider for Instrumented<P> {
    async fn catalog(&self) -> Result<Catalog, CloudError> {
        self.measure("GetInstanceTypes", self.inner.catalog()).await
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        self.measure("Create", self.inner.launch(req)).await
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), CloudError> {
        self.measure("Delete", self.inner.terminate(provider_id)).await
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        self.measure("List", self.inner.list()).await
    }

    async fn tag_registered(&self, provider_id: &str, nodeclaim: &str, node: &str) -> Result<(), CloudError> {
        self.measure("TagRegistered", self.inner.tag_registered(provider_id, nodeclaim, node)).await
    }

    async fn resolve_nodeclass(&self, nodeclass: &EC2NodeClass) -> Result<EC2NodeClassStatus, CloudError> {
        self.measure("ResolveNodeClass", self.inner.resolve_nodeclass(nodeclass)).await
    }

    fn forget_nodeclass(&self, name: &str) {
        self.inner.forget_nodeclass(name)
    }

    async fn collect_nodeclass_resources(&self, nodeclasses: &[EC2NodeClass]) -> Result<Vec<String>, CloudError> {
        self.measure("CollectNodeClassResources", self.inner.collect_nodeclass_resources(nodeclasses)).await
    }

    fn provider_name(&self) -> &'static str {
        self.inner.provider_name()
    }
}
