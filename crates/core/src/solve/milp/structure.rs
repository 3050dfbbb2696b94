//! What the master problem needs to know about the batch, derived once from the [`Problem`]:
//! classes and their sizes, the existing nodes a class may use, and the constraint groups that couple
//! pods across nodes (spread domains, domain-level anti-affinity, affinity) or restrict what one node
//! may hold (hostname anti-affinity, hostname spread, host ports).

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::domain::labels::{LabelSelector, Labels, NodeMatcher, keys};
use crate::domain::pod::{InclusionPolicy, Pod, PodAffinityTerm, SpreadConstraint};
use crate::domain::taints::{Taint, Toleration};
use crate::semantics::filter::FilterState;
use crate::semantics::{Plugin, interpod, node_affinity, ports, selectors, spread, taints};
use crate::solve::problem::Problem;
use crate::solve::scheduler_state;

/// Identity of a spread group: key, selector, namespace, eligibility, maxSkew, minDomains, hard.
type SpreadKey = (String, Option<LabelSelector>, String, Eligibility, i32, i32, bool);

/// Nodes a constraint counts: the node must carry `all_keys` and pass the inclusion policies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Eligibility {
    pub all_keys: Vec<String>,
    pub matcher: Option<NodeMatcher>,
    pub tolerations: Option<Vec<Toleration>>,
}

impl Eligibility {
    pub fn of(pod: &Pod, c: &SpreadConstraint) -> Self {
        let mut all_keys: Vec<String> = spread::hard(pod).map(|c| c.key.clone()).collect();
        all_keys.sort();
        all_keys.dedup();
        Eligibility {
            all_keys,
            matcher: (c.node_affinity_policy == InclusionPolicy::Honor).then(|| pod.node_matcher.clone()),
            tolerations: (c.node_taints_policy == InclusionPolicy::Honor).then(|| pod.tolerations.clone()),
        }
    }

    /// `labels` must already carry the hostname for existing nodes; new nodes always have one.
    pub(crate) fn admits(&self, labels: &Labels, node_taints: &[Taint], name: Option<&str>) -> bool {
        self.all_keys.iter().all(|k| k == keys::HOSTNAME || labels.contains_key(k))
            && self.matcher.as_ref().is_none_or(|m| node_affinity::matcher_matches(m, labels, name))
            && self.tolerations.as_ref().is_none_or(|t| taints::first_untolerated(node_taints, t).is_none())
    }
}

/// A spread constraint over a non-hostname key, shared by the classes that carry it.
#[derive(Clone, Debug)]
pub struct SpreadGroup {
    pub key: String,
    pub max_skew: f64,
    pub hard: bool,
    /// globalMin is 0 (fewer eligible domains than minDomains).
    pub min_zero: bool,
    /// Classes whose pods the selector counts: they all raise a domain's count, so they all bound the
    /// global minimum from above (`M ≤ N_d`).
    pub members: Vec<usize>,
    /// Members that carry the constraint (self-matching). Whatever the bind order, the last of them
    /// placed in a domain saw at least `E_d + (their number) − 1` pods there and a minimum no larger
    /// than the final one, so `E_d + counted_d − M ≤ maxSkew` holds in every domain they use: the
    /// skew rows count only them. This is a necessary condition for every order, so every valid plan
    /// satisfies the model (the greedy plan included) and the lower bound holds; a plan of the model
    /// is replayed and repaired where no order realises it.
    pub counted: Vec<usize>,
    /// Classes that carry the constraint.
    pub constrained: Vec<usize>,
    /// Every constrained class is counted and existing counts already lie within maxSkew: the skew
    /// row then holds in every domain, so it needs no indicator (a much tighter relaxation).
    pub unconditional: bool,
    /// Domain universe: existing eligible domains ∪ NodePool domains (rule b).
    pub domains: Vec<String>,
    /// Matching pods already on eligible nodes, per domain.
    pub existing: Vec<f64>,
    /// Per problem configuration group: the domain index if its nodes are eligible.
    pub group_domain: FxHashMap<usize, usize>,
    /// Per existing target: the domain index if eligible.
    pub target_domain: Vec<Option<usize>>,
}

