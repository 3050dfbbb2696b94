//! The planner's bind order (`solve::order_placements`): the order in which a plan's pods are replayed
//! and nominated, one at a time, each accepted by kube-scheduler's filters.
//!
//! The case is mixed-3's (issue 18): `web` pods with maxSkew-1 spreads over zone and over a custom
//! `rack` key, beside `worker` pods spread over `rack` with their own selector. Any final state with
//! every zone and every rack at the same count of web pods is a sum of rounds, one pod per zone and per
//! rack each (König), so an order exists; a search that interleaves the workers' steps with the web
//! pods' backtracks through the workers' steps when a round of web pods is stuck, and ran out of its
//! budget on mixed-3's packed plan (4 web pods left over, repaired at 246.71 where 166.76 was found).

// Tests read fixtures; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use std::collections::BTreeMap;

use common::{case, node, pod, small_catalog};
use stowage_core::check;
use stowage_core::solve::driver::build_and_plan;
use stowage_core::solve::{Planner, Target, order_placements, to_plan};
use stowage_core::weights::Weights;

const WEB: &str = "topologySpreadConstraints: [\
    {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}, \
    {maxSkew: 1, topologyKey: rack, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]";
const WORKER: &str = "topologySpreadConstraints: [\
    {maxSkew: 2, topologyKey: rack, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: worker}}}]";

/// A deterministic pseudo-random stream (a 64-bit LCG), so that every run judges the same plans.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Plans with `rounds` web pods per zone and per rack (a sum of `rounds` random permutations of the
/// three racks over the three zones) and `workers` worker pods, a third per rack, on random zones, in
/// a shuffled plan order: each is ordered completely, and the ordered plan passes the checker.
#[test]
fn a_balanced_two_key_plan_is_ordered_beside_pods_of_another_selector() {
    let (rounds, workers) = (40, 60);
    let zones = ["a", "b", "c"];
    let racks = ["1", "2", "3"];
    let mut docs = String::new();
    for z in zones {
        for r in racks {
            docs += &node(&format!("n-{z}{r}"), &format!("zone-{z}"), "64", &format!("rack: \"{r}\""), "");
        }
    }
    for i in 0..3 * rounds {
        docs += &pod(&format!("web-{i}"), "{app: web}", "100m", WEB);
    }
    for i in 0..workers {
        docs += &pod(&format!("worker-{i}"), "{app: worker}", "100m", WORKER);
    }
    let w = case("bind order", docs).workload();
    let weights = Weights::default();
    let (p, mut o, report) = build_and_plan(&w.cluster, small_catalog(), &weights, Planner::greedy()).expect("plans");
    let r = check::check(&w.cluster, small_catalog(), &to_plan(&p, &o, report.clone()));
    assert!(r.valid(), "greedy's own plan: {:#?}", r.violations);

    let id: BTreeMap<String, _> = p.batch.iter().map(|&i| (p.pod(i).name.clone(), i)).collect();
    let at = |z: usize, r: usize| Target::Existing(w.cluster.nodes.iter().position(|n| n.name == format!("n-{}{}", zones[z], racks[r])).expect("node"));
    let mut rng = Lcg(18);
    for trial in 0..12 {
        let mut placements = Vec::new();
        let mut web = 0;
        for _ in 0..rounds {
            let mut perm = [0, 1, 2];
            for k in (1..3).rev() {
                perm.swap(k, rng.below(k + 1));
            }
            for (z, &r) in perm.iter().enumerate() {
                placements.push((id[&format!("web-{web}")], at(z, r)));
                web += 1;
            }
        }
        for i in 0..workers {
            placements.push((id[&format!("worker-{i}")], at(rng.below(3), i % 3)));
        }
        for k in (1..placements.len()).rev() {
            placements.swap(k, rng.below(k + 1));
        }
        o.new_nodes.clear();
        o.unschedulable.clear();
        o.placements = placements;
        let (ordered, failures) = order_placements(&p, &o);
        assert!(failures.is_empty(), "trial {trial}: {} pods left without an order, first {:?}", failures.len(), failures.first());
        assert_eq!(ordered.len(), 3 * rounds + workers, "trial {trial}");
        o.placements = ordered;
        let r = check::check(&w.cluster, small_catalog(), &to_plan(&p, &o, report.clone()));
        assert!(r.valid(), "trial {trial}: {:#?}", r.violations);
        assert!(r.stated_order_ok, "trial {trial}: the ordered plan binds in its own order: {:#?}", r.notes);
    }
}
