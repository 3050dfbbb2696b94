//! Bad input: every error names the file, the object and the field (ARCHITECTURE.md, "Errors name the
//! place"); unknown kinds are skipped with a warning. Workloads, catalogs, weights and plans.

// Tests read fixtures and write scratch files; crates/core/clippy.toml forbids IO in the library only.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod common;

use std::path::{Path, PathBuf};

use common::{NODECLASS, node, pod, pool_full};
use stowage_core::plan::Plan;
use stowage_core::weights::{DEFAULT_YAML, Weights};

/// The error of loading these (file name, text) pairs, as the CLI prints it.
#[track_caller]
fn load_error(files: &[(&str, &str)]) -> String {
    // `--strict`: a pod that cannot be scheduled as written is an error too (by default it is planned
    // as unschedulable; tests/constraints_batch.rs).
    match stowage_input::load_texts(files.iter().map(|(f, t)| (Path::new(*f), *t))).and_then(stowage_input::Workload::strict) {
        Ok(_) => panic!("{files:?} loads, an error was expected"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn assert_mentions(what: &str, msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "{what}: the error does not mention {p:?}:\n{msg}");
    }
}

/// A pod in `default` whose spec gets `spec` (flow-mapping entries).
fn p(spec: &str) -> String {
    pod("p", "{app: a}", "100m", spec)
}

/// A field of the first required node selector term.
macro_rules! term_field {
    ($f:literal) => {
        concat!("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].", $f)
    };
}

fn node_expr(expr: &str) -> String {
    p(&format!("affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{{expr}}}]}}}}}}"))
}

// Long because it is one table of bad workloads, one row per kind of mistake with the parts its
// error must name; the rows are independent and read top to bottom.
#[test]
fn workload_errors_name_file_object_and_field() {
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("malformed YAML", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n".into(), vec!["case.yaml", "invalid YAML", "line 3"]),
        ("tabs in YAML", "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n".into(), vec!["case.yaml", "invalid YAML", "line 4"]),
        ("a document that is not a mapping", "- a\n- b\n".into(), vec!["case.yaml", "a document must be a Kubernetes object"]),
        ("missing kind", "apiVersion: v1\nmetadata: {name: x}\n".into(), vec!["case.yaml", "kind", "missing kind"]),
        ("missing apiVersion", "kind: Pod\nmetadata: {name: x}\n".into(), vec!["case.yaml", "Pod", "apiVersion", "missing apiVersion"]),
        ("a field of the wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: \"x\"}\n".into(), vec!["case.yaml", "Pod x", "spec.containers", "invalid type"]),
        (
            "an error in a List item",
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: ns}, spec: {containers: 5}}\n"
                .into(),
            vec!["case.yaml", "items[1]", "Pod ns/b", "spec.containers"],
        ),
        ("an error in the second document", format!("{}{}", pod("ok", "", "1", ""), p("nodeSelector: 5")), vec!["case.yaml (document 2)", "Pod default/p", "spec.nodeSelector"]),
        ("an invalid cpu quantity", pod("p", "", "lots", ""), vec!["case.yaml", "Pod default/p", "spec.containers[0].resources.requests.cpu", "invalid quantity \"lots\""]),
        ("a negative memory request", p("").replace("requests: {cpu: 100m}", "requests: {memory: -1Gi}"), vec!["Pod default/p", "spec.containers[0].resources.requests.memory", "negative"]),
        (
            "an invalid init container limit",
            p("initContainers: [{name: i, image: x, resources: {limits: {cpu: 1x}}}]"),
            vec!["Pod default/p", "spec.initContainers[0].resources.limits.cpu", "invalid quantity"],
        ),
        ("an invalid pod overhead", p("overhead: {memory: many}"), vec!["Pod default/p", "spec.overhead.memory", "invalid quantity"]),
        (
            "an invalid node allocatable",
            node("n1", "zone-a", "2", "", "").replacen("memory: 16Gi, pods", "memory: 16Gx, pods", 1),
            vec!["case.yaml", "Node n1", "status.allocatable.memory", "invalid quantity"],
        ),
        ("a node without allocatable", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {}\n".into(), vec!["Node n1", "status.allocatable", "needs status.allocatable"]),
        (
            "an unknown node selector operator",
            node_expr("matchExpressions: [{key: zone, operator: Near, values: [a]}]"),
            vec!["Pod default/p", term_field!("matchExpressions[0].operator"), "unknown operator \"Near\""],
        ),
        ("In without values", node_expr("matchExpressions: [{key: zone, operator: In}]"), vec![term_field!("matchExpressions[0].values"), "needs at least one value"]),
        ("Exists with values", node_expr("matchExpressions: [{key: zone, operator: Exists, values: [a]}]"), vec![term_field!("matchExpressions[0].values"), "takes no values"]),
        ("Gt with two values", node_expr("matchExpressions: [{key: gen, operator: Gt, values: [\"1\", \"2\"]}]"), vec![term_field!("matchExpressions[0].values"), "exactly one value"]),
        ("Gt with a non-integer", node_expr("matchExpressions: [{key: gen, operator: Lt, values: [five]}]"), vec![term_field!("matchExpressions[0].values[0]"), "needs an integer, got \"five\""]),
        ("an empty key", node_expr("matchExpressions: [{key: \"\", operator: Exists}]"), vec![term_field!("matchExpressions[0].key"), "empty key"]),
        ("matchFields on a field other than metadata.name", node_expr("matchFields: [{key: spec.podCIDR, operator: In, values: [a]}]"), vec![term_field!("matchFields[0].key"), "only metadata.name"]),
        (
            "a bad preferred weight",
            p("affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}"),
            vec!["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "1-100"],
        ),
        (
            "an unknown label selector operator in a spread constraint",
            p("topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchExpressions: [{key: app, operator: Like, values: [a]}]}}]"),
            vec!["Pod default/p", "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator", "unknown operator \"Like\""],
        ),
        (
            "a label selector In without values",
            p("affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchExpressions: [{key: app, operator: In}]}, topologyKey: zone}]}}"),
            vec!["spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values", "at least one value"],
        ),
        (
            "a bad namespaceSelector",
            p(
                "affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}, topologyKey: zone, namespaceSelector: {matchExpressions: [{key: team, operator: Maybe}]}}]}}",
            ),
            vec!["spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector.matchExpressions[0].operator"],
        ),
        (
            "an empty affinity topologyKey",
            p("affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}, topologyKey: \"\"}]}}"),
            vec!["spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", "empty topologyKey"],
        ),
        ("maxSkew 0", p("topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]"), vec!["spec.topologySpreadConstraints[0].maxSkew", "at least 1"]),
        (
            "an unknown whenUnsatisfiable",
            p("topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}]"),
            vec!["spec.topologySpreadConstraints[0].whenUnsatisfiable", "\"Sometimes\""],
        ),
        (
            "minDomains with ScheduleAnyway",
            p("topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}]"),
            vec!["spec.topologySpreadConstraints[0].minDomains", "DoNotSchedule"],
        ),
        (
            "an unknown inclusion policy",
            p("topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Sometimes}]"),
            vec!["spec.topologySpreadConstraints[0].nodeTaintsPolicy", "unknown policy"],
        ),
        ("an unknown toleration operator", p("tolerations: [{key: a, operator: Maybe}]"), vec!["Pod default/p", "spec.tolerations[0].operator", "\"Maybe\""]),
        ("a toleration with an empty key and Equal", p("tolerations: [{value: x}]"), vec!["spec.tolerations[0].operator", "empty key"]),
        ("a toleration with an unknown effect", p("tolerations: [{key: a, operator: Exists, effect: Sometimes}]"), vec!["spec.tolerations[0].effect", "\"Sometimes\""]),
        ("a node taint with an unknown effect", node("n1", "zone-a", "2", "", "taints: [{key: a, effect: Never}]"), vec!["Node n1", "spec.taints[0].effect", "\"Never\""]),
        (
            "a pod referencing a missing PersistentVolumeClaim",
            p("volumes: [{name: d, persistentVolumeClaim: {claimName: nope}}]"),
            vec!["case.yaml", "Pod default/p", "spec.volumes[0].persistentVolumeClaim.claimName", "PersistentVolumeClaim \"default/nope\" not found"],
        ),
        (
            "a claim bound to a missing PersistentVolume",
            format!(
                "{}---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: default}}\nspec: {{volumeName: pv-x, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n",
                p("volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]")
            ),
            vec!["PersistentVolumeClaim default/data", "spec.volumeName", "PersistentVolume \"pv-x\" not found"],
        ),
        (
            "an invalid PersistentVolume node affinity",
            format!(
                "{}---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data, namespace: default}}\nspec: {{volumeName: pv-x, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv-x}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: zone, operator: Within, values: [a]}}]}}]}}}}}}\n",
                p("volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]")
            ),
            vec!["PersistentVolume pv-x", "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator", "\"Within\""],
        ),
        (
            "a NodePool with an unknown requirement operator",
            format!("{NODECLASS}{}", pool_full("np", "[{key: zone, operator: Around, values: [a]}]", "", "", "")),
            vec!["NodePool np", "spec.template.spec.requirements[0].operator", "\"Around\""],
        ),
        ("a NodePool with an invalid limit", format!("{NODECLASS}{}", pool_full("np", "", "", "", "limits: {cpu: plenty}")), vec!["NodePool np", "spec.limits.cpu", "invalid quantity"]),
        (
            "a NodePool with an invalid duration",
            format!("{NODECLASS}{}", pool_full("np", "", "", "", "disruption: {consolidateAfter: soon}")),
            vec!["NodePool np", "spec.disruption.consolidateAfter", "invalid duration \"soon\""],
        ),
        (
            "a NodePool taint with an unknown effect",
            format!("{NODECLASS}{}", pool_full("np", "", "", "taints: [{key: a, effect: Later}]", "")),
            vec!["NodePool np", "spec.template.spec.taints[0].effect", "\"Later\""],
        ),
        (
            "a NodePool with minValues above its values",
            format!("{NODECLASS}{}", pool_full("np", "[{key: zone, operator: In, values: [a], minValues: 2}]", "", "", "")),
            vec!["NodePool np", "spec.template.spec.requirements[0].minValues"],
        ),
        (
            "a NodePool setting a restricted label",
            format!("{NODECLASS}{}", pool_full("np", "", "{karpenter.sh/nodepool: x}", "", "")),
            vec!["NodePool np", "spec.template.metadata.labels.karpenter.sh/nodepool", "restricted"],
        ),
        ("an EC2NodeClass with an unknown AMI alias", NODECLASS.replace("al2023@latest", "plan9@latest"), vec!["EC2NodeClass default", "spec.amiSelectorTerms", "\"plan9\""]),
        (
            "an EC2NodeClass with an invalid eviction threshold",
            NODECLASS.replace("role: test,", "role: test, kubelet: {evictionHard: {memory.available: lots%}},"),
            vec!["EC2NodeClass default", "spec.kubelet.evictionHard.memory.available", "invalid percentage"],
        ),
    ];
    for (what, text, parts) in &cases {
        let msg = load_error(&[("case.yaml", text)]);
        assert_mentions(what, &msg, parts);
    }
}

/// Errors point at the file that holds the broken object, not at the one that refers to it.
#[test]
fn references_across_files_name_the_referring_object() {
    let claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\nspec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
    let pod_text = p("volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]");
    let msg = load_error(&[("pods.yaml", &pod_text), ("claims.yaml", claim)]);
    assert_mentions("a claim referencing a missing StorageClass", &msg, &["claims.yaml", "PersistentVolumeClaim default/data", "spec.storageClassName", "StorageClass \"fast\" not found"]);

    let other_class = NODECLASS.replace("name: default", "name: other");
    let pools = pool_full("np", "", "", "", "").replace("name: default}", "name: missing}");
    let msg = load_error(&[("classes.yaml", &other_class), ("pools.yaml", &pools)]);
    assert_mentions("a NodePool referencing a missing EC2NodeClass", &msg, &["pools.yaml", "NodePool np", "spec.template.spec.nodeClassRef.name", "EC2NodeClass \"missing\" not found"]);

    let msg = load_error(&[("pools.yaml", &pool_full("np", "", "", "", ""))]);
    assert_mentions("a NodePool without any EC2NodeClass", &msg, &["pools.yaml", "NodePool np", "spec.template.spec.nodeClassRef.name", "has no EC2NodeClass"]);
}

/// A controller's invalid pod template is reported once, on the controller and its template field, not
/// on each pod it would create.
#[test]
fn template_errors_name_the_controller() {
    let cases = [
        (
            "Deployment",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec: {replicas: 3, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: lots}}}]}}}\n",
            "Deployment default/web",
            "spec.template.spec.containers[0].resources.requests.cpu",
        ),
        (
            "StatefulSet",
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: default}\nspec: {replicas: 2, serviceName: db, selector: {matchLabels: {app: db}}, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: i}], tolerations: [{operator: Maybe}]}}}\n",
            "StatefulSet default/db",
            "spec.template.spec.tolerations[0].operator",
        ),
        (
            "Job",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default}\nspec: {parallelism: 2, template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}], nodeSelector: {a: b}, affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Gt, values: [x]}]}]}}}}}}\n",
            "Job default/j",
            "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
        ),
        (
            "DaemonSet",
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: lots}}}]}}}\n",
            "DaemonSet kube-system/agent",
            "spec.template.spec.containers[0].resources.requests.cpu",
        ),
    ];
    for (kind, text, object, field) in cases {
        let msg = load_error(&[("controllers.yaml", text)]);
        assert_mentions(kind, &msg, &["controllers.yaml", object, field]);
        assert_eq!(msg.lines().count(), 1, "{kind}: one error, not one per pod:\n{msg}");
    }
}

