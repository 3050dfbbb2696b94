//! The greedy planner: best-fit decreasing with a cost-aware choice of new nodes.
//!
//! 1. Pods are taken by priority, highest first (kube-scheduler's queue order, so that the pods left
//!    pending when not everything fits are the lowest-priority ones: `semantics::queue`); within a
//!    priority class by class in decreasing size (cpu, then memory, then input order), as Karpenter
//!    does, but each class's pods stay together (`Order::Size`); or, by default, pods that need a node
//!    each first, then by dominant size, which fills those nodes better (`Order::Packing`). A class's
//!    pods go in queue order, so its latest pods are the ones left pending. The MILP driver runs both
//!    orders when its budget allows, and a third where classes are under a hostname spread: the
//!    packing order with those classes first too (`Order::Hosts`).
//! 2. A pod goes to the open node (existing, or new in this plan) with the least free cpu that passes
//!    every kube-scheduler filter and stowage's wider spread-domain rule; pods with spread constraints
//!    prefer the domain with the fewest matching pods. Capacity that is already paid for is free.
//! 3. Otherwise a new node is opened: among the configurations whose NodePool, labels and DaemonSets
//!    pass the pod's constraints, the one with the lowest cost per pod it would hold, counting the
//!    pods of this class and of the next classes in line that would fit (price per unit of what the
//!    pods need, across every NodePool and instance type). Unless growing a node already opened in
//!    this plan is cheaper: a new node's instance type is not final until the end (as Karpenter's
//!    NodeClaims keep a range of types), so a node may move to a larger type of its configuration
//!    group (same NodePool, same labels for every constraint, same DaemonSets) when the price step is
//!    below the cost per pod of a new node. This fills the nodes that one-per-node pods open.
//! 4. Pods that fit nowhere are retried after a full pass (in-batch affinity targets may have been
//!    placed meanwhile), until a pass makes no progress.
//! 5. Each new node is shrunk to the cheapest instance type of its group that still holds its pods.
//! 6. The outcome is replayed through kube-scheduler's filters with all new nodes present. Hostname
//!    spreads can fail there (a node opened later lowers the global minimum); the plan is then redone
//!    taking the hostname minimum as 0, which is always safe.
//! 7. Pods move into room other nodes already have where that lets a node step down to a cheaper type
//!    or go away, in moves no topology rule can see (`improve::shrink`).
//!
//! Under the MILP driver's budget (`plan_within`), the pods left when the budget is spent go through a
//! fast pass (`Greedy::place_fast`, bounded work per pod, the same filters) and step 7 is skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rustc_hash::FxHashMap;

use super::improve;
use super::problem::{PoolUsage, Problem};
use super::resize::downsize;
// `milp` still names `greedy::remove_empty_nodes`; this re-export keeps that path working until the
// MILP restructuring (issue 14) imports it from `resize`.
use super::{Outcome, Target, new_node_name, new_sim_node, placement_soft, scheduler_state, verify};
use crate::domain::labels::{Labels, keys};
use crate::domain::node::AttachLimits;
use crate::domain::pod::{Pod, PodId};
use crate::domain::resources::Resources;
use crate::semantics::filter::{FilterState, Prepared, SimNode};
use crate::semantics::{Plugin, Reject, interpod, limits, reservations, selectors, spread, summarize, volume_limits};

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Take globalMin = 0 for hostname spread constraints (Karpenter's rule): always valid, may use
    /// more nodes.
    pub pessimistic_hostname: bool,
    /// The order classes are taken in.
    pub order: Order,
    /// Whether the look-ahead of a new node's configuration leaves out the following classes it would
    /// cost far more than their cheapest configuration ([`DEAR_FOR_NEXT`]): otherwise a node opened for
    /// on-demand pods is sized for the spot-tolerant pods that come next, and they fill on-demand room
    /// at three to four times the spot price (cluster-platform: 377 pods on four on-demand
    /// m7i.8xlarge, where the MILP puts them on spot c6a.8xlarge). Set for the size order, the
    /// driver's second pass: in the packing order the same rule made mixed-3/10/25 12-21 % dearer
    /// (their soft terms: differently sized nodes put preferred placements out of reach), and the
    /// driver keeps the cheaper of the two passes.
    pub priced_lookahead: bool,
}

/// The order pods are taken in, and how ties between new-node configurations are broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Decreasing cpu, then memory (Karpenter's order); equal new-node choices by configuration index;
    /// the look-ahead priced (`Options::priced_lookahead`). The driver's second pass.
    Size,
    /// Classes that need a node per pod (hostname anti-affinity matching themselves) first, since they
    /// fix the least number of nodes, then decreasing dominant size (the larger of cpu and memory, memory
    /// scaled by the catalog's memory per cpu); equal new-node choices go to the zone with the fewest new
    /// nodes so far, so every zone has nodes for zone-spread pods to fill. On Karpenter's benchmark
    /// shapes this costs about 7 % less than `Size` (both with the local improvement); on mixed-25 0.9 %
    /// more, so the driver runs both when its budget allows and keeps the cheaper plan.
    #[default]
    Packing,
    /// kube-scheduler's queue order pod by pod (`semantics::queue`: priority, then queue position),
    /// classes interleaved as their pods come; equal new-node choices as `Packing`. The queue repair
    /// (`driver`) plans the pods after a repaired pod so, which leaves pending the latest ones.
    Queue,
    /// As `Packing`, with every class under a hostname topology spread first too (either
    /// `whenUnsatisfiable`, kube-scheduler's defaulted ones included; a hard or Respect-held maxSkew-1
    /// spread allows one pod per node until every node has one). Placed first, such pods take the existing nodes' hostnames and the first new
    /// nodes', each beside the others; placed after the large pods, each may need a node of its own
    /// once the free room is gone (cluster-saas at 1 s: 10.51 $/h in the better of the other two
    /// orders, 10.38 in this one). The driver's third pass, where it changes the order.
    Hosts,
}

/// The placement is never cut before this many pods are placed (a few milliseconds of careful
/// placement): however small the budget, batch after batch makes progress in useful steps.
const CUT_AFTER_PODS: usize = 256;

/// How many configurations per group are examined with the look-ahead, and how many following classes
/// the look-ahead counts.
const TOP_PER_GROUP: usize = 16;
const LOOKAHEAD_CLASSES: usize = 32;

/// With `Options::priced_lookahead`, the look-ahead leaves out a following class on a configuration
/// that would cost it more than this many times its least cost per pod (`Greedy::unit`). Measured with
/// the 1 s MILP on the 14 benchmark workloads (1.5, 1.75, 2, 3): 2 is the only value that changes no
/// plan but cluster-platform's (35.32 to 31.00); 1.5 and 1.75 make openb-7d's dearer.
const DEAR_FOR_NEXT: f64 = 2.0;

