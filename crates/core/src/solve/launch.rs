//! The launch candidates of the planners' new nodes and their NodePools' minValues
//! (`semantics::min_values`): a configuration group's launch types, built once per group when first
//! asked (every configuration of a group agrees on the NodePool, zone, capacity type and open-key
//! values), and what the plan records per new node.

use std::sync::Arc;

use super::problem::Problem;
use crate::domain::pod::Pod;
use crate::semantics::min_values::{self, LaunchTypes, Load, MinValuesPolicy, NodeLaunch, Shortfall};

impl Problem<'_> {
    /// The launch types of configuration group `g` (`min_values::launch_types`).
    pub(crate) fn launch_types(&self, g: usize) -> &Arc<LaunchTypes> {
        self.launch[g].get_or_init(|| {
            let rep = &self.configs[self.groups[g][0] as usize];
            let pool = &self.cluster.nodepools[rep.pool];
            Arc::new(min_values::launch_types(pool, &self.pool_views[rep.pool].types, &rep.labels, self.region.as_deref(), &self.cluster.daemonsets))
        })
    }

    /// Whether a new node of configuration `f` has minValues to keep under Strict.
    pub(crate) fn strict_min_values(&self, f: usize) -> bool {
        self.weights.min_values_policy == MinValuesPolicy::Strict && self.cluster.nodepools[self.configs[f].pool].requirements.iter().any(|r| r.min_values.is_some())
    }

    /// The launch context a `FilterState` judges minValues by on a new node of configuration `f` whose
    /// first `seated` pods are its DaemonSet pods; None when there is nothing to keep.
    pub(crate) fn node_launch(&self, f: usize, seated: usize) -> Option<NodeLaunch> {
        self.strict_min_values(f).then(|| NodeLaunch { types: self.launch_types(self.configs[f].group).clone(), seated })
    }
}

/// A new node's launch candidates (names, cheapest first) and the minValues they do not keep, for the
/// pods `pods` on a node of configuration `f`.
pub(crate) fn node_candidates(p: &Problem, f: usize, pods: &[&Pod]) -> (Vec<String>, Vec<Shortfall>) {
    let lt = p.launch_types(p.configs[f].group);
    let cands = min_values::candidates(lt, &p.configs[f].labels, &Load::of(pods.iter().copied()));
    (cands.iter().map(|t| t.name.clone()).collect(), min_values::shortfalls(lt, &cands))
}
