//! Consolidation decision time (issue 17, "Measure"): a seeded cluster at rest and one timed
//! `stowage_decide::consolidation::Consolidation::decide` over it, with the planner the controller uses.
//!
//! # The cluster ([`cluster_text`])
//!
//! `nodes` managed nodes of one `WhenEmptyOrUnderutilized` NodePool (c, m, r; on-demand; amd64;
//! `consolidateAfter: 5m`, budget `nodes: 10%`), their types drawn from [`NODE_TYPES`] (2 to 8 vCPU)
//! and their zones round-robin over three zones, each running the EKS DaemonSets' pods
//! ([`crate::daemonsets`]). Deployments (one per four nodes: a CPU request of 100m to 2 and 1 to 8 GiB
//! per core) have their replicas bound to the nodes, as ReplicaSet-owned Running pods: each node is
//! filled, with replicas of Deployments drawn at random, up to a CPU share drawn per node — 10-35 %
//! for 45 % of the nodes (the underutilised ones), 50-90 % for the rest — without exceeding its
//! memory. A third of the Deployments with two replicas or more have a PodDisruptionBudget
//! (`maxUnavailable: 1` or `minAvailable: 50%`); a tenth of the pods carry a
//! `controller.kubernetes.io/pod-deletion-cost`. Same seed, same cluster.
//!
//! # The measurement ([`measure`])
//!
//! The round is judged 10 minutes after the pods were observed (so `consolidateAfter` has passed), with
//! the default consolidation settings, the default weights, at most 20 instance types per NodeClaim
//! and the planner given (the controller's default is the MILP driver with a 1 s budget). Timing is
//! taken from outside the decision, through the `Planner` seam: the planner is wrapped so that each
//! evaluation's planning call is timed and its plan's solver phases are kept. What is not inside a
//! planner call is attributed by where it falls: before the first call (the candidates, their ranking,
//! the lower bound, the PDB allowances and the first evaluation's displaced cluster), between calls
//! (the previous evaluation's kube-scheduler replay and rule checks, and the next displaced cluster),
//! and after the last call.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};

use crate::BenchError;
use crate::corpus::list_text;
use crate::mixed::{ZONES, container, existing_node, req};
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::plan::Plan;
use stowage_core::solve::Planner as SolvePlanner;
use stowage_core::weights::Weights;
use stowage_decide::consolidation::{Consolidation, Decision, Input, NodeSetReport, Outcome, POD_DELETION_COST, Settings};
use stowage_decide::provision::{self, PlanError, Planner};
use stowage_input::Workload;
use stowage_input::catalog;

/// The instance types of the generated nodes, drawn uniformly.
pub const NODE_TYPES: [&str; 10] = ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.large", "r5.xlarge", "m6i.xlarge", "c6i.2xlarge", "r6i.xlarge"];
/// CPU requests of the Deployments (millicores), drawn uniformly.
const CPU_MILLIS: [u32; 6] = [100, 250, 250, 500, 1000, 2000];
/// GiB of memory per core requested, drawn uniformly.
const GIB_PER_CORE: [u32; 5] = [1, 2, 2, 4, 8];
/// The EKS DaemonSets' requests per node ([`crate::daemonsets`]).
const DAEMON_CPU_MILLIS: u32 = 585;
const DAEMON_MEMORY_MIB: u64 = 490;
/// The pool's `consolidateAfter`, and when the round is judged after the pods were observed.
pub const CONSOLIDATE_AFTER: Duration = Duration::from_secs(300);
pub const JUDGED_AFTER: Duration = Duration::from_secs(600);

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub nodes: usize,
    pub seed: u64,
}

struct Deploy {
    name: String,
    cpu: u32,
    memory_mib: u64,
    replicas: usize,
}

/// The EC2NodeClass and the NodePool of the cluster.
fn pool_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "KarpenterNodeRole-bench", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}], "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": format!("{}s", CONSOLIDATE_AFTER.as_secs()), "budgets": [{"nodes": "10%"}]},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                    req("karpenter.k8s.aws/instance-category", "In", &["c", "m", "r"]),
                    req("karpenter.sh/capacity-type", "In", &["on-demand"]),
                    req("kubernetes.io/arch", "In", &["amd64"])]}}}}),
    ]
}

