//! Voluntary disruption: emptiness (`consolidationPolicy` WhenEmpty, and the empty-node part of
//! WhenEmptyOrUnderutilized) and expiration (`expireAfter`).
//!
//! - **Empty**: an initialized node of a NodePool with no pod but DaemonSet and terminal pods, not
//!   nominated by a recent plan, continuously so for the pool's `consolidateAfter` (`Never` disables it),
//!   and then still so for the `validation` wait ([`Disruption::with_validation`]; Karpenter computes an
//!   Empty command once consolidateAfter has passed and carries it out only if the nodes are still empty
//!   15 s later; requiring the node to stay empty throughout is the same or stricter), is removed by
//!   deleting its NodeClaim. The controller validates with its `consolidation_validation` (15 s by
//!   default, as Karpenter); the simulator does not (zero). The pool's disruption budgets for reason
//!   `Empty` (`spec.disruption.budgets[].nodes`, a count or a percentage of the pool's initialized
//!   nodes (NodeClaims still launching count for nothing, as in Karpenter), rounded up
//!   as Karpenter does; `10%` when the field is absent, no limit when it is `[]`; [`reason_budgets`]) bound how
//!   many of its NodeClaims may be deleting at once; a budget with a `schedule` (cron, UTC) and a
//!   `duration` applies only from each time the schedule fires for that long ([`budget_active`], as
//!   Karpenter); on a clock without a calendar (the simulator's) it always applies (stricter, never
//!   looser).
//! - **Expired**: a NodeClaim older than its `spec.expireAfter` is deleted regardless of budgets (as in
//!   Karpenter v1); its pods are evicted and planned again.
//! - `karpenter.sh/do-not-disrupt: "true"` on a NodeClaim or its Node blocks emptiness removal.
//!
//! [`Disruption::decide`] is pure and generic over the clock ([`Moment`]): the controller runs it on
//! the API server's timestamps, the simulator on its simulated clock. It remembers since when each node
//! has been empty; in the controller that memory starts afresh on restart (a node's timer restarts),
//! which can only delay a removal. Underutilised nodes are [`crate::consolidation`]'s.

use std::collections::BTreeMap;
use std::ops::Add;
use std::time::Duration;

use stowage_core::domain::Cluster;
use stowage_core::domain::pod::Pod;
use stowage_input::api::NodePool;
use stowage_input::api::nodepool::Budget;

/// `karpenter.sh/do-not-disrupt`.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// The disruption reason budgets name for empty nodes (Karpenter's `DisruptionReasonEmpty`); drift's
/// is `crate::drift::REASON`, consolidation's `crate::consolidation::REASON`.
pub const REASON_EMPTY: &str = "Empty";
/// Every reason a budget may name (Karpenter v1's `DisruptionReason` enum; the input refuses others).
pub const REASONS: [&str; 3] = stowage_input::karpenter::BUDGET_REASONS;

/// What the shared decisions need of a clock: order, adding a duration, and the time between two
/// moments (zero if `earlier` is later).
pub trait Moment: Copy + Ord + Add<Duration, Output = Self> {
    fn since(self, earlier: Self) -> Duration;

    /// Seconds since the Unix epoch (UTC), if the clock has a calendar (budget schedules need one).
    fn unix_seconds(self) -> Option<i64> {
        None
    }
}

/// A test clock, and any clock counted from an origin.
impl Moment for Duration {
    fn since(self, earlier: Self) -> Duration {
        self.saturating_sub(earlier)
    }
}

/// The API server's timestamps (`creationTimestamp`), which the controller's disruption runs on.
impl Moment for k8s_openapi::jiff::Timestamp {
    fn since(self, earlier: Self) -> Duration {
        Duration::from_millis((self.as_millisecond() - earlier.as_millisecond()).max(0) as u64)
    }

    fn unix_seconds(self) -> Option<i64> {
        Some(self.as_second())
    }
}