/// A hard spread constraint over `kubernetes.io/hostname`.
#[derive(Clone, Debug)]
pub struct HostSpread {
    pub max_skew: u32,
    /// Classes the selector counts (all of them lower the global minimum when absent from a node).
    pub members: Vec<usize>,
    /// Classes carrying the constraint. Only constrained members are limited per node: a bind order
    /// exists that places constrained pods before the other members, and a pod that does not match
    /// its own selector adds nothing.
    pub constrained: Vec<usize>,
    /// Smallest matching count over existing eligible nodes (0 without any): with regime 1 every node
    /// ends with at least this many and each may hold `max_skew + mbar`.
    pub mbar: u32,
    pub group_eligible: FxHashSet<usize>,
    /// Per existing target: matching pods already there, if eligible.
    pub target_count: Vec<Option<u32>>,
}

/// A required anti-affinity term of a class over a non-hostname key.
#[derive(Clone, Debug)]
pub struct DomainAnti {
    pub class: usize,
    pub key: String,
    pub self_match: bool,
    /// Other classes the term matches.
    pub others: Vec<usize>,
    pub domains: Vec<String>,
}

/// Classes sharing one list of required affinity terms.
#[derive(Clone, Debug)]
pub struct AffinityGroup {
    pub classes: Vec<usize>,
    pub key: String,
    /// Classes whose pods match all terms and have no required affinity themselves.
    pub free_targets: Vec<usize>,
    /// The group's pods match their own terms.
    pub self_match: bool,
    /// Domains (or, for hostname, existing node names) already holding a matching pod.
    pub existing: BTreeSet<String>,
    /// Any matching pod exists anywhere (disables the first-pod exception).
    pub any_existing: bool,
    /// Domain universe for non-hostname keys.
    pub domains: Vec<String>,
}

pub struct Structure {
    pub n: Vec<u32>,
    /// Resource dimensions compared: cpu, memory, ephemeral-storage, pods and requested extended ones.
    pub dims: Vec<String>,
    pub req: Vec<Vec<i64>>,
    /// Existing nodes some class may use (indices into `Cluster::nodes`).
    pub targets: Vec<usize>,
    pub free: Vec<Vec<i64>>,
    /// Per class: (target index, max pods of the class the node can take alone).
    pub allowed: Vec<Vec<(usize, u32)>>,
    /// Per class: allowed problem configuration groups (domain-level exclusions applied).
    pub class_groups: Vec<FxHashSet<usize>>,
    pub spread: Vec<SpreadGroup>,
    pub hspread: Vec<HostSpread>,
    pub anti: Vec<DomainAnti>,
    pub affinity: Vec<AffinityGroup>,
    /// Per class: the affinity group it belongs to.
    pub class_affinity: Vec<Option<usize>>,
    /// Per class: classes it may not share a node with (hostname anti-affinity, either direction).
    pub host_conflicts: Vec<FxHashSet<usize>>,
    /// Per class: at most one pod per node (self hostname anti-affinity or host ports).
    pub one_per_node: Vec<bool>,
    /// Classes with host ports, for pairwise port conflicts.
    pub port_conflicts: Vec<FxHashSet<usize>>,
    /// Per class: the class cannot go to new nodes at all (constraints the model does not express).
    pub no_new_nodes: Vec<bool>,
    /// Per class: preferred node-affinity shortfall cost on each configuration group / target.
    pub soft_group: Vec<FxHashMap<usize, f64>>,
    pub soft_target: Vec<Vec<f64>>,
}

fn matches_selector(sel: Option<&LabelSelector>, ns: &str, pod: &Pod) -> bool {
    pod.namespace == ns && !pod.terminating && selectors::opt_matches(sel, &pod.labels)
}

