//! The table-test harness shared by the constraint tests: small inline workloads (kubectl-style YAML),
//! the expected plan, the checker's verdict on it, and the checker's verdict on hand-broken copies.
//!
//! A case runs against every planner of [`planners`]; expectations describe what kube-scheduler's
//! semantics (and cost) force, not one planner's incidental choices, so that every planner must meet them.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use stowage_core::check;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::plan::{Placement, Plan, PlanTaint};
use stowage_core::semantics::nodepool;
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::weights::Weights;
use stowage_input::catalog;
use stowage_input::{self, Workload};

/// Every planner the cases must hold for.
pub fn planners() -> Vec<Solver> {
    vec![Solver::Greedy, Solver::Milp]
}

pub fn small_catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(|| {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/fixtures/catalog-small.yaml");
        catalog::load(&p).expect("tests/fixtures/catalog-small.yaml parses")
    })
}

/// The default weights under `preferencePolicy: Priced`: preferences traded against price by the `soft`
/// weights (kube-scheduler's own view: they only score), for cases about pricing.
pub fn priced() -> Weights {
    Weights { preference_policy: stowage_core::weights::PreferencePolicy::Priced, ..Weights::default() }
}

// ---------------------------------------------------------------------------------------------------
// Workload helpers: each returns one or more YAML documents (each starting with `---`).

pub const NODECLASS: &str = "---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {role: test, amiSelectorTerms: [{alias: al2023@latest}], subnetSelectorTerms: [{tags: {k: v}}], securityGroupSelectorTerms: [{tags: {k: v}}]}
";

/// A NodePool. `requirements` is a flow sequence of requirements (`""` = none); `template_spec` extra
/// flow-mapping entries of `spec.template.spec` (taints, ...); `spec` extra entries of `spec` (limits,
/// weight); `labels` the template labels (flow mapping or `""`).
pub fn pool_full(name: &str, requirements: &str, labels: &str, template_spec: &str, spec: &str) -> String {
    let reqs = if requirements.is_empty() { "[]" } else { requirements };
    let labels = if labels.is_empty() { "{}" } else { labels };
    let ts = if template_spec.is_empty() { String::new() } else { format!(", {template_spec}") };
    let sp = if spec.is_empty() { String::new() } else { format!("\n  {spec}") };
    format!(
        "---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    metadata: {{labels: {labels}}}
    spec: {{nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}, requirements: {reqs}{ts}}}{sp}
"
    )
}

pub fn pool(name: &str, requirements: &str) -> String {
    pool_full(name, requirements, "", "", "")
}

/// The NodePool cases get when they declare none: on-demand only, every type and zone of the catalog.
pub fn default_pool() -> String {
    pool("default", "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]")
}

/// A pod with one container requesting `cpu` (`""` = no request). `name` may be `namespace/name`;
/// `labels` is a flow mapping (`""` = none); `spec` extra flow-mapping entries of `spec` (a
/// `nodeName: x` entry binds it).
pub fn pod(name: &str, labels: &str, cpu: &str, spec: &str) -> String {
    let (ns, name) = name.split_once('/').unwrap_or(("default", name));
    let labels = if labels.is_empty() { "{}" } else { labels };
    let req = if cpu.is_empty() { String::new() } else { format!(", resources: {{requests: {{cpu: {cpu}}}}}") };
    let spec = if spec.is_empty() { String::new() } else { format!(", {spec}") };
    format!(
        "---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}, labels: {labels}}}
spec: {{containers: [{{name: c, image: pause{req}}}]{spec}}}
"
    )
}

/// `n` pods `prefix-0` … `prefix-(n-1)` alike.
pub fn pods(n: usize, prefix: &str, labels: &str, cpu: &str, spec: &str) -> String {
    (0..n).map(|i| pod(&format!("{prefix}-{i}"), labels, cpu, spec)).collect()
}