/// Several broken objects are all reported.
#[test]
fn every_error_is_reported() {
    let text = format!("{}{}", pod("a", "", "lots", ""), pod("b", "", "", "tolerations: [{operator: Maybe}]"));
    let msg = load_error(&[("many.yaml", &text)]);
    assert_mentions("two broken pods", &msg, &["Pod default/a", "spec.containers[0].resources.requests.cpu", "Pod default/b", "spec.tolerations[0].operator"]);
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning() {
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: default}}\ndata: {{a: b}}\n---\napiVersion: other.io/v1\nkind: NodePool\nmetadata: {{name: foreign}}\nspec: {{}}\n{}",
        pod("p", "", "100m", "")
    );
    let w = stowage_input::load_texts([(Path::new("mixed.yaml"), text.as_str())]).expect("unknown kinds do not fail the load");
    assert_eq!(w.warnings.len(), 2, "{:?}", w.warnings);
    assert_mentions("ConfigMap", &w.warnings[0], &["mixed.yaml", "ConfigMap default/settings", "skipped"]);
    assert_mentions("a NodePool of another group", &w.warnings[1], &["mixed.yaml (document 2)", "NodePool foreign", "other.io/v1", "skipped"]);
    assert_eq!(w.cluster.pods.len(), 1);
    assert!(w.cluster.nodepools.is_empty());
}

