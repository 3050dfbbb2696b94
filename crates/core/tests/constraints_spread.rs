//! Table tests of PodTopologySpread (kubernetes-semantics.md §5; conformance list §9 items 1–4, 7, 9)
//! and of stowage's spread-domain rule (b): the planners' domain universe for a non-hostname key is the
//! domains of existing eligible nodes plus the domains NodePools can create, with the constraint's
//! nodeAffinityPolicy and nodeTaintsPolicy applied to NodePool domains too; hostname spread counts real
//! nodes (existing and planned) only, with no assumed zero minimum, and under `hostnameSpread: intent`
//! (the default) a new node takes at most maxSkew matching pods.
//!
//! Tests named `karpenter_rule_*` are cases where stowage follows Karpenter's wider universe rather than
//! kube-scheduler's (which only sees real nodes); `unlike_karpenter_*` are cases where stowage departs
//! from Karpenter. The checker always judges with kube-scheduler's universe.
//!
//! Workloads run on tests/fixtures/catalog-small.yaml with an on-demand NodePool over zone-a/b/c unless
//! a case declares its own.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use common::{Edit, Exp, Is, case, node, pod, pods, pool, pool_full};
use stowage_core::weights::{HostnameSpread, Weights};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";
const WEB: &str = "{app: web}";

/// A DoNotSchedule constraint selecting `app: web`; `extra` adds fields (`, minDomains: 3`).
fn tsc(key: &str, skew: u32, extra: &str) -> String {
    format!("{{maxSkew: {skew}, topologyKey: {key}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}{extra}}}")
}

fn spreads(cs: &[String]) -> String {
    format!("topologySpreadConstraints: [{}]", cs.join(", "))
}

fn zone_spread(extra: &str) -> String {
    spreads(&[tsc(ZONE, 1, extra)])
}

/// A pod bound to `node` requesting 100m.
fn bound(name: &str, labels: &str, node: &str) -> String {
    pod(name, labels, "100m", &format!("nodeName: {node}"))
}

/// Three existing nodes, one per zone, with `a`, `b`, `c` bound web pods.
fn three_zones(a: usize, b: usize, c: usize) -> String {
    let mut s = String::new();
    for (z, n) in [("a", a), ("b", b), ("c", c)] {
        s += &node(&format!("n-{z}"), &format!("zone-{z}"), "4", "", "");
        for i in 0..n {
            s += &bound(&format!("web-{z}{i}"), WEB, &format!("n-{z}"));
        }
    }
    s
}

fn requires_zones(zones: &str) -> String {
    format!("affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {ZONE}, operator: In, values: {zones}}}]}}]}}}}}}")
}

