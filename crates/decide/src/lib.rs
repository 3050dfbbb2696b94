//! The controller's decisions that do not depend on how the cluster or the cloud is reached, written
//! once and run by both the controller (crates/controller, tokio's clock, kube-rs, EC2) and the
//! simulator (crates/sim, a simulated clock and cluster): batching ([`batch`]), the refused-offering
//! cache ([`offerings`]), provisioning ([`provision`]: cluster → NodeClaims, nominations, unschedulable
//! pods), the launch request for a NodeClaim and the labels its instance gives it ([`launch`]),
//! disruption of empty and expired nodes ([`disruption`]), consolidation of underutilised nodes
//! ([`consolidation`], with the `Balanced` policy's score in [`balanced`]), drift of NodeClaims from their NodePool and EC2NodeClass ([`drift`]), a
//! NodeClaim's lifecycle: launch,
//! registration, initialization, timeouts ([`lifecycle`]), interruption messages and what they do to
//! NodeClaims ([`interruption`]), and the `CloudProvider` and `InterruptionQueue` seams ([`cloud`]:
//! EC2 and SQS in `stowage-aws`, the simulator's cloud in `stowage-sim`).

pub mod balanced;
pub mod batch;
pub mod cloud;
pub mod consolidation;
pub mod disruption;
pub mod drift;
pub mod interruption;
pub mod launch;
pub mod lifecycle;
pub mod offerings;
pub mod provision;
pub mod reservations;
