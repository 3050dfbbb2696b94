//! stowage: plans Kubernetes node launches for batches of pending pods.
//!
//! Layers (see ARCHITECTURE.md): `domain` (pure types) ← `semantics` (what each constraint means) ←
//! `solve` (planners) and `check` (the independent oracle). `input`, `catalog` and `api` turn files
//! and Kubernetes objects into domain values. Only `cloud`, `controller` and the CLI touch the network.

pub mod api;
pub mod bench;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod cloud;
pub mod controller;
pub mod domain;
pub mod e2e;
pub mod input;
pub mod plan;
pub mod semantics;
pub mod sim;
pub mod solve;
pub mod weights;