/// The greedy plan in the packing order (the cheaper order on every corpus workload but mixed-25, where
/// the size order wins by 0.9 %; the MILP driver runs both when its budget allows).
pub fn plan(p: &Problem) -> Outcome {
    plan_in(p, Order::Packing)
}

/// The greedy plan in the given order: placed, replayed (again with the pessimistic hostname rule if
/// it does not replay), settled and improved locally.
pub fn plan_in(p: &Problem, order: Order) -> Outcome {
    plan_within(p, order, &super::never, &super::never).0
}

/// [`plan_in`] under a budget: once `spent()`, the remaining pods are placed by the fast pass
/// (`Greedy::place_fast`: the class's recent nodes and configurations first, the careful choice only
/// when none of them takes the pod) and the local improvement is skipped or stops. Every placement
/// still passes the same filters and the plan is replayed as always, so a spent budget makes the plan
/// dearer, never invalid. Once `cut()` (and [`CUT_AFTER_PODS`] pods are placed), the placement stops:
/// the pods not placed yet, and those the pass rejected meanwhile (their in-batch targets may be among
/// the first), are deferred to the next batch (`Outcome::deferred`). A plan that defers pods is not
/// planned again if it does not replay (it is settled, the failing pods deferred too) and not
/// improved. Also returns how many pods the fast pass placed.
pub(crate) fn plan_within(p: &Problem, order: Order, spent: super::Spent, cut: super::Spent) -> (Outcome, usize) {
    let t = std::time::Instant::now();
    let priced_lookahead = order == Order::Size;
    let (mut o, mut fast) = run(p, Options { pessimistic_hostname: false, order, priced_lookahead }, spent, cut);
    let placed = t.elapsed();
    let mut failures = verify(p, &o);
    if !failures.is_empty() && o.deferred.is_empty() && !cut() {
        (o, fast) = run(p, Options { pessimistic_hostname: true, order, priced_lookahead }, spent, cut);
        failures = verify(p, &o);
    }
    let o = settle(p, o, failures);
    let verified = t.elapsed();
    // A cut batch has spent what the budget allows (the cut comes before the deadline, with room for
    // the replay only).
    let improved = if spent() || !o.deferred.is_empty() { o } else { improve::shrink_within(p, &o, spent).unwrap_or(o) };
    tracing::debug!(
        ?order,
        placement_ms = placed.as_millis(),
        replay_ms = (verified - placed).as_millis(),
        improvement_ms = (t.elapsed() - verified).as_millis(),
        deferred = improved.deferred.len(),
        "greedy pass"
    );
    (improved, fast)
}

/// Drops placements that do not replay (should not happen but under a cut batch, whose plan is not
/// planned again; kept as a safety net) and the new nodes left empty, until the outcome replays
/// cleanly. The dropped pods are left pending, or deferred if the batch was cut. `failures` is the
/// replay of `o` as given (each replay of a large batch costs as much as a good part of the placement,
/// so it is not repeated).
fn settle(p: &Problem, mut o: Outcome, mut failures: Vec<(PodId, Reject)>) -> Outcome {
    for round in 0..8 {
        if round > 0 {
            failures = verify(p, &o);
        }
        if failures.is_empty() {
            break;
        }
        let failed: BTreeSet<PodId> = failures.iter().map(|(id, _)| *id).collect();
        o.placements.retain(|(id, _)| !failed.contains(id));
        if o.deferred.is_empty() {
            o.unschedulable.append(&mut failures);
        } else {
            o.deferred.extend(failures.drain(..).map(|(id, _)| id));
        }
        super::resize::remove_empty_nodes(&mut o);
    }
    o
}

/// Class order: higher priority first (kube-scheduler's queue, `semantics::queue`: when not everything
/// fits, the lower priorities are left pending), then `Order` within a priority; ties by first
/// appearance. Under `Order::Queue`, by each class's earliest pod.
pub(crate) fn class_order(p: &Problem, how: Order) -> Vec<usize> {
    let mut order: Vec<usize> = (0..p.classes.len()).collect();
    if how == Order::Queue {
        // By each class's earliest pod (its first: a class's pods are in queue order).
        order.sort_by(|&a, &b| crate::semantics::queue::key(p.pod(p.classes[a].pods[0])).cmp(&crate::semantics::queue::key(p.pod(p.classes[b].pods[0]))));
        return order;
    }
    let packing = matches!(how, Order::Packing | Order::Hosts);
    let first = |c: usize| -> bool {
        let pod = p.pod(p.classes[c].rep);
        packing && (pod.anti_affinity.iter().any(|t| t.key == keys::HOSTNAME && interpod::term_matches(t, pod)) || (how == Order::Hosts && pod.spread.iter().any(|s| s.key == keys::HOSTNAME)))
    };
    let ratio = mem_per_cpu(p);
    let dominant = |r: &Resources| -> i64 { if packing { r.cpu_m.max((r.memory as f64 / ratio) as i64) } else { r.cpu_m } };
    order.sort_by(|&a, &b| {
        let (ra, rb) = (&p.pod(p.classes[a].rep).requests, &p.pod(p.classes[b].rep).requests);
        let (pa, pb) = (p.pod(p.classes[a].rep).priority, p.pod(p.classes[b].rep).priority);
        pb.cmp(&pa)
            .then(first(b).cmp(&first(a)))
            .then(dominant(rb).cmp(&dominant(ra)))
            .then(rb.cpu_m.cmp(&ra.cpu_m))
            .then(rb.memory.cmp(&ra.memory))
            .then(p.pod(p.classes[a].rep).seq.cmp(&p.pod(p.classes[b].rep).seq))
    });
    order
}

/// Bytes of memory per millicore over the candidate configurations' allocatable.
fn mem_per_cpu(p: &Problem) -> f64 {
    let (cpu, mem) = p.configs.iter().fold((0f64, 0f64), |(c, m), f| (c + f.allocatable.cpu_m as f64, m + f.allocatable.memory as f64));
    if cpu > 0.0 { mem / cpu } else { 1.0 }
}

