//! Table tests of InterPodAffinity (kubernetes-semantics.md §6; conformance list §9 items 5–6) and of
//! volume topology, VolumeBinding and VolumeZone (§7; item 7), on tests/fixtures/catalog-small.yaml with
//! an on-demand NodePool over zone-a/b/c unless a case declares its own.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use common::{Edit, Exp, Is, case, node, pod, pods};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// Required pod affinity (`kind` = podAffinity) or anti-affinity (podAntiAffinity) with one term per
/// topology key, selecting `app: <app>`; `extra` adds term fields (namespaces, namespaceSelector).
fn affinity(kind: &str, app: &str, keys: &[&str], extra: &str) -> String {
    let terms: Vec<String> = keys.iter().map(|k| format!("{{labelSelector: {{matchLabels: {{app: {app}}}}}, topologyKey: {k}{extra}}}")).collect();
    format!("affinity: {{{kind}: {{requiredDuringSchedulingIgnoredDuringExecution: [{}]}}}}", terms.join(", "))
}

fn bound(name: &str, labels: &str, cpu: &str, node: &str, spec: &str) -> String {
    let spec = if spec.is_empty() { format!("nodeName: {node}") } else { format!("nodeName: {node}, {spec}") };
    pod(name, labels, cpu, &spec)
}

