//! Consolidation of underutilised nodes (`consolidationPolicy: WhenEmptyOrUnderutilized`, and
//! `Balanced` with its score on top, [`crate::balanced`]), once for the controller and the simulator:
//! which managed nodes to remove and which replacement nodes to launch so that every displaced pod has
//! a place kube-scheduler accepts, at a lower cost.
//!
//! ```text
//!  Input { base: provision::Input of the cluster at rest (no pending pod, no NodeClaim in flight), objects (pods' annotations and
//!          owners, Nodes, NodeClaims, NodePools, PodDisruptionBudgets), catalog, weights, settings }
//!     │ candidates: initialized managed nodes of a pool that consolidates underutilised nodes, whose
//!     │   pods have been unchanged for consolidateAfter, with no do-not-disrupt pod or node, no pod
//!     │   that cannot move (bare pods, pods whose volume is bound to the node), a price in the catalog
//!     ▼
//!  search over candidate sets S (below); each S is evaluated by the provisioning decision
//!  (crate::provision::decide, the planners and kube-scheduler's replay) on the cluster with S's
//!  nodes gone and their pods pending
//!     ▼
//!  Decision { remove (nodes, the pods they displace), replacements (a provision::Decision: the
//!             NodeClaims to launch, where each displaced pod is meant to go), costs, lower bound }
//! ```
//!
//! **Encoding.** Evaluating a set S is the existing planning problem with S's nodes removed and their
//! workload pods pending ([`displaced_cluster`]): the same semantics, planners, replay and checker as
//! provisioning, so a displaced pod is only ever planned where kube-scheduler would accept it. A set is
//! feasible when the plan leaves no displaced pod unschedulable, and kube-scheduler's own order
//! (`stowage_core::check::scheduler_leaves`: every replacement Ready, every displaced pod pending at
//! once, queue order and score) binds them all too. The plan's placements are one bind order that
//! works; kube-scheduler scores nodes instead (LeastAllocated sends pods to the emptiest node, often
//! the replacement) and can fill the room a later pod needed. Without that second test a three-hour
//! day ran a cycle of two-nodes-into-one replacements every few minutes, each leaving one pod pending
//! and a new node launched for it. A forced replacement ([`replace`], drift) skips it: that node goes
//! whatever kube-scheduler does, and a pod it leaves is provisioned by the next batch.
//!
//! **Objective.** For a feasible S: `saving(S) = Σ cost(removed) − Σ cost(replacements)` ($/h, each
//! node's cost is the weights' `node_cost` of its offering's price), and, with the weights'
//! `consolidation` costs (`podMoveCost`, `minSaving`, `recentMoveFactor`, `recentMoveWindowSeconds`,
//! `jobLostWorkPaybackSeconds`;
//! models/weights/default.yaml), `disruption(S) = podMoveCost × Σ evictionCost(p) × (1 + recentMoveFactor × recent(p)) + Σ lostWork(p)` over the
//! pods S displaces, where `evictionCost` is Karpenter's: `1 + pod-deletion-cost / 2^27 + priority /
//! 2^25`, clamped to `[0, 10]` (Karpenter clamps to `[-10, 10]`; the lower clamp at 0 keeps the lower
//! bound below valid), and `recent(p) = max(0, 1 − age / recentMoveWindowSeconds)` with `age` the time since
//! stowage last moved a pod of p's controller ([`Consolidation::moved`]; 0 if never): a workload
//! just moved costs up to twice as much to move again (defaults 1.0 and 1 h), so consolidation does
//! not keep shuffling the same Deployment. Karpenter has no such term. A Running pod of a Job adds
//! its lost work ([`lost_work`]): the Job runs a moved pod again from the start, so what it has done
//! is paid twice, `elapsed(p) × share(p) × cost(node)` dollars, with `elapsed` the time since its
//! `status.startTime` and `share` the larger of its cpu and memory requests over its node's
//! allocatable; charged as `× 3600 / jobLostWorkPaybackSeconds` $/h (default 60 s: the saving must
//! repay the lost work within a minute), so a pod that has run for ten minutes on a quarter of a node
//! costs 2.5 times its node's $/h to move and its node stays until it ends or empties. Without it
//! the 10× batch history saw 334 running tasks evicted (docs/lifetime.md). Karpenter charges nothing
//! for this; a Job's pods need `karpenter.sh/do-not-disrupt` there. S is acted on only if
//! `saving(S) − disruption(S) ≥ minSaving` (the stated margin, $/h), and, when S touches a `Balanced`
//! pool, only if every Balanced pool it touches approves it ([`crate::balanced`]: the share of the
//! pool's price S saves against the share of the pool's disruption it causes, Karpenter's `BalancedK`
//! threshold). A candidate of a Balanced pool whose outright deletion would not pass is not tried.
//!
//! **Search: one program over every candidate, then augmentation.** First the **node-set program**
//! (`stowage_core::solve::milp::node_set`, its formula there): one MILP with a keep binary per
//! candidate node, where a kept node keeps its pods and the pods of removed nodes go to the free room
//! of kept nodes or to new nodes pooled per configuration group, minimising the cost of the nodes that
//! remain plus the disruption cost (above) of every pod that moves, under the disruption budgets
//! (a row per pool) and the PodDisruptionBudgets (a row per PDB), started from a drain heuristic's set,
//! within `nodeSetBudget` (default 1 s). It chooses among all candidates at once, so a pair that
//! pays only together, or a hundred nodes that empty into each other, is one proposal. It leaves out
//! what couples nodes (spread, affinity, NodePool limits, spot-to-spot, `Balanced`) and packs new
//! nodes in aggregate, so its set S is a *proposal*: S is planned and judged like any other set
//! (below), and kept only if the real plan places every displaced pod and nets the margin. When the
//! planner rejects S, its first half (in ranking order) is tried, and so on down to one node. The
//! program starts from a drain heuristic's set and, on large clusters, pools existing room (its module
//! doc), so at 1,000 nodes it chooses a hundred-node set within its budget.
//!
//! Then a greedy augmentation with the planner as oracle, from the proposal's S when it was kept (else
//! from nothing): candidates are ranked by their estimated saving (`cost × (1 − utilisation) −
//! disruption`, utilisation the larger of cpu and memory requested over allocatable), then S grows one
//! candidate at a time; `S ∪ {c}` replaces S when it is feasible, within budgets and PDBs, and nets
//! more. Without a proposal the first evaluations are therefore Karpenter's single-node deletes and
//! replaces, and later ones its multi-node consolidation, in saving order instead of a fixed order
//! and without the binary search's prefix restriction. After a kept proposal the augmentation only
//! polishes it: it stops after [`POLISH_MISSES`] evaluations in a row that add nothing. At most
//! `maxEvaluations` plans are made, the proposal's included. The objective of each evaluation is the
//! planner's (MILP within its budget, or greedy), not a proven optimum.
//!
//! **Bounds.** To show how far from the best any consolidation could be, each decision reports a
//! **lower bound** on the hourly cost of the cluster after any consolidation of the candidates
//! ([`lower_bound`]): the non-candidate nodes' cost plus, per resource (cpu, memory, pods), the
//! candidates' pods' requests not fitting the free room of non-candidate nodes times the cheapest cost
//! per unit of that resource over the catalog and the candidates. Every solution keeps or launches at
//! least that capacity, so the bound holds. The node-set program adds its own dual bound
//! ([`NodeSetReport`]) on cost plus disruption, over the consolidations where kept nodes keep their
//! pods (which every decision here is), and the search uses it twice: when the bound is above the
//! cluster's cost minus `minSaving`, no set can pay and nothing is planned at all; when the
//! proposal's planned cost plus disruption is within `minSaving` of the bound, no other set could
//! net more than the margin and the augmentation is skipped.
//!
//! **Rules.**
//! - `WhenEmpty` pools never consolidate non-empty nodes (emptiness is [`crate::disruption`]'s, under
//!   every policy: an empty node of a Balanced pool is never scored).
//! - `consolidateAfter`: a node's workload pods (by uid) unchanged for that long; `Never` disables.
//!   The memory is [`Consolidation`]'s; in the controller it restarts with the process (a later
//!   decision, never an earlier one).
//! - `karpenter.sh/do-not-disrupt: "true"` on a non-terminal pod, the Node or its NodeClaim blocks the node.
//! - Pods that cannot move block their node: bare pods (no controller owner; mirror pods, owned by
//!   the Node, are neither moved nor blocking), and pods with a volume bound to the node's hostname
//!   (local storage with no replacement). Pods with `emptyDir` move, as in Karpenter (their data is lost).
//! - Disruption budgets: per pool, the budgets whose `reasons` are unset or include `Underutilized`
//!   (`nodes` a count or a percentage of the pool's nodes, the smallest wins; a budget with a
//!   `schedule` applies only within its window, [`crate::disruption::budget_active`]), minus the pool's nodes
//!   already being deleted, bound how many of the pool's nodes one decision removes.
//! - PodDisruptionBudgets: a decision never needs more simultaneous evictions of a PDB's pods than it
//!   allows now (`status.disruptionsAllowed` when the status is there, else computed from
//!   `minAvailable` / `maxUnavailable` over the matching pods, healthy meaning bound and Running).
//! - Spot-to-spot replacement (a removed spot node and a spot replacement) follows Karpenter: only with
//!   the `spotToSpot` setting (Karpenter's `SpotToSpotConsolidation` feature gate, off by default), for
//!   a single node, and only when the replacement's NodeClaim allows at least
//!   [`MIN_SPOT_TO_SPOT_TYPES`] instance types cheaper than the removed node.
//! - Order: the replacements are launched and Ready before any removed node drains. The executor (the
//!   simulator's engine; the controller when it is wired) launches every NodeClaim of
//!   [`Decision::replacements`], waits until each one's Node is Ready, and only then deletes the
//!   removed nodes' NodeClaims; if a launch fails, it removes nothing.
//!
//! The re-validation after a wait and the reason events are the controller's (its `consolidation`).
//! The memory of recent moves, like `consolidateAfter`'s, restarts with the controller.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as PodObj;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::balanced::{self, PoolTotals, Score};
use super::disruption::{Moment, allowed_disruptions, annotated, is_mirror, pool_policy, reason_budgets, workload_by_node};
use super::provision::{self, Planner, PodRef, ProvisionError};
use stowage_core::domain::catalog::{Catalog, SPOT};
use stowage_core::domain::labels::keys;
use stowage_core::domain::nodepool::ConsolidationPolicy;
use stowage_core::domain::pod::PodId;
use stowage_core::domain::pod::{Pod, PodPhase};
use stowage_core::domain::resources::Resources;
use stowage_core::domain::{Cluster, Node};
use stowage_core::solve::milp::Options;
use stowage_core::solve::milp::node_set::{self, NodeSetInput, Removable};
use stowage_core::weights::{ConsolidationCosts, Weights};
use stowage_input::Objects;
use stowage_input::api::NodePool as NodePoolObj;
use stowage_input::ids::stable_hash;