// Long because it is one table of cases, one per rule of topology spread (kube-scheduler's
// filtering.go items in order), each self-contained and read top to bottom.
#[test]
fn topology_spread() {
    let cases = [
        // Item 1: matchNum(d) + selfMatch − globalMin ≤ maxSkew with globalMin before placement:
        // counts a=2, b=1, c=1 ⇒ zone-a gets 2+1−1 = 2.
        case("skew with the pre-placement global minimum", three_zones(2, 1, 1) + &pod("p", WEB, "100m", &zone_spread("")))
            .expects([Exp::NewNodes(0), Exp::On("p", &[Is::AnyExisting, Is::ZoneIn(&["zone-b", "zone-c"])])])
            .broken([Edit::Move("p", "n-a")], "PodTopologySpread"),
        // selfMatch = 1: a pod matching its selector cannot join zone-a (1 + 1 − 0); zone-b's node is full.
        case(
            "selfMatch counts the incoming pod",
            format!(
                "{}{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("web-a", WEB, "n-a"),
                node("n-b", "zone-b", "1", "", ""),
                pod("filler", "", "1", "nodeName: n-b"),
                pod("p", WEB, "100m", &zone_spread("")),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::ZoneIn(&["zone-b", "zone-c"])])])
        .broken([Edit::Move("p", "n-a")], "PodTopologySpread"),
        // selfMatch = 0: a pod outside its own selector adds nothing: zone-a gives 1 + 0 − 0.
        case(
            "selfMatch is 0 for a pod its selector does not select",
            format!(
                "{}{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("web-a", WEB, "n-a"),
                node("n-b", "zone-b", "1", "", ""),
                pod("filler", "", "1", "nodeName: n-b"),
                pod("p", "{app: other}", "100m", &zone_spread("")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        // Constraints are ANDed: zone-a is full by zone, rack r1 by rack; only n-b2 passes both.
        case(
            "several constraints are ANDed",
            format!(
                "{}{}{}{}{}{}",
                node("n-a1", "zone-a", "4", "rack: r1", ""),
                bound("web-0", WEB, "n-a1"),
                node("n-a2", "zone-a", "4", "rack: r2", ""),
                node("n-b1", "zone-b", "4", "rack: r1", ""),
                node("n-b2", "zone-b", "4", "rack: r2", ""),
                pod("p", WEB, "100m", &spreads(&[tsc(ZONE, 1, ""), tsc("rack", 1, "")])),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-b2")])])
        .broken([Edit::Move("p", "n-a2")], "PodTopologySpread")
        .broken([Edit::Move("p", "n-b1")], "PodTopologySpread"),
        // Item 2: with fewer eligible domains than minDomains the global minimum is 0, so each of the
        // two zones the NodePool offers takes at most maxSkew pods.
        case(
            "minDomains above the domain count forces globalMin 0",
            format!(
                "{}{}",
                pool("ab", &format!("[{{key: {ZONE}, operator: In, values: [zone-a, zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
                pods(3, "web", WEB, "100m", &zone_spread(", minDomains: 3"))
            ),
        )
        .expects([Exp::PlacedWithPrefix("web-", 2), Exp::ZoneCounts("web-", &[1, 1]), Exp::UnschedulableCount(1, "PodTopologySpread")])
        .broken([Edit::Move("web-0", "@web-1")], "PodTopologySpread"),
        case(
            "without minDomains two zones take 2 and 1",
            format!(
                "{}{}",
                pool("ab", &format!("[{{key: {ZONE}, operator: In, values: [zone-a, zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
                pods(3, "web", WEB, "100m", &zone_spread(""))
            ),
        )
        .expects([Exp::AllPlaced, Exp::ZoneCounts("web-", &[2, 1])]),
        case("minDomains met", pods(3, "web", WEB, "100m", &zone_spread(", minDomains: 3"))).expects([
            Exp::AllPlaced,
            Exp::ZoneCounts("web-", &[1, 1, 1]),
            Exp::NewZones(&["zone-a", "zone-b", "zone-c"]),
        ]),
        // Item 3: nodeAffinityPolicy Honor (default): only nodes matching the pod's node affinity count,
        // so zone-a (0 pods) is not a domain for a pod that requires zone-b or zone-c.
        case("nodeAffinityPolicy Honor (default)", three_zones(0, 1, 1) + &pod("p", WEB, "100m", &format!("{}, {}", requires_zones("[zone-b, zone-c]"), zone_spread(""))))
            .expects([Exp::NewNodes(0), Exp::On("p", &[Is::AnyExisting, Is::ZoneIn(&["zone-b", "zone-c"])])]),
        case(
            "nodeAffinityPolicy Ignore counts zones the pod cannot use",
            three_zones(0, 1, 1) + &pod("p", WEB, "100m", &format!("{}, {}", requires_zones("[zone-b, zone-c]"), zone_spread(", nodeAffinityPolicy: Ignore"))),
        )
        .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "PodTopologySpread")])
        .broken([Edit::Move("p", "n-b")], "PodTopologySpread"),
        // nodeTaintsPolicy Ignore (default): the tainted zone-a node (0 pods) is a domain, so zone-b (1
        // pod) is full; with Honor it is not, and zone-b takes the pod. The NodePool only offers zone-b.
        case(
            "nodeTaintsPolicy Ignore (default) counts tainted nodes",
            format!(
                "{}{}{}{}{}",
                pool("b", &format!("[{{key: {ZONE}, operator: In, values: [zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
                node("n-a", "zone-a", "4", "", "taints: [{key: maintenance, effect: NoSchedule}]"),
                node("n-b", "zone-b", "4", "", ""),
                bound("web-b", WEB, "n-b"),
                pod("p", WEB, "100m", &zone_spread("")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "PodTopologySpread")])
        .broken([Edit::Move("p", "n-b")], "PodTopologySpread"),
        case(
            "nodeTaintsPolicy Honor skips nodes with untolerated taints",
            format!(
                "{}{}{}{}{}",
                pool("b", &format!("[{{key: {ZONE}, operator: In, values: [zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
                node("n-a", "zone-a", "4", "", "taints: [{key: maintenance, effect: NoSchedule}]"),
                node("n-b", "zone-b", "4", "", ""),
                bound("web-b", WEB, "n-b"),
                pod("p", WEB, "100m", &zone_spread(", nodeTaintsPolicy: Honor")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-b")])]),
        // A node counts only if it carries every key of the pod's constraints: n-norack's two pods do
        // not count for the zone constraint, so zone-b (1 pod) is full and the pod needs a zone-a node.
        case(
            "nodes must carry all topology keys",
            format!(
                "{}{}{}{}{}{}{}",
                pool_full(
                    "racked",
                    &format!("[{{key: {ZONE}, operator: In, values: [zone-a, zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]"),
                    "{rack: r1}",
                    "",
                    ""
                ),
                node("n-norack", "zone-a", "4", "", ""),
                bound("web-0", WEB, "n-norack"),
                bound("web-1", WEB, "n-norack"),
                node("n-b", "zone-b", "4", "rack: r1", ""),
                bound("web-2", WEB, "n-b"),
                pod("p", WEB, "100m", &spreads(&[tsc(ZONE, 1, ""), tsc("rack", 1, "")])),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-a"), Is::Label("rack", "r1")])])
        .broken([Edit::Move("p", "n-b")], "PodTopologySpread")
        .broken([Edit::Move("p", "n-norack")], "PodTopologySpread"),
        // Item 4: only pods of the incoming pod's namespace count.
        case(
            "only the pod's namespace counts",
            format!("{}{}{}{}", node("n-a", "zone-a", "4", "", ""), bound("other/web-0", WEB, "n-a"), bound("other/web-1", WEB, "n-a"), pod("p", WEB, "100m", &zone_spread(""))),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case("same-namespace pods count", format!("{}{}{}{}", node("n-a", "zone-a", "4", "", ""), bound("web-0", WEB, "n-a"), bound("web-1", WEB, "n-a"), pod("p", WEB, "100m", &zone_spread(""))))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::NotZone("zone-a")])])
            .broken([Edit::Move("p", "n-a")], "PodTopologySpread"),
        // Terminating (deletionTimestamp) and terminal pods do not count.
        case(
            "terminating and terminal pods do not count",
            format!(
                "{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("web-0", WEB, "n-a").replace("labels: {app: web}}", "labels: {app: web}, deletionTimestamp: \"2026-01-01T00:00:00Z\"}"),
                bound("web-1", WEB, "n-a").replace("spec:", "status: {phase: Succeeded}\nspec:"),
                pod("p", WEB, "100m", &zone_spread("")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        // matchLabelKeys ANDs the pod's own value into the selector: v1 pods do not count for a v2 pod.
        case(
            "matchLabelKeys",
            format!(
                "{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("web-0", "{app: web, version: v1}", "n-a"),
                bound("web-1", "{app: web, version: v1}", "n-a"),
                pod("p", "{app: web, version: v2}", "100m", &zone_spread(", matchLabelKeys: [version]")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case(
            "the selector counts pods of other owners too",
            format!(
                "{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("web-0", "{app: web, version: v1}", "n-a"),
                bound("web-1", "{app: web, version: v1}", "n-a"),
                pod("p", "{app: web, version: v2}", "100m", &zone_spread("")),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::NotZone("zone-a")])])
        .broken([Edit::Move("p", "n-a")], "PodTopologySpread"),
        // A nil selector matches no pod, so the constraint never binds: the pods share one node.
        case("a nil selector matches nothing", pods(3, "web", WEB, "100m", &format!("topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}]")))
            .expects([Exp::NewNodes(1), Exp::Together(&["web-0", "web-1", "web-2"])]),
        // An empty selector `{}` counts no pod either (kube-scheduler's countPodsMatchSelector returns 0
        // for selector.Empty()), although for pod affinity `{}` selects every pod.
        case(
            "an empty selector counts nothing",
            pods(3, "web", WEB, "100m", &format!("topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{}}}}]")),
        )
        .expects([Exp::NewNodes(1), Exp::Together(&["web-0", "web-1", "web-2"])]),
        case(
            "an empty selector with matchLabelKeys is not empty",
            pods(3, "web", WEB, "100m", &format!("topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{}}, matchLabelKeys: [app]}}]")),
        )
        .expects([Exp::NewNodes(3), Exp::ZoneCounts("web-", &[1, 1, 1])]),
        // ScheduleAnyway only scores (to kube-scheduler, and so under Priced, where a zone spread is
        // not priced yet; Respect: constraints_preferences.rs).
        case(
            "ScheduleAnyway is soft",
            pods(3, "web", WEB, "100m", &format!("topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: web}}}}}}]")),
        )
        .weights(common::priced())
        .expects([Exp::NewNodes(1), Exp::Together(&["web-0", "web-1", "web-2"])]),
        // A node without the topology key cannot take the pod (UnschedulableAndUnresolvable).
        case("a node without the key is unresolvable", format!("{}{}", node("n-a", "zone-a", "4", "", ""), pod("p", WEB, "100m", &spreads(&[tsc("rack", 1, "")]))))
            .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "PodTopologySpread")])
            .broken([Edit::Move("p", "n-a")], "PodTopologySpread"),
        // Item 7: volume topology never enters spread counting (Karpenter #1239). Zones hold 1/1/1 on
        // full nodes; the pod's volume is in zone-a. With the volume zone folded into the pod's node
        // affinity, only zone-a would be eligible (1 domain < minDomains 3 ⇒ globalMin 0 ⇒ 1+1−0 > 1) and
        // the pod would stay pending; counted correctly, zone-a gives 1+1−1 and a new zone-a node works.
        case(
            "volume zones never enter spread counting",
            format!(
                "{}{}{}{}{}{}{}",
                node("n-a", "zone-a", "1", "", ""),
                pod("web-a", WEB, "1", "nodeName: n-a"),
                node("n-b", "zone-b", "1", "", ""),
                pod("web-b", WEB, "1", "nodeName: n-b"),
                node("n-c", "zone-c", "1", "", ""),
                pod("web-c", WEB, "1", "nodeName: n-c"),
                pv_claim("data-p", "zone-a"),
            ) + &pod("p", WEB, "100m", &format!("{}, volumes: [{{name: d, persistentVolumeClaim: {{claimName: data-p}}}}]", zone_spread(", minDomains: 3"))),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-a")])])
        .broken([Edit::Rezone("p", "zone-b")], "VolumeBinding"),
    ];
    for c in cases {
        c.run();
    }
}

/// A claim bound to a PV whose node affinity pins `zone`.
fn pv_claim(claim: &str, zone: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: pv-{claim}}}
spec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: gp3, claimRef: {{namespace: default, name: {claim}}}, csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{claim}}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {ZONE}, operator: In, values: [{zone}]}}]}}]}}}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {claim}, namespace: default}}
spec: {{accessModes: [ReadWriteOnce], storageClassName: gp3, volumeName: pv-{claim}, resources: {{requests: {{storage: 1Gi}}}}}}
"
    )
}

