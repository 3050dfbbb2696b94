//! Table tests of the kube-scheduler conformance list (kubernetes-semantics.md §9) for the node-local
//! constraint families: resource fit, node selector and node affinity, taints and tolerations, host
//! ports, DaemonSet overhead, NodePool limits and weights. Topology spread and rule (b):
//! tests/constraints_spread.rs; inter-pod affinity and volumes: tests/constraints_affinity.rs.
//!
//! Each case is a small workload on tests/fixtures/catalog-small.yaml (t.small 2 cpu $0.10, t.medium
//! 4 cpu $0.19, t.large 8 cpu $0.36 in zone-a/b/c, spot at 40%; g.large arm64 with one nvidia.com/gpu,
//! on-demand in zone-a/b, $1.00; 100m cpu and 256Mi reserved per type), the expected plan, the checker's
//! verdict on it, and the checker's verdict on hand-broken copies. Every case runs for every planner.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use common::{Edit, Exp, Is, case, node, pod, pods, pool, pool_full};

const OD: &str = "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]";
const SPOT: &str = "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]";

#[test]
fn resource_fit() {
    let cases = [
        // An ordinary init container larger than the containers dominates: 3000m needs t.medium.
        case("init container dominates", pod("p", "", "100m", "initContainers: [{name: i, image: x, resources: {requests: {cpu: 3000m}}}]"))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Type("t.medium")])])
            .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // A sidecar (restartPolicy Always) adds to the containers and to the init containers after it:
        // 1000m + 1000m sidecar = 2000m > t.small's 1900m.
        case(
            "sidecar adds to the containers",
            pod("p", "", "1000m", "initContainers: [{name: s, image: x, restartPolicy: Always, resources: {requests: {cpu: 1000m}}}, {name: i, image: x, resources: {requests: {cpu: 500m}}}]"),
        )
        .expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])])
        .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // An init container that runs before the sidecar does not see it: max(1850m, 100m) fits t.small.
        case(
            "init container before a sidecar does not add it",
            pod("p", "", "", "initContainers: [{name: i, image: x, resources: {requests: {cpu: 1850m}}}, {name: s, image: x, restartPolicy: Always, resources: {requests: {cpu: 100m}}}]"),
        )
        .expects([Exp::On("p", &[Is::New, Is::Type("t.small")])]),
        // Pod overhead (RuntimeClass) is added: 1800m + 200m > 1900m.
        case("pod overhead is added", pod("p", "", "1800m", "overhead: {cpu: 200m}"))
            .expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])])
            .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // Pod-level resources (KEP-2837) replace the container aggregate.
        case("pod-level requests replace the containers", pod("p", "", "100m", "resources: {requests: {cpu: \"3\"}}")).expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])]),
        // A limit without a request becomes the request (API server defaulting).
        case("a limit without a request is the request", pod("p", "", "", "").replace("image: pause", "image: pause, resources: {limits: {cpu: \"3\"}}"))
            .expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])]),
        // Memory: 5Gi needs t.medium (t.small has 4Gi - 256Mi).
        case("memory", pod("p", "", "", "").replace("image: pause", "image: pause, resources: {requests: {memory: 5Gi}}"))
            .expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])])
            .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // Extended resources are integers checked like cpu: one GPU per g.large, so two nodes.
        case("extended resource nvidia.com/gpu", pods(2, "gpu", "", "", "").replace("image: pause", "image: pause, resources: {requests: {nvidia.com/gpu: 1}}"))
            .expects([Exp::NewNodes(2), Exp::On("gpu-0", &[Is::New, Is::Type("g.large")]), Exp::On("gpu-1", &[Is::Type("g.large")]), Exp::Apart(&["gpu-0", "gpu-1"])])
            .broken([Edit::Move("gpu-1", "@gpu-0")], "NodeResourcesFit"),
        // Zero requests still take a pod slot: 11 request-less pods need two 10-pod t.small nodes.
        case(
            "pod count",
            format!(
                "{}{}",
                pool("small", "[{key: node.kubernetes.io/instance-type, operator: In, values: [t.small]}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]"),
                pods(11, "p", "", "", "")
            ),
        )
        .expects([Exp::NewNodes(2), Exp::AllPlaced])
        .broken([Edit::AllTo("p-0")], "NodeResourcesFit"),
        // Capacity already paid for is free: a pod that fits the existing node's free cpu goes there.
        case("existing node with room", format!("{}{}{}", node("n-a", "zone-a", "2", "", ""), pod("bound", "", "1500m", "nodeName: n-a"), pod("p", "", "400m", "")))
            .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case("existing node without room", format!("{}{}{}", node("n-a", "zone-a", "2", "", ""), pod("bound", "", "1500m", "nodeName: n-a"), pod("p", "", "600m", "")))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Type("t.small")])])
            .broken([Edit::Move("p", "n-a")], "NodeResourcesFit"),
        // Terminal pods hold nothing; terminating pods still do.
        case(
            "terminal pods free their requests, terminating pods do not",
            format!(
                "{}{}{}{}",
                node("n-a", "zone-a", "2", "", ""),
                pod("done", "", "1500m", "nodeName: n-a").replace("spec:", "status: {phase: Succeeded}\nspec:"),
                node("n-b", "zone-b", "2", "", ""),
                pod("going", "", "1500m", "nodeName: n-b").replace("labels: {}", "labels: {}, deletionTimestamp: \"2026-01-01T00:00:00Z\""),
            ) + &pods(3, "p", "", "900m", ""),
        )
        .expects([
            Exp::NewNodes(1),
            Exp::PlacedWithPrefix("p-", 3),
            Exp::Custom("two pods on n-a or new", |p, _| if p.placements.iter().any(|pl| pl.node == "n-b") { Err("a pod on n-b, whose terminating pod still holds 1500m".into()) } else { Ok(()) }),
        ]),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn node_selector_and_node_affinity() {
    let zone_req = |op: &str, values: &str| {
        format!(
            "affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: {op}, values: {values}}}]}}]}}}}}}"
        )
    };
    let expr = |key: &str, op: &str, values: &str| {
        let v = if values.is_empty() { String::new() } else { format!(", values: {values}") };
        format!("affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {key}, operator: {op}{v}}}]}}]}}}}}}")
    };
    let cases = [
        case("nodeSelector", pod("p", "", "100m", "nodeSelector: {topology.kubernetes.io/zone: zone-b}"))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-b")])])
            .broken([Edit::Rezone("p", "zone-a")], "NodeAffinity"),
        case("In", pod("p", "", "100m", &zone_req("In", "[zone-c]")))
            .expects([Exp::On("p", &[Is::New, Is::Zone("zone-c")])])
            .broken([Edit::Rezone("p", "zone-b")], "NodeAffinity"),
        case("NotIn", pod("p", "", "100m", &zone_req("NotIn", "[zone-a, zone-b]")))
            .expects([Exp::On("p", &[Is::New, Is::Zone("zone-c")])])
            .broken([Edit::Rezone("p", "zone-a")], "NodeAffinity"),
        // NotIn passes when the label is absent; In does not.
        case(
            "NotIn on an absent label passes, In fails",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), pod("notin", "", "100m", &expr("disk", "NotIn", "[hdd]")), pod("in", "", "100m", &expr("disk", "In", "[ssd]"))),
        )
        .expects([Exp::NewNodes(0), Exp::On("notin", &[Is::Existing("n-a")]), Exp::Unschedulable("in", "NodeAffinity")])
        .broken([Edit::Move("in", "n-a")], "NodeAffinity"),
        case(
            "Exists and DoesNotExist",
            format!(
                "{}{}{}{}",
                pool_full("accel", OD, "{accel: \"yes\"}", "", ""),
                pool("plain", OD),
                pod("exists", "", "100m", &expr("accel", "Exists", "")),
                pod("absent", "", "100m", &expr("accel", "DoesNotExist", "")),
            ),
        )
        .expects([Exp::NewNodes(2), Exp::On("exists", &[Is::New, Is::Pool("accel"), Is::Label("accel", "yes")]), Exp::On("absent", &[Is::New, Is::Pool("plain")])])
        .broken([Edit::Repool("absent", "accel")], "NodeAffinity")
        .broken([Edit::Move("exists", "@absent")], "NodeAffinity"),
        // Gt/Lt compare integers: "8" > 4, "2" < 4, and "8" is not > "10" (a string comparison would say so).
        case(
            "Gt and Lt parse integers",
            format!(
                "{}{}{}{}{}",
                node("n-x", "zone-a", "4", "gen: x5", ""),
                pod("gt4", "", "100m", &expr("karpenter.k8s.aws/instance-cpu", "Gt", "[\"4\"]")),
                pod("lt4", "", "100m", &expr("karpenter.k8s.aws/instance-cpu", "Lt", "[\"4\"]")),
                pod("gt10", "", "100m", &expr("karpenter.k8s.aws/instance-cpu", "Gt", "[\"10\"]")),
                pod("gen", "", "100m", &expr("gen", "Gt", "[\"1\"]")),
            ),
        )
        .expects([
            Exp::NewNodes(2),
            Exp::On("gt4", &[Is::New, Is::Type("t.large")]),
            Exp::On("lt4", &[Is::New, Is::Type("t.small")]),
            Exp::Unschedulable("gt10", "NodeAffinity"),
            Exp::Unschedulable("gen", "NodeAffinity"),
        ])
        .broken([Edit::Retype("gt4", "t.medium")], "NodeAffinity")
        .broken([Edit::Move("gen", "n-x")], "NodeAffinity"),
        // Required terms are ORed (Karpenter only tries the first and relaxes; the model takes the OR).
        case(
            "terms are ORed",
            pod(
                "p",
                "",
                "100m",
                "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [nowhere]}]}, {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-c]}]}]}}}",
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Zone("zone-c")])])
        .broken([Edit::Rezone("p", "zone-a")], "NodeAffinity"),
        // Expressions inside a term are ANDed, and the nodeSelector is ANDed with the terms.
        case(
            "nodeSelector and affinity are ANDed",
            format!(
                "{}{}",
                pod("both", "", "100m", &format!("nodeSelector: {{topology.kubernetes.io/zone: zone-a}}, {}", zone_req("In", "[zone-b]"))),
                pod(
                    "and",
                    "",
                    "100m",
                    "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-a, zone-b]}, {key: topology.kubernetes.io/zone, operator: NotIn, values: [zone-a]}]}]}}}",
                ),
            ),
        )
        .expects([Exp::Unschedulable("both", "NodeAffinity"), Exp::On("and", &[Is::New, Is::Zone("zone-b")])]),
        // An empty term matches nothing.
        case("an empty term matches nothing", pod("p", "", "100m", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{}]}}}"))
            .expects([Exp::Unschedulable("p", "NodeAffinity"), Exp::NewNodes(0)]),
        // matchFields on metadata.name: In names one node; NotIn passes nodes not yet named.
        case(
            "matchFields metadata.name",
            format!(
                "{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                node("n-b", "zone-b", "4", "", ""),
                pod("in-b", "", "100m", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n-b]}]}]}}}"),
                pod("notin", "", "100m", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [n-a, n-b]}]}]}}}"),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("in-b", &[Is::Existing("n-b")]), Exp::On("notin", &[Is::New])])
        .broken([Edit::Move("in-b", "n-a")], "NodeAffinity")
        .broken([Edit::Move("notin", "n-a")], "NodeAffinity"),
        // Preferred terms only score: a pod preferring an impossible zone is still placed.
        case(
            "preferred node affinity never filters",
            pod("p", "", "100m", "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 50, preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [nowhere]}]}}]}}"),
        )
        .expects([Exp::NewNodes(1), Exp::AllPlaced]),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn taints_and_tolerations() {
    let tainted = pool_full("tainted", OD, "", "taints: [{key: dedicated, value: gpu, effect: NoSchedule}]", "");
    let tol = |t: &str| format!("tolerations: [{t}]");
    let cases = [
        // Toleration matching: key equal (or empty key with Exists), value equal with Equal, effect
        // equal or empty.
        case(
            "toleration matching rules",
            format!(
                "{tainted}{}{}{}{}{}{}{}",
                pod("none", "", "100m", ""),
                pod("equal", "", "100m", &tol("{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}")),
                pod("equal-other-value", "", "100m", &tol("{key: dedicated, operator: Equal, value: cpu}")),
                pod("exists-key", "", "100m", &tol("{key: dedicated, operator: Exists}")),
                pod("exists-all", "", "100m", &tol("{operator: Exists}")),
                pod("other-effect", "", "100m", &tol("{key: dedicated, operator: Exists, effect: NoExecute}")),
                pod("default-op", "", "100m", &tol("{key: dedicated, value: gpu}")),
            ),
        )
        .expects([
            Exp::Unschedulable("none", "TaintToleration"),
            Exp::On("equal", &[Is::New, Is::Pool("tainted")]),
            Exp::Unschedulable("equal-other-value", "TaintToleration"),
            Exp::On("exists-key", &[Is::New]),
            Exp::On("exists-all", &[Is::New]),
            Exp::Unschedulable("other-effect", "TaintToleration"),
            Exp::On("default-op", &[Is::New]),
            Exp::NewNodes(1),
        ])
        .broken([Edit::Move("none", "@equal")], "TaintToleration")
        .broken([Edit::Move("other-effect", "@equal")], "TaintToleration"),
        case(
            "NoExecute filters like NoSchedule",
            format!(
                "{}{}{}",
                pool_full("evict", OD, "", "taints: [{key: evict, effect: NoExecute}]", ""),
                pod("none", "", "100m", ""),
                pod("tolerates", "", "100m", "tolerations: [{key: evict, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]"),
            ),
        )
        .expects([Exp::Unschedulable("none", "TaintToleration"), Exp::On("tolerates", &[Is::New])])
        .broken([Edit::Move("none", "@tolerates")], "TaintToleration"),
        case("PreferNoSchedule only scores", format!("{}{}", pool_full("soft", OD, "", "taints: [{key: soft, effect: PreferNoSchedule}]", ""), pod("p", "", "100m", "")))
            .expects([Exp::On("p", &[Is::New, Is::Pool("soft")])]),
        // A tainted cheap pool is used only by pods that tolerate it.
        case(
            "NodePool taints steer pods between pools",
            format!("{}{}{}", pool_full("spot", SPOT, "", "taints: [{key: spot, value: \"true\", effect: NoSchedule}]", ""), pool("od", OD), pod("plain", "", "100m", ""),),
        )
        .expects([Exp::NewNodes(1), Exp::On("plain", &[Is::New, Is::Pool("od"), Is::CapacityType("on-demand")])])
        .broken([Edit::Repool("plain", "spot")], "TaintToleration"),
        case(
            "a tolerating pod may use the tainted pool",
            format!(
                "{}{}{}",
                pool_full("spot", SPOT, "", "taints: [{key: spot, value: \"true\", effect: NoSchedule}]", ""),
                pool("od", OD),
                pod("tolerant", "", "100m", "tolerations: [{key: spot, operator: Exists}]"),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("tolerant", &[Is::New, Is::Pool("spot"), Is::CapacityType("spot")])]),
        // spec.unschedulable acts as node.kubernetes.io/unschedulable:NoSchedule (NodeUnschedulable).
        case("cordoned node", format!("{}{}", node("n-cordoned", "zone-a", "4", "", "unschedulable: true"), pod("p", "", "100m", "")))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
            .broken([Edit::Move("p", "n-cordoned")], "NodeUnschedulable"),
        case(
            "a pod tolerating node.kubernetes.io/unschedulable may use a cordoned node",
            format!(
                "{}{}",
                node("n-cordoned", "zone-a", "4", "", "unschedulable: true"),
                pod("tolerant", "", "100m", "tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]"),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("tolerant", &[Is::Existing("n-cordoned")])]),
        case("existing node taints", format!("{}{}", node("n-tainted", "zone-a", "4", "", "taints: [{key: maintenance, effect: NoExecute}]"), pod("p", "", "100m", "")))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
            .broken([Edit::Move("p", "n-tainted")], "TaintToleration"),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn host_ports() {
    let port = |p: u16, extra: &str| format!("containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}, ports: [{{containerPort: {p}, hostPort: {p}{extra}}}]}}]");
    let with_ports = |name: &str, spec: String| pod(name, "", "", "").replace("spec: {containers: [{name: c, image: pause}]}", &format!("spec: {{{spec}}}"));
    let cases = [
        case("a host port once per node", format!("{}{}", with_ports("a", port(8080, "")), with_ports("b", port(8080, ""))))
            .expects([Exp::NewNodes(2), Exp::Apart(&["a", "b"])])
            .broken([Edit::Move("b", "@a")], "NodePorts"),
        case(
            "different protocols or host IPs share a port",
            format!(
                "{}{}{}{}",
                with_ports("tcp", port(8080, "")),
                with_ports("udp", port(8080, ", protocol: UDP")),
                with_ports("ip1", port(9090, ", hostIP: 10.0.0.1")),
                with_ports("ip2", port(9090, ", hostIP: 10.0.0.2")),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::Together(&["tcp", "udp", "ip1", "ip2"])]),
        case("0.0.0.0 conflicts with any host IP", format!("{}{}", with_ports("ip", port(7070, ", hostIP: 10.0.0.1")), with_ports("any", port(7070, ""))))
            .expects([Exp::NewNodes(2), Exp::Apart(&["ip", "any"])])
            .broken([Edit::Move("any", "@ip")], "NodePorts"),
        case(
            "ports used by bound pods",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), with_ports("bound", port(8080, "")).replace("spec: {", "spec: {nodeName: n-a, "), with_ports("p", port(8080, ""))),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
        .broken([Edit::Move("p", "n-a")], "NodePorts"),
        // Every new node runs the DaemonSet, which holds the port: the pod fits nowhere.
        case(
            "ports held by DaemonSet pods on new nodes",
            format!(
                "---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: exporter, namespace: default}}
spec:
  selector: {{matchLabels: {{app: exporter}}}}
  template:
    metadata: {{labels: {{app: exporter}}}}
    spec: {{{}}}
{}",
                port(9100, ""),
                with_ports("p", port(9100, ""))
            ),
        )
        .expects([Exp::Unschedulable("p", "NodePorts"), Exp::NewNodes(0)]),
    ];
    for c in cases {
        c.run();
    }
}

fn daemonset(name: &str, cpu: &str, spec: &str) -> String {
    let spec = if spec.is_empty() { String::new() } else { format!(", {spec}") };
    format!(
        "---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}}}}}}}]{spec}}}
"
    )
}

#[test]
fn daemonset_overhead() {
    let cases = [
        // 1000m of DaemonSet pods + a 1000m pod exceed t.small's 1900m.
        case("DaemonSet requests count on new nodes", format!("{}{}", daemonset("agent", "1000m", ""), pod("p", "", "1000m", "")))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Type("t.medium")])])
            .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // A DaemonSet selecting only one pool's nodes makes the other pool cheaper.
        case(
            "DaemonSet node selector",
            format!(
                "{}{}{}{}",
                pool_full("with-agent", OD, "{agent: \"yes\"}", "", "weight: 10"),
                pool("plain", OD),
                daemonset("agent", "1000m", "nodeSelector: {agent: \"yes\"}"),
                pod("p", "", "1000m", ""),
            ),
        )
        .expect(Exp::On("p", &[Is::New, Is::Pool("with-agent"), Is::Type("t.medium")]))
        .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        case(
            "DaemonSet not tolerating the NodePool taint does not run there",
            format!(
                "{}{}{}",
                pool_full("tainted", OD, "", "taints: [{key: dedicated, effect: NoSchedule}]", ""),
                daemonset("agent", "1000m", ""),
                pod("p", "", "1000m", "tolerations: [{key: dedicated, operator: Exists}]"),
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Type("t.small")])]),
        case(
            "DaemonSet tolerating the NodePool taint runs there",
            format!(
                "{}{}{}",
                pool_full("tainted", OD, "", "taints: [{key: dedicated, effect: NoSchedule}]", ""),
                daemonset("agent", "1000m", "tolerations: [{operator: Exists}]"),
                pod("p", "", "1000m", "tolerations: [{key: dedicated, operator: Exists}]"),
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Type("t.medium")])])
        .broken([Edit::Retype("p", "t.small")], "NodeResourcesFit"),
        // The EBS CSI node plugin's shape: an affinity on the instance type itself. It stays off
        // t.small, so t.small holds the pod there.
        case(
            "DaemonSet excluded from an instance type by name",
            format!("{}{}", daemonset("agent", "1000m", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: node.kubernetes.io/instance-type, operator: NotIn, values: [t.small]}]}]}}}"), pod("p", "", "1000m", "")),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Type("t.small")])]),
    ];
    for c in cases {
        c.run();
    }
}

