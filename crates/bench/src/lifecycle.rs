//! Consolidation over a cluster's life (issue 17, "Measure"): a pod trace or a day curve replayed
//! through the simulator's engine (`stowage_sim`: controllers, kube-scheduler's binder, the shared
//! provisioning and consolidation decisions, a cloud with boot delays and a bill), once with
//! consolidation of underutilised nodes and once with only empty nodes removed, against the integral
//! over time of the lower bound on the cost of the demand.
//!
//! # Histories ([`History`])
//!
//! * **openb**: the Alibaba openb trace's rows created in `[start, start + span)` ([`crate::openb`]),
//!   each a one-replica Deployment applied at its `creation_time` and deleted at its `deletion_time`
//!   (a long-running service, so that consolidation may move it; a bare pod pins its node), in the
//!   corpus's two NodePools (`cpu`, `gpu`: benches/workloads/openb/nodepools.yaml) and with the EKS
//!   DaemonSets.
//! * **diurnal**: twelve seeded Deployments (100m to 2 CPU, 1 to 8 GiB per core; a quarter spread over
//!   zones, a third with a PodDisruptionBudget) in one c/m/r on-demand NodePool, each scaled every 30
//!   minutes to `peak × f(hour)`, `f` a cosine from 20 % at 04:00 to 100 % at 16:00, for `hours` hours
//!   from midnight.
//!
//! The steps (`apply`, `delete`, `scale`, `advance`) are built in memory, not written as files. The two
//! runs differ only in the NodePools' `consolidationPolicy`: `WhenEmptyOrUnderutilized` (on) or
//! `WhenEmpty` (off: what the corpus's trace replay does, [`crate::replay`]); both with
//! `consolidateAfter` of [`Config::consolidate_after`] and Karpenter's default budget (10 %). The
//! simulator's defaults hold otherwise: 1 s / 10 s batch windows, 30 s launch delay plus up to 30 s of
//! seeded jitter, 15 s registration, the MILP at its 1 s budget for every batch and every evaluation
//! of a consolidation round, every plan judged by the checker.
//!
//! # Figures ([`Row`])
//!
//! From the run's timeline: the bill (USD, launch to termination at catalog price), node-hours, nodes
//! launched, consolidation decisions carried out and the nodes they removed, pod moves (workload pods
//! bound to a node when it was removed, whatever the reason), and how long pods waited for a node
//! (creation to binding, every pod the run created, replacements of moved pods included).
//!
//! # The bound ([`bound`])
//!
//! The demand is piecewise constant: it changes only where an app's replica count does (an openb row's
//! creation or deletion, a step of the day curve). At time 0 and at each such change point, the pods
//! the history asks for are planned from scratch on an empty cluster with the same NodePools,
//! DaemonSets and catalog, with price-only weights, and the MILP's proven lower bound ($/h) is taken;
//! it holds until the next change point. Those pods must run somewhere until then, so the sum of
//! bound × length over the change points bounds the bill of any run that keeps the history's pods
//! running, and it is the exact integral of the per-moment bound (before 2026-12-07 the demand was
//! taken as its minimum over 30-min intervals: valid, but lower). It does not allow for boot delays: a
//! pod the history asks for but still waiting for its node is counted as running. Pods no instance
//! type can hold are left out (they never run in either run).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::corpus;
use crate::mixed::req;
use crate::openb;
use stowage_core::semantics::spread::HostnameSpread;
use stowage_core::solve::{Planner, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::objects::Objects;
use stowage_sim::events::EventKind;
use stowage_sim::scenario::{Action, ObjectRef, Scale, Scenario, Settings, Step};

const HOUR: f64 = 3600.0;
const NAMESPACE: &str = "apps";

/// Which history to replay.
#[derive(Clone, Debug)]
pub enum History {
    /// openb rows created in `[start, start + span)` (trace seconds); the run lasts `span`.
    Openb { trace: PathBuf, start: u64, span: u64 },
    /// The day curve for `hours` hours from midnight, Deployments drawn with `seed`.
    Diurnal { hours: u32, seed: u64 },
}

impl History {
    pub fn name(&self) -> String {
        match self {
            History::Openb { start, span, .. } => format!("openb-{start}+{}h", span / 3600),
            History::Diurnal { hours, seed } => format!("diurnal-{hours}h-seed{seed}"),
        }
    }
}

/// How the runs are made.
#[derive(Clone, Debug)]
pub struct Config {
    pub history: History,
    pub consolidate_after: Duration,
    /// The planner of every batch and every consolidation evaluation.
    pub planner: Planner,
    /// The planner of the bound (its MILP's proven lower bound is used).
    pub bound_planner: Planner,
}

impl Config {
    pub fn new(history: History) -> Config {
        Config { history, consolidate_after: Duration::from_secs(300), planner: Planner::default(), bound_planner: Planner { time_budget: Duration::from_secs(3), gap: 0.005, ..Planner::milp() } }
    }
}

/// One app of the history: its Deployment's pod template and its replica count over time.
#[derive(Clone, Debug)]
struct App {
    name: String,
    template: Value,
    /// (seconds since the start, replicas), in time order; 0 before the first point.
    replicas: Vec<(u64, u32)>,
}

impl App {
    fn at(&self, t: u64) -> u32 {
        self.replicas.iter().take_while(|(at, _)| *at <= t).last().map(|(_, n)| *n).unwrap_or(0)
    }
}

/// A history made concrete: the manifests every run starts with (NodePools written by
/// [`Demand::manifests`] under a policy), the apps, and the length of the run.
struct Demand {
    /// Every manifest but the NodePools.
    base: Vec<Value>,
    /// NodePools with `__POLICY__` and `__AFTER__` as placeholders.
    pools: Vec<Value>,
    apps: Vec<App>,
    duration: u64,
}

fn deployment(name: &str, replicas: u32, template: &Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}})
}

