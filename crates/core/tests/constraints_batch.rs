//! Batch semantics (issue 15): one bad object never blocks the batch. A pod whose claim, StorageClass
//! or bound PersistentVolume is missing or invalid, or whose spec kube-apiserver would refuse, is
//! planned as unschedulable with the reason and every other pod is planned; `Workload::strict` (the
//! CLI's `--strict`) turns the same pods back into errors naming file, object and field. Every plan
//! goes through both planners and the checker (common::Case::run).

mod common;

use std::path::Path;

use common::{Exp, Is, case, pod};

fn class(name: &str) -> String {
    format!("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\n")
}

/// A claim of class `class`, bound to `volume` unless it is `""`.
fn claim(name: &str, class: &str, volume: &str) -> String {
    let bound = if volume.is_empty() { String::new() } else { format!(", volumeName: {volume}") };
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\nspec: {{accessModes: [ReadWriteOnce], storageClassName: {class}, resources: {{requests: {{storage: 1Gi}}}}{bound}}}\n"
    )
}

/// A PersistentVolume with a node affinity of one term holding `expr`.
fn pv(name: &str, expr: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: gp3, csi: {{driver: ebs.csi.aws.com, volumeHandle: vol-1}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{expr}]}}]}}}}}}\n"
    )
}

fn with_claim(name: &str, claim: &str) -> String {
    pod(name, "{app: web}", "500m", &format!("volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]"))
}

/// The reason the plan gives for `pod` contains `text`.
macro_rules! reason {
    ($pod:literal, $text:expr) => {
        Exp::Custom(concat!("the reason for ", $pod, " is kube-scheduler's"), |p, _| {
            let k = concat!("default/", $pod);
            match p.unschedulable.iter().find(|u| u.pod == k) {
                Some(u) if u.reason.contains($text) => Ok(()),
                Some(u) => Err(format!("{k}: {}", u.reason)),
                None => Err(format!("{k} is not unschedulable")),
            }
        })
    };
}

// Long because it is one table of cases, one per kind of bad volume object, each a pod with the bad
// object beside a valid pod; read top to bottom.
#[test]
fn a_pod_with_a_bad_volume_is_reported_and_the_rest_planned() {
    let valid = || pod("ok", "{app: web}", "500m", "");
    let cases = [
        // The acceptance case: one pod with a missing claim beside a valid pod.
        case("missing claim", format!("{}{}", with_claim("data", "nope"), valid())).expects([
            Exp::NewNodes(1),
            Exp::On("ok", &[Is::New]),
            Exp::Unschedulable("data", "VolumeBinding"),
            Exp::UnschedulableCount(1, "VolumeBinding"),
            reason!("data", "0/0 nodes are available: persistentvolumeclaim \"nope\" not found."),
        ]),
        case("missing StorageClass", format!("{}{}{}", claim("c", "gone", ""), with_claim("data", "c"), valid())).expects([
            Exp::NewNodes(1),
            Exp::On("ok", &[Is::New]),
            Exp::Unschedulable("data", "VolumeBinding"),
            reason!("data", "storageclass.storage.k8s.io \"gone\" not found"),
        ]),
        case("claim bound to a missing PersistentVolume", format!("{}{}{}", claim("c", "gp3", "pv-gone"), with_claim("data", "c"), valid())).expects([
            Exp::NewNodes(1),
            Exp::On("ok", &[Is::New]),
            Exp::Unschedulable("data", "VolumeBinding"),
            reason!("data", "bound to non-existent pv(s)"),
        ]),
        case(
            "bound PersistentVolume with an invalid node affinity",
            format!("{}{}{}", pv("pv-1", "{key: zone, operator: Within, values: [a]}"), claim("c", "gp3", "pv-1"), with_claim("data", "c")) + &valid(),
        )
        .expects([Exp::NewNodes(1), Exp::On("ok", &[Is::New]), Exp::Unschedulable("data", "VolumeBinding"), reason!("data", "invalid PersistentVolume \"pv-1\"")]),
        // A valid claim of a class that exists keeps working beside them.
        case("valid claim beside a missing one", format!("{}{}{}{}", class("wffc"), claim("c", "wffc", ""), with_claim("good", "c"), with_claim("bad", "nope"))).expects([
            Exp::NewNodes(1),
            Exp::On("good", &[Is::New]),
            Exp::UnschedulableCount(1, "VolumeBinding"),
            Exp::Unschedulable("bad", "VolumeBinding"),
        ]),
    ];
    for c in cases {
        c.run();
    }
}