/// A DaemonSet that reads a label (here the instance type) does not split configurations into more
/// pruning groups than the DaemonSets that run on them: which ones run is part of the group key. (With
/// the instance type among the projected keys, every type was a group of its own: 9324 columns for
/// seed-1-rescale's three pods beside the EKS DaemonSets, against 9.)
#[test]
fn daemonset_keys_do_not_split_configuration_groups() {
    use stowage_core::solve::Problem;
    use stowage_core::weights::Weights;
    let groups = |extra: String| {
        let w = case("groups", format!("{extra}{}", pods(3, "p", "", "500m", ""))).workload();
        let weights = Weights::default();
        let p = Problem::new(&w.cluster, common::small_catalog(), &weights).expect("the problem builds");
        p.configs.iter().map(|c| c.group).collect::<std::collections::BTreeSet<_>>().len()
    };
    let plain = groups(String::new());
    let selective = groups(daemonset(
        "agent",
        "100m",
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: node.kubernetes.io/instance-type, operator: NotIn, values: [t.small]}]}]}}}",
    ));
    // At most one more group per (zone, capacity type, pool) projection: the one t.small forms alone.
    assert!(selective <= 2 * plain, "{selective} groups with the DaemonSet against {plain} without");
}

/// PreferNoSchedule taints (issue 15, behaviour 10) under `preferencePolicy: Priced` cost
/// soft.preferNoSchedule per pod and untolerated taint, in both planners; the checker reports them.
/// (Under Respect they filter until relaxed: constraints_preferences.rs.)
#[test]
fn prefer_no_schedule_is_a_priced_preference() {
    let cases = [
        // PreferNoSchedule costs soft.preferNoSchedule per pod and untolerated taint: of two NodePools
        // alike but for the taint, the untainted one wins (the tainted one comes first in every other
        // order).
        case(
            "PreferNoSchedule prefers the untainted NodePool",
            format!("{}{}{}", pool_full("a-soft", OD, "", "taints: [{key: soft, effect: PreferNoSchedule}]", ""), pool("b-plain", OD), pod("p", "", "100m", "")),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Pool("b-plain")]), Exp::Custom("no unmet preference", |p, w| prefer_no_schedule(p, w, 0))]),
        // A pod that tolerates the taint does not mind it: the first pool in the stable order.
        case(
            "a tolerated PreferNoSchedule costs nothing",
            format!(
                "{}{}{}",
                pool_full("a-soft", OD, "", "taints: [{key: soft, effect: PreferNoSchedule}]", ""),
                pool("b-plain", OD),
                pod("p", "", "100m", "tolerations: [{key: soft, operator: Exists}]")
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Pool("a-soft")])]),
        // Among existing nodes too: p goes to the roomier untainted node, not the tighter tainted one
        // best fit would choose.
        case(
            "PreferNoSchedule on existing nodes",
            format!(
                "{}{}{}{}",
                node("n-soft", "zone-a", "4", "", "taints: [{key: soft, effect: PreferNoSchedule}]"),
                pod("filler", "", "3", "nodeName: n-soft"),
                node("n-plain", "zone-a", "4", "", ""),
                pod("p", "", "100m", ""),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-plain")])]),
        // A preference is worth less than a node: with only the tainted node, p uses it, and the
        // checker reports the unmet preference.
        case("PreferNoSchedule is cheaper than a node", format!("{}{}", node("n-soft", "zone-a", "4", "", "taints: [{key: soft, effect: PreferNoSchedule}]"), pod("p", "", "100m", ""))).expects([
            Exp::NewNodes(0),
            Exp::On("p", &[Is::Existing("n-soft")]),
            Exp::Custom("one unmet preference", |p, w| prefer_no_schedule(p, w, 1)),
        ]),
    ];
    for c in cases {
        c.weights(common::priced()).run();
    }
}

