//! Kubernetes Events (`events.k8s.io/v1`) on pods and NodeClaims, the way `kubectl describe` users
//! expect them from Karpenter: `Nominated` and `FailedScheduling` on pods (with the planner's reason),
//! the lifecycle of each NodeClaim (`Launched`, `InsufficientCapacity`, `Registered`, ...),
//! `InvalidNodePool` on a NodePool left out of planning, `UnsupportedField` on a NodePool or
//! EC2NodeClass that sets fields stowage does not act on, and interruption messages on NodeClaims and
//! Nodes (`SpotInterrupted`, `TerminatingOnInterruption`, ...: interruption.rs).
//!
//! Publishing never blocks the controller and never fails it: events go through a bounded queue to one
//! task; a full queue drops the event (counted as an `event` error). kube's `Recorder` folds repeats
//! into an event series.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

use super::metrics::{Metrics, Stage};
use super::provisioner::PodRef;
use stowage_input::api::NodeClaim;

/// The events stowage emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    Nominated,
    FailedScheduling,
    Launched,
    LaunchFailed,
    InsufficientCapacity,
    LaunchTimeout,
    Registered,
    RegistrationTimeout,
    Initialized,
    Disrupting,
    Terminating,
    InstanceVanished,
    /// A NodeClaim reconcile failed in a way retrying cannot fix.
    ReconcileFailed,
    /// A NodePool stowage cannot read is left out of planning.
    InvalidNodePool,
    /// A NodePool or EC2NodeClass sets fields stowage does not act on (`stowage_input::unsupported`).
    UnsupportedField,
    /// Interruption messages (Karpenter's AWS interruption controller's reasons).
    SpotInterrupted,
    SpotRebalanceRecommendation,
    InstanceUnhealthy,
    InstanceStopping,
    InstanceTerminating,
    TerminatingOnInterruption,
    /// The NodeClaim's capacity block ends within 40 minutes: it is deleted before EC2 reclaims it.
    CapacityReservationExpiring,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Nominated => "Nominated",
            Reason::FailedScheduling => "FailedScheduling",
            Reason::Launched => "Launched",
            Reason::LaunchFailed => "LaunchFailed",
            Reason::InsufficientCapacity => "InsufficientCapacityError",
            Reason::LaunchTimeout => "LaunchTimeout",
            Reason::Registered => "Registered",
            Reason::RegistrationTimeout => "RegistrationTimeout",
            Reason::Initialized => "Initialized",
            Reason::Disrupting => "DisruptionTerminating",
            Reason::Terminating => "Terminating",
            Reason::InstanceVanished => "InstanceVanished",
            Reason::ReconcileFailed => "ReconcileFailed",
            Reason::InvalidNodePool => "InvalidNodePool",
            Reason::UnsupportedField => "UnsupportedField",
            Reason::SpotInterrupted => "SpotInterrupted",
            Reason::SpotRebalanceRecommendation => "SpotRebalanceRecommendation",
            Reason::InstanceUnhealthy => "InstanceUnhealthy",
            Reason::InstanceStopping => "InstanceStopping",
            Reason::InstanceTerminating => "InstanceTerminating",
            Reason::TerminatingOnInterruption => "TerminatingOnInterruption",
            Reason::CapacityReservationExpiring => "CapacityReservationExpiring",
        }
    }

    fn kind(self) -> EventType {
        match self {
            Reason::FailedScheduling
            | Reason::LaunchFailed
            | Reason::InsufficientCapacity
            | Reason::LaunchTimeout
            | Reason::RegistrationTimeout
            | Reason::InstanceVanished
            | Reason::ReconcileFailed
            | Reason::InvalidNodePool
            | Reason::UnsupportedField
            | Reason::SpotInterrupted
            | Reason::InstanceUnhealthy
            | Reason::InstanceStopping
            | Reason::InstanceTerminating
            | Reason::TerminatingOnInterruption
            | Reason::CapacityReservationExpiring => EventType::Warning,
            _ => EventType::Normal,
        }
    }

    fn action(self) -> &'static str {
        match self {
            Reason::Nominated | Reason::FailedScheduling | Reason::InvalidNodePool => "Provisioning",
            Reason::Launched | Reason::LaunchFailed | Reason::InsufficientCapacity | Reason::LaunchTimeout => "Launching",
            Reason::Registered | Reason::RegistrationTimeout | Reason::Initialized => "Registering",
            Reason::Disrupting | Reason::Terminating | Reason::InstanceVanished => "Terminating",
            Reason::ReconcileFailed => "Reconciling",
            Reason::UnsupportedField => "Validating",
            Reason::SpotInterrupted | Reason::SpotRebalanceRecommendation | Reason::InstanceUnhealthy | Reason::InstanceStopping | Reason::InstanceTerminating => "Interruption",
            Reason::TerminatingOnInterruption | Reason::CapacityReservationExpiring => "Terminating",
        }
    }
}

struct Queued {
    reason: Reason,
    note: String,
    regarding: ObjectReference,
}

/// The event sink. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Events {
    tx: mpsc::Sender<Queued>,
    metrics: Metrics,
}

/// Notes are limited to 1 kB by the API.
fn clip(mut s: String) -> String {
    if s.len() > 1000 {
        let mut end = 997;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

impl Events {
    /// Starts the publishing task.
    pub fn start(client: kube::Client, instance: String, metrics: Metrics) -> (Events, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Queued>(1024);
        let recorder = Recorder::new(client, Reporter { controller: "stowage".into(), instance: Some(instance) });
        let m = metrics.clone();
        let task = tokio::spawn(async move {
            while let Some(q) = rx.recv().await {
                let ev = Event { type_: q.reason.kind(), reason: q.reason.as_str().into(), note: Some(q.note), action: q.reason.action().into(), secondary: None };
                if let Err(e) = recorder.publish(&ev, &q.regarding).await {
                    m.error(Stage::Event);
                    tracing::debug!(error = %e, reason = q.reason.as_str(), "publishing an event failed");
                }
            }
        });
        (Events { tx, metrics }, task)
    }

    fn send(&self, reason: Reason, note: String, regarding: ObjectReference) {
        if self.tx.try_send(Queued { reason, note: clip(note), regarding }).is_err() {
            self.metrics.error(Stage::Event);
        }
    }

    pub fn pod(&self, pod: &PodRef, reason: Reason, note: String) {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        self.send(reason, note, regarding);
    }

    pub fn nodeclaim(&self, claim: &NodeClaim, reason: Reason, note: String) {
        // Cluster-scoped: kube's Recorder writes the event to `default`.
        self.send(reason, note, claim.object_ref(&()));
    }

    /// An event on any cluster-scoped object (NodePools).
    pub fn object<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: Reason, note: String) {
        self.send(reason, note, obj.object_ref(&()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_clipped_on_a_char_boundary() {
        let s = "é".repeat(800);
        let c = clip(s);
        assert!(c.len() <= 1000 && c.ends_with("..."));
        assert_eq!(clip("short".into()), "short");
    }

    #[test]
    fn warnings_are_warnings() {
        assert_eq!(Reason::InsufficientCapacity.kind(), EventType::Warning);
        assert_eq!(Reason::Nominated.kind(), EventType::Normal);
        assert_eq!(Reason::InsufficientCapacity.as_str(), "InsufficientCapacityError");
    }
}
