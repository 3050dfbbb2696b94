//! Bottlerocket: TOML settings, as Karpenter writes them (`pkg/providers/amifamily/bootstrap/
//! bottlerocket.go`, `bottlerocketsettings.go`). The EC2NodeClass's `userData` is parsed as TOML; every
//! table and key in it is kept, except the keys below, which stowage sets (its values win, as
//! Karpenter's do):
//!
//! | key | value |
//! |---|---|
//! | `settings.kubernetes.cluster-name` | the cluster name |
//! | `settings.kubernetes.api-server` | the endpoint (when known) |
//! | `settings.kubernetes.cluster-certificate` | the CA bundle (when known) |
//! | `settings.kubernetes.cluster-dns-ip` | the cluster DNS address (a list when there are several) |
//! | `settings.kubernetes.max-pods` | maxPods of the instance type |
//! | `settings.kubernetes.node-labels` | the user's labels, stowage's merged over them |
//! | `settings.kubernetes.node-taints` | `key = ["value:Effect", ...]`, the request's taints and `karpenter.sh/unregistered` (replaces the user's) |
//! | `settings.kubernetes.kube-reserved`, `system-reserved`, `eviction-hard` | `kubelet.kubeReserved`, `.systemReserved`, `.evictionHard` |
//! | `settings.kubernetes.eviction-soft`, `eviction-soft-grace-period`, `eviction-max-pod-grace-period` | `kubelet.evictionSoft`, `.evictionSoftGracePeriod`, `.evictionMaxPodGracePeriod` (Karpenter drops these on Bottlerocket; Bottlerocket has the settings, so stowage writes them) |
//! | `settings.kubernetes.image-gc-high-threshold-percent`, `image-gc-low-threshold-percent` | `kubelet.imageGC{High,Low}ThresholdPercent`, as strings (Karpenter's form) |
//! | `settings.kubernetes.cpu-cfs-quota-enforced` | `kubelet.cpuCFSQuota` |
//! | `settings.bootstrap-commands.000-mount-instance-storage` | with `instanceStorePolicy: RAID0`: `apiclient ephemeral-storage init` and `bind` of containerd, kubelet and pod log directories, mode `always`, essential |
//!
//! `kubelet.podsPerCore` has no Bottlerocket setting (maxPods ignores it on Bottlerocket, as in
//! Karpenter).

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::{UserDataInput, registration_taints};

/// The EC2NodeClass's `userData` as a TOML table (empty without one). The error names the field.
pub fn parse_user_data(user_data: Option<&str>) -> Result<Table, String> {
    match user_data.filter(|u| !u.trim().is_empty()) {
        None => Ok(Table::new()),
        Some(u) => u.parse::<Table>().map_err(|e| format!("spec.userData is not valid TOML, which Bottlerocket requires: {}", e.message())),
    }
}