/// Whether a disruption budget applies at `now` (seconds since the Unix epoch, UTC), Karpenter's
/// `Budget.IsActive`:
///
/// ```text
/// active(b, now) = true                                       if b has neither schedule nor duration
///                = next_hit(b.schedule, after now − duration) ≤ now   otherwise
/// ```
///
/// so a budget applies from each time its cron schedule (UTC) fires until `duration` later, the end
/// excluded. A schedule without a duration (which the API server refuses) never applies (duration
/// zero). `Err` when the schedule or the duration does not parse: Karpenter then fails closed (the
/// budget allows nothing, [`budget_allows`]). `now` unknown (a clock without a calendar): it
/// applies, the stricter reading.
pub fn budget_active(b: &Budget, now: Option<i64>) -> Result<bool, String> {
    if b.schedule.is_none() && b.duration.is_none() {
        return Ok(true);
    }
    let schedule = b.schedule.as_deref().unwrap_or_default();
    let cron = schedule.trim().parse::<croner::Cron>().map_err(|e| format!("schedule {schedule:?}: {e}"))?;
    let duration = match b.duration.as_deref() {
        None => Duration::ZERO,
        Some(d) => humantime::parse_duration(d.trim()).map_err(|e| format!("duration {d:?}: {e}"))?,
    };
    let Some(now) = now else { return Ok(true) };
    let from = k8s_openapi::jiff::Timestamp::from_second(now.saturating_sub(duration.as_secs() as i64)).map_err(|e| format!("time {now}: {e}"))?;
    let hit = cron.find_next_occurrence(&from.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC), false).map_err(|e| format!("schedule {schedule:?}: {e}"))?;
    Ok(hit.timestamp().as_second() <= now)
}

/// The next time after `now` (Unix seconds) at which some budget of `pool` starts or stops applying,
/// if any has a schedule (for a loop that sleeps until a blocking budget lets go, or starts to hold).
pub fn next_budget_change(pool: &NodePool, now: i64) -> Option<i64> {
    let budgets = pool.spec.disruption.as_ref().and_then(|d| d.budgets.as_ref())?;
    let mut out: Option<i64> = None;
    for b in budgets {
        let (Some(schedule), Some(duration)) = (b.schedule.as_deref(), b.duration.as_deref()) else { continue };
        let (Ok(cron), Ok(duration)) = (schedule.trim().parse::<croner::Cron>(), humantime::parse_duration(duration.trim())) else { continue };
        let d = duration.as_secs() as i64;
        let Ok(from) = k8s_openapi::jiff::Timestamp::from_second(now.saturating_sub(d)) else { continue };
        // Every hit in (now − d, now] ends a window at hit + d; the first hit after now starts one.
        for hit in cron.iter_after(from.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)).take(10_000) {
            let h = hit.timestamp().as_second();
            let change = if h <= now { h + d } else { h };
            if change > now {
                out = Some(out.map_or(change, |o| o.min(change)));
            }
            if h > now {
                break;
            }
        }
    }
    out
}

/// Why a NodeClaim is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    Empty { for_: Duration },
    Expired { age: Duration },
}

impl Cause {
    pub fn label(&self) -> &'static str {
        match self {
            Cause::Empty { .. } => "empty",
            Cause::Expired { .. } => "expired",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub nodeclaim: String,
    pub nodepool: String,
    pub cause: Cause,
}

/// What the decision needs of one NodeClaim.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate<T> {
    pub nodeclaim: String,
    pub nodepool: String,
    pub created: Option<T>,
    pub expire_after: Option<Duration>,
    pub deleting: bool,
    /// Its Node is registered and initialized (only such nodes are judged empty).
    pub initialized: bool,
    /// Pods other than DaemonSet and terminal ones on its Node.
    pub workload_pods: usize,
    pub do_not_disrupt: bool,
    /// A recent plan put pods on it.
    pub nominated: bool,
}

/// A NodePool's settings for the emptiness decision.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolPolicy {
    /// `None`: `consolidateAfter: Never`.
    pub consolidate_after: Option<Duration>,
    /// `nodes` values ("10%", "3") of the budgets that apply to reason `Empty` ([`reason_budgets`]);
    /// empty: no limit.
    pub budgets: Vec<String>,
}

/// Parses a NodePool's disruption settings (defaults as Karpenter's: consolidateAfter 0s, budget 10%).
pub fn pool_policy(p: &NodePool) -> PoolPolicy {
    pool_policy_at(p, None)
}