// ---------------------------------------------------------------------------------------------------
// Rule (b): NodePool-derived domains. Cases where stowage follows Karpenter's wider universe are named
// karpenter_rule_*; where it departs from Karpenter, unlike_karpenter_*.

/// kube-scheduler alone would put all three pods on one new node (one real domain); the zones the
/// NodePool can create are domains with 0 pods, so each zone gets one.
#[test]
fn karpenter_rule_zone_domains_include_zones_nodepools_can_create() {
    case("zone domains from NodePools", pods(3, "web", WEB, "100m", &zone_spread("")))
        .expects([Exp::NewNodes(3), Exp::NewZones(&["zone-a", "zone-b", "zone-c"]), Exp::ZoneCounts("web-", &[1, 1, 1])])
        .broken([Edit::AllTo("web-0")], "PodTopologySpread")
        .run();
}

/// Open NodePool keys are domains too: capacity-spread 1 and 2 from one pool, 3 from another (seed-1
/// without volumes).
#[test]
fn karpenter_rule_custom_key_domains_from_nodepool_requirements() {
    let docs = format!(
        "{}{}{}",
        pool("od-np", "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}, {key: capacity-spread, operator: In, values: [\"1\", \"2\"]}]"),
        pool("spot-np", "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: capacity-spread, operator: In, values: [\"3\"]}]"),
        pods(3, "web", WEB, "100m", &spreads(&[tsc("capacity-spread", 1, "")])),
    );
    case("capacity-spread domains", docs)
        .expects([Exp::NewNodes(3), Exp::NewLabels("capacity-spread", &["1", "2", "3"]), Exp::PoolNodes("od-np", 2), Exp::PoolNodes("spot-np", 1)])
        .broken([Edit::AllTo("web-0")], "PodTopologySpread")
        .broken([Edit::Label("pool:spot-np", "capacity-spread", "1")], "NodePool")
        .run();
}

