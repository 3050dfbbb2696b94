//! Outcome surgery every planner ends with: new nodes left without pods are dropped, and each new node
//! steps down to the cheapest configuration of its group that still holds its pods.
//!
//! Both the greedy planner and the local improvement (`improve`) finish with these steps, and the MILP
//! driver runs them on the solver's plan; they live apart so that neither planner depends on the other.

use std::collections::BTreeSet;

use super::problem::Problem;
use super::{Outcome, Target};
use crate::domain::resources::Resources;
use crate::semantics::limits;

/// Drops the new nodes no placement uses and renumbers the placements' targets.
pub(crate) fn remove_empty_nodes(o: &mut Outcome) {
    let used: BTreeSet<usize> = o.placements.iter().filter_map(|(_, t)| if let Target::New(k) = t { Some(*k) } else { None }).collect();
    let mut remap = vec![usize::MAX; o.new_nodes.len()];
    let mut kept = Vec::new();
    for (k, &f) in o.new_nodes.iter().enumerate() {
        if used.contains(&k) {
            remap[k] = kept.len();
            kept.push(f);
        }
    }
    o.new_nodes = kept;
    for (_, t) in &mut o.placements {
        if let Target::New(k) = t {
            *k = remap[*k];
        }
    }
}

/// Shrinks every new node to the cheapest configuration of its group that holds its pods.
pub(crate) fn downsize(p: &Problem, o: &mut Outcome) {
    let mut load: Vec<Resources> = vec![Resources::default(); o.new_nodes.len()];
    for (id, t) in &o.placements {
        if let Target::New(k) = t {
            load[*k].add(&p.pod(*id).requests);
        }
    }
    let mut usage = p.usage.clone();
    for &f in &o.new_nodes {
        let c = &p.configs[f];
        usage[c.pool].capacity.add(&c.capacity);
        usage[c.pool].nodes += 1;
    }
    for (k, node_load) in load.iter().enumerate() {
        let f = o.new_nodes[k];
        let cur = &p.configs[f];
        let pool = cur.pool;
        let mut best = f;
        for &g in &p.groups[cur.group] {
            let g = g as usize;
            let c = &p.configs[g];
            if c.cost >= p.configs[best].cost || !node_load.fits_in(&c.room()) {
                continue;
            }
            if let Some(l) = &p.cluster.nodepools[pool].limits {
                let without = usage[pool].capacity.minus(&cur.capacity);
                if limits::check(l, &without, usage[pool].nodes - 1, &c.capacity).is_err() {
                    continue;
                }
            }
            best = g;
        }
        if best != f {
            usage[pool].capacity.sub(&cur.capacity);
            usage[pool].capacity.add(&p.configs[best].capacity);
            o.new_nodes[k] = best;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::PodId;

    #[test]
    fn removing_empty_nodes_renumbers_targets() {
        let mut o =
            Outcome { new_nodes: vec![7, 8, 9], placements: vec![(PodId(0), Target::New(2)), (PodId(1), Target::Existing(0)), (PodId(2), Target::New(0))], unschedulable: vec![], deferred: vec![] };
        remove_empty_nodes(&mut o);
        assert_eq!(o.new_nodes, vec![7, 9]);
        assert_eq!(o.placements[0].1, Target::New(1));
        assert_eq!(o.placements[2].1, Target::New(0));
    }
}