/// The checker's count of untolerated PreferNoSchedule taints under placed pods is `want`.
fn prefer_no_schedule(p: &stowage_core::plan::Plan, w: &stowage_input::Workload, want: i64) -> Result<(), String> {
    let got = stowage_core::check::check(&w.cluster, common::small_catalog(), p).preferences.prefer_no_schedule;
    if got == want { Ok(()) } else { Err(format!("the checker counts {got} untolerated PreferNoSchedule taints")) }
}

/// A catalog whose prices are linear in cpu: x.small (2 cpu, $0.10), x.large (4 cpu, $0.20) and
/// x.xlarge (8 cpu, $0.40), on-demand in zone-a and zone-b.
fn linear_catalog() -> &'static stowage_core::domain::catalog::Catalog {
    static C: std::sync::OnceLock<stowage_core::domain::catalog::Catalog> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let ty = |name: &str, cpu: u32, price: &str| {
            format!(
                "- name: {name}\n  labels: {{node.kubernetes.io/instance-type: {name}, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}\n  capacity: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"20\", ephemeral-storage: 20Gi}}\n  overhead: {{kubeReserved: {{cpu: 100m, memory: 256Mi}}}}\n  offerings:\n  - {{zone: zone-a, capacityType: on-demand, price: {price}}}\n  - {{zone: zone-b, capacityType: on-demand, price: {price}}}\n"
            )
        };
        let text = format!(
            "schema: stowage.dev/catalog/v1\nname: test-linear\nregion: test-region\nzones: [zone-a, zone-b]\nprovenance: [\"hand-written test data\"]\ninstanceTypes:\n{}{}{}",
            ty("x.small", 2, "0.10"),
            ty("x.large", 4, "0.20"),
            ty("x.xlarge", 8, "0.40")
        );
        stowage_input::catalog::parse("linear-catalog.yaml", &text).expect("the linear catalog parses")
    })
}