/// The cluster of `spec` as one `v1 List` (module doc).
pub fn cluster_text(spec: Spec) -> Result<String, BenchError> {
    let cat = catalog::default_catalog();
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut items: Vec<Value> = crate::daemonsets::namespaces();
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}));
    items.extend(crate::daemonsets::eks());
    items.extend(pool_objects());
    let mut deploys: Vec<Deploy> = (0..spec.nodes.div_ceil(4).max(1))
        .map(|i| {
            let cpu = *CPU_MILLIS.choose(&mut rng).unwrap_or(&250);
            let gib = *GIB_PER_CORE.choose(&mut rng).unwrap_or(&2);
            Deploy { name: format!("svc-{i:04}"), cpu, memory_mib: (cpu as u64 * gib as u64 * 1024 / 1000).max(64), replicas: 0 }
        })
        .collect();
    let mut pods: Vec<Value> = Vec::new();
    for n in 0..spec.nodes {
        let it_name = *NODE_TYPES.choose(&mut rng).unwrap_or(&"m5.xlarge");
        let it = cat.get(it_name).ok_or_else(|| BenchError::NotInCatalog { instance_type: it_name.to_string() })?;
        let alloc = it.allocatable();
        let name = format!("ip-10-{}-{}-{}.ec2.internal", n % 3, n / 250, n % 250 + 10);
        let mut node = existing_node(&name, it_name, "default", ZONES[n % 3], "on-demand", None)?;
        // A managed node that registered and initialized (Karpenter's labels on it).
        node["metadata"]["labels"]["karpenter.sh/registered"] = json!("true");
        node["metadata"]["labels"]["karpenter.sh/initialized"] = json!("true");
        items.push(node);
        items.extend(crate::daemonsets::pods_on(&name));
        let cpu_total = alloc.get("cpu") as u32;
        let mem_total = (alloc.get("memory") / (1024 * 1024)) as u64;
        let share = if rng.random_bool(0.45) { rng.random_range(0.10..0.35) } else { rng.random_range(0.50..0.90) };
        let mut cpu_left = ((cpu_total as f64 * share) as u32).min(cpu_total.saturating_sub(DAEMON_CPU_MILLIS));
        let mut mem_left = mem_total.saturating_sub(DAEMON_MEMORY_MIB);
        let mut pods_left = (alloc.get("pods") as usize).saturating_sub(crate::daemonsets::pods_on(&name).len());
        // Replicas of random Deployments until the node's share is used (a few misses end it).
        let mut misses = 0;
        while misses < 8 {
            let d = rng.random_range(0..deploys.len());
            let dep = &mut deploys[d];
            if dep.cpu > cpu_left || dep.memory_mib > mem_left || pods_left == 0 {
                misses += 1;
                continue;
            }
            cpu_left -= dep.cpu;
            mem_left -= dep.memory_mib;
            pods_left -= 1;
            let k = dep.replicas;
            dep.replicas += 1;
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{}-5d8f7c-{k:04}", dep.name), "namespace": "apps", "uid": format!("uid-{}-{k}", dep.name), "labels": {"app": dep.name},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{}-5d8f7c", dep.name), "uid": format!("rs-{}", dep.name), "controller": true}]},
                "spec": {"nodeName": name, "containers": container(&format!("{}m", dep.cpu), &format!("{}Mi", dep.memory_mib))},
                "status": {"phase": "Running"}
            });
            if rng.random_bool(0.1) {
                pod["metadata"]["annotations"] = json!({POD_DELETION_COST: rng.random_range(-100..1000).to_string()});
            }
            pods.push(pod);
        }
    }
    items.extend(pods);
    for d in deploys.iter().filter(|d| d.replicas >= 2) {
        if rng.random_bool(1.0 / 3.0) {
            let rule = if rng.random_bool(0.5) { json!({"maxUnavailable": 1}) } else { json!({"minAvailable": "50%"}) };
            let mut spec = json!({"selector": {"matchLabels": {"app": d.name}}});
            if let (Some(s), Some(r)) = (spec.as_object_mut(), rule.as_object()) {
                s.extend(r.clone());
            }
            items.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": d.name, "namespace": "apps"}, "spec": spec}));
        }
    }
    list_text(&items)
}

/// The cluster of `spec`, loaded.
pub fn cluster(spec: Spec) -> Result<Workload, String> {
    let text = cluster_text(spec).map_err(|e| e.to_string())?;
    let name = format!("consolidation-{}-seed{}.json", spec.nodes, spec.seed);
    let w = stowage_input::load_texts([(Path::new(&name), text.as_str())]).map_err(|e| e.to_string())?;
    if !w.cluster.pending().is_empty() {
        return Err(format!("{name}: {} pods pending; the generated cluster is meant to be at rest", w.cluster.pending().len()));
    }
    Ok(w)
}

/// One planning call of the search, timed.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// Since the decision started, and how long the planner ran.
    pub started_ms: f64,
    pub planner_ms: f64,
    /// Pods the call planned (the displaced ones).
    pub pending_pods: usize,
    pub status: String,
    /// The plan's own solver phases (problem build, greedy, MILP, ...).
    pub phases: Vec<(String, f64)>,
}

