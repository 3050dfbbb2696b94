//! The event loop: runs a scenario's steps against the world on the simulated clock.
//!
//! At every instant something happens, the engine first brings the world to rest (controllers,
//! Immediate volumes, then a binder pass whenever anything kube-scheduler watches changed, repeated
//! until nothing moves), then jumps to the next timed event: a batch window closing, an instance
//! running or registering, a NodeClaim's registration timeout, an empty node due for consolidation, a
//! node due for a consolidation round (`super::consolidation`), a refused offering coming back, a node
//! expiring. Whether a NodeClaim registers or times out is the
//! controller's own decision (`stowage_decide::lifecycle`) on the simulated clock. Nothing else advances time, so a run is a pure function of the scenario (and of the
//! planner's answers).
//!
//! Who knows what:
//! - the binder sees registered nodes and pods, never plans or NodeClaims;
//! - the planner sees the cluster with NodeClaims in flight and the catalog with refused offerings
//!   marked unavailable, never the binder's decisions except through the pods it bound;
//! - nominations (pod → NodeClaim in flight that the last plan meant for it) only keep a pod from
//!   re-triggering the batcher while its node boots, as Karpenter's nominations do; once the node
//!   registers, kube-scheduler decides, and a pod it places elsewhere is shown as a disagreement.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::cloud::{self, Cloud, INSUFFICIENT_CAPACITY};
use super::consolidation::{Consolidation, DriftFacts, InProgress};
use super::controllers::{self, remove_named, suffix};
use super::disruption::Disruption;
use super::events::{Event, EventKind, PlanVerdict};
use super::expect::{self, Check, Observed};
use super::planner::Planner;
use super::provisioner;
use super::report::{self, CostPoint, Report};
use super::scenario::{Action, ObjectRef, Scenario};
use super::time::{SimTime, short};
use super::volumes;
use super::world::{World, ident, sim_source};
use stowage_core::check;
use stowage_core::check::scheduler as binder;
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::plan::Plan;
use stowage_decide::batch::{BatchConfig, Batcher};
use stowage_decide::cloud::{CloudProvider, LaunchRequest};
use stowage_decide::interruption;
use stowage_decide::launch;
use stowage_decide::lifecycle::{self, Step};
use stowage_decide::offerings::Unavailable;
use stowage_decide::provision::{self, Decision, PlannedClaim, ProvisionError};
use stowage_input::api::{NodeClaim, NodeClaimStatus};
use stowage_input::ids::stable_hash;
use stowage_input::objects::Obj;

/// A run that could not go on: the world became invalid (a pod naming a claim that does not exist,
/// say) or a step named an object that is not there.
#[derive(Clone, Debug, PartialEq)]
pub struct SimError {
    pub scenario: String,
    pub at: SimTime,
    pub step: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.scenario)?;
        if let Some(s) = self.step {
            write!(f, ": step {s}")?;
        }
        write!(f, " (at {}): {}", self.at, self.message)
    }
}

impl std::error::Error for SimError {}

/// A NodeClaim the simulation launched.
#[derive(Clone, Debug)]
struct Claim {
    zone: String,
    instance: String,
    /// When the cloud accepted the launch (the NodeClaim's `Launched=True`).
    launched_at: SimTime,
    running_at: SimTime,
    /// When the simulated kubelet creates its Node.
    registers_at: SimTime,
    expires_at: Option<SimTime>,
    running_logged: bool,
    registered: bool,
}

impl Claim {
    /// What the shared lifecycle decision sees of it at `now`. The simulated kubelet's Node is ready at
    /// once and has no startup taints, so registration initializes it too.
    fn observed(&self, name: &str, now: SimTime) -> lifecycle::Observed<SimTime> {
        let node = (self.registers_at <= now).then(|| lifecycle::NodeSeen { name: name.to_string(), deleting: false, registered: self.registered, ready: true, initialized: self.registered });
        lifecycle::Observed { created: Some(self.launched_at), deleting: false, finalizer: true, launched: Some(self.launched_at), instance_gone: false, node }
    }
}

/// Counted since the previous `expect` step.
#[derive(Clone, Debug, Default)]
struct Since {
    launches: usize,
    launch_batches: usize,
    batches: usize,
    /// Consolidation decisions whose nodes were removed.
    consolidations: usize,
    new_nodes: BTreeSet<String>,
}

/// Upper bound on loop rounds, far above any real scenario; reaching it means something oscillates.
const MAX_ROUNDS: usize = 100_000;

pub(super) struct Engine<'a> {
    sc: &'a Scenario,
    planner: &'a mut dyn Planner,
    check_plans: bool,
    now: SimTime,
    step: Option<usize>,
    world: World,
    cloud: Cloud,
    batcher: Batcher<SimTime>,
    refused: Unavailable<SimTime>,
    disruption: Disruption,
    consolidation: Consolidation,
    /// Consolidation rounds decided (names the replacements' batch).
    consolidations: u32,
    cost_over_time: Vec<CostPoint>,
    claims: BTreeMap<String, Claim>,
    /// Pod uid → the NodeClaim in flight the latest plan meant for it.
    nominated: BTreeMap<String, String>,
    /// Pod uid → the node the latest plan put it on (for showing disagreements).
    planned: BTreeMap<String, String>,
    /// Pod uid → (pod key, kube-scheduler's message) from the latest binder pass.
    unschedulable: BTreeMap<String, (String, String)>,
    /// World generation the binder last ran at.
    binder_generation: Option<u64>,
    batches: u32,
    since: Since,
    timeline: Vec<Event>,
    checks: Vec<Check>,
    invalid_plans: Vec<u32>,
    settle_timeouts: Vec<usize>,
    /// When a disruption budget that allows nothing now lets go (`budget_wake`), as of the last time
    /// the world came to rest.
    blocked_until: Option<SimTime>,
}

