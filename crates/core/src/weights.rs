//! The cost-weight configuration (`stowage.dev/weights/v1`): every term of the objective the planners
//! minimise. Defaults ship in models/weights/default.yaml, where each field is documented.

use serde::{Deserialize, Serialize};

pub use crate::semantics::min_values::MinValuesPolicy;
pub use crate::semantics::preferences::PreferencePolicy;
pub use crate::semantics::spread::HostnameSpread;
pub use crate::semantics::spread_defaults::SpreadDefaults;

pub const SCHEMA: &str = "stowage.dev/weights/v1";
pub const DEFAULT_YAML: &str = include_str!("../../../models/weights/default.yaml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spot {
    pub price_multiplier: f64,
    pub per_node: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Soft {
    pub preferred_node_affinity: f64,
    pub preferred_pod_affinity: f64,
    pub preferred_pod_anti_affinity: f64,
    pub schedule_anyway_spread: f64,
    /// Per pod on a node with a PreferNoSchedule taint it does not tolerate, per such taint. Weights
    /// files written before it existed get the default.
    #[serde(default = "default_prefer_no_schedule")]
    pub prefer_no_schedule: f64,
}

/// `soft.preferNoSchedule` of models/weights/default.yaml (a test keeps them equal).
fn default_prefer_no_schedule() -> f64 {
    0.001
}

/// What consolidation charges for moving pods, in $/h (`stowage_decide::consolidation`, its module
/// doc's Objective). Weights files written before it existed get the defaults, which equal
/// models/weights/default.yaml's (a test keeps them equal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsolidationCosts {
    /// Per unit of a moved pod's eviction cost (Karpenter's: 1 for an ordinary pod).
    pub pod_move_cost: f64,
    /// A move is made only when its saving beats its disruption cost by this margin.
    pub min_saving: f64,
    /// A pod whose controller had a pod moved `age` seconds ago costs
    /// `1 + recentMoveFactor × max(0, 1 − age / recentMoveWindowSeconds)` times as much to move.
    pub recent_move_factor: f64,
    pub recent_move_window_seconds: f64,
    /// A Running pod of a Job loses the work it has done when it moves (the Job runs it again from
    /// the start): `elapsed × share of its node × node cost` dollars, charged as that sum repaid
    /// within this many seconds ($/h = that sum × 3600 / this). 0 turns the charge off. A file
    /// written before it existed gets the default.
    #[serde(default = "default_job_lost_work_payback_seconds")]
    pub job_lost_work_payback_seconds: f64,
}

fn default_job_lost_work_payback_seconds() -> f64 {
    60.0
}

