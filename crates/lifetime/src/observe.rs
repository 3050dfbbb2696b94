//! What the benchmark sees of a run: every NodeClaim's launch and end, every pod's creation, start, end
//! and whether it was evicted, from watches on the API server (the same for both controllers: nothing
//! here asks a controller what it did).
//!
//! Times are wall seconds since the run's start ([`Recorder::start`]); [`crate::report`] scales them.
//! - A NodeClaim is billed from the first time it shows a provider id and an instance type (the
//!   instance exists) until it is deleted from the API server (its instance is terminated before its
//!   finalizer goes, for both controllers).
//! - A pod is created when the watch first shows it, Running when its phase first is `Running`, ended
//!   when it succeeded or was deleted, and **evicted** when it carried a `DisruptionTarget` condition
//!   (set by the API server on an Eviction API call: both controllers drain through it).
//! - A Node is gone when it is deleted from the API server. A pod's work stops then even if the pod
//!   object lives on (Pod GC deletes it tens of seconds later, and the kubelet stand-in or the driver
//!   may mark it Succeeded meanwhile), so [`crate::report`] ends a task at the earlier of the two.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde::Serialize;
use stowage_core::domain::catalog::Catalog;

use crate::history::{APP_LABEL, NAMESPACE, RUNTIME_ANNOTATION};

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClaimLife {
    pub name: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour (the catalog's price of the offering).
    pub price: f64,
    pub launched_s: f64,
    pub gone_s: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PodLife {
    pub name: String,
    /// The app or Job the pod belongs to (its `app` label).
    pub app: String,
    pub created_s: f64,
    pub running_s: Option<f64>,
    pub ended_s: Option<f64>,
    pub evicted: bool,
    /// The task's runtime (history seconds), for task pods.
    pub runtime_s: Option<f64>,
    pub node: Option<String>,
}

/// Everything watched, keyed by NodeClaim name and pod uid.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recording {
    pub claims: BTreeMap<String, ClaimLife>,
    pub pods: BTreeMap<String, PodLife>,
    /// When each deleted Node went (wall s), by name.
    pub nodes_gone: BTreeMap<String, f64>,
    /// Wall seconds the run lasted.
    pub end_s: f64,
    /// Watch errors (re-listed by the watcher; kept for the report).
    pub watch_errors: Vec<String>,
}

/// Watches NodeClaims and the history's pods into a shared [`Recording`].
#[derive(Clone)]
pub struct Recorder {
    t0: Instant,
    catalog: Arc<Catalog>,
    rec: Arc<Mutex<Recording>>,
}

pub fn nodeclaim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"), "nodeclaims")
}

impl Recorder {
    /// Starts the watches; they run until the returned handles are aborted.
    pub fn start(kube: &kube::Client, catalog: Catalog, t0: Instant) -> (Recorder, Vec<tokio::task::JoinHandle<()>>) {
        let r = Recorder { t0, catalog: Arc::new(catalog), rec: Arc::default() };
        let pods: Api<Pod> = Api::namespaced(kube.clone(), NAMESPACE);
        let claims: Api<DynamicObject> = Api::all_with(kube.clone(), &nodeclaim_resource());
        let h1 = spawn_watch(pods, "pods", r.clone(), Recorder::pod_event);
        let h2 = spawn_watch(claims, "nodeclaims", r.clone(), Recorder::claim_event);
        let h3 = spawn_watch(Api::<Node>::all(kube.clone()), "nodes", r.clone(), Recorder::node_event);
        (r, vec![h1, h2, h3])
    }