/// A NodePool whose limits leave no room for a single node creates no domain. Karpenter keeps the
/// domains of a pool at its limits (so capacity-spread 3 would stay at 0 and cap 1 and 2 at one pod
/// each); stowage takes rule (b) literally, "domains NodePools can create", which is also what
/// kube-scheduler sees (no node, no domain): three pods go 2/1 over capacity-spread 1 and 2.
#[test]
fn unlike_karpenter_a_nodepool_at_its_limits_creates_no_domain() {
    let docs = format!(
        "{}{}{}",
        pool("od-np", "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}, {key: capacity-spread, operator: In, values: [\"1\", \"2\"]}]"),
        pool_full("spot-np", "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: capacity-spread, operator: In, values: [\"3\"]}]", "", "", "limits: {cpu: \"1\"}"),
        pods(3, "web", WEB, "100m", &spreads(&[tsc("capacity-spread", 1, "")])),
    );
    case("spot-np at its limits", docs)
        .expects([
            Exp::AllPlaced,
            Exp::PoolNodes("spot-np", 0),
            Exp::Custom("capacity-spread 2/1", |p, _| {
                let mut per: std::collections::BTreeMap<&str, usize> = Default::default();
                for n in &p.new_nodes {
                    *per.entry(n.labels["capacity-spread"].as_str()).or_default() += n.pods.len();
                }
                let mut counts: Vec<usize> = per.values().copied().collect();
                counts.sort();
                if counts == [1, 2] { Ok(()) } else { Err(format!("{per:?}")) }
            }),
        ])
        .run();
}

/// Existing eligible nodes add their domains even where no NodePool can launch: zone-d holds 0 pods and
/// its only node is full, so every other zone is capped at 1 (as in kube-scheduler).
#[test]
fn karpenter_rule_existing_domains_no_nodepool_can_create_still_count() {
    let docs = format!("{}{}{}", node("n-d", "zone-d", "1", "", ""), pod("filler", "", "1", "nodeName: n-d"), pods(4, "web", WEB, "100m", &zone_spread("")));
    case("existing zone-d", docs).expects([Exp::PlacedWithPrefix("web-", 3), Exp::ZoneCounts("web-", &[1, 1, 1]), Exp::UnschedulableCount(1, "PodTopologySpread")]).run();
}

/// Karpenter applies only the taint policy to NodePool domains, so a pod requiring zone-b or zone-c
/// still sees zone-a (0 pods forever) and gets only one pod per zone (Karpenter #2623, #3272). stowage
/// applies nodeAffinityPolicy Honor to NodePool domains too: 4 pods go 2/2.
#[test]
fn unlike_karpenter_node_affinity_policy_applies_to_nodepool_domains() {
    case("Honor on NodePool domains", pods(4, "web", WEB, "100m", &format!("{}, {}", requires_zones("[zone-b, zone-c]"), zone_spread(""))))
        .expects([Exp::AllPlaced, Exp::ZoneCounts("web-", &[2, 2]), Exp::Custom("no zone-a", |p, _| if p.new_nodes.iter().any(|n| n.zone == "zone-a") { Err("a zone-a node".into()) } else { Ok(()) })])
        .broken([Edit::Rezone("web-0", "zone-a")], "NodeAffinity")
        .run();
}