fn nodeclass() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "KarpenterNodeRole-bench", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}], "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}})
}

fn common() -> Vec<Value> {
    let mut items = crate::daemonsets::namespaces();
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}));
    items.extend(crate::daemonsets::eks());
    items
}

fn openb_demand(trace: &Path, start: u64, span: u64) -> Result<Demand, String> {
    let rows = openb::parse_trace(&corpus::read_text(trace)?).map_err(|e| format!("{}: {e}", trace.display()))?;
    let rows = openb::window(&rows, start, span);
    let pools_file = crate::repo_root().join("benches/workloads/openb/nodepools.yaml");
    let raws = stowage_input::read::parse_text(&pools_file, &corpus::read_text(&pools_file)?).map_err(|e| e.to_string())?;
    let mut base = common();
    let mut pools = Vec::new();
    for r in raws {
        if r.kind == "NodePool" {
            let mut v = r.value;
            v["spec"]["disruption"] = json!({"consolidationPolicy": "__POLICY__", "consolidateAfter": "__AFTER__"});
            pools.push(v);
        } else {
            base.push(r.value);
        }
    }
    let mut apps = Vec::new();
    // Rows that left the moment they came never ran anywhere.
    for p in rows.iter().filter(|p| p.deletion.is_none_or(|d| d > p.creation)) {
        let pod = openb::pod_object(p)?;
        let mut md = pod["metadata"].clone();
        if let Some(m) = md.as_object_mut() {
            m.remove("name");
            m.remove("namespace");
            m.remove("uid");
        }
        md["labels"] = json!({"app": p.name, "openb.alibaba.com/qos": p.qos.to_ascii_lowercase()});
        let template = json!({"metadata": md, "spec": pod["spec"]});
        let mut replicas = vec![(p.creation - start, 1)];
        if let Some(d) = p.deletion.filter(|d| *d < start + span) {
            replicas.push((d - start, 0));
        }
        apps.push(App { name: p.name.clone(), template, replicas });
    }
    Ok(Demand { base, pools, apps, duration: span })
}

/// The day curve: 20 % at 04:00, 100 % at 16:00.
pub fn day_curve(seconds: u64) -> f64 {
    let h = (seconds % 86_400) as f64 / HOUR;
    0.2 + 0.8 * (0.5 - 0.5 * (2.0 * std::f64::consts::PI * (h - 4.0) / 24.0).cos())
}