/// The sub-table at `key`, created (or replacing a non-table) when missing.
fn table<'a>(t: &'a mut Table, key: &str) -> &'a mut Table {
    let v = t.entry(key).or_insert_with(|| Value::Table(Table::new()));
    if !v.is_table() {
        *v = Value::Table(Table::new());
    }
    match v {
        Value::Table(t) => t,
        _ => unreachable!("just made a table"),
    }
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Table(m.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// The Bottlerocket user data (module docs).
pub fn user_data(i: &UserDataInput) -> Result<String, String> {
    let mut doc = parse_user_data(i.custom_user_data)?;
    let settings = table(&mut doc, "settings");
    let k8s = table(settings, "kubernetes");
    k8s.insert("cluster-name".into(), Value::String(i.cluster_name.to_string()));
    if !i.cluster.endpoint.is_empty() {
        k8s.insert("api-server".into(), Value::String(i.cluster.endpoint.clone()));
    }
    if !i.cluster.ca_bundle.is_empty() {
        k8s.insert("cluster-certificate".into(), Value::String(i.cluster.ca_bundle.clone()));
    }
    match i.cluster_dns().as_slice() {
        [] => {}
        [one] => _ = k8s.insert("cluster-dns-ip".into(), Value::String(one.clone())),
        many => _ = k8s.insert("cluster-dns-ip".into(), Value::Array(many.iter().cloned().map(Value::String).collect())),
    }
    k8s.insert("max-pods".into(), Value::Integer(i.max_pods));
    let labels = table(k8s, "node-labels");
    for (k, v) in i.labels {
        labels.insert(k.clone(), Value::String(v.clone()));
    }
    let mut taints: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for t in registration_taints(i.taints) {
        taints.entry(t.key.clone()).or_default().push(Value::String(format!("{}:{}", t.value, t.effect.as_str())));
    }
    k8s.insert("node-taints".into(), Value::Table(taints.into_iter().map(|(k, v)| (k, Value::Array(v))).collect()));
    if let Some(k) = i.kubelet {
        for (key, m) in [
            ("kube-reserved", &k.kube_reserved),
            ("system-reserved", &k.system_reserved),
            ("eviction-hard", &k.eviction_hard),
            ("eviction-soft", &k.eviction_soft),
            ("eviction-soft-grace-period", &k.eviction_soft_grace_period),
        ] {
            if let Some(m) = m.as_ref().filter(|m| !m.is_empty()) {
                k8s.insert(key.into(), string_map(m));
            }
        }
        if let Some(v) = k.eviction_max_pod_grace_period {
            k8s.insert("eviction-max-pod-grace-period".into(), Value::Integer(v.into()));
        }
        for (key, v) in [("image-gc-high-threshold-percent", k.image_gc_high_threshold_percent), ("image-gc-low-threshold-percent", k.image_gc_low_threshold_percent)] {
            if let Some(v) = v {
                k8s.insert(key.into(), Value::String(v.to_string()));
            }
        }
        if let Some(v) = k.cpu_cfs_quota {
            k8s.insert("cpu-cfs-quota-enforced".into(), Value::Boolean(v));
        }
    }
    if i.raid0 {
        let commands = |v: &[&str]| Value::Array(v.iter().map(|s| Value::String(s.to_string())).collect());
        let mut cmd = Table::new();
        cmd.insert(
            "commands".into(),
            Value::Array(vec![
                commands(&["apiclient", "ephemeral-storage", "init"]),
                commands(&["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]),
            ]),
        );
        cmd.insert("mode".into(), Value::String("always".into()));
        cmd.insert("essential".into(), Value::Boolean(true));
        table(settings, "bootstrap-commands").insert("000-mount-instance-storage".into(), Value::Table(cmd));
    }
    toml::to_string(&doc).map_err(|e| format!("writing the Bottlerocket user data: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::ClusterInfo;
    use stowage_core::domain::taints::{Effect, Taint};
    use stowage_input::api::ec2nodeclass::KubeletConfiguration;

    /// The `settings.kubernetes` keys Bottlerocket knows (its settings model, as Karpenter's
    /// `BottlerocketKubernetes` lists them); anything else would be refused at boot.
    const BOTTLEROCKET_KUBERNETES_KEYS: &[&str] = &[
        "api-server",
        "cloud-provider",
        "cluster-certificate",
        "cluster-name",
        "cluster-dns-ip",
        "credential-providers",
        "node-labels",
        "node-taints",
        "max-pods",
        "static-pods",
        "eviction-hard",
        "eviction-soft",
        "eviction-soft-grace-period",
        "eviction-max-pod-grace-period",
        "kube-reserved",
        "system-reserved",
        "allowed-unsafe-sysctls",
        "server-tls-bootstrap",
        "registry-qps",
        "registry-burst",
        "event-qps",
        "event-burst",
        "kube-api-qps",
        "kube-api-burst",
        "container-log-max-size",
        "container-log-max-files",
        "cpu-manager-policy",
        "cpu-manager-reconcile-period",
        "topology-manager-scope",
        "topology-manager-policy",
        "image-gc-high-threshold-percent",
        "image-gc-low-threshold-percent",
        "cpu-cfs-quota-enforced",
        "shutdown-grace-period",
        "shutdown-grace-period-for-critical-pods",
        "cluster-domain",
        "seccomp-default",
        "pod-pids-limit",
        "device-ownership-from-security-context",
        "single-process-oom-kill",
        "container-log-max-workers",
        "container-log-monitor-interval",
    ];

    fn parse(s: &str) -> Table {
        s.parse::<Table>().unwrap_or_else(|e| panic!("{e}\n{s}"))
    }

    #[test]
    fn settings_merge_with_the_users_and_stowages_keys_win() {
        let labels: BTreeMap<String, String> = [("karpenter.sh/nodepool", "default"), ("team", "web")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let taints = vec![Taint::new("dedicated", "gpu", Effect::NoSchedule), Taint::new("dedicated", "gpu", Effect::NoExecute)];
        let cluster = ClusterInfo { endpoint: "https://ABC.eks.amazonaws.com".into(), ca_bundle: "Q0E=".into(), service_cidr: Some("172.20.0.0/16".into()), cluster_dns: vec![] };
        let m = |kv: &[(&str, &str)]| Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        let k = KubeletConfiguration {
            kube_reserved: m(&[("cpu", "100m")]),
            system_reserved: m(&[("memory", "100Mi")]),
            eviction_hard: m(&[("memory.available", "5%")]),
            eviction_soft: m(&[("memory.available", "10%")]),
            eviction_soft_grace_period: m(&[("memory.available", "1m30s")]),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(80),
            cpu_cfs_quota: Some(false),
            pods_per_core: Some(4),
            ..Default::default()
        };
        let user = r#"
[settings.kubernetes]
cluster-name = "someone-else"
max-pods = 7
node-labels = { "team" = "theirs", "extra" = "kept" }
node-taints = { "theirs" = ["x:NoSchedule"] }
[settings.host-containers.admin]
enabled = true
"#;
        let i = UserDataInput { cluster_name: "demo", cluster: &cluster, max_pods: 58, kubelet: Some(&k), labels: &labels, taints: &taints, raid0: true, custom_user_data: Some(user) };
        let out = parse(&user_data(&i).unwrap());
        let s = out["settings"].as_table().unwrap();
        assert_eq!(s["host-containers"]["admin"]["enabled"].as_bool(), Some(true), "the user's other settings stay");
        let k8s = s["kubernetes"].as_table().unwrap();
        for key in k8s.keys() {
            assert!(BOTTLEROCKET_KUBERNETES_KEYS.contains(&key.as_str()), "settings.kubernetes.{key} is not a Bottlerocket setting");
        }
        assert_eq!(k8s["cluster-name"].as_str(), Some("demo"));
        assert_eq!(k8s["api-server"].as_str(), Some("https://ABC.eks.amazonaws.com"));
        assert_eq!(k8s["cluster-certificate"].as_str(), Some("Q0E="));
        assert_eq!(k8s["cluster-dns-ip"].as_str(), Some("172.20.0.10"));
        assert_eq!(k8s["max-pods"].as_integer(), Some(58));
        let node_labels = k8s["node-labels"].as_table().unwrap();
        assert_eq!((node_labels["team"].as_str(), node_labels["extra"].as_str(), node_labels["karpenter.sh/nodepool"].as_str()), (Some("web"), Some("kept"), Some("default")));
        let node_taints = k8s["node-taints"].as_table().unwrap();
        assert_eq!(node_taints.keys().collect::<Vec<_>>(), vec!["dedicated", "karpenter.sh/unregistered"], "the user's taints are replaced");
        assert_eq!(node_taints["dedicated"], Value::Array(vec![Value::String("gpu:NoSchedule".into()), Value::String("gpu:NoExecute".into())]));
        assert_eq!(node_taints["karpenter.sh/unregistered"], Value::Array(vec![Value::String(":NoExecute".into())]));
        assert_eq!(k8s["kube-reserved"]["cpu"].as_str(), Some("100m"));
        assert_eq!(k8s["system-reserved"]["memory"].as_str(), Some("100Mi"));
        assert_eq!(k8s["eviction-hard"]["memory.available"].as_str(), Some("5%"));
        assert_eq!(k8s["eviction-soft"]["memory.available"].as_str(), Some("10%"));
        assert_eq!(k8s["eviction-soft-grace-period"]["memory.available"].as_str(), Some("1m30s"));
        assert_eq!(k8s["eviction-max-pod-grace-period"].as_integer(), Some(60));
        assert_eq!((k8s["image-gc-high-threshold-percent"].as_str(), k8s["image-gc-low-threshold-percent"].as_str()), (Some("85"), Some("80")));
        assert_eq!(k8s["cpu-cfs-quota-enforced"].as_bool(), Some(false));
        let raid = &s["bootstrap-commands"]["000-mount-instance-storage"];
        assert_eq!((raid["mode"].as_str(), raid["essential"].as_bool()), (Some("always"), Some(true)));
        assert_eq!(raid["commands"][0], Value::Array(["apiclient", "ephemeral-storage", "init"].iter().map(|s| Value::String(s.to_string())).collect()));
    }

    #[test]
    fn minimal_settings_and_bad_user_data() {
        let labels = BTreeMap::new();
        let cluster = ClusterInfo { cluster_dns: vec!["10.0.0.10".into(), "10.0.0.11".into()], ..Default::default() };
        let i = UserDataInput { cluster_name: "demo", cluster: &cluster, max_pods: 110, kubelet: None, labels: &labels, taints: &[], raid0: false, custom_user_data: None };
        let out = parse(&user_data(&i).unwrap());
        let k8s = out["settings"]["kubernetes"].as_table().unwrap();
        assert_eq!(k8s.keys().collect::<Vec<_>>(), vec!["cluster-dns-ip", "cluster-name", "max-pods", "node-labels", "node-taints"]);
        assert_eq!(k8s["cluster-dns-ip"], Value::Array(vec![Value::String("10.0.0.10".into()), Value::String("10.0.0.11".into())]));
        assert!(out["settings"].get("bootstrap-commands").is_none());
        let e = parse_user_data(Some("[settings.kubernetes\nx = 1")).unwrap_err();
        assert!(e.contains("spec.userData is not valid TOML"), "{e}");
        let i = UserDataInput { custom_user_data: Some("not = toml = at all"), ..i };
        assert!(user_data(&i).unwrap_err().contains("spec.userData"));
    }
}