pub use super::disruption::DO_NOT_DISRUPT;
/// `controller.kubernetes.io/pod-deletion-cost`.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// Karpenter's `MinInstanceTypesForSpotToSpotConsolidation`.
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;
/// The disruption reason budgets name for this decision.
pub const REASON: &str = "Underutilized";

/// How consolidation searches. What it charges for moving pods is the weights' (`consolidation`:
/// `podMoveCost`, `minSaving`, `recentMoveFactor`, `recentMoveWindowSeconds`,
/// `jobLostWorkPaybackSeconds`; module doc, Objective).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Karpenter's `SpotToSpotConsolidation` feature gate.
    pub spot_to_spot: bool,
    /// Most candidate sets planned per decision.
    pub max_evaluations: usize,
    /// Time for the node-set program (module doc, Search); zero skips it.
    pub node_set_budget: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { spot_to_spot: false, max_evaluations: 16, node_set_budget: Duration::from_secs(1) }
    }
}

/// What a decision is made on: the provisioning decision's input (the cluster at rest, built from
/// `objects`; the catalog with refused offerings unavailable, whose prices are read for existing nodes
/// too; the replacements' batch annotation), and the consolidation settings.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    pub base: provision::Input<'a>,
    pub settings: &'a Settings,
}

/// A node the decision removes.
#[derive(Clone, Debug, PartialEq)]
pub struct Removal {
    pub node: String,
    pub nodepool: String,
    /// Objective cost per hour (weights applied) and the offering's price.
    pub cost: f64,
    pub price: f64,
    pub capacity_type: String,
    /// The workload pods it displaces.
    pub pods: Vec<PodRef>,
}

