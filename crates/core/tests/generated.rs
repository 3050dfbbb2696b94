//! Generated tests (proptest, fixed seed, modest case counts).
//!
//! 1. Random well-formed workloads on tests/fixtures/catalog-small.yaml (pods with random requests, node
//!    selectors and affinity, tolerations, spread constraints on zone, hostname, capacity type and a
//!    custom key, pod (anti-)affinity, volumes pinned to zones, host ports, existing nodes with bound
//!    pods, NodePools with taints, limits, weights and custom keys, DaemonSets): every greedy plan
//!    passes the checker with zero violations, and planning is deterministic.
//! 2. Robustness: random and mutated YAML, structurally odd objects (wrong types, missing fields,
//!    invalid quantities, bad operators), random catalogs, weights and plans never panic the loader,
//!    the parsers, the planner or the checker; they load or fail with an error.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::test_runner::{Config as ProptestConfig, RngSeed};
use serde_json::{Value, json};

use common::{NODECLASS, node, pod, pool_full, small_catalog, summary};
use stowage_core::check;
use stowage_core::plan::Plan;
use stowage_core::solve::problem::Problem;
use stowage_core::solve::{Solver, plan_cluster};
use stowage_core::solve::{Target, greedy, scheduler_state};
use stowage_core::weights::Weights;

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const ZONE: &str = "topology.kubernetes.io/zone";