/// Ties (issue 15, behaviour 11): between plans of equal price, fewer nodes first, then a stable order.
#[test]
fn ties_fewer_nodes_then_a_stable_order() {
    let cases = [
        // Two 1500m pods: two x.small (one each, $0.20) or one x.large (both, $0.20). One node.
        case("equal price, fewer nodes", pods(2, "p", "", "1500m", "")).catalog(linear_catalog()).expects([Exp::NewNodes(1), Exp::AllPlaced, Exp::On("p-0", &[Is::Type("x.large")])]),
        // Four: one x.xlarge ($0.40), not two x.large nor four x.small (also $0.40). Greedy's growth of a
        // node by one type at a time stops at two x.large; the cost per pod with the tie-break picks the
        // x.xlarge.
        case("equal price, fewer nodes (four pods)", pods(4, "p", "", "1500m", "")).catalog(linear_catalog()).expects([Exp::NewNodes(1), Exp::AllPlaced, Exp::On("p-0", &[Is::Type("x.xlarge")])]),
        // One pod: an x.small ($0.10) is cheaper than an x.large; the tie-break never outweighs price.
        case("price first", pod("p", "", "1500m", "")).catalog(linear_catalog()).expects([Exp::NewNodes(1), Exp::On("p", &[Is::Type("x.small")])]),
        // Zones of equal price: the first zone, every time (the harness plans twice and compares).
        case("a stable order between equal plans", pod("p", "", "100m", "")).catalog(linear_catalog()).expects([Exp::NewZones(&["zone-a"])]),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn nodepool_limits_and_weights() {
    let anti = "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}]}}";
    let cases = [
        // The spot pool may hold 2 cpu of capacity: one t.small; the other pods go on-demand.
        case("cpu limit", format!("{}{}{}", pool_full("spot", SPOT, "", "", "limits: {cpu: \"2\"}"), pool("od", OD), pods(3, "web", "{app: web}", "1000m", anti)))
            .expects([Exp::NewNodes(3), Exp::AllPlaced, Exp::PoolNodes("spot", 1), Exp::PoolNodes("od", 2)])
            .broken([Edit::Repool("pool:od", "spot")], "NodePool"),
        case("node limit", format!("{}{}{}", pool_full("spot", SPOT, "", "", "limits: {nodes: \"1\"}"), pool("od", OD), pods(3, "web", "{app: web}", "1000m", anti)))
            .expects([Exp::NewNodes(3), Exp::PoolNodes("spot", 1), Exp::PoolNodes("od", 2)])
            .broken([Edit::Repool("pool:od", "spot")], "NodePool"),
        // Limits count existing nodes of the pool (their capacity).
        case(
            "limits count existing nodes",
            format!(
                "{}{}{}{}",
                pool_full("spot", SPOT, "", "", "limits: {cpu: \"4\"}"),
                pool("od", OD),
                node("old-spot", "zone-a", "4", "karpenter.sh/nodepool: spot, karpenter.sh/capacity-type: spot", "taints: [{key: full, effect: NoSchedule}]"),
                pod("p", "", "100m", ""),
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Pool("od")])])
        .broken([Edit::Repool("p", "spot")], "NodePool"),
        case("a limit of 0 is a limit", format!("{}{}", pool_full("none", OD, "", "", "limits: {cpu: \"0\"}"), pod("p", "", "100m", "")))
            .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "NodePool")]),
        // Weights: the heavier pool wins even when dearer (nodePoolWeight makes weights a strong
        // preference); equal weights compare on price.
        case("heavier NodePool first", format!("{}{}{}", pool_full("preferred", OD, "", "", "weight: 10"), pool("cheap", SPOT), pod("p", "", "100m", "")))
            .expects([Exp::On("p", &[Is::New, Is::Pool("preferred"), Is::CapacityType("on-demand")])]),
        case("equal weights compare on price", format!("{}{}{}", pool_full("od", OD, "", "", "weight: 5"), pool_full("cheap", SPOT, "", "", "weight: 5"), pod("p", "", "100m", "")))
            .expects([Exp::On("p", &[Is::New, Is::Pool("cheap"), Is::CapacityType("spot")])]),
        // A NodePool's requirements restrict what it launches.
        case(
            "NodePool requirements",
            format!(
                "{}{}",
                pool("zonal", "[{key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]"),
                pod("p", "", "100m", "")
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Zone("zone-b")])])
        .broken([Edit::Rezone("p", "zone-a")], "NodePool"),
    ];
    for c in cases {
        c.run();
    }
}