fn diurnal_demand(hours: u32, seed: u64) -> Demand {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut base = common();
    base.push(nodeclass());
    let pools = vec![json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"disruption": {"consolidationPolicy": "__POLICY__", "consolidateAfter": "__AFTER__"},
            "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                req("karpenter.k8s.aws/instance-category", "In", &["c", "m", "r"]),
                req("karpenter.k8s.aws/instance-generation", "Gt", &["4"]),
                req("karpenter.sh/capacity-type", "In", &["on-demand"]),
                req("kubernetes.io/arch", "In", &["amd64"])]}}}})];
    let duration = hours as u64 * 3600;
    let mut apps = Vec::new();
    for i in 0..12 {
        let name = format!("web-{i:02}");
        let cpu = *[100u32, 250, 500, 500, 1000, 2000].choose(&mut rng).unwrap_or(&500);
        let gib = *[1u32, 2, 2, 4, 8].choose(&mut rng).unwrap_or(&2);
        let peak = rng.random_range(6..40u32);
        let mut spec = json!({"containers": crate::mixed::container(&format!("{cpu}m"), &format!("{}Mi", cpu as u64 * gib as u64 * 1024 / 1000))});
        if i % 4 == 1 {
            spec["topologySpreadConstraints"] =
                json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": name}}}]);
        }
        if i % 3 == 0 {
            base.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}}));
        }
        let template = json!({"metadata": {"labels": {"app": name}}, "spec": spec});
        let replicas = (0..duration).step_by(1800).map(|t| (t, ((peak as f64 * day_curve(t)).round() as u32).max(1))).collect();
        apps.push(App { name, template, replicas });
    }
    Demand { base, pools, apps, duration }
}

impl Demand {
    /// Time 0 and every moment inside the history where an app's replica count is set, ascending:
    /// between two of them the demand is constant.
    fn change_points(&self) -> Vec<u64> {
        let mut points: BTreeSet<u64> = self.apps.iter().flat_map(|a| a.replicas.iter().map(|(t, _)| *t)).filter(|t| *t < self.duration).collect();
        points.insert(0);
        points.into_iter().collect()
    }

    /// (app index, replicas) of the apps with pods at `t`.
    fn at(&self, t: u64) -> Vec<(usize, u32)> {
        self.apps.iter().enumerate().map(|(i, a)| (i, a.at(t))).filter(|(_, n)| *n > 0).collect()
    }

    fn of(h: &History) -> Result<Demand, String> {
        match h {
            History::Openb { trace, start, span } => openb_demand(trace, *start, *span),
            History::Diurnal { hours, seed } => Ok(diurnal_demand(*hours, *seed)),
        }
    }

    fn manifests(&self, policy: &str, after: Duration) -> Vec<Value> {
        let mut out = self.base.clone();
        for p in &self.pools {
            let mut p = p.clone();
            p["spec"]["disruption"] = json!({"consolidationPolicy": policy, "consolidateAfter": format!("{}s", after.as_secs())});
            out.push(p);
        }
        out
    }
}

fn objects(name: &str, items: &[Value]) -> Result<Objects, String> {
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).map_err(|e| e.to_string())?;
    let raws = stowage_input::read::parse_text(Path::new(name), &text).map_err(|e| e.to_string())?;
    let (o, _, errors) = stowage_input::objects::type_all(&raws);
    match errors.first() {
        Some(e) => Err(format!("{name}: {e}")),
        None => Ok(o),
    }
}

