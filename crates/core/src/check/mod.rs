//! The independent checker: verifies a plan as kube-scheduler would carry it out.
//!
//! It reads only the workload, the catalog and the plan file, and shares nothing with the planners but
//! the semantic primitives (`semantics`). It checks
//!
//! 1. the plan's bookkeeping: every pending pod exactly once (placed, unschedulable or deferred: a pod
//!    the budget cut off, judged as outside the batch), known nodes,
//!    per-node pod lists agreeing with the placements, and the workload built under the cluster-default
//!    topology spread the plan records (`topologySpreadDefaults`, `semantics::spread_defaults`: the pods'
//!    defaulted constraints come from it, so a plan made under another was made for other pods);
//! 2. every new node against its NodePool and instance type: the type and offering exist and are
//!    available, the price is the catalog's, the labels are what the NodePool, type and offering give
//!    (open keys satisfy the NodePool's requirements), the taints are the NodePool's, and the NodePool
//!    limits hold;
//! 3. that some order exists in which every placed pod passes every kube-scheduler Filter against the
//!    state so far (bound pods, DaemonSet pods on the new nodes, pods placed earlier), and on the new
//!    nodes stowage's hostname-spread rule the plan was made under (`hostnameSpread`,
//!    `semantics::spread`). The plan's own order is tried first, then passes over the rejected pods,
//!    then a static witness that no order exists, then an exhaustive search over bind orders under a
//!    budget ([`order`]): the answer is valid, invalid (with the witness), or undecided
//!    ([`Report::order`]). The same search judges every plan, whoever made it. Under
//!    `minValuesPolicy: Strict` (the plan's), a pod is also rejected from a new node whose launch
//!    candidates it would leave short of its NodePool's minValues (`semantics::min_values`);
//! 4. every new node's launch: the candidates it records are the instance types it may launch as for
//!    its pods (cheapest first), its NodePool's minValues hold (Strict), or the relaxations it records
//!    are exactly the ones the candidates need (BestEffort).
//!
//! It also reports the preferences the plan leaves unmet ([`Preferences`]), in the units the weights
//! price, and the pods the plan leaves pending that kube-scheduler's queue would have bound
//! ([`Report::queue_order`], `semantics::queue`); neither makes a plan invalid: kube-scheduler can
//! carry the plan out, it would only leave other pods pending.
//!
//! Beside the verdict, [`scheduler_leaves`] runs kube-scheduler's own order and score ([`scheduler`], the
//! simulator's binder) over a plan's nodes all up at once: the pods it leaves without a node although
//! the plan placed them. Consolidation asks it of every set before acting (its replacements are Ready
//! before any pod moves, so that is the state kube-scheduler sees).

pub mod order;
pub mod scheduler;

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog;
use crate::domain::Cluster;
use crate::domain::catalog::{Catalog, InstanceType, Offering};
use crate::domain::labels::{Labels, keys};
use crate::domain::nodepool::NodePool;
use crate::domain::pod::PodId;
use crate::domain::resources::Resources;
use crate::domain::taints::{Effect, Taint};
use crate::plan::{NewNode, Plan};
use crate::semantics::filter::{FilterState, SimNode};
use crate::semantics::min_values::{self, LaunchTypes, Load, MinValuesPolicy, NodeLaunch};
use crate::semantics::preferences::{self as prefs, PreferencePolicy};
use crate::semantics::{daemonsets, interpod, limits, node_affinity, nodepool, queue, reservations, spread, taints};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub pod: Option<String>,
    pub node: Option<String>,
    /// The kube-scheduler plugin, or `Plan` / `NodePool` / `InstanceType` for stowage-level checks.
    pub constraint: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.constraint)?;
        if let Some(p) = &self.pod {
            write!(f, " pod {p}")?;
        }
        if let Some(n) = &self.node {
            write!(f, " on node {n}")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub violations: Vec<Violation>,
    /// Observations that do not invalidate the plan.
    pub notes: Vec<String>,
    /// The plan's own bind order replayed without a failure.
    pub stated_order_ok: bool,
    /// Whether some bind order places every placed pod: valid, invalid (no order exists; the
    /// violations are the witness) or undecided (the search's budget ran out; the violations are the
    /// pods left where it got deepest).
    pub order: order::Outcome,
    /// Filter checks the bind-order search spent (0 when the plan's order or the passes sufficed).
    pub order_search_checks: usize,
    /// Violations that are pods the bind-order step left (the last ones in `violations`).
    pub order_left: usize,
    pub pods_checked: usize,
    pub preferences: Preferences,
    /// Pods the plan leaves pending that kube-scheduler would bind: at the pod's turn in the queue
    /// (priority, then queue position), with only the pods before it placed, some node of the plan
    /// takes it (`semantics::queue`). Constraint `QueueOrder`; the node is the first that takes it.
    /// Not a violation: the plan replays, but its pending set is not kube-scheduler's.
    pub queue_order: Vec<Violation>,
}

