//! Interruption handling (Karpenter's AWS interruption controller), started only when an interruption
//! queue is configured (`interruptionQueue`): the leader long-polls the queue
//! ([`stowage_decide::cloud::InterruptionQueue`]; SQS in `stowage-aws`), and each message goes through
//! the shared decision ([`stowage_decide::interruption`], which the simulator runs too and which
//! documents the rules):
//!
//! - events on the NodeClaim and its Node with Karpenter's reasons (`SpotInterrupted`,
//!   `SpotRebalanceRecommendation`, `InstanceUnhealthy`, `InstanceStopping`, `InstanceTerminating`);
//! - a spot interruption marks its offering (type, zone, spot) unavailable in the refused-offering cache
//!   for `unavailable_ttl`, as a capacity error does, so the replacement is planned elsewhere;
//! - an instance going away (spot interruption, scheduled change, stopping, terminating) has its
//!   NodeClaim deleted now (`TerminatingOnInterruption`): termination taints the Node
//!   `karpenter.sh/disrupted:NoSchedule` and drains it, and a batch is asked for at once, so the pods
//!   are planned again within the 2-minute warning;
//! - the message is deleted from the queue once handled; one that cannot be read is logged and deleted
//!   (it would never read better). A message whose NodeClaim could not be deleted (an API error) stays
//!   in the queue and comes back after the visibility timeout.
//!
//! Metrics: `karpenter_interruption_received_messages_total{message_type}`,
//! `karpenter_interruption_deleted_messages_total`, `karpenter_interruption_message_queue_duration_seconds`
//! (from the event's `time` to its handling).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams};
use tokio::sync::watch;
use tokio::time::Instant;

use super::events::Reason;
use super::lifecycle::Backoff;
use super::metrics::Stage;
use super::{Ctx, kube_status, lock};
use stowage_decide::cloud::{CloudProvider, InterruptionQueue, QueueMessage};
use stowage_decide::interruption::{self, Action, Kind};
use stowage_input::api::NodeClaim;

/// The queue the controller reads, chosen at start (`Config::interruption_queue`).
#[derive(Clone)]
pub struct QueueHandle(pub Arc<dyn InterruptionQueue>);

impl std::fmt::Debug for QueueHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InterruptionQueue({})", self.0.name())
    }
}

/// While this replica does not lead, or the state is not listed yet, how often it looks again.
const IDLE: Duration = Duration::from_secs(1);

/// Reads the queue until `stop`; a failed receive backs off (1 s doubling to 5 min).
pub(crate) async fn run<P: CloudProvider + 'static>(ctx: Arc<Ctx<P>>, queue: QueueHandle, mut stop: watch::Receiver<bool>) {
    let queue = queue.0;
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
    tracing::info!(queue = queue.name(), "watching the interruption queue");
    loop {
        let wait = if !(ctx.is_leader() && lock(&ctx.state).synced()) {
            Some(IDLE)
        } else {
            let received = tokio::select! {
                r = queue.receive() => r,
                _ = stop.changed() => break,
            };
            match received {
                Ok(messages) => {
                    backoff.succeeded("receive");
                    for m in messages {
                        handle(&ctx, &*queue, m).await;
                    }
                    None
                }
                Err(e) => {
                    ctx.metrics.error(Stage::Interruption);
                    let wait = backoff.failed("receive");
                    tracing::warn!(queue = queue.name(), error = %e, retry_in_s = wait.as_secs(), "reading the interruption queue failed");
                    Some(wait)
                }
            }
        };
        if let Some(wait) = wait {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
        }
        if *stop.borrow() {
            break;
        }
    }
}