/// Files on disk: errors carry the path. (The core's no-IO rule, clippy.toml, is the library's; this
/// test writes the files it loads.)
#[test]
#[allow(clippy::disallowed_methods)]
fn files_on_disk() {
    let dir = std::env::temp_dir().join(format!("stowage-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("pods.yaml");
    std::fs::write(&bad, pod("p", "", "lots", "")).unwrap();
    let msg = stowage_input::load(std::slice::from_ref(&bad)).and_then(stowage_input::Workload::strict).unwrap_err().to_string();
    assert_mentions("a file", &msg, &[&bad.display().to_string(), "Pod default/p", "spec.containers[0].resources.requests.cpu"]);
    let missing: PathBuf = dir.join("missing.yaml");
    let msg = stowage_input::load(std::slice::from_ref(&missing)).unwrap_err().to_string();
    assert_mentions("a missing file", &msg, &[&missing.display().to_string(), "cannot read"]);

    let cat = dir.join("catalog.yaml");
    std::fs::write(&cat, "schema: stowage.dev/catalog/v1\nname: x\ninstanceTypes: []\nbogus: 1\n").unwrap();
    let msg = stowage_input::catalog::load(&cat).unwrap_err().to_string();
    assert_mentions("a catalog file", &msg, &[&cat.display().to_string(), "bogus"]);
    let msg = stowage_input::catalog::load(&dir.join("nope.yaml")).unwrap_err().to_string();
    assert_mentions("a missing catalog", &msg, &["nope.yaml", "cannot read"]);

    let weights = dir.join("weights.yaml");
    std::fs::write(&weights, DEFAULT_YAML.replace("price: 1.0", "price: -1.0")).unwrap();
    let msg = stowage_input::weights::load(&weights).unwrap_err().to_string();
    assert_mentions("a weights file", &msg, &[&weights.display().to_string(), "price", "non-negative"]);
    let msg = stowage_input::weights::load(&dir.join("nope.yaml")).unwrap_err().to_string();
    assert_mentions("missing weights", &msg, &["nope.yaml", "cannot read"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn invalid_weights_name_the_field() {
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("a negative weight", DEFAULT_YAML.replace("perNode: 0.0\n\nspot", "perNode: -1\n\nspot"), vec!["w.yaml", "perNode", "non-negative"]),
        ("a weight of the wrong type", DEFAULT_YAML.replace("perNode: 0.0\n\nspot", "perNode: many\n\nspot"), vec!["w.yaml", "perNode"]),
        ("a nested weight of the wrong type", DEFAULT_YAML.replace("priceMultiplier: 1.0", "priceMultiplier: [1]"), vec!["w.yaml", "spot.priceMultiplier"]),
        ("an unknown field", format!("{DEFAULT_YAML}\nbogus: 1\n"), vec!["w.yaml", "bogus"]),
        ("a missing field", DEFAULT_YAML.replace("unschedulablePod: 10000.0", ""), vec!["w.yaml", "unschedulablePod"]),
        ("the wrong schema", DEFAULT_YAML.replace("stowage.dev/weights/v1", "stowage.dev/weights/v0"), vec!["w.yaml", "schema", "v0"]),
        ("a tie-break that is not one", DEFAULT_YAML.replace("tieBreak: 0.000001", "tieBreak: 0.5"), vec!["w.yaml", "tieBreak"]),
        ("a zero price weight", DEFAULT_YAML.replace("price: 1.0", "price: 0"), vec!["w.yaml", "price", "positive"]),
        ("malformed YAML", "schema: [\n".into(), vec!["w.yaml"]),
    ];
    for (what, text, parts) in &cases {
        let msg = Weights::parse("w.yaml", text).map(|_| ()).expect_err(what).to_string();
        assert_mentions(what, &msg, parts);
    }
}

const TYPE: &str = "- name: t\n  capacity: {cpu: \"2\", memory: 4Gi, pods: \"10\"}\n  offerings: [{zone: a, capacityType: on-demand, price: 0.1}]\n";

fn catalog(types: &str) -> String {
    format!("schema: stowage.dev/catalog/v1\nname: x\nregion: r\nzones: [a]\ninstanceTypes:\n{types}")
}

#[test]
fn invalid_catalogs_name_the_type_and_field() {
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("an invalid capacity", catalog(&TYPE.replace("cpu: \"2\"", "cpu: two")), vec!["cat.yaml", "instanceTypes[0] (t)", "capacity.cpu", "invalid quantity"]),
        ("a negative overhead", catalog(&format!("{TYPE}  overhead: {{kubeReserved: {{cpu: -100m}}}}\n")), vec!["cat.yaml", "instanceTypes[0] (t)", "overhead.kubeReserved.cpu"]),
        ("no pod slots", catalog(&TYPE.replace("pods: \"10\"", "pods: \"0\"")), vec!["instanceTypes[0] (t)", "capacity.pods"]),
        ("a duplicate type", catalog(&format!("{TYPE}{TYPE}")), vec!["instanceTypes[1] (t)", "duplicate instance type"]),
        ("a negative price", catalog(&TYPE.replace("price: 0.1", "price: -0.1")), vec!["instanceTypes[0] (t)", "offerings[0].price"]),
        ("an unknown price source", catalog(&TYPE.replace("price: 0.1}", "price: 0.1, priceSource: guess}")), vec!["instanceTypes[0] (t)", "offerings[0].priceSource", "\"guess\""]),
        ("a price of the wrong type", catalog(&TYPE.replace("price: 0.1", "price: cheap")), vec!["cat.yaml", "instanceTypes[0].offerings[0].price"]),
        ("a capacity of the wrong type", catalog(&TYPE.replace("capacity: {cpu: \"2\", memory: 4Gi, pods: \"10\"}", "capacity: [2]")), vec!["cat.yaml", "instanceTypes[0].capacity"]),
        ("an unknown field", catalog(&format!("{TYPE}  bogus: 1\n")), vec!["cat.yaml", "instanceTypes[0]", "bogus"]),
        ("a missing field", catalog(&TYPE.replace("  offerings: [{zone: a, capacityType: on-demand, price: 0.1}]\n", "")), vec!["cat.yaml", "instanceTypes[0]", "offerings"]),
        ("the wrong schema", catalog(TYPE).replace("catalog/v1", "catalog/v9"), vec!["cat.yaml", "schema"]),
        ("malformed YAML", "schema: {\n".into(), vec!["cat.yaml", "invalid YAML"]),
        (
            "a JSON catalog with a wrong type",
            r#"{"schema":"stowage.dev/catalog/v1","name":"x","instanceTypes":[{"name":"t","capacity":{"cpu":"2","pods":"1"},"offerings":[{"zone":"a","capacityType":"spot","price":"cheap"}]}]}"#
                .into(),
            vec!["cat.yaml", "instanceTypes[0].offerings[0].price"],
        ),
    ];
    for (what, text, parts) in &cases {
        let msg = stowage_input::catalog::parse("cat.yaml", text).map(|_| ()).expect_err(what).to_string();
        assert_mentions(what, &msg, parts);
    }
}

#[test]
fn invalid_plans_name_the_field() {
    let ok = r#"{"schema":"stowage.dev/plan/v1","solver":{"name":"g","status":"heuristic","timeMs":1},"costPerHour":0.1,
        "newNodes":[{"name":"a","nodePool":"p","instanceType":"t","zone":"z","capacityType":"spot","pricePerHour":0.1}],
        "placements":[{"pod":"default/x","node":"a"}]}"#;
    assert!(Plan::from_json(ok).is_ok());
    let cases = [
        ("a price of the wrong type", ok.replace("\"pricePerHour\":0.1", "\"pricePerHour\":\"x\""), "newNodes[0].pricePerHour"),
        ("a placement without a node", ok.replace(",\"node\":\"a\"", ""), "placements[0]"),
        ("an unknown status", ok.replace("heuristic", "guessed"), "solver.status"),
        ("the wrong schema", ok.replace("plan/v1", "plan/v2"), "schema"),
        ("not JSON", "plan:\n  - x".to_string(), "line 1"),
    ];
    for (what, text, part) in cases {
        let msg = Plan::from_json(&text).map(|_| ()).expect_err(what).to_string();
        assert_mentions(what, &msg, &[part]);
    }
}

// ---------------------------------------------------------------------------------------------------
// Hostile input (issue 20): bounded memory, duplicates, Kubernetes' and Karpenter's validation,
// readers that neither lose nor invent data. Each test is one bullet of the issue.

/// The error of loading one file under `limits`.
#[track_caller]
fn load_error_with(file: &str, text: &str, limits: &stowage_input::Limits) -> String {
    match stowage_input::load_texts_with([(Path::new(file), text)], limits).and_then(stowage_input::Workload::strict) {
        Ok(_) => panic!("{file} loads, an error was expected"),
        Err(e) => e.to_string(),
    }
}

fn deployment(name: &str, replicas: &str) -> String {
    format!(
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}}}]}}\n"
    )
}

