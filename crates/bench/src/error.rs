//! The benchmark's typed errors. Each message names what it is about and what to do.
//!
//! The corpus, trace, peer and report functions still return `String` errors; they move here one by
//! one (issue 14).

/// An error of the benchmark crate.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `stowage corpus mixed --scale 0`.
    #[error("scale must be at least 1")]
    Scale,
    /// `stowage corpus cluster --shape X` with an unknown shape.
    #[error("{0:?} is not a cluster shape (saas or platform)")]
    Shape(String),
    /// A generator needs an instance type the embedded catalog lacks (regenerate the catalog, or change
    /// the generator's types).
    #[error("{instance_type} is not in the embedded catalog")]
    NotInCatalog { instance_type: String },
    /// A generated object that does not serialise (a bug).
    #[error("cannot write a generated object as JSON: {0}")]
    Json(#[source] serde_json::Error),
}
