//! Cluster histories: what a workload does over time, in **history seconds** (the run compresses them by
//! a stated factor, [`crate::run::Timing`]). Pure data: generated from a seed, written with the results,
//! and turned into Kubernetes objects by [`History::objects_of`].
//!
//! Three histories (issue 19):
//! - [`web`]: a diurnal web workload: Deployments with zonal and hostname spread and PodDisruptionBudgets,
//!   scaled every 30 minutes along a day curve (trough at 04:00, peak at 16:00) with noise.
//! - [`batch`]: a batch-job burst over a small steady web tier: waves of Jobs whose pods run for a
//!   stated time once Running, then succeed.
//! - [`openb`]: a window of the Alibaba openb trace's CPU pods: each row a one-pod Job created at its
//!   creation time that runs for its traced duration.
//!
//! A task pod's runtime counts from when it is Running, not from its creation, so a controller that
//! leaves pods pending does not finish their work sooner (and pay less) by it.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The namespace every history's objects live in.
pub const NAMESPACE: &str = "lifetime";
/// Annotation on a task pod (the Job's template): history seconds it runs once Running.
pub const RUNTIME_ANNOTATION: &str = "lifetime.stowage.dev/runtime-seconds";
/// Label on every pod a history makes: the app or Job it belongs to.
pub const APP_LABEL: &str = "app";

/// A spread rule of an app (all maxSkew 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    None,
    /// Zones, `DoNotSchedule`.
    Zone,
    /// Zones `DoNotSchedule` and hostnames `ScheduleAnyway`.
    ZonePreferHost,
    /// Hostnames `DoNotSchedule` (one replica per node while there are as many nodes).
    Host,
}

/// A Deployment and its PodDisruptionBudget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct App {
    pub name: String,
    pub replicas: u32,
    pub cpu_m: u32,
    pub memory_mi: u32,
    pub spread: Spread,
    /// The PDB's `maxUnavailable`.
    pub max_unavailable: u32,
}

/// A Job of `count` pods run `count` at a time, each running `runtime_s` once Running.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub name: String,
    pub count: u32,
    pub cpu_m: u32,
    pub memory_mi: u32,
    pub runtime_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "action")]
pub enum Action {
    Deploy(App),
    Scale { app: String, replicas: u32 },
    Job(Job),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at_s: f64,
    #[serde(flatten)]
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub name: String,
    pub description: String,
    /// History seconds the run covers.
    pub duration_s: f64,
    /// In time order.
    pub events: Vec<Event>,
}

impl History {
    /// Events sorted by time (stable, so events of one instant keep their order).
    fn sorted(mut self) -> Self {
        self.events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        self
    }

    /// The history cut to its first `duration_s` seconds (the smoke test's short version).
    pub fn truncated(mut self, duration_s: f64) -> Self {
        self.events.retain(|e| e.at_s < duration_s);
        self.duration_s = self.duration_s.min(duration_s);
        self
    }

    /// Pods the history asks for at its peak: the largest sum, over time, of the replicas of every
    /// app and every Job's pods alive (a Job counts from its creation for its runtime).
    pub fn peak_pods(&self) -> u32 {
        let mut replicas: std::collections::BTreeMap<&str, u32> = Default::default();
        let mut jobs: Vec<(f64, u32)> = Vec::new();
        let mut peak = 0;
        for e in &self.events {
            match &e.action {
                Action::Deploy(a) => {
                    replicas.insert(&a.name, a.replicas);
                }
                Action::Scale { app, replicas: r } => {
                    replicas.insert(app, *r);
                }
                Action::Job(j) => jobs.push((e.at_s + j.runtime_s, j.count)),
            }
            jobs.retain(|(end, _)| *end > e.at_s);
            peak = peak.max(replicas.values().sum::<u32>() + jobs.iter().map(|j| j.1).sum::<u32>());
        }
        peak
    }
}

/// The objects an event creates (a Scale creates none: [`crate::run`] patches the Deployment's scale).
pub fn objects_of(action: &Action) -> Vec<Value> {
    match action {
        Action::Deploy(a) => vec![deployment(a), pdb(a)],
        Action::Scale { .. } => Vec::new(),
        Action::Job(j) => vec![job(j)],
    }
}