/// One message: parsed, acted on, deleted (unless an action failed).
pub(crate) async fn handle<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, queue: &dyn InterruptionQueue, m: QueueMessage) {
    match interruption::parse(&m.body) {
        Err(e) => tracing::warn!(queue = queue.name(), message_id = %m.id, error = %e, "an interruption message that cannot be read; deleting it"),
        Ok(msg) => {
            ctx.metrics.interruption_received(msg.kind.label());
            let actions = {
                let s = lock(&ctx.state);
                interruption::decide(&msg, &interruption::targets(s.nodeclaims.iter()))
            };
            tracing::info!(queue = queue.name(), message_id = %m.id, kind = msg.kind.label(), source = %msg.source, detail_type = %msg.detail_type, instances = ?msg.instance_ids, nodeclaims = actions.len(), "interruption message");
            let mut ok = true;
            for a in actions {
                ok &= act(ctx, a).await;
            }
            if let Some(t) = msg.time {
                let age = ctx.clock.now().duration_since(t).as_secs_f64();
                ctx.metrics.interruption_queue_duration(age.max(0.0));
            }
            if !ok {
                tracing::warn!(queue = queue.name(), message_id = %m.id, "acting on an interruption message failed; it stays in the queue and comes back after the visibility timeout");
                return;
            }
        }
    }
    match queue.delete(&m.receipt).await {
        Ok(()) => ctx.metrics.interruption_deleted(),
        Err(e) => {
            ctx.metrics.error(Stage::Interruption);
            tracing::warn!(queue = queue.name(), message_id = %m.id, error = %e, "deleting a handled interruption message failed; it will be handled again");
        }
    }
}

/// Karpenter's event reason for a message kind.
fn reason(kind: Kind) -> Option<Reason> {
    match kind {
        Kind::SpotInterrupted => Some(Reason::SpotInterrupted),
        Kind::RebalanceRecommendation => Some(Reason::SpotRebalanceRecommendation),
        Kind::ScheduledChange => Some(Reason::InstanceUnhealthy),
        Kind::InstanceStopped => Some(Reason::InstanceStopping),
        Kind::InstanceTerminated => Some(Reason::InstanceTerminating),
        Kind::NoOp => None,
    }
}

/// Events on the NodeClaim and its Node.
fn notify<P: CloudProvider>(ctx: &Ctx<P>, claim: &NodeClaim, reason: Reason, note: &str) {
    ctx.events.nodeclaim(claim, reason, note.to_string());
    let node = lock(&ctx.state).node_of(claim).cloned();
    if let Some(n) = node {
        ctx.events.object(&n, reason, note.replace("NodeClaim", "Node"));
    }
}

/// One NodeClaim's action; false if deleting it failed.
async fn act<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, a: Action) -> bool {
    let name = a.target.nodeclaim.clone();
    let claim = lock(&ctx.state).nodeclaim(&name).cloned();
    if let (Some(c), Some(r), Some((_, note))) = (&claim, reason(a.kind), a.kind.event()) {
        notify(ctx, c, r, note);
    }
    if let Some(key) = a.unavailable.clone() {
        tracing::info!(nodeclaim = %name, instance_type = %key.0, zone = %key.1, capacity_type = %key.2, ttl_s = ctx.config.unavailable_ttl.as_secs(), "spot interruption: offering marked unavailable");
        lock(&ctx.unavailable).mark(key, Instant::now() + ctx.config.unavailable_ttl);
    }
    if !a.delete {
        return true;
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(r) => {
            if let Some(c) = r.left() {
                lock(&ctx.state).apply(c);
            }
            tracing::info!(nodeclaim = %name, node = ?a.target.node, instance = %a.instance_id, kind = a.kind.label(), "deleting a NodeClaim on an interruption message");
            ctx.metrics.disrupted(a.kind.label(), a.target.nodepool.as_deref().unwrap_or_default(), super::metrics::claim_label(claim.as_ref(), stowage_core::domain::labels::keys::CAPACITY_TYPE));
            if let Some(c) = &claim {
                notify(ctx, c, Reason::TerminatingOnInterruption, interruption::TERMINATING_ON_INTERRUPTION.1);
            }
            ctx.wake_lifecycle(&name);
            // Termination drains the node; its pods are planned again as soon as they are pending, and
            // this batch also sees the refused offering.
            ctx.request_batch("replan/interruption");
            true
        }
        Err(e) if kube_status(&e) == Some(404) => true,
        Err(e) => {
            ctx.metrics.error(Stage::Interruption);
            tracing::warn!(nodeclaim = %name, error = %e, "deleting a NodeClaim on an interruption message failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_acted_on_kind_has_karpenters_event_reason() {
        for k in [Kind::SpotInterrupted, Kind::RebalanceRecommendation, Kind::ScheduledChange, Kind::InstanceStopped, Kind::InstanceTerminated] {
            let (want, _) = k.event().unwrap();
            assert_eq!(reason(k).unwrap().as_str(), want, "{k:?}");
        }
        assert_eq!(reason(Kind::NoOp), None);
        assert_eq!(Reason::TerminatingOnInterruption.as_str(), interruption::TERMINATING_ON_INTERRUPTION.0);
    }
}