/// A consolidation to carry out: launch every replacement, wait until each is Ready, then remove.
#[derive(Clone, Debug)]
pub struct Decision {
    pub remove: Vec<Removal>,
    /// The NodeClaims to launch first and where each displaced pod is meant to go.
    pub replacements: provision::Decision,
    /// The cluster the replacements were planned on (the removed nodes gone, their pods pending): what
    /// the checker judges `replacements.plan` against.
    pub planned_on: Cluster,
    /// $/h of the nodes with a catalog price, now and after the decision.
    pub cost_before: f64,
    pub cost_after: f64,
    /// `Σ removed − Σ replacements` ($/h).
    pub saving: f64,
    pub disruption_cost: f64,
    /// A lower bound on `cost_after` over every consolidation of the candidates (module doc).
    pub lower_bound: f64,
    /// Candidate sets planned.
    pub evaluations: usize,
    /// The score of each `Balanced` pool the decision touches ([`crate::balanced`]; all approved).
    pub balanced: BTreeMap<String, Score>,
    /// What the node-set program proposed, when it ran (module doc, Search).
    pub node_set: Option<NodeSetReport>,
}

/// The node-set program's answer, in the decision's terms: the cluster's whole cost.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSetReport {
    /// Nodes it removed.
    pub remove: usize,
    /// Its objective: $/h of the nodes after its consolidation plus its disruption cost, and a proven
    /// lower bound on that over the consolidations it describes (kept nodes keep their pods).
    pub objective: f64,
    pub lower_bound: Option<f64>,
    pub ms: f64,
    /// Why the program gave no answer (the search went on without it).
    pub error: Option<String>,
}

impl Decision {
    /// One line for events and logs.
    pub fn reason(&self) -> String {
        let nodes: Vec<&str> = self.remove.iter().map(|r| r.node.as_str()).collect();
        let moved: usize = self.remove.iter().map(|r| r.pods.len()).sum();
        let scores: Vec<String> = self.balanced.iter().map(|(p, s)| format!("; Balanced pool {p}: score {:.3} >= {:.3}", s.value(), Score::threshold())).collect();
        let program = match &self.node_set {
            Some(NodeSetReport { error: None, remove, lower_bound: Some(b), .. }) => format!("; node-set program: remove {remove}, cost + disruption >= ${b:.4}/h"),
            Some(NodeSetReport { error: None, remove, lower_bound: None, .. }) => format!("; node-set program: remove {remove}"),
            _ => String::new(),
        };
        format!(
            "underutilized: remove {} ({} pods moved, {} replacement{}), saving ${:.4}/h against a disruption cost of ${:.4}/h; cost ${:.4}/h -> ${:.4}/h, lower bound ${:.4}/h{}{}",
            nodes.join(", "),
            moved,
            self.replacements.claims.len(),
            if self.replacements.claims.len() == 1 { "" } else { "s" },
            self.saving,
            self.disruption_cost,
            self.cost_before,
            self.cost_after,
            self.lower_bound,
            program,
            scores.concat()
        )
    }
}

/// Why no decision was made this round (none is an error: the cluster is left as it is).
#[derive(Debug, thiserror::Error)]
pub enum ConsolidationError {
    /// The provisioning decision failed on a candidate set for another reason than a pod without a
    /// place (a planner error, an invalid plan): nothing is removed; fix what the inner error names.
    #[error("consolidation could not evaluate removing {nodes}: {source}")]
    Provision { nodes: String, source: ProvisionError },
}

/// What a round found.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The cluster is not at rest (pending pods or NodeClaims in flight): nothing is judged.
    NotSettled,
    /// No candidate set pays for its disruption; `lower_bound` as in [`Decision`].
    Nothing {
        candidates: usize,
        evaluations: usize,
        cost: f64,
        lower_bound: f64,
        node_set: Option<NodeSetReport>,
    },
    Consolidate(Box<Decision>),
}

/// One candidate node, with what the search needs.
#[derive(Clone, Debug)]
struct Cand {
    node: usize,
    pool: String,
    cost: f64,
    price: f64,
    capacity_type: String,
    pods: Vec<usize>,
    disruption: f64,
    /// Karpenter's node disruption cost (`1 + Σ evictionCost`, [`balanced::node_disruption`]).
    reschedule: f64,
    rank: f64,
}

/// The memory of when each node's pods last changed.
#[derive(Clone, Debug)]
pub struct Consolidation<T> {
    /// Node → (hash of its workload pods' uids, since when).
    since: BTreeMap<String, (u64, T)>,
    /// The cluster's fingerprint and due nodes of the last round: a round that found nothing is not
    /// repeated until something changes or another node becomes due.
    tried: Option<(u64, BTreeSet<String>)>,
    /// Controller (namespace/kind/name) → when stowage last moved one of its pods.
    moved: BTreeMap<String, T>,
}

impl<T> Default for Consolidation<T> {
    fn default() -> Self {
        Consolidation { since: BTreeMap::new(), tried: None, moved: BTreeMap::new() }
    }
}

/// The controller a pod's move is remembered by (its pods are replaced under new names and uids).
fn controller_key(p: &Pod) -> Option<String> {
    p.owner.as_ref().map(|o| format!("{}/{}/{}", p.namespace, o.kind, o.name))
}

/// Karpenter's eviction cost of a pod, clamped to `[0, 10]` (module doc).
pub fn eviction_cost(pod: &Pod, obj: Option<&PodObj>) -> f64 {
    let deletion = obj.and_then(|o| o.metadata.annotations.as_ref()).and_then(|a| a.get(POD_DELETION_COST)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0);
    (1.0 + deletion / 2f64.powi(27) + pod.priority as f64 / 2f64.powi(25)).clamp(0.0, 10.0)
}

/// What moving `pod` throws away, in $/h (module doc, Objective): for a Running pod of a Job, its run
/// time so far × its share of the node × the node's cost, repaid within `jobLostWorkPaybackSeconds`;
/// 0 for any other pod, without a calendar (`now`, Unix seconds) or a `status.startTime`.
pub fn lost_work(pod: &Pod, obj: Option<&PodObj>, node: &Node, node_cost: f64, costs: &ConsolidationCosts, now: Option<i64>) -> f64 {
    let payback = costs.job_lost_work_payback_seconds;
    if payback <= 0.0 || pod.phase != PodPhase::Running || pod.owner.as_ref().is_none_or(|o| o.kind != "Job") {
        return 0.0;
    }
    let Some(now) = now else { return 0.0 };
    let Some(started) = obj.and_then(|o| o.status.as_ref()).and_then(|s| s.start_time.as_ref()) else { return 0.0 };
    let elapsed = (now - started.0.as_second()).max(0) as f64;
    elapsed / payback * share_of(&pod.requests, node) * node_cost
}

/// The larger of `requests`' cpu and memory over the node's allocatable, at most 1.
fn share_of(requests: &Resources, node: &Node) -> f64 {
    ["cpu", "memory"].iter().map(|r| requests.get(r) as f64 / node.allocatable.get(r).max(1) as f64).fold(0.0, f64::max).min(1.0)
}

