//! Preference policies (issue 15, behaviour 12; `semantics::preferences`): under `Respect` (the
//! default, Karpenter's) a pod's preferences are planned as requirements and relaxed, in Karpenter's
//! order, only while the pod cannot be placed; under `Ignore` they are not planned; under `Priced` they
//! cost the soft weights. Every case runs with both planners and the checker, which judges a Respect
//! plan with each placed pod's kept preferences as requirements.

mod common;

use common::{Edit, Exp, Is, case, node, pod, pods, pool, pool_full};
use stowage_core::plan::Plan;
use stowage_core::weights::{PreferencePolicy, Weights};
use stowage_input::Workload;

const OD: &str = "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]";
const WEB: &str = "{app: web}";

fn ignore() -> Weights {
    Weights { preference_policy: PreferencePolicy::Ignore, ..Weights::default() }
}

fn anti(key: &str, app: &str) -> String {
    format!(
        "affinity: {{podAntiAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 100, podAffinityTerm: {{labelSelector: {{matchLabels: {{app: {app}}}}}, topologyKey: {key}}}}}]}}}}"
    )
}

/// The relaxations the plan records for a pod.
fn relaxed<'a>(p: &'a Plan, pod: &str) -> &'a [String] {
    p.placements.iter().find(|pl| pl.pod == format!("default/{pod}")).map(|pl| pl.relaxed.as_slice()).unwrap_or(&[])
}

fn relaxed_is(p: &Plan, pod: &str, want: &[&str]) -> Result<(), String> {
    let got = relaxed(p, pod);
    if got == want { Ok(()) } else { Err(format!("{pod} relaxed {got:?}, expected {want:?}")) }
}

/// The checker refuses the plan once `pod`'s recorded relaxations are edited by `edit`, naming `constraint`.
fn tampered(p: &Plan, w: &Workload, pod: &str, edit: fn(&mut Vec<String>), constraint: &str) -> Result<(), String> {
    let mut bad = p.clone();
    let pl = bad.placements.iter_mut().find(|pl| pl.pod == format!("default/{pod}")).ok_or("not placed")?;
    edit(&mut pl.relaxed);
    let r = stowage_core::check::check(&w.cluster, common::small_catalog(), &bad);
    if r.violations.iter().any(|v| v.constraint == constraint) { Ok(()) } else { Err(format!("the checker does not refuse the edited plan with {constraint}: {:?}", r.violations)) }
}