/// Wraps a planner and times every call (module doc).
struct Timed<'p> {
    inner: &'p mut dyn Planner,
    t0: Instant,
    calls: Vec<(Instant, Instant, Evaluation)>,
}

impl Planner for Timed<'_> {
    fn plan(&mut self, cluster: &Cluster, catalog: &Catalog, weights: &Weights) -> Result<Plan, PlanError> {
        let start = Instant::now();
        let r = self.inner.plan(cluster, catalog, weights);
        let end = Instant::now();
        let (status, phases) = match &r {
            Ok(p) => {
                (serde_json::to_value(p.solver.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(), p.solver.phases.iter().map(|ph| (ph.name.clone(), ph.time_ms)).collect())
            }
            Err(e) => (format!("error: {e}"), Vec::new()),
        };
        let ev = Evaluation { started_ms: ms(start - self.t0), planner_ms: ms(end - start), pending_pods: cluster.pending().len(), status, phases };
        self.calls.push((start, end, ev));
        r
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The node-set program's figures ([`NodeSetReport`]).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Program {
    pub ms: f64,
    pub remove: usize,
    pub objective: f64,
    pub lower_bound: Option<f64>,
    pub error: Option<String>,
}

impl From<&NodeSetReport> for Program {
    fn from(r: &NodeSetReport) -> Self {
        Program { ms: r.ms, remove: r.remove, objective: r.objective, lower_bound: r.lower_bound, error: r.error.clone() }
    }
}

/// The figures of one timed decision.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measured {
    pub nodes: usize,
    pub pods: usize,
    pub seed: u64,
    pub planner: String,
    pub total_ms: f64,
    /// Before the first planning call: candidates, ranking, lower bound, PDB allowances, the first
    /// displaced cluster.
    pub before_first_ms: f64,
    /// Inside planning calls, summed.
    pub planner_ms: f64,
    /// Between planning calls: each evaluation's replay and rule checks, the next displaced cluster.
    pub between_ms: f64,
    /// After the last planning call.
    pub after_last_ms: f64,
    pub evaluations: usize,
    pub per_evaluation_ms: f64,
    /// Solver phases summed over the evaluations, in first-seen order.
    pub phases: Vec<(String, f64)>,
    pub outcome: String,
    pub removed_nodes: usize,
    pub replacements: usize,
    pub moved_pods: usize,
    pub saving_per_hour: f64,
    pub disruption_cost: f64,
    pub cost_before: f64,
    pub cost_after: f64,
    pub lower_bound: f64,
    /// The node-set program's answer: nodes it removed, its objective and bound ($/h, cost plus
    /// disruption), its time, or why it gave none.
    pub node_set: Option<Program>,
    pub calls: Vec<Evaluation>,
}

impl Measured {
    /// The phase that took the most time.
    pub fn dominant(&self) -> String {
        let mut parts: Vec<(String, f64)> =
            vec![("before the first evaluation (candidates, ranking, lower bound)".into(), self.before_first_ms), ("between evaluations (replay, rules)".into(), self.between_ms)];
        parts.extend(self.phases.iter().map(|(n, t)| (format!("planner: {n}"), *t)));
        parts.into_iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(n, t)| format!("{n} ({t:.0} ms)")).unwrap_or_default()
    }

    /// Lines for people.
    pub fn render(&self) -> String {
        let mut s = format!(
            "consolidation decision: {} nodes, {} pods (seed {}), planner {}\n  total {:.0} ms; {} evaluations, {:.0} ms each on average\n  before the first evaluation {:.0} ms; inside the planner {:.0} ms; between evaluations {:.0} ms; after the last {:.0} ms\n",
            self.nodes, self.pods, self.seed, self.planner, self.total_ms, self.evaluations, self.per_evaluation_ms, self.before_first_ms, self.planner_ms, self.between_ms, self.after_last_ms
        );
        let phases: Vec<String> = self.phases.iter().map(|(n, t)| format!("{n} {t:.0} ms")).collect();
        s.push_str(&format!("  planner phases summed: {}\n  dominant: {}\n", phases.join(", "), self.dominant()));
        s.push_str(&format!(
            "  outcome: {}; remove {} node(s), {} replacement(s), {} pod(s) moved; saving ${:.4}/h against a disruption cost of ${:.4}/h; cost ${:.4}/h -> ${:.4}/h, lower bound ${:.4}/h\n",
            self.outcome, self.removed_nodes, self.replacements, self.moved_pods, self.saving_per_hour, self.disruption_cost, self.cost_before, self.cost_after, self.lower_bound
        ));
        match &self.node_set {
            Some(r) => s.push_str(&format!(
                "  node-set program: {} ms, removes {} node(s), objective ${:.4}/h, bound {}{}\n",
                r.ms.round(),
                r.remove,
                r.objective,
                r.lower_bound.map_or("none".to_string(), |b| format!("${b:.4}/h")),
                r.error.as_ref().map_or(String::new(), |e| format!(", error: {e}"))
            )),
            None => s.push_str("  node-set program: did not run\n"),
        }
        for (i, c) in self.calls.iter().enumerate() {
            s.push_str(&format!("  evaluation {:>2}: at {:>6.0} ms, {:>5.0} ms, {} pods, {}\n", i + 1, c.started_ms, c.planner_ms, c.pending_pods, c.status));
        }
        s
    }
}