impl Structure {
    /// Cliques of classes no two pods of which may share a node: the classes carrying one hostname
    /// anti-affinity term and matching it themselves (each clique listed once, in class order).
    pub(crate) fn hostname_cliques(&self, p: &Problem) -> Vec<Vec<usize>> {
        let mut cliques: Vec<Vec<usize>> = Vec::new();
        for c in 0..self.n.len() {
            let pod = p.pod(p.classes[c].rep);
            for t in &pod.anti_affinity {
                if t.key != keys::HOSTNAME || !interpod::term_matches(t, pod) {
                    continue;
                }
                let k: Vec<usize> = (0..self.n.len())
                    .filter(|&q| {
                        let qp = p.pod(p.classes[q].rep);
                        qp.anti_affinity.contains(t) && interpod::term_matches(t, qp)
                    })
                    .collect();
                if !cliques.contains(&k) {
                    cliques.push(k);
                }
            }
        }
        cliques
    }

    pub fn build(p: &Problem) -> Structure {
        let nc = p.classes.len();
        let rep = |c: usize| p.pod(p.classes[c].rep);
        let mut dims: Vec<String> = vec!["cpu".into(), "memory".into(), "ephemeral-storage".into(), "pods".into()];
        for c in 0..nc {
            for (name, _) in rep(c).requests.extended() {
                if !dims.contains(name) {
                    dims.push(name.clone());
                }
            }
        }
        let req: Vec<Vec<i64>> = (0..nc).map(|c| dims.iter().map(|d| rep(c).requests.get(d)).collect()).collect();
        let n: Vec<u32> = p.classes.iter().map(|c| c.pods.len() as u32).collect();

        let (mut fs, _) = scheduler_state(p, &[]);
        let (targets, mut allowed) = existing_targets(p, &mut fs, &n);
        let free = targets
            .iter()
            .map(|&e| {
                let f = fs.nodes()[e].free();
                dims.iter().map(|d| f.get(d)).collect()
            })
            .collect();
        let mut class_groups: Vec<FxHashSet<usize>> = p.classes.iter().map(|cl| cl.compatible.iter().map(|&f| p.configs[f as usize].group).collect()).collect();
        let cx = Context {
            p,
            targets: &targets,
            group_labels: p.groups.iter().map(|g| &p.configs[g[0] as usize].labels).collect(),
            group_taints: p.groups.iter().map(|g| &p.configs[g[0] as usize].taints).collect(),
        };
        let (spread, hspread) = spread_groups(&cx, &fs);
        let conflicts = anti_affinity(&cx, &fs, &mut class_groups);
        let HostConflicts { host_conflicts, mut one_per_node, anti } = conflicts;
        let port_conflicts = host_ports(&cx, &mut one_per_node);
        share_existing_nodes(&one_per_node, &host_conflicts, &port_conflicts, &mut allowed);
        let (affinity, class_affinity, no_new_nodes) = affinity_groups(&cx, &mut fs, &mut allowed);
        for c in 0..nc {
            if no_new_nodes[c] {
                class_groups[c].clear();
            }
        }
        let (soft_group, soft_target) = soft_costs(&cx, &fs, &class_groups);
        Structure {
            n,
            dims,
            req,
            targets,
            free,
            allowed,
            class_groups,
            spread,
            hspread,
            anti,
            affinity,
            class_affinity,
            host_conflicts,
            one_per_node,
            port_conflicts,
            no_new_nodes,
            soft_group,
            soft_target,
        }
    }
}

/// What the parts of [`Structure::build`] share: the problem, the existing targets and each
/// configuration group's labels and taints.
struct Context<'c, 'a> {
    p: &'c Problem<'a>,
    targets: &'c [usize],
    group_labels: Vec<&'c Labels>,
    group_taints: Vec<&'c Vec<Taint>>,
}

impl Context<'_, '_> {
    fn rep(&self, c: usize) -> &Pod {
        self.p.pod(self.p.classes[c].rep)
    }

    fn classes(&self) -> usize {
        self.p.classes.len()
    }
}

