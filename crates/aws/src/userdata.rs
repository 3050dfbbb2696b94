//! User data: the AL2023 nodeadm `NodeConfig` in a MIME multipart document, as Karpenter writes it
//! (`pkg/providers/amifamily/bootstrap/nodeadm.go`), and base64 for the launch template.
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
//! The taints always include `karpenter.sh/unregistered:NoExecute`, which the controller removes at
//! registration. Scalars are written as JSON strings and maps as JSON flow mappings (both valid YAML),
//! so no value needs YAML escaping rules.

use std::collections::BTreeMap;

use stowage_core::domain::taints::{Effect, Taint};
use stowage_input::api::ec2nodeclass::KubeletConfiguration;

pub(crate) const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
const BOUNDARY: &str = "//";

/// Cluster facts nodeadm needs to join (`AwsOptions::cluster`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClusterInfo {
    /// API server URL.
    pub endpoint: String,
    /// Base64 PEM of the cluster CA.
    pub ca_bundle: String,
    /// Service CIDR (`spec.cluster.cidr`).
    pub service_cidr: Option<String>,
    /// Default cluster DNS when the NodeClass's kubelet sets none.
    pub cluster_dns: Vec<String>,
}

pub struct NodeadmInput<'a> {
    pub cluster_name: &'a str,
    pub cluster: &'a ClusterInfo,
    pub max_pods: i64,
    pub kubelet: Option<&'a KubeletConfiguration>,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [Taint],
    pub raid0: bool,
    pub custom_user_data: Option<&'a str>,
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn flow_map(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

/// `key=value:Effect` (or `key:Effect`), kubelet's `--register-with-taints` syntax.
pub(crate) fn taint_arg(t: &Taint) -> String {
    if t.value.is_empty() { format!("{}:{}", t.key, t.effect.as_str()) } else { format!("{}={}:{}", t.key, t.value, t.effect.as_str()) }
}

/// The request's taints plus the unregistered taint, deduplicated and sorted.
pub(crate) fn registration_taints(taints: &[Taint]) -> Vec<Taint> {
    let mut v: Vec<Taint> = taints.to_vec();
    v.push(Taint::new(UNREGISTERED_TAINT, "", Effect::NoExecute));
    v.sort();
    v.dedup();
    v
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

pub(crate) fn node_config(i: &NodeadmInput) -> String {
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

/// Splits a user-supplied user data into MIME parts (each with its own headers). A document that is not
/// MIME becomes one part, typed as a NodeConfig if it looks like one, else as a shell script.
pub(crate) fn mime_parts(user_data: &str) -> Vec<String> {
    let text = user_data.replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Vec::new();
    }
    let is_mime = text.lines().take(5).any(|l| l.to_ascii_lowercase().starts_with("mime-version:"));
    if let (true, Some(boundary)) = (is_mime, mime_boundary(&text)) {
        let sep = format!("--{boundary}");
        let mut parts = Vec::new();
        // The preamble (headers of the whole document) comes before the first separator.
        for chunk in text.split(&sep).skip(1) {
            if chunk.starts_with("--") {
                break; // the closing delimiter
            }
            let p = chunk.trim_matches('\n');
            if !p.is_empty() {
                parts.push(p.to_string());
            }
        }
        return parts;
    }
    let content_type = if text.contains("kind: NodeConfig") { "application/node.eks.aws" } else { "text/x-shellscript; charset=\"us-ascii\"" };
    vec![format!("Content-Type: {content_type}\n\n{}", text.trim_end_matches('\n'))]
}

fn mime_boundary(text: &str) -> Option<String> {
    let header = text.lines().find(|l| l.to_ascii_lowercase().starts_with("content-type:") && l.contains("boundary="))?;
    let b = header.split("boundary=").nth(1)?.trim();
    let b = b.split(';').next()?.trim().trim_matches('"');
    (!b.is_empty()).then(|| b.to_string())
}

/// The AL2023 user data: the NodeClass's own parts first, then stowage's NodeConfig (nodeadm merges
/// NodeConfigs in order, so stowage's values win, as Karpenter's do).
pub fn al2023(i: &NodeadmInput) -> String {
    let mut parts = i.custom_user_data.map(mime_parts).unwrap_or_default();
    parts.push(format!("Content-Type: application/node.eks.aws\n\n{}", node_config(i).trim_end()));
    let mut s = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        s += &format!("--{BOUNDARY}\n{p}\n\n");
    }
    s += &format!("--{BOUNDARY}--\n");
    s
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (EC2 wants the launch template's user data base64-encoded).
pub(crate) fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(B64[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The inverse of [`base64_encode`] (tests read user data back from EC2); `None` on invalid input.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let val = |c: u8| B64.iter().position(|&x| x == c).map(|p| p as u32);
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for chunk in s.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for s in ["", "a", "ab", "abc", "abcd", "hello, world\n"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).unwrap(), s.as_bytes(), "{e}");
        }
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
        assert_eq!(base64_decode("bad"), None);
    }

    fn input<'a>(labels: &'a BTreeMap<String, String>, taints: &'a [Taint], cluster: &'a ClusterInfo, custom: Option<&'a str>) -> NodeadmInput<'a> {
        NodeadmInput { cluster_name: "demo", cluster, max_pods: 29, kubelet: None, labels, taints, raid0: false, custom_user_data: custom }
    }

    #[test]
    fn nodeconfig_has_max_pods_labels_and_the_unregistered_taint() {
        let labels: BTreeMap<String, String> = [("karpenter.sh/nodepool", "default"), ("team", "a b")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let taints = vec![Taint::new("dedicated", "gpu", Effect::NoSchedule)];
        let cluster = ClusterInfo { endpoint: "https://127.0.0.1:6443".into(), ca_bundle: "Q0E=".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec!["10.100.0.10".into()] };
        let ud = al2023(&input(&labels, &taints, &cluster, None));
        assert!(ud.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\n"), "{ud}");
        assert!(ud.contains("      maxPods: 29\n"), "{ud}");
        assert!(ud.contains("clusterDNS: [\"10.100.0.10\"]"), "{ud}");
        assert!(ud.contains("\"--node-labels=karpenter.sh/nodepool=default,team=a b\""), "{ud}");
        assert!(ud.contains("\"--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\""), "{ud}");
        assert!(ud.ends_with("\n--//--\n"), "{ud}");
    }

    /// The NodeConfig as YAML parses it (nodeadm reads it the same way).
    fn parsed(i: &NodeadmInput) -> serde_json::Value {
        serde_saphyr::from_str::<serde_json::Value>(&node_config(i)).unwrap_or_else(|e| panic!("{e}\n{}", node_config(i)))
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
        let v = parsed(&i);
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

    #[test]
    fn custom_user_data_parts_come_first() {
        let labels = BTreeMap::new();
        let cluster = ClusterInfo::default();
        let ud = al2023(&input(&labels, &[], &cluster, Some("#!/bin/bash\necho hi\n")));
        let shell = ud.find("text/x-shellscript").unwrap();
        let ours = ud.find("kind: NodeConfig").unwrap();
        assert!(shell < ours, "{ud}");
        let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: text/x-shellscript\n\necho one\n--BOUND\nContent-Type: text/x-shellscript\n\necho two\n--BOUND--\n";
        let parts = mime_parts(mime);
        assert_eq!(parts, vec!["Content-Type: text/x-shellscript\n\necho one", "Content-Type: text/x-shellscript\n\necho two"]);
    }
}
