//! User data, one module per AMI family ([`super::amifamily::Family`]), as Karpenter writes it
//! (`pkg/providers/amifamily/bootstrap/`), and base64 for the launch template:
//!
//! | family | module | format |
//! |---|---|---|
//! | AL2023 | [`nodeadm`] | MIME multipart: the NodeClass's parts, then a nodeadm `NodeConfig` |
//! | AL2 | [`eks_bootstrap`] | MIME multipart: the NodeClass's parts, then a shell script calling `/etc/eks/bootstrap.sh` |
//! | Bottlerocket | [`bottlerocket`] | TOML: the NodeClass's settings with stowage's `settings.kubernetes` keys merged in |
//! | Custom | here | `spec.userData` verbatim |
//!
//! Every family registers the node with the request's taints plus `karpenter.sh/unregistered:NoExecute`
//! (the controller removes it at registration), the kubelet-settable labels, the per-type maxPods and
//! the EC2NodeClass's kubelet settings.

pub mod bottlerocket;
pub mod eks_bootstrap;
pub mod nodeadm;

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine;

use super::amifamily::Family;
use stowage_core::domain::taints::{Effect, Taint};
use stowage_input::api::ec2nodeclass::KubeletConfiguration;

pub(crate) const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
/// The MIME boundary of the documents stowage writes (Karpenter's).
const BOUNDARY: &str = "//";

/// Cluster facts nodes need to join (`AwsOptions::cluster`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClusterInfo {
    /// API server URL.
    pub endpoint: String,
    /// Base64 PEM of the cluster CA.
    pub ca_bundle: String,
    /// Service CIDR (nodeadm's `spec.cluster.cidr`; the default cluster DNS address is derived from it).
    pub service_cidr: Option<String>,
    /// Default cluster DNS when the NodeClass's kubelet sets none.
    pub cluster_dns: Vec<String>,
}

/// What every family's user data is made of.
pub struct UserDataInput<'a> {
    pub cluster_name: &'a str,
    pub cluster: &'a ClusterInfo,
    /// Per instance type ([`stowage_core::catalog::aws::max_pods`]).
    pub max_pods: i64,
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// Labels kubelet may set on itself (the caller filters them).
    pub labels: &'a BTreeMap<String, String>,
    /// The request's taints (the unregistered taint is added here).
    pub taints: &'a [Taint],
    /// `instanceStorePolicy: RAID0`.
    pub raid0: bool,
    /// `spec.userData`.
    pub custom_user_data: Option<&'a str>,
}

impl UserDataInput<'_> {
    /// The cluster DNS addresses kubelet gets: the NodeClass's `kubelet.clusterDNS`, else the
    /// configured default, else the service CIDR's tenth address (where EKS puts kube-dns:
    /// `10.100.0.10` for `10.100.0.0/16`, `fd00::a` for `fd00::/108`).
    pub fn cluster_dns(&self) -> Vec<String> {
        if let Some(d) = self.kubelet.and_then(|k| k.cluster_dns.clone()).filter(|d| !d.is_empty()) {
            return d;
        }
        if !self.cluster.cluster_dns.is_empty() {
            return self.cluster.cluster_dns.clone();
        }
        self.cluster.service_cidr.as_deref().and_then(tenth_address).into_iter().collect()
    }
}

/// The tenth address of a CIDR (`10.100.0.0/16` → `10.100.0.10`), kube-dns's address on EKS.
pub(crate) fn tenth_address(cidr: &str) -> Option<String> {
    let (addr, _) = cidr.trim().split_once('/')?;
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => Some(std::net::Ipv4Addr::from(u32::from(a).checked_add(10)?).to_string()),
        IpAddr::V6(a) => Some(std::net::Ipv6Addr::from(u128::from(a).checked_add(10)?).to_string()),
    }
}

/// The user data of `family` (Custom: `spec.userData` as is). Errors name the field at fault.
pub fn for_family(family: Family, i: &UserDataInput) -> Result<String, String> {
    match family {
        Family::Al2023 => Ok(nodeadm::user_data(i)),
        Family::Al2 => Ok(eks_bootstrap::user_data(i)),
        Family::Bottlerocket => bottlerocket::user_data(i),
        // Karpenter does not template Custom user data either.
        Family::Custom => Ok(i.custom_user_data.unwrap_or_default().to_string()),
    }
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

/// A MIME multipart document: the NodeClass's own parts first, then stowage's `part` (its
/// bootstrapper runs last, so its values win, as Karpenter's do).
pub(crate) fn multipart(custom_user_data: Option<&str>, part: String) -> String {
    let mut parts = custom_user_data.map(mime_parts).unwrap_or_default();
    parts.push(part);
    let mut s = format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        s += &format!("--{BOUNDARY}\n{p}\n\n");
    }
    s += &format!("--{BOUNDARY}--\n");
    s
}

/// Standard base64 with padding (EC2 wants the launch template's user data base64-encoded).
pub(crate) fn base64_encode(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The inverse of [`base64_encode`] (tests read user data back from EC2); `None` on invalid input.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(s).ok()
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

    #[test]
    fn custom_user_data_parts_come_first() {
        let ud = multipart(Some("#!/bin/bash\necho hi\n"), "Content-Type: text/x-ours\n\nours".into());
        let shell = ud.find("text/x-shellscript").unwrap();
        let ours = ud.find("text/x-ours").unwrap();
        assert!(shell < ours, "{ud}");
        let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: text/x-shellscript\n\necho one\n--BOUND\nContent-Type: text/x-shellscript\n\necho two\n--BOUND--\n";
        let parts = mime_parts(mime);
        assert_eq!(parts, vec!["Content-Type: text/x-shellscript\n\necho one", "Content-Type: text/x-shellscript\n\necho two"]);
    }

    #[test]
    fn cluster_dns_defaults_to_the_service_cidrs_tenth_address() {
        assert_eq!(tenth_address("10.100.0.0/16").as_deref(), Some("10.100.0.10"));
        assert_eq!(tenth_address("172.20.0.0/16").as_deref(), Some("172.20.0.10"));
        assert_eq!(tenth_address("fd00:10:96::/108").as_deref(), Some("fd00:10:96::a"));
        assert_eq!(tenth_address("nonsense"), None);
        let labels = BTreeMap::new();
        let derived = ClusterInfo { service_cidr: Some("10.100.0.0/16".into()), ..Default::default() };
        let i = UserDataInput { cluster_name: "demo", cluster: &derived, max_pods: 29, kubelet: None, labels: &labels, taints: &[], raid0: false, custom_user_data: None };
        assert_eq!(i.cluster_dns(), vec!["10.100.0.10"]);
        let configured = ClusterInfo { cluster_dns: vec!["169.254.20.10".into()], ..derived.clone() };
        let i = UserDataInput { cluster: &configured, ..i };
        assert_eq!(i.cluster_dns(), vec!["169.254.20.10"], "the configured default wins over the derived one");
        let k = KubeletConfiguration { cluster_dns: Some(vec!["10.0.0.53".into()]), ..Default::default() };
        let i = UserDataInput { kubelet: Some(&k), ..i };
        assert_eq!(i.cluster_dns(), vec!["10.0.0.53"], "the NodeClass's wins over both");
    }
}
