//! What every constraint family needs to know about the batch, derived once from the [`Problem`]:
//! classes and their sizes and requests, the existing nodes a class may use, the configuration groups a
//! class may use and the preferred-affinity costs. Each family derives its own data in its module
//! ([`super::families`]); some of them narrow the targets and groups here.

use rustc_hash::{FxHashMap, FxHashSet};

use super::ids::{Class, Group, Target};
use crate::domain::labels::{LabelSelector, Labels, NodeMatcher, keys};
use crate::domain::pod::{InclusionPolicy, Pod, SpreadConstraint};
use crate::domain::taints::{Taint, Toleration};
use crate::semantics::filter::FilterState;
use crate::semantics::{Plugin, node_affinity, selectors, spread, taints};
use crate::solve::problem::Problem;
use crate::solve::{placement_soft, scheduler_state};

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

/// Whether a spread selector in namespace `ns` counts `pod`.
pub(crate) fn matches_selector(sel: Option<&LabelSelector>, ns: &str, pod: &Pod) -> bool {
    pod.namespace == ns && !pod.terminating && selectors::opt_matches(sel, &pod.labels)
}

pub struct Structure {
    pub n: Vec<u32>,
    /// Resource dimensions compared: cpu, memory, ephemeral-storage, pods and requested extended ones.
    pub dims: Vec<String>,
    pub req: Vec<Vec<i64>>,
    /// Existing nodes some class may use (indices into `Cluster::nodes`), per [`Target`].
    pub targets: Vec<usize>,
    pub free: Vec<Vec<i64>>,
    /// Per class: (target, max pods of the class the node can take alone).
    pub allowed: Vec<Vec<(Target, u32)>>,
    /// Per class: allowed problem configuration groups (domain-level exclusions applied).
    pub class_groups: Vec<FxHashSet<Group>>,
    /// Per class: the class cannot go to new nodes at all (constraints the model does not express).
    pub no_new_nodes: Vec<bool>,
    /// Per class: preferred node-affinity shortfall cost on each configuration group / target.
    pub soft_group: Vec<FxHashMap<Group, f64>>,
    pub soft_target: Vec<Vec<f64>>,
}

impl Structure {
    /// The classes, in order.
    pub fn classes(&self) -> impl Iterator<Item = Class> + Clone + use<> {
        Class::all(self.n.len())
    }

    /// Pods of class `c`.
    pub fn n_of(&self, c: Class) -> u32 {
        self.n[c.ix()]
    }

    /// An upper bound on the number of new nodes any sensible plan uses.
    pub fn big_nodes(&self) -> f64 {
        self.n.iter().map(|&n| n as f64).sum::<f64>().max(1.0)
    }

    /// The most pods of class `c` existing target `t` takes, if the class may use it.
    pub fn cap_on(&self, c: Class, t: Target) -> Option<u32> {
        self.allowed[c.ix()].iter().find(|a| a.0 == t).map(|a| a.1)
    }

    /// The classes, their requests and the existing targets, before any family narrows them; the
    /// filter state and the context the families derive their data with.
    pub(crate) fn core<'c, 'a>(p: &'c Problem<'a>) -> (Structure, FilterState<'c>, Context<'c, 'a>) {
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
        let (targets, allowed) = existing_targets(p, &mut fs, &n);
        let free = targets
            .iter()
            .map(|&e| {
                let f = fs.nodes()[e].free();
                dims.iter().map(|d| f.get(d)).collect()
            })
            .collect();
        let class_groups: Vec<FxHashSet<Group>> = p.classes.iter().map(|cl| cl.compatible.iter().map(|&f| Group::at(p.configs[f as usize].group)).collect()).collect();
        let cx = Context {
            p,
            targets: targets.clone(),
            group_labels: p.groups.iter().map(|g| &p.configs[g[0] as usize].labels).collect(),
            group_taints: p.groups.iter().map(|g| &p.configs[g[0] as usize].taints).collect(),
        };
        let s = Structure { n, dims, req, targets, free, allowed, class_groups, no_new_nodes: vec![false; nc], soft_group: Vec::new(), soft_target: Vec::new() };
        (s, fs, cx)
    }

    /// After the families: classes that may not go to new nodes lose their groups, and the
    /// preferred-affinity costs are priced on what is left.
    pub(crate) fn finish(&mut self, cx: &Context, fs: &FilterState) {
        for c in 0..self.n.len() {
            if self.no_new_nodes[c] {
                self.class_groups[c].clear();
            }
        }
        let (soft_group, soft_target) = soft_costs(cx, fs, &self.class_groups);
        self.soft_group = soft_group;
        self.soft_target = soft_target;
    }
}

/// What the families' derivations share: the problem, the existing targets and each configuration
/// group's labels and taints.
pub(crate) struct Context<'c, 'a> {
    pub p: &'c Problem<'a>,
    pub targets: Vec<usize>,
    pub group_labels: Vec<&'c Labels>,
    pub group_taints: Vec<&'c Vec<Taint>>,
}

impl Context<'_, '_> {
    pub fn rep(&self, c: Class) -> &Pod {
        self.p.pod(self.p.classes[c.ix()].rep)
    }

    pub fn classes(&self) -> impl Iterator<Item = Class> + Clone + use<> {
        Class::all(self.p.classes.len())
    }

    pub fn groups(&self) -> impl Iterator<Item = Group> + Clone + use<> {
        Group::all(self.p.groups.len())
    }

    pub fn group_labels(&self, g: Group) -> &Labels {
        self.group_labels[g.ix()]
    }

    pub fn group_taints(&self, g: Group) -> &[Taint] {
        self.group_taints[g.ix()]
    }
}

/// Existing nodes and what each class may do there, judged by kube-scheduler's filters on the initial
/// state; rejections that placements of the batch can lift (spread, affinity) are kept for the model to
/// decide. Returns the targets (node indices, in node order) and per class (target, max pods alone).
fn existing_targets(p: &Problem, fs: &mut FilterState, n: &[u32]) -> (Vec<usize>, Vec<Vec<(Target, u32)>>) {
    let nc = p.classes.len();
    let mut targets = Vec::new();
    let mut allowed: Vec<Vec<(Target, u32)>> = vec![Vec::new(); nc];
    let mut target_of: FxHashMap<usize, Target> = FxHashMap::default();
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
                    Target::at(targets.len() - 1)
                });
                allowed[c].push((t, cap.min(n[c])));
            }
        }
    }
    (targets, allowed)
}

/// The per-pod soft cost (`solve::placement_soft`: preferred node affinity, PreferNoSchedule taints),
/// per class on each allowed configuration group and on each target.
#[allow(clippy::type_complexity)]
fn soft_costs(cx: &Context, fs: &FilterState, class_groups: &[FxHashSet<Group>]) -> (Vec<FxHashMap<Group, f64>>, Vec<Vec<f64>>) {
    let w = cx.p.weights;
    let soft_group = cx
        .classes()
        .map(|c| {
            let pod = cx.rep(c);
            class_groups[c.ix()].iter().map(|&g| (g, placement_soft(w, pod, cx.group_labels(g), None, cx.group_taints(g)))).filter(|(_, v)| *v > 0.0).collect()
        })
        .collect();
    let soft_target = cx
        .classes()
        .map(|c| {
            let pod = cx.rep(c);
            cx.targets.iter().map(|&e| placement_soft(w, pod, &fs.nodes()[e].labels, Some(&fs.nodes()[e].name), &fs.nodes()[e].taints)).collect()
        })
        .collect();
    (soft_group, soft_target)
}