/// [`pool_policy`] with the `Empty` budgets that apply at `now` (Unix seconds; [`budget_active`]).
pub fn pool_policy_at(p: &NodePool, now: Option<i64>) -> PoolPolicy {
    let d = p.spec.disruption.clone().unwrap_or_default();
    let consolidate_after = match d.consolidate_after.as_deref() {
        None => Some(Duration::ZERO),
        Some("Never") => None,
        Some(v) => humantime::parse_duration(v).ok(),
    };
    // A static pool's nodes are not removed for emptiness (Karpenter: consolidateAfter is ignored).
    let consolidate_after = consolidate_after.filter(|_| !stowage_input::unsupported::is_static(p));
    PoolPolicy { consolidate_after, budgets: reason_budgets(Some(p), REASON_EMPTY, now) }
}

/// Budgets (`nodes` values) of a pool that apply to disruptions for `reason` at `now` (Unix seconds,
/// [`budget_active`]), Karpenter's `GetAllowedDisruptionsByReason`:
///
/// ```text
/// applies(b, reason, now) = (b.reasons unset ∨ reason ∈ b.reasons) ∧ active(b, now)
/// allowed(pool, reason)   = min over applying budgets of nodes(b) (a count, or a percentage of the
///                           pool's nodes rounded up: allowed_disruptions), unbounded if none applies
/// ```
///
/// `budgets` absent (or no NodePool object): Karpenter's CRD default, one budget `nodes: 10%`;
/// `budgets: []` (explicitly empty): no budget, so no limit, as Karpenter (the default applies only to
/// an absent field). A budget without `nodes` has the CRD's default `10%`. A budget whose `reasons`
/// is an empty list applies to no reason (`nil` means all, `[]` none). A budget whose schedule or
/// duration does not parse allows nothing (`"0"`: Karpenter fails closed). An empty result means no
/// limit.
pub fn reason_budgets(pool: Option<&NodePool>, reason: &str, now: Option<i64>) -> Vec<String> {
    let Some(budgets) = pool.map(|p| p.spec.disruption.as_ref().and_then(|d| d.budgets.as_ref())) else { return vec![DEFAULT_BUDGET.into()] };
    let Some(budgets) = budgets else { return vec![DEFAULT_BUDGET.into()] };
    budgets
        .iter()
        .filter(|b| b.reasons.as_ref().is_none_or(|r| r.iter().any(|x| x == reason)))
        .filter_map(|b| match budget_active(b, now) {
            Ok(true) => Some(b.nodes.clone().unwrap_or_else(|| DEFAULT_BUDGET.into())),
            Ok(false) => None,
            Err(_) => Some("0".into()),
        })
        .collect()
}

/// Karpenter's default budget (`nodes: 10%`), for a pool whose `budgets` field is absent.
pub const DEFAULT_BUDGET: &str = "10%";

/// `karpenter.sh/do-not-disrupt: "true"` on an object.
pub(crate) fn annotated(md: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    md.annotations.as_ref().and_then(|a| a.get(DO_NOT_DISRUPT)).is_some_and(|v| v == "true")
}

/// Workload pods bound to a node: not DaemonSet, not terminal, not mirror pods.
pub(crate) fn workload_on<'c>(cluster: &'c Cluster, node: &'c str) -> impl Iterator<Item = (usize, &'c Pod)> + 'c {
    cluster.pods.iter().enumerate().filter(move |(_, p)| p.node_name.as_deref() == Some(node) && is_workload(p))
}

/// A pod consolidation and emptiness count on its node: not a DaemonSet's, not terminal, not a mirror pod.
fn is_workload(p: &Pod) -> bool {
    !p.is_daemon() && !p.is_terminal() && !is_mirror(p)
}

/// [`workload_on`] for every node in one pass over the pods: node name → workload pod indices.
pub(crate) fn workload_by_node(cluster: &Cluster) -> BTreeMap<&str, Vec<usize>> {
    let mut out: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in cluster.pods.iter().enumerate() {
        if let Some(n) = p.node_name.as_deref()
            && is_workload(p)
        {
            out.entry(n).or_default().push(i);
        }
    }
    out
}

pub(crate) fn is_mirror(p: &Pod) -> bool {
    p.owner.as_ref().is_some_and(|o| o.kind == "Node")
}