fn config(cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig { cases, rng_seed: RngSeed::Fixed(seed), max_shrink_iters: 512, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------------
// Workload generation.

#[derive(Clone, Debug)]
struct GPool {
    capacity_types: Vec<&'static str>,
    zones: Option<Vec<&'static str>>,
    taint: Option<(&'static str, &'static str, &'static str)>,
    limit_cpu: Option<u32>,
    tiers: Option<Vec<&'static str>>,
    weight: u8,
}

#[derive(Clone, Debug)]
struct GSpread {
    key: &'static str,
    max_skew: u8,
    hard: bool,
    app: Option<&'static str>,
    min_domains: Option<u8>,
    affinity_policy: Option<&'static str>,
    taints_policy: Option<&'static str>,
}

#[derive(Clone, Debug)]
struct GPod {
    app: &'static str,
    namespace: &'static str,
    cpu_m: u32,
    mem_mi: u32,
    node_selector: Option<&'static str>,
    node_affinity: Option<(&'static str, &'static str, Vec<&'static str>)>,
    toleration: Option<(&'static str, bool, &'static str, Option<&'static str>)>,
    spreads: Vec<GSpread>,
    affinity: Option<(&'static str, &'static str)>,
    anti_affinity: Option<(&'static str, &'static str)>,
    pv_zone: Option<&'static str>,
    host_port: Option<u16>,
}

#[derive(Clone, Debug)]
struct GNode {
    zone: &'static str,
    cpu: u8,
    tier: Option<&'static str>,
    capacity_type: &'static str,
    taint: Option<(&'static str, &'static str)>,
    cordoned: bool,
    pods: Vec<GPod>,
}

#[derive(Clone, Debug)]
struct GDaemonSet {
    cpu_m: u32,
    tolerate_all: bool,
    host_port: Option<u16>,
    tier: Option<&'static str>,
}

#[derive(Clone, Debug)]
struct GWorkload {
    pools: Vec<GPool>,
    nodes: Vec<GNode>,
    /// Groups of identical pending pods (count, template).
    pending: Vec<(u8, GPod)>,
    daemonset: Option<GDaemonSet>,
}

fn pool_strategy() -> impl Strategy<Value = GPool> {
    (
        subsequence(vec!["on-demand", "spot"], 1..=2),
        proptest::option::weighted(0.4, subsequence(ZONES.to_vec(), 1..=3)),
        proptest::option::weighted(0.3, (select(vec!["dedicated", "gpu"]), select(vec!["", "x"]), select(vec!["NoSchedule", "NoExecute", "PreferNoSchedule"]))),
        proptest::option::weighted(0.3, 0u32..=12),
        proptest::option::weighted(0.4, subsequence(vec!["1", "2", "3"], 1..=3)),
        0u8..3,
    )
        .prop_map(|(capacity_types, zones, taint, limit_cpu, tiers, weight)| GPool { capacity_types, zones, taint, limit_cpu, tiers, weight })
}

fn spread_strategy() -> impl Strategy<Value = GSpread> {
    (
        select(vec![ZONE, "kubernetes.io/hostname", "karpenter.sh/capacity-type", "tier"]),
        1u8..=2,
        proptest::bool::weighted(0.8),
        proptest::option::weighted(0.9, select(vec!["a", "b", "c"])),
        proptest::option::weighted(0.3, 1u8..=3),
        proptest::option::weighted(0.3, select(vec!["Honor", "Ignore"])),
        proptest::option::weighted(0.3, select(vec!["Honor", "Ignore"])),
    )
        .prop_map(|(key, max_skew, hard, app, min_domains, affinity_policy, taints_policy)| GSpread {
            key,
            max_skew,
            hard,
            app,
            min_domains: if hard { min_domains } else { None },
            affinity_policy,
            taints_policy,
        })
}

fn node_affinity_strategy() -> impl Strategy<Value = (&'static str, &'static str, Vec<&'static str>)> {
    prop_oneof![
        (select(vec!["In", "NotIn"]), subsequence(ZONES.to_vec(), 1..=2)).prop_map(|(op, v)| (ZONE, op, v)),
        (select(vec!["In", "NotIn"]), subsequence(vec!["1", "2", "3"], 1..=2)).prop_map(|(op, v)| ("tier", op, v)),
        (select(vec!["Gt", "Lt"]), select(vec!["1", "2", "3"])).prop_map(|(op, v)| ("tier", op, vec![v])),
        (select(vec!["Gt", "Lt"]), select(vec!["2", "4", "8"])).prop_map(|(op, v)| ("karpenter.k8s.aws/instance-cpu", op, vec![v])),
        select(vec!["Exists", "DoesNotExist"]).prop_map(|op| ("tier", op, vec![])),
        select(vec!["on-demand", "spot"]).prop_map(|v| ("karpenter.sh/capacity-type", "In", vec![v])),
    ]
}

fn pod_strategy(pending: bool) -> impl Strategy<Value = GPod> {
    (
        (select(vec!["a", "b", "c"]), select(vec!["default", "default", "other"]), 0u32..=16, 0u32..=6),
        (proptest::option::weighted(0.15, select(ZONES.to_vec())), proptest::option::weighted(0.25, node_affinity_strategy())),
        proptest::option::weighted(0.3, (select(vec!["dedicated", "gpu", ""]), any::<bool>(), select(vec!["", "x"]), proptest::option::of(select(vec!["NoSchedule", "NoExecute"])))),
        proptest::collection::vec(spread_strategy(), 0..=2),
        (
            proptest::option::weighted(0.15, (select(vec!["a", "b", "c"]), select(vec![ZONE, "kubernetes.io/hostname"]))),
            proptest::option::weighted(0.2, (select(vec!["a", "b", "c"]), select(vec![ZONE, "kubernetes.io/hostname"]))),
            proptest::option::weighted(0.2, select(ZONES.to_vec())),
            proptest::option::weighted(0.1, select(vec![8080u16, 8081])),
        ),
    )
        .prop_map(move |((app, namespace, cpu, mem), (node_selector, node_affinity), toleration, spreads, (affinity, anti_affinity, pv_zone, host_port))| {
            // Bound pods' volumes are not resolved (they do not matter for planning).
            let pv_zone = if pending { pv_zone } else { None };
            // An empty key tolerates only with Exists; Exists takes no value.
            let toleration = toleration.map(|(k, exists, v, e)| {
                let exists = exists || k.is_empty();
                (k, exists, if exists { "" } else { v }, e)
            });
            GPod { app, namespace, cpu_m: cpu * 100, mem_mi: mem * 512, node_selector, node_affinity, toleration, spreads, affinity, anti_affinity, pv_zone, host_port }
        })
}

fn node_strategy() -> impl Strategy<Value = GNode> {
    (
        select(ZONES.to_vec()),
        1u8..=4,
        proptest::option::weighted(0.6, select(vec!["1", "2", "3"])),
        select(vec!["on-demand", "spot"]),
        proptest::option::weighted(0.2, (select(vec!["dedicated", "gpu"]), select(vec!["NoSchedule", "NoExecute"]))),
        proptest::bool::weighted(0.1),
        proptest::collection::vec(pod_strategy(false), 0..=3),
    )
        .prop_map(|(zone, cpu, tier, capacity_type, taint, cordoned, pods)| GNode { zone, cpu, tier, capacity_type, taint, cordoned, pods })
}

fn workload_strategy() -> impl Strategy<Value = GWorkload> {
    (
        proptest::collection::vec(pool_strategy(), 1..=3),
        proptest::collection::vec(node_strategy(), 0..=3),
        proptest::collection::vec((1u8..=3, pod_strategy(true)), 1..=5),
        proptest::option::weighted(
            0.3,
            (0u32..=5, any::<bool>(), proptest::option::weighted(0.3, Just(8081u16)), proptest::option::weighted(0.3, select(vec!["1", "2"])))
                .prop_map(|(c, tolerate_all, host_port, tier)| GDaemonSet { cpu_m: c * 100, tolerate_all, host_port, tier }),
        ),
    )
        .prop_map(|(pools, nodes, pending, daemonset)| GWorkload { pools, nodes, pending, daemonset })
}

fn flow_list(v: &[&str]) -> String {
    format!("[{}]", v.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "))
}

fn render_pod(name: &str, p: &GPod, node_name: Option<&str>) -> String {
    let mut spec: Vec<String> = Vec::new();
    if let Some(n) = node_name {
        spec.push(format!("nodeName: {n}"));
    }
    if let Some(z) = p.node_selector {
        spec.push(format!("nodeSelector: {{{ZONE}: {z}}}"));
    }
    let mut affinity: Vec<String> = Vec::new();
    if let Some((key, op, values)) = &p.node_affinity {
        let v = if values.is_empty() { String::new() } else { format!(", values: {}", flow_list(values)) };
        affinity.push(format!("nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {key}, operator: {op}{v}}}]}}]}}}}"));
    }
    for (kind, term) in [("podAffinity", &p.affinity), ("podAntiAffinity", &p.anti_affinity)] {
        if let Some((app, key)) = term {
            affinity.push(format!("{kind}: {{requiredDuringSchedulingIgnoredDuringExecution: [{{labelSelector: {{matchLabels: {{app: {app}}}}}, topologyKey: {key}}}]}}"));
        }
    }
    if !affinity.is_empty() {
        spec.push(format!("affinity: {{{}}}", affinity.join(", ")));
    }
    if let Some((key, exists, value, effect)) = p.toleration {
        let mut t = vec![format!("operator: {}", if exists { "Exists" } else { "Equal" })];
        if !key.is_empty() {
            t.push(format!("key: {key}"));
        }
        if !value.is_empty() {
            t.push(format!("value: \"{value}\""));
        }
        if let Some(e) = effect {
            t.push(format!("effect: {e}"));
        }
        spec.push(format!("tolerations: [{{{}}}]", t.join(", ")));
    }
    if !p.spreads.is_empty() {
        let cs: Vec<String> = p
            .spreads
            .iter()
            .map(|s| {
                let mut c = vec![format!("maxSkew: {}", s.max_skew), format!("topologyKey: {}", s.key), format!("whenUnsatisfiable: {}", if s.hard { "DoNotSchedule" } else { "ScheduleAnyway" })];
                if let Some(a) = s.app {
                    c.push(format!("labelSelector: {{matchLabels: {{app: {a}}}}}"));
                }
                if let Some(m) = s.min_domains {
                    c.push(format!("minDomains: {m}"));
                }
                if let Some(v) = s.affinity_policy {
                    c.push(format!("nodeAffinityPolicy: {v}"));
                }
                if let Some(v) = s.taints_policy {
                    c.push(format!("nodeTaintsPolicy: {v}"));
                }
                format!("{{{}}}", c.join(", "))
            })
            .collect();
        spec.push(format!("topologySpreadConstraints: [{}]", cs.join(", ")));
    }
    if p.pv_zone.is_some() {
        spec.push(format!("volumes: [{{name: data, persistentVolumeClaim: {{claimName: data-{name}}}}}]"));
    }
    let mut text = pod(&format!("{}/{name}", p.namespace), &format!("{{app: {}}}", p.app), &format!("{}m", p.cpu_m), &spec.join(", "));
    if p.mem_mi > 0 {
        text = text.replace("resources: {requests: {cpu:", &format!("resources: {{requests: {{memory: {}Mi, cpu:", p.mem_mi));
    }
    if let Some(port) = p.host_port {
        text = text.replace("image: pause", &format!("image: pause, ports: [{{containerPort: {port}, hostPort: {port}}}]"));
    }
    if let Some(z) = p.pv_zone {
        text.push_str(&format!(
            "---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: pv-{ns}-{name}, labels: {{{ZONE}: {z}}}}}
spec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], claimRef: {{namespace: {ns}, name: data-{name}}}, csi: {{driver: ebs.csi.aws.com, volumeHandle: v-{ns}-{name}}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {ZONE}, operator: In, values: [{z}]}}]}}]}}}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-{name}, namespace: {ns}}}
spec: {{accessModes: [ReadWriteOnce], volumeName: pv-{ns}-{name}, resources: {{requests: {{storage: 1Gi}}}}}}
",
            ns = p.namespace
        ));
    }
    text
}