/// With nodeAffinityPolicy Ignore the zone the pod cannot use stays a NodePool domain with 0 pods, so only
/// one pod per usable zone fits. kube-scheduler, seeing only the two real nodes, would take more: the
/// wider universe is conservative, and the checker notes the pods it would still place.
#[test]
fn karpenter_rule_ignore_policy_counts_nodepool_zones_the_pod_cannot_use() {
    case("Ignore on NodePool domains", pods(4, "web", WEB, "100m", &format!("{}, {}", requires_zones("[zone-b, zone-c]"), zone_spread(", nodeAffinityPolicy: Ignore"))))
        .expects([Exp::PlacedWithPrefix("web-", 2), Exp::ZoneCounts("web-", &[1, 1]), Exp::UnschedulableCount(2, "PodTopologySpread")])
        .fit_notes_allowed()
        .run();
}

/// nodeTaintsPolicy Honor drops a tainted NodePool's zone from the universe (as Karpenter does), so
/// zone-b's one pod is the minimum and the pod joins n-b.
#[test]
fn karpenter_rule_taint_policy_honor_drops_tainted_nodepool_domains() {
    let docs = format!(
        "{}{}{}{}{}",
        pool("b-only", &format!("[{{key: {ZONE}, operator: In, values: [zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
        pool_full(
            "tainted-c",
            &format!("[{{key: {ZONE}, operator: In, values: [zone-c]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]"),
            "",
            "taints: [{key: dedicated, effect: NoSchedule}]",
            ""
        ),
        node("n-b", "zone-b", "4", "", ""),
        bound("web-b", WEB, "n-b"),
        pod("p", WEB, "100m", &zone_spread(", nodeTaintsPolicy: Honor")),
    );
    case("Honor drops tainted-c", docs).expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-b")])]).run();
}

/// Under the default nodeTaintsPolicy Ignore the tainted NodePool's zone-c is a domain with 0 pods that
/// this pod can never fill, so zone-b (1 pod) is full. kube-scheduler sees no zone-c node and would
/// place the pod on n-b; stowage (like Karpenter) plans conservatively and the checker notes it.
#[test]
fn karpenter_rule_tainted_nodepool_zone_counts_under_default_ignore_policy() {
    let docs = format!(
        "{}{}{}{}{}",
        pool("b-only", &format!("[{{key: {ZONE}, operator: In, values: [zone-b]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]")),
        pool_full(
            "tainted-c",
            &format!("[{{key: {ZONE}, operator: In, values: [zone-c]}}, {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]"),
            "",
            "taints: [{key: dedicated, effect: NoSchedule}]",
            ""
        ),
        node("n-b", "zone-b", "4", "", ""),
        bound("web-b", WEB, "n-b"),
        pod("p", WEB, "100m", &zone_spread("")),
    );
    case("Ignore keeps tainted-c", docs).expects([Exp::NewNodes(0), Exp::Unschedulable("p", "PodTopologySpread")]).fit_notes_allowed().run();
}

/// Hostname spread counts real nodes only, with no assumed zero minimum: n-a holds one pod and is the
/// only eligible node, so globalMin is 1 and a second pod joins it (1+1−1 ≤ 1). Karpenter takes
/// globalMin 0 for hostname and would launch a node (aws#4666).
#[test]
fn unlike_karpenter_hostname_spread_has_no_assumed_zero_minimum() {
    let docs = format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), bound("web-0", WEB, "n-a"), pod("p", WEB, "100m", &spreads(&[tsc(HOST, 1, "")])));
    case("hostname min over real nodes", docs).expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]).run();
}

fn exact() -> Weights {
    Weights { hostname_spread: HostnameSpread::Exact, ..Weights::default() }
}