#[test]
fn inter_pod_affinity() {
    let cases = [
        // The follower must share the zone of a pod matching its term; db's node is full.
        case(
            "affinity follows the target's domain",
            format!("{}{}{}", node("n-a", "zone-a", "1", "", ""), bound("db", "{app: db}", "1", "n-a", ""), pod("p", "", "100m", &affinity("podAffinity", "db", &[ZONE], ""))),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-a")])])
        .broken([Edit::Rezone("p", "zone-b")], "InterPodAffinity"),
        // Item 5: the node must carry every term's key. New nodes have no rack label, so once n-a is
        // full the pod fits nowhere, although a zone-a node could be launched.
        case(
            "affinity needs every term's key",
            format!(
                "{}{}{}",
                node("n-a", "zone-a", "4", "rack: r1", ""),
                bound("db", "{app: db}", "100m", "n-a", ""),
                pod("p", "", "100m", &affinity("podAffinity", "db", &[ZONE, "rack"], "")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case(
            "affinity to a key no new node carries",
            format!(
                "{}{}{}",
                node("n-a", "zone-a", "1", "rack: r1", ""),
                bound("db", "{app: db}", "1", "n-a", ""),
                pod("p", "", "100m", &affinity("podAffinity", "db", &[ZONE, "rack"], "")),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "InterPodAffinity")]),
        // First-pod exception: no pod matches yet and the pods match their own term, so the first one
        // starts the group anywhere; the rest follow its zone (4500m needs two nodes).
        case("first-pod exception for self-affine groups", pods(3, "web", "{app: web}", "1500m", &affinity("podAffinity", "web", &[ZONE], "")))
            .expects([Exp::AllPlaced, Exp::SameZone(&["web-0", "web-1", "web-2"]), Exp::NewNodes(2)])
            .broken([Edit::Shift("web-0")], "InterPodAffinity"),
        // No exception for a pod that does not match its own terms.
        case("no first-pod exception without self-match", pod("p", "{app: web}", "100m", &affinity("podAffinity", "db", &[ZONE], "")))
            .expects([Exp::NewNodes(0), Exp::Unschedulable("p", "InterPodAffinity")]),
        // In-batch dependency: the follower (listed first) needs the leader placed first; it also repels
        // the leader per host, so they share a zone on two nodes.
        case(
            "in-batch affinity target",
            format!(
                "{}{}",
                pod(
                    "follower",
                    "",
                    "100m",
                    "affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: leader}}, topologyKey: topology.kubernetes.io/zone}]}, podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: leader}}, topologyKey: kubernetes.io/hostname}]}}",
                ),
                pod("leader", "{app: leader}", "100m", ""),
            ),
        )
        .expects([Exp::AllPlaced, Exp::NewNodes(2), Exp::SameZone(&["follower", "leader"]), Exp::Apart(&["follower", "leader"])])
        .broken([Edit::Shift("follower")], "InterPodAffinity"),
        // Anti-affinity: a node without the term's key is not constrained by it.
        case(
            "anti-affinity: a node without the key is unconstrained",
            format!("{}{}{}", node("n-norack", "zone-a", "4", "", ""), bound("x", "{app: x}", "100m", "n-norack", ""), pod("p", "", "100m", &affinity("podAntiAffinity", "x", &["rack"], ""))),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-norack")])]),
        case(
            "anti-affinity: a node with the key is constrained",
            format!("{}{}{}", node("n-r1", "zone-a", "4", "rack: r1", ""), bound("x", "{app: x}", "100m", "n-r1", ""), pod("p", "", "100m", &affinity("podAntiAffinity", "x", &["rack"], ""))),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
        .broken([Edit::Move("p", "n-r1")], "InterPodAffinity"),
        case("hostname anti-affinity in the batch", pods(3, "web", "{app: web}", "100m", &affinity("podAntiAffinity", "web", &[HOST], "")))
            .expects([Exp::NewNodes(3), Exp::Apart(&["web-0", "web-1", "web-2"])])
            .broken([Edit::Move("web-1", "@web-0")], "InterPodAffinity"),
        // Zonal anti-affinity: one pod per zone, the fourth fits nowhere.
        case("zonal anti-affinity in the batch", pods(4, "web", "{app: web}", "100m", &affinity("podAntiAffinity", "web", &[ZONE], "")))
            .expects([Exp::PlacedWithPrefix("web-", 3), Exp::ZoneCounts("web-", &[1, 1, 1]), Exp::UnschedulableCount(1, "InterPodAffinity")])
            .broken([Edit::AllTo("web-0")], "InterPodAffinity"),
        // Symmetry: an existing pod's required anti-affinity keeps matching pods out of its domain.
        case(
            "existing pods' anti-affinity is symmetric",
            format!(
                "{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("guard", "{app: guard}", "100m", "n-a", &affinity("podAntiAffinity", "web", &[ZONE], "")),
                pod("p", "{app: web}", "100m", ""),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::NotZone("zone-a")])])
        .broken([Edit::Move("p", "n-a")], "InterPodAffinity")
        .broken([Edit::Rezone("p", "zone-a")], "InterPodAffinity"),
        // Existing pods' required affinity is not enforced on incoming pods.
        case(
            "existing pods' affinity is not symmetric",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), bound("clingy", "{app: clingy}", "100m", "n-a", &affinity("podAffinity", "db", &[HOST], "")), pod("p", "{app: web}", "100m", "")),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        // Preferred terms only score (to kube-scheduler, and so under Priced; Respect:
        // constraints_preferences.rs).
        case(
            "preferred anti-affinity never filters",
            format!(
                "{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                bound("x", "{app: x}", "100m", "n-a", ""),
                pod("p", "", "100m", "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {labelSelector: {matchLabels: {app: x}}, topologyKey: kubernetes.io/hostname}}]}}"),
            ),
        )
        .weights(common::priced())
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
    ];
    for c in cases {
        c.run();
    }
}

/// Item 6: term namespaces. `x` runs in namespace `other` (labelled team=a) on n-a; the pending pod in
/// `default` has hostname anti-affinity to app=x.
/// New nodes have hostnames of their own, whatever the existing nodes are called.
#[test]
fn new_nodes_have_their_own_hostname() {
    let cases = [
        // A real node may be named like greedy's scratch candidate was ("stowage-candidate"); a new node
        // still has a hostname of its own, so hostname anti-affinity to the pod there does not bar it.
        case(
            "a node named like the candidate shares no hostname with new nodes",
            format!(
                "{}{}{}",
                node("stowage-candidate", "zone-a", "1", "", ""),
                bound("db", "{app: db}", "1", "stowage-candidate", ""),
                pod("p", "{app: web}", "100m", &affinity("podAntiAffinity", "db", &[HOST], "")),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])]),
    ];
    for c in cases {
        c.run();
    }
}