fn render(g: &GWorkload) -> String {
    let mut s = String::from(NODECLASS);
    for (i, p) in g.pools.iter().enumerate() {
        let mut reqs = vec![format!("{{key: karpenter.sh/capacity-type, operator: In, values: {}}}", flow_list(&p.capacity_types))];
        if let Some(z) = &p.zones {
            reqs.push(format!("{{key: {ZONE}, operator: In, values: {}}}", flow_list(z)));
        }
        if let Some(t) = &p.tiers {
            reqs.push(format!("{{key: tier, operator: In, values: {}}}", flow_list(t)));
        }
        let taints = match p.taint {
            Some((k, "", e)) => format!("taints: [{{key: {k}, effect: {e}}}]"),
            Some((k, v, e)) => format!("taints: [{{key: {k}, value: \"{v}\", effect: {e}}}]"),
            None => String::new(),
        };
        // Karpenter's weights are 1-100; 0 stands for an unset weight (ranked below every weighted pool).
        let mut spec: Vec<String> = Vec::new();
        if p.weight > 0 {
            spec.push(format!("weight: {}", p.weight));
        }
        if let Some(l) = p.limit_cpu {
            spec.push(format!("limits: {{cpu: \"{l}\"}}"));
        }
        let spec = spec.join("\n  ");
        s.push_str(&pool_full(&format!("pool-{i}"), &format!("[{}]", reqs.join(", ")), "", &taints, &spec));
    }
    for (i, n) in g.nodes.iter().enumerate() {
        let name = format!("node-{i}");
        let mut labels = format!("karpenter.sh/capacity-type: {}", n.capacity_type);
        if let Some(t) = n.tier {
            labels.push_str(&format!(", tier: \"{t}\""));
        }
        let mut spec: Vec<String> = Vec::new();
        if let Some((k, e)) = n.taint {
            spec.push(format!("taints: [{{key: {k}, effect: {e}}}]"));
        }
        if n.cordoned {
            spec.push("unschedulable: true".into());
        }
        s.push_str(&node(&name, n.zone, &n.cpu.to_string(), &labels, &spec.join(", ")));
        for (j, p) in n.pods.iter().enumerate() {
            s.push_str(&render_pod(&format!("bound-{i}-{j}"), p, Some(&name)));
        }
    }
    for (k, (count, p)) in g.pending.iter().enumerate() {
        for i in 0..*count {
            s.push_str(&render_pod(&format!("pod-{k}-{i}"), p, None));
        }
    }
    if let Some(d) = &g.daemonset {
        let mut spec = format!("containers: [{{name: c, image: x, resources: {{requests: {{cpu: {}m}}}}", d.cpu_m);
        if let Some(port) = d.host_port {
            spec.push_str(&format!(", ports: [{{containerPort: {port}, hostPort: {port}}}]"));
        }
        spec.push_str("}]");
        if d.tolerate_all {
            spec.push_str(", tolerations: [{operator: Exists}]");
        }
        if let Some(t) = d.tier {
            spec.push_str(&format!(", nodeSelector: {{tier: \"{t}\"}}"));
        }
        s.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: agent, namespace: kube-system}}\nspec:\n  selector: {{matchLabels: {{app: agent}}}}\n  template:\n    metadata: {{labels: {{app: agent}}}}\n    spec: {{{spec}}}\n"
        ));
    }
    s
}

