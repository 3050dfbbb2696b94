//! The greedy planner's look-ahead when it opens a node: which following pods it sizes the node for.
//!
//! The case is cluster-platform's (issue 18): pods that require on-demand capacity come first in the
//! size order, and the spot-tolerant pods after them. A look-ahead that counts every following pod
//! sizes the on-demand node for them all, and they then fill on-demand room at 2.5 times the spot
//! price; the priced look-ahead of the size order (`greedy::Options::priced_lookahead`) leaves them
//! to spot nodes.

// Tests read fixtures; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use common::{case, pod, pods, pool, small_catalog};
use stowage_core::check;
use stowage_core::solve::driver::build_and_plan;
use stowage_core::solve::greedy::{Order, plan_in};
use stowage_core::solve::{Planner, objective, to_plan};
use stowage_core::weights::Weights;

/// catalog-small: t.small (2 cpu, $0.10 on-demand), t.medium (4 cpu, $0.19), t.large (8 cpu, $0.36),
/// spot at 40 % of on-demand. Two 1500m pods require on-demand; thirty 200m pods take either. The
/// optimum: the two on a t.medium on-demand ($0.19) with four small pods in its room, the other 26 on
/// one t.large spot ($0.144): $0.334. Sized for all the following pods, the on-demand node is a t.large
/// ($0.36) with 24 small pods on it, and the other 6 need a spot node besides.
#[test]
fn the_size_order_does_not_size_an_on_demand_node_for_pods_that_can_go_on_spot() {
    let od = "nodeSelector: {karpenter.sh/capacity-type: on-demand}";
    let docs = format!(
        "{}{}{}{}",
        pool("default", "[{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]"),
        pod("od-0", "{app: od}", "1500m", od),
        pod("od-1", "{app: od}", "1500m", od),
        pods(30, "small", "{app: small}", "200m", "")
    );
    let w = case("priced look-ahead", docs).workload();
    let weights = Weights::default();
    let (p, _, report) = build_and_plan(&w.cluster, small_catalog(), &weights, Planner::greedy()).expect("plans");
    let o = plan_in(&p, Order::Size);
    let r = check::check(&w.cluster, small_catalog(), &to_plan(&p, &o, report));
    assert!(r.valid(), "the size order's plan: {:#?}", r.violations);
    assert!(o.unschedulable.is_empty() && o.deferred.is_empty(), "every pod is placed: {:?} {:?}", o.unschedulable, o.deferred);
    // The nodes' part of the objective is their price plus a per-node tie-break far below a cent.
    let cost = objective(&p, &o).nodes;
    assert!(cost < 0.334 + 1e-3, "the size order's plan costs ${cost:.4}/h, the optimum $0.334/h");
}
