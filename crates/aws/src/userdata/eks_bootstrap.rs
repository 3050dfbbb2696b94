//! AL2: the EKS-optimized AMI's `/etc/eks/bootstrap.sh`, called from a shell script in a MIME multipart
//! document, as Karpenter writes it (`pkg/providers/amifamily/bootstrap/eksbootstrap.go`, the kubelet
//! arguments from `bootstrap.go`).
//!
//! ```text
//! MIME-Version: 1.0
//! Content-Type: multipart/mixed; boundary="//"
//!
//! --//                                   <- the EC2NodeClass's own spec.userData parts, if any, first
//! Content-Type: text/x-shellscript; charset="us-ascii"
//!
//! #!/bin/bash -xe
//! exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
//! /etc/eks/bootstrap.sh '<cluster>' --apiserver-endpoint '<endpoint>' --b64-cluster-ca '<ca>' \
//! --ip-family ipv6 \                      <- when the cluster DNS address is IPv6
//! --dns-cluster-ip '<first cluster DNS address>' \
//! --use-max-pods false \
//! --kubelet-extra-args '--node-labels="k=v,..." --register-with-taints="k=v:Effect,..." --max-pods=N
//!     [--pods-per-core=N] [--system-reserved="cpu=..,memory=.."] [--kube-reserved=".."]
//!     [--eviction-hard="memory.available<5%,.."] [--eviction-soft=".."] [--eviction-soft-grace-period="memory.available=1m30s,.."]
//!     [--eviction-max-pod-grace-period=N] [--image-gc-high-threshold=N] [--image-gc-low-threshold=N] [--cpu-cfs-quota=BOOL]' \
//! --local-disks raid0                     <- with instanceStorePolicy RAID0
//! --//--
//! ```
//!
//! bootstrap.sh is told not to compute maxPods (`--use-max-pods false`) and kubelet gets stowage's,
//! computed per instance type, through `--max-pods`. Flag values are bootstrap.sh's: its own flags
//! take a separate argument (never `--flag=value`, which its parser does not read). Everything inside
//! single quotes is escaped for the shell.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{UserDataInput, multipart, registration_taints, taint_arg};

