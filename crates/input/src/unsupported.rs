//! Karpenter fields stowage reads but does not act on, listed instead of silently dropped (issue 16
//! item 4; the table of every field is docs/aws-provider.md §8).
//!
//! Two sources, one report:
//! - [`nodepool`] and [`nodeclass`]: fields of Karpenter v1.14's NodePool and EC2NodeClass that
//!   stowage's types keep (so a round trip through the API server loses nothing) but that change
//!   nothing stowage decides, when they are set. The controller reports them on the object (an
//!   `UnsupportedFields` condition and an `UnsupportedField` event); file readers print a warning.
//! - [`dropped`]: fields of an object read from a file that stowage's types do not have at all (a
//!   field newer than Karpenter v1.14, a misspelt one): the keys of the file's `spec` that the typed
//!   object does not give back. Only files have them: the API server prunes fields its CRD lacks, and
//!   every field of Karpenter v1.14.1's NodePool and EC2NodeClass CRDs is typed (checked field by field
//!   against them), so nothing reaches the controller to be dropped.
//!
//! The object is planned all the same (none of these fields makes a plan wrong); `spec.replicas` is
//! the exception in kind, not in reporting: a static NodePool launches nothing dynamically in
//! Karpenter either, so stowage leaves it out of the NodePools it plans with ([`is_static`]) and does
//! not disrupt its nodes for emptiness, consolidation or drift, but it does not create or remove
//! nodes to keep the replica count (Karpenter's static provisioning), which the report says.

use serde_json::Value;

use crate::api::{EC2NodeClass, NodePool};

/// A field that is set and not acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// JSON path from the object's root (`spec.ipPrefixCount`).
    pub path: String,
    /// What stowage does instead.
    pub note: &'static str,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.note)
    }
}

/// What is said of a field that is read and not acted on.
pub const IGNORED: &str = "read, not acted on";
/// What is said of a field stowage's types do not have.
pub const UNKNOWN: &str = "not a field stowage knows; dropped";
/// What is said of `spec.replicas`.
pub const STATIC: &str = "static NodePool: stowage launches nothing for it and never disrupts its nodes for emptiness, consolidation or drift, but does not keep its node count";

/// Whether a NodePool is static (`spec.replicas` set): not a launch target, its nodes left alone by
/// voluntary disruption ([`STATIC`]).
pub fn is_static(p: &NodePool) -> bool {
    p.spec.replicas.is_some()
}

/// The NodePool's fields that are set and not acted on (module doc).
pub fn nodepool(p: &NodePool) -> Vec<Unsupported> {
    let mut out = Vec::new();
    if is_static(p) {
        out.push(Unsupported { path: "spec.replicas".into(), note: STATIC });
    }
    out
}

/// The EC2NodeClass's fields that are set and not acted on (module doc).
pub fn nodeclass(nc: &EC2NodeClass) -> Vec<Unsupported> {
    let s = &nc.spec;
    let mut out = Vec::new();
    let mut field = |set: bool, path: &str, note: &'static str| {
        if set {
            out.push(Unsupported { path: format!("spec.{path}"), note });
        }
    };
    field(s.placement_group_selector.is_some(), "placementGroupSelector", IGNORED);
    field(s.network_interfaces.as_ref().is_some_and(|n| !n.is_empty()), "networkInterfaces", "instances get the default network interface");
    field(s.ip_prefix_count.is_some(), "ipPrefixCount", IGNORED);
    field(s.connection_tracking.is_some(), "connectionTracking", IGNORED);
    field(s.cpu_options.is_some(), "cpuOptions", IGNORED);
    for (i, b) in s.block_device_mappings.iter().flatten().enumerate() {
        if b.ebs.as_ref().is_some_and(|e| e.volume_initialization_rate.is_some()) {
            out.push(Unsupported { path: format!("spec.blockDeviceMappings[{i}].ebs.volumeInitializationRate"), note: IGNORED });
        }
    }
    out
}