/// Preferences a plan leaves unmet, in the units the weights' `soft` section prices (the checker reads
/// no weights): what the soft terms of a planner's objective count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preferences {
    /// Preferred node-affinity weight not satisfied, summed over placed pods (`soft.preferredNodeAffinity`).
    pub preferred_node_affinity: i64,
    /// PreferNoSchedule taints placed pods do not tolerate, per pod and taint (`soft.preferNoSchedule`).
    pub prefer_no_schedule: i64,
    /// Under `hostnameSpread: intent`: pods of ScheduleAnyway hostname spreads beyond maxSkew on new
    /// nodes (`soft.scheduleAnywaySpread`, `semantics::spread::intent_soft_units`).
    pub schedule_anyway_hostname_spread: i64,
    /// Preferred pod-affinity weight not satisfied in the plan's final state, summed over placed pods
    /// (`soft.preferredPodAffinity`, `semantics::interpod::preferred_shortfall`).
    pub preferred_pod_affinity: i64,
    /// Preferred pod-anti-affinity weight not satisfied, likewise (`soft.preferredPodAntiAffinity`).
    pub preferred_pod_anti_affinity: i64,
}

impl Report {
    pub fn valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// The plan's verdict: valid (no violation), undecided (the only violations are the pods a bind-order
    /// search left when its budget ran out) or invalid.
    pub fn verdict(&self) -> order::Outcome {
        if self.violations.is_empty() {
            order::Outcome::Valid
        } else if self.order == order::Outcome::Undecided && self.violations.len() == self.order_left {
            order::Outcome::Undecided
        } else {
            order::Outcome::Invalid
        }
    }
}

fn v(pod: Option<&str>, node: Option<&str>, constraint: &str, message: impl Into<String>) -> Violation {
    Violation { pod: pod.map(str::to_string), node: node.map(str::to_string), constraint: constraint.into(), message: message.into() }
}

fn taint_key(t: &Taint) -> (String, String, &'static str) {
    (t.key.clone(), t.value.clone(), t.effect.as_str())
}

/// Checks `plan` against the workload and the catalog: bookkeeping, then every new node, then the replay
/// (the module comment lists what each step checks). Violations come in that order.
pub fn check(cluster: &Cluster, catalog: &Catalog, plan: &Plan) -> Report {
    let budget = order::SEARCH_BUDGET_BASE + order::SEARCH_BUDGET_PER_POD * plan.placements.len();
    check_with_budget(cluster, catalog, plan, budget)
}

