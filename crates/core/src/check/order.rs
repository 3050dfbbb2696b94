//! Step 3 of the checker: is there an order in which kube-scheduler binds every placed pod where the
//! plan puts it? Three outcomes ([`Outcome`]): an order exists (`Valid`), none exists (`Invalid`, with
//! a witness), or the search ran out of budget first (`Undecided`).
//!
//! ```text
//! 1. the plan's own order, then passes over the rejected pods until a pass binds nothing
//!                                                  every pod bound            → Valid
//! 2. static witness: a pod left is rejected by a filter that no order can change
//!    (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
//!     VolumeBinding, VolumeZone)                                             → Invalid
//! 3. exhaustive search over sets of bound pods (below)   an order found      → Valid
//!                                                  every reachable set seen  → Invalid
//!                                                  budget spent first        → Undecided
//! ```
//!
//! Why step 2 is sound: binding only ever adds pods to nodes, and every placed pod ends on its node.
//! Taints, labels, node names and volumes do not depend on other pods; requests and host ports only
//! accumulate, so a pod that does not fit or collides now still does so once every placed pod is
//! bound. Only PodTopologySpread (counts can rise to meet a skew or a minimum) and InterPodAffinity (a
//! required peer can arrive) can turn a rejection into a pass, so only they need a search.
//!
//! The search: every placed pod has a fixed node, so the cluster after binding a set S of pods is the
//! same whatever order S was bound in, and the search is over sets, not sequences. Pods that agree on
//! everything the filters read (namespace, labels, requests, constraints, volumes) and share a node are
//! interchangeable: a state is a count of bound pods per such group. Depth-first from the state before
//! any planned pod is bound, groups tried in the plan's order, each state expanded at most once; the
//! budget counts filter checks.
//!
//! The checker shares nothing with the planners' own bind-order search (`solve`), on purpose.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::domain::pod::Pod;
use crate::semantics::filter::FilterState;
use crate::semantics::{Plugin, Reject};

/// Filter checks the search may spend before it answers `Undecided`, beside a share per pod.
pub const SEARCH_BUDGET_BASE: usize = 200_000;
/// Filter checks added to the budget per placed pod.
pub const SEARCH_BUDGET_PER_POD: usize = 50;

/// Whether some bind order places every placed pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    /// An order exists (found).
    #[default]
    Valid,
    /// No order exists: a static witness, or the search saw every reachable state.
    Invalid,
    /// The search spent its budget before it found an order or saw every state.
    Undecided,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Valid => "valid",
            Outcome::Invalid => "invalid",
            Outcome::Undecided => "undecided",
        }
    }
}

/// One placed pod: its index in the cluster, its node in the filter state, its key.
#[derive(Clone, Copy, Debug)]
pub struct Placed<'p> {
    pub pod: usize,
    pub node: usize,
    pub key: &'p str,
}

/// What the replay found.
#[derive(Debug, Default)]
pub struct Found<'p> {
    pub outcome: Outcome,
    /// The plan's own order bound every pod.
    pub stated_order_ok: bool,
    /// How the answer was reached, for the report's notes.
    pub notes: Vec<String>,
    /// For `Invalid` and `Undecided`: the pods left unbound and why (the witness, or where the search
    /// got deepest).
    pub left: Vec<(Placed<'p>, Reject)>,
    /// Filter checks the search spent (0 when steps 1 and 2 answered).
    pub search_checks: usize,
}

/// The plugins whose verdict on a placed pod no bind order can change (module comment, step 2).
fn order_independent(p: Plugin) -> bool {
    !matches!(p, Plugin::PodTopologySpread | Plugin::InterPodAffinity)
}

