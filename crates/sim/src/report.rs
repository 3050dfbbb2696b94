//! What a run produced: the timeline, the expectations' verdicts, the final cluster and the bill, as
//! one serialisable [`Report`] (the `-o json` output) and as text for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::cloud::Cloud;
use super::events::Event;
use super::expect::Check;
use super::scenario::Scenario;
use super::time::SimTime;
use stowage_core::domain::Cluster;
use stowage_core::domain::labels::keys;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// Labels beyond the well-known ones.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Workload pods bound to it.
    pub pods: Vec<String>,
    pub daemon_pods: usize,
    /// `registered`, or `launching` for a NodeClaim in flight.
    pub state: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostPoint {
    pub at: SimTime,
    pub cost_per_hour: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRow {
    pub pod: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub file: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub solver: String,
    pub catalog: String,
    /// Every expectation held, every checked plan was valid and every settle step settled.
    pub passed: bool,
    pub ended_at: SimTime,
    pub batches: u32,
    pub checks: Vec<Check>,
    /// Batches whose plan the independent checker rejected.
    pub invalid_plans: Vec<u32>,
    /// Settle steps that hit their maximum.
    pub settle_timeouts: Vec<usize>,
    pub nodes: Vec<NodeRow>,
    pub pending: Vec<PendingRow>,
    pub cost_per_hour: f64,
    /// USD billed over the whole run.
    pub bill: f64,
    /// The cost per hour of the instances not terminated, at each moment it changed.
    pub cost_over_time: Vec<CostPoint>,
    pub synthetic_prices: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub timeline: Vec<Event>,
}

impl Report {
    pub fn failed_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.held)
    }
}