/// The hostname rule's acceptance table (issue 15, behaviour 1), each case under the default
/// `hostnameSpread: intent` unless it says `exact`.
// Long because it is one table of cases, each self-contained and read top to bottom.
#[test]
fn hostname_spread_intent() {
    let web = |n: usize, skew: u32| pods(n, "web", WEB, "100m", &spreads(&[tsc(HOST, skew, "")]));
    // Four existing nodes holding one replica each.
    let four_nodes = || (0..4).map(|i| node(&format!("n-{i}"), "zone-a", "4", "", "") + &bound(&format!("old-{i}"), WEB, &format!("n-{i}"))).collect::<String>();
    let cases = [
        // Four replicas with maxSkew 1 in an empty pool: one new node per replica. kube-scheduler alone
        // would accept one node for all four (a single domain has skew 0).
        case("intent: four replicas, four new nodes", web(4, 1))
            .expects([Exp::NewNodes(4), Exp::AllPlaced, Exp::Apart(&["web-0", "web-1", "web-2", "web-3"])])
            .broken([Edit::Move("web-1", "@web-0")], "PodTopologySpread"),
        // maxSkew 2: two per new node.
        case("intent: maxSkew 2, two new nodes", web(4, 2)).expects([Exp::NewNodes(2), Exp::AllPlaced]).broken([Edit::AllTo("web-0")], "PodTopologySpread"),
        // Existing nodes follow kube-scheduler's minimum over real nodes: four nodes with one replica each
        // take five more (2, 2, 2, 2, then 3 once the minimum is 2), where Karpenter, taking the hostname
        // minimum as 0, launches five nodes (aws#4666).
        case("intent: existing nodes take what kube-scheduler gives them", four_nodes() + &web(5, 1)).expects([
            Exp::NewNodes(0),
            Exp::AllPlaced,
            Exp::Custom("2 or 3 replicas per node", |p, _| {
                let mut per: std::collections::BTreeMap<&str, usize> = Default::default();
                for pl in &p.placements {
                    *per.entry(pl.node.as_str()).or_default() += 1;
                }
                let mut got: Vec<usize> = per.values().copied().collect();
                got.sort();
                if got == [1, 1, 1, 2] { Ok(()) } else { Err(format!("new replicas per node {per:?}")) }
            }),
        ]),
        // minDomains follows kube-scheduler: with fewer real eligible nodes than minDomains the minimum is
        // 0, so the existing node holding one replica takes none, and each new node one.
        case(
            "intent: minDomains over real nodes",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), bound("old", WEB, "n-a"), pods(2, "web", WEB, "100m", &spreads(&[tsc(HOST, 1, ", minDomains: 3")]))),
        )
        .expects([Exp::NewNodes(2), Exp::AllPlaced, Exp::Apart(&["web-0", "web-1"]), Exp::On("web-0", &[Is::New]), Exp::On("web-1", &[Is::New])]),
        // exact keeps kube-scheduler's rule alone: on a single new node the global minimum is that node's
        // count, so four replicas share it.
        case("exact: four replicas on one new node", web(4, 1)).weights(exact()).expects([Exp::NewNodes(1), Exp::Together(&["web-0", "web-1", "web-2", "web-3"])]),
        case("exact: existing nodes", four_nodes() + &web(5, 1)).weights(exact()).expects([Exp::NewNodes(0), Exp::AllPlaced]),
    ];
    for c in cases {
        c.run();
    }
}

/// ScheduleAnyway hostname spreads under intent and `preferencePolicy: Priced`: the same bound as a
/// preference, each replica beyond
/// maxSkew on a new node costing soft.scheduleAnywaySpread. At the default ($0.001 per replica) four
/// replicas still share one node (three nodes more would cost far more) and the checker reports the
/// three replicas beyond maxSkew; priced above a node, the MILP spreads them (greedy does not price this
/// preference while it searches, only in its objective, so the case is the MILP's).
#[test]
fn schedule_anyway_hostname_spread_is_a_preference_under_intent() {
    let soft = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]";
    fn units(p: &stowage_core::plan::Plan, w: &stowage_input::Workload) -> i64 {
        stowage_core::check::check(&w.cluster, common::small_catalog(), p).preferences.schedule_anyway_hostname_spread
    }
    case("ScheduleAnyway hostname, default price", pods(4, "web", WEB, "100m", soft))
        .weights(common::priced())
        .expects([
            Exp::NewNodes(1),
            Exp::Custom("three beyond maxSkew", |p, w| match units(p, w) {
                3 => Ok(()),
                got => Err(format!("the checker counts {got} replicas beyond maxSkew")),
            }),
        ])
        .run();
    let c = case("ScheduleAnyway hostname, priced above a node", pods(4, "web", WEB, "100m", soft));
    let w = c.workload();
    let mut dear = common::priced();
    dear.soft.schedule_anyway_spread = 1.0;
    let plan = stowage_core::solve::plan_cluster(&w.cluster, common::small_catalog(), &dear, stowage_core::solve::Solver::Milp).expect("plans");
    assert_eq!(plan.new_nodes.len(), 4, "{}", common::summary(&plan));
    assert!(stowage_core::check::check(&w.cluster, common::small_catalog(), &plan).valid());
    assert_eq!(units(&plan, &w), 0);
    let mut exact_dear = dear.clone();
    exact_dear.hostname_spread = HostnameSpread::Exact;
    let plan = stowage_core::solve::plan_cluster(&w.cluster, common::small_catalog(), &exact_dear, stowage_core::solve::Solver::Milp).expect("plans");
    assert_eq!(plan.new_nodes.len(), 1, "exact prices no hostname preference: {}", common::summary(&plan));
}