#[test]
fn inter_pod_affinity_namespaces() {
    let base =
        || format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: other, labels: {{team: a}}}}\n{}{}", node("n-a", "zone-a", "4", "", ""), bound("other/x", "{app: x}", "100m", "n-a", ""));
    let anti = |extra: &str| pod("p", "", "100m", &affinity("podAntiAffinity", "x", &[HOST], extra));
    let cases = [
        case("namespaces unset: the pod's own", base() + &anti("")).expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case("namespaceSelector {}: all namespaces", base() + &anti(", namespaceSelector: {}"))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
            .broken([Edit::Move("p", "n-a")], "InterPodAffinity"),
        case("namespaces list", base() + &anti(", namespaces: [other]")).expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])]).broken([Edit::Move("p", "n-a")], "InterPodAffinity"),
        case("namespaceSelector matching the namespace's labels", base() + &anti(", namespaceSelector: {matchLabels: {team: a}}"))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
            .broken([Edit::Move("p", "n-a")], "InterPodAffinity"),
        case("namespaceSelector matching no namespace", base() + &anti(", namespaceSelector: {matchLabels: {team: b}}")).expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        // Affinity in another namespace: the target is in `other`, so without the namespace the pod has
        // no target and does not match its own term.
        case("affinity to a pod in a listed namespace", base() + &pod("p", "", "100m", &affinity("podAffinity", "x", &[ZONE], ", namespaces: [other]"))).expects([Exp::On("p", &[Is::Zone("zone-a")])]),
        case("affinity to a pod in another namespace, namespaces unset", base() + &pod("p", "", "100m", &affinity("podAffinity", "x", &[ZONE], "")))
            .expects([Exp::Unschedulable("p", "InterPodAffinity")]),
    ];
    for c in cases {
        c.run();
    }
}

// ---------------------------------------------------------------------------------------------------
// Volumes.

/// A PersistentVolume bound to claim `claim`: `affinity` the flow sequence of its nodeAffinity terms
/// (`""` = none), `labels` its labels (flow mapping or `""`).
fn pv(claim: &str, affinity: &str, labels: &str) -> String {
    let na = if affinity.is_empty() { String::new() } else { format!(", nodeAffinity: {{required: {{nodeSelectorTerms: {affinity}}}}}") };
    let labels = if labels.is_empty() { "{}" } else { labels };
    format!(
        "---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: pv-{claim}, labels: {labels}}}
spec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: gp3, claimRef: {{namespace: default, name: {claim}}}, csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-{claim}}}{na}}}
status: {{phase: Bound}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {claim}, namespace: default}}
spec: {{accessModes: [ReadWriteOnce], storageClassName: gp3, volumeName: pv-{claim}, resources: {{requests: {{storage: 1Gi}}}}}}
"
    )
}

/// An existing node with 4 cpu and only a hostname label plus `labels` (flow-mapping entries).
fn bare_node(name: &str, labels: &str) -> String {
    format!("---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, {labels}}}}}\nstatus: {{allocatable: {{cpu: \"4\", memory: 16Gi, pods: \"110\"}}}}\n")
}

fn zone_term(zones: &str) -> String {
    format!("{{matchExpressions: [{{key: {ZONE}, operator: In, values: {zones}}}]}}")
}

/// A StorageClass; `extra` adds top-level fields (allowedTopologies).
fn class(name: &str, mode: &str, extra: &str) -> String {
    format!("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: {mode}\n{extra}\n")
}

