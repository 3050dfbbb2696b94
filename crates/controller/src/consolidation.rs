//! Consolidation of underutilised nodes and replacement of drifted ones in the controller: the shared
//! decisions (`stowage_decide::drift` for which NodeClaims drifted, and) the shared decision
//! (`stowage_decide::consolidation`, which the simulator runs too and whose module doc states the
//! rules: candidates, budgets, PDBs, do-not-disrupt, spot-to-spot, the search and its lower bound),
//! validated, carried out in Karpenter's order, and persisted on the NodeClaims so that a restarted
//! controller finishes or abandons it and never decides it twice.
//!
//! ```text
//!  round (disruption task, leader, state synced, no emptiness action this round)
//!   ├─ decisions in progress, read from the replacement NodeClaims' annotations:
//!   │    every replacement Initialized        → delete the replaced NodeClaims (termination drains
//!   │                                            them; their pods' controllers recreate them and
//!   │                                            kube-scheduler puts them on the replacements)
//!   │    a replacement missing or deleting    → abandoned: nothing is removed (the replacements,
//!   │                                            empty, go by emptiness)
//!   │    otherwise                            → wait; no new decision meanwhile (but for empty
//!   │                                            drifted NodeClaims, below)
//!   ├─ drift first (as Karpenter), pass after pass (`drift::candidate`; the NodeClaims decisions in
//!   │    progress replace, and those deleted this round, count against the `Drifted` budgets; the
//!   │    instances' subnets and security groups are garbage collection's last listing): each
//!   │    empty drifted NodeClaim the budgets allow gets `Drifted=True` and is deleted; then, only
//!   │    with no decision in progress and nothing deleted this round, the first non-empty one gets
//!   │    `Drifted=True`, its pods are planned elsewhere (`consolidation::replace`, no saving
//!   │    required) and it is replaced as below (one whose pods find no place is tried again after a
//!   │    minute)
//!   └─ otherwise, when a node is due (consolidateAfter) or a proposal waits for validation:
//!        decide over the snapshot (off the async runtime), check the displaced pods' placement
//!        with the checker, and act only when the same nodes are chosen again `validation` later
//!        (Karpenter's 15 s): no replacement → delete the nodes now; else create the replacement
//!        NodeClaims, annotated, and launch them.
//! ```
//!
//! Persisted state: each replacement NodeClaim carries [`DECISION_ANNOTATION`]
//! (`<cause>:<id>/<count>`: why, the decision, and how many replacements it launched) and [`REPLACES_ANNOTATION`] (the NodeClaims it
//! replaces, comma-separated). While a decision's replaced NodeClaims exist, its replacements are
//! nominated (never judged empty). The proposal awaiting validation is in memory only: a restart
//! validates again, later, never earlier.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stowage_core::domain::catalog::Catalog;

use super::conditions::{CONDITION_INITIALIZED, condition, set_condition};
use super::events::Reason;
use super::metrics::Stage;
use super::state::{ClusterState, Snapshot};
use super::{Ctx, after_launch, kube_status, launcher, lock};
use stowage_decide::cloud::CloudProvider;
use stowage_decide::consolidation::{self as shared, Decision, Outcome};
use stowage_decide::drift::{self, Drifted};
use stowage_decide::provision;
use stowage_input::api::NodeClaim;

/// On a replacement NodeClaim: `<decision id>/<number of replacements>`.
pub const DECISION_ANNOTATION: &str = "stowage.dev/consolidation";
/// On a replacement NodeClaim: the NodeClaims its decision replaces, comma-separated.
pub const REPLACES_ANNOTATION: &str = "stowage.dev/consolidation-replaces";
/// The cause labels of metrics and logs.
const UNDERUTILIZED: &str = "underutilized";
const DRIFTED: &str = "drifted";
/// How long a drifted NodeClaim whose pods found no place waits before it is tried again.
const DRIFT_RETRY: Duration = Duration::from_secs(60);

/// The consolidation task's memory (in the disruption loop).
#[derive(Debug, Default)]
pub struct Consolidator {
    shared: shared::Consolidation<Timestamp>,
    /// Nodes a round chose, and when: acted on only when chosen again `validation` later.
    proposed: Option<(BTreeSet<String>, Timestamp)>,
    /// Drifted NodeClaims whose replacement found no place for their pods, and when.
    drift_failed: BTreeMap<String, Timestamp>,
}