/// The objective cost of a node with this offering (no NodePool-weight deficit: consolidation compares
/// nodes of any pool on price).
fn node_cost(weights: &Weights, price: f64, capacity_type: &str) -> f64 {
    weights.node_cost(price, capacity_type == SPOT, 0)
}

/// A node's offering price from the catalog (instance type, zone, capacity type labels).
fn node_price(catalog: &Catalog, n: &Node) -> Option<(f64, String)> {
    let ct = n.label(keys::CAPACITY_TYPE).unwrap_or("on-demand").to_string();
    let (it, zone) = (n.label(keys::INSTANCE_TYPE)?, n.label(keys::ZONE)?);
    let price = catalog.get(it)?.offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct)?.price;
    Some((price, ct))
}

/// The pods' objects by namespace/name.
fn pod_objects(objects: &Objects) -> BTreeMap<(String, String), &PodObj> {
    objects.pods.iter().map(|o| ((o.obj.metadata.namespace.clone().unwrap_or_else(|| "default".into()), o.obj.metadata.name.clone().unwrap_or_default()), &o.obj)).collect()
}

/// Why a pod pins its node (module doc, rules), if it does.
fn unmovable(p: &Pod, obj: Option<&PodObj>, node: &str) -> Option<&'static str> {
    if obj.is_some_and(|o| annotated(&o.metadata)) {
        return Some("a pod has karpenter.sh/do-not-disrupt");
    }
    if p.owner.is_none() {
        return Some("a pod has no controller owner");
    }
    let hostname_bound =
        p.volumes.node_terms.iter().any(|alts| !alts.is_empty() && alts.iter().all(|t| t.expressions.iter().any(|e| e.key == keys::HOSTNAME && e.values.len() == 1 && e.values[0] == node)));
    if hostname_bound || p.volumes.selected_node.as_deref() == Some(node) {
        return Some("a pod's volume is bound to the node");
    }
    None
}

impl<T: Moment> Consolidation<T> {
    /// Records each managed node's workload pods at `now` (restarting a node's timer when they change).
    pub fn observe(&mut self, cluster: &Cluster, now: T) {
        let mut seen = BTreeMap::new();
        let by_node = workload_by_node(cluster);
        for n in cluster.nodes.iter().filter(|n| n.nodepool.is_some() && !n.in_flight) {
            let mut uids: Vec<&str> = by_node.get(n.name.as_str()).into_iter().flatten().map(|&i| cluster.pods[i].uid.as_str()).collect();
            uids.sort();
            let h = stable_hash(&uids);
            let since = match self.since.get(&n.name) {
                Some(&(old, t)) if old == h => t,
                _ => now,
            };
            seen.insert(n.name.clone(), (h, since));
        }
        self.since = seen;
    }

    /// Records that the pods `d` displaces are being moved at `now` (call when a decision, or a drift
    /// replacement, starts): their controllers' next pods cost more to move for a while (module doc).
    pub fn moved(&mut self, d: &Decision, now: T) {
        let moved: BTreeSet<&str> = d.remove.iter().flat_map(|r| r.pods.iter().map(|p| p.uid.as_str())).collect();
        for key in d.planned_on.pods.iter().filter(|q| moved.contains(q.uid.as_str())).filter_map(controller_key) {
            self.moved.insert(key, now);
        }
    }

    /// Per pod index: how recent its controller's last move is, 1 (now) falling to 0 at the window's end.
    fn recency(&mut self, cluster: &Cluster, costs: &ConsolidationCosts, now: T) -> BTreeMap<usize, f64> {
        let window = costs.recent_move_window_seconds;
        self.moved.retain(|_, t| now.since(*t).as_secs_f64() < window);
        let mut out = BTreeMap::new();
        if window <= 0.0 || self.moved.is_empty() {
            return out;
        }
        for (i, p) in cluster.pods.iter().enumerate() {
            if let Some(t) = controller_key(p).and_then(|k| self.moved.get(&k)) {
                out.insert(i, 1.0 - now.since(*t).as_secs_f64() / window);
            }
        }
        out
    }

    /// Nodes whose pods have been unchanged for their pool's `consolidateAfter` at `now`, with the
    /// pools that consolidate underutilised nodes.
    fn due(&self, cluster: &Cluster, objects: &Objects, now: T) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for n in &cluster.nodes {
            let Some((_, since)) = self.since.get(&n.name) else { continue };
            let Some(after) = consolidate_after(cluster, objects, n) else { continue };
            if now.since(*since) >= after {
                out.insert(n.name.clone());
            }
        }
        out
    }

    /// The earliest moment a node not judged yet becomes due (for the loop's sleep).
    pub fn next_due(&self, cluster: &Cluster, objects: &Objects) -> Option<T> {
        let fingerprint = fingerprint(cluster);
        let tried: BTreeSet<String> = match &self.tried {
            Some((f, due)) if *f == fingerprint => due.clone(),
            _ => BTreeSet::new(),
        };
        cluster
            .nodes
            .iter()
            .filter(|n| !tried.contains(&n.name))
            .filter_map(|n| {
                let (_, since) = self.since.get(&n.name)?;
                Some(*since + consolidate_after(cluster, objects, n)?)
            })
            .min()
    }

    /// Decides a round (module doc). `planner` plans every candidate set.
    pub fn decide(&mut self, input: &Input, planner: &mut dyn Planner, now: T) -> Result<Outcome, ConsolidationError> {
        self.decide_at(input, planner, now, now.unix_seconds())
    }

    /// [`Consolidation::decide`] with budget schedules read at `calendar` (Unix seconds) instead of
    /// the clock's own calendar (the simulator's clock counts from a scenario's start).
    pub fn decide_at(&mut self, input: &Input, planner: &mut dyn Planner, now: T, calendar: Option<i64>) -> Result<Outcome, ConsolidationError> {
        let cluster = input.base.cluster;
        let due = self.due(cluster, input.base.objects, now);
        // Remembered either way: a round is not repeated until the cluster changes (a node registering,
        // a pod bound) or another node becomes due.
        self.tried = Some((fingerprint(cluster), due.clone()));
        if !cluster.pending().is_empty() || cluster.nodes.iter().any(|n| n.in_flight) {
            return Ok(Outcome::NotSettled);
        }
        let balanced = balanced_totals(input);
        let recency = self.recency(cluster, &input.base.weights.consolidation, now);
        let mut cands = candidates(input, &due, &recency, calendar);
        cands.retain(|c| balanced::passes_as_delete(&c.source(), &|p| balanced.contains_key(p), &balanced));
        let cost = current_cost(input);
        let lower_bound = lower_bound(input, &cands);
        let mut search = Search { input, planner, cands: &cands, evaluations: 0, cost, lower_bound, forced: false, now: calendar, balanced, node_set: None };
        let best = search.run()?;
        let (evaluations, node_set) = (search.evaluations, search.node_set);
        Ok(match best {
            Some(mut d) => {
                d.evaluations = evaluations;
                d.node_set = node_set;
                Outcome::Consolidate(Box::new(d))
            }
            None => Outcome::Nothing { candidates: cands.len(), evaluations, cost, lower_bound, node_set },
        })
    }
}

