//! The NodeClaim controller, on kube-runtime's `Controller`: one reconcile per NodeClaim, run when it
//! or its Node changes, when its timeout comes, or when something in this process asks (a launch that
//! finished, garbage collection finding its instance gone).
//!
//! ```text
//!  Controller::new(NodeClaims)
//!    .watches(Nodes → the NodeClaim with their provider id)
//!    .reconcile_on(launches, garbage collection)
//!    .run(reconcile, error_policy)
//!  reconcile = finalizer("karpenter.sh/termination",
//!                Apply   → observe → stowage_decide::lifecycle::decide → launch / register / initialize /
//!                          delete (timeouts, Node deleted, instance gone) → requeue at the decision's deadline
//!                Cleanup → termination::terminate (drain, instance, Node) → finalizer removed when Done)
//!  error_policy: Waiting → requeue when asked; Retry → per-object exponential backoff (1 s … 5 min);
//!                Fatal → event + condition, then the longest backoff
//! ```
//!
//! The decision is the simulator's too (`stowage_decide::lifecycle`). Only the leader runs this
//! controller ([`run`] starts it on gaining the Lease and stops it on losing it); the objects it acts
//! on are the state index's (`ClusterState`, which also holds our own writes), the Controller's store
//! only triggers. That costs a second watch of NodeClaims and Nodes (the index has its own), and the
//! two may be out of step by an event: so every change the index sees to a NodeClaim or its Node
//! triggers the NodeClaim again (`Ctx::wake_lifecycle`), and the Controller never runs two reconciles
//! of one NodeClaim at once. (Sharing one watch needs kube-runtime's unstable shared streams and a
//! reflector store fed from the index; the `unstable-runtime` feature is on for `reconcile_on`
//! already, but the double watch was the smaller change.)

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::clock::Clock;
use super::conditions::set_condition_at;
use super::events::Reason;
use super::launcher::{self, LaunchError, Launched};
use super::metrics::Stage;
use super::registration::{self, RegistrationError};
use super::state::TERMINATION_FINALIZER;
use super::termination::{self, Progress, TerminationError};
use super::{Ctx, kube_status, lock};
use stowage_core::domain::labels::keys;
use stowage_decide::cloud::{CloudError, CloudProvider};
use stowage_decide::lifecycle::{Decision, Step};
use stowage_input::api::NodeClaim;

/// Why one reconcile of a NodeClaim did not finish, and so what the error policy does.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// Not a failure: termination waits for pods to leave or for a launch running in this process.
    /// Looked at again after `retry`.
    #[error("NodeClaim {claim}: waiting: {what}")]
    Waiting { claim: String, what: String, retry: Duration },
    /// Registration or initialization: an API call failed (a conflict included). Retried with backoff.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    /// The launch failed in a way the launcher already reported (throttled, the NodeClass or the
    /// catalog not ready): retried with backoff, no sooner than `after`, until the launch timeout.
    #[error("NodeClaim {claim}: launch deferred")]
    LaunchDeferred { claim: String, after: Duration },
    /// Launching failed; retried with backoff until the launch timeout, unless fatal.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// Termination failed part way; it resumes where it stopped, with backoff.
    #[error(transparent)]
    Termination(#[from] TerminationError),
    /// Deleting the NodeClaim (a timeout, its Node or instance gone) failed. Retried with backoff.
    #[error("NodeClaim {claim}: deleting it: {error}")]
    Delete { claim: String, error: kube::Error },
}

/// What the error policy does with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Requeue after this long, without counting a failure.
    Wait(Duration),
    /// Requeue with the object's exponential backoff.
    Retry,
    /// Retrying the same way cannot succeed (bad configuration, credentials, an invalid NodeClaim): say
    /// so on the NodeClaim (event and condition) and retry at the longest backoff.
    Fatal,
}

fn cloud_disposition(e: &CloudError) -> Disposition {
    if e.retryable() || matches!(e, CloudError::InsufficientCapacity { .. } | CloudError::NotFound(_)) { Disposition::Retry } else { Disposition::Fatal }
}