/// The checker's queue-order finding (`check::Report::queue_order`): the plan of case (a) turned round,
/// the two low-priority pods on the t.medium and the high-priority pod pending, still replays (no
/// violation), but the checker names the pod kube-scheduler would have bound and the node it fits.
#[test]
fn the_checker_reports_pods_left_pending_out_of_queue_order() {
    let c = case("turned round", format!("{}{}{}", pool_full("od", OD, "", "", "limits: {cpu: \"4\"}"), pods(2, "small", "", "1500m", "priority: 0"), pod("big", "", "3000m", "priority: 1000")));
    let w = c.workload();
    let cat = common::small_catalog();
    for solver in common::planners() {
        let plan = stowage_core::solve::plan_cluster(&w.cluster, cat, &stowage_core::weights::Weights::default(), solver).expect("plans");
        let good = stowage_core::check::check(&w.cluster, cat, &plan);
        assert!(good.valid() && good.queue_order.is_empty(), "{solver:?}: {:#?} {:#?}", good.violations, good.queue_order);
        let mut bad = plan.clone();
        let node = bad.new_nodes[0].name.clone();
        bad.placements = ["default/small-0", "default/small-1"].iter().map(|p| stowage_core::plan::Placement { pod: p.to_string(), node: node.clone(), relaxed: vec![] }).collect();
        let reason = bad.unschedulable[0].clone();
        bad.unschedulable = vec![stowage_core::plan::Unschedulable { pod: "default/big".into(), ..reason }];
        bad.finish();
        let r = stowage_core::check::check(&w.cluster, cat, &bad);
        assert!(r.valid(), "{solver:?}: the turned plan still replays: {:#?}", r.violations);
        assert_eq!(r.queue_order.len(), 1, "{solver:?}: {:#?}", r.queue_order);
        let q = &r.queue_order[0];
        assert_eq!((q.pod.as_deref(), q.node.as_deref(), q.constraint.as_str()), (Some("default/big"), Some(node.as_str()), "QueueOrder"), "{q}");
    }
}