impl<'a> Engine<'a> {
    pub(super) fn new(sc: &'a Scenario, planner: &'a mut dyn Planner, check_plans: bool) -> Self {
        let s = &sc.settings;
        Engine {
            sc,
            planner,
            check_plans,
            now: SimTime::ZERO,
            step: None,
            world: World::default(),
            cloud: Cloud::new(s.catalog.clone(), &s.fail_offerings, s.launch_delay, s.launch_jitter),
            batcher: Batcher::new(BatchConfig { idle: s.batch_idle, max: s.batch_max }),
            refused: Unavailable::default(),
            disruption: Disruption::default(),
            consolidation: Consolidation::default(),
            consolidations: 0,
            cost_over_time: Vec::new(),
            claims: BTreeMap::new(),
            nominated: BTreeMap::new(),
            planned: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
            binder_generation: None,
            batches: 0,
            since: Since::default(),
            timeline: Vec::new(),
            checks: Vec::new(),
            invalid_plans: Vec::new(),
            settle_timeouts: Vec::new(),
            blocked_until: None,
        }
    }

    /// Now on the scenario's calendar (Unix seconds), if it has a `start`.
    fn calendar(&self) -> Option<i64> {
        self.sc.settings.start.map(|s| s + (self.now.0 / 1000) as i64)
    }

    /// The cloud's description of its live instances, as the controller's garbage collection lists
    /// them (the facts of security-group and subnet drift).
    fn listed(&self) -> Vec<stowage_decide::cloud::Instance> {
        cloud::ready(CloudProvider::list(&self.cloud)).and_then(Result::ok).unwrap_or_default()
    }

