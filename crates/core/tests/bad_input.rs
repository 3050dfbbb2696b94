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
    match stowage_input::load_texts(files.iter().map(|(f, t)| (Path::new(*f), *t))) {
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
    let msg = stowage_input::load(std::slice::from_ref(&bad)).unwrap_err().to_string();
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