/// [`check`] with the bind-order search capped at `order_budget` filter checks.
pub fn check_with_budget(cluster: &Cluster, catalog: &Catalog, plan: &Plan, order_budget: usize) -> Report {
    let mut r = Report::default();
    // Under Respect, placed pods are judged with the preferences they kept as requirements; the
    // preferences report still counts what the user's own pods asked for.
    let original = cluster;
    let hardened;
    let cluster = if plan.preference_policy == PreferencePolicy::Respect {
        hardened = respected(cluster, plan, &mut r.violations);
        &hardened
    } else {
        cluster
    };
    // The pods' defaulted spread constraints come from the setting the workload was built under; a plan
    // made under another was made for other pods (`semantics::spread_defaults`).
    if plan.topology_spread_defaults != cluster.spread_defaults {
        let msg = format!(
            "the plan was made under topologySpreadDefaults {}, the workload was built under {}: build the workload with the plan's setting",
            serde_json::to_string(&plan.topology_spread_defaults).unwrap_or_default(),
            serde_json::to_string(&cluster.spread_defaults).unwrap_or_default()
        );
        r.violations.push(v(None, None, "Plan", msg));
    }
    let pending: BTreeSet<String> = cluster.pending().into_iter().map(|id| cluster.pod(id).key()).collect();
    let pod_by_key: BTreeMap<String, usize> = cluster.pods.iter().enumerate().map(|(i, p)| (p.key(), i)).collect();
    let listed = bookkeeping(cluster, plan, &pending, &pod_by_key, &mut r.violations);
    // Deferred pods are outside the plan's batch (the budget cut them off): the plan is judged as if
    // they had arrived after its window closed.
    let deferred: BTreeSet<&str> = plan.deferred.iter().map(String::as_str).collect();
    let pending: BTreeSet<String> = pending.into_iter().filter(|k| !deferred.contains(k.as_str())).collect();
    let (sims, launches) = new_nodes(cluster, catalog, plan, &mut r.violations);
    r.queue_order = queue_order(cluster, plan, &pending, &pod_by_key, sims.clone());
    let mut fs = replay_state(cluster, sims);
    fs.set_hostname_spread(plan.hostname_spread);
    fs.set_min_values_policy(plan.min_values_policy);
    for n in &cluster.nodes {
        if n.deleting && listed.contains_key(n.name.as_str()) {
            r.violations.push(v(None, Some(&n.name), "Plan", "pods placed on a node that is being deleted"));
        }
    }
    replay(cluster, plan, &pending, &pod_by_key, &mut fs, order_budget, &mut r);
    launch_check(cluster, plan, &pod_by_key, &launches, &mut r.violations);
    r.preferences = preferences(original, plan, &pod_by_key, &fs);
    // Unschedulable pods that would fit somewhere in the final state.
    for u in &plan.unschedulable {
        if let Some(&pi) = pod_by_key.get(&u.pod) {
            let pod = &cluster.pods[pi];
            if fs.verdicts(pod).iter().any(|x| x.is_ok()) {
                r.notes.push(format!("{} is listed unschedulable but fits an existing or planned node", u.pod));
            }
        }
    }
    r
}

/// The pending pods of `cluster` that kube-scheduler leaves without a node when every new node of
/// `plan` is up at once (DaemonSet pods seated) and the pods arrive together: [`scheduler`]'s Filter
/// model and score, which never read the plan's placements. A plan that passes [`check`] shows one
/// bind order that works; kube-scheduler takes its own, which can fill the room a later pod needed.
/// Pods that arrive together (a ReplicaSet recreates the evicted ones at the same instant) come in an
/// order nobody controls within a priority. The queue's order as the cluster has it is tried, and, when
/// the plan launches nodes, smallest first within each priority too: an empty new node is every early
/// pod's LeastAllocated favourite, so small pods arriving first take the room a big one was planned
/// there for (the failure seen in the simulator's day runs). Without new nodes the pods spread over
/// existing room, where no order is systematically worse, and only the queue's is tried (trying
/// smallest first there too rejected a 100-node consolidation of a 1,000-node cluster for a 64-node one
/// at 5x the time). Consolidation's replacements are in exactly this situation (all Ready before any
/// node drains), so a decision stands only if this is empty. Pod keys with kube-scheduler's message,
/// from the first order that leaves any.
pub fn scheduler_leaves(cluster: &Cluster, catalog: &Catalog, plan: &Plan) -> Vec<(String, String)> {
    let queue = scheduler::queue(cluster);
    let mut orders = vec![queue.clone()];
    if !plan.new_nodes.is_empty() {
        let mut small_first = queue;
        small_first.sort_by_key(|&id| {
            let p = cluster.pod(id);
            (std::cmp::Reverse(p.priority), p.requests.cpu_m, p.requests.memory)
        });
        orders.push(small_first);
    }
    let mut ignored = Vec::new();
    let (sims, _) = new_nodes(cluster, catalog, plan, &mut ignored);
    for order in orders {
        let left = scheduler_leaves_in(cluster, sims.clone(), order);
        if !left.is_empty() {
            return left;
        }
    }
    Vec::new()
}