/// Where a persisted decision stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Some replacement is not Initialized yet.
    Waiting,
    /// Every replacement is Initialized: these replaced NodeClaims are to be deleted.
    Ready(Vec<String>),
    /// A replacement is missing or being deleted: nothing is removed.
    Abandoned,
    /// The replaced NodeClaims are gone or going.
    Done,
}

/// A decision read back from the NodeClaims.
#[derive(Clone, Debug)]
pub struct InProgress {
    /// Why: [`UNDERUTILIZED`] or [`DRIFTED`].
    pub cause: &'static str,
    pub id: String,
    pub replacements: Vec<String>,
    pub replaced: Vec<String>,
    pub progress: Progress,
}

/// The decisions the NodeClaims record.
pub fn in_progress(s: &ClusterState) -> Vec<InProgress> {
    let mut groups: BTreeMap<String, (usize, Vec<&NodeClaim>)> = BTreeMap::new();
    for c in s.nodeclaims.iter() {
        let Some(v) = c.metadata.annotations.as_ref().and_then(|a| a.get(DECISION_ANNOTATION)) else { continue };
        let Some((id, count)) = v.rsplit_once('/') else { continue };
        let count = count.parse().unwrap_or(usize::MAX);
        groups.entry(id.to_string()).or_insert((count, Vec::new())).1.push(c);
    }
    let mut out = Vec::new();
    for (key, (count, members)) in groups {
        let (cause, id) = match key.split_once(':') {
            Some((DRIFTED, id)) => (DRIFTED, id.to_string()),
            Some((_, id)) => (UNDERUTILIZED, id.to_string()),
            None => (UNDERUTILIZED, key.clone()),
        };
        let replaced: BTreeSet<String> =
            members.iter().filter_map(|c| c.metadata.annotations.as_ref()?.get(REPLACES_ANNOTATION)).flat_map(|v| v.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from)).collect();
        let live: Vec<String> = replaced.iter().filter(|r| s.nodeclaim(r).is_some_and(|c| c.metadata.deletion_timestamp.is_none())).cloned().collect();
        let initialized = |c: &NodeClaim| condition(c, CONDITION_INITIALIZED).is_some_and(|x| x.status == "True");
        let progress = if live.is_empty() {
            Progress::Done
        } else if members.len() < count || members.iter().any(|c| c.metadata.deletion_timestamp.is_some()) {
            Progress::Abandoned
        } else if members.iter().all(|c| initialized(c)) {
            Progress::Ready(live)
        } else {
            Progress::Waiting
        };
        let replacements = members.iter().filter_map(|c| c.metadata.name.clone()).collect();
        out.push(InProgress { cause, id, replacements, replaced: replaced.into_iter().collect(), progress });
    }
    out
}

/// Replacement NodeClaims that must not be judged empty: their decision's replaced NodeClaims still
/// exist (the pods that will move to them are still on the old nodes).
pub fn protected(decisions: &[InProgress]) -> BTreeSet<String> {
    decisions.iter().filter(|d| matches!(d.progress, Progress::Waiting | Progress::Ready(_))).flat_map(|d| d.replacements.iter().cloned()).collect()
}