/// The paths under `spec` of `raw` (an object as a file has it) that `typed` (the same object typed
/// and serialized again) does not have: fields stowage's types drop. Keys whose value is empty (null,
/// `[]`, `{}`) are not reported (serializing skips empty values, and an empty field sets nothing).
pub fn dropped(raw: &Value, typed: &Value) -> Vec<Unsupported> {
    let mut out = Vec::new();
    walk(&raw["spec"], &typed["spec"], "spec", &mut out);
    out
}

fn walk(raw: &Value, typed: &Value, path: &str, out: &mut Vec<Unsupported>) {
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, v) in r {
                let p = format!("{path}.{k}");
                match t.get(k) {
                    Some(tv) => walk(v, tv, &p, out),
                    None if is_empty(v) => {}
                    None => out.push(Unsupported { path: p, note: UNKNOWN }),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                walk(rv, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// One line naming every field, for a condition message, an event and a log line.
pub fn message(fields: &[Unsupported]) -> String {
    fields.iter().map(Unsupported::to_string).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nc(spec: Value) -> (Value, EC2NodeClass) {
        let raw = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "n"}, "spec": spec});
        let typed = serde_json::from_value(raw.clone()).unwrap();
        (raw, typed)
    }

    fn base() -> Value {
        json!({"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
               "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "40Gi", "volumeType": "gp3"}}]})
    }

    /// Every "ignored" row of docs/aws-provider.md §8 is reported by its path, and survives the typed
    /// round trip (so the API server and `stowage record` keep it).
    #[test]
    fn every_ignored_ec2nodeclass_field_is_reported() {
        let (_, plain) = nc(base());
        assert!(nodeclass(&plain).is_empty(), "a NodeClass stowage implements in full: nothing to report");
        let mut reserved = base();
        reserved["capacityReservationSelectorTerms"] = json!([{"id": "cr-0123456789abcdef0"}, {"tags": {"team": "*"}, "ownerID": "123456789012"}]);
        let (_, reserved) = nc(reserved);
        assert!(nodeclass(&reserved).is_empty(), "capacity reservations are implemented");
        let rows: [(&str, Value); 5] = [
            ("placementGroupSelector", json!({"name": "pg"})),
            ("networkInterfaces", json!([{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}])),
            ("ipPrefixCount", json!(2)),
            ("connectionTracking", json!({"tcpEstablishedTimeout": 60})),
            ("cpuOptions", json!({"nestedVirtualization": "enabled"})),
        ];
        for (field, value) in rows {
            let mut spec = base();
            spec[field] = value.clone();
            let (raw, typed) = nc(spec);
            assert_eq!(nodeclass(&typed).iter().map(|u| u.path.as_str()).collect::<Vec<_>>(), vec![format!("spec.{field}")], "{field}");
            let back = serde_json::to_value(&typed).unwrap();
            assert_eq!(back["spec"][field], value, "{field} is kept");
            assert!(dropped(&raw, &back).is_empty(), "{field}: typed, so not dropped");
        }
        let mut spec = base();
        spec["blockDeviceMappings"][0]["ebs"]["volumeInitializationRate"] = json!(200);
        spec["blockDeviceMappings"][0]["ebs"]["snapshotID"] = json!("snap-1");
        let (_, typed) = nc(spec);
        let found = nodeclass(&typed);
        assert_eq!(found.iter().map(|u| u.path.as_str()).collect::<Vec<_>>(), vec!["spec.blockDeviceMappings[0].ebs.volumeInitializationRate"]);
        assert!(message(&found).contains("volumeInitializationRate (read, not acted on)"), "{}", message(&found));
    }

    #[test]
    fn replicas_makes_a_static_nodepool_and_is_reported() {
        let pool = |extra: Value| -> NodePool {
            let mut spec = json!({"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}});
            spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": spec})).unwrap()
        };
        assert!(nodepool(&pool(json!({}))).is_empty() && !is_static(&pool(json!({}))));
        let fixed = pool(json!({"replicas": 3}));
        assert!(is_static(&fixed));
        assert_eq!(nodepool(&fixed), vec![Unsupported { path: "spec.replicas".into(), note: STATIC }]);
        assert!(is_static(&pool(json!({"replicas": 0}))), "zero replicas is still static");
    }

    /// Fields stowage's types do not have at all are found by comparing the file with the typed object.
    #[test]
    fn fields_the_types_drop_are_found_in_files_with_their_path() {
        let mut spec = base();
        spec["subnetSelectorTerms"][0]["cidr"] = json!("10.0.0.0/16");
        spec["kubelet"] = json!({"maxPods": 20, "shutdownGracePeriod": "30s"});
        spec["userDta"] = json!("typo");
        spec["emptyThing"] = json!({});
        let (raw, typed) = nc(spec);
        let back = serde_json::to_value(&typed).unwrap();
        let mut found: Vec<String> = dropped(&raw, &back).into_iter().map(|u| u.path).collect();
        found.sort();
        assert_eq!(found, vec!["spec.kubelet.shutdownGracePeriod", "spec.subnetSelectorTerms[0].cidr", "spec.userDta"]);
        // A NodePool's requirement with an empty values list (serializing skips it) is not a dropped field.
        let raw = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "k", "operator": "Exists", "values": []}], "kubelet": {"maxPods": 3}}}}});
        let typed: NodePool = serde_json::from_value(raw.clone()).unwrap();
        let found: Vec<String> = dropped(&raw, &serde_json::to_value(&typed).unwrap()).into_iter().map(|u| u.path).collect();
        assert_eq!(found, vec!["spec.template.spec.kubelet"], "a v1beta1-era field on a v1 NodePool");
    }

    /// `stowage plan` and every file reader warn naming the file, the object and the field; the objects
    /// are still read (a static NodePool is left out of planning, nothing else is).
    #[test]
    fn reading_files_warns_naming_file_object_and_field() {
        let text = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
  ipPrefixCount: 1
  userDta: oops
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: 2
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: dynamic}
spec:
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}
"#;
        let w = crate::load_texts([(std::path::Path::new("karpenter.yaml"), text)]).unwrap();
        for want in [
            "karpenter.yaml: EC2NodeClass default: spec.ipPrefixCount: not supported by stowage: read, not acted on",
            "karpenter.yaml: EC2NodeClass default: spec.userDta: not supported by stowage: not a field stowage knows; dropped",
            &format!("karpenter.yaml (document 2): NodePool fixed: spec.replicas: not supported by stowage: {STATIC}"),
        ] {
            assert!(w.warnings.iter().any(|x| x == want), "missing {want:?} in {:#?}", w.warnings);
        }
        assert_eq!(w.warnings.iter().filter(|x| x.contains("not supported")).count(), 3, "{:#?}", w.warnings);
        assert_eq!(w.cluster.nodepools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["dynamic"], "the static pool launches nothing");
        assert_eq!(w.cluster.nodeclasses.len(), 1, "the NodeClass is planned all the same");
    }

    /// Every `spec` field of Karpenter v1.14.1's CRDs (karpenter.sh_nodepools.yaml and
    /// karpenter.k8s.aws_ec2nodeclasses.yaml of the release, taints' own fields aside) is in stowage's
    /// CRD, typed or kept whole, so the API server never hands the controller a field it would drop.
    #[test]
    fn stowage_types_every_spec_field_of_karpenters_v1_14_1_crds() {
        use kube::CustomResourceExt;
        const EC2NODECLASS: &str = "amiFamily amiSelectorTerms amiSelectorTerms.alias amiSelectorTerms.id amiSelectorTerms.name amiSelectorTerms.owner amiSelectorTerms.ssmParameter \
            amiSelectorTerms.tags associatePublicIPAddress blockDeviceMappings blockDeviceMappings.deviceName blockDeviceMappings.ebs blockDeviceMappings.ebs.deleteOnTermination \
            blockDeviceMappings.ebs.encrypted blockDeviceMappings.ebs.iops blockDeviceMappings.ebs.kmsKeyID blockDeviceMappings.ebs.snapshotID blockDeviceMappings.ebs.throughput \
            blockDeviceMappings.ebs.volumeInitializationRate blockDeviceMappings.ebs.volumeSize blockDeviceMappings.ebs.volumeType blockDeviceMappings.rootVolume \
            capacityReservationSelectorTerms capacityReservationSelectorTerms.id capacityReservationSelectorTerms.instanceMatchCriteria capacityReservationSelectorTerms.ownerID \
            capacityReservationSelectorTerms.tags connectionTracking connectionTracking.tcpEstablishedTimeout connectionTracking.udpStreamTimeout connectionTracking.udpTimeout \
            context cpuOptions cpuOptions.nestedVirtualization detailedMonitoring instanceProfile instanceStorePolicy ipPrefixCount kubelet kubelet.clusterDNS kubelet.cpuCFSQuota \
            kubelet.evictionHard kubelet.evictionMaxPodGracePeriod kubelet.evictionSoft kubelet.evictionSoftGracePeriod kubelet.imageGCHighThresholdPercent \
            kubelet.imageGCLowThresholdPercent kubelet.kubeReserved kubelet.maxPods kubelet.podsPerCore kubelet.systemReserved metadataOptions metadataOptions.httpEndpoint \
            metadataOptions.httpProtocolIPv6 metadataOptions.httpPutResponseHopLimit metadataOptions.httpTokens networkInterfaces networkInterfaces.deviceIndex \
            networkInterfaces.interfaceType networkInterfaces.networkCardIndex placementGroupSelector placementGroupSelector.id placementGroupSelector.name role \
            securityGroupSelectorTerms securityGroupSelectorTerms.id securityGroupSelectorTerms.name securityGroupSelectorTerms.tags subnetSelectorTerms subnetSelectorTerms.id \
            subnetSelectorTerms.tags tags userData";
        const NODEPOOL: &str = "disruption disruption.budgets disruption.budgets.duration disruption.budgets.nodes disruption.budgets.reasons disruption.budgets.schedule \
            disruption.consolidateAfter disruption.consolidationPolicy limits replicas template template.metadata template.metadata.annotations template.metadata.labels \
            template.spec template.spec.expireAfter template.spec.nodeClassRef template.spec.nodeClassRef.group template.spec.nodeClassRef.kind template.spec.nodeClassRef.name \
            template.spec.requirements template.spec.requirements.key template.spec.requirements.minValues template.spec.requirements.operator template.spec.requirements.values \
            template.spec.startupTaints template.spec.taints template.spec.terminationGracePeriod weight";
        /// Whether `path` is in the schema: a property at every step, or a step kept whole.
        fn covered(mut schema: &Value, path: &str) -> bool {
            for seg in path.split('.') {
                if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) {
                    return true;
                }
                let node = if schema.get("items").is_some() { &schema["items"] } else { schema };
                if node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)) {
                    return true;
                }
                match node.get("properties").and_then(|p| p.get(seg)) {
                    Some(next) => schema = next,
                    None => return false,
                }
            }
            true
        }
        for (crd, fields) in [(serde_json::to_value(EC2NodeClass::crd()).unwrap(), EC2NODECLASS), (serde_json::to_value(NodePool::crd()).unwrap(), NODEPOOL)] {
            let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
            let missing: Vec<&str> = fields.split_whitespace().filter(|f| !covered(spec, f)).collect();
            assert!(missing.is_empty(), "{}: Karpenter v1.14.1 fields stowage's CRD lacks: {missing:?}", crd["spec"]["names"]["kind"]);
            assert!(!covered(spec, "noSuchField"), "the check can fail");
        }
    }
}
