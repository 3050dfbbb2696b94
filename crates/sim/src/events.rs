//! The timeline: what happened, when. Every part of the simulator reports through these events, and
//! both outputs (the readable timeline and `-o json`) are renderings of them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::time::SimTime;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub at: SimTime,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The checker's verdict on a plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanVerdict {
    pub valid: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum EventKind {
    #[serde(rename_all = "camelCase")]
    Step {
        step: usize,
        action: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Applied { objects: String },
    #[serde(rename_all = "camelCase")]
    PodCreated { pod: String, owner: String },
    #[serde(rename_all = "camelCase")]
    PodDeleted { pod: String, reason: String },
    #[serde(rename_all = "camelCase")]
    ClaimCreated { claim: String, owner: String },
    #[serde(rename_all = "camelCase")]
    ClaimDeleted { claim: String, reason: String },
    /// A claim got a volume: provisioned (`zone` is where) or a pre-created one bound.
    #[serde(rename_all = "camelCase")]
    VolumeBound {
        claim: String,
        volume: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        mode: String,
    },
    /// kube-scheduler could not place the pod (logged when the reason changes).
    #[serde(rename_all = "camelCase")]
    Unschedulable { pod: String, message: String },
    /// kube-scheduler bound the pod. `planned` is where the latest plan had it, when that differs.
    #[serde(rename_all = "camelCase")]
    Bound {
        pod: String,
        node: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        planned: Option<String>,
    },
    /// A provisioning batch was planned.
    #[serde(rename_all = "camelCase")]
    Batch {
        batch: u32,
        pods: usize,
        solver: String,
        status: String,
        new_nodes: usize,
        cost_per_hour: f64,
        /// Pods the plan puts on nodes that exist or are in flight.
        on_existing: usize,
        unschedulable: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        check: Option<PlanVerdict>,
        /// Pods the plan puts on registered nodes, which kube-scheduler has just rejected there.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        disputed: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    BatchFailed { batch: u32, pods: usize, message: String },
    /// A NodeClaim was created and its instance requested.
    #[serde(rename_all = "camelCase")]
    Launch {
        node: String,
        node_pool: String,
        instance_type: String,
        zone: String,
        capacity_type: String,
        price_per_hour: f64,
        /// Labels beyond the well-known ones (values the plan chose for open NodePool keys, template
        /// labels).
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        labels: BTreeMap<String, String>,
        /// Pods the plan intends for it.
        pods: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    LaunchFailed { node: String, instance_type: String, zone: String, capacity_type: String, reason: String, unavailable_until: SimTime },
    #[serde(rename_all = "camelCase")]
    OfferingAvailable { instance_type: String, zone: String, capacity_type: String },
    #[serde(rename_all = "camelCase")]
    InstanceRunning { node: String, instance: String },
    #[serde(rename_all = "camelCase")]
    Registered { node: String },
    #[serde(rename_all = "camelCase")]
    NodeRemoved { node: String, reason: String },
    /// An interruption message about a node, and what the shared decision
    /// (`stowage_decide::interruption`) did: Karpenter's event reason, whether the NodeClaim is
    /// deleted, and the offering it marked unavailable, until when.
    #[serde(rename_all = "camelCase")]
    Interruption {
        node: String,
        instance: String,
        message: String,
        reason: String,
        deleted: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        unavailable: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        unavailable_until: Option<SimTime>,
    },
    /// The consolidation decision (`stowage_decide::consolidation`): nodes to remove once the
    /// replacements it launches are Ready.
    #[serde(rename_all = "camelCase")]
    Consolidation {
        remove: Vec<String>,
        replacements: usize,
        pods: usize,
        saving_per_hour: f64,
        disruption_cost: f64,
        cost_before: f64,
        cost_after: f64,
        lower_bound: f64,
        evaluations: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        check: Option<PlanVerdict>,
    },
    /// A consolidation whose replacements could not all be launched: nothing is removed.
    #[serde(rename_all = "camelCase")]
    ConsolidationAbandoned { remove: Vec<String>, reason: String },
    /// A drifted node (`stowage_decide::drift`) to replace: removed once its `replacements` are Ready
    /// (at once when it has no workload pod).
    #[serde(rename_all = "camelCase")]
    Drift {
        node: String,
        cause: String,
        replacements: usize,
        pods: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        check: Option<PlanVerdict>,
    },
    #[serde(rename_all = "camelCase")]
    Expectation { step: usize, held: usize, failed: usize },
    #[serde(rename_all = "camelCase")]
    SettleTimedOut { step: usize, max: String },
}

fn price(p: f64) -> String {
    format!("${p:.4}/h")
}

fn labels(l: &BTreeMap<String, String>) -> String {
    if l.is_empty() {
        return String::new();
    }
    let kv: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" [{}]", kv.join(", "))
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EventKind::*;
        match self {
            Step { step, action, note } => {
                write!(f, "step {step}: {action}")?;
                if let Some(n) = note {
                    write!(f, " ({n})")?;
                }
                Ok(())
            }
            Applied { objects } => write!(f, "  {objects}"),
            PodCreated { pod, owner } => write!(f, "created pod {pod} ({owner})"),
            PodDeleted { pod, reason } => write!(f, "deleted pod {pod} ({reason})"),
            ClaimCreated { claim, owner } => write!(f, "created claim {claim} ({owner})"),
            ClaimDeleted { claim, reason } => write!(f, "deleted claim {claim} ({reason})"),
            VolumeBound { claim, volume, zone, mode } => {
                write!(f, "volume {volume} bound to claim {claim} ({mode}")?;
                if let Some(z) = zone {
                    write!(f, ", zone {z}")?;
                }
                write!(f, ")")
            }
            Unschedulable { pod, message } => write!(f, "pending {pod}: {message}"),
            Bound { pod, node, planned } => {
                write!(f, "bound {pod} -> {node}")?;
                if let Some(p) = planned {
                    write!(f, "   (the plan had it on {p}: kube-scheduler chose otherwise)")?;
                }
                Ok(())
            }
            Batch { batch, pods, solver, status, new_nodes, cost_per_hour, on_existing, unschedulable, check, disputed } => {
                write!(f, "batch {batch}: {pods} pending pod(s) -> {solver} {status}: {new_nodes} new node(s) {}", price(*cost_per_hour))?;
                if *on_existing > 0 {
                    write!(f, ", {on_existing} pod(s) on existing or in-flight nodes")?;
                }
                if !unschedulable.is_empty() {
                    write!(f, ", unschedulable: {}", unschedulable.join(", "))?;
                }
                match check {
                    Some(c) if c.valid => write!(f, "; checker: valid")?,
                    Some(c) => write!(f, "; checker: INVALID ({})", c.violations.join("; "))?,
                    None => {}
                }
                if !disputed.is_empty() {
                    write!(f, "; on nodes kube-scheduler just rejected: {}", disputed.join(", "))?;
                }
                Ok(())
            }
            BatchFailed { batch, pods, message } => write!(f, "batch {batch}: {pods} pending pod(s) -> planning failed: {message}"),
            Launch { node, node_pool, instance_type, zone, capacity_type, price_per_hour, labels: l, pods } => write!(
                f,
                "launch {node}: {node_pool} {instance_type} {capacity_type} {zone} {}{} for {}",
                price(*price_per_hour),
                labels(l),
                if pods.is_empty() { "no pod".to_string() } else { pods.join(", ") }
            ),
            LaunchFailed { node, instance_type, zone, capacity_type, reason, unavailable_until } => {
                write!(f, "launch of {node} failed: {reason} for {instance_type} {capacity_type} {zone}; offering unavailable until {unavailable_until}")
            }
            OfferingAvailable { instance_type, zone, capacity_type } => write!(f, "offering {instance_type} {capacity_type} {zone} available again"),
            InstanceRunning { node, instance } => write!(f, "instance {instance} running for {node}"),
            Registered { node } => write!(f, "node {node} registered"),
            NodeRemoved { node, reason } => write!(f, "node {node} removed ({reason})"),
            Interruption { node, instance, message, reason, deleted, unavailable, unavailable_until } => {
                write!(f, "interruption message {message} for {node} ({instance}): {reason}")?;
                if *deleted {
                    write!(f, "; NodeClaim deleted, pods planned again")?;
                }
                match (unavailable, unavailable_until) {
                    (Some(o), Some(t)) => write!(f, "; offering {o} unavailable until {t}"),
                    _ => Ok(()),
                }
            }
            Consolidation { remove, replacements, pods, saving_per_hour, disruption_cost, cost_before, cost_after, lower_bound, evaluations, check } => {
                write!(
                    f,
                    "consolidation: remove {} ({pods} pod(s) to move) after {replacements} replacement(s) are Ready; saves {} against a disruption cost of {}; {} -> {} (lower bound {}, {evaluations} set(s) planned)",
                    remove.join(", "),
                    price(*saving_per_hour),
                    price(*disruption_cost),
                    price(*cost_before),
                    price(*cost_after),
                    price(*lower_bound)
                )?;
                match check {
                    Some(c) if c.valid => write!(f, "; checker: valid"),
                    Some(c) => write!(f, "; checker: INVALID ({})", c.violations.join("; ")),
                    None => Ok(()),
                }
            }
            ConsolidationAbandoned { remove, reason } => write!(f, "consolidation of {} abandoned: {reason}", remove.join(", ")),
            Drift { node, cause, replacements, pods, check } => {
                write!(f, "drift: {node} ({cause}): {pods} pod(s) to move after {replacements} replacement(s) are Ready")?;
                match check {
                    Some(c) if c.valid => write!(f, "; checker: valid"),
                    Some(c) => write!(f, "; checker: INVALID ({})", c.violations.join("; ")),
                    None => Ok(()),
                }
            }
            Expectation { step, held, failed } => {
                if *failed == 0 {
                    write!(f, "step {step}: all {held} expectation(s) hold")
                } else {
                    write!(f, "step {step}: {failed} of {} expectation(s) FAILED", held + failed)
                }
            }
            SettleTimedOut { step, max } => write!(f, "step {step}: still changing after {max} (settle max reached)"),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>12}  {}", self.at.to_string(), self.kind)
    }
}