/// One consolidation round (module doc); false if an API call failed (the task backs off).
pub(crate) async fn round<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, c: &mut Consolidator) -> bool {
    let decisions = in_progress(&lock(&ctx.state));
    let mut ok = true;
    for d in &decisions {
        if let Progress::Ready(replaced) = &d.progress {
            let why = format!("decision {}: replacement(s) {} Initialized", d.id, d.replacements.join(", "));
            ok &= delete_claims(ctx, replaced, &why, d.cause).await;
        }
    }
    let busy = decisions.iter().any(|d| matches!(d.progress, Progress::Waiting | Progress::Ready(_)));
    let now = ctx.clock.now();
    let (snapshot, view) = match snapshot(ctx).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "consolidation round failed");
            return false;
        }
    };
    // Karpenter's NodePool series follow the pools' nodes every round, not only when a batch plans:
    // a node launched by the last batch is counted even when no pod is pending afterwards.
    ctx.metrics.nodepools(&snapshot.cluster);
    // Drift before consolidation, as Karpenter orders them. One drift pass after another, as
    // Karpenter's loop passes again at once after starting a command: every NodeClaim a decision in
    // progress replaces, or this round deleted, counts against its pool's `Drifted` budget, so the
    // pool's empty drifted nodes go together up to the budget. A non-empty one needs the cluster at
    // rest (its pods are planned as the provisioning decision plans, with no replacement in flight
    // whose room is already promised), so it waits for decisions in progress.
    c.drift_failed.retain(|_, t| now.duration_since(*t).unsigned_abs() < DRIFT_RETRY);
    let mut disrupting: BTreeSet<String> = decisions.iter().filter(|d| matches!(d.progress, Progress::Waiting | Progress::Ready(_))).flat_map(|d| d.replaced.iter().cloned()).collect();
    let instances = lock(&ctx.instances).clone();
    let mut drifted = None;
    loop {
        let found = {
            let failed = &c.drift_failed;
            let skip = |name: &str| failed.contains_key(name);
            drift::candidate(&snapshot.cluster, &snapshot.objects, &drift::Round { instances: &instances, now: Some(now.as_second()), disrupting: &disrupting, skip: &skip, catalog: Some(&view) })
        };
        let Some(d) = found else { break };
        if !d.empty {
            drifted = Some(d);
            break;
        }
        mark_drifted(ctx, &d).await;
        ok &= delete_claims(ctx, std::slice::from_ref(&d.claim), &format!("drifted: {}", d.cause), DRIFTED).await;
        disrupting.insert(d.claim);
    }
    if busy || disrupting.iter().any(|n| !decisions.iter().any(|d| d.replaced.contains(n))) {
        // Decisions in progress, or this round deleted empty drifted nodes (the cluster is not at rest).
        return ok;
    }
    if let Some(d) = drifted {
        return match replace_drifted(ctx, c, &d, now, snapshot, view).await {
            Ok(acted) => {
                if !acted {
                    c.drift_failed.insert(d.claim.clone(), now);
                }
                ok
            }
            Err(e) => {
                tracing::warn!(nodeclaim = %d.claim, error = %e, "replacing a drifted NodeClaim failed");
                false
            }
        };
    }
    match decide(ctx, c, now, snapshot, view).await {
        Ok(Some(d)) => {
            c.shared.moved(&d, now);
            ok & act(ctx, &d, now, UNDERUTILIZED).await
        }
        Ok(None) => ok,
        Err(e) => {
            tracing::warn!(error = %e, "consolidation round failed");
            false
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error("reading the cloud's catalog: {0}")]
    Catalog(stowage_decide::cloud::CloudError),
    #[error(transparent)]
    Snapshot(#[from] super::state::StateError),
    #[error("the consolidation task failed: {0}")]
    Join(tokio::task::JoinError),
    #[error(transparent)]
    Decide(#[from] shared::ConsolidationError),
}

/// The shared decision over a snapshot, when a node is due or a proposal awaits validation; a
/// decision is returned once it has been chosen twice, `validation` apart, and the checker accepts
/// its placement of the displaced pods.
async fn decide<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, c: &mut Consolidator, now: Timestamp, snapshot: Snapshot, view: Catalog) -> Result<Option<Decision>, RoundError> {
    c.shared.observe(&snapshot.cluster, now);
    let validating = c.proposed.as_ref().is_some_and(|(_, t)| now.duration_since(*t).unsigned_abs() >= ctx.config.consolidation_validation);
    let due = c.shared.next_due(&snapshot.cluster, &snapshot.objects).is_some_and(|t| t <= now);
    if !validating && !due {
        return Ok(None);
    }
    tracing::debug!(validating, due, "consolidation round");
    let mut memory = std::mem::take(&mut c.shared);
    let (settings, weights, planner) = (ctx.config.consolidation.clone(), ctx.config.weights.clone(), ctx.config.planner.clone());
    let batch = format!("{}-consolidation-{}", ctx.config.identity, now.as_millisecond());
    let (memory, outcome) = tokio::task::spawn_blocking(move || {
        let base = provision::Input { cluster: &snapshot.cluster, objects: &snapshot.objects, catalog: &view, weights: &weights, max_instance_types: planner.max_instance_types, batch: &batch };
        let input = shared::Input { base, settings: &settings };
        let mut p = planner.planner;
        let outcome = memory.decide(&input, &mut p, now).map(|o| match o {
            Outcome::NotSettled => {
                tracing::debug!("consolidation: the cluster is not at rest");
                None
            }
            Outcome::Nothing { candidates, evaluations, cost, lower_bound, node_set } => {
                tracing::debug!(candidates, evaluations, cost, lower_bound, ?node_set, "consolidation: no candidate set pays for its disruption");
                None
            }
            Outcome::Consolidate(d) => {
                let report = stowage_core::check::check(&d.planned_on, &view, &d.replacements.plan);
                let violations: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
                Some((d, violations))
            }
        });
        (memory, outcome)
    })
    .await
    .map_err(RoundError::Join)?;
    c.shared = memory;
    let Some((d, violations)) = outcome? else {
        c.proposed = None;
        return Ok(None);
    };
    if !violations.is_empty() {
        tracing::warn!(violations = ?violations, reason = %d.reason(), "consolidation abandoned: the checker rejects the displaced pods' placement");
        c.proposed = None;
        return Ok(None);
    }
    let nodes: BTreeSet<String> = d.remove.iter().map(|r| r.node.clone()).collect();
    match &c.proposed {
        Some((p, t)) if *p == nodes && now.duration_since(*t).unsigned_abs() >= ctx.config.consolidation_validation => {
            c.proposed = None;
            Ok(Some(*d))
        }
        Some((p, _)) if *p == nodes => Ok(None),
        _ => {
            tracing::info!(reason = %d.reason(), validation = ?ctx.config.consolidation_validation, "consolidation proposed; validating");
            c.proposed = Some((nodes, now));
            Ok(None)
        }
    }
}

/// The state as the planners read it, over the catalog with refused offerings unavailable.
async fn snapshot<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>) -> Result<(Snapshot, Catalog), RoundError> {
    let catalog = ctx.catalog(super::cloud_metrics::Caller::Disruption).await.map_err(RoundError::Catalog)?;
    let view = {
        let mut u = lock(&ctx.unavailable);
        let t = tokio::time::Instant::now();
        u.expire(t);
        u.view(&catalog, t)
    };
    let snapshot = lock(&ctx.state).snapshot_under(&view, &ctx.config.weights.topology_spread_defaults)?;
    Ok((snapshot, view))
}