/// A YAML alias bomb: one anchored 1 MiB string aliased 200,000 times (a 1.6 MB file that would expand
/// to 200 GB) is refused by the parser's budget, not expanded.
#[test]
fn yaml_alias_bomb_is_refused() {
    let mut text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\ndata:\n  a: &big \"{}\"\n  list:\n", "x".repeat(1 << 20));
    for _ in 0..200_000 {
        text.push_str("  - *big\n");
    }
    let msg = load_error(&[("bomb.yaml", &text)]);
    assert_mentions("an alias bomb", &msg, &["bomb.yaml", "invalid YAML"]);
    assert!(msg.to_lowercase().contains("alias") || msg.to_lowercase().contains("budget"), "the error says which budget: {msg}");
}

/// Controllers whose counts would allocate billions of pods fail on the field, before any allocation.
#[test]
fn huge_controller_counts_are_refused_on_their_field() {
    let job = "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default}\nspec:\n  parallelism: 2147483647\n  completions: 2147483647\n  template:\n    spec: {restartPolicy: Never, containers: [{name: c, image: pause}]}\n";
    let sts = "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s, namespace: default}\nspec:\n  replicas: 1000000\n  serviceName: s\n  selector: {matchLabels: {app: s}}\n  template:\n    metadata: {labels: {app: s}}\n    spec: {containers: [{name: c, image: pause}]}\n";
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("a Deployment of 2,000,000,000 replicas", deployment("web", "2000000000"), vec!["Deployment default/web", "spec.replicas", "limit of 150000 pods", "--max-pods"]),
        ("a Job of parallelism 2^31-1", job.into(), vec!["Job default/j", "spec.parallelism", "--max-pods"]),
        ("a StatefulSet of a million replicas", sts.into(), vec!["StatefulSet default/s", "spec.replicas", "--max-pods"]),
        ("replicas: -5", deployment("web", "-5"), vec!["Deployment default/web", "spec.replicas", "must be at least 0, got -5"]),
        ("a negative StatefulSet ordinal start", sts.replace("replicas: 1000000", "replicas: 1\n  ordinals: {start: -3}"), vec!["StatefulSet default/s", "spec.ordinals.start", "at least 0"]),
    ];
    for (what, text, parts) in cases {
        let msg = load_error(&[("controllers.yaml", &text)]);
        assert_mentions(what, &msg, &[&["controllers.yaml"][..], &parts].concat());
    }
}