/// The consolidation input over `w` with the controller's defaults (module doc).
pub fn input<'a>(w: &'a Workload, weights: &'a Weights, settings: &'a Settings) -> Input<'a> {
    Input { base: provision::Input { cluster: &w.cluster, objects: &w.objects, catalog: catalog::default_catalog(), weights, max_instance_types: 20, batch: "bench-consolidation" }, settings }
}

/// One round over `w`: observed at 0, judged at [`JUDGED_AFTER`].
pub fn decide(w: &Workload, planner: &mut dyn Planner) -> Result<Outcome, String> {
    let (weights, settings) = (Weights::default(), Settings::default());
    let mut memory: Consolidation<Duration> = Consolidation::default();
    memory.observe(&w.cluster, Duration::ZERO);
    memory.decide(&input(w, &weights, &settings), planner, JUDGED_AFTER).map_err(|e| e.to_string())
}

/// Times one decision over `w` (module doc).
pub fn measure(spec: Spec, w: &Workload, planner: SolvePlanner) -> Result<(Measured, Option<Decision>), String> {
    let mut inner = planner;
    let t0 = Instant::now();
    let mut timed = Timed { inner: &mut inner, t0, calls: Vec::new() };
    let outcome = decide(w, &mut timed)?;
    let t1 = Instant::now();
    let calls = std::mem::take(&mut timed.calls);
    let before_first = calls.first().map(|(s, _, _)| *s - t0).unwrap_or(t1 - t0);
    let after_last = calls.last().map(|(_, e, _)| t1 - *e).unwrap_or_default();
    let between: Duration = calls.windows(2).map(|w| w[1].0 - w[0].1).sum();
    let inside: Duration = calls.iter().map(|(s, e, _)| *e - *s).sum();
    let mut phases: Vec<(String, f64)> = Vec::new();
    for (_, _, ev) in &calls {
        for (n, t) in &ev.phases {
            match phases.iter_mut().find(|(m, _)| m == n) {
                Some(p) => p.1 += t,
                None => phases.push((n.clone(), *t)),
            }
        }
    }
    let evaluations = calls.len();
    let mut m = Measured {
        nodes: w.cluster.nodes.len(),
        pods: w.cluster.pods.iter().filter(|p| !p.is_daemon()).count(),
        seed: spec.seed,
        planner: format!("{} ({} ms budget)", planner.solver.as_str(), planner.time_budget.as_millis()),
        total_ms: ms(t1 - t0),
        before_first_ms: ms(before_first),
        planner_ms: ms(inside),
        between_ms: ms(between),
        after_last_ms: ms(after_last),
        evaluations,
        per_evaluation_ms: if evaluations > 0 { ms(t1 - t0) / evaluations as f64 } else { 0.0 },
        phases,
        outcome: String::new(),
        removed_nodes: 0,
        replacements: 0,
        moved_pods: 0,
        saving_per_hour: 0.0,
        disruption_cost: 0.0,
        cost_before: 0.0,
        cost_after: 0.0,
        lower_bound: 0.0,
        node_set: None,
        calls: calls.into_iter().map(|(_, _, e)| e).collect(),
    };
    let decision = match outcome {
        Outcome::NotSettled => {
            m.outcome = "not settled".into();
            None
        }
        Outcome::Nothing { cost, lower_bound, node_set, .. } => {
            m.outcome = "nothing pays".into();
            m.node_set = node_set.as_ref().map(Program::from);
            (m.cost_before, m.cost_after, m.lower_bound) = (cost, cost, lower_bound);
            None
        }
        Outcome::Consolidate(d) => {
            m.outcome = "consolidate".into();
            m.node_set = d.node_set.as_ref().map(Program::from);
            m.removed_nodes = d.remove.len();
            m.replacements = d.replacements.claims.len();
            m.moved_pods = d.remove.iter().map(|r| r.pods.len()).sum();
            (m.saving_per_hour, m.disruption_cost, m.cost_before, m.cost_after, m.lower_bound) = (d.saving, d.disruption_cost, d.cost_before, d.cost_after, d.lower_bound);
            Some(*d)
        }
    };
    Ok((m, decision))
}