/// A forced replacement of `node` (drift, `crate::drift`): its workload pods planned elsewhere, on
/// existing room or new NodeClaims, by the same evaluation as a consolidation set but with no saving
/// required and no spot-to-spot rule. `None` when the node is not one consolidation could move (a
/// do-not-disrupt pod or node, a pod that cannot move, no price, no workload pod: an empty node is
/// simply deleted) or a displaced pod has no place.
pub fn replace(input: &Input, planner: &mut dyn Planner, node: &str) -> Result<Option<Decision>, ConsolidationError> {
    let cluster = input.base.cluster;
    if !cluster.pending().is_empty() || cluster.nodes.iter().any(|n| n.in_flight) {
        return Ok(None);
    }
    let due = BTreeSet::from([node.to_string()]);
    let cands = candidates(input, &due, &BTreeMap::new(), None);
    let Some(c) = cands.first() else { return Ok(None) };
    let (cost, lower_bound) = (current_cost(input), lower_bound(input, &cands));
    let mut search = Search { input, planner, cands: &cands, evaluations: 0, cost, lower_bound, forced: true, now: None, balanced: BTreeMap::new(), node_set: None };
    let d = search.evaluate(&[c])?;
    Ok(d.map(|mut d| {
        d.evaluations = 1;
        d
    }))
}

/// What the last round's memory is keyed on: every node and where every pod is.
fn fingerprint(cluster: &Cluster) -> u64 {
    let mut parts: Vec<String> = cluster.nodes.iter().map(|n| format!("n/{}/{}/{}", n.name, n.in_flight, n.deleting)).collect();
    parts.extend(cluster.pods.iter().map(|p| format!("p/{}/{}", p.uid, p.node_name.as_deref().unwrap_or(""))));
    parts.sort();
    stable_hash(&parts.iter().map(String::as_str).collect::<Vec<_>>())
}

fn pool_obj<'o>(objects: &'o Objects, name: &str) -> Option<&'o NodePoolObj> {
    objects.nodepools.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(name))
}

/// `consolidateAfter` of the node's pool when the pool consolidates underutilised nodes.
fn consolidate_after(cluster: &Cluster, objects: &Objects, n: &Node) -> Option<Duration> {
    let pool = cluster.nodepool(n.nodepool.as_deref()?)?;
    if !pool.consolidation.consolidates_underutilized() {
        return None;
    }
    match pool_obj(objects, &pool.name) {
        Some(o) => pool_policy(o).consolidate_after,
        None => pool.consolidate_after.map(Duration::from_secs),
    }
}

/// Budgets (`nodes` values) of a pool that apply to [`REASON`] (Karpenter's default `10%` if none).
pub fn underutilized_budgets(pool: Option<&NodePoolObj>, now: Option<i64>) -> Vec<String> {
    reason_budgets(pool, REASON, now)
}

/// The candidate nodes among `due`, ranked (module doc); `now` (Unix seconds) dates Jobs' lost work.
fn candidates(input: &Input, due: &BTreeSet<String>, recency: &BTreeMap<usize, f64>, now: Option<i64>) -> Vec<Cand> {
    let (cluster, objects) = (input.base.cluster, input.base.objects);
    let pods = pod_objects(objects);
    let by_node = workload_by_node(cluster);
    // Nodes and NodeClaims by node name, the first of each name (as a search in listing order finds).
    let mut node_objs: BTreeMap<&str, &ObjectMeta> = BTreeMap::new();
    for o in &objects.nodes {
        if let Some(name) = o.obj.metadata.name.as_deref() {
            node_objs.entry(name).or_insert(&o.obj.metadata);
        }
    }
    let mut claims: BTreeMap<&str, &ObjectMeta> = BTreeMap::new();
    for o in &objects.nodeclaims {
        if let Some(name) = o.obj.status.as_ref().and_then(|s| s.node_name.as_deref()) {
            claims.entry(name).or_insert(&o.obj.metadata);
        }
    }
    let mut out = Vec::new();
    for (ni, n) in cluster.nodes.iter().enumerate() {
        if !due.contains(&n.name) || n.deleting || n.in_flight || n.unschedulable {
            continue;
        }
        let Some(pool) = n.nodepool.clone() else { continue };
        if node_objs.get(n.name.as_str()).is_some_and(|m| annotated(m)) || claims.get(n.name.as_str()).is_some_and(|m| annotated(m)) {
            continue;
        }
        let on: Vec<(usize, &Pod)> = by_node.get(n.name.as_str()).into_iter().flatten().map(|&i| (i, &cluster.pods[i])).collect();
        if on.is_empty() {
            // Empty nodes are the emptiness decision's (crate::disruption).
            continue;
        }
        let obj = |p: &Pod| pods.get(&(p.namespace.clone(), p.name.clone())).copied();
        if on.iter().any(|(_, p)| unmovable(p, obj(p), &n.name).is_some()) {
            continue;
        }
        let Some((price, ct)) = node_price(input.base.catalog, n) else { continue };
        let cost = node_cost(input.base.weights, price, &ct);
        let evictions: Vec<f64> = on.iter().map(|(_, p)| eviction_cost(p, obj(p))).collect();
        let costs = &input.base.weights.consolidation;
        let moves = costs.pod_move_cost * on.iter().zip(&evictions).map(|((i, _), e)| e * (1.0 + costs.recent_move_factor * recency.get(i).copied().unwrap_or(0.0))).sum::<f64>();
        let disruption = moves + on.iter().map(|(_, p)| lost_work(p, obj(p), n, cost, costs, now)).sum::<f64>();
        let reschedule = balanced::node_disruption(evictions);
        let mut used = Resources::default();
        for (_, p) in &on {
            used.add(&p.requests);
        }
        let util = share_of(&used, n);
        let rank = cost * (1.0 - util) - disruption;
        out.push(Cand { node: ni, pool, cost, price, capacity_type: ct, pods: on.iter().map(|(i, _)| *i).collect(), disruption, reschedule, rank });
    }
    out.sort_by(|a, b| b.rank.total_cmp(&a.rank).then_with(|| cluster.nodes[a.node].name.cmp(&cluster.nodes[b.node].name)));
    out
}