/// Nodes a pool may have disrupting at once under its budgets, Karpenter's `GetAllowedDisruptions`
/// (intstr's scaled value, rounding up):
///
/// ```text
/// nodes(b) = n                          for a count "n"
///          = ⌈p · total / 100⌉          for a percentage "p%" (integers, so 7% of 100 is 7)
/// allowed  = min over budgets of nodes(b);  no budget: unbounded (usize::MAX)
/// ```
///
/// A value that is neither (the API server refuses those) allows nothing, as Karpenter fails closed.
pub fn allowed_disruptions(budgets: &[String], total: usize) -> usize {
    budgets
        .iter()
        .map(|b| match b.strip_suffix('%') {
            Some(p) => p.parse::<usize>().map(|p| (p.saturating_mul(total)).div_ceil(100)).unwrap_or(0),
            None => b.parse::<usize>().unwrap_or(0),
        })
        .min()
        .unwrap_or(usize::MAX)
}

/// The memory of emptiness.
#[derive(Clone, Debug)]
pub struct Disruption<T> {
    empty_since: BTreeMap<String, T>,
    /// How long past `consolidateAfter` a node must stay empty before it goes.
    validation: Duration,
}

impl<T> Default for Disruption<T> {
    fn default() -> Self {
        Disruption::with_validation(Duration::ZERO)
    }
}

impl<T> Disruption<T> {
    /// Emptiness that waits `validation` past `consolidateAfter` (the node empty throughout) before it
    /// removes a node: Karpenter's re-validation of an Empty command, so a pod bound to the node in the
    /// meantime keeps it.
    pub fn with_validation(validation: Duration) -> Self {
        Disruption { empty_since: BTreeMap::new(), validation }
    }
}

impl<T: Moment> Disruption<T> {
    /// Decides which NodeClaims to delete now.
    pub fn decide(&mut self, candidates: &[Candidate<T>], pools: &BTreeMap<String, PoolPolicy>, now: T) -> Vec<Action> {
        let mut actions = Vec::new();
        // Expiration first: it ignores budgets but its deletions count against them.
        for c in candidates.iter().filter(|c| !c.deleting) {
            if let (Some(created), Some(expire)) = (c.created, c.expire_after) {
                let age = now.since(created);
                if age >= expire {
                    actions.push(Action { nodeclaim: c.nodeclaim.clone(), nodepool: c.nodepool.clone(), cause: Cause::Expired { age } });
                }
            }
        }
        // Emptiness timers.
        let mut seen = BTreeMap::new();
        for c in candidates.iter().filter(|c| !c.deleting && c.initialized && c.workload_pods == 0 && !c.nominated) {
            seen.insert(c.nodeclaim.clone(), self.empty_since.get(&c.nodeclaim).copied().unwrap_or(now));
        }
        self.empty_since = seen;
        // Karpenter's counts (`BuildDisruptionBudgetMapping`): a pool's initialized nodes, of which
        // those being deleted are disrupting; NodeClaims still launching count for neither.
        let mut disrupting: BTreeMap<&str, usize> = BTreeMap::new();
        let mut total: BTreeMap<&str, usize> = BTreeMap::new();
        for c in candidates.iter().filter(|c| c.initialized) {
            *total.entry(c.nodepool.as_str()).or_default() += 1;
            if c.deleting || actions.iter().any(|a| a.nodeclaim == c.nodeclaim) {
                *disrupting.entry(c.nodepool.as_str()).or_default() += 1;
            }
        }
        for c in candidates {
            let Some(&since_empty) = self.empty_since.get(&c.nodeclaim) else { continue };
            if c.do_not_disrupt || actions.iter().any(|a| a.nodeclaim == c.nodeclaim) {
                continue;
            }
            let Some(policy) = pools.get(&c.nodepool) else { continue };
            let Some(after) = policy.consolidate_after else { continue };
            let for_ = now.since(since_empty);
            if for_ < after + self.validation {
                continue;
            }
            let allowed = allowed_disruptions(&policy.budgets, total.get(c.nodepool.as_str()).copied().unwrap_or(0));
            let busy = disrupting.entry(c.nodepool.as_str()).or_default();
            if *busy >= allowed {
                continue;
            }
            *busy += 1;
            actions.push(Action { nodeclaim: c.nodeclaim.clone(), nodepool: c.nodepool.clone(), cause: Cause::Empty { for_ } });
        }
        actions
    }