/// An unbound claim of class `class`; `annotations` a flow mapping or `""`.
fn claim(name: &str, class: &str, annotations: &str) -> String {
    let ann = if annotations.is_empty() { "{}" } else { annotations };
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default, annotations: {ann}}}\nspec: {{accessModes: [ReadWriteOnce], storageClassName: {class}, resources: {{requests: {{storage: 1Gi}}}}}}\n"
    )
}

fn with_claims(name: &str, claims: &[&str]) -> String {
    let vols: Vec<String> = claims.iter().enumerate().map(|(i, c)| format!("{{name: v{i}, persistentVolumeClaim: {{claimName: {c}}}}}")).collect();
    pod(name, "", "100m", &format!("volumes: [{}]", vols.join(", ")))
}

// Long because it is one table of cases, one per volume-topology rule (bound PVs, claims waiting for
// a first consumer, zonal storage classes), each self-contained and read top to bottom.
#[test]
fn volume_topology() {
    let cases = [
        // Bound PV: its nodeAffinity terms are alternatives (ORed).
        case("bound PV node affinity terms are ORed", format!("{}{}", pv("data", &format!("[{}, {}]", zone_term("[zone-b]"), zone_term("[zone-c]")), ""), with_claims("p", &["data"])))
            .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::ZoneIn(&["zone-b", "zone-c"])])])
            .broken([Edit::Rezone("p", "zone-a")], "VolumeBinding"),
        // Several volumes: every volume's alternatives must hold (zone-b is the only common zone).
        case(
            "several volumes are ANDed",
            format!(
                "{}{}{}",
                pv("d1", &format!("[{}, {}]", zone_term("[zone-a]"), zone_term("[zone-b]")), ""),
                pv("d2", &format!("[{}]", zone_term("[zone-b, zone-c]")), ""),
                with_claims("p", &["d1", "d2"]),
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::Zone("zone-b")])])
        .broken([Edit::Rezone("p", "zone-c")], "VolumeBinding"),
        // VolumeZone reads the PV's zone labels (several values joined by "__").
        case("VolumeZone reads PV zone labels", format!("{}{}", pv("data", "", "{topology.kubernetes.io/zone: zone-c}"), with_claims("p", &["data"])))
            .expects([Exp::On("p", &[Is::New, Is::Zone("zone-c")])])
            .broken([Edit::Rezone("p", "zone-a")], "VolumeZone"),
        case("VolumeZone with several zones", format!("{}{}", pv("data", "", "{topology.kubernetes.io/zone: zone-b__zone-c}"), with_claims("p", &["data"])))
            .expects([Exp::On("p", &[Is::New, Is::ZoneIn(&["zone-b", "zone-c"])])])
            .broken([Edit::Rezone("p", "zone-a")], "VolumeZone"),
        // VolumeZone on a node with some topology labels: every PV topology label must be on the node
        // (kube-scheduler's volume_zone.go; a PV's beta key also matches the node's GA label, not the
        // other way round). n-a has a zone but no region label, so a PV labelled with both rejects it.
        case(
            "VolumeZone: a node with a zone label but no region label",
            format!(
                "{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                pv("data", "", "{topology.kubernetes.io/zone: zone-a, topology.kubernetes.io/region: test-region}"),
                with_claims("p", &["data"]),
            ),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-a")])])
        .broken([Edit::Move("p", "n-a")], "VolumeZone"),
        case(
            "VolumeZone: a GA PV label does not match a node's beta label",
            format!("{}{}{}", bare_node("n-beta", "failure-domain.beta.kubernetes.io/zone: zone-a"), pv("data", "", "{topology.kubernetes.io/zone: zone-a}"), with_claims("p", &["data"])),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-a")])])
        .broken([Edit::Move("p", "n-beta")], "VolumeZone"),
        case(
            "VolumeZone: a beta PV label matches a node's GA label",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), pv("data", "", "{failure-domain.beta.kubernetes.io/zone: zone-a}"), with_claims("p", &["data"])),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]),
        case(
            "VolumeZone: a node without topology labels passes",
            format!("{}{}{}", bare_node("n-plain", "disk: ssd"), pv("data", "", "{topology.kubernetes.io/zone: zone-c}"), with_claims("p", &["data"])),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-plain")])]),
        // A free existing node in the wrong zone does not help.
        case(
            "existing node outside the volume's zone",
            format!("{}{}{}", node("n-a", "zone-a", "4", "", ""), pv("data", &format!("[{}]", zone_term("[zone-c]")), ""), with_claims("p", &["data"])),
        )
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New, Is::Zone("zone-c")])])
        .broken([Edit::Move("p", "n-a")], "VolumeBinding"),
        // Unbound WaitForFirstConsumer claim: the class's allowedTopologies (terms ORed).
        case(
            "WaitForFirstConsumer allowedTopologies",
            format!(
                "{}{}{}",
                class("zonal", "WaitForFirstConsumer", "allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [zone-b]}]}, {matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [zone-c]}]}]"),
                claim("data", "zonal", ""),
                with_claims("p", &["data"]),
            ),
        )
        .expects([Exp::On("p", &[Is::New, Is::ZoneIn(&["zone-b", "zone-c"])])])
        .broken([Edit::Rezone("p", "zone-a")], "VolumeBinding"),
        case("WaitForFirstConsumer without topology", format!("{}{}{}", class("any", "WaitForFirstConsumer", ""), claim("data", "any", ""), with_claims("p", &["data"])))
            .expects([Exp::NewNodes(1), Exp::AllPlaced]),
        // A claim with a selected node fits only that node.
        case(
            "selected-node annotation",
            format!(
                "{}{}{}{}{}",
                node("n-a", "zone-a", "4", "", ""),
                node("n-b", "zone-b", "4", "", ""),
                class("any", "WaitForFirstConsumer", ""),
                claim("data", "any", "{volume.kubernetes.io/selected-node: n-b}"),
                with_claims("p", &["data"]),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-b")])])
        .broken([Edit::Move("p", "n-a")], "VolumeBinding"),
        // An unbound Immediate claim makes the pod wait for the PV controller, with a reason.
        case("unbound Immediate claim", format!("{}{}{}{}", node("n-a", "zone-a", "4", "", ""), class("now", "Immediate", ""), claim("data", "now", ""), with_claims("p", &["data"])))
            .expects([
                Exp::NewNodes(0),
                Exp::Unschedulable("p", "VolumeBinding"),
                Exp::Custom("the reason names the unbound claim", |p, _| {
                    let u = &p.unschedulable[0];
                    if u.reason.contains("unbound immediate PersistentVolumeClaims") { Ok(()) } else { Err(u.reason.clone()) }
                }),
            ])
            .broken([Edit::Move("p", "n-a")], "VolumeBinding"),
        // A no-provisioner class: only an available PV can serve the claim, here one pinned to n-b.
        case(
            "local volumes: an available PV pins the node",
            format!(
                "{}{}{}{}---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: local-b}}
spec: {{capacity: {{storage: 10Gi}}, accessModes: [ReadWriteOnce], storageClassName: local, local: {{path: /mnt/disk}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {HOST}, operator: In, values: [n-b]}}]}}]}}}}}}
status: {{phase: Available}}
{}",
                node("n-a", "zone-a", "4", "", ""),
                node("n-b", "zone-b", "4", "", ""),
                class("local", "WaitForFirstConsumer", "").replace("ebs.csi.aws.com", "kubernetes.io/no-provisioner"),
                claim("data", "local", ""),
                with_claims("p", &["data"]),
            ),
        )
        .expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-b")])])
        .broken([Edit::Move("p", "n-a")], "VolumeBinding"),
    ];
    for c in cases {
        c.run();
    }
}
