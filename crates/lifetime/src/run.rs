//! One run: a fresh control plane, the kubelet stand-in for KWOK-style Nodes, one controller
//! (Karpenter's KWOK operator, or stowage's controller on [`FakeCloud`]), the same NodePool, the history
//! played at the stated compression, and the [`Recorder`] watching.
//!
//! Both controllers run at their own defaults (batch windows, disruption polling, validation); what the
//! history defines (its events, task runtimes, `consolidateAfter`, the boot delay) is compressed by
//! [`Timing::compression`], and so, unless told otherwise ([`Timing::scale_timers`]), are both
//! controllers' fixed disruption and termination timers: stowage's poll, validation and termination
//! retry here, Karpenter's poll, validation, orchestration backoff, minimum drain and termination
//! requeues through `STOWAGE_TIME_SCALE` (its one patch, peers/karpenter/timescale/). See docs/lifetime.md for what cannot be compressed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use stowage_core::weights::Weights;
use stowage_e2e::{ControlPlane, InstanceTypes, KarpenterConfig, KarpenterOperator, Kubelet};

use crate::cloud::FakeCloud;
use crate::history::{Action, History, NAMESPACE, objects_of};
use crate::observe::{Recorder, Recording, nodeclaim_resource};
use crate::setup::{Setup, Timing};

/// Which controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    Karpenter,
    Stowage,
}

impl Contender {
    pub fn name(self) -> &'static str {
        match self {
            Contender::Karpenter => "karpenter",
            Contender::Stowage => "stowage",
        }
    }
}

/// What a run produced.
#[derive(Debug, Serialize)]
pub struct RunOutput {
    pub contender: Contender,
    pub recording: Recording,
    /// Where the logs and object dumps were written.
    pub dir: PathBuf,
    /// Errors the kubelet stand-in recorded (it should have none).
    pub stand_in_errors: Vec<String>,
    /// Events the driver could not apply (it should have none).
    pub driver_errors: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("lifetime run {run}: {what}: {message}")]
    Setup { run: String, what: String, message: String },
}

fn setup_err(run: &str, what: &str, e: impl std::fmt::Display) -> RunError {
    RunError::Setup { run: run.to_string(), what: what.to_string(), message: e.to_string() }
}

fn api_for(client: &kube::Client, obj: &serde_json::Value) -> Option<Api<DynamicObject>> {
    let (api_version, kind) = (obj["apiVersion"].as_str()?, obj["kind"].as_str()?);
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let plural = match kind {
        "Deployment" => "deployments",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        "Job" => "jobs",
        "NodePool" => "nodepools",
        "EC2NodeClass" => "ec2nodeclasses",
        "KWOKNodeClass" => "kwoknodeclasses",
        _ => return None,
    };
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Some(match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    })
}

/// Creates an object (its kind must be one [`api_for`] knows).
pub async fn create(client: &kube::Client, obj: &serde_json::Value) -> Result<(), String> {
    let api = api_for(client, obj).ok_or_else(|| format!("no API for {}", obj["kind"]))?;
    let o: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &o).await.map(|_| ()).map_err(|e| format!("creating {} {}: {e}", obj["kind"], obj["metadata"]["name"]))
}

/// The run's directory under target/lifetime/<name>.
pub fn run_dir(name: &str) -> PathBuf {
    stowage_e2e::repo_root().join("target/lifetime").join(name)
}