fn resources(cpu_m: u32, memory_mi: u32) -> Value {
    json!({"requests": {"cpu": format!("{cpu_m}m"), "memory": format!("{memory_mi}Mi")}})
}

fn spread_constraints(a: &App) -> Value {
    let selector = json!({"matchLabels": {APP_LABEL: a.name}});
    let c = |key: &str, when: &str| json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector});
    match a.spread {
        Spread::None => json!([]),
        Spread::Zone => json!([c("topology.kubernetes.io/zone", "DoNotSchedule")]),
        Spread::ZonePreferHost => json!([c("topology.kubernetes.io/zone", "DoNotSchedule"), c("kubernetes.io/hostname", "ScheduleAnyway")]),
        Spread::Host => json!([c("kubernetes.io/hostname", "DoNotSchedule")]),
    }
}

fn deployment(a: &App) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": a.name, "namespace": NAMESPACE},
        "spec": {
            "replicas": a.replicas,
            "selector": {"matchLabels": {APP_LABEL: a.name}},
            "template": {
                "metadata": {"labels": {APP_LABEL: a.name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "topologySpreadConstraints": spread_constraints(a),
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": resources(a.cpu_m, a.memory_mi)}],
                },
            },
        },
    })
}

fn pdb(a: &App) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": a.name, "namespace": NAMESPACE},
        "spec": {"maxUnavailable": a.max_unavailable, "selector": {"matchLabels": {APP_LABEL: a.name}}},
    })
}

fn job(j: &Job) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": j.name, "namespace": NAMESPACE},
        "spec": {
            "parallelism": j.count, "completions": j.count, "backoffLimit": 0,
            // An evicted task (drain, consolidation) is run again and is no failure, as a batch user of
            // either controller configures it; without this one eviction fails the whole Job and its
            // other pods stop, which a controller's bill would count as a saving.
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "ttlSecondsAfterFinished": 0,
            "template": {
                "metadata": {"labels": {APP_LABEL: j.name}, "annotations": {RUNTIME_ANNOTATION: format!("{}", j.runtime_s)}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "task", "image": "registry.k8s.io/pause:3.10", "resources": resources(j.cpu_m, j.memory_mi)}],
                },
            },
        },
    })
}

/// Requests of the web tier: (CPU millicores, memory MiB), typical service sizes.
const WEB_SIZES: [(u32, u32); 6] = [(250, 512), (500, 1024), (1000, 2048), (2000, 4096), (500, 4096), (4000, 8192)];

const HOUR: f64 = 3600.0;

/// The day curve: 0.25 at 04:00, 1.0 at 16:00.
fn day_factor(t: f64) -> f64 {
    let phase = (t / HOUR - 4.0) / 24.0 * std::f64::consts::TAU;
    0.25 + 0.75 * (0.5 - 0.5 * phase.cos())
}

fn web_apps(rng: &mut ChaCha8Rng, n: usize, max_replicas: u32) -> Vec<App> {
    (0..n)
        .map(|i| {
            let (cpu_m, memory_mi) = WEB_SIZES[rng.random_range(0..WEB_SIZES.len())];
            let spread = match rng.random_range(0..10) {
                0..=3 => Spread::Zone,
                4..=6 => Spread::ZonePreferHost,
                7 => Spread::Host,
                _ => Spread::None,
            };
            let replicas = rng.random_range(4..=max_replicas);
            App { name: format!("web-{i:02}"), replicas, cpu_m, memory_mi, spread, max_unavailable: rng.random_range(1..=2) }
        })
        .collect()
}

/// The diurnal web history: `apps` Deployments over `hours` hours from midnight, scaled every 30 min.
pub fn web(seed: u64, apps: usize, hours: f64) -> History {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let base = web_apps(&mut rng, apps, 30);
    let mut events = Vec::new();
    for a in &base {
        let mut a = a.clone();
        let peak = a.replicas;
        a.replicas = scaled(peak, day_factor(0.0), 0.0);
        events.push(Event { at_s: 0.0, action: Action::Deploy(a) });
    }
    let step = HOUR / 2.0;
    let mut t = step;
    while t < hours * HOUR {
        for a in &base {
            let noise = rng.random_range(-0.1..0.1);
            events.push(Event { at_s: t, action: Action::Scale { app: a.name.clone(), replicas: scaled(a.replicas, day_factor(t), noise) } });
        }
        t += step;
    }
    History {
        name: "web".into(),
        description: format!("{apps} Deployments (zone/hostname spread, PDBs) scaled every 30 min along a day curve, {hours} h, seed {seed}"),
        duration_s: hours * HOUR,
        events,
    }
    .sorted()
}