impl LifecycleError {
    pub fn disposition(&self) -> Disposition {
        match self {
            LifecycleError::Waiting { retry, .. } => Disposition::Wait(*retry),
            LifecycleError::Registration(_) | LifecycleError::Delete { .. } | LifecycleError::LaunchDeferred { .. } => Disposition::Retry,
            LifecycleError::Launch(LaunchError::Cloud { error, .. }) | LifecycleError::Termination(TerminationError::Cloud { error, .. }) => cloud_disposition(error),
            LifecycleError::Launch(LaunchError::InvalidClaim { .. }) => Disposition::Fatal,
            LifecycleError::Launch(_) | LifecycleError::Termination(_) => Disposition::Retry,
        }
    }
}

/// The error a reconcile returns: ours, or `finalizer()`'s adding or removing the finalizer.
pub type ReconcileError = finalizer::Error<LifecycleError>;

/// Per-object exponential backoff: `base · 2^(failures-1)`, at most `max`; a success resets it.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: BTreeMap<String, u32>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff { base, max, failures: BTreeMap::new() }
    }

    /// One more failure of `key`: how long to wait before the next attempt.
    pub fn failed(&mut self, key: &str) -> Duration {
        let n = self.failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        self.base.saturating_mul(1u32 << (*n - 1).min(20)).min(self.max)
    }

    /// The longest wait, counted as a failure (a fatal error).
    pub fn fatal(&mut self, key: &str) -> Duration {
        self.failed(key);
        self.max
    }

    pub fn succeeded(&mut self, key: &str) {
        self.failures.remove(key);
    }
}

/// The Action for a decision: requeue when its deadline comes, else wait for a change.
pub(crate) fn requeue_for(clock: &Clock, d: &Decision<k8s_openapi::jiff::Timestamp>) -> Action {
    match d.until {
        Some(t) => Action::requeue(clock.until(t).max(Duration::from_millis(100))),
        None => Action::await_change(),
    }
}

/// One reconcile of one NodeClaim.
pub(crate) async fn reconcile<P: CloudProvider + 'static>(obj: Arc<NodeClaim>, ctx: Arc<Ctx<P>>) -> Result<Action, ReconcileError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    // Set when this pass's Cleanup finished termination: counted once `finalizer()` has removed the
    // finalizer, so a second pass on a stale copy (its removal answered 404) does not count it again.
    let finished = std::sync::atomic::AtomicBool::new(false);
    let obj_labels = obj.metadata.labels.clone();
    let result = finalizer(&api, TERMINATION_FINALIZER, obj, |event| async {
        match event {
            Event::Apply(c) => apply(&ctx, &c).await,
            Event::Cleanup(c) => {
                let action = cleanup(&ctx, &c).await?;
                finished.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(action)
            }
        }
    })
    .await;
    let action = match result {
        // The NodeClaim went away after an earlier pass removed its finalizer (this pass ran on a
        // copy from before): termination is complete, and that pass counted it.
        Err(finalizer::Error::RemoveFinalizer(e)) if kube_status(&e) == Some(404) => Action::await_change(),
        r => {
            let action = r?;
            if finished.load(std::sync::atomic::Ordering::Relaxed) {
                let labels = obj_labels.unwrap_or_default();
                let l = |k: &str| labels.get(k).cloned().unwrap_or_default();
                ctx.metrics.terminated(&l(keys::NODEPOOL), &l(keys::CAPACITY_TYPE), &l(keys::ZONE));
            }
            action
        }
    };
    lock(&ctx.lifecycle_backoff).succeeded(&name);
    Ok(action)
}

/// The freshest copy of a NodeClaim: the state index's (which holds our own writes) when it is the
/// same object, else the Controller's.
fn current<P>(ctx: &Ctx<P>, obj: &NodeClaim) -> NodeClaim {
    let s = lock(&ctx.state);
    let name = obj.metadata.name.as_deref().unwrap_or_default();
    s.nodeclaim(name).filter(|c| c.metadata.uid == obj.metadata.uid).cloned().unwrap_or_else(|| obj.clone())
}

