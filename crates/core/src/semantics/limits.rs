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

/// Checks the pool's usage after adding a node of capacity `add` to `used` / `used_nodes`.
pub fn check(limits: &PoolLimits, used: &Resources, used_nodes: i64, add: &Resources) -> Result<(), String> {
    for name in &limits.limited {
        let total = used.get(name).saturating_add(add.get(name));
        let limit = limits.resources.get(name);
        if total > limit {
            return Err(format!("NodePool limit exceeded: {name} {} > {}", format_amount(name, total), format_amount(name, limit)));
        }
    }
    if let Some(n) = limits.nodes
        && used_nodes.saturating_add(1) > n
    {
        return Err(format!("NodePool limit exceeded: nodes {} > {n}", used_nodes.saturating_add(1)));
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
    }
}