/// `s` inside single quotes, for bash (`'` becomes `'\''`).
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `--name="k<sep>v,k<sep>v"` (Karpenter's `joinParameterArgs`), or nothing for an empty map.
fn joined(name: &str, m: Option<&BTreeMap<String, String>>, sep: &str) -> Option<String> {
    let m = m.filter(|m| !m.is_empty())?;
    let items: Vec<String> = m.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect();
    Some(format!("{name}={}", dq(&items.join(","))))
}

/// A double-quoted value as Go's `%q` writes the ASCII strings these are.
fn dq(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// kubelet's flags, in Karpenter's order.
pub(crate) fn kubelet_extra_args(i: &UserDataInput) -> Vec<String> {
    let mut args = Vec::new();
    if !i.labels.is_empty() {
        let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        args.push(format!("--node-labels={}", dq(&labels.join(","))));
    }
    let taints: Vec<String> = registration_taints(i.taints).iter().map(taint_arg).collect();
    args.push(format!("--register-with-taints={}", dq(&taints.join(","))));
    args.push(format!("--max-pods={}", i.max_pods));
    let Some(k) = i.kubelet else { return args };
    if let Some(p) = k.pods_per_core {
        args.push(format!("--pods-per-core={p}"));
    }
    args.extend(joined("--system-reserved", k.system_reserved.as_ref(), "="));
    args.extend(joined("--kube-reserved", k.kube_reserved.as_ref(), "="));
    args.extend(joined("--eviction-hard", k.eviction_hard.as_ref(), "<"));
    args.extend(joined("--eviction-soft", k.eviction_soft.as_ref(), "<"));
    args.extend(joined("--eviction-soft-grace-period", k.eviction_soft_grace_period.as_ref(), "="));
    if let Some(v) = k.eviction_max_pod_grace_period {
        args.push(format!("--eviction-max-pod-grace-period={v}"));
    }
    if let Some(v) = k.image_gc_high_threshold_percent {
        args.push(format!("--image-gc-high-threshold={v}"));
    }
    if let Some(v) = k.image_gc_low_threshold_percent {
        args.push(format!("--image-gc-low-threshold={v}"));
    }
    if let Some(v) = k.cpu_cfs_quota {
        args.push(format!("--cpu-cfs-quota={v}"));
    }
    args
}

/// The shell script (module docs).
pub(crate) fn script(i: &UserDataInput) -> String {
    let mut s = String::from("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    s += &format!("/etc/eks/bootstrap.sh {} --apiserver-endpoint {}", sq(i.cluster_name), sq(&i.cluster.endpoint));
    if !i.cluster.ca_bundle.is_empty() {
        s += &format!(" --b64-cluster-ca {}", sq(&i.cluster.ca_bundle));
    }
    let dns = i.cluster_dns();
    if let Some(first) = dns.first() {
        if first.parse::<IpAddr>().is_ok_and(|a| a.is_ipv6()) {
            s += " \\\n--ip-family ipv6";
        }
        s += &format!(" \\\n--dns-cluster-ip {}", sq(first));
    }
    s += " \\\n--use-max-pods false";
    s += &format!(" \\\n--kubelet-extra-args {}", sq(&kubelet_extra_args(i).join(" ")));
    if i.raid0 {
        s += " \\\n--local-disks raid0";
    }
    s
}

/// The AL2 user data: the NodeClass's own parts first, then the bootstrap script.
pub fn user_data(i: &UserDataInput) -> String {
    multipart(i.custom_user_data, format!("Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{}", script(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::ClusterInfo;
    use stowage_core::domain::taints::{Effect, Taint};
    use stowage_input::api::ec2nodeclass::KubeletConfiguration;

    /// The bootstrap.sh command line split as bash would (single quotes, backslash-newline), then
    /// read the way bootstrap.sh's `while [[ $# -gt 0 ]]` loop reads it: `--flag value` pairs.
    fn bootstrap_args(script: &str) -> (String, BTreeMap<String, String>) {
        let line = script.lines().skip(2).collect::<Vec<_>>().join("\n").replace(" \\\n", " ");
        let mut words = Vec::new();
        let (mut cur, mut quoted, mut in_word) = (String::new(), false, false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    in_word = true;
                }
                '\\' if !quoted => {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                ' ' | '\n' if !quoted => {
                    if in_word {
                        words.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                c => {
                    cur.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            words.push(cur);
        }
        assert_eq!(words[0], "/etc/eks/bootstrap.sh", "{words:?}");
        let cluster = words[1].clone();
        let mut flags = BTreeMap::new();
        let mut it = words[2..].iter();
        while let Some(f) = it.next() {
            assert!(f.starts_with("--") && !f.contains('='), "bootstrap.sh reads --flag value pairs: {f}");
            let v = it.next().unwrap_or_else(|| panic!("{f} has no value"));
            flags.insert(f.clone(), v.clone());
        }
        (cluster, flags)
    }

    fn input<'a>(labels: &'a BTreeMap<String, String>, taints: &'a [Taint], cluster: &'a ClusterInfo, kubelet: Option<&'a KubeletConfiguration>) -> UserDataInput<'a> {
        UserDataInput { cluster_name: "demo", cluster, max_pods: 29, kubelet, labels, taints, raid0: false, custom_user_data: Some("#!/bin/bash\necho mine\n") }
    }

    #[test]
    fn the_script_calls_bootstrap_sh_with_the_cluster_and_kubelet_flags() {
        let labels: BTreeMap<String, String> = [("karpenter.sh/nodepool", "default"), ("team", "web")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let taints = vec![Taint::new("dedicated", "gpu", Effect::NoSchedule)];
        let cluster = ClusterInfo { endpoint: "https://ABC.eks.amazonaws.com".into(), ca_bundle: "Q0E=".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec![] };
        let m = |kv: &[(&str, &str)]| Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        let k = KubeletConfiguration {
            pods_per_core: Some(4),
            kube_reserved: m(&[("cpu", "100m"), ("memory", "1Gi")]),
            eviction_hard: m(&[("memory.available", "5%")]),
            eviction_soft: m(&[("memory.available", "10%")]),
            eviction_soft_grace_period: m(&[("memory.available", "1m30s")]),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            cpu_cfs_quota: Some(false),
            ..Default::default()
        };
        let ud = user_data(&input(&labels, &taints, &cluster, Some(&k)));
        let mine = ud.find("echo mine").unwrap();
        let ours = ud.find("/etc/eks/bootstrap.sh").unwrap();
        assert!(mine < ours, "the NodeClass's part runs first: {ud}");
        assert!(ud.contains("--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash -xe\n"), "{ud}");
        let (name, flags) = bootstrap_args(&script(&input(&labels, &taints, &cluster, Some(&k))));
        assert_eq!(name, "demo");
        assert_eq!(flags["--apiserver-endpoint"], "https://ABC.eks.amazonaws.com");
        assert_eq!(flags["--b64-cluster-ca"], "Q0E=");
        assert_eq!(flags["--dns-cluster-ip"], "10.100.0.10", "the service CIDR's kube-dns address");
        assert_eq!(flags["--use-max-pods"], "false");
        assert!(!flags.contains_key("--ip-family") && !flags.contains_key("--local-disks"), "{flags:?}");
        let extra: Vec<&str> = flags["--kubelet-extra-args"].split(' ').collect();
        assert_eq!(
            extra,
            vec![
                "--node-labels=\"karpenter.sh/nodepool=default,team=web\"",
                "--register-with-taints=\"dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\"",
                "--max-pods=29",
                "--pods-per-core=4",
                "--kube-reserved=\"cpu=100m,memory=1Gi\"",
                "--eviction-hard=\"memory.available<5%\"",
                "--eviction-soft=\"memory.available<10%\"",
                "--eviction-soft-grace-period=\"memory.available=1m30s\"",
                "--eviction-max-pod-grace-period=60",
                "--image-gc-high-threshold=85",
                "--image-gc-low-threshold=80",
                "--cpu-cfs-quota=false",
            ]
        );
    }

    #[test]
    fn ipv6_raid0_and_quotes() {
        let labels = BTreeMap::new();
        let cluster = ClusterInfo { endpoint: "https://x".into(), ca_bundle: String::new(), service_cidr: Some("fd00:10:96::/108".into()), cluster_dns: vec![] };
        let mut i = input(&labels, &[], &cluster, None);
        i.raid0 = true;
        i.cluster_name = "it's";
        let (name, flags) = bootstrap_args(&script(&i));
        assert_eq!(name, "it's", "a quote survives the shell");
        assert_eq!((flags["--ip-family"].as_str(), flags["--dns-cluster-ip"].as_str(), flags["--local-disks"].as_str()), ("ipv6", "fd00:10:96::a", "raid0"));
        assert!(!flags.contains_key("--b64-cluster-ca"));
        assert_eq!(flags["--kubelet-extra-args"], "--register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=29");
    }
}