/// Label keys worth showing: not Kubernetes', Karpenter's or AWS's well-known ones (those are the
/// table's columns or follow from the instance type).
pub(crate) fn is_custom_label(key: &str) -> bool {
    const WELL_KNOWN: [&str; 9] = [
        "kubernetes.io/",
        "node.kubernetes.io/",
        "topology.kubernetes.io/",
        "beta.kubernetes.io/",
        "failure-domain.beta.kubernetes.io/",
        "karpenter.sh/",
        "karpenter.k8s.aws/",
        "topology.k8s.aws/",
        "node-role.kubernetes.io/",
    ];
    !WELL_KNOWN.iter().any(|p| key.starts_with(p))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    sc: &Scenario,
    solver: &str,
    now: SimTime,
    cluster: &Cluster,
    cloud: &Cloud,
    unschedulable: Vec<(String, String)>,
    timeline: Vec<Event>,
    checks: Vec<Check>,
    invalid_plans: Vec<u32>,
    settle_timeouts: Vec<usize>,
    batches: u32,
) -> Report {
    let messages: BTreeMap<String, String> = unschedulable.into_iter().collect();
    let mut nodes: Vec<NodeRow> = cluster
        .nodes
        .iter()
        .map(|n| {
            let label = |k: &str| n.label(k).unwrap_or("-").to_string();
            let on = cluster.pods.iter().filter(|p| p.node_name.as_deref() == Some(n.name.as_str()) && !p.is_terminal());
            let (daemons, workload): (Vec<_>, Vec<_>) = on.partition(|p| p.is_daemon());
            NodeRow {
                name: n.name.clone(),
                node_pool: n.nodepool.clone(),
                instance_type: label(keys::INSTANCE_TYPE),
                zone: label(keys::ZONE),
                capacity_type: label(keys::CAPACITY_TYPE),
                price_per_hour: cloud.instance(&n.name).map(|i| i.price_per_hour),
                labels: n.labels.iter().filter(|(k, _)| is_custom_label(k)).map(|(k, v)| (k.clone(), v.clone())).collect(),
                pods: workload.iter().map(|p| p.key()).collect(),
                daemon_pods: daemons.len(),
                state: if n.in_flight { "launching".into() } else { "registered".into() },
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let pending = cluster
        .pending()
        .into_iter()
        .map(|id| {
            let key = cluster.pod(id).key();
            let message = messages.get(&key).cloned().unwrap_or_else(|| "not yet seen by kube-scheduler".into());
            PendingRow { pod: key, message }
        })
        .collect();
    let synthetic_prices = cloud
        .instances()
        .iter()
        .any(|i| sc.settings.catalog.get(&i.instance_type).and_then(|t| t.offerings.iter().find(|o| o.zone == i.zone && o.capacity_type == i.capacity_type)).is_some_and(|o| o.synthetic));
    let passed = checks.iter().all(|c| c.held) && invalid_plans.is_empty() && settle_timeouts.is_empty();
    Report {
        scenario: sc.name.clone(),
        file: sc.file.clone(),
        description: sc.description.clone(),
        solver: solver.to_string(),
        catalog: sc.settings.catalog_name.clone(),
        passed,
        ended_at: now,
        batches,
        checks,
        invalid_plans,
        settle_timeouts,
        nodes,
        pending,
        cost_per_hour: cloud.cost_per_hour(),
        bill: cloud.bill(now),
        cost_over_time: Vec::new(),
        synthetic_prices,
        warnings: sc.warnings.clone(),
        timeline,
    }
}

/// Left-aligned columns.
fn columns(rows: &[Vec<String>], indent: &str) -> String {
    let mut widths = vec![0; rows.iter().map(Vec::len).max().unwrap_or(0)];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(indent);
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The text a person reads: timeline, final state, expectations, verdict.
pub fn render(r: &Report, with_timeline: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "=== {}", r.scenario);
    if !r.description.is_empty() {
        for line in r.description.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out, "    {}; planner {}; catalog {}", r.file, r.solver, r.catalog);
    for w in &r.warnings {
        let _ = writeln!(out, "    warning: {w}");
    }
    if with_timeline {
        let _ = writeln!(out, "\ntimeline");
        for e in &r.timeline {
            let _ = writeln!(out, "{e}");
        }
    }
    let _ = writeln!(out, "\nfinal state at {}", r.ended_at);
    if r.nodes.is_empty() {
        let _ = writeln!(out, "  no nodes");
    } else {
        let mut rows = vec![["NODE", "POOL", "TYPE", "ZONE", "CAPACITY", "$/H", "LABELS", "PODS"].map(String::from).to_vec()];
        for n in &r.nodes {
            let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut pods = n.pods.join(",");
            if n.daemon_pods > 0 {
                let _ = write!(pods, "{}+{} daemon", if pods.is_empty() { "" } else { " " }, n.daemon_pods);
            }
            if pods.is_empty() {
                pods = "-".into();
            }
            rows.push(vec![
                if n.state == "registered" { n.name.clone() } else { format!("{} ({})", n.name, n.state) },
                n.node_pool.clone().unwrap_or_else(|| "-".into()),
                n.instance_type.clone(),
                n.zone.clone(),
                n.capacity_type.clone(),
                n.price_per_hour.map(|p| format!("{p:.4}")).unwrap_or_else(|| "?".into()),
                if labels.is_empty() { "-".into() } else { labels.join(",") },
                pods,
            ]);
        }
        out.push_str(&columns(&rows, "  "));
    }
    if r.pending.is_empty() {
        let _ = writeln!(out, "  pending pods: none");
    } else {
        let _ = writeln!(out, "  pending pods:");
        for p in &r.pending {
            let _ = writeln!(out, "    {}: {}", p.pod, p.message);
        }
    }
    let _ = writeln!(out, "  cost ${:.4}/h now; billed ${:.4} over {}{}", r.cost_per_hour, r.bill, r.ended_at, if r.synthetic_prices { " (spot prices are synthetic)" } else { "" });
    if !r.cost_over_time.is_empty() {
        let points: Vec<String> = r.cost_over_time.iter().map(|c| format!("{} ${:.4}/h", c.at, c.cost_per_hour)).collect();
        let _ = writeln!(out, "  cost over time: {}", points.join(", "));
    }
    let _ = writeln!(out, "\nexpectations");
    if r.checks.is_empty() {
        let _ = writeln!(out, "  (none)");
    } else {
        let rows: Vec<Vec<String>> =
            r.checks.iter().map(|c| vec![if c.held { "ok".into() } else { "FAIL".into() }, format!("step {}", c.step), c.expectation.clone(), format!("observed {}", c.observed)]).collect();
        out.push_str(&columns(&rows, "  "));
    }
    let plans = if r.invalid_plans.is_empty() {
        format!("{} batch(es) planned; every plan the checker saw is valid", r.batches)
    } else {
        format!("{} batch(es) planned; the checker REJECTED the plans of batch(es) {:?}", r.batches, r.invalid_plans)
    };
    let _ = writeln!(out, "  {plans}");
    for s in &r.settle_timeouts {
        let _ = writeln!(out, "  step {s}: did not settle within its maximum");
    }
    let held = r.checks.iter().filter(|c| c.held).count();
    let _ = writeln!(out, "\n{}: {}  ({held} of {} expectations hold)\n", r.scenario, if r.passed { "PASS" } else { "FAIL" }, r.checks.len());
    out
}