#[test]
fn respect_holds_preferences_as_requirements_until_they_cannot_be_met() {
    let cases = [
        // kube-scheduler would put p beside x (preferences only score); Respect keeps it away, as
        // Karpenter's scheduler does, and the checker holds the plan to it.
        case(
            "a preferred anti-affinity is kept",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), pod("x", "{app: x}", "100m", "nodeName: n-a"), pod("p", "", "100m", &anti("kubernetes.io/hostname", "x"))),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New]), Exp::Custom("nothing relaxed", |p, _| relaxed_is(p, "p", &[]))])
        .broken([Edit::Move("p", "n-a")], "InterPodAffinity"),
        // Karpenter #666: replicas that prefer other hosts get a node each under Respect.
        case("replicas preferring other hosts", pods(4, "web", WEB, "100m", &anti("kubernetes.io/hostname", "web")))
            .expects([Exp::NewNodes(4), Exp::Apart(&["web-0", "web-1", "web-2", "web-3"])])
            .broken([Edit::Move("web-1", "@web-0")], "InterPodAffinity"),
        // A preferred zone no NodePool offers: relaxed, recorded, and the checker holds the plan to
        // exactly what it records.
        case(
            "an unmeetable node preference is relaxed",
            pod("p", "", "100m", "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 50, preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-x]}]}}]}}"),
        )
        .expects([
            Exp::NewNodes(1),
            Exp::AllPlaced,
            Exp::Custom("the node term relaxed", |p, _| relaxed_is(p, "p", &["nodeAffinity.preferred[0] (weight 50)"])),
            Exp::Custom("unrecorded, the relaxation is a NodeAffinity violation", |p, w| tampered(p, w, "p", |r| r.clear(), "NodeAffinity")),
            Exp::Custom("a relaxation the pod does not have is refused", |p, w| tampered(p, w, "p", |r| r.push("PreferNoSchedule taints".into()), "Plan")),
        ]),
        // Karpenter's order: pod affinity before node affinity. The affinity to pods that do not exist
        // cannot be met, so it goes first; the node preference (zone-b) can be met, so it stays.
        case(
            "relaxation follows Karpenter's order",
            pod(
                "p",
                "",
                "100m",
                "affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 10, podAffinityTerm: {labelSelector: {matchLabels: {app: ghost}}, topologyKey: kubernetes.io/hostname}}]}, nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 20, preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}]}}]}}",
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Zone("zone-b")]), Exp::Custom("only the affinity relaxed", |p, _| relaxed_is(p, "p", &["podAffinity.preferred[0] (weight 10)"]))])
        .broken([Edit::Rezone("p", "zone-a")], "NodeAffinity"),
        // A ScheduleAnyway zone spread is planned as DoNotSchedule.
        case(
            "a ScheduleAnyway spread is kept",
            pods(3, "web", WEB, "100m", "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]"),
        )
        .expects([Exp::NewNodes(3), Exp::ZoneCounts("web-", &[1, 1, 1])]),
        // Four replicas preferring other zones, three zones: three keep the preference, the fourth
        // relaxes it and lands anyway. The kept (one-way) preferences of the first three do not keep
        // it out: Karpenter does not track preferred anti-affinity inversely, kube-scheduler only
        // scores it.
        case("more replicas than zones", pods(4, "web", WEB, "100m", &anti("topology.kubernetes.io/zone", "web"))).expects([
            Exp::AllPlaced,
            Exp::ZoneCounts("web-", &[2, 1, 1]),
            Exp::Custom("exactly one replica relaxed", |p, _| {
                let n = p.placements.iter().filter(|pl| !pl.relaxed.is_empty()).count();
                let all_anti = p.placements.iter().all(|pl| pl.relaxed.is_empty() || pl.relaxed == ["podAntiAffinity.preferred[0] (weight 100)"]);
                if n == 1 && all_anti { Ok(()) } else { Err(format!("{n} replicas relaxed: {:?}", p.placements)) }
            }),
        ]),
        // PreferNoSchedule filters under Respect: p takes a new node rather than the tainted one...
        case("a PreferNoSchedule node is avoided", format!("{}{}", node("n-soft", "zone-a", "4", "", "taints: [{key: soft, effect: PreferNoSchedule}]"), pod("p", "", "100m", "")))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
            .broken([Edit::Move("p", "n-soft")], "TaintToleration"),
        // ...and relaxes it when only tainted capacity exists.
        case("PreferNoSchedule relaxed when nothing else exists", format!("{}{}", pool_full("soft", OD, "", "taints: [{key: soft, effect: PreferNoSchedule}]", ""), pod("p", "", "100m", "")))
            .expects([Exp::On("p", &[Is::New, Is::Pool("soft")]), Exp::Custom("PreferNoSchedule relaxed", |p, _| relaxed_is(p, "p", &["PreferNoSchedule taints"]))]),
        // A pod that cannot be placed at all stays pending with kube-scheduler's reason, its
        // preferences having been relaxed on the way.
        case(
            "a pod that fits nowhere stays pending",
            format!("{}{}", pool("default", OD), pod("big", "", "64", "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}]}}]}}")),
        )
        .expects([Exp::NewNodes(0), Exp::Unschedulable("big", "NodeResourcesFit")]),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn ignore_plans_without_preferences() {
    let cases = [
        case(
            "a preferred anti-affinity is ignored",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), pod("x", "{app: x}", "100m", "nodeName: n-a"), pod("p", "", "100m", &anti("kubernetes.io/hostname", "x"))),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case("replicas preferring other hosts share a node", pods(4, "web", WEB, "100m", &anti("kubernetes.io/hostname", "web"))).expects([Exp::NewNodes(1)]),
        case("a PreferNoSchedule node is used", format!("{}{}", node("n-soft", "zone-a", "4", "", "taints: [{key: soft, effect: PreferNoSchedule}]"), pod("p", "", "100m", "")))
            .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-soft")])]),
    ];
    for c in cases {
        c.weights(ignore()).run();
    }
}

