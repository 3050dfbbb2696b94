//! What both controllers are given alike: the instance types and their offerings (one catalog, as an
//! EC2NodeClass sees stowage's embedded catalog, so Karpenter's KWOK Nodes and stowage's fake-cloud
//! Nodes have the allocatable stowage plans with), and one NodePool, written once for each controller's
//! node class kind.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use stowage_core::domain::catalog::Catalog;
use stowage_core::weights::{ConsolidationCosts, Weights};

/// The EC2NodeClass stowage reads (the scenarios' common one).
const EC2_NODECLASS: &str = include_str!("../../../scenarios/common-ec2nodeclass.yaml");

/// Default instance types: current general, compute and memory families, large to 4xlarge.
pub const DEFAULT_TYPES: [&str; 18] = [
    "c6i.large",
    "c6i.xlarge",
    "c6i.2xlarge",
    "c6i.4xlarge",
    "m6i.large",
    "m6i.xlarge",
    "m6i.2xlarge",
    "m6i.4xlarge",
    "r6i.large",
    "r6i.xlarge",
    "r6i.2xlarge",
    "r6i.4xlarge",
    "c6a.xlarge",
    "c6a.2xlarge",
    "m6a.xlarge",
    "m6a.2xlarge",
    "r6a.xlarge",
    "r6a.2xlarge",
];
/// Default zones.
pub const DEFAULT_ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

#[derive(Clone, Debug)]
pub struct Setup {
    /// The offerings both controllers see (on-demand only by default: real prices; the catalog's spot
    /// prices are synthetic).
    pub catalog: Catalog,
    pub capacity_types: Vec<String>,
    /// The NodePool's disruption budget (`nodes`), Karpenter's default `10%` unless stated.
    pub budget: String,
    /// The NodePool's `consolidationPolicy`: `WhenEmptyOrUnderutilized` (Karpenter's default) unless
    /// stated; `WhenEmpty` gives each controller's bill without consolidation, the baseline of its
    /// moves per saved dollar.
    pub consolidation_policy: String,
    /// stowage's cost weights (the embedded default unless stated); their consolidation durations are
    /// compressed with the timers ([`Timing::consolidation_costs`]).
    pub stowage_weights: Weights,
}

impl Setup {
    /// The embedded catalog as the common EC2NodeClass sees it, restricted to `types` and `zones`.
    pub fn new(types: &[String], zones: &[String], capacity_types: &[String], budget: &str) -> Result<Setup, String> {
        let w = stowage_input::load_texts([(std::path::Path::new("scenarios/common-ec2nodeclass.yaml"), EC2_NODECLASS)]).map_err(|e| e.to_string())?;
        let nc = w.cluster.nodeclasses.first().ok_or("the common EC2NodeClass did not load")?;
        let view = stowage_core::catalog::for_nodeclass(stowage_input::catalog::default_catalog(), nc);
        let mut catalog = restrict(&view, types, zones);
        for t in &mut catalog.types {
            t.offerings.retain(|o| capacity_types.contains(&o.capacity_type));
        }
        catalog.types.retain(|t| !t.offerings.is_empty());
        let missing: Vec<&String> = types.iter().filter(|t| catalog.get(t).is_none()).collect();
        if !missing.is_empty() {
            return Err(format!("instance types with no offering in {zones:?} ({capacity_types:?}) in the embedded catalog: {missing:?}"));
        }
        Ok(Setup { catalog, capacity_types: capacity_types.to_vec(), budget: budget.to_string(), consolidation_policy: "WhenEmptyOrUnderutilized".to_string(), stowage_weights: Weights::default() })
    }

    pub fn default_setup() -> Setup {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Setup::new(&s(&DEFAULT_TYPES), &s(&DEFAULT_ZONES), &s(&["on-demand"]), "10%").expect("the default types have on-demand offerings in the default zones (tested)")
    }

