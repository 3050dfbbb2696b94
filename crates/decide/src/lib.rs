//! The controller's decisions that do not depend on how the cluster or the cloud is reached: the
//! `CloudProvider` seam (EC2 in `stowage-aws`, a simulated cloud in `stowage-sim`).

pub mod cloud;