/// Existing nodes and what each class may do there, judged by kube-scheduler's filters on the initial
/// state; rejections that placements of the batch can lift (spread, affinity) are kept for the model to
/// decide. Returns the targets (node indices, in node order) and per class (target, max pods alone).
fn existing_targets(p: &Problem, fs: &mut FilterState, n: &[u32]) -> (Vec<usize>, Vec<Vec<(usize, u32)>>) {
    let nc = p.classes.len();
    let mut targets = Vec::new();
    let mut allowed: Vec<Vec<(usize, u32)>> = vec![Vec::new(); nc];
    let mut target_of: FxHashMap<usize, usize> = FxHashMap::default();
    for &e in &p.existing {
        let f = fs.nodes()[e].free();
        for c in 0..nc {
            let pod = p.pod(p.classes[c].rep);
            let cap = pod.requests.copies_in(&f);
            if cap == 0 {
                continue;
            }
            let prep = fs.prepare(pod);
            let ok = match fs.filter(&prep, pod, e) {
                Ok(()) => true,
                Err(r) => matches!(r.plugin, Plugin::PodTopologySpread | Plugin::InterPodAffinity) && !r.unresolvable && !r.reason.contains("anti-affinity"),
            };
            if ok {
                let t = *target_of.entry(e).or_insert_with(|| {
                    targets.push(e);
                    targets.len() - 1
                });
                allowed[c].push((t, cap.min(n[c])));
            }
        }
    }
    (targets, allowed)
}

/// Spread groups (non-hostname keys) and hostname spreads, each shared by the classes that carry
/// the same constraint.
fn spread_groups(cx: &Context, fs: &FilterState) -> (Vec<SpreadGroup>, Vec<HostSpread>) {
    let nc = cx.classes();
    let mut spread: Vec<SpreadGroup> = Vec::new();
    let mut spread_ix: FxHashMap<SpreadKey, usize> = FxHashMap::default();
    let mut hspread: Vec<HostSpread> = Vec::new();
    let mut hspread_ix: FxHashMap<(Option<LabelSelector>, String, Eligibility, i32), usize> = FxHashMap::default();
    for c in 0..nc {
        let pod = cx.rep(c);
        for (ci, sc) in pod.spread.iter().enumerate() {
            let elig = Eligibility::of(pod, sc);
            let members: Vec<usize> = (0..nc).filter(|&q| matches_selector(sc.selector.as_ref(), &pod.namespace, cx.rep(q))).collect();
            if sc.key == keys::HOSTNAME {
                if !sc.is_hard() {
                    continue;
                }
                let key = (sc.selector.clone(), pod.namespace.clone(), elig.clone(), sc.max_skew);
                let ix = *hspread_ix.entry(key).or_insert_with(|| {
                    hspread.push(host_spread(cx, fs, pod, sc, &elig, members.clone()));
                    hspread.len() - 1
                });
                hspread[ix].constrained.push(c);
                continue;
            }
            let key = (sc.key.clone(), sc.selector.clone(), pod.namespace.clone(), elig.clone(), sc.max_skew, sc.min_domains, sc.is_hard());
            let ix = *spread_ix.entry(key).or_insert_with(|| {
                spread.push(spread_group(cx, fs, pod, ci, sc, &elig, members.clone()));
                spread.len() - 1
            });
            spread[ix].constrained.push(c);
        }
    }
    for sg in &mut spread {
        sg.constrained.sort();
        sg.constrained.dedup();
        sg.counted = sg.members.iter().copied().filter(|c| sg.constrained.contains(c)).collect();
        let max = sg.existing.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = sg.existing.iter().copied().fold(f64::INFINITY, f64::min);
        // Domains no counted pod enters keep E_d ≤ min E + maxSkew ≤ M + maxSkew.
        sg.unconditional = sg.existing.is_empty() || max - min <= sg.max_skew;
    }
    for hs in &mut hspread {
        hs.constrained.sort();
        hs.constrained.dedup();
    }
    (spread, hspread)
}

