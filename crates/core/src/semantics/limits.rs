//! NodePool limits (Karpenter `spec.limits`).
//!
//! ```text
//! ∀ r ∈ limits: Σ capacity[r] over the pool's nodes (existing, in flight and planned) ≤ limits[r]
//! nodes:        number of the pool's nodes ≤ limits.nodes
//! ```
//!
//! Karpenter counts node *capacity*, not allocatable.

use crate::domain::nodepool::PoolLimits;
use crate::domain::resources::{Resources, format_amount};

/// A NodePool limit a new node would exceed. The node cannot be launched in this NodePool; the caller
/// tries another NodePool or leaves the pod pending with this message (raising the NodePool's
/// `spec.limits` is the cluster operator's remedy).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LimitExceeded {
    /// `total` and `limit` are formatted as quantities of `resource`.
    #[error("NodePool limit exceeded: {resource} {total} > {limit}")]
    Resource { resource: String, total: String, limit: String },
    #[error("NodePool limit exceeded: nodes {nodes} > {limit}")]
    Nodes { nodes: i64, limit: i64 },
}

/// Checks the pool's usage after adding a node of capacity `add` to `used` / `used_nodes`.
pub(crate) fn check(limits: &PoolLimits, used: &Resources, used_nodes: i64, add: &Resources) -> Result<(), LimitExceeded> {
    for name in &limits.limited {
        let total = used.get(name).saturating_add(add.get(name));
        let limit = limits.resources.get(name);
        if total > limit {
            return Err(LimitExceeded::Resource { resource: name.clone(), total: format_amount(name, total), limit: format_amount(name, limit) });
        }
    }
    if let Some(n) = limits.nodes
        && used_nodes.saturating_add(1) > n
    {
        return Err(LimitExceeded::Nodes { nodes: used_nodes.saturating_add(1), limit: n });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_capacity_and_nodes() {
        let limits = PoolLimits { resources: Resources::new(4000, 0, 0, 0), limited: vec!["cpu".into()], nodes: Some(2) };
        assert!(check(&limits, &Resources::new(2000, 0, 0, 0), 1, &Resources::new(2000, 0, 0, 0)).is_ok());
        assert!(check(&limits, &Resources::new(2000, 0, 0, 0), 1, &Resources::new(2001, 0, 0, 0)).is_err());
        assert!(check(&limits, &Resources::default(), 2, &Resources::default()).is_err());
        let zero = PoolLimits { resources: Resources::default(), limited: vec!["cpu".into()], nodes: None };
        assert!(check(&zero, &Resources::default(), 0, &Resources::new(1, 0, 0, 0)).is_err(), "a limit of 0 is a limit");
        assert_eq!(check(&limits, &Resources::default(), 2, &Resources::default()).unwrap_err().to_string(), "NodePool limit exceeded: nodes 3 > 2");
    }
}