struct Greedy<'p, 'a> {
    p: &'p Problem<'a>,
    opts: Options,
    fs: FilterState<'a>,
    /// Per FilterState node: the target it stands for, or None (deleting nodes).
    targets: Vec<Option<Target>>,
    new_nodes: Vec<usize>,
    usage: Vec<PoolUsage>,
    /// New nodes per capacity reservation (`Problem::reservations`).
    reserved: Vec<u32>,
    /// (free cpu, node) for target nodes: best fit by cpu.
    free: BTreeSet<(i64, usize)>,
    /// Nodes a class can never use again (permanent rejections), a bit per FilterState node; a class's
    /// set grows only when it skips a node (nodes past its end are not skipped), so opening a node costs
    /// nothing per class (every class's set was resized at every pod before: 3,390 classes at 100,000
    /// pods of Karpenter's shapes, 68 MB of flags).
    skip: Vec<Vec<u64>>,
    /// `free` without the nodes skipped for one class or too full for its pods (see `Focus`).
    focus: Focus,
    remaining: Vec<usize>,
    placements: Vec<(PodId, Target)>,
    pool_domains: FxHashMap<(usize, usize), BTreeSet<String>>,
    /// Per class: rejection reasons seen for NodePools while opening nodes.
    pool_rejects: Vec<BTreeMap<String, Reject>>,
    /// Per class: a bit per configuration, set when the class is compatible with it (`Class::compatible`).
    compatible: Vec<Vec<u64>>,
    /// FilterState index of each new node.
    new_ix: Vec<usize>,
    /// Per configuration group: its configurations by increasing cost.
    by_cost: Vec<Vec<usize>>,
    /// New nodes opened per zone (the `Packing` tie-break).
    zone_nodes: FxHashMap<String, usize>,
    /// Per class: the last nodes its pods went to and the last configurations opened for it, most
    /// recent last (the fast pass's candidates; see `place_fast`); then the last nodes of any class.
    recent_nodes: Vec<VecDeque<usize>>,
    recent_any: VecDeque<usize>,
    recent_configs: Vec<VecDeque<usize>>,
    /// Per class: the view its last pod was prepared with (`FilterState::prepare_like`).
    prepared: Vec<Option<Prepared>>,
    /// Per configuration: the room it leaves for workload pods (`Config::room`), computed once; the
    /// configuration choice reads it for every configuration of every group at every opening.
    rooms: Vec<Resources>,
    /// Per NodePool with limits: the largest capacity any of its configurations has in each limited
    /// resource. While a node of that capacity still fits the limits, every configuration does
    /// (`limits::check` is monotone in the added capacity), so the per-configuration check is skipped.
    pool_max_capacity: Vec<Resources>,
    /// A candidate new node per configuration, as `choose_config` and `open_recent` judge it (named like
    /// a planned node no plan reaches), built when first needed: the same for every pod.
    candidates: FxHashMap<usize, SimNode<'a>>,
    /// Per class: how many of its pods fit each configuration of its `by_group` lists, in their order
    /// (`copies_in` on the configuration's room), computed at the class's first opening: the choice
    /// of a configuration reads it for every configuration of every group at every opening.
    fits: Vec<Vec<u32>>,
    /// Per class: the least cost per pod any one of its configurations offers it alone (cost over the
    /// copies it takes, at most its per-node cap), computed when the look-ahead first counts the class;
    /// NaN before.
    unit: Vec<f64>,
}

/// How many recent nodes and configurations per class the fast pass tries: enough for a class spread
/// over a few zones to find a node in each.
const RECENT: usize = 8;

/// How many open nodes with room for its cpu the fast pass's best-fit scan visits per pod. Measured on
/// Karpenter's shapes with every pod in the fast pass: 32 nodes cost 51 % more than the full greedy plan
/// at 5,000 pods, 1024 nodes 12 % (as much as an unbounded scan), at nearly the same speed, since
/// nodes a class can never use leave its view (`Focus`).
const FAST_SCAN: usize = 1024;

/// Remembers `x` as the most recent entry of a short list.
fn remember(list: &mut VecDeque<usize>, x: usize) {
    if list.back() == Some(&x) {
        return;
    }
    if let Some(i) = list.iter().position(|&y| y == x) {
        list.remove(i);
    }
    if list.len() == RECENT {
        list.pop_front();
    }
    list.push_back(x);
}

/// Per NodePool: the largest capacity of its configurations in each resource its limits name.
fn pool_max_capacity(p: &Problem) -> Vec<Resources> {
    let mut out = vec![Resources::default(); p.cluster.nodepools.len()];
    for c in &p.configs {
        if let Some(l) = &p.cluster.nodepools[c.pool].limits {
            for name in &l.limited {
                let m = out[c.pool].get(name).max(c.capacity.get(name));
                out[c.pool].set(name, m);
            }
        }
    }
    out
}

/// A bit set of `n` bits with `set` on.
/// How many copies of `pod` an empty node with attach `limits` takes by NodeVolumeLimits (pods of a
/// class bring as many volumes each; counted apart, as if they shared none).
fn attach_copies(limits: &AttachLimits, pod: &Pod) -> u32 {
    volume_limits::counts(pod).into_iter().filter_map(|(d, n)| limits.get(d).map(|&l| (l.max(0) / n) as u32)).min().unwrap_or(u32::MAX)
}

/// `limits` less the volumes of `k` copies of `pod`.
fn take_volumes(limits: &mut AttachLimits, pod: &Pod, k: usize) {
    for (d, n) in volume_limits::counts(pod) {
        if let Some(l) = limits.get_mut(d) {
            *l -= n * k as i64;
        }
    }
}

fn bits(n: usize, set: &[u32]) -> Vec<u64> {
    let mut b = vec![0u64; n.div_ceil(64)];
    for &i in set {
        b[i as usize / 64] |= 1 << (i % 64);
    }
    b
}

