//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.
//!
//! Only the leader provisions, launches, registers, disrupts and collects garbage; every replica keeps
//! its watches warm so a new leader starts from a synced state.
//!
//! - The holder renews the Lease every `retry_period`. A replica takes over only when the Lease record
//!   (holder and renew time) has not changed for `lease_duration` *as observed by its own clock*, so
//!   clock skew between replicas does not matter.
//! - A leader that has not renewed for `renew_deadline` (< `lease_duration`) stops acting as leader
//!   before anyone else may take over.
//! - A replica that restarts with the same identity (a Pod's name survives a container restart) renews
//!   its own Lease at once.
//! - On shutdown the leader releases the Lease (empty holder, 1 s duration) so a successor starts at
//!   once.
//!
//! Writes carry the resource version read, so two replicas can never both win the same round.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use super::kube_status;
use super::metrics::{Metrics, Stage};

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (the Pod name).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaderConfig {
            namespace: namespace.into(),
            name: "stowage-leader-election".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What one round does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Free, or expired: take it over.
    TakeOver,
    /// Someone else holds it.
    Follow { holder: String },
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// The Lease record as change detection sees it.
pub(crate) fn record_key(lease: &Lease) -> String {
    let spec = lease.spec.clone().unwrap_or_default();
    format!("{:?}/{:?}/{:?}", spec.holder_identity, spec.renew_time.map(|t| t.0.to_string()), spec.lease_duration_seconds)
}

/// Decides a round. `unchanged_for` is how long the Lease record has looked the same to us.
pub fn decide(lease: Option<&Lease>, me: &str, unchanged_for: Duration, default_duration: Duration) -> Decision {
    let Some(lease) = lease else { return Decision::Create };
    match holder(lease) {
        None => Decision::TakeOver,
        Some(h) if h == me => Decision::Renew,
        Some(h) => {
            let duration = lease.spec.as_ref().and_then(|s| s.lease_duration_seconds).map(|s| Duration::from_secs(s.max(0) as u64)).unwrap_or(default_duration);
            if unchanged_for >= duration { Decision::TakeOver } else { Decision::Follow { holder: h.to_string() } }
        }
    }
}

/// The Lease as held by `me` now.
fn held(mut lease: Lease, cfg: &LeaderConfig, transition: bool) -> Lease {
    let now = MicroTime(Timestamp::now());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if transition {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.acquire_time = Some(now.clone());
    }
    spec.holder_identity = Some(cfg.identity.clone());
    spec.lease_duration_seconds = Some(cfg.lease_duration.as_secs().max(1) as i32);
    spec.renew_time = Some(now);
    lease
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaderError {
    /// Reading or writing the Lease failed; the round is retried after `retry_period`. A leader keeps
    /// leading until `renew_deadline` passes without a renewal.
    #[error("Lease {namespace}/{name}: {error}")]
    Kube { namespace: String, name: String, error: kube::Error },
}

/// The election loop. `leader` tells the rest of the controller whether it leads; `shutdown` ends the
/// loop (releasing the Lease if held).
pub async fn run(client: kube::Client, cfg: LeaderConfig, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>, metrics: Metrics) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut observed: Option<(String, Instant)> = None;
    let mut last_renew: Option<Instant> = None;
    loop {
        let round = one_round(&api, &cfg, &mut observed).await;
        let now = Instant::now();
        match round {
            Ok(true) => last_renew = Some(now),
            Ok(false) => last_renew = None,
            Err(e) => {
                metrics.error(Stage::Leader);
                tracing::warn!(error = %e, "leader election round failed");
            }
        }
        let leading = last_renew.is_some_and(|t| now.duration_since(t) < cfg.renew_deadline);
        if !leading {
            last_renew = None;
        }
        leader.send_if_modified(|l| {
            if *l != leading {
                tracing::info!(identity = %cfg.identity, leading, "leadership changed");
                *l = leading;
                true
            } else {
                false
            }
        });
        metrics.set_leader(leading);
        tokio::select! {
            _ = tokio::time::sleep(cfg.retry_period) => {}
            _ = shutdown.changed() => break,
        }
    }
    if *leader.borrow() {
        leader.send_replace(false);
        metrics.set_leader(false);
        if let Err(e) = release(&api, &cfg).await {
            tracing::warn!(error = %e, "releasing the Lease failed; a successor waits for it to expire");
        }
    }
}

/// One round: Ok(true) if we hold the Lease afterwards.
async fn one_round(api: &Api<Lease>, cfg: &LeaderConfig, observed: &mut Option<(String, Instant)>) -> Result<bool, LeaderError> {
    let err = |error| LeaderError::Kube { namespace: cfg.namespace.clone(), name: cfg.name.clone(), error };
    let current = api.get_opt(&cfg.name).await.map_err(err)?;
    let now = Instant::now();
    let unchanged_for = match (&current, observed.as_ref()) {
        (Some(l), Some((key, since))) if *key == record_key(l) => now.duration_since(*since),
        (Some(l), _) => {
            *observed = Some((record_key(l), now));
            Duration::ZERO
        }
        (None, _) => Duration::ZERO,
    };
    let decision = decide(current.as_ref(), &cfg.identity, unchanged_for, cfg.lease_duration);
    let result = match (decision, current) {
        (Decision::Create, _) => {
            let lease = Lease { metadata: ObjectMeta { name: Some(cfg.name.clone()), namespace: Some(cfg.namespace.clone()), ..Default::default() }, spec: None };
            api.create(&PostParams::default(), &held(lease, cfg, true)).await.map(|_| true)
        }
        (Decision::Renew, Some(l)) => api.replace(&cfg.name, &PostParams::default(), &held(l, cfg, false)).await.map(|_| true),
        (Decision::TakeOver, Some(l)) => {
            tracing::info!(identity = %cfg.identity, previous = ?l.spec.as_ref().and_then(|s| s.holder_identity.clone()), "taking over the Lease");
            api.replace(&cfg.name, &PostParams::default(), &held(l, cfg, true)).await.map(|_| true)
        }
        (Decision::Follow { .. }, _) | (_, None) => Ok(false),
    };
    match result {
        Ok(v) => Ok(v),
        // Someone else wrote first (conflict) or created it (already exists): not ours this round.
        Err(e) if matches!(kube_status(&e), Some(409)) => Ok(false),
        Err(e) => Err(err(e)),
    }
}

async fn release(api: &Api<Lease>, cfg: &LeaderConfig) -> Result<(), kube::Error> {
    let Some(mut l) = api.get_opt(&cfg.name).await? else { return Ok(()) };
    if l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(cfg.identity.as_str()) {
        return Ok(());
    }
    let spec = l.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    api.replace(&cfg.name, &PostParams::default(), &l).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, secs: i32) -> Lease {
        Lease { metadata: ObjectMeta::default(), spec: Some(LeaseSpec { holder_identity: holder.map(str::to_string), lease_duration_seconds: Some(secs), ..Default::default() }) }
    }

    #[test]
    fn elections() {
        let d = Duration::from_secs(15);
        assert_eq!(decide(None, "a", Duration::ZERO, d), Decision::Create);
        assert_eq!(decide(Some(&lease(Some("a"), 15)), "a", Duration::ZERO, d), Decision::Renew, "a restarted holder renews at once");
        assert_eq!(decide(Some(&lease(Some("b"), 15)), "a", Duration::from_secs(14), d), Decision::Follow { holder: "b".into() });
        assert_eq!(decide(Some(&lease(Some("b"), 15)), "a", Duration::from_secs(15), d), Decision::TakeOver, "expired as seen by our clock");
        assert_eq!(decide(Some(&lease(None, 1)), "a", Duration::ZERO, d), Decision::TakeOver, "released");
        assert_eq!(decide(Some(&lease(Some(""), 1)), "a", Duration::ZERO, d), Decision::TakeOver);
    }

    #[test]
    fn holding_sets_the_record_and_counts_transitions() {
        let cfg = LeaderConfig::new("kube-system", "me");
        let l = held(lease(Some("b"), 15), &cfg, true);
        let s = l.spec.as_ref().unwrap();
        assert_eq!(s.holder_identity.as_deref(), Some("me"));
        assert_eq!(s.lease_transitions, Some(1));
        assert!(s.renew_time.is_some() && s.acquire_time.is_some());
        assert_ne!(record_key(&l), record_key(&lease(Some("b"), 15)));
    }
}