/// A new hostname spread for constraint `sc` of `pod` (no constrained class yet).
fn host_spread(cx: &Context, fs: &FilterState, pod: &Pod, sc: &SpreadConstraint, elig: &Eligibility, members: Vec<usize>) -> HostSpread {
    let mut target_count = Vec::new();
    let mut mbar: Option<u32> = None;
    for &e in cx.targets {
        let n = &fs.nodes()[e];
        if elig.admits(&n.labels, &n.taints, Some(&n.name)) {
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as u32;
            target_count.push(Some(cnt));
        } else {
            target_count.push(None);
        }
    }
    // The minimum runs over every eligible node of the cluster, not only targets.
    for n in fs.nodes() {
        if elig.admits(&n.labels, &n.taints, Some(&n.name)) {
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as u32;
            mbar = Some(mbar.map_or(cnt, |m| m.min(cnt)));
        }
    }
    let group_eligible = (0..cx.p.groups.len())
        .filter(|&g| {
            let mut l = cx.group_labels[g].clone();
            l.insert(keys::HOSTNAME.into(), "new".into());
            elig.admits(&l, cx.group_taints[g], None)
        })
        .collect();
    HostSpread { max_skew: sc.max_skew as u32, members, constrained: Vec::new(), mbar: mbar.unwrap_or(0), group_eligible, target_count }
}

/// A new spread group for constraint `ci` (`sc`) of `pod` over a non-hostname key (no constrained
/// class yet): its domain universe, existing counts and which groups and targets fall in which domain.
fn spread_group(cx: &Context, fs: &FilterState, pod: &Pod, ci: usize, sc: &SpreadConstraint, elig: &Eligibility, members: Vec<usize>) -> SpreadGroup {
    let mut domains: BTreeSet<String> = cx.p.pool_domains(pod, ci);
    let mut existing_counts: BTreeMap<String, f64> = BTreeMap::new();
    for n in fs.nodes() {
        if elig.admits(&n.labels, &n.taints, Some(&n.name))
            && let Some(d) = n.labels.get(&sc.key)
        {
            domains.insert(d.clone());
            let cnt = n.pods.iter().filter(|q| matches_selector(sc.selector.as_ref(), &pod.namespace, q)).count() as f64;
            *existing_counts.entry(d.clone()).or_default() += cnt;
        }
    }
    let domains: Vec<String> = domains.into_iter().collect();
    let dix: BTreeMap<&str, usize> = domains.iter().enumerate().map(|(i, d)| (d.as_str(), i)).collect();
    let existing = domains.iter().map(|d| existing_counts.get(d).copied().unwrap_or(0.0)).collect();
    let mut group_domain = FxHashMap::default();
    for (g, l) in cx.group_labels.iter().enumerate() {
        let mut l2 = (*l).clone();
        l2.insert(keys::HOSTNAME.into(), "new".into());
        if elig.admits(&l2, cx.group_taints[g], None)
            && let Some(d) = l.get(&sc.key)
            && let Some(&i) = dix.get(d.as_str())
        {
            group_domain.insert(g, i);
        }
    }
    let target_domain = cx
        .targets
        .iter()
        .map(|&e| {
            let n = &fs.nodes()[e];
            if elig.admits(&n.labels, &n.taints, Some(&n.name)) { n.labels.get(&sc.key).and_then(|d| dix.get(d.as_str()).copied()) } else { None }
        })
        .collect();
    SpreadGroup {
        key: sc.key.clone(),
        max_skew: sc.max_skew as f64,
        hard: sc.is_hard(),
        min_zero: (domains.len() as i32) < sc.min_domains.max(1),
        members,
        counted: Vec::new(),
        constrained: Vec::new(),
        unconditional: false,
        domains,
        existing,
        group_domain,
        target_domain,
    }
}

/// Hostname anti-affinity as per-node conflicts, and domain-level anti-affinity terms.
struct HostConflicts {
    host_conflicts: Vec<FxHashSet<usize>>,
    one_per_node: Vec<bool>,
    anti: Vec<DomainAnti>,
}