    fn nodepool(&self, timing: Timing, node_class_ref: Value) -> Value {
        let types: Vec<&str> = self.catalog.types.iter().map(|t| t.name.as_str()).collect();
        let zones: Vec<&str> = self.catalog.zones.iter().map(String::as_str).collect();
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {
                "template": {"spec": {
                    "nodeClassRef": node_class_ref,
                    "expireAfter": "Never",
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": self.capacity_types},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                }},
                "disruption": {
                    "consolidationPolicy": self.consolidation_policy,
                    "consolidateAfter": format!("{}s", (timing.consolidate_after_s / timing.compression).round().max(0.0)),
                    "budgets": [{"nodes": self.budget}],
                },
            },
        })
    }

    /// Karpenter's objects: a KWOKNodeClass with the boot delay, and the NodePool.
    pub fn karpenter_objects(&self, timing: Timing) -> Vec<Value> {
        let delay = format!("{}s", timing.boot_wall().as_secs());
        vec![
            json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {"nodeRegistrationDelay": delay}}),
            self.nodepool(timing, json!({"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"})),
        ]
    }

    /// stowage's objects: the common EC2NodeClass and the NodePool (the boot delay is the fake cloud's).
    pub fn stowage_objects(&self, timing: Timing) -> Vec<Value> {
        let nc: Value = serde_saphyr::from_str(EC2_NODECLASS).expect("the embedded EC2NodeClass is valid YAML (tested)");
        vec![nc, self.nodepool(timing, json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}))]
    }
}

/// How history time maps to wall time, and the delays both clouds share.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Timing {
    /// History seconds per wall second.
    pub compression: f64,
    /// History seconds from launch to the Node object (instance boot and kubelet start).
    pub boot_s: f64,
    /// The NodePool's `consolidateAfter`, history seconds.
    pub consolidate_after_s: f64,
    /// Whether the controllers' own fixed wall-clock timers (disruption poll, command validation,
    /// termination retries, Karpenter's orchestration backoff and minimum drain) are compressed too ([`Timing::controller_timer`]); without
    /// it they run at their real-time values, which at compression k makes each k times slower in
    /// history time (and Karpenter's far more than stowage's: docs/lifetime.md §4).
    pub scale_timers: bool,
}

/// The least a scaled controller timer becomes (Karpenter's side: peers/karpenter/timescale/).
pub const TIMER_FLOOR: Duration = Duration::from_millis(100);

impl Timing {
    pub fn wall(&self, history_s: f64) -> Duration {
        Duration::from_secs_f64((history_s / self.compression).max(0.0))
    }

    /// The boot delay in wall time, whole seconds: the KWOKNodeClass's `nodeRegistrationDelay` takes
    /// no finer unit, and the fake cloud uses the same value.
    pub fn boot_wall(&self) -> Duration {
        Duration::from_secs(self.wall(self.boot_s).as_secs_f64().round() as u64)
    }

    /// What the controllers' fixed timers are divided by: the compression when they are scaled, else 1.
    /// Karpenter's operator reads it as `STOWAGE_TIME_SCALE`.
    pub fn timer_scale(&self) -> f64 {
        if self.scale_timers { self.compression.max(1.0) } else { 1.0 }
    }

    /// A controller's fixed wall-clock timer `d` under this timing: `d / timer_scale`, not below
    /// [`TIMER_FLOOR`], never above `d` (the formula of Karpenter's patched side).
    pub fn controller_timer(&self, d: Duration) -> Duration {
        if self.timer_scale() <= 1.0 {
            return d;
        }
        d.min(d.div_f64(self.timer_scale()).max(TIMER_FLOOR))
    }

