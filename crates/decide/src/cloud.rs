//! The cloud seam: what the controller asks of a cloud, and the typed errors it acts on.
//!
//! Implementations: `aws` (EC2 through aws-sdk-ec2; moto in tests). The controller never talks to a
//! cloud SDK directly. Errors say what the caller should do: `InsufficientCapacity` marks offerings
//! unavailable and replans the pods; `Throttled` retries with backoff; `NodeClassNotReady` waits;
//! `Fatal` surfaces an operator error (credentials, permissions, bad configuration).
//!
//! The controller keeps the provider's view of EC2NodeClasses current with
//! [`CloudProvider::resolve_nodeclass`] (on every NodeClass reconcile): a launch names its NodeClass
//! by `LaunchRequest::nodeclass`, and the provider needs the NodeClass's selectors, kubelet settings
//! and tags to launch, which a name alone does not carry.

use std::future::Future;

use stowage_core::domain::catalog::{Catalog, Reservation};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

/// One instance type in one zone with one capacity type, with the price the plan assumed.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferingRef {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    /// The capacity reservation of a `reserved` offering: the launch targets it.
    pub reservation: Option<Reservation>,
}

/// A request to launch one node.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRequest {
    /// The NodeClaim's name: used for the idempotency token, so a retried launch never starts a second
    /// instance.
    pub nodeclaim: String,
    pub nodepool: String,
    pub nodeclass: String,
    /// Offerings that fit the same pods under the same zone and label constraints, cheapest first;
    /// the first is the plan's choice, the rest are fallbacks for capacity errors.
    pub offerings: Vec<OfferingRef>,
    /// Labels and taints the node must register with (written into user data). Put startup taints
    /// here too; `karpenter.sh/unregistered:NoExecute` is always added. Labels kubelet may not set on
    /// itself (well-known, type- or zone-specific ones) are left out of user data: set them on the
    /// Node at registration.
    pub labels: std::collections::BTreeMap<String, String>,
    pub taints: Vec<stowage_core::domain::taints::Taint>,
    /// Extra tags (the NodeClass's `spec.tags`).
    pub tags: std::collections::BTreeMap<String, String>,
}

/// A running (or starting) instance the cloud reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub id: String,
    /// `aws:///<zone>/<instance-id>`.
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// pending, running, stopping, stopped, shutting-down, terminated.
    pub state: String,
    /// The `karpenter.sh/nodepool` tag.
    pub nodepool: Option<String>,
    /// The `karpenter.sh/nodeclaim` tag (the AWS provider sets it at launch, and again after
    /// registration).
    pub nodeclaim: Option<String>,
    /// Launch time, seconds since the epoch.
    pub launched_at: i64,
    /// The machine image it runs (drift compares it with the NodeClass's resolved images), if known.
    pub image_id: Option<String>,
    /// The subnet it runs in (drift compares it with the NodeClass's resolved subnets), if known.
    pub subnet_id: Option<String>,
    /// The security groups attached to it (drift compares them with the NodeClass's resolved
    /// security groups), if known.
    pub security_group_ids: Option<Vec<String>>,
    /// The capacity reservation it runs in, if any and if known (drift compares it with the NodeClass's
    /// selected reservations).
    pub capacity_reservation_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// No capacity for these offerings: mark them unavailable (3 minutes) and replan the pods.
    #[error("insufficient capacity for {offerings:?}: {message}")]
    InsufficientCapacity { offerings: Vec<OfferingRef>, message: String },
    /// The API throttled the call, or was unavailable (5xx, timeouts), beyond the provider's own
    /// bounded retries: retry later with backoff.
    #[error("throttled: {0}")]
    Throttled(String),
    /// The node class cannot be resolved yet (subnets, security groups or AMIs not found): wait and
    /// retry; the NodeClaim is deleted if it persists.
    #[error("node class not ready: {0}")]
    NodeClassNotReady(String),
    /// The instance does not exist (already terminated).
    #[error("not found: {0}")]
    NotFound(String),
    /// Anything else; the message says what is wrong.
    #[error("{0}")]
    Fatal(String),
}