/// [`scheduler_leaves`] for one arrival order, with the plan's new nodes as `sims`.
fn scheduler_leaves_in<'a>(cluster: &'a Cluster, sims: Vec<SimNode<'a>>, mut todo: Vec<PodId>) -> Vec<(String, String)> {
    let mut fs = replay_state(cluster, sims);
    // kube-scheduler knows no minValues; its hostname rule is the exact one (the default).
    fs.set_min_values_policy(MinValuesPolicy::BestEffort);
    let mut left: Vec<(String, String)> = Vec::new();
    loop {
        let pass = scheduler::pass_on(cluster, &mut fs, &todo);
        left.extend(pass.unschedulable.into_iter().map(|(id, msg)| (cluster.pod(id).key(), msg)));
        if pass.deferred.is_empty() || pass.bound.is_empty() {
            left.extend(pass.deferred.into_iter().map(|id| (cluster.pod(id).key(), "waits for a claim's volume".to_string())));
            return left;
        }
        todo = pass.deferred;
    }
}

/// Under `preferencePolicy: Respect`: the cluster with every placed pod hardened after the relaxation
/// steps its placement records (`semantics::preferences`). A recorded list that is not the pod's own
/// steps in Karpenter's order is a violation (the pod is then judged with nothing relaxed).
fn respected(cluster: &Cluster, plan: &Plan, out: &mut Vec<Violation>) -> Cluster {
    let all = prefs::all_relaxations(cluster);
    let mut steps = BTreeMap::new();
    let mut relaxed = BTreeMap::new();
    let by_key = cluster.pods_by_key();
    for pl in &plan.placements {
        let Some(&id) = by_key.get(&pl.pod) else { continue };
        let own = all.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let expected: Vec<String> = own.iter().take(pl.relaxed.len()).map(|s| s.to_string()).collect();
        if pl.relaxed.len() > own.len() || expected != pl.relaxed {
            let want = own.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
            out.push(v(Some(&pl.pod), Some(&pl.node), "Plan", format!("relaxed {:?} is not a prefix of the pod's relaxation steps [{want}]", pl.relaxed)));
        } else {
            relaxed.insert(id, pl.relaxed.len());
        }
        if !own.is_empty() {
            steps.insert(id, own.to_vec());
        }
    }
    prefs::harden_cluster(cluster, &steps, &relaxed)
}

/// Step 1: every pending pod exactly once, known pods and nodes, per-node pod lists that agree with the
/// placements, the cost the sum of the prices. Returns the pods placed on each node.
fn bookkeeping<'p>(cluster: &Cluster, plan: &'p Plan, pending: &BTreeSet<String>, pod_by_key: &BTreeMap<String, usize>, out: &mut Vec<Violation>) -> BTreeMap<&'p str, BTreeSet<&'p str>> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for pl in &plan.placements {
        *seen.entry(pl.pod.as_str()).or_default() += 1;
    }
    for u in &plan.unschedulable {
        *seen.entry(u.pod.as_str()).or_default() += 1;
    }
    for pod in &plan.deferred {
        *seen.entry(pod.as_str()).or_default() += 1;
    }
    for (pod, n) in &seen {
        if !pod_by_key.contains_key(*pod) {
            out.push(v(Some(pod), None, "Plan", "no such pod in the workload"));
        } else if !pending.contains(*pod) {
            out.push(v(Some(pod), None, "Plan", "the pod is not pending (already bound, terminal, terminating or a DaemonSet pod)"));
        }
        if *n > 1 {
            out.push(v(Some(pod), None, "Plan", format!("listed {n} times")));
        }
    }
    for pod in pending {
        if !seen.contains_key(pod.as_str()) {
            out.push(v(Some(pod), None, "Plan", "pending pod missing from the plan (neither placed, unschedulable nor deferred)"));
        }
    }
    let mut new_names = BTreeSet::new();
    for n in &plan.new_nodes {
        if !new_names.insert(n.name.as_str()) || cluster.node(&n.name).is_some() {
            out.push(v(None, Some(&n.name), "Plan", "duplicate node name"));
        }
    }
    let mut listed: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for pl in &plan.placements {
        listed.entry(pl.node.as_str()).or_default().insert(pl.pod.as_str());
        if !new_names.contains(pl.node.as_str()) && cluster.node(&pl.node).is_none() {
            out.push(v(Some(&pl.pod), Some(&pl.node), "Plan", "placed on an unknown node"));
        }
    }
    for n in &plan.new_nodes {
        let pods: BTreeSet<&str> = n.pods.iter().map(String::as_str).collect();
        if pods != listed.get(n.name.as_str()).cloned().unwrap_or_default() {
            out.push(v(None, Some(&n.name), "Plan", "newNodes[].pods disagrees with placements"));
        }
    }
    for n in &plan.existing_nodes {
        let pods: BTreeSet<&str> = n.pods.iter().map(String::as_str).collect();
        if pods != listed.get(n.name.as_str()).cloned().unwrap_or_default() {
            out.push(v(None, Some(&n.name), "Plan", "existingNodes[].pods disagrees with placements"));
        }
    }
    let existing_listed: BTreeSet<&str> = plan.existing_nodes.iter().map(|n| n.name.as_str()).collect();
    for node in listed.keys() {
        if !new_names.contains(node) && !existing_listed.contains(node) {
            out.push(v(None, Some(node), "Plan", "pods placed on this existing node are missing from existingNodes"));
        }
    }
    let cost: f64 = plan.new_nodes.iter().map(|n| n.price_per_hour).sum();
    if (cost - plan.cost_per_hour).abs() > 1e-6 * cost.max(1.0) {
        out.push(v(None, None, "Plan", format!("costPerHour {} is not the sum of node prices {cost}", plan.cost_per_hour)));
    }
    listed
}