/// `Event::Apply`: decide and carry out one step.
async fn apply<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, obj: &NodeClaim) -> Result<Action, LifecycleError> {
    let claim = current(ctx, obj);
    let name = claim.metadata.name.clone().unwrap_or_default();
    let (node, gone) = {
        let s = lock(&ctx.state);
        let node = s.node_of(&claim).cloned();
        let pid = claim.status.as_ref().and_then(|s| s.provider_id.clone()).unwrap_or_default();
        (node, !pid.is_empty() && lock(&ctx.vanished).contains(&pid))
    };
    let d = registration::decision(&claim, node.as_ref(), gone, ctx.clock.now(), &ctx.config.timeouts);
    tracing::debug!(nodeclaim = %name, step = ?d.step, "lifecycle");
    match &d.step {
        Step::Launch => {
            if let Launched::Retry { after } = launcher::launch(ctx, &name).await? {
                return Err(LifecycleError::LaunchDeferred { claim: name, after });
            }
        }
        Step::LaunchTimeout { age } => {
            tracing::warn!(nodeclaim = %name, age_s = age.as_secs(), "not launched within the launch timeout; deleting");
            ctx.events.nodeclaim(&claim, Reason::LaunchTimeout, format!("not launched after {}s; deleting", age.as_secs()));
            delete(ctx, &name).await?;
        }
        Step::RegistrationTimeout { since_launch } => {
            tracing::warn!(nodeclaim = %name, since_launch_s = since_launch.as_secs(), "no Node registered within the registration timeout; deleting");
            let note = format!("no Node registered {}s after launch; deleting (the instance is terminated)", since_launch.as_secs());
            ctx.events.nodeclaim(&claim, Reason::RegistrationTimeout, note);
            delete(ctx, &name).await?;
        }
        Step::NodeDeleted { node } => {
            tracing::info!(node = %node, nodeclaim = %name, "Node deleted; deleting its NodeClaim");
            delete(ctx, &name).await?;
        }
        Step::InstanceGone => {
            tracing::warn!(nodeclaim = %name, "its instance is gone; deleting the NodeClaim");
            ctx.events.nodeclaim(&claim, Reason::InstanceVanished, "the instance no longer exists; deleting the NodeClaim".into());
            delete(ctx, &name).await?;
            ctx.metrics.gc(0, 1);
        }
        Step::Register { .. } => {
            if let Some(n) = &node {
                registration::register(ctx, &claim, n).await?;
            }
        }
        Step::Initialize { node } => registration::initialize(ctx, &claim, node).await?,
        Step::AwaitNode | Step::AwaitInitialization | Step::Settled | Step::Terminate | Step::Nothing => {}
    }
    Ok(requeue_for(&ctx.clock, &d))
}

/// `Event::Cleanup`: one pass of termination; Ok (and so the finalizer's removal) only when done.
async fn cleanup<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, obj: &NodeClaim) -> Result<Action, LifecycleError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    match termination::terminate(ctx, obj).await? {
        Progress::Done => Ok(Action::await_change()),
        Progress::Draining { remaining } => Err(LifecycleError::Waiting { claim: name, what: format!("{remaining} pod(s) draining"), retry: ctx.config.termination_retry }),
        Progress::Detaching { volumes } => Err(LifecycleError::Waiting { claim: name, what: format!("{volumes} volume(s) detaching"), retry: ctx.config.termination_retry }),
        Progress::AwaitLaunch => Err(LifecycleError::Waiting { claim: name, what: "its launch is running".into(), retry: Duration::from_secs(1) }),
    }
}

async fn delete<P: CloudProvider>(ctx: &Ctx<P>, name: &str) -> Result<(), LifecycleError> {
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(r) => {
            if let Some(c) = r.left() {
                lock(&ctx.state).apply(c);
            }
            Ok(())
        }
        Err(e) if kube_status(&e) == Some(404) => Ok(()),
        Err(error) => Err(LifecycleError::Delete { claim: name.to_string(), error }),
    }
}