/// Anti-affinity: hostname terms restrict nodes; other keys couple domains. Existing pods' terms
/// (symmetry) and existing matches are static exclusions, already applied to targets by the
/// initial-state filter; for new nodes they exclude configuration groups here (from `class_groups`).
fn anti_affinity(cx: &Context, fs: &FilterState, class_groups: &mut [FxHashSet<usize>]) -> HostConflicts {
    let nc = cx.classes();
    let mut host_conflicts: Vec<FxHashSet<usize>> = vec![FxHashSet::default(); nc];
    let mut one_per_node = vec![false; nc];
    let mut anti = Vec::new();
    let bound: Vec<(&Pod, &Labels)> = fs.nodes().iter().flat_map(|n| n.pods.iter().map(move |q| (*q, &n.labels))).collect();
    for c in 0..nc {
        let pod = cx.rep(c);
        for t in &pod.anti_affinity {
            let others: Vec<usize> = (0..nc).filter(|&q| q != c && interpod::term_matches(t, cx.rep(q))).collect();
            let self_match = interpod::term_matches(t, pod);
            if t.key == keys::HOSTNAME {
                if self_match {
                    one_per_node[c] = true;
                }
                for &q in &others {
                    host_conflicts[c].insert(q);
                    host_conflicts[q].insert(c);
                }
                continue;
            }
            // Domains holding an existing pod the term matches are closed to the class.
            let blocked: BTreeSet<&str> = bound.iter().filter(|(q, _)| interpod::term_matches(t, q)).filter_map(|(_, l)| l.get(&t.key).map(String::as_str)).collect();
            class_groups[c].retain(|&g| cx.group_labels[g].get(&t.key).is_none_or(|d| !blocked.contains(d.as_str())));
            let mut domains: BTreeSet<String> = cx.group_labels.iter().filter_map(|l| l.get(&t.key).cloned()).collect();
            for &e in cx.targets {
                if let Some(d) = fs.nodes()[e].labels.get(&t.key) {
                    domains.insert(d.clone());
                }
            }
            anti.push(DomainAnti { class: c, key: t.key.clone(), self_match, others, domains: domains.into_iter().collect() });
        }
        // Existing pods' required anti-affinity terms that match this class close their domains.
        for (q, l) in &bound {
            for t in &q.anti_affinity {
                if t.key != keys::HOSTNAME
                    && interpod::term_matches(t, pod)
                    && let Some(d) = l.get(&t.key)
                {
                    class_groups[c].retain(|&g| cx.group_labels[g].get(&t.key) != Some(d));
                }
            }
        }
    }
    HostConflicts { host_conflicts, one_per_node, anti }
}

/// Host ports: one pod of a class per node, and classes with clashing ports never together.
fn host_ports(cx: &Context, one_per_node: &mut [bool]) -> Vec<FxHashSet<usize>> {
    let nc = cx.classes();
    let mut port_conflicts: Vec<FxHashSet<usize>> = vec![FxHashSet::default(); nc];
    for c in 0..nc {
        if !cx.rep(c).host_ports.is_empty() {
            one_per_node[c] = true;
            for q in 0..nc {
                if q != c && ports::filter(&cx.rep(c).host_ports, &cx.rep(q).host_ports).is_err() {
                    port_conflicts[c].insert(q);
                }
            }
        }
    }
    port_conflicts
}

/// Existing nodes: a one-per-node class takes at most one pod of a node, and of two classes that may
/// not share a node, where neither is one-per-node (no exact linear form), only the first keeps the
/// node. The master adds x_c + x_q <= 1 (both one-per-node) and cap_q * x_c + x_q <= cap_q (c
/// one-per-node) per node.
fn share_existing_nodes(one_per_node: &[bool], host_conflicts: &[FxHashSet<usize>], port_conflicts: &[FxHashSet<usize>], allowed: &mut [Vec<(usize, u32)>]) {
    let nc = one_per_node.len();
    for c in 0..nc {
        if one_per_node[c] {
            for a in &mut allowed[c] {
                a.1 = a.1.min(1);
            }
        }
    }
    for c in 0..nc {
        for q in c + 1..nc {
            if one_per_node[c] || one_per_node[q] || !(host_conflicts[c].contains(&q) || port_conflicts[c].contains(&q)) {
                continue;
            }
            let mine: FxHashSet<usize> = allowed[c].iter().map(|a| a.0).collect();
            allowed[q].retain(|a| !mine.contains(&a.0));
        }
    }
}