/// Step 2: every new node against its NodePool and the catalog, NodePool limits counted over the
/// existing nodes and the new nodes before it. Returns the new nodes that have a NodePool and an
/// instance type, with the DaemonSet pods they run (and, under Strict, their launch types), for the
/// replay; and per such node its name and launch types, for step 4.
fn new_nodes<'a>(cluster: &'a Cluster, catalog: &Catalog, plan: &Plan, out: &mut Vec<Violation>) -> (Vec<SimNode<'a>>, Vec<(String, std::sync::Arc<LaunchTypes>)>) {
    let mut launches = Vec::new();
    let mut views: BTreeMap<String, Catalog> = BTreeMap::new();
    let mut usage: BTreeMap<&str, (Resources, i64)> = BTreeMap::new();
    for n in &cluster.nodes {
        if let Some(pool) = &n.nodepool {
            let e = usage.entry(pool.as_str()).or_default();
            e.0.add(&n.capacity);
            e.1 += 1;
        }
    }
    let mut sims: Vec<SimNode<'a>> = Vec::new();
    // A node's launch candidates depend on its pool and on the few labels `launch_types` reads; nodes
    // alike in those share them (a candidate list per node held about 40 KB per planned pod).
    let mut launch_memo: BTreeMap<(String, Vec<Option<String>>), std::sync::Arc<LaunchTypes>> = BTreeMap::new();
    // New nodes per capacity reservation id.
    let mut reserved: BTreeMap<String, u32> = BTreeMap::new();
    for n in &plan.new_nodes {
        let name = n.name.as_str();
        let Some(pool) = cluster.nodepool(&n.node_pool) else {
            out.push(v(None, Some(name), "NodePool", format!("NodePool {:?} not in the workload", n.node_pool)));
            continue;
        };
        let view = match cluster.nodeclass(&pool.node_class) {
            Some(nc) => views.entry(nc.name.clone()).or_insert_with(|| catalog::for_nodeclass(catalog, nc)),
            None => views.entry(String::new()).or_insert_with(|| catalog.clone()),
        };
        let Some(it) = view.get(&n.instance_type) else {
            out.push(v(None, Some(name), "InstanceType", format!("instance type {:?} not in the catalog", n.instance_type)));
            continue;
        };
        let o = offering(n, it, out);
        if let Some(r) = o.and_then(|o| o.reservation.as_ref()) {
            let used = reserved.entry(r.id.clone()).or_insert(0);
            if let Err(full) = (reservations::Cap { id: r.id.clone(), count: r.count }).one_more(*used) {
                out.push(v(None, Some(name), "InstanceType", full.to_string()));
            }
            *used += 1;
        }
        node_labels(n, pool, it, o, catalog.region.as_deref(), out);
        let taints = node_taints(n, pool, out);
        let e = usage.entry(pool.name.as_str()).or_default();
        if let Some(l) = &pool.limits
            && let Err(err) = limits::check(l, &e.0, e.1, &it.capacity)
        {
            out.push(v(None, Some(name), "NodePool", err.to_string()));
        }
        e.0.add(&it.capacity);
        e.1 += 1;
        let labels: Labels = n.labels.clone();
        let mut sim = SimNode::new(name, labels.clone(), taints.clone(), it.allocatable());
        sim.attach_limits = it.attach_limits.clone();
        for ds in &cluster.daemonsets {
            if daemonsets::runs_on(ds, &labels, &taints, Some(name)) {
                sim.seat(&ds.template);
            }
        }
        let read = min_values::labels_read(pool).map(|k| labels.get(k).cloned()).collect();
        let lt = launch_memo
            .entry((pool.name.clone(), read))
            .or_insert_with(|| std::sync::Arc::new(min_values::launch_types(pool, &view.types, &labels, catalog.region.as_deref(), &cluster.daemonsets)))
            .clone();
        if plan.min_values_policy == MinValuesPolicy::Strict && !lt.rules.is_empty() {
            sim.launch = Some(NodeLaunch { types: lt.clone(), seated: sim.pods.len() });
        }
        launches.push((n.name.clone(), lt));
        sims.push(sim);
    }
    (sims, launches)
}