/// The error policy: what to do after a failed reconcile (see [`Disposition`]).
pub(crate) fn error_policy<P: CloudProvider + 'static>(obj: Arc<NodeClaim>, error: &ReconcileError, ctx: Arc<Ctx<P>>) -> Action {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let disposition = match error {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.disposition(),
        // Adding or removing the finalizer raced another writer (the JSON patch's test failed) or the API failed.
        _ => Disposition::Retry,
    };
    match disposition {
        Disposition::Wait(d) => {
            tracing::debug!(nodeclaim = %name, %error, "waiting");
            Action::requeue(d)
        }
        Disposition::Retry => {
            let mut after = lock(&ctx.lifecycle_backoff).failed(&name);
            let conflict = match error {
                finalizer::Error::ApplyFailed(LifecycleError::Registration(e)) => kube_status(&e.error) == Some(409),
                // finalizer()'s JSON patch tests the finalizer list it read: someone changed it meanwhile.
                finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => matches!(kube_status(e), Some(409 | 422)),
                _ => false,
            };
            if let finalizer::Error::ApplyFailed(LifecycleError::LaunchDeferred { after: at_least, .. }) = error {
                // The launcher logged and counted it.
                after = after.max(*at_least);
                tracing::debug!(nodeclaim = %name, retry_in_ms = after.as_millis() as u64, "launch deferred");
            } else if conflict {
                tracing::debug!(nodeclaim = %name, %error, retry_in_ms = after.as_millis() as u64, "raced another writer; retrying");
            } else {
                ctx.metrics.error(stage(error));
                tracing::warn!(nodeclaim = %name, %error, retry_in_ms = after.as_millis() as u64, "NodeClaim reconcile failed; retrying with backoff");
            }
            Action::requeue(after)
        }
        Disposition::Fatal => {
            let after = lock(&ctx.lifecycle_backoff).fatal(&name);
            ctx.metrics.error(stage(error));
            tracing::error!(nodeclaim = %name, %error, retry_in_s = after.as_secs(), "NodeClaim reconcile failed and cannot succeed as things are");
            ctx.events.nodeclaim(&obj, Reason::ReconcileFailed, error.to_string());
            let ctx = ctx.clone();
            let message = error.to_string();
            tokio::spawn(async move { mark_failed(&ctx, &name, &message).await });
            Action::requeue(after)
        }
    }
}

fn stage(error: &ReconcileError) -> Stage {
    match error {
        finalizer::Error::ApplyFailed(LifecycleError::Launch(_)) => Stage::Launch,
        finalizer::Error::CleanupFailed(_) | finalizer::Error::RemoveFinalizer(_) => Stage::Terminate,
        _ => Stage::Register,
    }
}

/// The `Reconciled=False` condition a fatal error leaves on the NodeClaim (best effort: the event and
/// the log say it too).
async fn mark_failed<P: CloudProvider>(ctx: &Ctx<P>, name: &str, message: &str) {
    let Some(claim) = lock(&ctx.state).nodeclaim(name).cloned() else { return };
    let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    set_condition_at(&mut conditions, CONDITION_RECONCILED, "False", "ReconcileFailed", message, ctx.clock.now());
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let patch = json!({ "status": { "conditions": conditions } });
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(c) => lock(&ctx.state).apply(c),
        Err(e) => tracing::warn!(nodeclaim = name, error = %e, "writing the Reconciled condition failed"),
    }
}

/// The condition a fatal reconcile error sets (stowage's; Karpenter has none for it).
pub(crate) const CONDITION_RECONCILED: &str = "Reconciled";

/// The NodeClaims a Node's change concerns: the one with its provider id (registration), or the one
/// its owner reference names (a Node being deleted after its NodeClaim lost track of it).
pub(crate) fn claims_of_node<P>(ctx: &Ctx<P>, node: &Node) -> Vec<ObjectRef<NodeClaim>> {
    let s = lock(&ctx.state);
    let mut out: Vec<ObjectRef<NodeClaim>> = s.nodeclaim_of(node).and_then(|c| c.metadata.name.clone()).map(|n| ObjectRef::new(&n)).into_iter().collect();
    for o in node.metadata.owner_references.iter().flatten().filter(|o| o.kind == "NodeClaim") {
        if !out.iter().any(|r| r.name == o.name) {
            out.push(ObjectRef::new(&o.name));
        }
    }
    out
}

