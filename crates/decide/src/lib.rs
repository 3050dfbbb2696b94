//! The controller's decisions that do not depend on how the cluster or the cloud is reached, written
//! once and run by both the controller (crates/controller, tokio's clock, kube-rs, EC2) and the
//! simulator (crates/sim, a simulated clock and cluster): batching ([`batch`]), the refused-offering
//! cache ([`offerings`]), disruption of empty and expired nodes ([`disruption`]), a NodeClaim's
//! lifecycle: launch, registration, initialization, timeouts ([`lifecycle`]), and the
//! `CloudProvider` seam ([`cloud`]: EC2 in `stowage-aws`).

pub mod batch;
pub mod cloud;
pub mod disruption;
pub mod lifecycle;
pub mod offerings;