/// Step 4: each new node's launch candidates for the pods the plan places on it, against what the node
/// records and its NodePool's minValues under the plan's policy. A plan that records no candidates
/// (a peer's) is judged on minValues alone.
fn launch_check(cluster: &Cluster, plan: &Plan, pod_by_key: &BTreeMap<String, usize>, launches: &[(String, std::sync::Arc<LaunchTypes>)], out: &mut Vec<Violation>) {
    let mut on_node: BTreeMap<&str, Vec<&crate::domain::pod::Pod>> = BTreeMap::new();
    for pl in &plan.placements {
        if let Some(&pi) = pod_by_key.get(&pl.pod) {
            on_node.entry(pl.node.as_str()).or_default().push(&cluster.pods[pi]);
        }
    }
    for (name, lt) in launches {
        let Some(n) = plan.new_nodes.iter().find(|n| &n.name == name) else { continue };
        let pods = on_node.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        // As the planners see a configuration: without the hostname.
        let mut labels = n.labels.clone();
        labels.remove(keys::HOSTNAME);
        let cands = min_values::candidates(lt, &labels, &Load::of(pods.iter().copied()));
        let names: Vec<String> = cands.iter().map(|t| t.name.clone()).collect();
        let recorded = !n.launch_candidates.is_empty();
        if recorded && n.launch_candidates != names {
            out.push(v(None, Some(name), "NodePool", format!("launchCandidates {:?} are not the instance types the node may launch as for its pods, cheapest first: {names:?}", n.launch_candidates)));
        }
        let short = min_values::shortfalls(lt, &cands);
        match plan.min_values_policy {
            MinValuesPolicy::Strict => {
                for s in &short {
                    out.push(v(None, Some(name), "NodePool", min_values::reject(&lt.pool, s).reason));
                }
                if !n.min_values_relaxed.is_empty() {
                    out.push(v(None, Some(name), "NodePool", "minValuesRelaxed is recorded, but the plan was made under minValuesPolicy: Strict"));
                }
            }
            MinValuesPolicy::BestEffort => {
                if (recorded || !n.min_values_relaxed.is_empty()) && n.min_values_relaxed != short {
                    out.push(v(None, Some(name), "NodePool", format!("minValuesRelaxed {:?} is not what the launch candidates need relaxed: {short:?}", n.min_values_relaxed)));
                }
            }
        }
    }
}

