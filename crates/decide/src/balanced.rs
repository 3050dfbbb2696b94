//! Karpenter v1.14's `Balanced` consolidation policy: a consolidation move that touches a Balanced
//! NodePool is carried out only when, for every Balanced pool it touches, the move's share of the
//! pool's cost it saves is at least half its share of the pool's disruption.
//!
//! ```text
//! per pool P touched by the move M (only pools with consolidationPolicy Balanced are scored):
//!   nodeDisruption(n)   = 1 + Σ evictionCost(p)            over n's reschedulable pods (not DaemonSet,
//!                                                            not mirror, not terminal)
//!   totalCost(P)        = Σ price(n)                       over P's nodes with a catalog price
//!   totalDisruption(P)  = Σ nodeDisruption(n)              over all P's nodes (candidates or not)
//!   savings(M)          = Σ price(removed) − Σ price(replacements)
//!   savings(M, P)       = savings(M) × Σ price(removed ∩ P) / Σ price(removed)   if M spans > 1 pool
//!                       = savings(M)                                             otherwise
//!   disruption(M, P)    = Σ nodeDisruption(n)              over removed ∩ P
//!   score(M, P)         = (savings(M, P) / totalCost(P)) / (disruption(M, P) / totalDisruption(P))
//!                         (0 if savings ≤ 0 or a total is 0; +∞ if the disruption share is 0)
//!   approved(M)         ⇔ ∀ Balanced P touched by M: score(M, P) ≥ 1 / K,   K = 2
//! ```
//!
//! Provenance (facts of kubernetes-sigs/karpenter v1.14.1, `pkg/apis/v1/nodepool.go` and
//! `pkg/controllers/disruption/{balanced.go,types.go}`): `BalancedK = 2` ("the smallest value where
//! within-family replaces pass"), the per-node base disruption cost 1.0 (draining a node has a cost
//! of its own), `evictionCost` as [`crate::consolidation::eviction_cost`], savings split across pools
//! by source price, and a pool's totals over all of its nodes, not only the candidates. A candidate
//! whose best move (deleting it: its whole price saved, nothing launched) cannot pass is not tried
//! ([`passes_as_delete`], Karpenter's `CanPassThreshold`). Empty nodes are never scored: they are
//! [`crate::disruption`]'s under every policy, as in Karpenter. Prices, not the weights' objective
//! costs, are what the score compares (Karpenter's); the consolidation's own margin on the objective
//! (`saving − disruption ≥ minSaving`) still applies on top.

use std::collections::BTreeMap;

/// Karpenter's `BalancedK`: a move passes when its score is at least `1 / K`.
pub const BALANCED_K: f64 = 2.0;
/// Karpenter's `PerNodeBaseDisruptionCost`: the cost of draining a node, pods aside.
pub const PER_NODE_BASE_DISRUPTION_COST: f64 = 1.0;

/// A pool's totals over all its nodes (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolTotals {
    /// $/h: Σ price of its nodes.
    pub cost: f64,
    /// Σ node disruption cost of its nodes.
    pub disruption: f64,
}

/// A node a move removes, as the score sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub pool: String,
    pub price: f64,
    /// `1 + Σ evictionCost` of its reschedulable pods ([`node_disruption`]).
    pub disruption: f64,
}

/// One pool's score of a move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    pub savings_fraction: f64,
    pub disruption_fraction: f64,
}

impl Score {
    /// `savings_fraction / disruption_fraction`, 0 when nothing is saved, +∞ when nothing is disrupted.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    pub fn threshold() -> f64 {
        1.0 / BALANCED_K
    }

    pub fn approved(&self) -> bool {
        self.value() >= Self::threshold()
    }
}

/// A node's disruption cost from its reschedulable pods' eviction costs.
pub fn node_disruption(eviction_costs: impl IntoIterator<Item = f64>) -> f64 {
    PER_NODE_BASE_DISRUPTION_COST + eviction_costs.into_iter().map(|c| c.max(0.0)).sum::<f64>()
}

/// The score of saving `savings` at `disruption` in a pool with `totals` (zero totals: nothing to
/// compare against, a score of 0).
pub fn score(savings: f64, disruption: f64, totals: PoolTotals) -> Score {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return Score { savings_fraction: 0.0, disruption_fraction: 0.0 };
    }
    Score { savings_fraction: savings / totals.cost, disruption_fraction: disruption / totals.disruption }
}