/// The pods of a batch are capped (listed and created together), with a message that says what to do.
#[test]
fn pods_per_batch_are_capped() {
    let limits = stowage_input::Limits { max_pods: 10, ..Default::default() };
    let msg = load_error_with("two.yaml", &format!("{}{}", deployment("a", "6"), deployment("b", "6")), &limits);
    assert_mentions("two Deployments past the limit together", &msg, &["two.yaml", "Deployment default/b", "spec.replicas", "limit of 10 pods per batch", "--max-pods"]);
    let msg = load_error_with("pods.yaml", &common::pods(11, "p", "", "100m", ""), &limits);
    assert_mentions("listed pods past the limit", &msg, &["pods.yaml", "11 pods, more than the limit of 10", "smaller batches", "--max-pods"]);
    let w = stowage_input::load_texts_with([(Path::new("ten.yaml"), deployment("a", "10").as_str())], &limits).expect("exactly the limit loads");
    assert_eq!(w.cluster.pods.len(), 10);
}

/// The same object twice is an error at its second copy (the API server holds one object per name);
/// so is the same file named twice.
#[test]
fn duplicate_objects_are_named_at_the_second_copy() {
    let pool = pool_full("default", "", "", "", "");
    type Files<'a> = Vec<(&'a str, String)>;
    let cases: Vec<(&str, Files, Vec<&str>)> = vec![
        ("the same Pod twice", vec![("a.yaml", format!("{}{}", pod("p", "", "1", ""), pod("p", "", "2", "")))], vec!["a.yaml (document 2)", "Pod default/p", "duplicate", "already defined in a.yaml"]),
        ("the same Node twice", vec![("a.yaml", node("n1", "zone-a", "2", "", "")), ("b.yaml", node("n1", "zone-b", "4", "", ""))], vec!["b.yaml", "Node n1", "already defined in a.yaml"]),
        ("the same NodePool twice", vec![("a.yaml", format!("{NODECLASS}{pool}{pool}"))], vec!["a.yaml (document 3)", "NodePool default", "already defined in a.yaml (document 2)"]),
        ("the same file twice", vec![("same.yaml", pod("p", "", "1", "")), ("same.yaml", pod("p", "", "1", ""))], vec!["same.yaml", "Pod default/p", "duplicate"]),
    ];
    for (what, files, parts) in cases {
        let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let msg = load_error(&files);
        assert_mentions(what, &msg, &parts);
    }
    // The same name in two namespaces is two objects.
    let w = stowage_input::load_texts([(Path::new("ns.yaml"), format!("{}{}", pod("a/p", "", "1", ""), pod("b/p", "", "1", "")).as_str())]).expect("loads");
    assert_eq!(w.cluster.pods.len(), 2);
}