/// The node's offering (zone, capacity type and, for reserved capacity, the reservation its labels name)
/// exists and is available, at the catalog's price and price source.
fn offering<'i>(n: &NewNode, it: &'i InstanceType, out: &mut Vec<Violation>) -> Option<&'i Offering> {
    let name = n.name.as_str();
    let found = it.offerings.iter().find(|o| o.zone == n.zone && o.capacity_type == n.capacity_type && o.reservation_id() == n.labels.get(keys::CAPACITY_RESERVATION_ID).map(String::as_str));
    match found {
        None => {
            let reservation = n.labels.get(keys::CAPACITY_RESERVATION_ID).map(|id| format!(" in capacity reservation {id}")).unwrap_or_default();
            out.push(v(None, Some(name), "InstanceType", format!("{} has no {} offering in {}{reservation}", it.name, n.capacity_type, n.zone)))
        }
        Some(o) => {
            if !o.available {
                out.push(v(None, Some(name), "InstanceType", format!("offering {} {} {} is unavailable", it.name, n.capacity_type, n.zone)));
            }
            if (o.price - n.price_per_hour).abs() > 1e-9 {
                out.push(v(None, Some(name), "InstanceType", format!("price {} differs from the catalog's {}", n.price_per_hour, o.price)));
            }
            let src = if o.synthetic { "synthetic" } else { "catalog" };
            if n.price_source != src {
                out.push(v(None, Some(name), "InstanceType", format!("priceSource {:?}, the catalog says {src:?}", n.price_source)));
            }
        }
    }
    found
}

/// The node's labels are what the NodePool, the type and the offering give, other keys are ones the
/// NodePool's requirements leave open, and the NodePool's requirements hold.
fn node_labels(n: &NewNode, pool: &NodePool, it: &InstanceType, o: Option<&Offering>, region: Option<&str>, out: &mut Vec<Violation>) {
    let name = n.name.as_str();
    let mut expected = match o {
        Some(o) => nodepool::offering_labels(pool, it, o, region),
        None => nodepool::base_labels(pool, it, &n.zone, &n.capacity_type, region),
    };
    expected.insert(keys::HOSTNAME.into(), n.name.clone());
    for (k, want) in &expected {
        match n.labels.get(k) {
            Some(got) if got == want => {}
            got => out.push(v(None, Some(name), "NodePool", format!("label {k}={got:?}, expected {want:?}"))),
        }
    }
    let pool_keys: BTreeSet<&str> = pool.requirements.iter().map(|q| q.req.key.as_str()).collect();
    for k in n.labels.keys() {
        if !expected.contains_key(k) && !pool_keys.contains(k.as_str()) {
            out.push(v(None, Some(name), "NodePool", format!("label {k} is neither given by the NodePool, the type or the offering, nor a key the NodePool's requirements leave open")));
        }
    }
    if let Some(q) = nodepool::violated(pool, &n.labels) {
        out.push(v(None, Some(name), "NodePool", format!("NodePool {} requires {} {} {:?}", pool.name, q.key, q.op.as_str(), q.values)));
    }
}

/// The node's taints are the NodePool's, with known effects. Returns the taints the plan gives it.
fn node_taints(n: &NewNode, pool: &NodePool, out: &mut Vec<Violation>) -> Vec<Taint> {
    let name = n.name.as_str();
    let mut want_taints: Vec<_> = pool.taints.iter().map(taint_key).collect();
    let mut plan_taints: Vec<(String, String, &str)> = Vec::new();
    let mut taints = Vec::new();
    for t in &n.taints {
        match Effect::parse(&t.effect) {
            Some(e) => {
                plan_taints.push((t.key.clone(), t.value.clone(), e.as_str()));
                taints.push(Taint::new(t.key.clone(), t.value.clone(), e));
            }
            None => out.push(v(None, Some(name), "Plan", format!("taint effect {:?} unknown", t.effect))),
        }
    }
    want_taints.sort();
    plan_taints.sort();
    if want_taints != plan_taints {
        out.push(v(None, Some(name), "NodePool", "taints differ from the NodePool's"));
    }
    taints
}