/// Whether deleting `source` outright (the best any move of it can do) passes its pool's threshold.
/// Pools that are not Balanced, or whose totals are unknown, always pass.
pub fn passes_as_delete(source: &Source, balanced: &dyn Fn(&str) -> bool, totals: &BTreeMap<String, PoolTotals>) -> bool {
    if !balanced(&source.pool) {
        return true;
    }
    match totals.get(&source.pool) {
        Some(t) if t.cost > 0.0 => score(source.price, source.disruption, *t).approved(),
        _ => true,
    }
}

/// Scores a move that removes `sources` and launches replacements costing `replacement_price` ($/h)
/// in every Balanced pool it touches: whether every one approves, and each one's score.
pub fn evaluate(sources: &[Source], replacement_price: f64, balanced: &dyn Fn(&str) -> bool, totals: &BTreeMap<String, PoolTotals>) -> (bool, BTreeMap<String, Score>) {
    let mut by_pool: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for s in sources {
        let e = by_pool.entry(s.pool.as_str()).or_default();
        e.0 += s.price;
        e.1 += s.disruption;
    }
    let source_price: f64 = sources.iter().map(|s| s.price).sum();
    let savings = source_price - replacement_price;
    let mut scores = BTreeMap::new();
    for (pool, (price, disruption)) in &by_pool {
        if !balanced(pool) {
            continue;
        }
        let share = if by_pool.len() > 1 && source_price > 0.0 { savings * price / source_price } else { savings };
        scores.insert(pool.to_string(), score(share, *disruption, totals.get(*pool).copied().unwrap_or_default()));
    }
    (scores.values().all(Score::approved), scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(pool: &str, price: f64, disruption: f64) -> Source {
        Source { pool: pool.into(), price, disruption }
    }

    #[test]
    fn the_score_is_the_savings_share_over_the_disruption_share() {
        let t = PoolTotals { cost: 1.0, disruption: 10.0 };
        let s = score(0.2, 4.0, t);
        assert!((s.value() - 0.5).abs() < 1e-12, "0.2 / 0.4");
        assert!(s.approved(), "exactly the threshold passes");
        assert!(!score(0.19, 4.0, t).approved());
        assert_eq!(score(-0.1, 1.0, t).value(), 0.0, "no saving: 0");
        assert_eq!(score(0.1, 0.0, t).value(), f64::INFINITY, "no disruption: +inf");
        assert!(!score(0.1, 1.0, PoolTotals::default()).approved(), "zero totals: nothing to compare against");
        assert_eq!(node_disruption([1.0, 2.5, -3.0]), 4.5, "1 + the positive eviction costs");
    }

    #[test]
    fn only_balanced_pools_are_scored_and_every_one_must_approve() {
        let totals: BTreeMap<String, PoolTotals> = [("b".to_string(), PoolTotals { cost: 1.0, disruption: 10.0 }), ("w".to_string(), PoolTotals { cost: 1.0, disruption: 10.0 })].into();
        let balanced = |p: &str| p == "b";
        // A single-pool move in a WhenEmptyOrUnderutilized pool: nothing to score.
        let (ok, scores) = evaluate(&[src("w", 0.1, 9.0)], 0.09, &balanced, &totals);
        assert!(ok && scores.is_empty());
        // Savings 0.3 split by source price: b gets 0.1 (score 0.1/0.2 = 0.5, passes), w is not scored.
        let (ok, scores) = evaluate(&[src("b", 0.1, 2.0), src("w", 0.2, 2.0)], 0.0, &balanced, &totals);
        assert!(ok);
        assert!((scores["b"].value() - 0.5).abs() < 1e-12);
        // The same with b's disruption doubled fails, and so does the whole move.
        let (ok, _) = evaluate(&[src("b", 0.1, 4.0), src("w", 0.2, 2.0)], 0.0, &balanced, &totals);
        assert!(!ok);
        assert!(passes_as_delete(&src("b", 0.2, 4.0), &balanced, &totals));
        assert!(!passes_as_delete(&src("b", 0.1, 4.0), &balanced, &totals));
        assert!(passes_as_delete(&src("w", 0.0, 10.0), &balanced, &totals), "not Balanced: always");
    }
}