/// The scenario of one run: the manifests, then per moment of change the apps' applies, scales and
/// deletes, and advances between them up to the history's end.
fn scenario(h: &History, d: &Demand, consolidation: bool, after: Duration) -> Result<Scenario, String> {
    let policy = if consolidation { "WhenEmptyOrUnderutilized" } else { "WhenEmpty" };
    let manifests = objects("lifecycle-manifests.json", &d.manifests(policy, after))?;
    // (time, app index, replicas) in time order.
    let mut changes: Vec<(u64, usize, u32)> = d.apps.iter().enumerate().flat_map(|(i, a)| a.replicas.iter().map(move |(t, n)| (*t, i, *n))).collect();
    changes.sort();
    let mut steps = Vec::new();
    let mut push = |action: Action| {
        let number = steps.len() + 1;
        steps.push(Step { number, note: None, action });
    };
    let mut now = 0u64;
    let mut live: BTreeMap<usize, u32> = BTreeMap::new();
    for (t, i, n) in changes {
        if t > now {
            push(Action::Advance(Duration::from_secs(t - now)));
            now = t;
        }
        let app = &d.apps[i];
        match live.get(&i) {
            None if n > 0 => {
                push(Action::Apply(Box::new(objects(&app.name, &[deployment(&app.name, n, &app.template)])?)));
                live.insert(i, n);
            }
            None => {}
            Some(_) if n == 0 && matches!(h, History::Openb { .. }) => {
                push(Action::Delete(ObjectRef { kind: "Deployment".into(), name: app.name.clone(), namespace: Some(NAMESPACE.into()) }));
                live.remove(&i);
            }
            Some(&m) if m != n => {
                push(Action::Scale(Scale { kind: "Deployment".into(), name: app.name.clone(), namespace: Some(NAMESPACE.into()), replicas: n as i32 }));
                live.insert(i, n);
            }
            Some(_) => {}
        }
    }
    if d.duration > now {
        push(Action::Advance(Duration::from_secs(d.duration - now)));
    }
    let settings = Settings {
        solver: stowage_core::solve::Solver::Milp,
        solver_from_file: false,
        catalog: stowage_input::catalog::default_catalog().clone(),
        catalog_name: "embedded aws-us-east-1".into(),
        weights: Weights::default(),
        time_budget: Duration::from_secs(1),
        batch_idle: Duration::from_secs(1),
        batch_max: Duration::from_secs(10),
        launch_delay: Duration::from_secs(30),
        launch_jitter: Duration::from_secs(30),
        registration_delay: Duration::from_secs(15),
        unavailable_offering_ttl: Duration::from_secs(180),
        consolidation: true,
        fail_offerings: Vec::new(),
        start: None,
    };
    let name = format!("{}-{}", h.name(), if consolidation { "consolidation" } else { "empty-only" });
    Ok(Scenario { name, description: String::new(), file: "<generated>".into(), manifests, settings, steps, warnings: Vec::new() })
}

/// One run's figures (module doc).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub run: String,
    pub cost_usd: f64,
    pub node_hours: f64,
    pub nodes_launched: usize,
    /// Consolidation decisions made, and those whose nodes were removed.
    pub consolidations_decided: usize,
    pub consolidations_done: usize,
    pub nodes_removed_by_consolidation: usize,
    pub replacements: usize,
    /// Workload pods bound to a node when it was removed.
    pub pod_moves: usize,
    pub pods_created: usize,
    /// Pods never bound (deleted while pending, or pending at the end).
    pub never_bound: usize,
    pub wait_p50_s: f64,
    pub wait_p99_s: f64,
    pub wait_max_s: f64,
    pub batches: u32,
    pub invalid_plans: usize,
    /// Wall time of the run (measured, not asserted).
    pub wall_s: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(((sorted.len() - 1) as f64) * q).round() as usize]
}

/// The figures of a run's report (module doc).
pub fn summarise(run: &str, r: &stowage_sim::Report, wall: Duration) -> Row {
    let secs = |t: stowage_sim::time::SimTime| t.0 as f64 / 1000.0;
    let end = secs(r.ended_at);
    let mut row = Row { run: run.into(), cost_usd: r.bill, batches: r.batches, invalid_plans: r.invalid_plans.len(), wall_s: wall.as_secs_f64(), ..Default::default() };
    let mut launched: BTreeMap<String, f64> = BTreeMap::new();
    // Workload pods (not DaemonSet pods, bound to every node at once) waiting since their creation.
    let mut waiting: BTreeMap<&str, f64> = BTreeMap::new();
    let mut bound_on: BTreeMap<&str, &str> = BTreeMap::new();
    let mut drains: BTreeSet<(u64, &str)> = BTreeSet::new();
    let mut waits = Vec::new();
    for e in &r.timeline {
        let at = secs(e.at);
        match &e.kind {
            EventKind::Launch { node, .. } => {
                row.nodes_launched += 1;
                launched.insert(node.clone(), at);
            }
            EventKind::NodeRemoved { node, reason } => {
                if let Some(t) = launched.remove(node) {
                    row.node_hours += (at - t) / HOUR;
                }
                row.pod_moves += bound_on.values().filter(|n| **n == node.as_str()).count();
                bound_on.retain(|_, n| *n != node.as_str());
                if reason.starts_with("consolidation") {
                    row.nodes_removed_by_consolidation += 1;
                    drains.insert((e.at.0, reason.as_str()));
                }
            }
            EventKind::PodCreated { pod, owner } if !owner.starts_with("DaemonSet ") => {
                row.pods_created += 1;
                waiting.insert(pod.as_str(), at);
            }
            EventKind::Bound { pod, node, .. } => {
                if let Some(t) = waiting.remove(pod.as_str()) {
                    waits.push(at - t);
                    bound_on.insert(pod.as_str(), node.as_str());
                }
            }
            EventKind::PodDeleted { pod, .. } => {
                bound_on.remove(pod.as_str());
                if waiting.remove(pod.as_str()).is_some() {
                    row.never_bound += 1;
                }
            }
            EventKind::Consolidation { replacements, .. } => {
                row.consolidations_decided += 1;
                row.replacements += replacements;
            }
            _ => {}
        }
    }
    for t in launched.values() {
        row.node_hours += (end - t) / HOUR;
    }
    // Pending at the end.
    row.never_bound += waiting.len();
    // A decision is carried out when its nodes go (one reason, one instant).
    row.consolidations_done = drains.len();
    waits.sort_by(f64::total_cmp);
    (row.wait_p50_s, row.wait_p99_s, row.wait_max_s) = (quantile(&waits, 0.5), quantile(&waits, 0.99), waits.last().copied().unwrap_or(0.0));
    row
}