    /// The earliest time an empty node may become due (for the loop's sleep).
    pub fn next_due(&self, pools: &BTreeMap<String, PoolPolicy>, candidates: &[Candidate<T>]) -> Option<T> {
        candidates
            .iter()
            .filter_map(|c| {
                let since = *self.empty_since.get(&c.nodeclaim)?;
                let after = pools.get(&c.nodepool)?.consolidate_after?;
                Some(since + after + self.validation)
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds on a test clock.
    fn t(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn cand(name: &str, pool: &str, pods: usize) -> Candidate<Duration> {
        Candidate {
            nodeclaim: name.into(),
            nodepool: pool.into(),
            created: Some(t(0)),
            expire_after: None,
            deleting: false,
            initialized: true,
            workload_pods: pods,
            do_not_disrupt: false,
            nominated: false,
        }
    }

    fn pools(after: Option<u64>, budgets: &[&str]) -> BTreeMap<String, PoolPolicy> {
        [("np".to_string(), PoolPolicy { consolidate_after: after.map(Duration::from_secs), budgets: budgets.iter().map(|b| b.to_string()).collect() })].into()
    }

    #[test]
    fn an_empty_node_goes_after_consolidate_after_and_not_before() {
        let mut d = Disruption::default();
        let p = pools(Some(30), &["100%"]);
        let cs = vec![cand("a", "np", 0), cand("b", "np", 2)];
        assert!(d.decide(&cs, &p, t(100)).is_empty(), "the timer starts now");
        assert_eq!(d.next_due(&p, &cs), Some(t(130)));
        assert!(d.decide(&cs, &p, t(129)).is_empty());
        let a = d.decide(&cs, &p, t(130));
        assert_eq!(a, vec![Action { nodeclaim: "a".into(), nodepool: "np".into(), cause: Cause::Empty { for_: Duration::from_secs(30) } }]);
    }

    #[test]
    fn validation_waits_past_consolidate_after_and_a_pod_in_between_keeps_the_node() {
        let mut d = Disruption::with_validation(t(15));
        let p = pools(Some(30), &["100%"]);
        let cs = vec![cand("a", "np", 0)];
        assert!(d.decide(&cs, &p, t(0)).is_empty());
        assert_eq!(d.next_due(&p, &cs), Some(t(45)));
        assert!(d.decide(&cs, &p, t(30)).is_empty(), "consolidateAfter has passed, the validation has not");
        assert_eq!(d.decide(&cs, &p, t(45)).len(), 1);
        // A pod bound during the validation resets the node's timer: nothing goes at 45 s.
        let mut d = Disruption::with_validation(t(15));
        d.decide(&cs, &p, t(0));
        d.decide(&cs, &p, t(30));
        d.decide(&[cand("a", "np", 1)], &p, t(35));
        assert!(d.decide(&cs, &p, t(45)).is_empty());
        assert_eq!(d.next_due(&p, &cs), Some(t(45 + 45)));
    }

    #[test]
    fn a_pod_arriving_resets_the_timer() {
        let mut d = Disruption::default();
        let p = pools(Some(30), &["100%"]);
        d.decide(&[cand("a", "np", 0)], &p, t(0));
        d.decide(&[cand("a", "np", 1)], &p, t(20));
        assert!(d.decide(&[cand("a", "np", 0)], &p, t(40)).is_empty());
        assert_eq!(d.decide(&[cand("a", "np", 0)], &p, t(70)).len(), 1);
    }

    #[test]
    fn daemonset_pods_nominations_initialization_and_do_not_disrupt() {
        let mut d = Disruption::default();
        let p = pools(Some(0), &["100%"]);
        let mut nominated = cand("n", "np", 0);
        nominated.nominated = true;
        let mut fresh = cand("f", "np", 0);
        fresh.initialized = false;
        let mut pinned = cand("p", "np", 0);
        pinned.do_not_disrupt = true;
        let actions = d.decide(&[nominated, fresh, pinned, cand("e", "np", 0)], &p, t(0));
        assert_eq!(actions.iter().map(|a| a.nodeclaim.as_str()).collect::<Vec<_>>(), vec!["e"]);
    }

    #[test]
    fn budgets_bound_concurrent_removals() {
        assert_eq!(allowed_disruptions(&["10%".into()], 3), 1, "rounded up");
        assert_eq!(allowed_disruptions(&["10%".into()], 0), 0);
        assert_eq!(allowed_disruptions(&["50%".into(), "1".into()], 10), 1, "the smallest wins");
        assert_eq!(allowed_disruptions(&["x".into()], 10), 0);
        assert_eq!(allowed_disruptions(&[], 10), usize::MAX, "no budget: no limit");
        let mut d = Disruption::default();
        let p = pools(Some(0), &["10%"]);
        let cs = vec![cand("a", "np", 0), cand("b", "np", 0), cand("c", "np", 0)];
        assert_eq!(d.decide(&cs, &p, t(0)).len(), 1);
        let mut cs2 = cs.clone();
        cs2[0].deleting = true;
        assert!(d.decide(&cs2, &p, t(1)).is_empty(), "one is already being removed");
        // NodeClaims still launching are not in the total (Karpenter counts initialized nodes): 10% of
        // 10 initialized nodes is 1 whatever launches meanwhile, 10% of 11 would be 2.
        let mut d = Disruption::default();
        let mut many: Vec<Candidate<Duration>> = (0..10).map(|i| cand(&format!("n{i}"), "np", 0)).collect();
        let mut launching = cand("new", "np", 0);
        launching.initialized = false;
        many.push(launching);
        assert_eq!(d.decide(&many, &p, t(0)).len(), 1);
    }

    #[test]
    fn never_disables_consolidation_and_expiry_ignores_budgets() {
        let mut d = Disruption::default();
        let p = pools(None, &["0"]);
        let mut old = cand("old", "np", 3);
        old.expire_after = Some(Duration::from_secs(60));
        let cs = vec![old, cand("empty", "np", 0)];
        let a = d.decide(&cs, &p, t(61));
        assert_eq!(a, vec![Action { nodeclaim: "old".into(), nodepool: "np".into(), cause: Cause::Expired { age: Duration::from_secs(61) } }]);
    }

    #[test]
    fn pool_policies_are_read_with_karpenter_defaults() {
        let mut np: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
        }))
        .unwrap();
        assert_eq!(pool_policy(&np), PoolPolicy { consolidate_after: Some(Duration::ZERO), budgets: vec!["10%".into()] });
        np.spec.disruption = Some(stowage_input::api::nodepool::Disruption {
            consolidation_policy: Some("WhenEmpty".into()),
            consolidate_after: Some("Never".into()),
            budgets: Some(vec![stowage_input::api::nodepool::Budget { nodes: Some("2".into()), ..Default::default() }]),
        });
        assert_eq!(pool_policy(&np), PoolPolicy { consolidate_after: None, budgets: vec!["2".into()] });
    }

    fn pool_with(budgets: serde_json::Value) -> NodePool {
        serde_json::from_value(serde_json::json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"disruption": {"budgets": budgets},
                     "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}))
        .unwrap()
    }

    #[test]
    fn budgets_limit_the_reasons_they_name_and_the_smallest_applying_one_wins() {
        let mixed = pool_with(serde_json::json!([
            {"nodes": "0", "reasons": ["Drifted"]},
            {"nodes": "2", "reasons": ["Empty", "Underutilized"]},
            {"nodes": "50%"}
        ]));
        let only_underutilized = pool_with(serde_json::json!([{"nodes": "0", "reasons": ["Underutilized"]}]));
        let no_reason = pool_with(serde_json::json!([{"nodes": "0", "reasons": []}]));
        // (pool, reason, the pool's nodes, nodes that may be disrupting at once)
        let table: [(&NodePool, &str, usize, usize); 9] = [
            (&mixed, "Drifted", 10, 0),
            (&mixed, "Empty", 10, 2),
            (&mixed, "Underutilized", 10, 2),
            (&mixed, "Empty", 2, 1),
            (&only_underutilized, "Underutilized", 10, 0),
            (&only_underutilized, "Empty", 10, usize::MAX),
            (&only_underutilized, "Drifted", 10, usize::MAX),
            (&no_reason, "Empty", 10, usize::MAX),
            (&no_reason, "Drifted", 10, usize::MAX),
        ];
        for (pool, reason, total, want) in table {
            assert_eq!(allowed_disruptions(&reason_budgets(Some(pool), reason, None), total), want, "{reason} of {total} nodes under {:?}", pool.spec.disruption);
        }
        for r in REASONS {
            assert_eq!(reason_budgets(None, r, None), vec!["10%".to_string()], "no pool: Karpenter's default");
        }
        // Emptiness reads the Empty budgets only.
        let mut d = Disruption::default();
        let cs = vec![cand("a", "np", 0), cand("b", "np", 0)];
        let empty_zero: BTreeMap<String, PoolPolicy> = [("np".to_string(), pool_policy(&pool_with(serde_json::json!([{"nodes": "0", "reasons": ["Empty"]}]))))].into();
        assert!(d.decide(&cs, &empty_zero, t(0)).is_empty(), "an Empty budget of 0 keeps empty nodes");
        let drift_zero: BTreeMap<String, PoolPolicy> = [("np".to_string(), pool_policy(&pool_with(serde_json::json!([{"nodes": "0", "reasons": ["Drifted"]}]))))].into();
        assert_eq!(d.decide(&cs, &drift_zero, t(0)).len(), 2, "a Drifted budget does not limit emptiness");
    }

    #[test]
    fn a_static_pool_never_loses_empty_nodes() {
        let mut p = pool_with(serde_json::json!([{"nodes": "100%"}]));
        assert_eq!(pool_policy(&p).consolidate_after, Some(Duration::ZERO));
        p.spec.replicas = Some(2);
        assert_eq!(pool_policy(&p).consolidate_after, None, "static: Karpenter ignores consolidateAfter");
        let mut d = Disruption::default();
        assert!(d.decide(&[cand("a", "np", 0)], &[("np".to_string(), pool_policy(&p))].into(), t(100)).is_empty());
    }

    #[test]
    fn scheduled_budgets_apply_within_their_window_only() {
        let b = |schedule: Option<&str>, duration: Option<&str>| Budget { nodes: Some("0".into()), schedule: schedule.map(str::to_string), duration: duration.map(str::to_string), reasons: None };
        // 2027-01-15 is a Friday.
        let at = |h: i64, m: i64| {
            k8s_openapi::jiff::Timestamp::from_second(1_800_000_000)
                .unwrap()
                .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
                .date()
                .at(h as i8, m as i8, 0, 0)
                .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
                .unwrap()
                .timestamp()
                .as_second()
        };
        let office = b(Some("0 9 * * *"), Some("8h"));
        assert_eq!(budget_active(&office, Some(at(8, 59))), Ok(false));
        assert_eq!(budget_active(&office, Some(at(9, 0))), Ok(true), "the moment it fires");
        assert_eq!(budget_active(&office, Some(at(16, 59))), Ok(true));
        assert_eq!(budget_active(&office, Some(at(17, 0))), Ok(false), "the window's end is excluded");
        assert_eq!(budget_active(&office, Some(at(17, 1))), Ok(false), "8 h later it no longer applies");
        assert_eq!(budget_active(&b(Some("@daily"), Some("1h30m")), Some(at(1, 29))), Ok(true));
        assert_eq!(budget_active(&b(Some("@daily"), Some("1h30m")), Some(at(1, 31))), Ok(false));
        assert_eq!(budget_active(&b(None, None), Some(at(12, 0))), Ok(true), "no schedule: always");
        assert_eq!(budget_active(&office, None), Ok(true), "no calendar (the simulator without a start): always, the stricter reading");
        let np: NodePool = serde_json::from_value(serde_json::json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"disruption": {"budgets": [{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}]},
                     "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}))
        .unwrap();
        assert_eq!(pool_policy_at(&np, Some(at(10, 0))).budgets, vec!["0".to_string()], "office hours: nothing may be disrupted");
        assert_eq!(pool_policy_at(&np, Some(at(20, 0))).budgets, Vec::<String>::new(), "outside them no budget applies: no limit, as Karpenter");
    }
}