/// Kubernetes' and Karpenter's validation: weight, ports, protocols, containers, quantities, versions.
#[test]
fn api_validation_as_the_api_server_and_karpenter_do_it() {
    let weighted = |w: &str| format!("{NODECLASS}{}", pool_full("default", "", "", "", &format!("weight: {w}")));
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("NodePool weight -1", weighted("-1"), vec!["NodePool default", "spec.weight", "1-100", "got -1"]),
        ("NodePool weight 0", weighted("0"), vec!["NodePool default", "spec.weight", "got 0"]),
        ("NodePool weight 2147483647", weighted("2147483647"), vec!["NodePool default", "spec.weight", "got 2147483647"]),
        ("hostPort 70000", p("").replace("image: pause", "image: pause, ports: [{containerPort: 80, hostPort: 70000}]"), vec!["Pod default/p", "spec.containers[0].ports[0].hostPort", "1-65535"]),
        ("containerPort 0", p("").replace("image: pause", "image: pause, ports: [{containerPort: 0}]"), vec!["spec.containers[0].ports[0].containerPort", "got 0"]),
        (
            "protocol SCTPX",
            p("").replace("image: pause", "image: pause, ports: [{containerPort: 80, hostPort: 80, protocol: SCTPX}]"),
            vec!["spec.containers[0].ports[0].protocol", "\"SCTPX\"", "TCP, UDP, SCTP"],
        ),
        ("a pod without containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n".into(), vec!["Pod default/p", "spec.containers", "at least one container"]),
        ("a pod without a spec", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n".into(), vec!["Pod default/p", "spec.containers", "at least one container"]),
        ("half a GPU", p("").replace("requests: {cpu: 100m}", "requests: {cpu: 100m, nvidia.com/gpu: 500m}"), vec!["spec.containers[0].resources.requests.nvidia.com/gpu", "not a whole number"]),
        (
            "a karpenter.sh/v1beta1 NodePool",
            format!("{NODECLASS}{}", pool_full("default", "", "", "", "").replace("karpenter.sh/v1", "karpenter.sh/v1beta1")),
            vec!["NodePool default", "apiVersion", "karpenter.sh/v1beta1 is not supported", "karpenter.sh/v1"],
        ),
        ("an empty workload", "# nothing here\n".into(), vec!["case.yaml", "no Kubernetes objects"]),
    ];
    for (what, text, parts) in cases {
        let msg = load_error(&[("case.yaml", &text)]);
        assert_mentions(what, &msg, &[&["case.yaml"][..], &parts].concat());
    }
    // Every valid Kubernetes quantity is accepted: 1Ei of memory is 2^60 bytes.
    let w = stowage_input::load_texts([(Path::new("ei.yaml"), p("").replace("requests: {cpu: 100m}", "requests: {cpu: 100m, memory: 1Ei}").as_str())]).expect("1Ei loads");
    assert_eq!(w.cluster.pods[0].requests.memory, 1 << 60);
    // Weight 1 and 100 are Karpenter's bounds, both accepted.
    for w in ["1", "100"] {
        stowage_input::load_texts([(Path::new("w.yaml"), weighted(w).as_str())]).unwrap_or_else(|e| panic!("weight {w}: {e}"));
    }
}