fn without_times(p: &Plan) -> Plan {
    let mut p = p.clone();
    p.solver.time_ms = 0.0;
    for ph in &mut p.solver.phases {
        ph.time_ms = 0.0;
    }
    p
}

proptest! {
    #![proptest_config(config(96, 0x5709_a6e1))]

    /// Every greedy plan of a generated workload passes the checker, and planning is deterministic.
    #[test]
    fn greedy_plans_pass_the_checker(g in workload_strategy()) {
        let text = render(&g);
        let w = stowage_input::load_texts([(Path::new("generated.yaml"), text.as_str())]).map_err(|e| TestCaseError::fail(format!("the generated workload does not load: {e}\n{text}")))?;
        let cat = small_catalog();
        let plan = plan_cluster(&w.cluster, cat, &Weights::default(), Solver::Greedy).map_err(|e| TestCaseError::fail(format!("planning failed: {e}\n{text}")))?;
        let again = plan_cluster(&w.cluster, cat, &Weights::default(), Solver::Greedy).map_err(|e| TestCaseError::fail(format!("planning failed: {e}")))?;
        prop_assert_eq!(without_times(&plan), without_times(&again), "planning is not deterministic\n{}", text);
        let pending = w.cluster.pending().len();
        prop_assert_eq!(plan.placements.len() + plan.unschedulable.len(), pending, "every pending pod appears once\n{}", summary(&plan));
        let r = check::check(&w.cluster, cat, &plan);
        prop_assert!(r.valid(), "the checker rejects the greedy plan: {:#?}\nplan:\n{}\nworkload:\n{}", r.violations, summary(&plan), text);
        prop_assert!(r.stated_order_ok, "the plan's bind order does not replay: {:?}\n{}\n{}", r.notes, summary(&plan), text);
        // Who stays pending is kube-scheduler's queue's choice (`semantics::queue`), except for pods of a
        // zone spread, which the planners judge by their wider domain universe.
        let zone_spread = |key: &str| w.cluster.pods.iter().any(|p| p.key() == key && p.spread.iter().any(|c| c.key != "kubernetes.io/hostname"));
        let out: Vec<String> = r.queue_order.iter().filter(|q| !q.pod.as_deref().is_some_and(zone_spread)).map(|q| q.to_string()).collect();
        prop_assert!(out.is_empty(), "pods left pending out of queue order: {:#?}\nplan:\n{}\nworkload:\n{}", out, summary(&plan), text);
    }
}

