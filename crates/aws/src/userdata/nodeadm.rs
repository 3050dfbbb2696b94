//! AL2023: a nodeadm `NodeConfig` in a MIME multipart document, as Karpenter writes it
//! (`pkg/providers/amifamily/bootstrap/nodeadm.go`).
//!
//! ```text
//! MIME-Version: 1.0
//! Content-Type: multipart/mixed; boundary="//"
//!
//! --//                                   <- the EC2NodeClass's own spec.userData parts, if any, first
//! Content-Type: application/node.eks.aws
//!
//! apiVersion: node.eks.aws/v1alpha1
//! kind: NodeConfig
//! spec:
//!   cluster: {name, apiServerEndpoint, certificateAuthority, cidr}
//!   kubelet:
//!     config: {maxPods, clusterDNS, podsPerCore, kubeReserved, systemReserved, evictionHard, evictionSoft,
//!              evictionSoftGracePeriod, evictionMaxPodGracePeriod, imageGC{High,Low}ThresholdPercent, cpuCFSQuota}
//!     flags: ["--node-labels=<k=v,...>", "--register-with-taints=<k=v:Effect,...>"]
//!   instance: {localStorage: {strategy: RAID0}}       <- with instanceStorePolicy RAID0
//! --//--
//! ```
//!
//! clusterDNS is written when the NodeClass or the options give it (nodeadm derives it from `cidr`
//! otherwise). Scalars are written as JSON strings and maps as JSON flow mappings (both valid YAML),
//! so no value needs YAML escaping rules.

use std::collections::BTreeMap;