/// Replaces (or, when empty, deletes) a drifted NodeClaim after writing its `Drifted` condition;
/// whether it acted. The displaced pods are planned by `stowage_decide::consolidation::replace`.
async fn replace_drifted<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, c: &mut Consolidator, d: &Drifted, now: Timestamp, snapshot: Snapshot, view: Catalog) -> Result<bool, RoundError> {
    mark_drifted(ctx, d).await;
    let why = format!("drifted: {}", d.cause);
    if d.empty {
        return Ok(delete_claims(ctx, std::slice::from_ref(&d.claim), &why, DRIFTED).await);
    }
    let (settings, weights, planner) = (ctx.config.consolidation.clone(), ctx.config.weights.clone(), ctx.config.planner.clone());
    let batch = format!("{}-drift-{}", ctx.config.identity, now.as_millisecond());
    let node = d.node.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let base = provision::Input { cluster: &snapshot.cluster, objects: &snapshot.objects, catalog: &view, weights: &weights, max_instance_types: planner.max_instance_types, batch: &batch };
        let mut p = planner.planner;
        shared::replace(&shared::Input { base, settings: &settings }, &mut p, &node).map(|o| {
            o.map(|d| {
                let report = stowage_core::check::check(&d.planned_on, &view, &d.replacements.plan);
                (d, report.valid())
            })
        })
    })
    .await
    .map_err(RoundError::Join)??;
    match outcome {
        Some((decision, true)) => {
            tracing::info!(nodeclaim = %d.claim, cause = %d.cause, "replacing a drifted NodeClaim");
            c.shared.moved(&decision, now);
            Ok(act(ctx, &decision, now, DRIFTED).await)
        }
        Some((_, false)) => {
            tracing::warn!(nodeclaim = %d.claim, "drift replacement abandoned: the checker rejects the displaced pods' placement");
            Ok(false)
        }
        None => {
            tracing::info!(nodeclaim = %d.claim, cause = %d.cause, "drifted, but its pods have no other place now (or one cannot move); trying again later");
            Ok(false)
        }
    }
}