/// The pod documents with `metadata.creationTimestamp` set.
fn created(docs: &str, at: &str) -> String {
    docs.replace("metadata: {name: ", &format!("metadata: {{creationTimestamp: \"{at}\", name: "))
}

/// The plan was right before the planners' queue repair (`solve::driver`), which says in the report
/// what it did.
fn no_queue_repair(p: &stowage_core::plan::Plan, _: &stowage_input::Workload) -> Result<(), String> {
    if p.solver.phases.iter().any(|ph| ph.name == "queue-order") { Err(format!("the queue repair ran: {}", p.solver.detail)) } else { Ok(()) }
}

/// Who stays pending when not everything fits (issue 15, item 7; `semantics::queue`): the pods
/// kube-scheduler's queue would leave, lowest priority first, then latest. A NodePool limited to 4 cpu
/// of capacity holds one t.medium (3.9 cpu room): either a 3000m pod or two 1500m pods, never both.
#[test]
fn who_stays_pending_follows_the_scheduling_queue() {
    let limited = pool_full("od", OD, "", "", "limits: {cpu: \"4\"}");
    let smalls_pending: fn(&stowage_core::plan::Plan, &stowage_input::Workload) -> Result<(), String> = |p, _| {
        let left: Vec<&str> = p.unschedulable.iter().map(|u| u.pod.as_str()).collect();
        if left == ["default/small-0", "default/small-1"] || left == ["default/small-1", "default/small-0"] { Ok(()) } else { Err(format!("pending: {left:?}")) }
    };
    let cases = [
        // (a) The high-priority pod comes later in the input, yet is placed; the two low-priority pods,
        // which would be one pending pod fewer, are the ones left pending.
        case("a higher priority is placed first", format!("{limited}{}{}", pods(2, "small", "", "1500m", "priority: 0"), pod("big", "", "3000m", "priority: 1000"))).expects([
            Exp::NewNodes(1),
            Exp::On("big", &[Is::New, Is::Type("t.medium")]),
            Exp::UnschedulableCount(2, "NodePool"),
            Exp::Custom("the small pods are pending", smalls_pending),
            // The greedy order and the MILP's tiered penalty get it right by themselves.
            Exp::Custom("no queue repair", no_queue_repair),
        ]),
        // ... and when the high-priority pods are the smaller ones (the size order alone would place the
        // large pod first): the large low-priority pod, earlier in the input, is left pending.
        case("a higher priority is placed first, even when smaller", format!("{limited}{}{}", pod("big", "", "3000m", "priority: 0"), pods(2, "small", "", "1500m", "priority: 1000"))).expects([
            Exp::NewNodes(1),
            Exp::Together(&["small-0", "small-1"]),
            Exp::Unschedulable("big", "NodePool"),
            Exp::UnschedulableCount(1, "NodePool"),
            Exp::Custom("no queue repair", no_queue_repair),
        ]),
        // (b) Equal priority: the earlier pod is placed, not the two later, smaller ones.
        case("equal priority: the earlier pod is placed", format!("{limited}{}{}", pod("first", "", "3000m", ""), pods(2, "small", "", "1500m", ""))).expects([
            Exp::NewNodes(1),
            Exp::On("first", &[Is::New, Is::Type("t.medium")]),
            Exp::UnschedulableCount(2, "NodePool"),
            Exp::Custom("the later pods are pending", smalls_pending),
        ]),
        // ... also when the earlier pod is the smaller one (the size order alone would place the later,
        // larger pod first): kube-scheduler binds the earlier pod, and the larger one no longer fits.
        case("equal priority: the earlier, smaller pod is placed", format!("{limited}{}{}", pod("first", "", "1500m", ""), pod("big", "", "3000m", ""))).expects([
            Exp::NewNodes(1),
            Exp::On("first", &[Is::New]),
            Exp::Unschedulable("big", "NodePool"),
        ]),
        // The queue position is the creation time where the input has one, not the place in the file:
        // the large pod comes first in the file but was created last.
        case(
            "equal priority: the earlier created pods are placed",
            format!(
                "{limited}{}{}",
                created(&pod("big", "", "3000m", ""), "2026-01-01T00:00:10Z"),
                created(&pods(1, "small", "", "1500m", ""), "2026-01-01T00:00:00Z") + &created(&pod("small-1", "", "1500m", ""), "2026-01-01T00:00:01Z")
            ),
        )
        .expects([Exp::NewNodes(1), Exp::Together(&["small-0", "small-1"]), Exp::Unschedulable("big", "NodePool"), Exp::UnschedulableCount(1, "NodePool")]),
        // Many pods: 60 early 500m pods and 30 later 1500m pods under a 40-cpu limit. The size order
        // alone would fill the limit with the large pods; the queue places every early pod and leaves
        // only later pods pending, with no pod out of order (the harness asks the checker).
        case(
            "many pods: every earlier pod is placed",
            format!(
                "{}{}{}",
                pool_full("od", OD, "", "", "limits: {cpu: \"40\"}"),
                (0..60).map(|i| created(&pod(&format!("early-{i}"), "", "500m", ""), &format!("2026-01-01T00:00:{i:02}Z"))).collect::<String>(),
                (0..30).map(|i| created(&pod(&format!("late-{i}"), "", "1500m", ""), &format!("2026-01-01T00:01:{i:02}Z"))).collect::<String>(),
            ),
        )
        .expects([
            Exp::PlacedWithPrefix("early-", 60),
            Exp::Custom("some late pods pending", |p, _| {
                if p.unschedulable.iter().all(|u| u.pod.starts_with("default/late-")) && !p.unschedulable.is_empty() { Ok(()) } else { Err(format!("{} pending", p.unschedulable.len())) }
            }),
        ]),
        // (c) Pods that do not compete for the same capacity: the low-priority pods go to another
        // NodePool, and everything is placed as before.
        case(
            "no competition: both fit",
            format!(
                "{}{}{}{}",
                pool_full(
                    "a",
                    "[{key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]",
                    "",
                    "",
                    "limits: {cpu: \"4\"}"
                ),
                pool("b", "[{key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]"),
                pods(2, "small", "", "1500m", "priority: 0, nodeSelector: {topology.kubernetes.io/zone: zone-b}"),
                pod("big", "", "3000m", "priority: 1000, nodeSelector: {topology.kubernetes.io/zone: zone-a}"),
            ),
        )
        .expects([
            Exp::AllPlaced,
            Exp::On("big", &[Is::Pool("a")]),
            Exp::On("small-0", &[Is::Pool("b")]),
            Exp::On("small-1", &[Is::Pool("b")]),
            Exp::Custom("no queue repair", no_queue_repair),
        ]),
        // A higher-priority pod that fits nowhere (no type within the limit holds 5000m) holds no
        // lower-priority pod back.
        case("a high-priority pod that fits nowhere", format!("{limited}{}{}", pods(2, "small", "", "1500m", "priority: 0"), pod("big", "", "5000m", "priority: 1000"))).expects([
            Exp::NewNodes(1),
            Exp::On("small-0", &[Is::New]),
            Exp::On("small-1", &[Is::New]),
            Exp::Unschedulable("big", "NodePool"),
        ]),
    ];
    for c in cases {
        c.run();
    }
}