/// Runs one controller over `history`; `name` names the control plane and the directory.
pub async fn run(name: &str, contender: Contender, history: &History, setup: &Setup, timing: Timing) -> Result<RunOutput, RunError> {
    let dir = run_dir(name);
    std::fs::create_dir_all(&dir).map_err(|e| setup_err(name, "creating the run directory", e))?;
    let cp = ControlPlane::start(name).await.map_err(|e| setup_err(name, "starting the control plane", e))?;
    let client = cp.client();
    let kubelet = Kubelet::start_kwok(client.clone());
    let ns = Namespace { metadata: kube::api::ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.map_err(|e| setup_err(name, "creating the namespace", e))?;

    let mut karpenter = None;
    let mut stowage = None;
    match contender {
        Contender::Karpenter => {
            let types = InstanceTypes::from_catalog(&setup.catalog, &[]).map_err(|e| setup_err(name, "writing the instance types", e))?;
            // The patched operator divides its disruption and termination timers by this (peers/karpenter/timescale/).
            let env = vec![("STOWAGE_TIME_SCALE".to_string(), timing.timer_scale().to_string())];
            let op = KarpenterOperator::start(&cp, KarpenterConfig { instance_types: types, log_level: "debug".into(), env, ..Default::default() })
                .await
                .map_err(|e| setup_err(name, "starting Karpenter's operator", e))?;
            for o in setup.karpenter_objects(timing) {
                create(&client, &o).await.map_err(|e| setup_err(name, "creating Karpenter's NodePool", e))?;
            }
            karpenter = Some(op);
        }
        Contender::Stowage => {
            for o in setup.stowage_objects(timing) {
                create(&client, &o).await.map_err(|e| setup_err(name, "creating stowage's NodePool", e))?;
            }
            let cloud = Arc::new(FakeCloud::new(client.clone(), setup.catalog.clone(), timing.boot_wall()));
            let d = stowage_controller::Config::default();
            let config = stowage_controller::Config {
                identity: "stowage-lifetime".into(),
                disruption_interval: timing.controller_timer(d.disruption_interval),
                consolidation_validation: timing.controller_timer(d.consolidation_validation),
                termination_retry: timing.controller_timer(d.termination_retry),
                weights: Weights { consolidation: timing.consolidation_costs(&setup.stowage_weights.consolidation), ..setup.stowage_weights.clone() },
                ..d
            };
            let c = stowage_controller::Controller::start(client.clone(), cloud, config).await.map_err(|e| setup_err(name, "starting stowage's controller", e))?;
            stowage = Some(c);
        }
    }

    let t0 = Instant::now();
    let (recorder, watches) = Recorder::start(&client, setup.catalog.clone(), t0);
    let driver_errors = play(&client, history, timing, &recorder, t0).await;
    let recording = recorder.recording();
    for w in watches {
        w.abort();
    }

    // Keep what a reader needs to check the run: the NodeClaims left, the operator's log.
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &nodeclaim_resource());
    if let Ok(list) = claims.list(&ListParams::default()).await {
        let _ = std::fs::write(dir.join("nodeclaims-at-end.json"), serde_json::to_string_pretty(&list.items).unwrap_or_default());
    }
    let stand_in_errors = kubelet.recent_errors();
    kubelet.stop().await;
    if let Some(op) = karpenter {
        let log = op.log_file().to_path_buf();
        let _ = op.stop().await;
        let _ = std::fs::copy(&log, dir.join("karpenter.log"));
    }
    if let Some(c) = stowage {
        c.shutdown().await;
    }
    let _ = cp.stop().await;
    Ok(RunOutput { contender, recording, dir, stand_in_errors, driver_errors })
}

/// Plays the history: each event at its wall time, and every Running task pod marked Succeeded once
/// its runtime has passed. Returns the events that failed.
async fn play(client: &kube::Client, history: &History, timing: Timing, recorder: &Recorder, t0: Instant) -> Vec<String> {
    let mut errors = Vec::new();
    let deployments: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "Deployment"), "deployments"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let end = t0 + timing.wall(history.duration_s);
    let mut next = 0;
    let mut finished: std::collections::BTreeSet<String> = Default::default();
    let tick = Duration::from_millis(200);
    loop {
        let now = Instant::now();
        while next < history.events.len() && t0 + timing.wall(history.events[next].at_s) <= now {
            let e = &history.events[next];
            next += 1;
            let r = match &e.action {
                Action::Scale { app, replicas } => deployments
                    .patch(app, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": replicas}})))
                    .await
                    .map(|_| ())
                    .map_err(|err| format!("scaling {app} to {replicas}: {err}")),
                a => {
                    let mut r = Ok(());
                    for o in objects_of(a) {
                        if let Err(err) = create(client, &o).await {
                            r = Err(err);
                        }
                    }
                    r
                }
            };
            if let Err(err) = r {
                tracing::warn!(error = %err, at_s = e.at_s, "lifetime driver");
                errors.push(format!("t={}s: {err}", e.at_s));
            }
        }
        let now_s = recorder.now_s();
        for (pod, running_s, runtime_s) in recorder.running_tasks() {
            if finished.contains(&pod) || running_s + runtime_s / timing.compression > now_s {
                continue;
            }
            match succeed(&pods, &pod).await {
                Ok(()) => {
                    finished.insert(pod);
                }
                Err(err) => {
                    // Deleted meanwhile (evicted and replaced): nothing to finish.
                    finished.insert(pod.clone());
                    tracing::debug!(pod, error = %err, "lifetime driver: finishing a task pod");
                }
            }
        }
        if now >= end {
            break;
        }
        tokio::time::sleep(tick.min(end.saturating_duration_since(now))).await;
    }
    errors
}

/// Marks a task pod Succeeded (what its kubelet reports when the container exits 0).
async fn succeed(pods: &Api<Pod>, name: &str) -> Result<(), kube::Error> {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let status = json!({"status": {
        "phase": "Succeeded",
        "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
                       {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "task", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": false, "restartCount": 0,
                               "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.map(|_| ())
}

/// Writes `value` as pretty JSON to `dir/file`.
pub fn write_json(dir: &Path, file: &str, value: &impl Serialize) -> std::io::Result<()> {
    std::fs::write(dir.join(file), serde_json::to_string_pretty(value).map_err(std::io::Error::other)?)
}
