//! stowage's pure core: the domain, what each constraint means, the planners, the independent checker,
//! the plan, the cost weights and the catalog seen through a NodeClass.
//!
//! Layers (ARCHITECTURE.md): `domain` (pure types) ← `semantics` (what each constraint means) ←
//! `solve` (planners) and `check` (the independent oracle). This crate's dependencies are the
//! compiler-checked proof that it does no IO: no Kubernetes client or object types, no AWS SDK, no
//! async runtime, no CLI; `clippy.toml` forbids the file system, the environment and printing.

pub mod catalog;
pub mod check;
pub mod domain;
pub mod json;
pub mod plan;
pub mod semantics;
pub mod solve;
pub mod weights;