// Long because it is one table of cases, one per kind of spec kube-apiserver would refuse; read top to
// bottom.
#[test]
fn a_pod_with_an_invalid_spec_is_reported_and_the_rest_planned() {
    let valid = || common::pods(3, "ok", "{app: web}", "500m", "");
    let bad = |spec: &str| pod("bad", "{app: web}", "500m", spec);
    let cases = [
        case("unknown selector operator in anti-affinity", format!("{}{}", bad("affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchExpressions: [{key: app, operator: Like, values: [web]}]}, topologyKey: kubernetes.io/hostname}]}}"), valid()))
            .expects([Exp::PlacedWithPrefix("ok-", 3), Exp::Unschedulable("bad", "InterPodAffinity"), reason!("bad", "invalid pod spec: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator")]),
        case("maxSkew 0", format!("{}{}", bad("topologySpreadConstraints: [{maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]"), valid()))
            .expects([Exp::PlacedWithPrefix("ok-", 3), Exp::Unschedulable("bad", "PodTopologySpread"), reason!("bad", "spec.topologySpreadConstraints[0].maxSkew: must be at least 1")]),
        case("unknown node affinity operator", format!("{}{}", bad("affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]}}}"), valid()))
            .expects([Exp::PlacedWithPrefix("ok-", 3), Exp::Unschedulable("bad", "NodeAffinity")]),
        // The invalid pod has the same labels and requests as the valid ones: it never joins their class.
        case("an invalid pod alike to valid ones", format!("{}{}", bad("tolerations: [{key: a, operator: Maybe}]"), valid()))
            .expects([Exp::NewNodes(1), Exp::PlacedWithPrefix("ok-", 3), Exp::UnschedulableCount(1, "TaintToleration")]),
    ];
    for c in cases {
        c.run();
    }
}

fn load(text: &str) -> Result<stowage_input::Workload, stowage_input::LoadError> {
    stowage_input::load_texts([(Path::new("batch.yaml"), text)])
}

#[test]
fn strict_turns_rejected_pods_into_errors_naming_file_object_and_field() {
    let text = format!("{}{}{}", common::NODECLASS, with_claim("data", "nope"), pod("ok", "", "100m", ""));
    let w = load(&text).expect("a missing claim does not fail the load");
    assert_eq!(w.rejected.len(), 1, "{:?}", w.rejected);
    assert_eq!(w.cluster.pending().len(), 2, "the rejected pod is in the batch, pending");
    let msg = w.strict().expect_err("strict fails").to_string();
    for part in ["batch.yaml", "Pod default/data", "spec.volumes[0].persistentVolumeClaim.claimName", "PersistentVolumeClaim \"default/nope\" not found"] {
        assert!(msg.contains(part), "the strict error does not name {part:?}: {msg}");
    }
    // A valid workload passes strict unchanged.
    let ok = load(&format!("{}{}", common::NODECLASS, pod("ok", "", "100m", ""))).expect("loads");
    assert_eq!(ok.strict().expect("nothing rejected").cluster.pods.len(), 1);
}

#[test]
fn a_file_that_does_not_parse_is_still_an_error() {
    let text = format!("{}{}", pod("ok", "", "100m", ""), "---\napiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: \"x\"}\n");
    let msg = load(&text).expect_err("a field of the wrong type fails the load").to_string();
    for part in ["batch.yaml", "Pod x", "spec.containers", "invalid type"] {
        assert!(msg.contains(part), "the error does not name {part:?}: {msg}");
    }
}

#[test]
fn an_invalid_template_rejects_its_pods_and_strict_reports_the_template_once() {
    let deployment = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: default}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}], topologySpreadConstraints: [{maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}\n";
    let text = format!("{}{}{}", common::NODECLASS, deployment, pod("ok", "", "100m", ""));
    let w = load(&text).expect("an invalid template does not fail the load");
    assert_eq!(w.invalid_templates.len(), 1);
    assert_eq!(w.rejected.len(), 2, "each replica is reported: {:?}", w.rejected);
    assert_eq!(w.cluster.pending().len(), 3);
    let msg = w.strict().expect_err("strict fails").to_string();
    assert!(msg.contains("Deployment default/d") && msg.contains("spec.template.spec.topologySpreadConstraints[0].maxSkew"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "the template once, not per replica: {msg}");
}

// ---------------------------------------------------------------------------------------------------
// Which pods a batch plans (stowage_input::pending).

/// A pending pod of 500m with `status` (a flow mapping) and `meta` extra entries of `metadata`.
fn pod_status(name: &str, meta: &str, status: &str) -> String {
    let meta = if meta.is_empty() { String::new() } else { format!(", {meta}") };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}{meta}}}\nspec: {{containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 500m}}}}}}]}}\nstatus: {status}\n"
    )
}