impl Cand {
    /// The node as [`crate::balanced`] scores it.
    fn source(&self) -> balanced::Source {
        balanced::Source { pool: self.pool.clone(), price: self.price, disruption: self.reschedule }
    }
}

/// The `Balanced` pools and their totals over all their nodes, candidates or not ([`crate::balanced`]).
fn balanced_totals(input: &Input) -> BTreeMap<String, PoolTotals> {
    let (cluster, objects) = (input.base.cluster, input.base.objects);
    let pods = pod_objects(objects);
    let mut out: BTreeMap<String, PoolTotals> = cluster.nodepools.iter().filter(|p| p.consolidation == ConsolidationPolicy::Balanced).map(|p| (p.name.clone(), PoolTotals::default())).collect();
    let by_node = workload_by_node(cluster);
    for n in &cluster.nodes {
        let Some(t) = n.nodepool.as_ref().and_then(|p| out.get_mut(p)) else { continue };
        if let Some((price, _)) = node_price(input.base.catalog, n) {
            t.cost += price;
        }
        let on = by_node.get(n.name.as_str()).into_iter().flatten().map(|&i| &cluster.pods[i]);
        t.disruption += balanced::node_disruption(on.map(|p| eviction_cost(p, pods.get(&(p.namespace.clone(), p.name.clone())).copied())));
    }
    out
}

/// $/h of every node with a catalog price.
fn current_cost(input: &Input) -> f64 {
    input.base.cluster.nodes.iter().filter_map(|n| node_price(input.base.catalog, n).map(|(p, ct)| node_cost(input.base.weights, p, &ct))).sum()
}

/// The lower bound on the cost after any consolidation of the nodes `removable` (module doc). `offers`
/// are the nodes that could be launched (room for workload pods, cost).
pub(crate) fn lower_bound_of(cluster: &Cluster, catalog: &Catalog, weights: &Weights, removable: &BTreeSet<usize>, offers: &[(Resources, f64)]) -> f64 {
    let mut fixed = 0.0;
    let mut free = Resources::default();
    let mut demand = Resources::default();
    let mut unit: BTreeMap<&str, f64> = BTreeMap::new();
    let dims = ["cpu", "memory", "pods"];
    let mut offer = |alloc: &Resources, cost: f64| {
        for d in dims {
            let a = alloc.get(d);
            if a > 0 {
                let u = unit.entry(d).or_insert(f64::INFINITY);
                *u = u.min(cost / a as f64);
            }
        }
    };
    let mut used_on: BTreeMap<&str, Resources> = BTreeMap::new();
    for p in cluster.pods.iter().filter(|p| !p.is_terminal()) {
        if let Some(n) = p.node_name.as_deref() {
            used_on.entry(n).or_default().add(&p.requests);
        }
    }
    let by_node = workload_by_node(cluster);
    for (ni, n) in cluster.nodes.iter().enumerate() {
        let used = used_on.get(n.name.as_str()).cloned().unwrap_or_default();
        let cost = node_price(catalog, n).map(|(p, ct)| node_cost(weights, p, &ct)).unwrap_or(0.0);
        if removable.contains(&ni) {
            for &i in by_node.get(n.name.as_str()).into_iter().flatten() {
                demand.add(&cluster.pods[i].requests);
            }
            offer(&n.allocatable, cost);
        } else {
            fixed += cost;
            for d in dims {
                free.set(d, free.get(d) + (n.allocatable.get(d) - used.get(d)).max(0));
            }
        }
    }
    for (room, cost) in offers {
        offer(room, *cost);
    }
    let extra = dims.iter().map(|d| (demand.get(d) - free.get(d)).max(0) as f64 * unit.get(d).copied().filter(|u| u.is_finite()).unwrap_or(0.0)).fold(0.0, f64::max);
    fixed + extra
}

/// [`lower_bound_of`] with the NodePools' candidate configurations for the candidates' pods as what
/// could be launched (the planning problem's, dominated ones pruned, which keeps the cheapest cost per
/// unit of every resource), or every available offering of the catalog if that problem cannot be built.
fn lower_bound(input: &Input, cands: &[Cand]) -> f64 {
    let cluster = input.base.cluster;
    let names: BTreeSet<String> = cands.iter().map(|c| cluster.nodes[c.node].name.clone()).collect();
    let displaced = displaced_cluster(cluster, &names);
    let offers: Vec<(Resources, f64)> = match stowage_core::solve::problem::Problem::new(&displaced, input.base.catalog, input.base.weights) {
        Ok(p) => p.configs.iter().map(|c| (c.room(), node_cost(input.base.weights, c.price, &c.capacity_type))).collect(),
        Err(_) => {
            input.base.catalog.types.iter().flat_map(|t| t.offerings.iter().filter(|o| o.available).map(move |o| (t.allocatable(), node_cost(input.base.weights, o.price, &o.capacity_type)))).collect()
        }
    };
    lower_bound_of(cluster, input.base.catalog, input.base.weights, &cands.iter().map(|c| c.node).collect(), &offers)
}

/// The cluster with `remove`'s nodes gone: their workload pods pending, their other pods gone.
pub fn displaced_cluster(cluster: &Cluster, remove: &BTreeSet<String>) -> Cluster {
    let mut c = cluster.clone();
    c.nodes.retain(|n| !remove.contains(&n.name));
    c.pods.retain(|p| !p.node_name.as_ref().is_some_and(|n| remove.contains(n)) || (!p.is_daemon() && !p.is_terminal() && !is_mirror(p)));
    for p in &mut c.pods {
        if p.node_name.as_ref().is_some_and(|n| remove.contains(n)) {
            p.node_name = None;
            p.phase = PodPhase::Pending;
        }
    }
    c
}