/// The bound at each change point of the demand: (moment in hours, $/h until the next point; `None`
/// where the MILP proved none).
pub type BoundCurve = Vec<(f64, Option<f64>)>;

/// Price-only weights under kube-scheduler's hostname rule: the bound is on the bill (this benchmark's
/// and the lifetime benchmark's).
pub fn price_only() -> Weights {
    let d = Weights::default();
    let soft = stowage_core::weights::Soft { preferred_node_affinity: 0.0, preferred_pod_affinity: 0.0, preferred_pod_anti_affinity: 0.0, schedule_anyway_spread: 0.0, prefer_no_schedule: 0.0 };
    let spot = stowage_core::weights::Spot { per_node: 0.0, ..d.spot.clone() };
    Weights { per_node: 0.0, spot, node_pool_weight: 0.0, tie_break: 0.0, soft, hostname_spread: HostnameSpread::Exact, ..d }
}

/// The bound's curve, a step per change point of the demand, and its exact integral in USD (module
/// doc). Equal demands are planned once.
pub fn bound(cfg: &Config) -> Result<(BoundCurve, f64), String> {
    let d = Demand::of(&cfg.history)?;
    let pools = d.manifests("WhenEmpty", cfg.consolidate_after);
    let weights = price_only();
    let mut cache: BTreeMap<Vec<(usize, u32)>, Option<f64>> = BTreeMap::new();
    let mut curve = Vec::new();
    let mut integral = 0.0;
    let points = d.change_points();
    for (k, &t) in points.iter().enumerate() {
        let next = points.get(k + 1).copied().unwrap_or(d.duration);
        let demand = d.at(t);
        let b = match cache.get(&demand) {
            Some(b) => *b,
            None => {
                let b = if demand.is_empty() { Some(0.0) } else { bound_of(&d, &demand, &pools, &weights, cfg.bound_planner)? };
                cache.insert(demand, b);
                b
            }
        };
        integral += b.unwrap_or(0.0) * (next - t) as f64 / HOUR;
        curve.push((t as f64 / HOUR, b));
    }
    Ok((curve, integral))
}

/// The MILP's proven lower bound on the demand's $/h, pods no type holds left out.
fn bound_of(d: &Demand, demand: &[(usize, u32)], pools: &[Value], weights: &Weights, planner: Planner) -> Result<Option<f64>, String> {
    let mut left_out: BTreeSet<String> = BTreeSet::new();
    loop {
        let mut items = pools.to_vec();
        for &(i, n) in demand {
            let a = &d.apps[i];
            for k in 0..n {
                let name = format!("{}-{k}", a.name);
                if left_out.contains(&format!("{NAMESPACE}/{name}")) {
                    continue;
                }
                let mut md = a.template["metadata"].clone();
                md["name"] = json!(name);
                md["namespace"] = json!(NAMESPACE);
                items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": a.template["spec"]}));
            }
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).map_err(|e| e.to_string())?;
        let w = stowage_input::load_texts([(Path::new("lifecycle-bound.json"), text.as_str())]).map_err(|e| e.to_string())?;
        let plan = plan_cluster(&w.cluster, stowage_input::catalog::default_catalog(), weights, planner).map_err(|e| e.to_string())?;
        let cannot: Vec<String> = plan.unschedulable.iter().map(|u| u.pod.clone()).filter(|p| p.starts_with(&format!("{NAMESPACE}/")) && !left_out.contains(p)).collect();
        if cannot.is_empty() {
            return Ok(plan.solver.lower_bound);
        }
        left_out.extend(cannot);
    }
}