fn has_bit(b: &[u64], i: usize) -> bool {
    b.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// One class's view of the nodes: the entries of `Greedy::free` with at least the class's cpu request
/// free (the only ones its best-fit scan visits) and without the nodes the class has skipped, so that a
/// class whose pods each need a node of their own (hostname anti-affinity) does not walk past every
/// node it already filled. Pods come class by class, so the view belongs to one class at a time. It is
/// built only once the class's scans of `free` have passed over as many skipped entries as `free` has:
/// building it walks the whole range that can hold the class's pods, while most classes' scans end at
/// one of the first nodes (the build at every class change was 6 % of the time at 100,000 pods of
/// Karpenter's shapes, 3,390 classes over 20,000 nodes), and a class that does walk past its skipped
/// nodes has then spent at most one build's walk. Once built it is kept exact under commits, growth (a
/// node that grows back into the range rejoins), openings and skips. Either way a scan visits the same
/// nodes in the same order: the ranged scan of `free` with the skipped ones left out.
struct Focus {
    class: usize,
    /// The class's cpu request: entries below it are left out.
    min_cpu: i64,
    /// The view, once built for the class.
    free: Option<BTreeSet<(i64, usize)>>,
    /// Skipped entries of `free` the class's scans passed over while the view was not built.
    passed: usize,
}

fn permanent(r: &Reject) -> bool {
    match r.plugin {
        Plugin::PodTopologySpread => r.unresolvable,
        Plugin::InterPodAffinity => r.reason.contains("anti-affinity"),
        _ => true,
    }
}

/// The placement: pods in class order (`class_order`), each placed carefully (`Greedy::place`) until
/// `spent()`, then by the fast pass, until `cut()` defers the rest (`plan_within`); pods that fit
/// nowhere are retried while a pass makes progress. Returns the outcome, downsized, and how many pods
/// the fast pass placed.
fn run(p: &Problem, opts: Options, spent: super::Spent, cut: super::Spent) -> (Outcome, usize) {
    let (fs, _) = scheduler_state(p, &[]);
    let mut targets = vec![None; p.cluster.nodes.len()];
    let mut free = BTreeSet::new();
    for &n in &p.existing {
        targets[n] = Some(Target::Existing(n));
        free.insert((fs.nodes()[n].free().cpu_m, n));
    }
    let mut g = Greedy {
        p,
        opts,
        fs,
        targets,
        new_nodes: Vec::new(),
        usage: p.usage.clone(),
        reserved: vec![0; p.reservations.len()],
        free,
        skip: vec![Vec::new(); p.classes.len()],
        focus: Focus { class: usize::MAX, min_cpu: 0, free: None, passed: 0 },
        remaining: p.classes.iter().map(|c| c.pods.len()).collect(),
        placements: Vec::new(),
        pool_domains: FxHashMap::default(),
        pool_rejects: vec![BTreeMap::new(); p.classes.len()],
        compatible: p.classes.iter().map(|c| bits(p.configs.len(), &c.compatible)).collect(),
        new_ix: Vec::new(),
        by_cost: p
            .groups
            .iter()
            .map(|g| {
                let mut v: Vec<usize> = g.iter().map(|&f| f as usize).collect();
                v.sort_by(|&a, &b| p.configs[a].cost.total_cmp(&p.configs[b].cost).then(a.cmp(&b)));
                v
            })
            .collect(),
        zone_nodes: FxHashMap::default(),
        recent_nodes: vec![VecDeque::new(); p.classes.len()],
        recent_any: VecDeque::new(),
        recent_configs: vec![VecDeque::new(); p.classes.len()],
        prepared: vec![None; p.classes.len()],
        rooms: p.configs.iter().map(|c| c.room()).collect(),
        pool_max_capacity: pool_max_capacity(p),
        candidates: FxHashMap::default(),
        fits: vec![Vec::new(); p.classes.len()],
        unit: vec![f64::NAN; p.classes.len()],
    };
    let order = class_order(p, opts.order);
    let mut queue: VecDeque<(usize, PodId)> = order.iter().flat_map(|&c| p.classes[c].pods.iter().map(move |&id| (c, id))).collect();
    if opts.order == Order::Queue {
        queue.make_contiguous().sort_by(|a, b| crate::semantics::queue::key(p.pod(a.1)).cmp(&crate::semantics::queue::key(p.pod(b.1))));
    }
    let mut unschedulable: Vec<(PodId, Reject)> = Vec::new();
    let mut deferred: Vec<PodId> = Vec::new();
    let mut fast = 0;
    loop {
        let mut failed = VecDeque::new();
        let before = g.placements.len();
        while let Some((c, id)) = queue.pop_front() {
            if g.placements.len() >= CUT_AFTER_PODS && cut() {
                deferred.extend(failed.drain(..).map(|(_, id, _)| id).chain([id]).chain(queue.drain(..).map(|(_, id)| id)));
                break;
            }
            let placed = if spent() {
                fast += 1;
                g.place_fast(c, id, &order)
            } else {
                g.place(c, id, &order, false)
            };
            if let Err(r) = placed {
                failed.push_back((c, id, r));
            }
        }
        if !deferred.is_empty() {
            break;
        }
        if failed.is_empty() || g.placements.len() == before {
            unschedulable.extend(failed.into_iter().map(|(_, id, r)| (id, r)));
            break;
        }
        queue = failed.into_iter().map(|(c, id, _)| (c, id)).collect();
    }
    let mut o = Outcome { new_nodes: g.new_nodes.clone(), placements: g.placements.clone(), unschedulable, deferred };
    downsize(p, &mut o);
    (o, fast)
}

impl<'p, 'a> Greedy<'p, 'a> {
    /// kube-scheduler's PreFilter view for a pod of `class`, from the class's last one when there is one.
    fn prepare(&mut self, class: usize, pod: &Pod) -> Prepared {
        let prep = match &self.prepared[class] {
            Some(like) => self.fs.prepare_like(like, pod),
            None => self.fs.prepare(pod),
        };
        self.prepared[class] = Some(prep.clone());
        prep
    }

    /// Points `focus` at `class`, dropping the view if it was another class's.
    fn focus_on(&mut self, class: usize) {
        if self.focus.class == class {
            return;
        }
        self.focus = Focus { class, min_cpu: self.p.pod(self.p.classes[class].rep).requests.cpu_m, free: None, passed: 0 };
    }

    /// Counts `passed` skipped entries against the class's scans and builds its view once they reach
    /// the size of `free` (see `Focus`).
    fn focus_passed(&mut self, passed: usize) {
        self.focus.passed += passed;
        if self.focus.free.is_none() && self.focus.passed >= self.free.len().max(1) {
            let skip = &self.skip[self.focus.class];
            self.focus.free = Some(self.free.range((self.focus.min_cpu, 0)..).copied().filter(|&(_, ix)| !has_bit(skip, ix)).collect());
        }
    }

    /// Node `ix`'s free cpu changed from `before`: moves its entry in `free` and, if there, in `focus`.
    fn refree(&mut self, ix: usize, before: i64) {
        let now = self.fs.nodes()[ix].free().cpu_m;
        self.free.remove(&(before, ix));
        self.free.insert((now, ix));
        if let Some(focus) = &mut self.focus.free {
            focus.remove(&(before, ix));
            let skipped = self.skip.get(self.focus.class).is_some_and(|s| has_bit(s, ix));
            if now >= self.focus.min_cpu && !skipped {
                focus.insert((now, ix));
            }
        }
    }

    /// Marks node `ix` as one `class` can never use.
    fn skip_node(&mut self, class: usize, ix: usize) {
        let s = &mut self.skip[class];
        if s.len() <= ix / 64 {
            s.resize(ix / 64 + 1, 0);
        }
        s[ix / 64] |= 1 << (ix % 64);
    }

    /// Makes sure the NodePool domain universes of every spread constraint of the class are cached.
    fn ensure_domains(&mut self, class: usize, pod: &Pod) {
        let p = self.p;
        for ci in 0..pod.spread.len() {
            self.pool_domains.entry((class, ci)).or_insert_with(|| p.pool_domains(pod, ci));
        }
    }

    /// stowage's spread rule on top of kube-scheduler's: the domain universe also holds every domain a
    /// NodePool can create (rule b), counted as empty; hostname optionally pessimistic. Needs
    /// `ensure_domains` first.
    fn wide_spread_ok(&self, class: usize, prep: &Prepared, pod: &Pod, labels: &Labels) -> bool {
        for k in 0..FilterState::spread_len(prep) {
            let (ci, counts, min) = self.fs.spread_view(prep, k);
            let c = &pod.spread[ci];
            let Some(d) = labels.get(&c.key) else { return false };
            let match_num = counts.get(d).copied().unwrap_or(0);
            let self_match = spread::self_match(c, pod);
            if c.key == keys::HOSTNAME {
                if self.opts.pessimistic_hostname && !spread::skew_ok(match_num, self_match, 0, c.max_skew) {
                    return false;
                }
                continue;
            }
            let universe = &self.pool_domains[&(class, ci)];
            let extra = universe.iter().filter(|u| !counts.contains_key(u.as_str())).count();
            let min_u = if extra > 0 { 0 } else { min.unwrap_or(0) };
            let gm = spread::global_min(Some(min_u), counts.len() + extra, c.min_domains);
            if !spread::skew_ok(match_num, self_match, gm, c.max_skew) {
                return false;
            }
        }
        true
    }

    /// Places one pod carefully: the best of the open nodes, else the cheaper of a grown node and a new
    /// one. With `fast` (the fast pass), the scan visits only `FAST_SCAN` nodes that have the cpu and no
    /// node grows, so a pod costs a bounded number of filter calls plus the choice of a configuration.
    fn place(&mut self, class: usize, id: PodId, order: &[usize], fast: bool) -> Result<(), Reject> {
        let p = self.p;
        let pod = p.pod(id);
        self.ensure_domains(class, pod);
        self.focus_on(class);
        let prep = self.prepare(class, pod);
        let has_spread = FilterState::spread_len(&prep) > 0;
        let mut best: Option<((i64, f64, i64), usize)> = None;
        // Nodes come by increasing free cpu, so a node whose spread balance is the smallest any node can
        // have and that misses no preference cannot be beaten by a later one.
        let balance_floor: i64 = (0..FilterState::spread_len(&prep)).map(|k| self.fs.spread_view(&prep, k).2.unwrap_or(0).max(0)).sum();
        let mut newly_skipped = Vec::new();
        // The class's own view (or `free` without the nodes it skipped, the same nodes in the same
        // order, until the view is built). The fast pass visits the `FAST_SCAN` tightest nodes only.
        let from = (pod.requests.cpu_m.max(self.focus.min_cpu), 0);
        let mut passed = 0;
        let nodes: Box<dyn Iterator<Item = &(i64, usize)>> = match &self.focus.free {
            Some(focus) => Box::new(focus.range(from..)),
            None => {
                let skip = &self.skip[class];
                Box::new(self.free.range(from..).filter(|&&(_, ix)| {
                    let skipped = has_bit(skip, ix);
                    passed += usize::from(skipped);
                    !skipped
                }))
            }
        };
        let visit: Box<dyn Iterator<Item = &(i64, usize)>> = if fast { Box::new(nodes.take(FAST_SCAN)) } else { nodes };
        // A node without the room for the pod is rejected by NodeResourcesFit or an earlier plugin of
        // the filter, all of them for good (`permanent`): said without running the filter and building
        // its reason (most nodes a class visits, once per class, at 100,000 pods of Karpenter's shapes).
        let plain = pod.invalid.is_none();
        for &(free_cpu, ix) in visit {
            let n = &self.fs.nodes()[ix];
            if plain && !pod.requests.fits_beside(&n.requested, &n.allocatable) {
                newly_skipped.push(ix);
                continue;
            }
            if let Err(r) = self.fs.filter(&prep, pod, ix) {
                if permanent(&r) {
                    newly_skipped.push(ix);
                }
                continue;
            }
            let node = &self.fs.nodes()[ix];
            if !self.wide_spread_ok(class, &prep, pod, &node.labels) {
                continue;
            }
            let soft = placement_soft(p.weights, pod, &node.labels, Some(&node.name), &node.taints);
            let balance: i64 = (0..FilterState::spread_len(&prep))
                .map(|k| {
                    let (ci, counts, _) = self.fs.spread_view(&prep, k);
                    node.labels.get(&pod.spread[ci].key).and_then(|d| counts.get(d)).copied().unwrap_or(0)
                })
                .sum();
            let key = (balance, soft, free_cpu);
            if best.as_ref().is_none_or(|(b, _)| key < *b) {
                best = Some((key, ix));
            }
            if soft == 0.0 && (!has_spread || balance <= balance_floor) {
                break;
            }
        }
        for ix in newly_skipped {
            self.skip_node(class, ix);
            let entry = (self.fs.nodes()[ix].free().cpu_m, ix);
            if let Some(focus) = &mut self.focus.free {
                focus.remove(&entry);
            }
        }
        self.focus_passed(passed);
        if let Some((_, ix)) = best {
            self.commit(class, id, ix);
            return Ok(());
        }
        if fast && self.open_recent(class, id, &prep, pod) {
            return Ok(());
        }
        let fresh = self.choose_config(class, &prep, pod, order);
        let limit = fresh.map_or(f64::INFINITY, |(score, _)| score);
        if let Some((_, ix, to)) = if fast { None } else { self.best_growth(class, &prep, pod, limit) } {
            self.grow(ix, to);
            self.commit(class, id, ix);
            return Ok(());
        }
        match fresh.map(|(_, f)| f) {
            Some(f) => {
                remember(&mut self.recent_configs[class], f);
                let ix = self.open(f);
                self.commit(class, id, ix);
                Ok(())
            }
            None => Err(self.explain(class, pod)),
        }
    }

    fn commit(&mut self, class: usize, id: PodId, ix: usize) {
        let pod = self.p.pod(id);
        let before = self.fs.nodes()[ix].free().cpu_m;
        self.fs.add_pod(pod, ix);
        self.refree(ix, before);
        self.placements.push((id, self.targets[ix].expect("placed on a target")));
        self.remaining[class] -= 1;
        remember(&mut self.recent_nodes[class], ix);
        remember(&mut self.recent_any, ix);
    }

    /// The fast pass, once the budget is spent: the pod goes to the most recent of its class's recent
    /// nodes that takes it, else of the last nodes any pod went to, else where `place` in its fast form
    /// puts it (`FAST_SCAN` of the open nodes, else a new node of a recent configuration of the class
    /// (`open_recent`), else of the configuration `choose_config` names), else where the careful `place`
    /// puts it (every node, growth), so that no pod the careful pass would place is left pending.
    /// A bounded number of filter calls per pod instead of a scan over the open nodes, with the same
    /// filters (kube-scheduler's and stowage's spread rule), so the plan may cost more but is as valid;
    /// soft preferences are weighed only in the bounded scan.
    fn place_fast(&mut self, class: usize, id: PodId, order: &[usize]) -> Result<(), Reject> {
        let p = self.p;
        let pod = p.pod(id);
        self.ensure_domains(class, pod);
        let prep = self.prepare(class, pod);
        let nodes: Vec<usize> = self.recent_nodes[class].iter().rev().chain(self.recent_any.iter().rev()).copied().collect();
        for ix in nodes {
            if self.fs.filter(&prep, pod, ix).is_ok() && self.wide_spread_ok(class, &prep, pod, &self.fs.nodes()[ix].labels) {
                self.commit(class, id, ix);
                return Ok(());
            }
        }
        self.place(class, id, order, true).or_else(|_| self.place(class, id, order, false))
    }

    /// The fast pass's new node: the most recent of the class's recent configurations that takes the
    /// pod (NodePool limits, filters, stowage's spread rule), opened with the pod on it.
    fn open_recent(&mut self, class: usize, id: PodId, prep: &Prepared, pod: &'a Pod) -> bool {
        let configs: Vec<usize> = self.recent_configs[class].iter().rev().copied().collect();
        for f in configs {
            if self.limits_ok(f).is_err() {
                continue;
            }
            self.ensure_candidate(f);
            let sim = &self.candidates[&f];
            if self.fs.filter_new(prep, pod, sim).is_ok() && self.wide_spread_ok(class, prep, pod, &sim.labels) {
                remember(&mut self.recent_configs[class], f);
                let ix = self.open(f);
                self.commit(class, id, ix);
                return true;
            }
        }
        false
    }

    /// The cheapest way to make room for the pod on a new node of this plan by moving it to a larger
    /// instance type of its group, at a price step of at most `limit`: (price step, node, configuration).
    fn best_growth(&mut self, class: usize, prep: &Prepared, pod: &Pod, limit: f64) -> Option<(f64, usize, usize)> {
        let p = self.p;
        let mut best: Option<(f64, usize, usize)> = None;
        // The new nodes not skipped for the class, in the order they were opened.
        let open: Vec<usize> = (0..self.new_nodes.len()).filter(|&k| !has_bit(&self.skip[class], self.new_ix[k])).collect();
        for k in open {
            let ix = self.new_ix[k];
            let f = self.new_nodes[k];
            let node = &self.fs.nodes()[ix];
            let mut need = node.requested.clone();
            need.add(&pod.requests);
            if need.fits_in(&node.allocatable) {
                continue; // room enough: the best-fit pass judged it already
            }
            // A node that rejects the pod for good at any size (anti-affinity with a pod on it, taints,
            // node affinity: `permanent`) is judged once, with room made for exactly the pod, and then
            // skipped by the class like the best-fit pass skips it: one-per-node classes otherwise
            // visited every earlier new node at every opening, quadratic in new nodes. No plan changes:
            // growth into such a node always fails the filter below, and the best-fit pass rejects it.
            let keep = node.allocatable.clone();
            self.fs.set_allocatable(ix, need.clone());
            let verdict = self.fs.filter(prep, pod, ix);
            self.fs.set_allocatable(ix, keep);
            if verdict.as_ref().is_err_and(permanent) {
                self.skip_node(class, ix);
                let entry = (self.fs.nodes()[ix].free().cpu_m, ix);
                if self.focus.class == class
                    && let Some(focus) = &mut self.focus.free
                {
                    focus.remove(&entry);
                }
                continue;
            }
            let node = &self.fs.nodes()[ix];
            let cur = &p.configs[f];
            let within = best.as_ref().map_or(limit, |b| b.0.min(limit));
            let Some(&to) = self.by_cost[cur.group].iter().skip_while(|&&g| p.configs[g].cost <= cur.cost).take_while(|&&g| p.configs[g].cost - cur.cost <= within).find(|&&g| {
                let c = &p.configs[g];
                need.fits_in(&c.allocatable)
                    && has_bit(&self.compatible[class], g)
                    && p.cluster.nodepools[c.pool].limits.as_ref().is_none_or(|l| {
                        let without = self.usage[c.pool].capacity.minus(&cur.capacity);
                        limits::check(l, &without, self.usage[c.pool].nodes - 1, &c.capacity).is_ok()
                    })
            }) else {
                continue;
            };
            let delta = p.configs[to].cost - cur.cost;
            if best.as_ref().is_some_and(|b| b.0 <= delta) {
                continue;
            }
            let keep = node.allocatable.clone();
            self.fs.set_allocatable(ix, p.configs[to].allocatable.clone());
            let ok = self.fs.filter(prep, pod, ix).is_ok() && self.wide_spread_ok(class, prep, pod, &self.fs.nodes()[ix].labels);
            self.fs.set_allocatable(ix, keep);
            if ok {
                best = Some((delta, ix, to));
            }
        }
        best
    }

    /// Moves new node `ix` to configuration `to` of its group.
    fn grow(&mut self, ix: usize, to: usize) {
        let Some(Target::New(k)) = self.targets[ix] else { return };
        let from = self.new_nodes[k];
        let before = self.fs.nodes()[ix].free().cpu_m;
        self.fs.set_allocatable(ix, self.p.configs[to].allocatable.clone());
        self.fs.set_attach_limits(ix, self.p.configs[to].attach_limits.clone());
        self.refree(ix, before);
        let pool = self.p.configs[from].pool;
        self.usage[pool].capacity.sub(&self.p.configs[from].capacity);
        self.usage[pool].capacity.add(&self.p.configs[to].capacity);
        self.new_nodes[k] = to;
    }

    fn open(&mut self, f: usize) -> usize {
        let k = self.new_nodes.len();
        let sim = new_sim_node(self.p, f, &new_node_name(self.p, k));
        let ix = self.fs.add_planned_node(sim);
        self.new_ix.push(ix);
        self.new_nodes.push(f);
        self.targets.push(Some(Target::New(k)));
        self.free.insert((self.fs.nodes()[ix].free().cpu_m, ix));
        // No class has skipped a new node yet.
        let free_cpu = self.fs.nodes()[ix].free().cpu_m;
        if free_cpu >= self.focus.min_cpu
            && let Some(focus) = &mut self.focus.free
        {
            focus.insert((free_cpu, ix));
        }
        let c = &self.p.configs[f];
        self.usage[c.pool].capacity.add(&c.capacity);
        self.usage[c.pool].nodes += 1;
        if let Some(r) = c.reservation {
            self.reserved[r] += 1;
        }
        *self.zone_nodes.entry(c.zone.clone()).or_default() += 1;
        ix
    }

    /// Whether every configuration of NodePool `pool` fits its limits (see `pool_max_capacity`).
    fn pool_has_room(&self, pool: usize) -> bool {
        match &self.p.cluster.nodepools[pool].limits {
            None => true,
            Some(l) => limits::check(l, &self.usage[pool].capacity, self.usage[pool].nodes, &self.pool_max_capacity[pool]).is_ok(),
        }
    }

    /// Makes sure the candidate new node of configuration `f` is built (see `candidates`).
    fn ensure_candidate(&mut self, f: usize) {
        let p = self.p;
        // Named like a planned node no plan reaches (`<prefix>-<usize::MAX>`): `node_prefix` keeps that
        // form free of existing names, so the candidate shares no hostname domain with a real node.
        self.candidates.entry(f).or_insert_with(|| new_sim_node(p, f, &new_node_name(p, usize::MAX)));
    }

    /// Whether one more node of `f` stays within its NodePool's limits and its capacity reservation.
    fn limits_ok(&self, f: usize) -> Result<(), String> {
        let c = &self.p.configs[f];
        if let Some(l) = &self.p.cluster.nodepools[c.pool].limits {
            limits::check(l, &self.usage[c.pool].capacity, self.usage[c.pool].nodes, &c.capacity).map_err(|e| e.to_string())?;
        }
        self.reservation_ok(f).map_err(|e| e.to_string())
    }

    /// Whether the capacity reservation of `f` (if any) takes one more node; every configuration of a
    /// group shares it.
    fn reservation_ok(&self, f: usize) -> Result<(), reservations::Full> {
        reservations::check(&self.p.reservations, &self.reserved, self.p.configs[f].reservation)
    }

    /// How many pods of `class` a node of `f` may take by the class's own topology rules.
    fn class_cap(&self, class: usize, pod: &Pod) -> usize {
        let mut cap = usize::MAX;
        for t in &pod.anti_affinity {
            if t.key == keys::HOSTNAME && interpod::term_matches(t, pod) {
                cap = 1;
            }
        }
        for (ci, c) in pod.spread.iter().enumerate() {
            if !c.is_hard() || !selectors::opt_matches(c.selector.as_ref(), &pod.labels) {
                continue;
            }
            if c.key == keys::HOSTNAME {
                cap = cap.min(c.max_skew as usize);
            } else {
                let d = self.pool_domains.get(&(class, ci)).map_or(1, |u| u.len().max(1));
                cap = cap.min(self.remaining[class].div_ceil(d) + c.max_skew as usize - 1);
            }
        }
        cap.max(1)
    }

    /// The configuration of a new node for the pod and its cost per pod (the look-ahead's score).
    fn choose_config(&mut self, class: usize, prep: &Prepared, pod: &'a Pod, order: &[usize]) -> Option<(f64, usize)> {
        let p = self.p;
        let r = self.remaining[class];
        let own_cap = self.class_cap(class, pod);
        let pos = order.iter().position(|&c| c == class).unwrap_or(0);
        // The next classes with pods left, each with its per-node cap (the same for every configuration).
        let next: Vec<(usize, usize)> = order[pos + 1..].iter().copied().filter(|&c| self.remaining[c] > 0).take(LOOKAHEAD_CLASSES).map(|c| (c, self.class_cap(c, p.pod(p.classes[c].rep)))).collect();
        if self.opts.priced_lookahead {
            for &(c, cap) in &next {
                self.ensure_unit(c, cap);
            }
        }
        let mut best: Option<(f64, std::cmp::Reverse<usize>, f64, usize, usize)> = None;
        let mut scored: Vec<(f64, usize)> = Vec::new();
        self.ensure_fits(class, pod);
        let mut at = 0;
        for (_, configs) in &p.classes[class].by_group {
            let span = at..at + configs.len();
            at += configs.len();
            let rep = configs[0] as usize;
            let pool = p.configs[rep].pool;
            let pool_name = &p.cluster.nodepools[pool].name;
            if let Err(e) = self.reservation_ok(rep) {
                self.pool_rejects[class].entry(pool_name.clone()).or_insert_with(|| Reject::new(Plugin::NodePool, e.to_string()));
                continue;
            }
            self.ensure_candidate(rep);
            let sim = &self.candidates[&rep];
            let verdict = match self.fs.filter_new(prep, pod, sim) {
                Err(rj) => Err(rj),
                Ok(()) if !self.wide_spread_ok(class, prep, pod, &sim.labels) => Err(spread::reject_skew()),
                Ok(()) => Ok(placement_soft(p.weights, pod, &sim.labels, None, &sim.taints)),
            };
            let soft = match verdict {
                Ok(soft) => soft,
                Err(rj) => {
                    self.pool_rejects[class].entry(pool_name.clone()).or_insert(rj);
                    continue;
                }
            };
            // The cheapest configurations per pod of this class, then the look-ahead among them.
            let all_in_limits = self.pool_has_room(pool);
            scored.clear();
            let fits = &self.fits[class][span];
            for (&f, &fit) in configs.iter().zip(fits) {
                let f = f as usize;
                if !all_in_limits && let Err(e) = self.limits_ok(f) {
                    if !self.pool_rejects[class].contains_key(pool_name) {
                        self.pool_rejects[class].insert(pool_name.clone(), Reject::new(Plugin::NodePool, e));
                    }
                    continue;
                }
                let k = (fit as usize).min(r).min(own_cap).max(1);
                scored.push((p.configs[f].cost / k as f64, f));
            }
            // The TOP_PER_GROUP least by (cost per pod, index), a total order: selected, then sorted.
            let by_score = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            if scored.len() > TOP_PER_GROUP {
                scored.select_nth_unstable_by(TOP_PER_GROUP - 1, by_score);
                scored.truncate(TOP_PER_GROUP);
            }
            scored.sort_by(by_score);
            for &(_, f) in &scored {
                let n = self.lookahead(class, pod, own_cap, f, &next);
                let score = p.configs[f].cost / n as f64 + soft;
                let zone_load = match self.opts.order {
                    Order::Packing | Order::Queue | Order::Hosts => self.zone_nodes.get(&p.configs[f].zone).copied().unwrap_or(0),
                    Order::Size => 0,
                };
                // Equal cost per pod (the node tie-break in the cost aside): the node taking more pods,
                // so fewer nodes (behaviour 11), then the cheaper, the emptier zone, the first.
                let key = (score, std::cmp::Reverse(n), p.configs[f].cost, zone_load, f);
                if best.as_ref().is_none_or(|b| key.0 < b.0 || (key.0 == b.0 && (key.1, key.2, key.3, key.4) < (b.1, b.2, b.3, b.4))) {
                    best = Some(key);
                }
            }
        }
        best.map(|b| (b.0, b.4))
    }

    /// Fills `fits[class]` (see there) if it is not yet.
    fn ensure_fits(&mut self, class: usize, pod: &Pod) {
        let p = self.p;
        if self.fits[class].is_empty() {
            let rooms = &self.rooms;
            self.fits[class] = p.classes[class]
                .by_group
                .iter()
                .flat_map(|(_, configs)| configs.iter().map(|&f| pod.requests.copies_in(&rooms[f as usize]).min(attach_copies(&p.configs[f as usize].attach_limits, pod))))
                .collect();
        }
    }

    /// Fills `unit[class]` (see there) if it is not yet, with the class's per-node `cap`.
    fn ensure_unit(&mut self, class: usize, cap: usize) {
        if !self.unit[class].is_nan() {
            return;
        }
        let p = self.p;
        self.ensure_fits(class, p.pod(p.classes[class].rep));
        let configs = p.classes[class].by_group.iter().flat_map(|(_, configs)| configs.iter());
        let per_pod = configs.zip(&self.fits[class]).filter(|&(_, &fit)| fit > 0).map(|(&f, &fit)| p.configs[f as usize].cost / (fit as usize).min(cap) as f64);
        self.unit[class] = per_pod.fold(f64::INFINITY, f64::min);
    }

    /// Pods a new node of `f` would take: this class first, then the next classes (with their caps),
    /// by resources; with `priced_lookahead`, only the next classes `f` costs at most
    /// [`DEAR_FOR_NEXT`] times their least cost per pod (`unit`).
    fn lookahead(&self, class: usize, pod: &Pod, own_cap: usize, f: usize, next: &[(usize, usize)]) -> usize {
        let p = self.p;
        let mut left: Resources = self.rooms[f].clone();
        // The attach limits left, copied once a pod with attach volumes is counted: most pods have none,
        // and copying the limits for every configuration at every opening was a tenth of the greedy
        // time at 100,000 pods.
        let limits = &p.configs[f].attach_limits;
        let mut volumes_left: Option<AttachLimits> = None;
        let copies = |q: &Pod, volumes_left: &Option<AttachLimits>| if q.volumes.attach.is_empty() { u32::MAX } else { attach_copies(volumes_left.as_ref().unwrap_or(limits), q) };
        let take_volumes_of = |q: &Pod, k: usize, volumes_left: &mut Option<AttachLimits>| {
            if !q.volumes.attach.is_empty() {
                take_volumes(volumes_left.get_or_insert_with(|| limits.clone()), q, k);
            }
        };
        let take = pod.requests.copies_in(&left).min(copies(pod, &volumes_left)).min(self.remaining[class] as u32).min(own_cap as u32) as usize;
        let mut n = take.max(1);
        left.sub(&pod.requests.scaled(n as i64));
        take_volumes_of(pod, n, &mut volumes_left);
        for &(c, cap) in next {
            if !has_bit(&self.compatible[c], f) {
                continue;
            }
            let q = p.pod(p.classes[c].rep);
            if self.opts.priced_lookahead {
                // Copies of the class a node of `f` would take alone (by resources and attach limits, as
                // `fits` counts them for `unit`), so what it costs the class per pod.
                let alone = q.requests.copies_in(&self.rooms[f]).min(copies(q, &None)).min(cap as u32);
                if alone == 0 || p.configs[f].cost / alone as f64 > DEAR_FOR_NEXT * self.unit[c] {
                    continue;
                }
            }
            let t = q.requests.copies_in(&left).min(copies(q, &volumes_left)).min(self.remaining[c] as u32).min(cap as u32) as usize;
            if t > 0 {
                n += t;
                left.sub(&q.requests.scaled(t as i64));
                take_volumes_of(q, t, &mut volumes_left);
            }
        }
        n
    }

    fn explain(&mut self, class: usize, pod: &Pod) -> Reject {
        let p = self.p;
        let prep = self.prepare(class, pod);
        let mut rejects = Vec::new();
        let mut total = 0;
        for ix in 0..self.fs.nodes().len() {
            if self.targets[ix].is_none() {
                continue;
            }
            total += 1;
            match self.fs.filter(&prep, pod, ix) {
                Err(r) => rejects.push(r),
                Ok(()) => rejects.push(spread::reject_skew()),
            }
        }
        let mut pools: BTreeMap<String, Reject> = p.classes[class].rejections.clone();
        for (k, v) in &self.pool_rejects[class] {
            pools.insert(k.clone(), v.clone());
        }
        // A pod no node could take (PreFilter): kube-scheduler's event names the one reason over the
        // nodes it sees (registered ones, not the plan's or those in flight).
        if let Some(r) = crate::semantics::prefilter(pod) {
            let seen = p.cluster.nodes.iter().filter(|n| !n.in_flight).count();
            return Reject { plugin: r.plugin, reason: format!("0/{seen} nodes are available: {}.", r.reason), unresolvable: true };
        }
        let plugin = pools.values().map(|r| r.plugin).chain(rejects.iter().map(|r| r.plugin)).next().unwrap_or(Plugin::NodePool);
        let mut reason = summarize(total, &rejects);
        if p.cluster.nodepools.is_empty() {
            reason.push_str(" No NodePool exists to launch a node.");
        } else if !pools.is_empty() {
            let parts: Vec<String> = pools.iter().map(|(n, r)| format!("{n}: {}", r.reason)).collect();
            reason.push_str(&format!(" No NodePool can launch a node for it ({}).", parts.join("; ")));
        }
        Reject { plugin, reason, unresolvable: false }
    }
}