impl Default for ConsolidationCosts {
    fn default() -> Self {
        ConsolidationCosts {
            pod_move_cost: 0.002,
            min_saving: 0.005,
            recent_move_factor: 1.0,
            recent_move_window_seconds: 3600.0,
            job_lost_work_payback_seconds: default_job_lost_work_payback_seconds(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Weights {
    pub schema: String,
    pub price: f64,
    pub per_node: f64,
    pub spot: Spot,
    pub unschedulable_pod: f64,
    pub node_pool_weight: f64,
    pub soft: Soft,
    pub tie_break: f64,
    /// How hard `kubernetes.io/hostname` spreads are planned on new nodes (`intent`, the default, or
    /// `exact`); not a cost, but a planning setting the plan file records (`semantics::spread`).
    #[serde(default)]
    pub hostname_spread: HostnameSpread,
    /// Karpenter's `minValuesPolicy` (`Strict`, the default, or `BestEffort`); not a cost, but a
    /// planning setting the plan file records (`semantics::min_values`).
    #[serde(default)]
    pub min_values_policy: MinValuesPolicy,
    /// Karpenter's `preferencePolicy` (`Respect`, the default, or `Ignore`) or `Priced` (the `soft`
    /// terms above); not a cost, but a planning setting the plan file records
    /// (`semantics::preferences`). The `soft` weights count only under `Priced`.
    #[serde(default)]
    pub preference_policy: PreferencePolicy,
    /// kube-scheduler's PodTopologySpread `defaultingType` and `defaultConstraints` (default System);
    /// not a cost, but how the workload's pods get cluster-default spread constraints
    /// (`semantics::spread_defaults`). Applied when the workload is built; plans record it.
    #[serde(default)]
    pub topology_spread_defaults: SpreadDefaults,
    /// What consolidating underutilised nodes charges for moving pods; not a term of a batch's plan.
    #[serde(default)]
    pub consolidation: ConsolidationCosts,
    /// Where the weights came from, for reports.
    #[serde(skip)]
    pub source: String,
}

/// The finest step of catalog prices, in $/h: catalogs quote at most six decimals (AWS's price list,
/// the embedded catalog, the test catalogs).
pub const PRICE_RESOLUTION: f64 = 1e-6;

/// Ties between plans of equal price (issue 15, behaviour 11): added to every new node's cost, so that
/// of two plans with the same price the one with fewer nodes costs less; among those, the planners'
/// explicit orders (configurations by cost, NodePool, type, zone, capacity type and labels; pods in
/// input order) make the choice stable.
///
/// Bound: a plan launches at most one node per pending pod (empty new nodes are dropped), so with
/// `pods` pending the tie-break of a whole plan is below `pods · PRICE_RESOLUTION / (pods + 1) <
/// PRICE_RESOLUTION`. Two plans whose prices differ (sums of catalog prices, so by a multiple of
/// PRICE_RESOLUTION) therefore never swap order because of it. (A spot price multiplier other than 1
/// makes finer price differences; the tie-break is still below PRICE_RESOLUTION in total.)
pub fn node_tie_break(pods: usize) -> f64 {
    PRICE_RESOLUTION / (pods as f64 + 1.0)
}

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct WeightsError {
    pub file: String,
    pub message: String,
}

impl Default for Weights {
    fn default() -> Self {
        Weights::parse("<embedded models/weights/default.yaml>", DEFAULT_YAML).expect("the default weights are valid (tested)")
    }
}

impl Weights {
    pub fn parse(file: &str, text: &str) -> Result<Weights, WeightsError> {
        let err = |message: String| WeightsError { file: file.to_string(), message };
        // Through serde_path_to_error, so that a value of the wrong type names its field (`spot.perNode`).
        let mut path = String::new();
        let mut w: Weights = serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize::<_, Weights>(de).map_err(|e| {
                path = e.path().to_string();
                e.into_inner()
            })
        })
        .map_err(|e| match path.as_str() {
            "" | "." => err(format!("{e}")),
            p => err(format!("{p}: {e}")),
        })?;
        if w.schema != SCHEMA {
            return Err(err(format!("schema: expected {SCHEMA:?}, got {:?}", w.schema)));
        }
        let fields = [
            ("price", w.price),
            ("perNode", w.per_node),
            ("spot.priceMultiplier", w.spot.price_multiplier),
            ("spot.perNode", w.spot.per_node),
            ("unschedulablePod", w.unschedulable_pod),
            ("nodePoolWeight", w.node_pool_weight),
            ("soft.preferredNodeAffinity", w.soft.preferred_node_affinity),
            ("soft.preferredPodAffinity", w.soft.preferred_pod_affinity),
            ("soft.preferredPodAntiAffinity", w.soft.preferred_pod_anti_affinity),
            ("soft.scheduleAnywaySpread", w.soft.schedule_anyway_spread),
            ("soft.preferNoSchedule", w.soft.prefer_no_schedule),
            ("tieBreak", w.tie_break),
            ("consolidation.podMoveCost", w.consolidation.pod_move_cost),
            ("consolidation.minSaving", w.consolidation.min_saving),
            ("consolidation.recentMoveFactor", w.consolidation.recent_move_factor),
            ("consolidation.recentMoveWindowSeconds", w.consolidation.recent_move_window_seconds),
            ("consolidation.jobLostWorkPaybackSeconds", w.consolidation.job_lost_work_payback_seconds),
        ];
        for (name, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return Err(err(format!("{name}: must be a non-negative number, got {v}")));
            }
        }
        if w.price <= 0.0 {
            return Err(err("price: must be positive (a zero price weight makes every node free)".into()));
        }
        if w.spot.price_multiplier <= 0.0 {
            return Err(err("spot.priceMultiplier: must be positive".into()));
        }
        if w.unschedulable_pod <= 0.0 {
            return Err(err("unschedulablePod: must be positive so that pods are placed when they can be".into()));
        }
        if w.tie_break > 0.01 {
            return Err(err(format!("tieBreak: {} is not a tie-breaker; keep it at most 0.01", w.tie_break)));
        }
        w.topology_spread_defaults.validate("topologySpreadDefaults").map_err(err)?;
        w.source = file.to_string();
        Ok(w)
    }

    /// These weights with every `soft` term zero: what `Respect` and `Ignore` plan with (a preference is
    /// kept as a requirement or dropped, never priced).
    pub fn without_preference_prices(&self) -> Weights {
        let soft = Soft { preferred_node_affinity: 0.0, preferred_pod_affinity: 0.0, preferred_pod_anti_affinity: 0.0, schedule_anyway_spread: 0.0, prefer_no_schedule: 0.0 };
        Weights { soft, ..self.clone() }
    }

    /// The objective cost of one new node: weighted price, per-node terms and the NodePool-weight term.
    pub fn node_cost(&self, price: f64, spot: bool, pool_weight_deficit: i32) -> f64 {
        let p = if spot { price * self.spot.price_multiplier + self.spot.per_node } else { price };
        self.price * p + self.per_node + self.node_pool_weight * pool_weight_deficit.max(0) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let w = Weights::default();
        assert_eq!(w.price, 1.0);
        assert!(w.unschedulable_pod > 1000.0);
    }

    #[test]
    fn consolidation_costs_default_to_the_shipped_file_and_are_validated() {
        assert_eq!(Weights::default().consolidation, ConsolidationCosts::default());
        let start = DEFAULT_YAML.find("\nconsolidation:").expect("the shipped file has the section");
        let end = start + DEFAULT_YAML[start..].find("\n\n").expect("a blank line ends the section");
        let without = format!("{}{}", &DEFAULT_YAML[..start], &DEFAULT_YAML[end..]);
        assert!(!without.contains("podMoveCost"));
        let w = Weights::parse("old.yaml", &without).unwrap();
        assert_eq!(w.consolidation, ConsolidationCosts::default(), "a file written before the section gets the defaults");
        let negative = DEFAULT_YAML.replace("  podMoveCost: 0.002", "  podMoveCost: -1");
        let e = Weights::parse("w.yaml", &negative).unwrap_err().to_string();
        assert!(e.contains("w.yaml") && e.contains("consolidation.podMoveCost"), "{e}");
        let older = DEFAULT_YAML.replace("  jobLostWorkPaybackSeconds: 60\n", "");
        assert_ne!(older, DEFAULT_YAML, "the shipped file sets jobLostWorkPaybackSeconds");
        let w = Weights::parse("older.yaml", &older).unwrap();
        assert_eq!(w.consolidation, ConsolidationCosts::default(), "a section written before jobLostWorkPaybackSeconds gets its default");
        let unknown = DEFAULT_YAML.replace("  minSaving: 0.005", "  minSaving: 0.005\n  minSavings: 1");
        let e = Weights::parse("w.yaml", &unknown).unwrap_err().to_string();
        assert!(e.contains("minSavings"), "{e}");
    }

    #[test]
    fn the_node_tie_break_never_outweighs_a_price_step() {
        // At most one new node per pending pod.
        for pods in [1usize, 7, 1_000, 150_000] {
            assert!(pods as f64 * node_tie_break(pods) < PRICE_RESOLUTION, "{pods} pods");
            assert!(node_tie_break(pods) > 0.0);
        }
        // One node at twice the price of two: equal price, one node fewer wins.
        let t = node_tie_break(2);
        assert!(0.2 + t < 2.0 * (0.1 + t));
        assert!(0.2 + t > 0.1 + 2.0 * t + 0.1 - PRICE_RESOLUTION);
    }

    #[test]
    fn files_without_the_newer_fields_get_the_defaults() {
        let w = Weights::default();
        assert_eq!(w.soft.prefer_no_schedule, default_prefer_no_schedule());
        assert_eq!(w.hostname_spread, HostnameSpread::Intent);
        let old: String = DEFAULT_YAML.lines().filter(|l| !l.starts_with("  preferNoSchedule:") && !l.starts_with("hostnameSpread:")).map(|l| format!("{l}\n")).collect();
        let o = Weights::parse("old.yaml", &old).expect("an older weights file parses");
        assert_eq!(o.soft.prefer_no_schedule, w.soft.prefer_no_schedule);
        assert_eq!(o.hostname_spread, HostnameSpread::Intent);
        let exact = DEFAULT_YAML.replace("hostnameSpread: intent", "hostnameSpread: exact");
        assert_eq!(Weights::parse("w.yaml", &exact).expect("parses").hostname_spread, HostnameSpread::Exact);
        let bad = DEFAULT_YAML.replace("hostnameSpread: intent", "hostnameSpread: loose");
        let e = Weights::parse("w.yaml", &bad).unwrap_err().to_string();
        assert!(e.contains("hostnameSpread"), "{e}");
    }

    #[test]
    fn min_values_policy_is_strict_unless_the_file_says_best_effort() {
        assert_eq!(Weights::default().min_values_policy, MinValuesPolicy::Strict);
        let old: String = DEFAULT_YAML.lines().filter(|l| !l.starts_with("minValuesPolicy:")).map(|l| format!("{l}\n")).collect();
        assert_eq!(Weights::parse("old.yaml", &old).expect("parses").min_values_policy, MinValuesPolicy::Strict);
        let be = DEFAULT_YAML.replace("minValuesPolicy: Strict", "minValuesPolicy: BestEffort");
        assert_eq!(Weights::parse("w.yaml", &be).expect("parses").min_values_policy, MinValuesPolicy::BestEffort);
        let bad = DEFAULT_YAML.replace("minValuesPolicy: Strict", "minValuesPolicy: strict");
        let e = Weights::parse("w.yaml", &bad).unwrap_err().to_string();
        assert!(e.contains("w.yaml") && e.contains("minValuesPolicy"), "{e}");
    }

    #[test]
    fn invalid_weights_say_which_field() {
        let bad = DEFAULT_YAML.replace("perNode: 0.0\n\nspot", "perNode: -1\n\nspot");
        let e = Weights::parse("w.yaml", &bad).unwrap_err().to_string();
        assert!(e.contains("w.yaml") && e.contains("perNode"), "{e}");
        let unknown = format!("{DEFAULT_YAML}\nbogus: 1\n");
        assert!(Weights::parse("w.yaml", &unknown).is_err());
    }
}