/// Writes `Drifted=True` with the cause on the NodeClaim's status (Karpenter's condition), once.
async fn mark_drifted<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, d: &Drifted) {
    let Some(claim) = lock(&ctx.state).nodeclaim(&d.claim).cloned() else { return };
    if condition(&claim, CONDITION_DRIFTED).is_some_and(|x| x.status == "True") {
        return;
    }
    let mut conditions = claim.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conditions, CONDITION_DRIFTED, "True", d.cause.reason(), &d.cause.to_string());
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    match api.patch_status(&d.claim, &PatchParams::default(), &Patch::Merge(&serde_json::json!({"status": {"conditions": conditions}}))).await {
        Ok(c) => lock(&ctx.state).apply(c),
        Err(e) => tracing::warn!(nodeclaim = %d.claim, error = %e, "writing the Drifted condition failed"),
    }
    ctx.events.nodeclaim(&claim, Reason::Disrupting, format!("drifted: {}", d.cause));
}

/// Carries out a validated decision: the removed nodes' NodeClaims are deleted at once when nothing
/// replaces them, else the replacements are created (annotated) and launched, and a later round
/// deletes the replaced NodeClaims once every replacement is Initialized.
async fn act<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, d: &Decision, now: Timestamp, cause: &'static str) -> bool {
    let replaced: Vec<String> = {
        let s = lock(&ctx.state);
        d.remove.iter().filter_map(|r| s.nodeclaims.iter().find(|c| c.status.as_ref().and_then(|x| x.node_name.as_deref()) == Some(r.node.as_str())).and_then(|c| c.metadata.name.clone())).collect()
    };
    if replaced.len() != d.remove.len() {
        tracing::warn!(reason = %d.reason(), "consolidation abandoned: a removed node has no NodeClaim any more");
        return true;
    }
    tracing::info!(reason = %d.reason(), nodeclaims = ?replaced, "consolidating");
    ctx.metrics.decision(!d.replacements.claims.is_empty(), cause, d.remove.len());
    let pools: BTreeSet<&str> = d.remove.iter().map(|r| r.nodepool.as_str()).collect();
    for pool in pools {
        let obj = lock(&ctx.state).nodepools.iter().find(|p| p.metadata.name.as_deref() == Some(pool)).cloned();
        if let Some(p) = obj {
            ctx.events.object(&p, Reason::Disrupting, format!("{cause}: {}", d.reason()));
        }
    }
    if d.replacements.claims.is_empty() {
        return delete_claims(ctx, &replaced, &format!("{cause}: {}", d.reason()), cause).await;
    }
    let id = format!("{}-{}", ctx.config.identity, now.as_millisecond());
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut created = Vec::new();
    for claim in &d.replacements.claims {
        let mut nc = claim.nodeclaim.clone();
        let a = nc.metadata.annotations.get_or_insert_with(Default::default);
        a.insert(DECISION_ANNOTATION.into(), format!("{cause}:{id}/{}", d.replacements.claims.len()));
        a.insert(REPLACES_ANNOTATION.into(), replaced.join(","));
        match api.create(&PostParams::default(), &nc).await {
            Ok(nc) => {
                let name = nc.metadata.name.clone().unwrap_or_default();
                tracing::info!(consolidation = %id, nodeclaim = %name, instance_type = %claim.instance_type, zone = %claim.zone, capacity_type = %claim.capacity_type, price = claim.price, "replacement NodeClaim created");
                ctx.metrics.nodeclaim_created(&claim.nodepool, claim.price, cause, claim.min_values_relaxed());
                ctx.events.nodeclaim(&nc, Reason::Disrupting, format!("replacement for {} ({})", replaced.join(", "), d.reason()));
                lock(&ctx.state).apply(nc);
                created.push(name);
            }
            Err(e) => {
                // The decision is abandoned (fewer replacements than annotated): nothing is removed.
                ctx.metrics.error(Stage::Create);
                tracing::warn!(consolidation = %id, error = %e, "creating a replacement NodeClaim failed; the consolidation is abandoned");
                break;
            }
        }
    }
    let launches = created.iter().map(|name| async move {
        let r = launcher::launch(ctx, name).await;
        after_launch(ctx, name, r);
    });
    futures::future::join_all(launches).await;
    created.len() == d.replacements.claims.len()
}