    pub fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.rec.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, e: String) {
        // A watch whose resource version expired re-lists: nothing is lost, nothing to report.
        if e.contains("too old resource version") {
            tracing::debug!(error = %e, "lifetime recorder: watch re-lists");
            return;
        }
        tracing::warn!(error = %e, "lifetime recorder: watch error");
        let mut r = self.lock();
        if r.watch_errors.len() < 100 {
            r.watch_errors.push(e);
        }
        drop(r);
    }

    /// A snapshot of what was recorded so far, ended at now.
    pub fn recording(&self) -> Recording {
        let mut r = self.lock().clone();
        r.end_s = self.now_s();
        r
    }

    /// Task pods Running with their runtime: (namespace-less name, running since, runtime history seconds).
    pub fn running_tasks(&self) -> Vec<(String, f64, f64)> {
        self.lock().pods.values().filter(|p| p.ended_s.is_none()).filter_map(|p| Some((p.name.clone(), p.running_s?, p.runtime_s?))).collect()
    }

    fn pod_event(&self, e: watcher::Event<Pod>) {
        let now = self.now_s();
        let Some((pod, deleted)) = object_of(e) else { return };
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let mut r = self.lock();
        let life = r.pods.entry(uid).or_insert_with(|| PodLife {
            name: pod.metadata.name.clone().unwrap_or_default(),
            app: pod.metadata.labels.as_ref().and_then(|l| l.get(APP_LABEL)).cloned().unwrap_or_default(),
            created_s: now,
            runtime_s: pod.metadata.annotations.as_ref().and_then(|a| a.get(RUNTIME_ANNOTATION)).and_then(|v| v.parse().ok()),
            ..Default::default()
        });
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        if life.running_s.is_none() && phase == Some("Running") {
            life.running_s = Some(now);
        }
        if life.node.is_none() {
            life.node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        }
        if status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(|c| c.type_ == "DisruptionTarget" && c.status == "True")) {
            life.evicted = true;
        }
        if life.ended_s.is_none() && (deleted || matches!(phase, Some("Succeeded" | "Failed"))) {
            life.ended_s = Some(now);
        }
    }

    fn node_event(&self, e: watcher::Event<Node>) {
        let now = self.now_s();
        let Some((node, true)) = object_of(e) else { return };
        let Some(name) = node.metadata.name else { return };
        self.lock().nodes_gone.entry(name).or_insert(now);
    }

    fn claim_event(&self, e: watcher::Event<DynamicObject>) {
        let now = self.now_s();
        let Some((obj, deleted)) = object_of(e) else { return };
        let Some(name) = obj.metadata.name.clone() else { return };
        let mut r = self.lock();
        if let Some(c) = r.claims.get_mut(&name) {
            if deleted && c.gone_s.is_none() {
                c.gone_s = Some(now);
            }
            return;
        }
        if deleted {
            return;
        }
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        let launched = obj.data["status"]["providerID"].as_str().is_some_and(|p| !p.is_empty());
        let (Some(t), Some(z), Some(ct)) = (labels.get("node.kubernetes.io/instance-type"), labels.get("topology.kubernetes.io/zone"), labels.get("karpenter.sh/capacity-type")) else { return };
        if !launched {
            return;
        }
        let price = self.catalog.get(t).and_then(|it| it.offerings.iter().find(|o| &o.zone == z && &o.capacity_type == ct)).map_or(f64::NAN, |o| o.price);
        r.claims.insert(
            name.clone(),
            ClaimLife {
                name,
                nodepool: labels.get("karpenter.sh/nodepool").cloned().unwrap_or_default(),
                instance_type: t.clone(),
                zone: z.clone(),
                capacity_type: ct.clone(),
                price,
                launched_s: now,
                gone_s: None,
            },
        );
    }
}

/// The object a watch event carries and whether it was deleted; `None` for the list markers.
fn object_of<K>(e: watcher::Event<K>) -> Option<(K, bool)> {
    match e {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some((o, false)),
        watcher::Event::Delete(o) => Some((o, true)),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// Feeds every event of a watch on `api` to `on_event` until the watch ends; errors are recorded
/// (the watcher re-lists by itself).
fn spawn_watch<K>(api: Api<K>, what: &'static str, r: Recorder, on_event: fn(&Recorder, watcher::Event<K>)) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut s = watcher(api, watcher::Config::default()).boxed();
        loop {
            match s.try_next().await {
                Ok(Some(e)) => on_event(&r, e),
                Ok(None) => break,
                Err(e) => r.error(format!("{what}: {e}")),
            }
        }
    })
}