/// How many pods each PodDisruptionBudget lets go now, with the pod indices it covers.
fn pdb_allowances(cluster: &Cluster, pdbs: &[&PodDisruptionBudget]) -> Vec<(i64, BTreeSet<usize>)> {
    let mut out = Vec::new();
    for pdb in pdbs {
        let ns = pdb.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let Some(spec) = &pdb.spec else { continue };
        let Some(sel) = &spec.selector else { continue };
        let matching: BTreeSet<usize> =
            cluster.pods.iter().enumerate().filter(|(_, p)| p.namespace == ns && !p.is_terminal() && stowage_input::expand::selects_labels(sel, &p.labels)).map(|(i, _)| i).collect();
        let expected = matching.len() as i64;
        let healthy = matching.iter().filter(|&&i| cluster.pods[i].node_name.is_some() && cluster.pods[i].phase == PodPhase::Running).count() as i64;
        let resolve = |v: &IntOrString| match v {
            IntOrString::Int(i) => *i as i64,
            IntOrString::String(s) => s.trim_end_matches('%').trim().parse::<f64>().map(|p| (p / 100.0 * expected as f64).ceil() as i64).unwrap_or(expected),
        };
        let computed = match (&spec.min_available, &spec.max_unavailable) {
            (Some(min), _) => healthy - resolve(min),
            (None, Some(max)) => resolve(max) - (expected - healthy),
            (None, None) => healthy - expected + 1,
        };
        let allowed = pdb.status.as_ref().and_then(|s| s.disruptions_allowed).map(i64::from).unwrap_or(computed).max(0);
        out.push((allowed, matching));
    }
    out
}

/// Slack on the node-set program's bound before it rules every set out ($/h): HiGHS's bound carries
/// its feasibility tolerance.
const BOUND_TOLERANCE: f64 = 1e-6;

/// Evaluations in a row that add nothing after which the augmentation stops polishing a kept proposal.
pub const POLISH_MISSES: usize = 3;

/// The greedy augmentation (module doc).
struct Search<'i, 'a, 'p> {
    input: &'i Input<'a>,
    planner: &'p mut dyn Planner,
    cands: &'i [Cand],
    evaluations: usize,
    cost: f64,
    lower_bound: f64,
    /// A replacement that must happen (drift): the spot-to-spot rules, which guard a saving, do not apply.
    forced: bool,
    /// The round's time in Unix seconds, if the clock has a calendar (budget schedules).
    now: Option<i64>,
    /// The `Balanced` pools and their totals (none for a forced replacement).
    balanced: BTreeMap<String, PoolTotals>,
    /// What the node-set program said, once it ran.
    node_set: Option<NodeSetReport>,
}