/// Binds `todo` on `fs` (steps 1 to 3 of the module comment). `budget` caps the search's filter checks.
/// On return `fs` holds every pod an order was found for (all of them when `Valid`).
pub fn bind_all<'a, 'p>(pods: &'a [Pod], todo: &[Placed<'p>], fs: &mut FilterState<'a>, budget: usize) -> Found<'p> {
    let mut found = Found { stated_order_ok: true, ..Found::default() };
    // 1. The plan's order, then passes.
    let mut last: FxHashMap<usize, Reject> = FxHashMap::default();
    let mut bound: Vec<Placed<'p>> = Vec::new();
    let mut left: Vec<Placed<'p>> = todo.to_vec();
    let mut first_pass = true;
    loop {
        let mut next = Vec::new();
        for &x in &left {
            let pod = &pods[x.pod];
            match fs.check(pod, x.node) {
                Ok(()) => {
                    fs.add_pod(pod, x.node);
                    bound.push(x);
                }
                Err(e) => {
                    if first_pass && found.stated_order_ok {
                        found.stated_order_ok = false;
                        found.notes.push(format!("the plan's bind order fails first at {}: {e}", x.key));
                    }
                    last.insert(x.pod, e);
                    next.push(x);
                }
            }
        }
        first_pass = false;
        let stuck = next.len() == left.len();
        left = next;
        if left.is_empty() || stuck {
            break;
        }
    }
    if left.is_empty() {
        if !found.stated_order_ok {
            found.notes.push("another bind order places every pod".into());
        }
        return found;
    }
    // 2. A static witness.
    let witnesses: Vec<(Placed<'p>, Reject)> = left.iter().filter(|x| order_independent(last[&x.pod].plugin)).map(|x| (*x, last[&x.pod].clone())).collect();
    if !witnesses.is_empty() {
        found.outcome = Outcome::Invalid;
        found.notes.push(format!("no bind order exists: {} pod(s) rejected by a filter no order changes", witnesses.len()));
        found.left = witnesses;
        return found;
    }
    // 3. The search, from the state before any planned pod was bound.
    for x in bound.iter().rev() {
        fs.remove_pod(&pods[x.pod], x.node);
    }
    let mut s = Search::new(pods, todo);
    match s.run(fs, budget) {
        Some(true) => {
            found.notes.push(format!("a searched bind order places every pod ({} filter checks)", s.checks));
        }
        verdict => {
            found.outcome = if verdict == Some(false) { Outcome::Invalid } else { Outcome::Undecided };
            found.notes.push(match verdict {
                Some(false) => format!("no bind order exists: every reachable set of bound pods searched ({} states, {} filter checks)", s.seen.len(), s.checks),
                _ => format!("bind order undecided: the search spent its budget of {budget} filter checks ({} states)", s.seen.len()),
            });
            // Leave `fs` at the deepest state found, and report the pods left there.
            s.restore_deepest(fs);
            let mut ixs: Vec<usize> = (0..s.groups.len()).flat_map(|g| s.groups[g].members[s.deepest[g]..].iter().copied()).collect();
            ixs.sort_unstable();
            for ix in ixs {
                let x = todo[ix];
                // A pod left at the deepest state may pass there on its own while binding it would block
                // another; its last rejection in the passes is then the best reason there is.
                let why = match fs.check(&pods[x.pod], x.node) {
                    Err(e) => e,
                    Ok(()) => last.get(&x.pod).cloned().unwrap_or_else(|| Reject::new(Plugin::PodTopologySpread, "bound only in orders that strand another pod")),
                };
                found.left.push((x, why));
            }
        }
    }
    found.search_checks = s.checks;
    found
}

/// Interchangeable pods on one node, in plan order.
struct Group {
    node: usize,
    /// Indices into `todo`.
    members: Vec<usize>,
}

struct Frame {
    /// Groups to try at this state, in plan order.
    cands: Vec<usize>,
    next: usize,
    /// The group whose pod this frame's parent bound to reach it.
    via: Option<usize>,
}

struct Search<'a> {
    pods: &'a [Pod],
    /// Per entry of `todo`: the pod's index in `pods`.
    pod_of: Vec<usize>,
    groups: Vec<Group>,
    /// Bound pods per group: the state.
    count: Vec<usize>,
    seen: FxHashSet<Vec<usize>>,
    deepest: Vec<usize>,
    checks: usize,
}