/// Affinity groups (classes sharing one list of required terms over one key), each class's group, and
/// the classes whose terms span several keys: those keep only the existing nodes that already satisfy
/// them and never go to a new node.
fn affinity_groups(cx: &Context, fs: &mut FilterState, allowed: &mut [Vec<(usize, u32)>]) -> (Vec<AffinityGroup>, Vec<Option<usize>>, Vec<bool>) {
    let nc = cx.classes();
    let mut affinity: Vec<AffinityGroup> = Vec::new();
    let mut class_affinity = vec![None; nc];
    let mut no_new_nodes = vec![false; nc];
    let mut aff_ix: FxHashMap<Vec<PodAffinityTerm>, usize> = FxHashMap::default();
    for c in 0..nc {
        let pod = cx.rep(c);
        if pod.affinity.is_empty() {
            continue;
        }
        let keyset: BTreeSet<&str> = pod.affinity.iter().map(|t| t.key.as_str()).collect();
        if keyset.len() > 1 {
            // Terms over several keys: only nodes that already satisfy them (the targets kept by the
            // initial-state filter pass on their own); never a new node.
            no_new_nodes[c] = true;
            allowed[c].retain(|&(t, _)| {
                let e = cx.targets[t];
                let prep = fs.prepare(pod);
                fs.filter(&prep, pod, e).is_ok()
            });
            continue;
        }
        let key = keyset.into_iter().next().unwrap_or_default().to_string();
        let ix = *aff_ix.entry(pod.affinity.clone()).or_insert_with(|| {
            affinity.push(affinity_group(cx, fs, pod, key));
            affinity.len() - 1
        });
        affinity[ix].classes.push(c);
        class_affinity[c] = Some(ix);
    }
    (affinity, class_affinity, no_new_nodes)
}

/// A new affinity group for `pod`'s terms over `key` (no class yet).
fn affinity_group(cx: &Context, fs: &FilterState, pod: &Pod, key: String) -> AffinityGroup {
    let nc = cx.classes();
    let free_targets = (0..nc).filter(|&q| cx.rep(q).affinity.is_empty() && interpod::matches_all(&pod.affinity, cx.rep(q))).collect();
    let mut existing = BTreeSet::new();
    let mut any_existing = false;
    for n in fs.nodes() {
        for q in &n.pods {
            if interpod::matches_all(&pod.affinity, q) {
                any_existing |= n.labels.contains_key(&key);
                if let Some(v) = n.labels.get(&key) {
                    existing.insert(v.clone());
                }
            }
        }
    }
    let mut domains: BTreeSet<String> = cx.group_labels.iter().filter_map(|l| l.get(&key).cloned()).collect();
    for &e in cx.targets {
        if let Some(d) = fs.nodes()[e].labels.get(&key) {
            domains.insert(d.clone());
        }
    }
    AffinityGroup { classes: Vec::new(), key, free_targets, self_match: interpod::matches_all(&pod.affinity, pod), existing, any_existing, domains: domains.into_iter().collect() }
}

/// Preferred node affinity shortfall cost, per class on each allowed configuration group and on each
/// target.
#[allow(clippy::type_complexity)]
fn soft_costs(cx: &Context, fs: &FilterState, class_groups: &[FxHashSet<usize>]) -> (Vec<FxHashMap<usize, f64>>, Vec<Vec<f64>>) {
    let nc = cx.classes();
    let w = cx.p.weights.soft.preferred_node_affinity;
    let soft_group = (0..nc)
        .map(|c| {
            let pod = cx.rep(c);
            class_groups[c].iter().map(|&g| (g, w * shortfall(pod, cx.group_labels[g], None) as f64)).filter(|(_, v)| *v > 0.0).collect()
        })
        .collect();
    let soft_target = (0..nc)
        .map(|c| {
            let pod = cx.rep(c);
            cx.targets.iter().map(|&e| w * shortfall(pod, &fs.nodes()[e].labels, Some(&fs.nodes()[e].name)) as f64).collect()
        })
        .collect();
    (soft_group, soft_target)
}

fn shortfall(pod: &Pod, labels: &Labels, name: Option<&str>) -> i64 {
    if pod.preferred_node.is_empty() {
        return 0;
    }
    let total: i64 = pod.preferred_node.iter().map(|t| t.weight as i64).sum();
    total - node_affinity::preferred_score(&pod.preferred_node, labels, name)
}