impl<'i> Search<'i, '_, '_> {
    fn run(&mut self) -> Result<Option<Decision>, ConsolidationError> {
        let cluster = self.input.base.cluster;
        let pdbs: Vec<&PodDisruptionBudget> = self.input.base.objects.pdbs.iter().map(|o| &o.obj).collect();
        let allowances = pdb_allowances(cluster, &pdbs);
        let mut room: BTreeMap<&str, usize> = BTreeMap::new();
        for c in self.cands {
            room.entry(c.pool.as_str()).or_insert_with(|| {
                let total = cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(c.pool.as_str())).count();
                let deleting = cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(c.pool.as_str()) && n.deleting).count();
                allowed_disruptions(&underutilized_budgets(pool_obj(self.input.base.objects, &c.pool), self.now), total).saturating_sub(deleting)
            });
        }
        let mut chosen: Vec<&Cand> = Vec::new();
        let mut best: Option<(f64, Decision)> = None;
        let margin = self.input.base.weights.consolidation.min_saving;
        let proposal = self.node_set(&room, &allowances);
        let bound = self.node_set.as_ref().and_then(|r| r.lower_bound);
        // No set nets the margin: every consolidation costs at least the bound (module doc, Bounds).
        if bound.is_some_and(|b| b > self.cost - margin + BOUND_TOLERANCE) {
            return Ok(None);
        }
        if let Some(mut set) = proposal.filter(|set| within_budgets(set, &room) && within_pdbs(set, &allowances)) {
            // The proposal, then its first halves (in ranking order) while the planner rejects it.
            while self.evaluations < self.input.settings.max_evaluations {
                if let Some(d) = self.evaluate(&set)?
                    && d.saving - d.disruption_cost >= margin
                {
                    // Proven within the margin of the best any set could do: nothing to add.
                    if bound.is_some_and(|b| d.cost_after + d.disruption_cost <= b + margin) {
                        return Ok(Some(d));
                    }
                    chosen = set;
                    best = Some((d.saving - d.disruption_cost, d));
                    break;
                }
                if set.len() <= 1 {
                    break;
                }
                set.truncate(set.len() / 2);
            }
        }
        // After a kept proposal the augmentation polishes it, and stops after a few evaluations in a row
        // that add nothing.
        let (polishing, mut misses) = (!chosen.is_empty(), 0);
        for c in self.cands {
            if self.evaluations >= self.input.settings.max_evaluations || (polishing && misses >= POLISH_MISSES) {
                break;
            }
            if chosen.iter().any(|x| std::ptr::eq(*x, c)) {
                continue;
            }
            let mut set = chosen.clone();
            set.push(c);
            if !within_budgets(&set, &room) || !within_pdbs(&set, &allowances) {
                continue;
            }
            misses += 1;
            let Some(d) = self.evaluate(&set)? else { continue };
            let net = d.saving - d.disruption_cost;
            if net >= self.input.base.weights.consolidation.min_saving && best.as_ref().is_none_or(|(b, _)| net > *b) {
                chosen = set;
                best = Some((net, d));
                misses = 0;
            }
        }
        Ok(best.map(|(_, d)| d))
    }

    /// The node-set program's proposal (module doc, Search): every candidate at once, under the
    /// budgets and PDBs; `None` when it removes nothing, is skipped, or fails (the augmentation then
    /// searches alone: a failed proposal costs time, never a decision).
    fn node_set(&mut self, room: &BTreeMap<&str, usize>, allowances: &[(i64, BTreeSet<usize>)]) -> Option<Vec<&'i Cand>> {
        let budget = self.input.settings.node_set_budget;
        if budget.is_zero() || self.cands.is_empty() {
            return None;
        }
        let cluster = self.input.base.cluster;
        let mut emptied = cluster.clone();
        let mut homes: Vec<Option<usize>> = vec![None; cluster.pods.len()];
        for (ci, c) in self.cands.iter().enumerate() {
            for &i in &c.pods {
                emptied.pods[i].node_name = None;
                emptied.pods[i].phase = PodPhase::Pending;
                homes[i] = Some(ci);
            }
        }
        let removable: Vec<Removable> = self.cands.iter().map(|c| Removable { node: c.node, cost: c.cost, disruption: c.disruption }).collect();
        let budgets: Vec<(Vec<usize>, usize)> = room.iter().map(|(pool, &most)| (self.cands.iter().enumerate().filter(|(_, c)| c.pool == *pool).map(|(i, _)| i).collect(), most)).collect();
        let pdbs: Vec<(Vec<PodId>, usize)> =
            allowances.iter().map(|(allowed, pods)| (pods.iter().filter(|&&i| homes[i].is_some()).map(|&i| PodId(i as u32)).collect(), (*allowed).max(0) as usize)).collect();
        let input = NodeSetInput { cluster: &emptied, catalog: self.input.base.catalog, weights: self.input.base.weights, removable: &removable, homes: &homes, budgets: &budgets, pdbs: &pdbs };
        let options = Options { threads: self.planner.highs_threads(), seed: 0 };
        let started = std::time::Instant::now();
        match node_set::propose(&input, options, budget) {
            Ok(r) => {
                let fixed: f64 = self.cost - removable.iter().map(|r| r.cost).sum::<f64>();
                self.node_set = Some(NodeSetReport { remove: r.remove.len(), objective: r.objective + fixed, lower_bound: r.lower_bound.map(|b| b + fixed), ms: r.ms, error: None });
                (!r.remove.is_empty()).then(|| r.remove.iter().map(|&i| &self.cands[i]).collect())
            }
            Err(e) => {
                self.node_set = Some(NodeSetReport { remove: 0, objective: self.cost, lower_bound: None, ms: started.elapsed().as_secs_f64() * 1000.0, error: Some(e.to_string()) });
                None
            }
        }
    }

    /// Plans the displaced pods of `set`; `None` if one has no place or a rule forbids the result.
    fn evaluate(&mut self, set: &[&Cand]) -> Result<Option<Decision>, ConsolidationError> {
        self.evaluations += 1;
        let cluster = self.input.base.cluster;
        let names: BTreeSet<String> = set.iter().map(|c| cluster.nodes[c.node].name.clone()).collect();
        let planned_on = displaced_cluster(cluster, &names);
        let p = provision::Input { cluster: &planned_on, max_instance_types: self.input.base.max_instance_types.max(MIN_SPOT_TO_SPOT_TYPES + 1), ..self.input.base };
        let replacements = match provision::decide(&p, &mut *self.planner) {
            Ok(d) => d,
            Err(source) => return Err(ConsolidationError::Provision { nodes: names.into_iter().collect::<Vec<_>>().join(", "), source }),
        };
        // A pod the budget deferred has no place yet either.
        if !replacements.unschedulable.is_empty() || !replacements.plan.deferred.is_empty() {
            return Ok(None);
        }
        // The plan shows one bind order that works; kube-scheduler takes its own (module doc). A forced
        // replacement (drift) goes ahead anyway: the node must go, and a pod kube-scheduler leaves
        // waits for the next provisioning batch, as under Karpenter.
        if !self.forced && !stowage_core::check::scheduler_leaves(&planned_on, self.input.base.catalog, &replacements.plan).is_empty() {
            return Ok(None);
        }
        if !self.forced && !self.spot_rules_hold(set, &replacements) {
            return Ok(None);
        }
        let sources: Vec<balanced::Source> = set.iter().map(|c| c.source()).collect();
        let (approved, scores) = balanced::evaluate(&sources, replacements.claims.iter().map(|c| c.price).sum(), &|p| self.balanced.contains_key(p), &self.balanced);
        if !approved {
            return Ok(None);
        }
        let removed: f64 = set.iter().map(|c| c.cost).sum();
        let added: f64 = replacements.claims.iter().map(|c| node_cost(self.input.base.weights, c.price, &c.capacity_type)).sum();
        let remove = set
            .iter()
            .map(|c| Removal {
                node: cluster.nodes[c.node].name.clone(),
                nodepool: c.pool.clone(),
                cost: c.cost,
                price: c.price,
                capacity_type: c.capacity_type.clone(),
                pods: c.pods.iter().map(|&i| PodRef { namespace: cluster.pods[i].namespace.clone(), name: cluster.pods[i].name.clone(), uid: cluster.pods[i].uid.clone() }).collect(),
            })
            .collect();
        let mut replacements = replacements;
        let max_types = self.input.base.max_instance_types.max(1);
        for c in &mut replacements.claims {
            truncate_types(c, max_types);
        }
        Ok(Some(Decision {
            remove,
            replacements,
            planned_on,
            cost_before: self.cost,
            cost_after: self.cost - removed + added,
            saving: removed - added,
            disruption_cost: set.iter().map(|c| c.disruption).sum(),
            lower_bound: self.lower_bound,
            evaluations: 0,
            balanced: scores,
            node_set: None,
        }))
    }

    /// Karpenter's spot-to-spot rules (module doc).
    fn spot_rules_hold(&self, set: &[&Cand], d: &provision::Decision) -> bool {
        let spot_removed = set.iter().any(|c| c.capacity_type == SPOT);
        let spot_added: Vec<&provision::PlannedClaim> = d.claims.iter().filter(|c| c.capacity_type == SPOT).collect();
        if !spot_removed || spot_added.is_empty() {
            return true;
        }
        if !self.input.settings.spot_to_spot || set.len() != 1 {
            return false;
        }
        let limit = set[0].price;
        spot_added.iter().all(|c| {
            let cheaper = c.offerings.iter().filter(|o| o.capacity_type == SPOT && o.price < limit).map(|o| o.instance_type.as_str()).collect::<BTreeSet<_>>().len();
            cheaper >= MIN_SPOT_TO_SPOT_TYPES
        })
    }
}

/// Keeps at most `max` instance types in a replacement NodeClaim (the spot-to-spot count may have
/// asked for more) and in its offerings.
fn truncate_types(c: &mut provision::PlannedClaim, max: usize) {
    let mut keep: BTreeSet<String> = BTreeSet::new();
    for r in c.nodeclaim.spec.requirements.iter_mut().filter(|r| r.key == keys::INSTANCE_TYPE && r.operator == "In") {
        r.values.truncate(max);
        if let Some(m) = r.min_values
            && m as usize > r.values.len()
        {
            r.min_values = Some(r.values.len() as i64);
        }
        keep.extend(r.values.iter().cloned());
    }
    c.offerings.retain(|o| keep.contains(&o.instance_type));
}

fn within_budgets(set: &[&Cand], room: &BTreeMap<&str, usize>) -> bool {
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    for c in set {
        *used.entry(c.pool.as_str()).or_default() += 1;
    }
    used.iter().all(|(p, n)| room.get(p).is_some_and(|r| n <= r))
}

fn within_pdbs(set: &[&Cand], allowances: &[(i64, BTreeSet<usize>)]) -> bool {
    allowances.iter().all(|(allowed, pods)| set.iter().flat_map(|c| c.pods.iter()).filter(|i| pods.contains(i)).count() as i64 <= *allowed)
}