impl<'a> Search<'a> {
    fn new(pods: &'a [Pod], todo: &[Placed<'_>]) -> Self {
        let mut ix: FxHashMap<(usize, String), usize> = FxHashMap::default();
        let mut groups: Vec<Group> = Vec::new();
        for (i, x) in todo.iter().enumerate() {
            let g = *ix.entry((x.node, signature(&pods[x.pod]))).or_insert_with(|| {
                groups.push(Group { node: x.node, members: Vec::new() });
                groups.len() - 1
            });
            groups[g].members.push(i);
        }
        let n = groups.len();
        Search { pods, pod_of: todo.iter().map(|x| x.pod).collect(), groups, count: vec![0; n], seen: FxHashSet::default(), deepest: vec![0; n], checks: 0 }
    }

    fn cands(&self) -> Vec<usize> {
        (0..self.groups.len()).filter(|&g| self.count[g] < self.groups[g].members.len()).collect()
    }

    fn pod(&self, g: usize, k: usize) -> &'a Pod {
        &self.pods[self.pod_of[self.groups[g].members[k]]]
    }

    /// Some(true): every pod bound (left on `fs`); Some(false): no order; None: budget spent.
    fn run(&mut self, fs: &mut FilterState<'a>, budget: usize) -> Option<bool> {
        let total = self.pod_of.len();
        let mut depth = 0usize;
        let mut best = 0usize;
        self.seen.insert(self.count.clone());
        let mut stack = vec![Frame { cands: self.cands(), next: 0, via: None }];
        while let Some(top) = stack.last_mut() {
            if depth == total {
                return Some(true);
            }
            let mut moved = None;
            while top.next < top.cands.len() {
                if self.checks >= budget {
                    return None;
                }
                let g = top.cands[top.next];
                top.next += 1;
                self.count[g] += 1;
                let fresh = !self.seen.contains(&self.count);
                self.count[g] -= 1;
                if !fresh {
                    continue;
                }
                let (node, k) = (self.groups[g].node, self.count[g]);
                let pod = self.pod(g, k);
                self.checks += 1;
                if fs.check(pod, node).is_ok() {
                    fs.add_pod(pod, node);
                    self.count[g] += 1;
                    self.seen.insert(self.count.clone());
                    moved = Some(g);
                    break;
                }
            }
            if let Some(g) = moved {
                depth += 1;
                if depth > best {
                    best = depth;
                    self.deepest.clone_from(&self.count);
                }
                stack.push(Frame { cands: self.cands(), next: 0, via: Some(g) });
                continue;
            }
            // Dead end: undo the binding that led here.
            let done = stack.pop().expect("a frame");
            if let Some(g) = done.via {
                self.count[g] -= 1;
                let (node, k) = (self.groups[g].node, self.count[g]);
                fs.remove_pod(self.pod(g, k), node);
                depth -= 1;
            }
        }
        Some(false)
    }

    /// Moves `fs` from the state the search ended in to the deepest state it reached.
    fn restore_deepest(&mut self, fs: &mut FilterState<'a>) {
        for g in 0..self.groups.len() {
            let node = self.groups[g].node;
            while self.count[g] > self.deepest[g] {
                self.count[g] -= 1;
                fs.remove_pod(self.pod(g, self.count[g]), node);
            }
        }
        for g in 0..self.groups.len() {
            let node = self.groups[g].node;
            while self.count[g] < self.deepest[g] {
                fs.add_pod(self.pod(g, self.count[g]), node);
                self.count[g] += 1;
            }
        }
    }
}

/// Everything the filters read of a pod, without its identity (name, uid, input order).
fn signature(p: &Pod) -> String {
    let mut q = p.clone();
    q.name.clear();
    q.uid.clear();
    q.seq = 0;
    format!("{q:?}")
}