/// The preferences the placements leave unmet (`Preferences`), on the nodes as the replay has them.
fn preferences(cluster: &Cluster, plan: &Plan, pod_by_key: &BTreeMap<String, usize>, fs: &FilterState) -> Preferences {
    let mut out = Preferences::default();
    let new_names: BTreeSet<&str> = plan.new_nodes.iter().map(|n| n.name.as_str()).collect();
    let mut on_new: BTreeMap<&str, Vec<&crate::domain::pod::Pod>> = BTreeMap::new();
    for pl in &plan.placements {
        let (Some(&pi), Some(ni)) = (pod_by_key.get(&pl.pod), fs.node_index(&pl.node)) else { continue };
        let (pod, node) = (&cluster.pods[pi], &fs.nodes()[ni]);
        out.preferred_node_affinity += node_affinity::preferred_shortfall(&pod.preferred_node, &node.labels, Some(&node.name));
        out.prefer_no_schedule += taints::untolerated_prefer_no_schedule(&node.taints, &pod.tolerations) as i64;
        if new_names.contains(pl.node.as_str()) {
            on_new.entry(pl.node.as_str()).or_default().push(pod);
        }
    }
    if plan.hostname_spread == spread::HostnameSpread::Intent {
        out.schedule_anyway_hostname_spread = on_new.values().map(|pods| spread::intent_soft_units(pods)).sum();
    }
    let nodes: Vec<(&Labels, Vec<&crate::domain::pod::Pod>)> = fs.nodes().iter().map(|n| (&n.labels, n.pods.clone())).collect();
    let placed = plan.placements.iter().filter_map(|pl| Some((&cluster.pods[*pod_by_key.get(&pl.pod)?], fs.node_index(&pl.node)?)));
    (out.preferred_pod_affinity, out.preferred_pod_anti_affinity) = interpod::preferred_shortfall_in(&nodes, placed);
    out
}

/// The cluster's nodes with the pods bound to them, then the plan's new nodes.
fn replay_state<'a>(cluster: &'a Cluster, sims: Vec<SimNode<'a>>) -> FilterState<'a> {
    let base = crate::semantics::filter::bound_nodes(cluster);
    let mut fs = FilterState::new(base);
    for s in sims {
        fs.add_planned_node(s);
    }
    fs
}

/// The pods left pending out of kube-scheduler's queue order (`semantics::queue::out_of_order`), on the
/// plan's nodes under the plan's settings.
fn queue_order<'a>(cluster: &'a Cluster, plan: &Plan, pending: &BTreeSet<String>, pod_by_key: &BTreeMap<String, usize>, sims: Vec<SimNode<'a>>) -> Vec<Violation> {
    let mut fs = replay_state(cluster, sims);
    fs.set_hostname_spread(plan.hostname_spread);
    fs.set_min_values_policy(plan.min_values_policy);
    let placed: Vec<(usize, usize)> = plan.placements.iter().filter(|pl| pending.contains(&pl.pod)).filter_map(|pl| Some((*pod_by_key.get(&pl.pod)?, fs.node_index(&pl.node)?))).collect();
    let left: Vec<usize> = plan.unschedulable.iter().filter(|u| pending.contains(&u.pod)).filter_map(|u| pod_by_key.get(&u.pod).copied()).collect();
    queue::out_of_order(&cluster.pods, &mut fs, &placed, &left, &|_| true)
        .into_iter()
        .map(|x| {
            let pod = &cluster.pods[x.pod];
            v(
                Some(&pod.key()),
                Some(&fs.nodes()[x.node].name),
                "QueueOrder",
                format!("left pending, but kube-scheduler's queue (priority {}) reaches it before pods the plan places, and this node takes it then", pod.priority),
            )
        })
        .collect()
}

/// Step 3: is there a bind order that places every placed pod ([`order::bind_all`])? Each pod left is
/// a violation with its rejection.
fn replay<'a>(cluster: &'a Cluster, plan: &Plan, pending: &BTreeSet<String>, pod_by_key: &BTreeMap<String, usize>, fs: &mut FilterState<'a>, budget: usize, r: &mut Report) {
    let mut todo: Vec<order::Placed> = Vec::new();
    for pl in &plan.placements {
        if let (Some(&pi), Some(ni)) = (pod_by_key.get(&pl.pod), fs.node_index(&pl.node))
            && pending.contains(&pl.pod)
        {
            todo.push(order::Placed { pod: pi, node: ni, key: pl.pod.as_str() });
        }
    }
    r.pods_checked = todo.len();
    let found = order::bind_all(&cluster.pods, &todo, fs, budget);
    r.stated_order_ok = found.stated_order_ok;
    r.order = found.outcome;
    r.order_search_checks = found.search_checks;
    r.notes.extend(found.notes);
    r.order_left = found.left.len();
    for (x, e) in found.left {
        r.violations.push(v(Some(x.key), Some(&fs.nodes()[x.node].name), e.plugin.as_str(), &e.reason));
    }
}