use super::{UserDataInput, multipart, registration_taints, taint_arg};
use stowage_input::api::ec2nodeclass::KubeletConfiguration;

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn flow_map(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

/// The EC2NodeClass's kubelet settings as kubelet `KubeletConfiguration` fields (nodeadm merges
/// `spec.kubelet.config` into kubelet's config file), in kubelet's field names. maxPods and clusterDNS
/// are written by the caller (maxPods is computed per instance type, clusterDNS has a default).
/// The NodeClass was validated before ([`KubeletConfiguration::validate`]): every `evictionSoft`
/// signal has its grace period, so kubelet starts.
fn kubelet_fields(k: &KubeletConfiguration) -> String {
    let mut s = String::new();
    if let Some(p) = k.pods_per_core {
        s += &format!("      podsPerCore: {p}\n");
    }
    for (name, m) in [
        ("kubeReserved", &k.kube_reserved),
        ("systemReserved", &k.system_reserved),
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
    ] {
        if let Some(m) = m.as_ref().filter(|m| !m.is_empty()) {
            s += &format!("      {name}: {}\n", flow_map(m));
        }
    }
    for (name, v) in [
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
        ("imageGCHighThresholdPercent", k.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", k.image_gc_low_threshold_percent),
    ] {
        if let Some(v) = v {
            s += &format!("      {name}: {v}\n");
        }
    }
    if let Some(q) = k.cpu_cfs_quota {
        s += &format!("      cpuCFSQuota: {q}\n");
    }
    s
}

pub(crate) fn node_config(i: &UserDataInput) -> String {
    let mut s = String::from("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n");
    s += &format!("    name: {}\n", q(i.cluster_name));
    if !i.cluster.endpoint.is_empty() {
        s += &format!("    apiServerEndpoint: {}\n", q(&i.cluster.endpoint));
    }
    if !i.cluster.ca_bundle.is_empty() {
        s += &format!("    certificateAuthority: {}\n", q(&i.cluster.ca_bundle));
    }
    if let Some(c) = &i.cluster.service_cidr {
        s += &format!("    cidr: {}\n", q(c));
    }
    s += "  kubelet:\n    config:\n";
    s += &format!("      maxPods: {}\n", i.max_pods);
    let dns = i.kubelet.and_then(|k| k.cluster_dns.clone()).filter(|d| !d.is_empty()).unwrap_or_else(|| i.cluster.cluster_dns.clone());
    if !dns.is_empty() {
        s += &format!("      clusterDNS: {}\n", serde_json::to_string(&dns).unwrap_or_default());
    }
    if let Some(k) = i.kubelet {
        s += &kubelet_fields(k);
    }
    s += "    flags:\n";
    if !i.labels.is_empty() {
        let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s += &format!("      - {}\n", q(&format!("--node-labels={}", labels.join(","))));
    }
    let taints: Vec<String> = registration_taints(i.taints).iter().map(taint_arg).collect();
    s += &format!("      - {}\n", q(&format!("--register-with-taints={}", taints.join(","))));
    if i.raid0 {
        s += "  instance:\n    localStorage:\n      strategy: RAID0\n";
    }
    s
}

/// The AL2023 user data: the NodeClass's own parts first, then stowage's NodeConfig (nodeadm merges
/// NodeConfigs in order, so stowage's values win, as Karpenter's do).
pub fn user_data(i: &UserDataInput) -> String {
    multipart(i.custom_user_data, format!("Content-Type: application/node.eks.aws\n\n{}", node_config(i).trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::ClusterInfo;
    use stowage_core::domain::taints::{Effect, Taint};

    fn input<'a>(labels: &'a BTreeMap<String, String>, taints: &'a [Taint], cluster: &'a ClusterInfo, custom: Option<&'a str>) -> UserDataInput<'a> {
        UserDataInput { cluster_name: "demo", cluster, max_pods: 29, kubelet: None, labels, taints, raid0: false, custom_user_data: custom }
    }

    #[test]
    fn nodeconfig_has_max_pods_labels_and_the_unregistered_taint() {
        let labels: BTreeMap<String, String> = [("karpenter.sh/nodepool", "default"), ("team", "a b")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let taints = vec![Taint::new("dedicated", "gpu", Effect::NoSchedule)];
        let cluster = ClusterInfo { endpoint: "https://127.0.0.1:6443".into(), ca_bundle: "Q0E=".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec!["10.100.0.10".into()] };
        let ud = user_data(&input(&labels, &taints, &cluster, None));
        assert!(ud.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\n"), "{ud}");
        assert!(ud.contains("      maxPods: 29\n"), "{ud}");
        assert!(ud.contains("clusterDNS: [\"10.100.0.10\"]"), "{ud}");
        assert!(ud.contains("\"--node-labels=karpenter.sh/nodepool=default,team=a b\""), "{ud}");
        assert!(ud.contains("\"--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\""), "{ud}");
        assert!(ud.ends_with("\n--//--\n"), "{ud}");
    }

    /// The NodeConfig as YAML parses it (nodeadm reads it the same way), checked against nodeadm's
    /// `node.eks.aws/v1alpha1` schema: only fields nodeadm has, flags a list of strings.
    fn parsed(i: &UserDataInput) -> serde_json::Value {
        let yaml = node_config(i);
        let v = serde_saphyr::from_str::<serde_json::Value>(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!((v["apiVersion"].as_str(), v["kind"].as_str()), (Some("node.eks.aws/v1alpha1"), Some("NodeConfig")));
        let fields = |at: &serde_json::Value, known: &[&str]| {
            for k in at.as_object().unwrap_or_else(|| panic!("not a mapping: {yaml}")).keys() {
                assert!(known.contains(&k.as_str()), "{k} is not a NodeConfig field: {yaml}");
            }
        };
        fields(&v, &["apiVersion", "kind", "spec"]);
        fields(&v["spec"], &["cluster", "kubelet", "containerd", "instance", "featureGates"]);
        fields(&v["spec"]["cluster"], &["name", "apiServerEndpoint", "certificateAuthority", "cidr", "enableOutpost", "id"]);
        fields(&v["spec"]["kubelet"], &["config", "flags"]);
        assert!(v["spec"]["kubelet"]["flags"].as_array().is_some_and(|f| f.iter().all(|x| x.is_string())), "{yaml}");
        if let Some(inst) = v["spec"].get("instance") {
            fields(inst, &["localStorage"]);
            assert_eq!(inst["localStorage"]["strategy"], "RAID0");
        }
        v
    }

    #[test]
    fn every_kubelet_field_lands_in_kubelet_config() {
        let labels = BTreeMap::new();
        let cluster = ClusterInfo { endpoint: "https://x".into(), ca_bundle: "Q0E=".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec!["10.100.0.10".into()] };
        let m = |kv: &[(&str, &str)]| Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        let k = KubeletConfiguration {
            max_pods: Some(50),
            pods_per_core: Some(4),
            kube_reserved: m(&[("cpu", "100m"), ("memory", "1Gi")]),
            system_reserved: m(&[("ephemeral-storage", "1Gi")]),
            eviction_hard: m(&[("memory.available", "5%")]),
            eviction_soft: m(&[("memory.available", "10%"), ("nodefs.available", "15%")]),
            eviction_soft_grace_period: m(&[("memory.available", "1m30s"), ("nodefs.available", "2m")]),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            cpu_cfs_quota: Some(false),
            cluster_dns: Some(vec!["169.254.20.10".into()]),
        };
        assert!(k.validate().is_empty(), "{:?}", k.validate());
        let mut i = input(&labels, &[], &cluster, None);
        i.kubelet = Some(&k);
        i.raid0 = true;
        let v = parsed(&i);
        assert_eq!(v["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
        assert_eq!(v["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        let c = &v["spec"]["kubelet"]["config"];
        assert_eq!(c["maxPods"], 29, "the per-type value the caller computed");
        assert_eq!(c["podsPerCore"], 4);
        assert_eq!(c["clusterDNS"], serde_json::json!(["169.254.20.10"]), "the NodeClass's wins over the default");
        assert_eq!(c["kubeReserved"], serde_json::json!({"cpu": "100m", "memory": "1Gi"}));
        assert_eq!(c["systemReserved"], serde_json::json!({"ephemeral-storage": "1Gi"}));
        assert_eq!(c["evictionHard"], serde_json::json!({"memory.available": "5%"}));
        assert_eq!(c["evictionSoft"], serde_json::json!({"memory.available": "10%", "nodefs.available": "15%"}));
        assert_eq!(c["evictionSoftGracePeriod"], serde_json::json!({"memory.available": "1m30s", "nodefs.available": "2m"}));
        assert_eq!(c["evictionMaxPodGracePeriod"], 60);
        assert_eq!(c["imageGCHighThresholdPercent"], 85);
        assert_eq!(c["imageGCLowThresholdPercent"], 80);
        assert_eq!(c["cpuCFSQuota"], false);
        // Every evictionSoft signal has its grace period in what kubelet reads.
        for key in c["evictionSoft"].as_object().unwrap().keys() {
            assert!(c["evictionSoftGracePeriod"].get(key).is_some(), "{key}");
        }
    }

    #[test]
    fn without_kubelet_settings_only_the_defaults_are_written() {
        let labels = BTreeMap::new();
        let cluster = ClusterInfo { service_cidr: Some("fd00::/108".into()), ..Default::default() };
        let v = parsed(&input(&labels, &[], &cluster, None));
        assert_eq!(v["spec"]["cluster"]["cidr"], "fd00::/108");
        let c = v["spec"]["kubelet"]["config"].as_object().unwrap();
        assert_eq!(c.keys().collect::<Vec<_>>(), vec!["maxPods"]);
    }
}