/// The checker judges a plan under the rule it records: the one-node plan `exact` makes is valid as
/// such, and a violation of the intent rule once the plan says `intent`.
#[test]
fn the_checker_judges_a_plan_by_its_hostname_spread() {
    let c = case("exact plan", pods(4, "web", WEB, "100m", &spreads(&[tsc(HOST, 1, "")])));
    let w = c.workload();
    let cat = common::small_catalog();
    for solver in common::planners() {
        let mut plan = stowage_core::solve::plan_cluster(&w.cluster, cat, &exact(), solver).expect("plans");
        assert_eq!(plan.new_nodes.len(), 1, "{solver:?}: {}", common::summary(&plan));
        assert_eq!(plan.hostname_spread, HostnameSpread::Exact);
        assert!(stowage_core::check::check(&w.cluster, cat, &plan).valid());
        // Read back without the field (a peer's or an older plan): exact.
        let mut json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
        assert_eq!(json["hostnameSpread"], "exact");
        json.as_object_mut().expect("an object").remove("hostnameSpread");
        let again = stowage_core::plan::Plan::from_json(&json.to_string()).expect("reads");
        assert_eq!(again.hostname_spread, HostnameSpread::Exact);
        plan.hostname_spread = HostnameSpread::Intent;
        let r = stowage_core::check::check(&w.cluster, cat, &plan);
        assert_eq!(r.violations.len(), 3, "{solver:?}: the 2nd to 4th replica break the intent rule: {:#?}", r.violations);
        assert!(r.violations.iter().all(|v| v.constraint == "PodTopologySpread" && v.message.contains("hostnameSpread: intent")), "{:#?}", r.violations);
    }
}

/// Every existing eligible node is a hostname domain, even a full one with 0 matching pods: it keeps
/// the global minimum at 0, so each node may hold one pod. Three pods need n-a and two new nodes.
#[test]
fn hostname_spread_counts_existing_nodes_with_zero_pods() {
    let docs = format!(
        "{}{}{}{}",
        node("n-a", "zone-a", "4", "", ""),
        node("n-full", "zone-a", "1", "", ""),
        pod("filler", "", "1", "nodeName: n-full"),
        pods(3, "web", WEB, "100m", &spreads(&[tsc(HOST, 1, "")])),
    );
    case("hostname with a full node", docs)
        .expects([
            Exp::NewNodes(2),
            Exp::AllPlaced,
            Exp::Apart(&["web-0", "web-1", "web-2"]),
            Exp::Custom("one pod on n-a", |p, _| {
                let n = p.placements.iter().filter(|pl| pl.node == "n-a").count();
                if n == 1 { Ok(()) } else { Err(format!("{n} on n-a")) }
            }),
        ])
        .broken([Edit::AllTo("web-0")], "PodTopologySpread")
        .run();
}

// ---------------------------------------------------------------------------------------------------
// Cluster-default topology spread (issue 15, behaviour 6): kube-scheduler's PodTopologySpread
// `defaultConstraints`, for pods without constraints of their own, with the selector deduced from the
// Services and controllers that select the pod (`semantics::spread_defaults`).

/// `defaultingType: List` with these constraints (`key`, maxSkew, whenUnsatisfiable).
fn list_defaults(cs: &[(&str, i32, &str)]) -> Weights {
    use stowage_core::semantics::spread_defaults::{Action, DefaultConstraint, SpreadDefaults};
    let cs = cs
        .iter()
        .map(|&(key, max_skew, when)| DefaultConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: if when == "DoNotSchedule" { Action::DoNotSchedule } else { Action::ScheduleAnyway },
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
            label_selector: None,
        })
        .collect();
    Weights { topology_spread_defaults: SpreadDefaults::list(cs), ..Weights::default() }
}

/// Zone DoNotSchedule maxSkew 1, as a cluster's KubeSchedulerConfiguration would give it.
fn zone_default() -> Weights {
    list_defaults(&[(ZONE, 1, "DoNotSchedule")])
}

const WEB_SERVICE: &str = "---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}}
";

/// A Deployment `web` of `n` replicas (100m each, `app: web`).
fn web_deployment(n: usize) -> String {
    format!(
        "---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: {n}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}}}]}}
"
    )
}

/// A ReplicaSet `web` of `n` replicas and its `n` pods `web-0` … listed pending (so the cases can name
/// them), `spec` extra entries of each pod's spec.
fn web_replicaset(n: usize, spec: &str) -> String {
    let mut s = format!(
        "---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: web, namespace: default, uid: rs-web}}
spec:
  replicas: {n}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: c, image: pause}}]}}
"
    );
    let spec = if spec.is_empty() { String::new() } else { format!(", {spec}") };
    for i in 0..n {
        s += &format!(
            "---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, namespace: default, labels: {{app: web}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs-web, controller: true}}]}}
spec: {{containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}}}]{spec}}}
"
        );
    }
    s
}