proptest! {
    #![proptest_config(config(32, 0x7e30_5e11))]

    /// Taking pods off nodes in kube-scheduler's simulated state (FilterState::remove_pod, which the
    /// bind-order search and the local improvement use) leaves the same state as never placing them:
    /// every pending pod gets the same verdict on every node.
    #[test]
    fn removing_pods_equals_never_adding_them(g in workload_strategy(), stride in 1usize..4) {
        let text = render(&g);
        let w = stowage_input::load_texts([(Path::new("generated.yaml"), text.as_str())]).map_err(|e| TestCaseError::fail(format!("the generated workload does not load: {e}\n{text}")))?;
        let weights = Weights::default();
        let Ok(p) = Problem::new(&w.cluster, small_catalog(), &weights) else { return Ok(()) };
        let o = greedy::plan(&p);
        let node_of = |ix: &[usize], t: Target| match t {
            Target::Existing(n) => n,
            Target::New(k) => ix[k],
        };
        let (mut incremental, ix) = scheduler_state(&p, &o.new_nodes);
        for &(id, t) in &o.placements {
            incremental.add_pod(p.pod(id), node_of(&ix, t));
        }
        // Warm the counters, so that removal has to keep them right.
        for &id in &p.batch {
            incremental.verdicts(p.pod(id));
        }
        let removed: Vec<usize> = (0..o.placements.len()).step_by(stride).collect();
        for &i in &removed {
            let (id, t) = o.placements[i];
            prop_assert!(incremental.remove_pod(p.pod(id), node_of(&ix, t)));
        }
        let (mut fresh, ix2) = scheduler_state(&p, &o.new_nodes);
        for (i, &(id, t)) in o.placements.iter().enumerate() {
            if !removed.contains(&i) {
                fresh.add_pod(p.pod(id), node_of(&ix2, t));
            }
        }
        for &id in &p.batch {
            let (a, b) = (incremental.verdicts(p.pod(id)), fresh.verdicts(p.pod(id)));
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"), "verdicts differ for {}\n{}", p.pod(id).key(), text);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Robustness: nothing panics on bad input.

const SCENARIO_TEXTS: [&str; 6] = [
    include_str!("../../../scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml"),
    include_str!("../../../scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml"),
    include_str!("../../../scenarios/seed-1c-stuck-on-existing-nodes/state.yaml"),
    include_str!("../../../scenarios/seed-2-apiserver-anti-affinity/deployment.yaml"),
    include_str!("../../../scenarios/common-ec2nodeclass.yaml"),
    include_str!("../../../tests/fixtures/seed-1-rescale/volumes.yaml"),
];

/// Every `memory: <n>Mi` request becomes 4·10^18 bytes (in range, but three of them pass i64) and
/// every node offers 9·10^18.
fn huge_memory(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("memory: ") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with("Mi") {
            out.push_str("\"4000000000000000000\"");
            rest = &rest[digits + 2..];
        } else if rest.starts_with("16Gi") {
            out.push_str("\"9000000000000000000\"");
            rest = &rest[4..];
        }
    }
    out.push_str(rest);
    out
}

/// Loads a text, and if it loads, plans and checks it: none of it may panic.
fn load_plan_check(text: &str) {
    let Ok(w) = stowage_input::load_texts([(Path::new("fuzz.yaml"), text)]) else { return };
    let cat = small_catalog();
    if let Ok(plan) = plan_cluster(&w.cluster, cat, &Weights::default(), Solver::Greedy) {
        let _ = check::check(&w.cluster, cat, &plan);
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, String),
    Replace(usize, String),
    Truncate(usize),
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    let snippet = prop_oneof![
        Just(":".to_string()),
        Just("- ".to_string()),
        Just("{".to_string()),
        Just("]".to_string()),
        Just("\n  ".to_string()),
        Just("\"".to_string()),
        Just("&a *a".to_string()),
        Just("!!binary".to_string()),
        Just("-1".to_string()),
        Just("1e400".to_string()),
        Just("99999999999999999999Ei".to_string()),
        Just("NotAnOperator".to_string()),
        Just("null".to_string()),
        Just("---\n".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,6}",
    ];
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), snippet.clone()).prop_map(|(a, s)| Mutation::Insert(a, s)),
        (any::<usize>(), snippet).prop_map(|(a, s)| Mutation::Replace(a, s)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// Applies a mutation at a character boundary.
fn mutate(text: &str, m: &Mutation) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |a: usize| if chars.is_empty() { 0 } else { a % (chars.len() + 1) };
    let s = |v: &[char]| v.iter().collect::<String>();
    match m {
        Mutation::Delete(a, n) => {
            let a = at(*a);
            let b = (a + n).min(chars.len());
            s(&chars[..a]) + &s(&chars[b..])
        }
        Mutation::Insert(a, ins) => {
            let a = at(*a);
            s(&chars[..a]) + ins + &s(&chars[a..])
        }
        Mutation::Replace(a, ins) => {
            // Replaces the token (up to the next space, comma, bracket or newline) at the position.
            let a = at(*a);
            let b = (a..chars.len()).find(|&i| matches!(chars[i], ' ' | ',' | '\n' | ']' | '}')).unwrap_or(chars.len());
            s(&chars[..a]) + ins + &s(&chars[b..])
        }
        Mutation::Truncate(a) => s(&chars[..at(*a)]),
    }
}

/// Valid objects of every kind the loader types, as JSON, for structural mutation.
fn base_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
               "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                        "kubelet": {"maxPods": 20, "kubeReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"}}}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
               "spec": {"weight": 1, "limits": {"cpu": "10", "nodes": "3"}, "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"},
                        "template": {"metadata": {"labels": {"team": "a"}}, "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [{"key": "tier", "operator": "In", "values": ["1", "2"], "minValues": 1}], "taints": [{"key": "t", "effect": "NoSchedule"}], "expireAfter": "720h"}}}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": "zone-a"}},
               "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "unschedulable": false},
               "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}, "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
               "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                                        "ports": [{"containerPort": 80, "hostPort": 80, "protocol": "TCP"}]}],
                        "initContainers": [{"name": "i", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}],
                        "overhead": {"cpu": "10m"}, "nodeSelector": {"tier": "1"},
                        "tolerations": [{"key": "t", "operator": "Exists", "effect": "NoSchedule"}],
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["0"]}]}]},
                                                      "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}}]},
                                     "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "topology.kubernetes.io/zone", "namespaceSelector": {}}]},
                                     "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["b"]}]}, "topologyKey": "kubernetes.io/hostname"}}]}},
                        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}, "minDomains": 2, "matchLabelKeys": ["app"], "nodeTaintsPolicy": "Honor"}],
                        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "claim"}}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim", "namespace": "default"},
               "spec": {"storageClassName": "sc", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
               "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["zone-a"]}]}]}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv", "labels": {"topology.kubernetes.io/zone": "zone-b"}},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "sc", "claimRef": {"namespace": "default", "name": "other"},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "default"},
               "spec": {"replicas": 2, "serviceName": "s", "selector": {"matchLabels": {"app": "s"}}, "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": "sc", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
               "spec": {"parallelism": 2, "completions": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"},
               "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m"}}}]}}}}),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "nc", "labels": {"karpenter.sh/nodepool": "np"}},
               "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]},
               "status": {"allocatable": {"cpu": "2", "pods": "10"}, "capacity": {"cpu": "2", "pods": "10"}}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "a"}}}),
    ]
}