    /// The earliest time a budget that allows a pool with nodes no disruption (for some reason) now
    /// stops applying or changes (`stowage_decide::disruption::next_budget_change`); the simulator
    /// wakes then, since nothing else would make a round due. Needs the scenario's calendar.
    fn budget_wake(&self, cluster: &Cluster) -> Option<SimTime> {
        use stowage_decide::disruption::{REASON_EMPTY, allowed_disruptions, next_budget_change, reason_budgets};
        let cal = self.calendar()?;
        let reasons = [REASON_EMPTY, stowage_decide::drift::REASON, stowage_decide::consolidation::REASON];
        self.world
            .objects
            .nodepools
            .iter()
            .map(|o| &o.obj)
            .filter_map(|p| {
                let name = p.metadata.name.as_deref()?;
                let total = cluster.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(name) && !n.in_flight).count();
                let blocked = total > 0 && reasons.iter().any(|r| allowed_disruptions(&reason_budgets(Some(p), r, Some(cal)), total) == 0);
                blocked.then(|| next_budget_change(p, cal)).flatten()
            })
            .min()
            .map(|t| self.now.plus(Duration::from_secs(t.saturating_sub(cal).max(0) as u64)))
    }

    fn log(&mut self, kind: EventKind) {
        self.timeline.push(Event { at: self.now, kind });
    }

    fn error(&self, message: impl Into<String>) -> SimError {
        SimError { scenario: self.sc.name.clone(), at: self.now, step: self.step, message: message.into() }
    }

    fn build(&self) -> Result<Cluster, SimError> {
        self.world.build_spread(&self.sc.settings.weights.topology_spread_defaults).map_err(|e| self.error(format!("the cluster's objects are not a valid workload: {e}")))
    }

    /// Runs the scenario to its end.
    pub(super) fn run(mut self, solver: &str) -> Result<Report, SimError> {
        let sc = self.sc;
        let applied = self.world.apply(sc.manifests.clone());
        if !applied.is_empty() {
            self.log(EventKind::Step { step: 0, action: "apply the scenario's manifests".into(), note: None });
            for objects in applied {
                self.log(EventKind::Applied { objects });
            }
            self.adopt_nodes();
        }
        self.sample_cost();
        for step in &sc.steps {
            self.step = Some(step.number);
            let n = step.number;
            let note = step.note.clone();
            match &step.action {
                Action::Apply(objects) => {
                    self.log(EventKind::Step { step: n, action: "apply".into(), note });
                    for line in self.world.apply((**objects).clone()) {
                        self.log(EventKind::Applied { objects: line });
                    }
                    self.adopt_nodes();
                }
                Action::Delete(r) => {
                    let ns = r.namespace.clone().unwrap_or_else(|| "default".into());
                    self.log(EventKind::Step { step: n, action: format!("delete {} {}", r.kind, r.name), note });
                    self.delete(r, &ns)?;
                }
                Action::Scale(s) => {
                    let ns = s.namespace.clone().unwrap_or_else(|| "default".into());
                    self.log(EventKind::Step { step: n, action: format!("scale {} {ns}/{} to {}", s.kind, s.name, s.replicas), note });
                    if !controllers::scale(&mut self.world, &s.kind, &ns, &s.name, s.replicas) {
                        return Err(self.error(format!("no {} {ns}/{} to scale", s.kind, s.name)));
                    }
                }
                Action::Advance(d) => {
                    self.log(EventKind::Step { step: n, action: format!("advance {}", short(*d)), note });
                    let until = self.now.plus(*d);
                    self.run_until(until, false)?;
                }
                Action::Settle(max) => {
                    self.log(EventKind::Step { step: n, action: format!("settle (at most {})", short(*max)), note });
                    let until = self.now.plus(*max);
                    if !self.run_until(until, true)? {
                        self.settle_timeouts.push(n);
                        self.log(EventKind::SettleTimedOut { step: n, max: short(*max) });
                    }
                }
                Action::Interrupt(i) => {
                    self.log(EventKind::Step { step: n, action: format!("interrupt ({})", i.message.kind().label()), note });
                    self.interrupt(i)?;
                }
                Action::Expect(e) => {
                    self.log(EventKind::Step { step: n, action: "expect".into(), note });
                    self.reconcile()?;
                    let cluster = self.build()?;
                    let catalog = self.cloud.reservations_now(self.refused.view(&sc.settings.catalog, self.now));
                    let observed = Observed {
                        world: &self.world,
                        cluster: &cluster,
                        cloud: &self.cloud,
                        catalog: &catalog,
                        launches: self.since.launches,
                        launch_batches: self.since.launch_batches,
                        batches: self.since.batches,
                        consolidations: self.since.consolidations,
                        new_nodes: &self.since.new_nodes,
                    };
                    let checks = expect::evaluate(n, e, &observed);
                    let held = checks.iter().filter(|c| c.held).count();
                    let failed = checks.len() - held;
                    self.checks.extend(checks);
                    self.log(EventKind::Expectation { step: n, held, failed });
                    self.since = Since::default();
                }
            }
        }
        self.step = None;
        self.reconcile()?;
        let cluster = self.build()?;
        let cost_over_time = std::mem::take(&mut self.cost_over_time);
        let mut report = report::finish(
            sc,
            solver,
            self.now,
            &cluster,
            &self.cloud,
            self.unschedulable.values().cloned().collect(),
            self.timeline,
            self.checks,
            self.invalid_plans,
            self.settle_timeouts,
            self.batches,
        );
        report.cost_over_time = cost_over_time;
        Ok(report)
    }

    /// Records the cost per hour when it changed.
    fn sample_cost(&mut self) {
        // + 0.0: a sum of no prices is -0.0, which would print as "-0.0000".
        let c = self.cloud.cost_per_hour() + 0.0;
        if self.cost_over_time.last().is_none_or(|p| (p.cost_per_hour - c).abs() > 1e-9) {
            self.cost_over_time.push(CostPoint { at: self.now, cost_per_hour: c });
        }
    }

    /// Advances the clock event by event up to `until`. With `settle`, stops as soon as nothing is
    /// scheduled any more (expirations aside) and returns whether that happened before `until`.
    fn run_until(&mut self, until: SimTime, settle: bool) -> Result<bool, SimError> {
        for _ in 0..MAX_ROUNDS {
            self.reconcile()?;
            let activity = self.next_activity();
            if settle && activity.is_none() {
                return Ok(true);
            }
            let next = [activity, self.next_expiry()].into_iter().flatten().min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.fire()?;
                    self.sample_cost();
                }
                _ => {
                    self.now = until;
                    self.reconcile()?;
                    return Ok(!settle);
                }
            }
        }
        Err(self.error(format!("more than {MAX_ROUNDS} events without reaching the end of the step")))
    }

    fn next_activity(&self) -> Option<SimTime> {
        let timeouts = lifecycle::Timeouts::default();
        let claims = self.claims.iter().flat_map(|(name, c)| {
            // A timeout of the lifecycle decision is an event too (a Node later than the registration timeout).
            let until = lifecycle::decide(&c.observed(name, self.now), self.now, &timeouts).until;
            [(!c.running_logged).then_some(c.running_at), (!c.registered).then_some(c.registers_at), until]
        });
        [self.batcher.deadline(), self.disruption.next_due(), self.consolidation.next_due(), self.refused.next_expiry(), self.blocked_until].into_iter().flatten().chain(claims.flatten()).min()
    }

    fn next_expiry(&self) -> Option<SimTime> {
        self.claims.values().filter_map(|c| c.expires_at).min()
    }

    /// Handles everything due at `now`.
    fn fire(&mut self) -> Result<(), SimError> {
        let now = self.now;
        if self.blocked_until.is_some_and(|t| t <= now) {
            // A budget let go: what it held back is judged again (emptiness at the next observation,
            // which reads the budgets at the new time; consolidation in a round).
            self.blocked_until = None;
            self.consolidation.wake();
            self.world.touch();
        }
        for (node, reason) in self.disruption.due(now) {
            self.remove_node(&node, reason);
        }
        let expired: Vec<String> = self.claims.iter().filter(|(_, c)| c.expires_at.is_some_and(|t| t <= now)).map(|(n, _)| n.clone()).collect();
        for node in expired {
            self.remove_node(&node, "expireAfter reached".into());
        }
        let back = self.refused.expire(now);
        if !back.is_empty() {
            for (instance_type, zone, capacity_type) in back {
                self.log(EventKind::OfferingAvailable { instance_type, zone, capacity_type });
            }
            // The catalog changed: pods still waiting get another batch.
            let waiting: Vec<String> = self.unschedulable.keys().cloned().collect();
            for uid in waiting {
                if !self.is_nominated(&uid) {
                    self.batcher.trigger(&uid, now);
                }
            }
        }
        let names: Vec<String> = self.claims.keys().cloned().collect();
        for name in names {
            // A drain earlier in this loop (a consolidation's or drift's replacement registered) may
            // have removed this node already.
            let Some(c) = self.claims.get(&name).cloned() else { continue };
            if !c.running_logged && c.running_at <= now {
                if let Some(c) = self.claims.get_mut(&name) {
                    c.running_logged = true;
                }
                self.log(EventKind::InstanceRunning { node: name.clone(), instance: c.instance.clone() });
            }
            // The controller's own lifecycle decision (`stowage_decide::lifecycle`), on the simulated clock.
            match lifecycle::decide(&c.observed(&name, now), now, &lifecycle::Timeouts::default()).step {
                Step::Register { .. } => {
                    self.register(&name);
                    if let Some(done) = self.consolidation.registered(&name) {
                        self.drain(done);
                    }
                }
                Step::RegistrationTimeout { since_launch } => self.remove_node(&name, format!("no Node registered {}s after launch (registration timeout)", since_launch.as_secs())),
                // Launched synchronously, never deleted by anything but `remove_node`, registered and
                // initialized at once: the other steps do not arise in the simulation.
                _ => {}
            }
        }
        // kube-scheduler sees new nodes before a batch closing at the same instant does.
        self.reconcile()?;
        if self.batcher.deadline().is_some_and(|t| t <= now) {
            self.provision()?;
        }
        // Empty nodes due now go first (their removal changes what consolidation sees, as the
        // controller's round waits for a round without emptiness actions).
        if self.consolidation.is_due(now) && self.disruption.next_due().is_none_or(|t| t > now) {
            self.consolidate()?;
        }
        Ok(())
    }

    /// Brings the world to rest at `now`.
    fn reconcile(&mut self) -> Result<(), SimError> {
        let zones = self.sc.settings.catalog.zones.clone();
        for _ in 0..MAX_ROUNDS {
            let generation = self.world.generation();
            let cluster = self.build()?;
            for e in controllers::reconcile(&mut self.world, &cluster) {
                self.log(e);
            }
            for e in volumes::provision_immediate(&mut self.world, &zones) {
                self.log(e);
            }
            if self.world.generation() != generation {
                continue;
            }
            if self.binder_generation == Some(generation) {
                let mut nominated: BTreeSet<String> = self.nominated.values().cloned().collect();
                nominated.extend(self.consolidation.protected());
                let calendar = self.calendar();
                self.disruption.observe(&cluster, &self.world.objects, &nominated, self.sc.settings.consolidation, self.now, calendar);
                let instances = self.listed();
                let facts = DriftFacts { instances: &instances, calendar };
                self.consolidation.observe(&cluster, &self.world.objects, &facts, self.sc.settings.consolidation, self.now);
                self.blocked_until = self.budget_wake(&cluster);
                return Ok(());
            }
            self.binder_generation = Some(generation);
            let pass = binder::pass(&cluster);
            self.apply_pass(&cluster, pass);
        }
        Err(self.error(format!("the controllers and kube-scheduler did not come to rest in {MAX_ROUNDS} rounds")))
    }

    /// Whether the pod waits for a NodeClaim still in flight (a stale nomination is dropped).
    fn is_nominated(&mut self, uid: &str) -> bool {
        let live = self.nominated.get(uid).is_some_and(|n| self.claims.get(n).is_some_and(|c| !c.registered));
        if !live {
            self.nominated.remove(uid);
        }
        live
    }

    fn apply_pass(&mut self, cluster: &Cluster, pass: binder::Pass) {
        let calendar = self.calendar();
        for &(id, ni) in &pass.bound {
            let pod = cluster.pod(id);
            let node = &cluster.nodes[ni];
            let Some(ix) = self.world.pod_index(&pod.namespace, &pod.name) else { continue };
            let obj = &mut self.world.objects.pods[ix].obj;
            obj.spec.get_or_insert_with(Default::default).node_name = Some(node.name.clone());
            // The kubelet starts it at once: simulated pods are Running as soon as they are bound,
            // started now on the scenario's calendar if it has one (a Job's lost work is dated by it).
            let start_time = calendar.and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok()).map(Time);
            obj.status = Some(PodStatus { phase: Some("Running".into()), start_time, ..Default::default() });
            let obj = obj.clone();
            let planned = self.planned.remove(&pod.uid).filter(|p| p != &node.name);
            self.nominated.remove(&pod.uid);
            self.log(EventKind::Bound { pod: pod.key(), node: node.name.clone(), planned });
            for e in volumes::bind_for_pod(&mut self.world, &obj, &node.name, &node.labels) {
                self.log(e);
            }
        }
        if !pass.bound.is_empty() {
            self.world.touch();
        }
        let mut now_unschedulable = BTreeMap::new();
        for (id, message) in pass.unschedulable {
            let pod = cluster.pod(id);
            if self.unschedulable.get(&pod.uid).map(|(_, m)| m) != Some(&message) {
                self.log(EventKind::Unschedulable { pod: pod.key(), message: message.clone() });
            }
            now_unschedulable.insert(pod.uid.clone(), (pod.key(), message));
            // The PodScheduled=False update is what wakes Karpenter's batcher; a pod waiting for a
            // NodeClaim in flight is already provided for.
            if !self.is_nominated(&pod.uid) {
                self.batcher.trigger(&pod.uid, self.now);
            }
        }
        for id in pass.deferred {
            let uid = &cluster.pod(id).uid;
            if let Some(v) = self.unschedulable.get(uid) {
                now_unschedulable.insert(uid.clone(), v.clone());
            }
        }
        self.unschedulable = now_unschedulable;
    }

    /// A consolidation round (the controller's decision, `stowage_decide::consolidation`): launch the
    /// replacements now, remove the nodes once they are Ready (module doc of `consolidation`).
    fn consolidate(&mut self) -> Result<(), SimError> {
        let cluster = self.build()?;
        let catalog = self.cloud.reservations_now(self.refused.view(&self.sc.settings.catalog, self.now));
        // Drift first, as in the controller (and Karpenter); it runs whatever the consolidation switch.
        // Pass after pass (as Karpenter's loop): the empty drifted nodes go together, up to their
        // pools' budgets; a non-empty one is replaced through consolidation's path.
        let (instances, calendar) = (self.listed(), self.calendar());
        let mut removed = BTreeSet::new();
        loop {
            let facts = DriftFacts { instances: &instances, calendar };
            let Some(d) = self.consolidation.drifted(&cluster, &self.world.objects, &facts, &removed) else { break };
            if !d.empty {
                if removed.is_empty() {
                    return self.replace_drifted(&cluster, &catalog, d);
                }
                break;
            }
            removed.insert(d.claim.clone());
            self.replace_drifted(&cluster, &catalog, d)?;
        }
        if !removed.is_empty() {
            return Ok(());
        }
        if !self.sc.settings.consolidation {
            return Ok(());
        }
        let settings = stowage_decide::consolidation::Settings::default();
        let batch = format!("sim-consolidation-{}", self.consolidations + 1);
        let base = stowage_decide::provision::Input {
            cluster: &cluster,
            objects: &self.world.objects,
            catalog: &catalog,
            weights: &self.sc.settings.weights,
            max_instance_types: provisioner::MAX_INSTANCE_TYPES,
            batch: &batch,
        };
        let input = stowage_decide::consolidation::Input { base, settings: &settings };
        let calendar = self.calendar();
        let outcome = self.consolidation.shared().decide_at(&input, &mut *self.planner, self.now, calendar);
        let d = match outcome {
            Ok(stowage_decide::consolidation::Outcome::Consolidate(d)) => d,
            Ok(_) => return Ok(()),
            Err(e) => {
                self.log(EventKind::ConsolidationAbandoned { remove: Vec::new(), reason: e.to_string() });
                return Ok(());
            }
        };
        self.consolidations += 1;
        let check = self.check_plans.then(|| {
            let r = check::check(&d.planned_on, &catalog, &d.replacements.plan);
            PlanVerdict { valid: r.valid(), violations: r.violations.iter().map(|v| v.to_string()).collect() }
        });
        let valid = check.as_ref().is_none_or(|c| c.valid);
        let remove: Vec<String> = d.remove.iter().map(|r| r.node.clone()).collect();
        self.log(EventKind::Consolidation {
            remove: remove.clone(),
            replacements: d.replacements.claims.len(),
            pods: d.remove.iter().map(|r| r.pods.len()).sum(),
            saving_per_hour: d.saving,
            disruption_cost: d.disruption_cost,
            cost_before: d.cost_before,
            cost_after: d.cost_after,
            lower_bound: d.lower_bound,
            evaluations: d.evaluations,
            check,
        });
        if !valid {
            // Reported with the batches' invalid plans as 0: a consolidation round, not a batch.
            self.invalid_plans.push(0);
            self.log(EventKind::ConsolidationAbandoned { remove, reason: "the checker rejected the displaced pods' placement".into() });
            return Ok(());
        }
        let launched = self.launch(&d.planned_on, &catalog, &d.replacements)?;
        if launched.values().any(Option::is_none) {
            self.log(EventKind::ConsolidationAbandoned { remove, reason: "a replacement could not be launched".into() });
            return Ok(());
        }
        self.consolidation.start(&d, launched.into_values().flatten().collect(), "consolidation: underutilized", self.now);
        if d.replacements.claims.is_empty()
            && let Some(done) = self.consolidation.in_progress.take()
        {
            self.drain(done);
        }
        Ok(())
    }

    /// A drifted node (the controller's decision, `stowage_decide::drift::candidate`): deleted at once
    /// when empty, else replaced through consolidation's path (`stowage_decide::consolidation::replace`:
    /// its pods planned elsewhere, the replacements launched, the node removed once they are Ready).
    fn replace_drifted(&mut self, cluster: &Cluster, catalog: &Catalog, d: stowage_decide::drift::Drifted) -> Result<(), SimError> {
        let cause = format!("drifted: {}", d.cause);
        if d.empty {
            self.log(EventKind::Drift { node: d.node.clone(), cause: d.cause.to_string(), replacements: 0, pods: 0, check: None });
            self.since.consolidations += 1;
            self.remove_node(&d.node, cause);
            return Ok(());
        }
        let settings = stowage_decide::consolidation::Settings::default();
        let batch = format!("sim-drift-{}", self.consolidations + 1);
        let base =
            stowage_decide::provision::Input { cluster, objects: &self.world.objects, catalog, weights: &self.sc.settings.weights, max_instance_types: provisioner::MAX_INSTANCE_TYPES, batch: &batch };
        let input = stowage_decide::consolidation::Input { base, settings: &settings };
        let decision = match stowage_decide::consolidation::replace(&input, &mut *self.planner, &d.node) {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.consolidation.drift_failed(&d.claim, self.now);
                self.log(EventKind::ConsolidationAbandoned { remove: vec![d.node], reason: format!("{cause}, but its pods have no other place now") });
                return Ok(());
            }
            Err(e) => {
                self.consolidation.drift_failed(&d.claim, self.now);
                self.log(EventKind::ConsolidationAbandoned { remove: vec![d.node], reason: e.to_string() });
                return Ok(());
            }
        };
        self.consolidations += 1;
        let check = self.check_plans.then(|| {
            let r = check::check(&decision.planned_on, catalog, &decision.replacements.plan);
            PlanVerdict { valid: r.valid(), violations: r.violations.iter().map(|v| v.to_string()).collect() }
        });
        let valid = check.as_ref().is_none_or(|c| c.valid);
        let pods = decision.remove.iter().map(|r| r.pods.len()).sum();
        self.log(EventKind::Drift { node: d.node.clone(), cause: d.cause.to_string(), replacements: decision.replacements.claims.len(), pods, check });
        if !valid {
            self.invalid_plans.push(0);
            self.consolidation.drift_failed(&d.claim, self.now);
            self.log(EventKind::ConsolidationAbandoned { remove: vec![d.node], reason: "the checker rejected the displaced pods' placement".into() });
            return Ok(());
        }
        let launched = self.launch(&decision.planned_on, catalog, &decision.replacements)?;
        if launched.values().any(Option::is_none) {
            self.consolidation.drift_failed(&d.claim, self.now);
            self.log(EventKind::ConsolidationAbandoned { remove: vec![d.node], reason: "a replacement could not be launched".into() });
            return Ok(());
        }
        self.consolidation.start(&decision, launched.into_values().flatten().collect(), &cause, self.now);
        if decision.replacements.claims.is_empty()
            && let Some(done) = self.consolidation.in_progress.take()
        {
            self.drain(done);
        }
        Ok(())
    }

    /// Every replacement of a consolidation is Ready: its nodes go (their pods are recreated by their
    /// controllers and placed by kube-scheduler).
    fn drain(&mut self, done: InProgress) {
        self.since.consolidations += 1;
        for node in &done.remove {
            self.remove_node(node, done.reason.clone());
        }
    }

    /// A batch window closed: the provisioning decision (the controller's) over every pending pod,
    /// then a launch per NodeClaim it creates.
    fn provision(&mut self) -> Result<(), SimError> {
        let now = self.now;
        // provision() runs when the window is due (tick), so this closes it.
        self.batcher.close_if_due(now);
        let cluster = self.build()?;
        let pending = cluster.pending();
        if pending.is_empty() {
            return Ok(());
        }
        self.batches += 1;
        self.since.batches += 1;
        let batch = self.batches;
        let catalog = self.cloud.reservations_now(self.refused.view(&self.sc.settings.catalog, now));
        let decision = match provisioner::decide(&self.world, &cluster, &catalog, &self.sc.settings.weights, &mut *self.planner, batch) {
            Ok(d) => d,
            Err(ProvisionError::Plan(e)) => {
                self.log(EventKind::BatchFailed { batch, pods: pending.len(), message: e.to_string() });
                return Ok(());
            }
            Err(e @ ProvisionError::InvalidPlan(_)) => return Err(self.error(e.to_string())),
        };
        let planned = if decision.pins.is_empty() { cluster } else { provision::with_pins(&cluster, &decision.pins) };
        self.log_batch(batch, pending.len() - decision.pins.len(), &planned, &catalog, &decision.plan);
        let launched = self.launch(&planned, &catalog, &decision)?;
        self.nominate(&planned, &decision.plan, &launched);
        Ok(())
    }

    /// Logs what a batch planned (with the checker's verdict when plans are checked).
    fn log_batch(&mut self, batch: u32, pods: usize, cluster: &Cluster, catalog: &Catalog, plan: &Plan) {
        let check = self.check_plans.then(|| {
            let r = check::check(cluster, catalog, plan);
            PlanVerdict { valid: r.valid(), violations: r.violations.iter().map(|v| v.to_string()).collect() }
        });
        if check.as_ref().is_some_and(|c| !c.valid) {
            self.invalid_plans.push(batch);
        }
        let new_names: BTreeSet<&str> = plan.new_nodes.iter().map(|n| n.name.as_str()).collect();
        let registered: BTreeSet<&str> = cluster.nodes.iter().filter(|n| !n.in_flight).map(|n| n.name.as_str()).collect();
        let on_existing = plan.placements.iter().filter(|p| !new_names.contains(p.node.as_str())).count();
        let disputed: Vec<String> = plan.placements.iter().filter(|p| registered.contains(p.node.as_str())).map(|p| format!("{} on {}", p.pod, p.node)).collect();
        self.log(EventKind::Batch {
            batch,
            pods,
            solver: plan.solver.name.clone(),
            status: serde_json::to_value(plan.solver.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            new_nodes: plan.new_nodes.len(),
            cost_per_hour: plan.cost_per_hour,
            on_existing,
            unschedulable: plan
                .unschedulable
                .iter()
                .map(|u| format!("{} ({})", u.pod, u.reason))
                .chain(plan.deferred.iter().map(|p| format!("{p} (deferred to the next batch: the time budget ran out)")))
                .collect(),
            check,
            disputed,
        });
    }

    /// Launches each NodeClaim of a decision through the cloud seam, as the controller's launcher
    /// does: the request's offerings are the plan's choice, then its fallbacks. Refused offerings are
    /// marked unavailable. Returns plan node name → the NodeClaim launched for it (`None`: refused).
    fn launch(&mut self, cluster: &Cluster, catalog: &Catalog, decision: &Decision) -> Result<BTreeMap<String, Option<String>>, SimError> {
        let mut launched: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut any = false;
        for c in &decision.claims {
            let name = self.claim_name(&c.nodepool);
            let claim = c.named(&name);
            let class = self.world.objects.nodeclasses.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(claim.spec.node_class_ref.name.as_str())).cloned();
            let view = nodeclass_view(cluster, catalog, &c.nodepool);
            let req = launch::launch_request(&claim, &view, class.as_ref()).map_err(|e| self.error(format!("the decision's NodeClaim cannot be launched: {e}")))?;
            self.cloud.set_now(self.now);
            let result = cloud::ready(CloudProvider::launch(&self.cloud, &req)).ok_or_else(|| self.error("the simulated cloud's launch is not ready at once"))?;
            for o in self.cloud.take_refused() {
                let until = self.now.plus(self.sc.settings.unavailable_offering_ttl);
                self.refused.mark((o.instance_type.clone(), o.zone.clone(), o.capacity_type.clone()), until);
                self.log(EventKind::LaunchFailed {
                    node: name.clone(),
                    instance_type: o.instance_type,
                    zone: o.zone,
                    capacity_type: o.capacity_type,
                    reason: INSUFFICIENT_CAPACITY.to_string(),
                    unavailable_until: until,
                });
            }
            match result {
                Ok(inst) => {
                    self.claim_launched(cluster, &view, decision, c, claim, &req, &inst)?;
                    launched.insert(c.plan_node.clone(), Some(name));
                    any = true;
                }
                Err(_) => {
                    launched.insert(c.plan_node.clone(), None);
                }
            }
        }
        if any {
            self.since.launch_batches += 1;
        }
        Ok(launched)
    }

    /// The cloud started an instance for a NodeClaim of the decision: the NodeClaim enters the world
    /// with the instance's labels and capacity (as the controller's launcher writes them), in flight
    /// until the instance registers.
    // Everything the launch produced (NodeClaim, request, instance) and where it came from (cluster,
    // catalog view, decision, claim) is needed to log it and to put the NodeClaim in the world.
    #[allow(clippy::too_many_arguments)]
    fn claim_launched(
        &mut self,
        cluster: &Cluster,
        view: &Catalog,
        decision: &Decision,
        c: &PlannedClaim,
        mut claim: NodeClaim,
        req: &LaunchRequest,
        inst: &stowage_decide::cloud::Instance,
    ) -> Result<(), SimError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let Some(it) = view.get(&inst.instance_type) else {
            return Err(self.error(format!("the plan launches {}, which the catalog does not have", inst.instance_type)));
        };
        let n = decision.plan.new_nodes.iter().find(|n| n.name == c.plan_node);
        let custom: BTreeMap<String, String> = n.map(|n| n.labels.iter().filter(|(k, _)| report::is_custom_label(k)).map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
        let price = launch::launched_offering(&req.offerings, inst).map(|o| o.price).unwrap_or(c.price);
        self.log(EventKind::Launch {
            node: name.clone(),
            node_pool: c.nodepool.clone(),
            instance_type: inst.instance_type.clone(),
            zone: inst.zone.clone(),
            capacity_type: inst.capacity_type.clone(),
            price_per_hour: price,
            labels: custom,
            pods: n.map(|n| n.pods.clone()).unwrap_or_else(|| c.pods.iter().map(|p| p.key()).collect()),
        });
        let labels = claim.metadata.labels.get_or_insert_with(Default::default);
        labels.extend(launch::instance_labels(inst, view));
        labels.insert(keys::HOSTNAME.into(), name.clone());
        // As the controller records a launch: the provider id with the sizes (`record_launch`).
        claim.status = Some(NodeClaimStatus {
            provider_id: Some(inst.provider_id.clone()),
            capacity: Some(provision::quantities(&it.capacity)),
            allocatable: Some(provision::quantities(&it.allocatable())),
            ..Default::default()
        });
        self.world.objects.nodeclaims.push(Obj { source: sim_source("provisioner"), obj: claim });
        let pool = cluster.nodepool(&c.nodepool).and_then(|p| p.expire_after);
        // The instance runs in a subnet of its zone and with the security groups its EC2NodeClass
        // resolves now (the EC2 provider launches into those), when the NodeClass's status names them.
        let status = self.world.objects.nodeclasses.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(req.nodeclass.as_str())).and_then(|o| o.status.clone());
        let subnet = status.as_ref().and_then(|s| s.subnets.as_ref()).and_then(|s| s.iter().find(|x| x.zone == inst.zone)).map(|x| x.id.clone());
        let groups = status.as_ref().and_then(|s| s.security_groups.as_ref()).filter(|g| !g.is_empty()).map(|g| g.iter().map(|x| x.id.clone()).collect());
        self.cloud.set_network(&name, subnet, groups);
        let Some(sim_inst) = self.cloud.instance(&name) else { return Err(self.error(format!("the cloud lost the instance of {name}"))) };
        let registers_at = sim_inst.running_at.plus(self.sc.settings.registration_delay);
        let expires_at = pool.map(|s| self.now.plus(Duration::from_secs(s)));
        self.claims.insert(
            name.clone(),
            Claim { zone: inst.zone.clone(), instance: inst.id.clone(), launched_at: self.now, running_at: sim_inst.running_at, registers_at, expires_at, running_logged: false, registered: false },
        );
        self.since.launches += 1;
        self.since.new_nodes.insert(name);
        Ok(())
    }

    /// Nominations: pods meant for a NodeClaim in flight wait for it; pods whose node was refused go
    /// into the next batch at once; pods the plan left unschedulable are meant for nothing.
    fn nominate(&mut self, cluster: &Cluster, plan: &Plan, launched: &BTreeMap<String, Option<String>>) {
        let by_key = cluster.pods_by_key();
        for pl in &plan.placements {
            let Some(uid) = by_key.get(&pl.pod).map(|&id| cluster.pod(id).uid.clone()) else { continue };
            let target = match launched.get(&pl.node) {
                Some(t) => t.clone(),
                None => Some(pl.node.clone()),
            };
            match target {
                Some(t) => {
                    if self.claims.get(&t).is_some_and(|c| !c.registered) {
                        self.nominated.insert(uid.clone(), t.clone());
                    } else {
                        self.nominated.remove(&uid);
                    }
                    self.planned.insert(uid, t);
                }
                None => {
                    self.planned.remove(&uid);
                    self.nominated.remove(&uid);
                    self.batcher.trigger(&uid, self.now);
                }
            }
        }
        for u in &plan.unschedulable {
            if let Some(&id) = by_key.get(&u.pod) {
                let uid = &cluster.pod(id).uid;
                self.planned.remove(uid);
                self.nominated.remove(uid);
            }
        }
        // Pods the budget deferred are the next batch's, as in the controller.
        for pod in &plan.deferred {
            if let Some(&id) = by_key.get(pod) {
                let uid = cluster.pod(id).uid.clone();
                self.planned.remove(&uid);
                self.nominated.remove(&uid);
                self.batcher.trigger(&uid, self.now);
            }
        }
    }

    /// `<pool>-<5 chars>`, as Karpenter names NodeClaims; the Node gets the same name.
    fn claim_name(&mut self, pool: &str) -> String {
        loop {
            let serial = self.world.next_serial().to_string();
            let name = format!("{pool}-{}", suffix(stable_hash(&[&self.sc.name, pool, &serial]), 5));
            if !self.claims.contains_key(&name) && !self.world.node_exists(&name) {
                return name;
            }
        }
    }

    /// The instance of a NodeClaim registered: its Node appears.
    fn register(&mut self, name: &str) {
        let Some(c) = self.claims.get_mut(name) else { return };
        c.registered = true;
        let provider = format!("aws:///{}/{}", c.zone, c.instance);
        let Some(claim) = self.world.objects.nodeclaims.iter_mut().find(|x| x.obj.metadata.name.as_deref() == Some(name)) else { return };
        let status = claim.obj.status.get_or_insert_with(Default::default);
        status.node_name = Some(name.to_string());
        status.provider_id = Some(provider.clone());
        let node = provisioner::registered_node(&claim.obj, &provider);
        // The node's CSI drivers register too: its CSINode reports its type's attach limits.
        let limits = node.metadata.labels.as_ref().and_then(|l| l.get(keys::INSTANCE_TYPE)).and_then(|t| self.sc.settings.catalog.get(t)).map(|t| t.attach_limits.clone()).unwrap_or_default();
        if let Some(csinode) = provisioner::csinode(name, &limits) {
            self.world.objects.csinodes.push(Obj { source: sim_source("kubelet"), obj: csinode });
        }
        self.world.objects.nodes.push(Obj { source: sim_source("kubelet"), obj: node });
        self.world.touch();
        // From here on kube-scheduler decides where the pods meant for this node go.
        self.nominated.retain(|_, n| n != name);
        self.log(EventKind::Registered { node: name.to_string() });
    }

    /// Removes a node, its NodeClaim and its instance. Its pods go with it (pod GC runs next).
    fn remove_node(&mut self, node: &str, reason: String) {
        if self.consolidation.in_progress.as_ref().is_some_and(|p| p.waiting.contains(node))
            && let Some(p) = self.consolidation.in_progress.take()
        {
            self.log(EventKind::ConsolidationAbandoned { remove: p.remove, reason: format!("replacement {node} removed before it was Ready") });
        }
        self.world.objects.nodes.retain(|n| n.obj.metadata.name.as_deref() != Some(node));
        self.world.objects.csinodes.retain(|n| n.obj.metadata.name.as_deref() != Some(node));
        self.world.objects.nodeclaims.retain(|c| c.obj.metadata.name.as_deref() != Some(node) && c.obj.status.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node));
        self.cloud.terminate_node(node, self.now);
        self.claims.remove(node);
        self.disruption.forget(node);
        self.nominated.retain(|_, n| n != node);
        self.world.touch();
        self.log(EventKind::NodeRemoved { node: node.to_string(), reason });
    }

    /// An `interrupt` step: the message EventBridge would send about the first matching registered node
    /// goes through the controller's parser and decision (`stowage_decide::interruption`) over the
    /// world's NodeClaims; a spot interruption marks the offering unavailable, and a NodeClaim the
    /// decision deletes goes with its node (the drain; its pods are planned again at once).
    fn interrupt(&mut self, i: &crate::scenario::Interrupt) -> Result<(), SimError> {
        let label = |n: &Node, k: &str| n.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
        let matches = |want: &Option<String>, got: Option<String>| want.as_ref().is_none_or(|w| got.as_ref() == Some(w));
        let mut nodes: Vec<&Node> = self.world.objects.nodes.iter().map(|o| &o.obj).collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let node = nodes
            .into_iter()
            .find(|n| {
                matches(&i.node, n.metadata.name.clone())
                    && matches(&i.node_pool, label(n, keys::NODEPOOL))
                    && matches(&i.zone, label(n, keys::ZONE))
                    && matches(&i.capacity_type, label(n, keys::CAPACITY_TYPE))
                    && matches(&i.instance_type, label(n, keys::INSTANCE_TYPE))
            })
            .and_then(|n| n.metadata.name.clone())
            .ok_or_else(|| self.error(format!("no registered node matches the interrupt step ({i:?})")))?;
        let claims: Vec<&NodeClaim> = self.world.objects.nodeclaims.iter().map(|o| &o.obj).collect();
        let targets = interruption::targets(claims.iter().copied());
        let Some((instance, _)) = targets.iter().find(|(_, t)| t.node.as_deref() == Some(node.as_str())) else {
            return Err(self.error(format!("node {node} has no NodeClaim with an instance: only nodes stowage launched can be interrupted")));
        };
        let instance = instance.clone();
        let kind = i.message.kind();
        let time = k8s_openapi::jiff::Timestamp::from_millisecond(self.now.0.min(i64::MAX as u64) as i64).map(|t| t.to_string()).unwrap_or_default();
        let body = interruption::event_body(kind, &instance, "us-east-1", &time);
        let msg = interruption::parse(&body).map_err(|e| self.error(format!("the interruption message the step sends does not parse: {e}")))?;
        for a in interruption::decide(&msg, &targets) {
            let until = a.unavailable.as_ref().map(|_| self.now.plus(self.sc.settings.unavailable_offering_ttl));
            if let (Some(key), Some(t)) = (a.unavailable.clone(), until) {
                self.refused.mark(key, t);
            }
            let node = a.target.node.clone().unwrap_or_else(|| a.target.nodeclaim.clone());
            self.log(EventKind::Interruption {
                node: node.clone(),
                instance: a.instance_id.clone(),
                message: kind.label().to_string(),
                reason: kind.event().map(|(r, _)| r).unwrap_or_default().to_string(),
                deleted: a.delete,
                unavailable: a.unavailable.as_ref().map(|(t, z, c)| format!("{t} {c} {z}")),
                unavailable_until: until,
            });
            if a.delete {
                self.remove_node(&node, format!("{}: {}", interruption::TERMINATING_ON_INTERRUPTION.0, kind.label()));
            }
        }
        Ok(())
    }

    /// Nodes that came with the manifests are billed from now on, at their catalog price.
    fn adopt_nodes(&mut self) {
        let catalog = &self.sc.settings.catalog;
        for n in &self.world.objects.nodes {
            let name = n.obj.metadata.name.clone().unwrap_or_default();
            let labels = n.obj.metadata.labels.clone().unwrap_or_default();
            let (Some(it), Some(zone)) = (labels.get(keys::INSTANCE_TYPE), labels.get(keys::ZONE)) else { continue };
            let ct = labels.get(keys::CAPACITY_TYPE).map(String::as_str).unwrap_or("on-demand");
            let Some(price) = catalog.get(it).and_then(|t| t.offerings.iter().find(|o| &o.zone == zone && o.capacity_type == ct)).map(|o| o.price) else { continue };
            self.cloud.adopt(&name, it, zone, ct, price, self.now);
        }
    }

    fn delete(&mut self, r: &ObjectRef, ns: &str) -> Result<(), SimError> {
        let mut ev = Vec::new();
        let id = (ns.to_string(), r.name.clone());
        let cluster_id = (String::new(), r.name.clone());
        let found = match r.kind.as_str() {
            "Pod" => {
                let gone = self.world.remove_pods(|p| ident(p) == id);
                ev.extend(gone.iter().map(|pod| EventKind::PodDeleted { pod: pod.clone(), reason: "deleted by the scenario".into() }));
                !gone.is_empty()
            }
            "Node" => {
                let exists = self.world.node_exists(&r.name);
                if exists {
                    self.remove_node(&r.name, "deleted by the scenario".into());
                }
                exists
            }
            "NodePool" => {
                let before = self.world.objects.nodepools.len();
                self.world.objects.nodepools.retain(|p| ident(&p.obj) != cluster_id);
                let found = self.world.objects.nodepools.len() != before;
                if found {
                    // Karpenter deletes a NodePool's NodeClaims with it.
                    let mut nodes: Vec<String> = self
                        .world
                        .objects
                        .nodes
                        .iter()
                        .filter(|n| n.obj.metadata.labels.as_ref().and_then(|l| l.get(keys::NODEPOOL)) == Some(&r.name))
                        .filter_map(|n| n.obj.metadata.name.clone())
                        .collect();
                    nodes.extend(
                        self.world
                            .objects
                            .nodeclaims
                            .iter()
                            .filter(|c| c.obj.metadata.labels.as_ref().and_then(|l| l.get(keys::NODEPOOL)) == Some(&r.name))
                            .filter_map(|c| c.obj.metadata.name.clone()),
                    );
                    nodes.sort();
                    nodes.dedup();
                    for n in nodes {
                        self.remove_node(&n, format!("NodePool {} deleted", r.name));
                    }
                }
                found
            }
            "PersistentVolumeClaim" => remove_named(&mut self.world.objects.pvcs, &id),
            "PersistentVolume" => remove_named(&mut self.world.objects.pvs, &cluster_id),
            "StorageClass" => remove_named(&mut self.world.objects.storageclasses, &cluster_id),
            kind => controllers::delete_workload(&mut self.world, kind, ns, &r.name, &mut ev),
        };
        for e in ev {
            self.log(e);
        }
        self.world.touch();
        if found { Ok(()) } else { Err(self.error(format!("no {} {} to delete", r.kind, r.name))) }
    }
}

/// The catalog as a NodePool's node class sees it (what its nodes' capacity is).
fn nodeclass_view(cluster: &Cluster, catalog: &Catalog, pool: &str) -> Catalog {
    match cluster.nodepool(pool).and_then(|p| cluster.nodeclass(&p.node_class)) {
        Some(nc) => stowage_core::catalog::for_nodeclass(catalog, nc),
        None => catalog.clone(),
    }
}