fn scheduled(status: &str, reason: &str) -> String {
    format!("{{phase: Pending, conditions: [{{type: PodScheduled, status: \"{status}\", reason: {reason}}}]}}")
}

fn selection_docs() -> String {
    format!(
        "{}{}{}{}",
        pod_status("given-up", "", &scheduled("False", "Unschedulable")),
        pod_status("untried", "", "{phase: Pending}"),
        pod_status("gated", "", &scheduled("False", "SchedulingGated")),
        pod_status("preempting", "", "{phase: Pending, nominatedNodeName: n-x, conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]}"),
    )
}

#[test]
fn a_batch_plans_what_kube_scheduler_gave_up_on() {
    // Default (files): given up on, and not judged yet; a gated pod and a pod kube-scheduler is
    // preempting for are left out of the batch altogether.
    case("selection", selection_docs())
        .expects([
            Exp::NewNodes(1),
            Exp::On("given-up", &[Is::New]),
            Exp::On("untried", &[Is::New]),
            Exp::Custom("gated and preempting pods are not in the batch", |p, w| {
                let listed = p.placements.iter().map(|x| x.pod.as_str()).chain(p.unschedulable.iter().map(|u| u.pod.as_str())).collect::<Vec<_>>();
                let ok = !listed.iter().any(|k| k.ends_with("gated") || k.ends_with("preempting")) && w.skipped == ["Pod default/gated", "Pod default/preempting"];
                if ok { Ok(()) } else { Err(format!("listed {listed:?}, skipped {:?}", w.skipped)) }
            }),
        ])
        .run();
    let text = format!("{}{}", common::NODECLASS, selection_docs());
    let pending = |w: &stowage_input::Workload| -> Vec<String> { w.cluster.pending().into_iter().map(|id| w.cluster.pod(id).name.clone()).collect() };
    let w = load(&text).expect("loads");
    // The controller's rule: only what kube-scheduler gave up on.
    let live = w.clone().reselect(stowage_input::Selection::GivenUp).expect("builds");
    assert_eq!(pending(&live), ["given-up"]);
    // --all-unbound: every unbound pod.
    let all = w.reselect(stowage_input::Selection::AllUnbound).expect("builds");
    assert_eq!(pending(&all), ["given-up", "untried", "gated", "preempting"]);
}

#[test]
fn a_pod_nominated_to_in_flight_capacity_stays_in_the_batch() {
    let claim = "---\napiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c1, labels: {karpenter.sh/nodepool: default}, annotations: {stowage.dev/nominated-pods: \"uid-untried\"}}\nspec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]}\nstatus: {providerID: \"aws:///zone-a/i-1\", capacity: {cpu: \"2\", memory: 8Gi, pods: \"29\"}, allocatable: {cpu: 1930m, memory: 7Gi, pods: \"29\"}}\n";
    let text = format!("{}{}{}", common::NODECLASS, claim, pod_status("untried", "", "{phase: Pending}"));
    let w = load(&text).expect("loads").reselect(stowage_input::Selection::GivenUp).expect("builds");
    assert_eq!(w.cluster.pending().len(), 1, "a pod an in-flight NodeClaim names is planned before kube-scheduler judged it");
    assert!(w.cluster.node("c1").is_some_and(|n| n.in_flight));
}

#[test]
fn pods_on_a_node_being_deleted_are_planned_again() {
    let ds = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: ds-old, namespace: default, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u1, controller: true}]}\nspec: {nodeName: old, containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\nstatus: {phase: Running}\n";
    for (what, node_spec, meta) in
        [("deletion timestamp", "", ", deletionTimestamp: \"2026-01-01T00:00:00Z\""), ("Karpenter's disruption taint", "taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]", "")]
    {
        let node = common::node("old", "zone-a", "8", "", node_spec).replacen("metadata: {name: old,", &format!("metadata: {{name: old{meta},"), 1);
        case(what, format!("{node}{}{ds}", pod("p", "{app: web}", "500m", "nodeName: old"))).expects([Exp::NewNodes(1), Exp::On("p", &[Is::New]), Exp::AllPlaced]).run();
    }
}

// ---------------------------------------------------------------------------------------------------
// Nodes about to be ready (stowage_input::karpenter::planning_node).