/// Deletes NodeClaims for consolidation (termination drains them), with an event on each.
async fn delete_claims<P: CloudProvider + 'static>(ctx: &Arc<Ctx<P>>, names: &[String], why: &str, cause: &'static str) -> bool {
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut ok = true;
    for name in names {
        let claim = lock(&ctx.state).nodeclaim(name).cloned();
        match api.delete(name, &DeleteParams::default()).await {
            Ok(r) => {
                if let Some(c) = r.left() {
                    lock(&ctx.state).apply(c);
                }
                let pool = claim.as_ref().and_then(|c| c.metadata.labels.as_ref()?.get(stowage_core::domain::labels::keys::NODEPOOL).cloned()).unwrap_or_default();
                ctx.metrics.disrupted(cause, &pool, super::metrics::claim_label(claim.as_ref(), stowage_core::domain::labels::keys::CAPACITY_TYPE));
                if let Some(c) = claim {
                    ctx.events.nodeclaim(&c, Reason::Disrupting, why.to_string());
                }
                tracing::info!(nodeclaim = %name, %why, "disrupting");
                ctx.wake_lifecycle(name);
            }
            Err(e) if kube_status(&e) == Some(404) => {}
            Err(e) => {
                ok = false;
                ctx.metrics.error(Stage::Disrupt);
                tracing::warn!(nodeclaim = %name, error = %e, "deleting a NodeClaim for consolidation failed; retrying with backoff");
            }
        }
    }
    ok
}

/// Karpenter's NodeClaim condition for drift.
const CONDITION_DRIFTED: &str = "Drifted";

/// The default wait between a decision and its validation (Karpenter's).
pub const VALIDATION: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use super::*;
    use stowage_input::api::{NodeClaimSpec, NodeClaimStatus};

    fn claim(name: &str, decision: Option<(&str, &str)>, initialized: bool, deleting: bool) -> NodeClaim {
        let mut c = NodeClaim::new(name, NodeClaimSpec::default());
        if let Some((d, replaces)) = decision {
            let a = c.metadata.annotations.get_or_insert_with(Default::default);
            a.insert(DECISION_ANNOTATION.into(), d.into());
            a.insert(REPLACES_ANNOTATION.into(), replaces.into());
        }
        if deleting {
            c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH));
        }
        let mut conditions = Vec::new();
        super::super::conditions::set_condition(&mut conditions, CONDITION_INITIALIZED, if initialized { "True" } else { "False" }, "Test", "");
        c.status = Some(NodeClaimStatus { conditions: Some(conditions), ..Default::default() });
        c
    }

    fn state(claims: Vec<NodeClaim>) -> ClusterState {
        let mut s = ClusterState::default();
        for c in claims {
            s.apply(c);
        }
        s
    }

    #[test]
    fn a_decision_waits_for_every_replacement_then_removes_what_it_replaces() {
        let old = || claim("old", None, true, false);
        let waiting = state(vec![old(), claim("r1", Some(("d/2", "old")), true, false), claim("r2", Some(("d/2", "old")), false, false)]);
        let d = in_progress(&waiting);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].progress, Progress::Waiting);
        assert_eq!(protected(&d), BTreeSet::from(["r1".to_string(), "r2".to_string()]));
        let ready = state(vec![old(), claim("r1", Some(("d/2", "old")), true, false), claim("r2", Some(("d/2", "old")), true, false)]);
        assert_eq!(in_progress(&ready)[0].progress, Progress::Ready(vec!["old".into()]));
        let done = state(vec![claim("old", None, true, true), claim("r1", Some(("d/2", "old")), true, false), claim("r2", Some(("d/2", "old")), true, false)]);
        let d = in_progress(&done);
        assert_eq!(d[0].progress, Progress::Done);
        assert!(protected(&d).is_empty(), "once the old node goes, the replacements are ordinary nodes");
    }

    #[test]
    fn a_missing_or_deleted_replacement_abandons_the_decision() {
        let missing = state(vec![claim("old", None, true, false), claim("r1", Some(("d/2", "old")), true, false)]);
        assert_eq!(in_progress(&missing)[0].progress, Progress::Abandoned);
        let deleting = state(vec![claim("old", None, true, false), claim("r1", Some(("d/1", "old")), false, true)]);
        let d = in_progress(&deleting);
        assert_eq!(d[0].progress, Progress::Abandoned);
        assert!(protected(&d).is_empty(), "an abandoned replacement may go by emptiness");
    }
}