/// JSON workloads and plans: one document, no key twice, as the YAML readers already require.
#[test]
fn json_is_strict() {
    let pod_json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"pause"}]}}"#;
    stowage_input::load_texts([(Path::new("p.json"), pod_json)]).expect("the pod loads");
    let cases = [
        ("a second document", format!("{pod_json}\n{}", pod_json.replace("\"p\"", "\"q\"")), "trailing characters"),
        ("trailing garbage", format!("{pod_json} garbage"), "trailing characters"),
        ("a duplicate key", pod_json.replace(r#""app":"a""#, r#""app":"a","app":"b""#), "duplicate key \"app\""),
    ];
    for (what, text, part) in &cases {
        let msg = load_error(&[("p.json", text)]);
        assert_mentions(what, &msg, &["p.json", "invalid JSON", part]);
    }
    let plan = r#"{"schema":"stowage.dev/plan/v1","solver":{"name":"g","status":"heuristic","timeMs":1},"costPerHour":0.1,"placements":[{"pod":"default/x","node":"a"}]}"#;
    assert!(Plan::from_json(plan).is_ok());
    for (what, text, part) in [
        ("a second plan", format!("{plan}\n{plan}"), "trailing characters"),
        ("trailing garbage", format!("{plan}}}"), "trailing characters"),
        ("a duplicate key", plan.replace(r#""costPerHour":0.1"#, r#""costPerHour":0.1,"costPerHour":5"#), "duplicate key \"costPerHour\""),
    ] {
        let msg = Plan::from_json(&text).map(|_| ()).expect_err(what).to_string();
        assert_mentions(what, &msg, &[part]);
    }
    // The status docs/formats.md lists is accepted.
    assert_eq!(Plan::from_json(&plan.replace("heuristic", "infeasible")).expect("infeasible is a documented status").solver.status, stowage_core::plan::Status::Infeasible);
}

/// An empty catalog is an error that says so, not a plan that leaves every pod pending.
#[test]
fn an_empty_catalog_is_an_error() {
    let msg = stowage_input::catalog::parse("cat.yaml", &catalog("").replace("instanceTypes:\n", "instanceTypes: []\n")).map(|_| ()).expect_err("empty").to_string();
    assert_mentions("an empty catalog", &msg, &["cat.yaml", "instanceTypes: empty"]);
}

/// An existing Node named like a planned one (`stowage-0`) does not collide with the plan's nodes, and
/// the plan stays valid.
#[test]
fn planned_node_names_never_collide_with_existing_nodes() {
    use stowage_core::solve::{Solver, plan_cluster};
    let cat = common::small_catalog();
    let text = format!(
        "{NODECLASS}{}{}{}",
        common::default_pool(),
        node("stowage-0", "zone-a", "100m", "", ""),
        common::pods(
            3,
            "p",
            "{app: a}",
            "900m",
            "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: a}}, topologyKey: kubernetes.io/hostname}]}}"
        )
    );
    let w = stowage_input::load_texts([(Path::new("names.yaml"), text.as_str())]).expect("loads");
    for solver in common::planners() {
        let plan = plan_cluster(&w.cluster, cat, &Weights::default(), solver).expect("plans");
        assert_eq!(plan.new_nodes.len(), 3, "{solver:?}: one node per pod (hostname anti-affinity)");
        for n in &plan.new_nodes {
            assert!(n.name.starts_with("stowage-new-"), "{solver:?}: {} shares the name form of the existing stowage-0", n.name);
        }
        let report = stowage_core::check::check(&w.cluster, cat, &plan);
        assert!(report.valid(), "{solver:?}: {:?}", report.violations);
    }
    // Without an existing `stowage-<n>` the names stay as they were.
    let plain = stowage_input::load_texts([(Path::new("plain.yaml"), format!("{NODECLASS}{}{}", common::default_pool(), pod("p", "", "100m", "")).as_str())]).expect("loads");
    let plan = plan_cluster(&plain.cluster, cat, &Weights::default(), Solver::Greedy).expect("plans");
    assert_eq!(plan.new_nodes[0].name, "stowage-0");
}

// ---------------------------------------------------------------------------------------------------
// A structure-aware fuzz of the loader: manifests of every expanded kind with hostile values in the
// fields issue 20 found unchecked (counts, weights, ports, protocols, quantities), some objects twice.
// Each load is an error naming its file, or a workload within the limits that plans and checks
// without a panic.

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        (0i64..6).prop_map(|v| v.to_string()),
        prop::sample::select(vec![
            "-1",
            "-5",
            "0",
            "101",
            "2147483647",
            "-2147483648",
            "9223372036854775807",
            "1e308",
            "\"\"",
            "null",
            "[]",
            "{}",
            "1Ei",
            "500m",
            "1.5",
            "\"x\"",
            "70000",
            "65535",
            "SCTPX",
            "UDP",
            "SCTP",
        ])
        .prop_map(str::to_string),
    ]
}

fn manifest() -> impl Strategy<Value = String> {
    let kinds = prop::sample::select(vec!["Deployment", "Job", "StatefulSet", "NodePool", "Node", "Pod", "ReplicaSet"]);
    (kinds, 0u8..3, prop::collection::vec(hostile(), 6)).prop_map(|(kind, name, v)| {
        let container = format!(
            "{{name: c, image: pause, ports: [{{containerPort: {}, hostPort: {}, protocol: {}}}], resources: {{requests: {{cpu: {}, memory: {}, nvidia.com/gpu: {}}}}}}}",
            v[0], v[1], v[2], v[3], v[4], v[5]
        );
        let template = format!("template: {{metadata: {{labels: {{app: a{name}}}}}, spec: {{containers: [{container}]}}}}");
        match kind {
            "Deployment" | "ReplicaSet" => format!("---\napiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: d{name}}}\nspec: {{replicas: {}, selector: {{matchLabels: {{app: a{name}}}}}, {template}}}\n", v[0]),
            "StatefulSet" => format!("---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: s{name}}}\nspec: {{replicas: {}, ordinals: {{start: {}}}, serviceName: s, selector: {{matchLabels: {{app: a{name}}}}}, {template}}}\n", v[0], v[1]),
            "Job" => format!("---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: j{name}}}\nspec: {{parallelism: {}, completions: {}, {template}}}\n", v[0], v[1]),
            "NodePool" => pool_full(&format!("p{name}"), "", "", "", &format!("weight: {}\n  limits: {{cpu: {}}}", v[0], v[3])),
            "Node" => node(&format!("stowage-{name}"), "zone-a", &v[3].replace('"', ""), "", ""),
            _ => format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{name}}}\nspec: {{containers: [{container}]}}\n"),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, rng_seed: RngSeed::Fixed(0x4057_11e0), max_shrink_iters: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_hostile_manifests_load_or_fail_cleanly(docs in prop::collection::vec(manifest(), 1..5), twice in any::<bool>()) {
        let mut text = format!("{NODECLASS}{}", docs.concat());
        if twice {
            text.push_str(&docs[0]);
        }
        let limits = stowage_input::Limits { max_pods: 40, ..Default::default() };
        match stowage_input::load_texts_with([(Path::new("fuzz.yaml"), text.as_str())], &limits) {
            Err(e) => {
                for x in &e.0 {
                    prop_assert!(x.location.contains("fuzz.yaml"), "an error without its file: {x}");
                }
            }
            Ok(w) => {
                prop_assert!(w.cluster.pods.len() <= 40, "{} pods past the limit of 40", w.cluster.pods.len());
                prop_assert!(w.cluster.nodepools.iter().all(|p| (0..=100).contains(&p.weight)), "a NodePool weight outside 1-100 loaded");
                let cat = common::small_catalog();
                if let Ok(plan) = stowage_core::solve::plan_cluster(&w.cluster, cat, &Weights::default(), stowage_core::solve::Solver::Greedy) {
                    let names: std::collections::BTreeSet<&str> = w.cluster.nodes.iter().map(|n| n.name.as_str()).collect();
                    prop_assert!(plan.new_nodes.iter().all(|n| !names.contains(n.name.as_str())), "a planned node takes an existing name");
                    let report = stowage_core::check::check(&w.cluster, cat, &plan);
                    prop_assert!(report.valid(), "{:?}\n{text}", report.violations);
                }
            }
        }
    }
}