/// A Karpenter-managed node of pool `default`; `labels` extra labels, `taints` a flow sequence, `ready`
/// the Ready condition's status (`""`: no condition).
fn managed_node(labels: &str, taints: &str, ready: &str) -> String {
    let conditions = if ready.is_empty() { String::new() } else { format!(", conditions: [{{type: Ready, status: \"{ready}\"}}]") };
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n-a, labels: {{kubernetes.io/hostname: n-a, topology.kubernetes.io/zone: zone-a, karpenter.sh/nodepool: default{labels}}}}}\nspec: {{taints: {taints}}}\nstatus: {{allocatable: {{cpu: \"4\", memory: 16Gi, pods: \"110\"}}, capacity: {{cpu: \"4\", memory: 16Gi, pods: \"110\"}}{conditions}}}\n"
    )
}

fn startup_pool() -> String {
    common::pool_full("default", "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]", "", "startupTaints: [{key: cilium.io/agent-not-ready, effect: NoSchedule}]", "")
}

const BOOTING: &str = "[{key: node.kubernetes.io/not-ready, effect: NoSchedule}, {key: cilium.io/agent-not-ready, effect: NoSchedule}]";

#[test]
fn a_node_about_to_be_ready_takes_pods() {
    let p = || pod("p", "", "500m", "");
    // Registered, not initialized: the startup and not-ready taints go away.
    case("uninitialized managed node", format!("{}{}{}", startup_pool(), managed_node("", BOOTING, "False"), p())).expects([Exp::NewNodes(0), Exp::On("p", &[Is::Existing("n-a")])]).run();
    // Initialized: its taints are real.
    case("initialized node with a startup taint", format!("{}{}{}", startup_pool(), managed_node(", karpenter.sh/initialized: \"true\"", BOOTING, "True"), p()))
        .expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])])
        .run();
    // Not managed: nothing is assumed.
    let unmanaged = common::node("n-a", "zone-a", "4", "", &format!("taints: {BOOTING}"));
    case("unmanaged node", format!("{}{unmanaged}{}", startup_pool(), p())).expects([Exp::NewNodes(1), Exp::On("p", &[Is::New])]).run();
}

#[test]
fn an_initialized_node_that_is_not_ready_is_in_flight() {
    let node = |ready| {
        let text = format!("{}{}{}", common::NODECLASS, startup_pool(), managed_node(", karpenter.sh/initialized: \"true\"", "[{key: node.kubernetes.io/not-ready, effect: NoSchedule}]", ready));
        let w = load(&text).expect("loads");
        let n = w.cluster.node("n-a").expect("the node").clone();
        (n.in_flight, n.taints.len())
    };
    assert_eq!(node("False"), (true, 1), "NotReady after initialization: in flight, its taints kept");
    assert_eq!(node("True"), (false, 1));
    assert_eq!(node(""), (false, 1), "no Ready condition (a dump without status) counts as Ready");
}

// ---------------------------------------------------------------------------------------------------
// DaemonSet overhead from the pods kube-scheduler will see (semantics::daemonsets::pod_for).

const DAEMONSET: &str = "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: default}\nspec:\n  selector: {matchLabels: {app: ds}}\n  template:\n    metadata: {labels: {app: ds}}\n    spec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}\n";

/// The DaemonSet's pending pod for node `node`, with `cpu` requested (a LimitRange raised it).
fn daemon_pod(node: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: ds-{node}, namespace: default, labels: {{app: ds}}, ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u1, controller: true}}]}}\nspec: {{containers: [{{name: c, image: pause, resources: {{requests: {{cpu: {cpu}}}}}}}], affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [{node}]}}]}}]}}}}}}}}\nstatus: {{phase: Pending}}\n"
    )
}

#[test]
fn daemonset_overhead_counts_the_pods_kube_scheduler_will_see() {
    let n = || common::node("n-a", "zone-a", "4", "", "");
    let big = || pod("big", "", "2500m", "");
    // The template alone (100m): the big pod fits beside it.
    case("template on an existing node", format!("{DAEMONSET}{}{}", n(), big())).expects([Exp::NewNodes(0), Exp::On("big", &[Is::Existing("n-a")])]).run();
    // The DaemonSet's pending pod for n-a asks for 2 cores: that is what will run there.
    case("pending daemon pod on an existing node", format!("{DAEMONSET}{}{}{}", n(), daemon_pod("n-a", "2"), big())).expects([Exp::NewNodes(1), Exp::On("big", &[Is::New])]).run();
    // A daemon pod aimed at another node changes nothing on n-a.
    case("pending daemon pod for another node", format!("{DAEMONSET}{}{}{}", n(), daemon_pod("n-b", "2"), big())).expects([Exp::NewNodes(0), Exp::On("big", &[Is::Existing("n-a")])]).run();
}