// ---------------------------------------------------------------------------------------------------
// Local improvement (solve::improve::shrink) on hand-made plans: a pod moves into room another node
// already has when that lets its node step down to a cheaper type, and never when a topology rule
// could see the move.

mod shrink {
    use std::path::Path;

    use super::common::{NODECLASS, default_pool, pod, small_catalog};
    use stowage_core::domain::pod::PodId;
    use stowage_core::solve::problem::Problem;
    use stowage_core::solve::{Outcome, Target, improve, objective, verify};
    use stowage_core::weights::Weights;

    /// The new nodes' instance types and each pod's new node.
    type Improved = (Vec<String>, Vec<(String, usize)>);

    /// b may not move: a hostname spread reads it.
    const B_PINNED: &str = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: b}}}]";

    /// Plans `b` (1000m, pinned to its node, extra spec `b_spec`) on a t.small in `zone_b` and `a` (1500m) with `x` (500m) on a t.medium in
    /// zone-a, then runs the improvement: the new nodes' types and each pod's node, or None if nothing
    /// changed.
    fn run(x_spec: &str, x_labels: &str, b_spec: &str, zone_b: &str) -> Option<Improved> {
        let text = format!(
            "{NODECLASS}{}{}{}{}",
            default_pool(),
            pod("a", "{app: a}", "1500m", ""),
            pod("b", "{app: b}", "1000m", &[B_PINNED, b_spec].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(", ")),
            pod("x", x_labels, "500m", x_spec)
        );
        let w = stowage_input::load_texts([(Path::new("shrink.yaml"), text.as_str())]).expect("loads");
        let weights = Weights::default();
        let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
        let config = |t: &str, z: &str| p.configs.iter().position(|c| c.instance_type == t && c.zone == z && c.capacity_type == "on-demand").expect("configuration exists");
        let id = |name: &str| -> PodId { *p.batch.iter().find(|&&i| p.pod(i).name == name).expect("pod exists") };
        let o = Outcome {
            new_nodes: vec![config("t.medium", "zone-a"), config("t.small", zone_b)],
            placements: vec![(id("a"), Target::New(0)), (id("x"), Target::New(0)), (id("b"), Target::New(1))],
            unschedulable: vec![],
            deferred: vec![],
        };
        assert!(verify(&p, &o).is_empty(), "the hand-made plan is valid");
        let better = improve::shrink(&p, &o)?;
        assert!(verify(&p, &better).is_empty(), "the improved plan replays");
        assert!(objective(&p, &better).total() < objective(&p, &o).total());
        let types = better.new_nodes.iter().map(|&f| p.configs[f].instance_type.clone()).collect();
        let mut on: Vec<(String, usize)> = better.placements.iter().map(|&(i, t)| (p.pod(i).name.clone(), if let Target::New(k) = t { k } else { usize::MAX })).collect();
        on.sort();
        Some((types, on))
    }

    #[test]
    fn a_pod_moves_into_room_so_its_node_steps_down() {
        let (types, on) = run("", "{app: x}", "", "zone-b").expect("an improvement");
        assert_eq!(types, ["t.small", "t.small"]);
        assert_eq!(on, [("a".to_string(), 0), ("b".to_string(), 1), ("x".to_string(), 1)]);
    }

    #[test]
    fn a_zone_spread_pod_moves_only_within_its_zone() {
        let spread = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: x}}}]";
        let r = run(spread, "{app: x}", "", "zone-b");
        assert!(r.is_none(), "moving x to zone-b would change the spread counts: {r:?}");
        let (types, _) = run(spread, "{app: x}", "", "zone-a").expect("within zone-a the move is invisible");
        assert_eq!(types, ["t.small", "t.small"]);
    }

    /// x1 (500m) and x2 (200m, and `x2_memory`) differ only in their requests, and a hostname spread
    /// reads both, so neither may move; exchanging them (nodes and places in the bind order) is
    /// invisible, and lets the t.medium holding a (1500m) and x1 step down. x2 need not be smaller in
    /// every resource: 1Gi of memory fits t.small beside a.
    #[test]
    fn pods_that_differ_only_in_requests_exchange_places() {
        exchange_case("");
        exchange_case("1Gi");
    }

    fn exchange_case(x2_memory: &str) {
        let spread = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: x}}}]";
        let mut x2 = pod("x2", "{app: x}", "200m", spread);
        if !x2_memory.is_empty() {
            x2 = x2.replace("requests: {cpu: 200m}", &format!("requests: {{cpu: 200m, memory: {x2_memory}}}"));
            assert!(x2.contains(x2_memory));
        }
        let text = format!("{NODECLASS}{}{}{}{}{}", default_pool(), pod("a", "{app: a}", "1500m", ""), pod("b", "{app: b}", "1000m", B_PINNED), pod("x1", "{app: x}", "500m", spread), x2);
        let w = stowage_input::load_texts([(Path::new("exchange.yaml"), text.as_str())]).expect("loads");
        let weights = Weights::default();
        let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
        let config = |t: &str| p.configs.iter().position(|c| c.instance_type == t && c.zone == "zone-a" && c.capacity_type == "on-demand").expect("exists");
        let id = |name: &str| -> PodId { *p.batch.iter().find(|&&i| p.pod(i).name == name).expect("pod exists") };
        let o = Outcome {
            new_nodes: vec![config("t.medium"), config("t.small")],
            placements: vec![(id("a"), Target::New(0)), (id("x1"), Target::New(0)), (id("b"), Target::New(1)), (id("x2"), Target::New(1))],
            unschedulable: vec![],
            deferred: vec![],
        };
        assert!(verify(&p, &o).is_empty(), "the hand-made plan is valid");
        let better = improve::shrink(&p, &o).expect("an improvement");
        assert!(verify(&p, &better).is_empty(), "the improved plan replays");
        let types: Vec<&str> = better.new_nodes.iter().map(|&f| p.configs[f].instance_type.as_str()).collect();
        assert_eq!(types, ["t.small", "t.small"]);
        let order: Vec<(&str, Target)> = better.placements.iter().map(|&(i, t)| (p.pod(i).name.as_str(), t)).collect();
        assert_eq!(order, [("a", Target::New(0)), ("x2", Target::New(0)), ("b", Target::New(1)), ("x1", Target::New(1))]);
    }

    /// a (on a t.large with x and w) and b (alone on a t.small) are pinned by a hostname spread; x and w
    /// (1500m each) are free. No pod fits the room the t.small has, so no move lets the t.large step
    /// down; splitting x and w between the two nodes makes both t.medium: 0.38 instead of 0.46 $/h.
    #[test]
    fn two_nodes_split_their_free_pods_again_when_that_costs_less() {
        let text = format!(
            "{NODECLASS}{}{}{}{}{}",
            default_pool(),
            pod("a", "{app: b}", "1000m", B_PINNED),
            pod("b", "{app: b}", "1000m", B_PINNED),
            pod("x", "{app: x}", "1500m", ""),
            pod("w", "{app: other}", "1500m", "")
        );
        let w = stowage_input::load_texts([(Path::new("pairs.yaml"), text.as_str())]).expect("loads");
        let weights = Weights::default();
        let p = Problem::new(&w.cluster, small_catalog(), &weights).expect("builds");
        let config = |t: &str| p.configs.iter().position(|c| c.instance_type == t && c.zone == "zone-a" && c.capacity_type == "on-demand").expect("exists");
        let id = |name: &str| -> PodId { *p.batch.iter().find(|&&i| p.pod(i).name == name).expect("pod exists") };
        let o = Outcome {
            new_nodes: vec![config("t.large"), config("t.small")],
            placements: vec![(id("a"), Target::New(0)), (id("x"), Target::New(0)), (id("w"), Target::New(0)), (id("b"), Target::New(1))],
            unschedulable: vec![],
            deferred: vec![],
        };
        assert!(verify(&p, &o).is_empty(), "the hand-made plan is valid");
        let better = improve::shrink(&p, &o).expect("an improvement");
        assert!(verify(&p, &better).is_empty(), "the improved plan replays");
        let types: Vec<&str> = better.new_nodes.iter().map(|&f| p.configs[f].instance_type.as_str()).collect();
        assert_eq!(types, ["t.medium", "t.medium"]);
        let node = |name: &str| better.placements.iter().find(|(i, _)| p.pod(*i).name == name).map(|&(_, t)| t).expect("placed");
        assert_eq!(node("a"), Target::New(0));
        assert_eq!(node("b"), Target::New(1));
        assert_ne!(node("x"), node("w"), "x and w are split");
        // Two t.medium at $0.19, plus each node's tie-break (weights::node_tie_break).
        let tie = 2.0 * stowage_core::weights::node_tie_break(p.batch.len());
        assert!((objective(&p, &better).total() - 0.38 - tie).abs() < 1e-9);
    }

    #[test]
    fn pods_a_hostname_rule_reads_stay() {
        let host_spread = "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: x}}}]";
        assert!(run(host_spread, "{app: x}", "", "zone-a").is_none());
        // x carries no rule, but b's anti-affinity reads it on hostname.
        let anti = "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {role: shy}}}]}}";
        assert!(run("", "{app: x, role: shy}", anti, "zone-a").is_none());
        assert!(run("", "{app: x, role: bold}", anti, "zone-a").is_some(), "when b's rule does not select x, x moves");
    }
}