/// The acceptance table: a List default that filters spreads the pods it applies to exactly as
/// kube-scheduler requires; it never applies to pods with constraints of their own or that nothing
/// selects; System defaults only score. Both planners and the checker run every case.
// Long because it is one table of cases, each self-contained and read top to bottom.
#[test]
fn cluster_default_topology_spread() {
    let cases = [
        // A Deployment selected by a Service: six replicas over the pool's three zones, two each (in an
        // empty pool every zone NodePools can create is a domain for the planners; the checker judges
        // with the nodes the plan launches).
        case("List zone default: a Deployment behind a Service spreads over zones", format!("{WEB_SERVICE}{}", web_deployment(6)))
            .weights(zone_default())
            .expects([Exp::AllPlaced, Exp::ZoneCounts("web-", &[2, 2, 2])]),
        // Existing nodes: n-a holds two pods the deduced selector counts (Service app=web and the
        // ReplicaSet's app=web); four more go to zones b and c, and moving one to n-a breaks the
        // default, which the checker reports as PodTopologySpread.
        case("List zone default counts existing pods", format!("{WEB_SERVICE}{}{}", three_zones(2, 0, 0), web_replicaset(4, "")))
            .weights(zone_default())
            .expects([Exp::NewNodes(0), Exp::AllPlaced, Exp::ZoneCounts("web-", &[2, 2]), Exp::On("web-0", &[Is::NotZone("zone-a")])])
            .broken([Edit::Move("web-0", "n-a")], "PodTopologySpread"),
        // Only the ReplicaSet selects the pods (no Service): its selector alone is the default's.
        case("List zone default: the owner alone selects", format!("{}{}", three_zones(2, 0, 0), web_replicaset(4, "")))
            .weights(zone_default())
            .expects([Exp::NewNodes(0), Exp::ZoneCounts("web-", &[2, 2])])
            .broken([Edit::Move("web-1", "n-a")], "PodTopologySpread"),
        // Constraints of their own (a hostname ScheduleAnyway that never binds): no default, so the
        // pods pack wherever is cheapest, n-a included.
        case(
            "List zone default: pods with their own constraints keep them",
            format!(
                "{WEB_SERVICE}{}{}",
                three_zones(2, 0, 0),
                web_replicaset(4, "topologySpreadConstraints: [{maxSkew: 10, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]")
            ),
        )
        .weights(zone_default())
        .expects([
            Exp::NewNodes(0),
            Exp::AllPlaced,
            Exp::Custom("own constraints only", |_, w| {
                let own = w.cluster.pods.iter().filter(|p| p.owner.is_some()).all(|p| p.spread.len() == 1 && !p.spread[0].defaulted);
                if own { Ok(()) } else { Err("a default was applied to a pod with constraints of its own".into()) }
            }),
        ]),
        // Nothing selects the pods (no Service, no owner): no default, one node for all six.
        case("List zone default: nothing selects the pods", pods(6, "web", WEB, "100m", "")).weights(zone_default()).expects([Exp::NewNodes(1), Exp::ZoneCounts("web-", &[6])]),
        // A defaulted hostname DoNotSchedule is a cluster default, not the user's intent: kube-scheduler's
        // rule alone (hostnameSpread: intent does not apply), so four replicas share one new node where
        // their own constraint would take four.
        case("List hostname default: kube-scheduler's rule, no intent", format!("{WEB_SERVICE}{}", web_replicaset(4, "")))
            .weights(list_defaults(&[(HOST, 1, "DoNotSchedule")]))
            .expects([Exp::NewNodes(1), Exp::Together(&["web-0", "web-1", "web-2", "web-3"])]),
        // A List with only a ScheduleAnyway default: it only scores; nothing changes.
        case("List ScheduleAnyway default only scores", format!("{WEB_SERVICE}{}", web_deployment(6)))
            .weights(list_defaults(&[(ZONE, 1, "ScheduleAnyway")]))
            .expects([Exp::NewNodes(1), Exp::ZoneCounts("web-", &[6])]),
        // kube-scheduler's System defaults (ScheduleAnyway) never filter: the Deployment packs.
        case("System defaults only score", format!("{WEB_SERVICE}{}", web_deployment(6))).expects([Exp::NewNodes(1), Exp::ZoneCounts("web-", &[6])]),
    ];
    for c in cases {
        c.run();
    }
}

/// System defaults leave every plan as it is without any default (`defaultingType: List` with no
/// constraints turns defaulting off), for both planners, and the plan records the setting the checker
/// compares with the workload's.
#[test]
fn system_defaults_plan_as_no_defaults() {
    use stowage_core::semantics::spread_defaults::SpreadDefaults;
    let docs = format!("{WEB_SERVICE}{}{}", three_zones(1, 0, 0), web_deployment(6));
    let system = case("system", docs.clone());
    let off = case("off", docs).weights(list_defaults(&[]));
    let (ws, wo) = (system.workload(), off.workload());
    assert_eq!(ws.cluster.pods, wo.cluster.pods, "System defaults keep no constraint on any pod");
    let cat = common::small_catalog();
    for solver in common::planners() {
        let a = stowage_core::solve::plan_cluster(&ws.cluster, cat, &Weights::default(), solver).expect("plans");
        let b = stowage_core::solve::plan_cluster(&wo.cluster, cat, &list_defaults(&[]), solver).expect("plans");
        assert_eq!((&a.new_nodes, &a.placements, &a.unschedulable), (&b.new_nodes, &b.placements, &b.unschedulable), "{solver:?}");
        assert_eq!(a.topology_spread_defaults, SpreadDefaults::default());
        assert!(stowage_core::check::check(&ws.cluster, cat, &a).valid());
        // A plan made under other defaults than the workload was built with is for other pods.
        let r = stowage_core::check::check(&ws.cluster, cat, &b);
        assert!(!r.valid() && r.violations.iter().any(|v| v.constraint == "Plan" && v.message.contains("topologySpreadDefaults")), "{solver:?}: {:#?}", r.violations);
    }
}