    /// stowage's consolidation costs under this timing: the two durations in them (the recent-move
    /// window and a Job's lost-work payback) are history seconds, so they are divided by
    /// [`Timing::timer_scale`] like the timers (no floor: they are not polls). The Jobs' `startTime`s
    /// and the controller's clock are wall time, so an uncompressed payback would charge a task k times
    /// less than its history run time asks.
    pub fn consolidation_costs(&self, c: &ConsolidationCosts) -> ConsolidationCosts {
        let k = self.timer_scale();
        ConsolidationCosts { recent_move_window_seconds: c.recent_move_window_seconds / k, job_lost_work_payback_seconds: c.job_lost_work_payback_seconds / k, ..c.clone() }
    }
}

/// The catalog restricted to `types` (all when empty) and `zones`.
pub fn restrict(catalog: &Catalog, types: &[String], zones: &[String]) -> Catalog {
    let mut c = catalog.clone();
    c.types.retain(|t| types.is_empty() || types.contains(&t.name));
    for t in &mut c.types {
        t.offerings.retain(|o| zones.contains(&o.zone));
    }
    c.types.retain(|t| !t.offerings.is_empty());
    c.zones.retain(|z| zones.contains(z));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_setup_has_every_type_in_every_zone_on_demand() {
        let s = Setup::default_setup();
        assert_eq!(s.catalog.types.len(), DEFAULT_TYPES.len());
        assert!(s.catalog.types.iter().all(|t| t.offerings.len() == DEFAULT_ZONES.len() && t.offerings.iter().all(|o| o.capacity_type == "on-demand" && !o.synthetic)));
    }

    #[test]
    fn both_nodepools_say_the_same_but_the_node_class() {
        let s = Setup::default_setup();
        let t = Timing { compression: 10.0, boot_s: 60.0, consolidate_after_s: 300.0, scale_timers: true };
        let (k, st) = (s.karpenter_objects(t), s.stowage_objects(t));
        assert_eq!(k[0]["spec"]["nodeRegistrationDelay"], "6s");
        assert_eq!(st[0]["kind"], "EC2NodeClass");
        let mut kp = k[1].clone();
        let mut sp = st[1].clone();
        assert_eq!(kp["spec"]["disruption"]["consolidateAfter"], "30s");
        kp["spec"]["template"]["spec"]["nodeClassRef"] = Value::Null;
        sp["spec"]["template"]["spec"]["nodeClassRef"] = Value::Null;
        assert_eq!(kp, sp);
    }

    #[test]
    fn an_unknown_type_is_refused_by_name() {
        let e = Setup::new(&["c6i.large".into(), "z9.huge".into()], &["us-east-1a".into()], &["on-demand".into()], "10%").unwrap_err();
        assert!(e.contains("z9.huge"), "{e}");
    }

    #[test]
    fn scaled_controller_timers_divide_by_the_compression_down_to_the_floor() {
        let t = Timing { compression: 60.0, boot_s: 60.0, consolidate_after_s: 300.0, scale_timers: true };
        assert_eq!(t.timer_scale(), 60.0);
        assert_eq!(t.controller_timer(Duration::from_secs(15)), Duration::from_millis(250));
        assert_eq!(t.controller_timer(Duration::from_secs(2)), TIMER_FLOOR, "2 s / 60 is below the floor");
        assert_eq!(t.controller_timer(Duration::from_millis(50)), Duration::from_millis(50), "never above the timer itself");
        let real = Timing { scale_timers: false, ..t };
        assert_eq!(real.timer_scale(), 1.0);
        assert_eq!(real.controller_timer(Duration::from_secs(15)), Duration::from_secs(15));
        let c = ConsolidationCosts::default();
        let scaled = t.consolidation_costs(&c);
        assert_eq!((scaled.recent_move_window_seconds, scaled.job_lost_work_payback_seconds), (60.0, 1.0), "an hour and a minute of history at 60x");
        assert_eq!((scaled.pod_move_cost, scaled.min_saving), (c.pod_move_cost, c.min_saving), "the dollar terms stay");
        assert_eq!(real.consolidation_costs(&c), c);
    }
}