impl CloudError {
    pub fn retryable(&self) -> bool {
        matches!(self, CloudError::Throttled(_) | CloudError::NodeClassNotReady(_))
    }
}

/// What the controller needs from a cloud.
pub trait CloudProvider: Send + Sync {
    /// The provider's name in metrics (Karpenter's `provider` label: `aws`).
    fn provider_name(&self) -> &'static str;
    /// Instance types, offerings and prices, with currently unavailable offerings marked.
    fn catalog(&self) -> impl Future<Output = Result<Catalog, CloudError>> + Send;
    /// Launches one node; idempotent per `LaunchRequest::nodeclaim`.
    fn launch(&self, req: &LaunchRequest) -> impl Future<Output = Result<Instance, CloudError>> + Send;
    /// Terminates an instance by provider id; `NotFound` if it is already gone.
    fn terminate(&self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send;
    /// Instances this controller owns (by tags), in any state but terminated.
    fn list(&self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;
    /// Tags an instance with its NodeClaim and node name after registration.
    fn tag_registered(&self, provider_id: &str, nodeclaim: &str, node: &str) -> impl Future<Output = Result<(), CloudError>> + Send;
    /// Resolves an EC2NodeClass (subnets, security groups, AMIs) and registers it for `launch`, which
    /// refers to it by name. `Ok` carries what the controller writes into `status` (it sets the
    /// conditions: Ready=True); `NodeClassNotReady` says what is missing (Ready=False). Cached; cheap
    /// to call on every reconcile. Added to the trait because `LaunchRequest` names the NodeClass but
    /// the launch needs its spec. The default (for clouds without node classes) accepts anything.
    fn resolve_nodeclass(&self, nodeclass: &EC2NodeClass) -> impl Future<Output = Result<EC2NodeClassStatus, CloudError>> + Send {
        let _ = nodeclass;
        async { Ok(EC2NodeClassStatus::default()) }
    }
    /// Forgets a deleted EC2NodeClass (its subnets' zones leave `catalog()`; launches naming it wait
    /// for it again).
    fn forget_nodeclass(&self, name: &str) {
        let _ = name;
    }
    /// Deletes cloud resources the cloud made for node classes (AWS: instance profiles made for
    /// `spec.role`) that none of `nodeclasses` (every EC2NodeClass in the cluster, with its status) uses
    /// any more; returns what was deleted. The default (a cloud that makes none) deletes nothing.
    fn collect_nodeclass_resources(&self, nodeclasses: &[EC2NodeClass]) -> impl Future<Output = Result<Vec<String>, CloudError>> + Send {
        let _ = nodeclasses;
        async { Ok(Vec::new()) }
    }
    /// Of these capacity reservations (ids), the ones whose instances are about to be reclaimed (AWS:
    /// capacity blocks within 40 minutes of their end; `crate::reservations`). The default (a cloud
    /// without reservations) names none.
    fn expiring_reservations(&self, ids: &[String]) -> impl Future<Output = Result<Vec<String>, CloudError>> + Send {
        let _ = ids;
        async { Ok(Vec::new()) }
    }
}

/// One message read from an interruption queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueMessage {
    /// The queue's id for the message (logs).
    pub id: String,
    /// What deleting it takes (SQS's receipt handle).
    pub receipt: String,
    pub body: String,
}

/// The future a queue call returns (boxed, so the controller can hold any queue behind one type:
/// the queue is optional and chosen at start, unlike the one `CloudProvider`).
pub type QueueFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, CloudError>> + Send + 'a>>;

/// The interruption queue (Karpenter's `interruptionQueue`: SQS fed by EventBridge rules; aws-sdk-sqs
/// in `stowage-aws`). Messages are parsed and acted on by [`crate::interruption`].
pub trait InterruptionQueue: Send + Sync {
    /// The queue's name (logs).
    fn name(&self) -> &str;
    /// Waits for messages (SQS: long poll, at most 10, at most 20 s); an empty list when none came.
    fn receive(&self) -> QueueFuture<'_, Vec<QueueMessage>>;
    /// Deletes a handled message.
    fn delete<'a>(&'a self, receipt: &'a str) -> QueueFuture<'a, ()>;
}