fn scaled(peak: u32, factor: f64, noise: f64) -> u32 {
    ((peak as f64 * factor * (1.0 + noise)).round() as u32).max(2)
}

/// The batch-burst history: two steady web apps, then three waves of Jobs at 10, 40 and 70 minutes
/// (small, large and many tiny tasks), then quiet until `hours`.
pub fn batch(seed: u64, hours: f64) -> History {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut events: Vec<Event> = web_apps(&mut rng, 2, 8).into_iter().map(|a| Event { at_s: 0.0, action: Action::Deploy(a) }).collect();
    // (start, wave, Jobs, CPU millicores, memory MiB, runtime range in seconds)
    type Wave = (f64, &'static str, u32, u32, u32, (f64, f64));
    let waves: [Wave; 3] = [(600.0, "a", 6, 1000, 2048, (1200.0, 2400.0)), (2400.0, "b", 4, 4000, 8192, (600.0, 1800.0)), (4200.0, "c", 10, 250, 512, (300.0, 900.0))];
    for (at, wave, jobs, cpu_m, memory_mi, (lo, hi)) in waves {
        for k in 0..jobs {
            let count = rng.random_range(10..=30);
            let runtime_s = rng.random_range(lo..hi).round();
            let at_s = at + rng.random_range(0.0..120.0_f64).round();
            events.push(Event { at_s, action: Action::Job(Job { name: format!("burst-{wave}-{k:02}"), count, cpu_m, memory_mi, runtime_s }) });
        }
    }
    History { name: "batch".into(), description: format!("2 steady web apps and three waves of Jobs at 10, 40 and 70 min, {hours} h, seed {seed}"), duration_s: hours * HOUR, events }.sorted()
}

/// The openb history: the CPU-only rows of `trace` (openb's pod list) created in `[start, start + span)`
/// trace seconds, each a one-pod Job at its creation time (relative to `start`) running for its traced
/// duration (rows still running at the trace's end run until the history ends). GPU rows are left out:
/// Karpenter's KWOK provider offers no extended resources.
pub fn openb(trace: &[stowage_bench::openb::TracePod], start: u64, span: u64) -> History {
    let rows = stowage_bench::openb::window(trace, start, span);
    let mut events = Vec::new();
    for p in rows.iter().filter(|p| p.num_gpu == 0) {
        let runtime_s = p.deletion.map_or(f64::INFINITY, |d| d.saturating_sub(p.creation) as f64).min(span as f64 * 2.0).max(1.0);
        events.push(Event {
            at_s: (p.creation - start) as f64,
            action: Action::Job(Job { name: p.name.clone(), count: 1, cpu_m: p.cpu_milli.max(1) as u32, memory_mi: p.memory_mib.max(1) as u32, runtime_s }),
        });
    }
    let n = events.len();
    History { name: "openb".into(), description: format!("openb trace CPU rows created in [{start}, {}) s: {n} one-pod Jobs", start + span), duration_s: span as f64, events }.sorted()
}

/// The smoke test's history (one hour): two zone-spread apps deployed at 0, scaled up at 15 min and
/// down to two replicas each at 35 min; a Job of 8 pods at 5 min that runs 15 min.
pub fn smoke() -> History {
    let app = |name: &str, cpu_m, memory_mi, spread| App { name: name.into(), replicas: 6, cpu_m, memory_mi, spread, max_unavailable: 1 };
    let events = vec![
        Event { at_s: 0.0, action: Action::Deploy(app("web-a", 1000, 2048, Spread::Zone)) },
        Event { at_s: 0.0, action: Action::Deploy(app("web-b", 500, 1024, Spread::ZonePreferHost)) },
        Event { at_s: 300.0, action: Action::Job(Job { name: "job".into(), count: 8, cpu_m: 2000, memory_mi: 4096, runtime_s: 900.0 }) },
        Event { at_s: 900.0, action: Action::Scale { app: "web-a".into(), replicas: 12 } },
        Event { at_s: 900.0, action: Action::Scale { app: "web-b".into(), replicas: 12 } },
        Event { at_s: 2100.0, action: Action::Scale { app: "web-a".into(), replicas: 2 } },
        Event { at_s: 2100.0, action: Action::Scale { app: "web-b".into(), replicas: 2 } },
    ];
    History { name: "smoke".into(), description: "2 apps scaled 6 → 12 → 2, a Job of 8 pods for 15 min".into(), duration_s: 3600.0, events }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_curve_has_its_trough_at_four_and_peak_at_sixteen() {
        assert!((day_factor(4.0 * HOUR) - 0.25).abs() < 1e-9);
        assert!((day_factor(16.0 * HOUR) - 1.0).abs() < 1e-9);
        assert!(day_factor(10.0 * HOUR) > 0.25 && day_factor(10.0 * HOUR) < 1.0);
    }

    #[test]
    fn web_is_seeded_sorted_and_scales_every_app_every_half_hour() {
        let h = web(1, 6, 24.0);
        assert_eq!(h, web(1, 6, 24.0), "same seed, same history");
        assert_ne!(h, web(2, 6, 24.0));
        assert!(h.events.windows(2).all(|w| w[0].at_s <= w[1].at_s));
        let deploys = h.events.iter().filter(|e| matches!(e.action, Action::Deploy(_))).count();
        let scales = h.events.iter().filter(|e| matches!(e.action, Action::Scale { .. })).count();
        assert_eq!(deploys, 6);
        assert_eq!(scales, 6 * 47, "every 30 min after the start, before 24 h");
        // Fewer replicas at the trough than at the peak, summed over apps.
        let at = |t: f64| -> u32 { h.events.iter().filter(|e| e.at_s == t).map(|e| if let Action::Scale { replicas, .. } = e.action { replicas } else { 0 }).sum() };
        assert!(at(4.0 * HOUR) * 2 < at(16.0 * HOUR), "trough {} vs peak {}", at(4.0 * HOUR), at(16.0 * HOUR));
    }

    #[test]
    fn batch_has_three_waves_of_jobs() {
        let h = batch(1, 3.0);
        let jobs: Vec<&Job> = h.events.iter().filter_map(|e| if let Action::Job(j) = &e.action { Some(j) } else { None }).collect();
        assert_eq!(jobs.len(), 20);
        assert!(jobs.iter().all(|j| j.count >= 10 && j.runtime_s >= 300.0));
        assert!(h.peak_pods() > 100);
    }

    #[test]
    fn objects_are_a_deployment_with_its_pdb_and_a_job_with_its_runtime() {
        let a = App { name: "x".into(), replicas: 3, cpu_m: 500, memory_mi: 1024, spread: Spread::ZonePreferHost, max_unavailable: 1 };
        let o = objects_of(&Action::Deploy(a));
        assert_eq!(o[0]["kind"], "Deployment");
        assert_eq!(o[0]["spec"]["template"]["spec"]["topologySpreadConstraints"].as_array().unwrap().len(), 2);
        assert_eq!(o[1]["kind"], "PodDisruptionBudget");
        let j = objects_of(&Action::Job(Job { name: "j".into(), count: 4, cpu_m: 100, memory_mi: 64, runtime_s: 90.0 }));
        assert_eq!(j[0]["spec"]["template"]["metadata"]["annotations"][RUNTIME_ANNOTATION], "90");
        assert_eq!(j[0]["spec"]["parallelism"], 4);
        assert_eq!(j[0]["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["type"], "DisruptionTarget", "an evicted task is run again");
    }

    #[test]
    fn openb_keeps_cpu_rows_of_the_window_with_their_durations() {
        let csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
            p0,1000,1024,0,0,,LS,Running,100,400,100\n\
            p1,2000,2048,1,1000,,LS,Running,150,300,150\n\
            p2,500,512,0,0,,BE,Running,5000,5100,5000\n";
        let trace = stowage_bench::openb::parse_trace(csv).unwrap();
        let h = openb(&trace, 0, 1000);
        assert_eq!(h.events.len(), 1, "the GPU row and the row outside the window are left out");
        assert_eq!(h.events[0].at_s, 100.0);
        assert!(matches!(&h.events[0].action, Action::Job(j) if j.runtime_s == 300.0 && j.cpu_m == 1000));
    }
}