/// Every path (as a list of keys and indices) in a JSON value.
fn paths(v: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                prefix.push(Value::String(k.clone()));
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                prefix.push(json!(i));
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let mut cur = v;
    for p in path {
        cur = match (cur, p) {
            (Value::Object(m), Value::String(k)) => m.get_mut(k)?,
            (Value::Array(a), Value::Number(i)) => a.get_mut(i.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn odd_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!(true))),
        Just(Some(json!(-1))),
        Just(Some(json!(1.5))),
        Just(Some(json!(1e300))),
        Just(Some(json!(i64::MAX))),
        Just(Some(json!(""))),
        Just(Some(json!("abc"))),
        Just(Some(json!("-5"))),
        Just(Some(json!("1e400"))),
        Just(Some(json!("9223372036854775807"))),
        Just(Some(json!("8Ei"))),
        Just(Some(json!("0.0000001m"))),
        Just(Some(json!("NotIn"))),
        Just(Some(json!("Bogus"))),
        Just(Some(json!([]))),
        Just(Some(json!(["x", "y"]))),
        Just(Some(json!({}))),
        Just(Some(json!({"a": {"b": 1}}))),
        "[ -~]{0,10}".prop_map(|s| Some(Value::String(s))),
    ]
}

proptest! {
    #![proptest_config(config(128, 0x0b5e_55ed))]

    /// Arbitrary text: an error or a workload, never a panic.
    #[test]
    fn loader_survives_random_text(text in "\\PC{0,200}") {
        load_plan_check(&text);
        let _ = stowage_input::catalog::parse("fuzz.yaml", &text);
        let _ = Plan::from_json(&text);
        let _ = Weights::parse("fuzz.yaml", &text);
    }

    /// Generated workloads with memory in the exabyte range: each quantity is within range, but sums
    /// over containers and pods pass i64; they must load, plan and check without overflowing.
    #[test]
    fn huge_quantities_never_overflow(g in workload_strategy()) {
        let text = huge_memory(&render(&g));
        load_plan_check(&text);
    }

    /// Scenario files with random edits.
    #[test]
    fn loader_survives_mutated_yaml(base in 0..SCENARIO_TEXTS.len(), muts in proptest::collection::vec(mutation_strategy(), 1..4)) {
        let mut text = SCENARIO_TEXTS[base].to_string();
        for m in &muts {
            text = mutate(&text, m);
        }
        load_plan_check(&text);
        // The NodePools with their NodeClass, so that mutated pools reach the planner too.
        load_plan_check(&format!("{}\n---\n{}", SCENARIO_TEXTS[4], text));
    }

    /// Valid objects with one or two values replaced by odd ones (wrong types, invalid quantities,
    /// bad operators) or removed.
    #[test]
    fn loader_survives_odd_objects(picks in proptest::collection::vec((any::<usize>(), any::<usize>(), odd_value()), 1..=3)) {
        let mut objects = base_objects();
        for (o, p, value) in &picks {
            let n = objects.len();
            let obj = &mut objects[*o % n];
            let mut all = Vec::new();
            paths(obj, &mut Vec::new(), &mut all);
            let path = all[*p % all.len()].clone();
            match (value, path.split_last()) {
                (Some(v), _) => {
                    if let Some(slot) = at_path(obj, &path) {
                        *slot = v.clone();
                    }
                }
                (None, Some((last, parent))) => match (at_path(obj, parent), last) {
                    (Some(Value::Object(m)), Value::String(k)) => {
                        m.remove(k);
                    }
                    (Some(Value::Array(a)), Value::Number(i)) => {
                        let i = i.as_u64().unwrap_or(0) as usize;
                        if i < a.len() {
                            a.remove(i);
                        }
                    }
                    _ => {}
                },
                (None, None) => {}
            }
        }
        let text = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
        load_plan_check(&text);
    }

    /// Catalogs, weights and plans with random edits.
    #[test]
    fn parsers_survive_mutated_catalogs_weights_and_plans(which in 0..3usize, muts in proptest::collection::vec(mutation_strategy(), 1..4)) {
        let base = match which {
            0 => include_str!("../../../tests/fixtures/catalog-small.yaml").to_string(),
            1 => stowage_core::weights::DEFAULT_YAML.to_string(),
            _ => sample_plan_json(),
        };
        let mut text = base;
        for m in &muts {
            text = mutate(&text, m);
        }
        if let Ok(cat) = stowage_input::catalog::parse("fuzz.yaml", &text) {
            for t in &cat.types {
                let _ = t.allocatable();
            }
        }
        let _ = Weights::parse("fuzz.yaml", &text);
        if let Ok(plan) = Plan::from_json(&text) {
            // A plan that parses is checked against the workload it was made for.
            let w = plan_workload();
            let _ = check::check(&w.cluster, small_catalog(), &plan);
        }
    }
}

fn plan_workload() -> stowage_input::Workload {
    let text = format!(
        "{NODECLASS}{}{}{}{}",
        pool_full("default", "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]", "", "", ""),
        node("n-a", "zone-a", "2", "", ""),
        pod("a", "{app: a}", "500m", "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: a}}}]"),
        pod("b", "{app: a}", "1500m", ""),
    );
    stowage_input::load_texts([(Path::new("plan-workload.yaml"), text.as_str())]).expect("the plan workload loads")
}

fn sample_plan_json() -> String {
    let w = plan_workload();
    plan_cluster(&w.cluster, small_catalog(), &Weights::default(), Solver::Greedy).expect("plans").to_json()
}