/// An existing node outside any NodePool, in `zone`, with `cpu` allocatable, 16Gi of memory and 110
/// pods. `labels` extra flow-mapping entries of its labels; `spec` extra entries of `spec`.
pub fn node(name: &str, zone: &str, cpu: &str, labels: &str, spec: &str) -> String {
    let labels = if labels.is_empty() { String::new() } else { format!(", {labels}") };
    format!(
        "---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}{labels}}}}}
spec: {{{spec}}}
status: {{allocatable: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"110\"}}, capacity: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"110\"}}}}
"
    )
}

// ---------------------------------------------------------------------------------------------------
// Expectations.

/// A property of the node a pod lands on.
#[derive(Clone, Debug)]
pub enum Is {
    /// This existing node.
    Existing(&'static str),
    /// Some existing node.
    AnyExisting,
    /// A node the plan launches.
    New,
    Zone(&'static str),
    ZoneIn(&'static [&'static str]),
    NotZone(&'static str),
    Type(&'static str),
    Pool(&'static str),
    CapacityType(&'static str),
    Label(&'static str, &'static str),
}

#[derive(Clone, Debug)]
pub enum Exp {
    /// The plan launches exactly this many nodes.
    NewNodes(usize),
    /// The pod is placed on a node with all these properties.
    On(&'static str, &'static [Is]),
    /// The pod stays pending and the plan names this plugin.
    Unschedulable(&'static str, &'static str),
    /// These pods share one node.
    Together(&'static [&'static str]),
    /// These pods are on pairwise different nodes.
    Apart(&'static [&'static str]),
    /// These pods are in one zone.
    SameZone(&'static [&'static str]),
    /// The zones of the new nodes, sorted.
    NewZones(&'static [&'static str]),
    /// Every pending pod is placed.
    AllPlaced,
    /// How many pods whose name starts with the prefix are placed.
    PlacedWithPrefix(&'static str, usize),
    /// Pods placed per zone value among pods with this name prefix, sorted descending.
    ZoneCounts(&'static str, &'static [usize]),
    /// Exactly this many pods stay pending, each naming this plugin.
    UnschedulableCount(usize, &'static str),
    /// The values of a label over the new nodes, sorted.
    NewLabels(&'static str, &'static [&'static str]),
    /// The plan launches exactly this many nodes from this NodePool.
    PoolNodes(&'static str, usize),
    /// Custom predicate over the plan and the workload.
    Custom(&'static str, fn(&Plan, &Workload) -> Result<(), String>),
}

/// A hand edit of a plan.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Moves a placed pod (or places an unschedulable one) onto a node: an existing node's name, or
    /// `@pod` for the node another pod is on.
    Move(&'static str, &'static str),
    /// Moves the new node holding the pod to another zone (zone label and price follow).
    Rezone(&'static str, &'static str),
    /// Changes the instance type of the new node holding the pod (labels and price follow).
    Retype(&'static str, &'static str),
    /// Sets a label on the new node holding the pod.
    Label(&'static str, &'static str, &'static str),
    /// Moves the new node holding the pod to another NodePool (labels, taints and price follow;
    /// `capacityType` is kept if the pool allows it, else the pool's first).
    Repool(&'static str, &'static str),
    /// Changes the capacity type of the new node holding the pod (label and price follow).
    Recapacity(&'static str, &'static str),
    /// Moves every placed pod onto the node of this pod.
    AllTo(&'static str),
    /// Moves the new node holding the pod to the first other zone of the catalog that offers it.
    Shift(&'static str),
}

pub struct Case {
    name: String,
    catalog: &'static Catalog,
    docs: String,
    expect: Vec<Exp>,
    broken: Vec<(Vec<Edit>, &'static str)>,
    fit_notes_allowed: bool,
    weights: Weights,
}

/// A case on catalog-small. Without a NodePool in `docs`, [`default_pool`] is added; the EC2NodeClass
/// is always added.
pub fn case(name: &str, docs: impl Into<String>) -> Case {
    Case { name: name.to_string(), catalog: small_catalog(), docs: docs.into(), expect: Vec::new(), broken: Vec::new(), fit_notes_allowed: false, weights: Weights::default() }
}

impl Case {
    pub fn catalog(mut self, c: &'static Catalog) -> Self {
        self.catalog = c;
        self
    }

    pub fn default_catalog(mut self) -> Self {
        self.catalog = catalog::default_catalog();
        self
    }

    /// Plans with these weights (and settings, such as `hostnameSpread`) instead of the defaults.
    pub fn weights(mut self, w: Weights) -> Self {
        self.weights = w;
        self
    }

    pub fn expect(mut self, e: Exp) -> Self {
        self.expect.push(e);
        self
    }

    pub fn expects(mut self, es: impl IntoIterator<Item = Exp>) -> Self {
        self.expect.extend(es);
        self
    }

    /// After `edits`, the checker must reject the plan, and every violation must name `plugin`.
    pub fn broken(mut self, edits: impl IntoIterator<Item = Edit>, plugin: &'static str) -> Self {
        self.broken.push((edits.into_iter().collect(), plugin));
        self
    }

    /// Allows the checker's note that an unschedulable pod fits a planned node, and its queue-order
    /// findings (`Report::queue_order`): stowage's wider spread universe (NodePool domains) is stricter
    /// than kube-scheduler's, so such notes are expected where a case documents that rule.
    pub fn fit_notes_allowed(mut self) -> Self {
        self.fit_notes_allowed = true;
        self
    }

    pub fn workload(&self) -> Workload {
        let mut text = String::from(NODECLASS);
        if !self.docs.contains("kind: NodePool") {
            text.push_str(&default_pool());
        }
        text.push_str(&self.docs);
        let file = format!("case-{}.yaml", self.name);
        // Built under the case's cluster-default topology spread, as `stowage plan` builds it.
        match stowage_input::load_texts([(Path::new(&file), text.as_str())]).and_then(|w| w.with_spread_defaults(&self.weights.topology_spread_defaults)) {
            Ok(w) => w,
            Err(e) => panic!("case {}: the workload does not load: {e}\n{text}", self.name),
        }
    }

    #[track_caller]
    pub fn run(self) {
        let w = self.workload();
        assert!(!w.cluster.pending().is_empty() || self.expect.is_empty(), "case {}: no pending pod", self.name);
        for solver in planners() {
            let ctx = format!("case {} ({solver:?})", self.name);
            let plan = plan_cluster(&w.cluster, self.catalog, &self.weights, solver).unwrap_or_else(|e| panic!("{ctx}: planning failed: {e}"));
            let again = plan_cluster(&w.cluster, self.catalog, &self.weights, solver).unwrap_or_else(|e| panic!("{ctx}: planning failed: {e}"));
            assert_eq!(plan.hostname_spread, self.weights.hostname_spread, "{ctx}: the plan records another hostnameSpread");
            assert_eq!(plan.min_values_policy, self.weights.min_values_policy, "{ctx}: the plan records another minValuesPolicy");
            assert_eq!(plan.preference_policy, self.weights.preference_policy, "{ctx}: the plan records another preferencePolicy");
            assert_eq!(plan.topology_spread_defaults, self.weights.topology_spread_defaults, "{ctx}: the plan records another topologySpreadDefaults");
            assert_eq!(strip_times(&plan), strip_times(&again), "{ctx}: planning is not deterministic");
            let dump = || format!("plan:\n{}", summary(&plan));
            assert!(plan.cost_per_hour >= 0.0 && plan.cost_per_hour.is_sign_positive(), "{ctx}: costPerHour {}", plan.cost_per_hour);
            for e in &self.expect {
                if let Err(msg) = expectation(e, &plan, &w) {
                    panic!("{ctx}: expectation {e:?} fails: {msg}\n{}", dump());
                }
            }
            let r = check::check(&w.cluster, self.catalog, &plan);
            assert!(r.valid(), "{ctx}: the checker rejects the plan: {:#?}\n{}", r.violations, dump());
            assert!(r.stated_order_ok, "{ctx}: the plan's own bind order does not replay: {:?}\n{}", r.notes, dump());
            if !self.fit_notes_allowed {
                let fits: Vec<&String> = r.notes.iter().filter(|n| n.contains("listed unschedulable")).collect();
                assert!(fits.is_empty(), "{ctx}: the checker finds room for pods the plan leaves pending: {fits:?}\n{}", dump());
                assert!(r.queue_order.is_empty(), "{ctx}: the plan leaves pods pending out of kube-scheduler's queue order: {:#?}\n{}", r.queue_order, dump());
            }
            for (edits, plugin) in &self.broken {
                let mut bad = plan.clone();
                for ed in edits {
                    if let Err(msg) = apply(ed, &mut bad, &w, self.catalog) {
                        panic!("{ctx}: edit {ed:?} cannot be applied: {msg}\n{}", dump());
                    }
                }
                bad.finish();
                // Like `newNodes[].pods`, the launch candidates are derived from the placements; a hand
                // edit that moves pods would also break them. Cleared, the plan is judged as a peer's:
                // on minValues alone (docs/formats.md §3), so the edit's own rule is what fails.
                for n in &mut bad.new_nodes {
                    n.launch_candidates.clear();
                    n.min_values_relaxed.clear();
                }
                let r = check::check(&w.cluster, self.catalog, &bad);
                assert!(!r.valid(), "{ctx}: after {edits:?} the checker accepts the plan\nbroken {}", summary(&bad));
                let others: Vec<String> = r.violations.iter().filter(|v| v.constraint != *plugin).map(|v| v.to_string()).collect();
                assert!(others.is_empty(), "{ctx}: after {edits:?} expected only {plugin} violations, also got {others:#?}\nall: {:#?}\nbroken {}", r.violations, summary(&bad));
            }
        }
    }
}

/// The plan without the solver's account of its own work: its times, and what depends on its
/// deadlines (the detail text, e.g. how many size-class bound rounds ran, the phases and the bound
/// they reached). Under load two runs may differ there; the plan itself must not.
fn strip_times(p: &Plan) -> Plan {
    let mut p = p.clone();
    p.solver.time_ms = 0.0;
    p.solver.detail.clear();
    p.solver.phases.clear();
    (p.solver.lower_bound, p.solver.gap) = (None, None);
    p
}

/// A compact description of a plan for failure messages.
pub fn summary(p: &Plan) -> String {
    let mut s = String::new();
    for n in &p.new_nodes {
        let extra: Vec<String> = n.labels.iter().filter(|(k, _)| !k.contains('/')).map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!("  new {} {} {} {} {} ${} [{}] pods {:?}\n", n.name, n.node_pool, n.instance_type, n.zone, n.capacity_type, n.price_per_hour, extra.join(","), n.pods));
    }
    for n in &p.existing_nodes {
        s.push_str(&format!("  existing {} pods {:?}\n", n.name, n.pods));
    }
    for u in &p.unschedulable {
        s.push_str(&format!("  unschedulable {} {}: {}\n", u.pod, u.plugin, u.reason));
    }
    s
}

fn key(pod: &str) -> String {
    if pod.contains('/') { pod.to_string() } else { format!("default/{pod}") }
}

fn node_of<'p>(p: &'p Plan, pod: &str) -> Result<&'p str, String> {
    let k = key(pod);
    p.placements.iter().find(|pl| pl.pod == k).map(|pl| pl.node.as_str()).ok_or_else(|| format!("{k} is not placed"))
}

/// Zone and labels of a node of the plan or of the workload.
fn node_labels(p: &Plan, w: &Workload, node: &str) -> std::collections::BTreeMap<String, String> {
    if let Some(n) = p.new_nodes.iter().find(|n| n.name == node) {
        return n.labels.clone();
    }
    w.cluster.node(node).map(|n| n.labels.clone()).unwrap_or_default()
}

fn zone_of(p: &Plan, w: &Workload, pod: &str) -> Result<String, String> {
    let n = node_of(p, pod)?;
    node_labels(p, w, n).get(keys::ZONE).cloned().ok_or_else(|| format!("node {n} has no zone"))
}

fn is(i: &Is, p: &Plan, w: &Workload, node: &str) -> Result<(), String> {
    let new = p.new_nodes.iter().find(|n| n.name == node);
    let labels = node_labels(p, w, node);
    let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
    let ok = match i {
        Is::Existing(n) => node == *n,
        Is::AnyExisting => new.is_none(),
        Is::New => new.is_some(),
        Is::Zone(z) => label(keys::ZONE) == *z,
        Is::ZoneIn(zs) => zs.contains(&label(keys::ZONE).as_str()),
        Is::NotZone(z) => label(keys::ZONE) != *z,
        Is::Type(t) => label(keys::INSTANCE_TYPE) == *t,
        Is::Pool(pl) => new.is_some_and(|n| n.node_pool == *pl),
        Is::CapacityType(c) => label(keys::CAPACITY_TYPE) == *c,
        Is::Label(k, v) => label(k) == *v,
    };
    if ok { Ok(()) } else { Err(format!("node {node} is not {i:?}")) }
}

fn placed_keys(p: &Plan) -> BTreeSet<String> {
    p.placements.iter().map(|pl| pl.pod.clone()).collect()
}

pub fn expectation(e: &Exp, p: &Plan, w: &Workload) -> Result<(), String> {
    match e {
        Exp::NewNodes(n) => {
            if p.new_nodes.len() == *n {
                Ok(())
            } else {
                Err(format!("{} new nodes", p.new_nodes.len()))
            }
        }
        Exp::On(pod, props) => {
            let n = node_of(p, pod)?;
            props.iter().try_for_each(|i| is(i, p, w, n))
        }
        Exp::Unschedulable(pod, plugin) => {
            let k = key(pod);
            match p.unschedulable.iter().find(|u| u.pod == k) {
                None => Err(format!("{k} is not unschedulable")),
                Some(u) if u.plugin == *plugin => Ok(()),
                Some(u) => Err(format!("{k} is unschedulable by {} ({}), not {plugin}", u.plugin, u.reason)),
            }
        }
        Exp::Together(pods) => {
            let nodes: BTreeSet<&str> = pods.iter().map(|q| node_of(p, q)).collect::<Result<_, _>>()?;
            if nodes.len() == 1 { Ok(()) } else { Err(format!("on nodes {nodes:?}")) }
        }
        Exp::Apart(pods) => {
            let nodes: BTreeSet<&str> = pods.iter().map(|q| node_of(p, q)).collect::<Result<_, _>>()?;
            if nodes.len() == pods.len() { Ok(()) } else { Err(format!("on nodes {nodes:?}")) }
        }
        Exp::SameZone(pods) => {
            let zones: BTreeSet<String> = pods.iter().map(|q| zone_of(p, w, q)).collect::<Result<_, _>>()?;
            if zones.len() == 1 { Ok(()) } else { Err(format!("in zones {zones:?}")) }
        }
        Exp::NewZones(zs) => {
            let mut got: Vec<&str> = p.new_nodes.iter().map(|n| n.zone.as_str()).collect();
            got.sort();
            if got == *zs { Ok(()) } else { Err(format!("new nodes in {got:?}")) }
        }
        Exp::AllPlaced => {
            let placed = placed_keys(p);
            let missing: Vec<String> = w.cluster.pending().into_iter().map(|id| w.cluster.pod(id).key()).filter(|k| !placed.contains(k)).collect();
            if missing.is_empty() { Ok(()) } else { Err(format!("not placed: {missing:?}")) }
        }
        Exp::PlacedWithPrefix(prefix, n) => {
            let k = key(prefix);
            let got = p.placements.iter().filter(|pl| pl.pod.starts_with(&k)).count();
            if got == *n { Ok(()) } else { Err(format!("{got} placed")) }
        }
        Exp::ZoneCounts(prefix, counts) => {
            let k = key(prefix);
            let mut by_zone: std::collections::BTreeMap<String, usize> = Default::default();
            for pl in p.placements.iter().filter(|pl| pl.pod.starts_with(&k)) {
                *by_zone.entry(zone_of(p, w, &pl.pod)?).or_default() += 1;
            }
            let mut got: Vec<usize> = by_zone.values().copied().collect();
            got.sort_by(|a, b| b.cmp(a));
            if got == *counts { Ok(()) } else { Err(format!("per zone {by_zone:?}")) }
        }
        Exp::UnschedulableCount(n, plugin) => {
            let wrong: Vec<String> = p.unschedulable.iter().filter(|u| u.plugin != *plugin).map(|u| format!("{} {}", u.pod, u.plugin)).collect();
            if p.unschedulable.len() == *n && wrong.is_empty() { Ok(()) } else { Err(format!("{} unschedulable, other plugins: {wrong:?}", p.unschedulable.len())) }
        }
        Exp::NewLabels(k, values) => {
            let mut got: Vec<&str> = p.new_nodes.iter().map(|n| n.labels.get(*k).map(String::as_str).unwrap_or("<none>")).collect();
            got.sort();
            if got == *values { Ok(()) } else { Err(format!("{k} on new nodes: {got:?}")) }
        }
        Exp::PoolNodes(pool, n) => {
            let got = p.new_nodes.iter().filter(|x| x.node_pool == *pool).count();
            if got == *n { Ok(()) } else { Err(format!("{got} nodes from {pool}")) }
        }
        Exp::Custom(what, f) => f(p, w).map_err(|m| format!("{what}: {m}")),
    }
}

// ---------------------------------------------------------------------------------------------------
// Plan edits.

/// The new node an edit addresses: the node holding `pod`, or with `pool:NAME` the first new node of
/// that NodePool.
fn new_node_ix(p: &Plan, pod: &str) -> Result<usize, String> {
    if let Some(pool) = pod.strip_prefix("pool:") {
        return p.new_nodes.iter().position(|x| x.node_pool == pool).ok_or_else(|| format!("no new node of NodePool {pool}"));
    }
    let n = node_of(p, pod)?.to_string();
    p.new_nodes.iter().position(|x| x.name == n).ok_or_else(|| format!("{pod} is not on a new node"))
}

/// Recomputes a new node's labels, taints and price from its NodePool, type, zone and capacity type,
/// keeping the values it had for keys the NodePool leaves open.
fn rebuild(p: &mut Plan, ix: usize, w: &Workload, cat: &Catalog) -> Result<(), String> {
    let n = &mut p.new_nodes[ix];
    let pool = w.cluster.nodepool(&n.node_pool).ok_or("unknown NodePool")?;
    let view = match w.cluster.nodeclass(&pool.node_class) {
        Some(nc) => stowage_core::catalog::for_nodeclass(cat, nc),
        None => cat.clone(),
    };
    let it = view.get(&n.instance_type).ok_or("unknown instance type")?;
    let o = it.offerings.iter().find(|o| o.zone == n.zone && o.capacity_type == n.capacity_type).ok_or("no such offering")?;
    n.price_per_hour = o.price;
    n.price_source = if o.synthetic { "synthetic".into() } else { "catalog".into() };
    let mut labels = nodepool::base_labels(pool, it, &n.zone, &n.capacity_type, cat.region.as_deref());
    labels.insert(keys::HOSTNAME.into(), n.name.clone());
    for r in &pool.requirements {
        if !labels.contains_key(&r.req.key)
            && let Some(v) = n.labels.get(&r.req.key)
        {
            labels.insert(r.req.key.clone(), v.clone());
        }
    }
    n.labels = labels;
    n.taints = pool.taints.iter().map(|t| PlanTaint { key: t.key.clone(), value: t.value.clone(), effect: t.effect.as_str().into() }).collect();
    Ok(())
}

pub fn apply(e: &Edit, p: &mut Plan, w: &Workload, cat: &Catalog) -> Result<(), String> {
    match e {
        Edit::Move(pod, to) => {
            let target = match to.strip_prefix('@') {
                Some(other) => node_of(p, other)?.to_string(),
                None => to.to_string(),
            };
            let k = key(pod);
            p.unschedulable.retain(|u| u.pod != k);
            match p.placements.iter_mut().find(|pl| pl.pod == k) {
                Some(pl) => pl.node = target,
                None => p.placements.push(Placement { pod: k, node: target, relaxed: vec![] }),
            }
            Ok(())
        }
        Edit::Rezone(pod, zone) => {
            let ix = new_node_ix(p, pod)?;
            p.new_nodes[ix].zone = zone.to_string();
            rebuild(p, ix, w, cat)
        }
        Edit::Retype(pod, t) => {
            let ix = new_node_ix(p, pod)?;
            p.new_nodes[ix].instance_type = t.to_string();
            rebuild(p, ix, w, cat)
        }
        Edit::Label(pod, k, v) => {
            let ix = new_node_ix(p, pod)?;
            p.new_nodes[ix].labels.insert(k.to_string(), v.to_string());
            Ok(())
        }
        Edit::Repool(pod, pool) => {
            let ix = new_node_ix(p, pod)?;
            let np = w.cluster.nodepool(pool).ok_or("unknown NodePool")?;
            let allowed = |ct: &str| np.requirements.iter().all(|r| r.req.key != keys::CAPACITY_TYPE || stowage_core::semantics::node_affinity::requirement_matches_value(&r.req, Some(ct)));
            let n = &mut p.new_nodes[ix];
            n.node_pool = pool.to_string();
            if !allowed(&n.capacity_type) {
                n.capacity_type = ["on-demand", "spot"].into_iter().find(|c| allowed(c)).ok_or("no capacity type")?.to_string();
            }
            rebuild(p, ix, w, cat)
        }
        Edit::Shift(pod) => {
            let ix = new_node_ix(p, pod)?;
            let n = &p.new_nodes[ix];
            let it = cat.get(&n.instance_type).ok_or("unknown instance type")?;
            let zone = cat.zones.iter().find(|z| **z != n.zone && it.offerings.iter().any(|o| &o.zone == *z && o.capacity_type == n.capacity_type && o.available)).ok_or("no other zone")?.clone();
            p.new_nodes[ix].zone = zone;
            rebuild(p, ix, w, cat)
        }
        Edit::AllTo(pod) => {
            let target = node_of(p, pod)?.to_string();
            for pl in &mut p.placements {
                pl.node = target.clone();
            }
            Ok(())
        }
        Edit::Recapacity(pod, ct) => {
            let ix = new_node_ix(p, pod)?;
            p.new_nodes[ix].capacity_type = ct.to_string();
            rebuild(p, ix, w, cat)
        }
    }
}