/// The plan file records the policy and the relaxations; a plan without the policy (a peer's, an older
/// file) is judged by kube-scheduler's rules alone.
#[test]
fn plans_record_the_policy_and_read_back() {
    let c = case("replicas", pods(2, "web", WEB, "100m", &anti("kubernetes.io/hostname", "web")));
    let w = c.workload();
    let cat = common::small_catalog();
    let plan = stowage_core::solve::plan_cluster(&w.cluster, cat, &Weights::default(), stowage_core::solve::Solver::Greedy).expect("plans");
    assert_eq!(plan.preference_policy, PreferencePolicy::Respect);
    let mut json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
    assert_eq!(json["preferencePolicy"], "Respect");
    let back = Plan::from_json(&plan.to_json()).expect("reads");
    assert_eq!((back.placements, back.preference_policy), (plan.placements.clone(), plan.preference_policy));
    // Both replicas moved onto one node: a violation under Respect, valid to kube-scheduler alone.
    json["placements"][1]["node"] = json["placements"][0]["node"].clone();
    json["newNodes"].as_array_mut().expect("nodes").truncate(1);
    let mut together = Plan::from_json(&json.to_string()).expect("reads");
    together.finish();
    assert!(!stowage_core::check::check(&w.cluster, cat, &together).valid());
    json.as_object_mut().expect("object").remove("preferencePolicy");
    let mut peer = Plan::from_json(&json.to_string()).expect("reads");
    peer.finish();
    assert_eq!(peer.preference_policy, PreferencePolicy::Priced);
    let r = stowage_core::check::check(&w.cluster, cat, &peer);
    assert!(r.valid(), "{:?}", r.violations);
}

/// The checker's unmet preferred pod-anti-affinity weight for the plan.
fn anti_units(p: &Plan, w: &Workload) -> i64 {
    stowage_core::check::check(&w.cluster, common::small_catalog(), p).preferences.preferred_pod_anti_affinity
}

/// Under Priced, a preferred hostname anti-affinity costs `soft.preferredPodAntiAffinity` per unit of
/// weight per pod that shares its node with a pod the term selects: at the default ($0.0001) four
/// replicas share a node and the checker counts 4 × 100 unmet units; priced above a node, the MILP
/// spreads them (the greedy planner prices it only in its objective, so that case is the MILP's).
#[test]
fn priced_hostname_anti_affinity_is_traded_against_nodes() {
    let c = case("cheap preference", pods(4, "web", WEB, "100m", &anti("kubernetes.io/hostname", "web")))
        .weights(common::priced())
        .expects([Exp::NewNodes(1), Exp::Custom("400 units unmet", |p, w| if anti_units(p, w) == 400 { Ok(()) } else { Err(format!("{} units", anti_units(p, w))) })]);
    let w = c.workload();
    c.run();
    let mut dear = common::priced();
    dear.soft.preferred_pod_anti_affinity = 1.0;
    let plan = stowage_core::solve::plan_cluster(&w.cluster, common::small_catalog(), &dear, stowage_core::solve::Solver::Milp).expect("plans");
    assert_eq!(plan.new_nodes.len(), 4, "{}", common::summary(&plan));
    let r = stowage_core::check::check(&w.cluster, common::small_catalog(), &plan);
    assert!(r.valid(), "{:?}", r.violations);
    assert_eq!(r.preferences.preferred_pod_anti_affinity, 0);
    // The same plan with one replica moved beside another: two pods now share a node, 200 units.
    let mut moved = plan.clone();
    let to = moved.placements[0].node.clone();
    moved.placements[1].node = to;
    moved.new_nodes.retain(|n| n.name != plan.placements[1].node);
    moved.finish();
    assert_eq!(anti_units(&moved, &w), 200);
}