/// Runs the NodeClaim controller while this replica leads and its state is synced; stops it (letting
/// running reconciles finish) when leadership is lost or `stop` fires.
pub(crate) async fn run<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, mut stop: watch::Receiver<bool>) {
    let mut leader = ctx.leader.clone();
    loop {
        // Wait to lead with a complete view.
        while !(*leader.borrow() && lock(&ctx.state).synced()) {
            tokio::select! {
                _ = leader.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = stop.changed() => return,
            }
        }
        let (tx, rx) = mpsc::unbounded_channel::<ObjectRef<NodeClaim>>();
        *lock(&ctx.lifecycle_trigger) = Some(tx);
        let mut lost = ctx.leader.clone();
        let mut stop2 = stop.clone();
        let shutdown = async move {
            tokio::select! {
                _ = lost.wait_for(|l| !*l) => {}
                _ = stop2.wait_for(|s| *s) => {}
            }
        };
        let mapper_ctx = ctx.clone();
        tracing::info!("NodeClaim controller started");
        Controller::new(Api::<NodeClaim>::all(ctx.client.clone()), watcher::Config::default())
            .watches(Api::<Node>::all(ctx.client.clone()), watcher::Config::default(), move |n: Node| claims_of_node(&mapper_ctx, &n))
            .reconcile_on(tokio_stream_of(rx))
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|r| async move {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "NodeClaim controller");
                }
            })
            .await;
        *lock(&ctx.lifecycle_trigger) = None;
        tracing::info!("NodeClaim controller stopped");
        if *stop.borrow() {
            return;
        }
    }
}

/// An unbounded receiver as a stream.
fn tokio_stream_of<T: Send + 'static>(mut rx: mpsc::UnboundedReceiver<T>) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_object_up_to_the_cap_and_resets_on_success() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let waits: Vec<u64> = (0..8).map(|_| b.failed("a").as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.failed("b"), Duration::from_secs(1), "each object has its own");
        b.succeeded("a");
        assert_eq!(b.failed("a"), Duration::from_secs(1));
        assert_eq!(b.fatal("c"), Duration::from_secs(60));
        for _ in 0..100 {
            b.failed("d");
        }
        assert_eq!(b.failed("d"), Duration::from_secs(60), "no overflow");
    }

    /// A launched NodeClaim without a Node is requeued for its registration deadline, and at that
    /// moment the decision deletes it: tokio's paused time crosses the 15 minutes, no real time passes.
    #[tokio::test(start_paused = true)]
    async fn a_nodeclaim_is_requeued_for_its_registration_timeout() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use k8s_openapi::jiff::Timestamp;
        use stowage_input::api::{Condition, NodeClaimSpec, NodeClaimStatus};
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let clock = Clock::anchored(t0);
        let mut c = NodeClaim::new("np-a", NodeClaimSpec::default());
        c.metadata.creation_timestamp = Some(Time(t0));
        let launched =
            Condition { type_: "Launched".into(), status: "True".into(), reason: None, message: None, last_transition_time: Some(super::super::conditions::timestamp(t0)), observed_generation: None };
        c.status = Some(NodeClaimStatus { provider_id: Some("aws:///us-east-1a/i-1".into()), conditions: Some(vec![launched]), ..Default::default() });
        let timeouts = stowage_decide::lifecycle::Timeouts::default();
        let start = tokio::time::Instant::now();

        tokio::time::advance(Duration::from_secs(14 * 60)).await;
        let d = registration::decision(&c, None, false, clock.now(), &timeouts);
        assert_eq!(d.step, Step::AwaitNode);
        assert_eq!(requeue_for(&clock, &d), Action::requeue(Duration::from_secs(60)));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(900));
        let d = registration::decision(&c, None, false, clock.now(), &timeouts);
        assert_eq!(d.step, Step::RegistrationTimeout { since_launch: Duration::from_secs(900) });
        assert_eq!(requeue_for(&clock, &d), Action::await_change(), "deleting it is a change the watch reports");
    }

    #[test]
    fn errors_say_what_the_policy_does() {
        let claim = || "c".to_string();
        let w = LifecycleError::Waiting { claim: claim(), what: "x".into(), retry: Duration::from_secs(3) };
        assert_eq!(w.disposition(), Disposition::Wait(Duration::from_secs(3)));
        let throttled = LifecycleError::Termination(TerminationError::Cloud { claim: claim(), error: CloudError::Throttled("slow down".into()) });
        assert_eq!(throttled.disposition(), Disposition::Retry);
        let fatal = LifecycleError::Launch(LaunchError::Cloud { claim: claim(), error: CloudError::Fatal("UnauthorizedOperation".into()) });
        assert_eq!(fatal.disposition(), Disposition::Fatal);
        assert_eq!(LifecycleError::Launch(LaunchError::InvalidClaim { claim: claim(), message: "bad".into() }).disposition(), Disposition::Fatal);
        assert_eq!(LifecycleError::Launch(LaunchError::NoOffering { claim: claim() }).disposition(), Disposition::Retry);
    }
}