/// Runs the history with consolidation on or off.
pub fn run(cfg: &Config, consolidation: bool) -> Result<(Row, stowage_sim::Report), String> {
    let d = Demand::of(&cfg.history)?;
    let sc = scenario(&cfg.history, &d, consolidation, cfg.consolidate_after)?;
    let mut planner = cfg.planner;
    let t0 = Instant::now();
    let report = stowage_sim::run_with(&sc, &mut planner, cfg.planner.solver.as_str(), true).map_err(|e| e.to_string())?;
    let label = if consolidation { "consolidation on (WhenEmptyOrUnderutilized)" } else { "consolidation off (WhenEmpty)" };
    Ok((summarise(label, &report, t0.elapsed()), report))
}

/// The table (markdown) of the runs beside the bound.
pub fn table(cfg: &Config, rows: &[Row], bound_usd: f64) -> String {
    let mut s = format!(
        "History `{}`, consolidateAfter {} s, bound exact (evaluated at every change of the demand).\n\n| run | cost ($) | vs bound | node-hours | nodes launched | consolidations (decided / done) | nodes removed by consolidation | replacements | pod moves | pods | never bound | wait p50 / p99 / max (s) | batches | invalid plans | wall (s) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        cfg.history.name(),
        cfg.consolidate_after.as_secs()
    );
    for r in rows {
        let vs = if bound_usd > 0.0 { format!("{:.2}", r.cost_usd / bound_usd) } else { "-".into() };
        s.push_str(&format!(
            "| {} | {:.2} | {} | {:.1} | {} | {} / {} | {} | {} | {} | {} | {} | {:.0} / {:.0} / {:.0} | {} | {} | {:.0} |\n",
            r.run,
            r.cost_usd,
            vs,
            r.node_hours,
            r.nodes_launched,
            r.consolidations_decided,
            r.consolidations_done,
            r.nodes_removed_by_consolidation,
            r.replacements,
            r.pod_moves,
            r.pods_created,
            r.never_bound,
            r.wait_p50_s,
            r.wait_p99_s,
            r.wait_max_s,
            r.batches,
            r.invalid_plans,
            r.wall_s
        ));
    }
    s.push_str(&format!("| lower bound of the demand (integral) | {bound_usd:.2} | 1.00 | | | | | | | | | | | | |\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str, replicas: &[(u64, u32)]) -> App {
        App { name: name.into(), template: json!({}), replicas: replicas.to_vec() }
    }

    #[test]
    fn the_demand_is_evaluated_at_every_change_and_held_until_the_next() {
        // One app from 0 to 100 s, one from 700 s to 2000 s (past the history's end), one scaled at 0
        // and 1800 s: a 30-min interval's minimum would have missed the first two.
        let apps = vec![app("a", &[(0, 1), (100, 0)]), app("b", &[(700, 1), (2000, 0)]), app("c", &[(0, 2), (1800, 3)])];
        let d = Demand { base: Vec::new(), pools: Vec::new(), apps, duration: 1900 };
        assert_eq!(d.change_points(), vec![0, 100, 700, 1800], "2000 s is past the end");
        assert_eq!(d.at(0), vec![(0, 1), (2, 2)]);
        assert_eq!(d.at(100), vec![(2, 2)], "a left at 100 s");
        assert_eq!(d.at(700), vec![(1, 1), (2, 2)]);
        assert_eq!(d.at(1800), vec![(1, 1), (2, 3)]);
        let empty = Demand { base: Vec::new(), pools: Vec::new(), apps: vec![app("late", &[(50, 1)])], duration: 100 };
        assert_eq!(empty.change_points(), vec![0, 50], "time 0 is a point even before the first app");
        assert!(empty.at(0).is_empty());
    }
}
