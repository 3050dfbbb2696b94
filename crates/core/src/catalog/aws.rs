//! Karpenter's AWS formulas for capacity and overhead (../shared/docs/aws.md §2, from
//! aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`).
//!
//! ```text
//! memory capacity   = (MiB − 64 on arm64) − ceil(that × VM_MEMORY_OVERHEAD_PERCENT 0.075)
//! max pods          = kubelet.maxPods, else ENI-limited enis_card0 × (ipv4PerEni − 1) + 2
//!                     (AL2, AL2023, Bottlerocket, Custom; Windows 110), capped by podsPerCore × vCPU
//!                     (not on Bottlerocket)
//! kube-reserved cpu = 6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % above,
//!                     each band truncated to whole millicores
//! kube-reserved mem = 11 × pods + 255 MiB (pods: ENI-limited count for AL2/AL2023/Custom, effective
//!                     maxPods for Bottlerocket and Windows)
//! kube-reserved eph = 1Gi
//! eviction          = memory 100Mi; nodefs ceil(10 % of ephemeral capacity)
//! ephemeral         = root volume (20Gi), or the NVMe instance store with instanceStorePolicy RAID0
//! allocatable       = capacity − kube-reserved − system-reserved − eviction
//! ```
//!
//! Any kubelet `kubeReserved` key replaces its default; `systemReserved` is empty unless set; an
//! `evictionHard` percentage is taken of capacity, "100%" meaning no threshold.
//!
//! The EBS CSI driver's attach limit per type ([`ebs_attach_limit`]) is the driver's rule, not
//! Karpenter's: Karpenter does not model attach limits on the nodes it launches.

use crate::domain::catalog::AwsFacts;
use crate::domain::nodepool::{EvictionValue, KubeletSettings};
use crate::domain::resources::Resources;

pub(crate) const VM_MEMORY_OVERHEAD: f64 = 0.075;
pub(crate) const DEFAULT_ROOT_VOLUME: i64 = 20 << 30;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// AMI families by how they size pods.
fn eni_limited_overhead(family: &str) -> bool {
    matches!(family, "AL2" | "AL2023" | "Custom")
}

fn is_windows(family: &str) -> bool {
    family.starts_with("Windows")
}

/// ENI-limited pods (reserved ENIs 0).
pub(crate) fn eni_limited_pods(f: &AwsFacts) -> Option<i64> {
    match (f.enis_default_card, f.ipv4_per_eni) {
        (Some(e), Some(ip)) if e > 0 => Some(e * (ip - 1) + 2),
        (Some(_), Some(_)) => Some(0),
        _ => None,
    }
}

/// The effective maxPods.
pub fn max_pods(f: &AwsFacts, family: &str, k: &KubeletSettings) -> i64 {
    let mut pods = if let Some(m) = k.max_pods {
        m
    } else if is_windows(family) {
        110
    } else {
        eni_limited_pods(f).unwrap_or(110)
    };
    if family != "Bottlerocket"
        && let Some(ppc) = k.pods_per_core.filter(|&p| p > 0)
    {
        pods = pods.min(ppc * f.vcpu);
    }
    pods
}

pub fn kube_reserved_cpu_m(vcpu: i64) -> i64 {
    let cpu = vcpu * 1000;
    let bands: [(i64, i64, f64); 4] = [(0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025)];
    bands
        .iter()
        .filter(|(start, _, _)| cpu >= *start)
        .map(|(start, end, pct)| {
            let r = if cpu < *end { cpu - start } else { end - start };
            (r as f64 * pct) as i64
        })
        .sum()
}

pub(crate) fn memory_capacity_mib(f: &AwsFacts) -> i64 {
    let m = f.memory_mib - if f.arch == "arm64" { 64 } else { 0 };
    m - (m as f64 * VM_MEMORY_OVERHEAD).ceil() as i64
}

/// Capacity of the type under an EC2NodeClass (family, kubelet settings, root volume, instance store).
pub fn capacity(f: &AwsFacts, family: &str, k: &KubeletSettings, root_volume: Option<i64>, raid0: bool, extended: &Resources) -> Resources {
    let ephemeral = if raid0 && f.local_nvme_gb > 0 { f.local_nvme_gb * 1_000_000_000 } else { root_volume.unwrap_or(DEFAULT_ROOT_VOLUME) };
    let mut r = Resources::new(f.vcpu * 1000, memory_capacity_mib(f) * MIB, ephemeral, max_pods(f, family, k));
    for (n, v) in extended.extended() {
        r.set(n, *v);
    }
    r
}

/// kube-reserved + system-reserved + eviction threshold.
pub fn overhead(f: &AwsFacts, family: &str, k: &KubeletSettings, capacity: &Resources) -> Resources {
    let pods_for_memory = if eni_limited_overhead(family) { eni_limited_pods(f).unwrap_or(capacity.pods) } else { capacity.pods };
    let mut kube = Resources::new(kube_reserved_cpu_m(f.vcpu), (11 * pods_for_memory + 255) * MIB, GIB, 0);
    if let Some(kr) = &k.kube_reserved {
        for (n, v) in kr.iter() {
            kube.set(n, v);
        }
    }
    let mut total = kube;
    if let Some(sr) = &k.system_reserved {
        total.add(sr);
    }
    let mut mem_ev = 100 * MIB;
    let mut eph_ev = (capacity.ephemeral as f64 * 0.10).ceil() as i64;
    for (signal, v) in &k.eviction_hard {
        let cap = match signal.as_str() {
            "memory.available" => capacity.memory,
            "nodefs.available" => capacity.ephemeral,
            _ => continue,
        };
        let amount = match v {
            EvictionValue::Absolute(a) => *a,
            EvictionValue::Percent(p) if *p >= 100.0 => 0,
            EvictionValue::Percent(p) => (cap as f64 * p / 100.0).ceil() as i64,
        };
        if signal == "memory.available" {
            mem_ev = amount;
        } else {
            eph_ev = amount;
        }
    }
    total.memory += mem_ev;
    total.ephemeral += eph_ev;
    total
}

/// The EBS CSI driver's name: the key of the attach limit every AWS instance type gets.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// The EBS attach limit the EBS CSI driver reports in a new node's CSINode (kubernetes-sigs/
/// aws-ebs-csi-driver `pkg/driver/node.go` `getVolumesLimit` with the tables of
/// `pkg/cloud/volume_limits.go`, commit 09f742f7), for a node booted with `extra_ebs` EBS volumes
/// besides the root volume (the NodeClass's other blockDeviceMappings) and one ENI:
///
/// ```text
/// nitro      = family ∉ {t2 c3 m3 r3 c4 m4 r4 x1e x1 p2 p3 g3 d2 h1}      (Xen types)
/// available  = 28 if nitro else 39
/// available  = min(available, max_ebs(type))       if the type has one (d3.8xlarge 3, ..., *.metal 31,
///                                                    u-*.metal 19, u-* 27)
/// available  = dedicated(type)                      if the type has a dedicated EBS limit (m7i, c7i, ...:
///                                                    32 up to 12xlarge, 48, 64, 88, 128 by size)
///            = available − ENIs − nvme(type)         else if nitro (attachments shared with ENIs and
///                                                    NVMe instance-store devices)
/// limit      = max(1, available − (extra_ebs + 1))  (the root volume and the other block devices)
/// ```
///
/// ENIs is 1: the driver counts the ENIs attached when it starts, before the VPC CNI attaches more;
/// a node whose CNI attached a second ENI first reports one less (docs/formats.md, Catalog).
pub fn ebs_attach_limit(instance_type: &str, extra_ebs: i64) -> i64 {
    const ENIS: i64 = 1;
    let (family, size) = instance_type.split_once('.').unwrap_or((instance_type, ""));
    let nitro = !matches!(family, "t2" | "c3" | "m3" | "r3" | "c4" | "m4" | "r4" | "x1e" | "x1" | "p2" | "p3" | "g3" | "d2" | "h1");
    let mut available: i64 = if nitro { 28 } else { 39 };
    if let Some(max) = max_ebs(family, size) {
        available = available.min(max);
    }
    if let Some(d) = dedicated_ebs(family, size) {
        available = d;
    } else if nitro {
        available -= ENIS + nvme_instance_store_devices(family, size);
    }
    (available - (extra_ebs + 1)).max(1)
}

/// Types with a maximum number of EBS volumes below the shared limit (`maxVolumeLimits` and the
/// high-memory and bare-metal rules).
fn max_ebs(family: &str, size: &str) -> Option<i64> {
    let listed = match (family, size) {
        ("d3", "8xlarge") | ("d3", "12xlarge") => Some(3),
        ("g5", "48xlarge") => Some(9),
        ("inf1", "xlarge") | ("inf1", "2xlarge") => Some(26),
        ("inf1", "6xlarge") => Some(23),
        ("inf1", "24xlarge") => Some(11),
        ("mac1", "metal") => Some(16),
        _ => None,
    };
    listed.or(if family.starts_with("u-") {
        Some(if size == "metal" { 19 } else { 27 })
    } else if size == "metal" {
        Some(31)
    } else {
        None
    })
}

/// The dedicated EBS limit of the families that have one (not shared with ENIs or instance stores).
fn dedicated_ebs(family: &str, size: &str) -> Option<i64> {
    if !matches!(family, "m7i" | "m7a" | "c7i" | "c7a" | "r7a" | "r7i" | "r7iz" | "u7i") {
        return None;
    }
    match size {
        "medium" | "large" | "xlarge" | "2xlarge" | "4xlarge" | "8xlarge" | "12xlarge" => Some(32),
        "metal-16xl" | "metal-24xl" => Some(31),
        "16xlarge" => Some(48),
        "24xlarge" => Some(64),
        "metal-32xl" | "metal-48xl" => Some(79),
        "32xlarge" => Some(88),
        "48xlarge" => Some(128),
        _ => None,
    }
}

/// NVMe instance-store devices per type, as the driver lists them (AWS "Instance store volumes";
/// a type the driver does not list counts 0, as in the driver).
fn nvme_instance_store_devices(family: &str, size: &str) -> i64 {
    // Per family: the sizes with 1 device, 2 devices, 4 devices, 8 devices.
    type Sizes = &'static [&'static str];
    let table: &[(&str, Sizes, Sizes, Sizes, Sizes)] = &[
        ("c5ad", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"], &[], &[]),
        ("c5d", &["large", "xlarge", "2xlarge", "4xlarge", "9xlarge"], &["12xlarge", "18xlarge"], &["24xlarge", "metal"], &[]),
        ("c6gd", &["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"], &["12xlarge", "16xlarge", "metal"], &[], &[]),
        ("dl1", &[], &[], &["24xlarge"], &[]),
        ("f1", &["2xlarge", "4xlarge"], &[], &["16xlarge"], &[]),
        ("g4ad", &["xlarge", "2xlarge", "4xlarge", "8xlarge"], &["16xlarge"], &[], &[]),
        ("g4dn", &["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"], &["metal"], &[], &[]),
        ("g5", &["xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"], &["48xlarge"], &[], &[]),
        ("i3", &["large", "xlarge", "2xlarge"], &["4xlarge"], &["8xlarge"], &["16xlarge", "metal"]),
        ("i3en", &["large", "xlarge", "3xlarge"], &["2xlarge", "6xlarge"], &["12xlarge"], &["24xlarge", "metal"]),
        ("i4i", &["large", "xlarge", "2xlarge", "4xlarge"], &["8xlarge"], &["16xlarge"], &["32xlarge", "metal"]),
        ("im4gn", &["large", "xlarge", "2xlarge", "4xlarge"], &["8xlarge"], &["16xlarge"], &[]),
        ("is4gen", &["medium", "large", "xlarge", "2xlarge"], &["4xlarge"], &["8xlarge"], &[]),
        ("m5ad", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge"], &[]),
        ("m5d", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge", "metal"], &[]),
        ("m5dn", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge", "metal"], &[]),
        ("m6gd", &["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"], &["12xlarge", "16xlarge", "metal"], &[], &[]),
        ("m6id", &["large", "xlarge", "2xlarge", "4xlarge", "8xlarge"], &["12xlarge", "16xlarge"], &["24xlarge", "32xlarge", "metal"], &[]),
        ("p3dn", &[], &["24xlarge"], &[], &[]),
        ("p4d", &[], &[], &[], &["24xlarge"]),
        ("r5ad", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge"], &[]),
        ("r5d", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge", "metal"], &[]),
        ("r5dn", &["large", "xlarge", "2xlarge"], &["4xlarge", "8xlarge", "12xlarge"], &["16xlarge", "24xlarge", "metal"], &[]),
        ("r6gd", &["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"], &["12xlarge", "16xlarge", "metal"], &[], &[]),
        ("x2gd", &["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"], &["12xlarge", "16xlarge", "metal"], &[], &[]),
        ("x2idn", &["16xlarge"], &["24xlarge", "32xlarge", "metal"], &[], &[]),
        ("z1d", &["large", "xlarge", "2xlarge", "3xlarge", "6xlarge"], &["12xlarge", "metal"], &[], &[]),
    ];
    let Some((_, one, two, four, eight)) = table.iter().find(|t| t.0 == family) else { return 0 };
    [(1, *one), (2, *two), (4, *four), (8, *eight)].iter().find(|(_, sizes)| sizes.contains(&size)).map_or(0, |(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m5_large() -> AwsFacts {
        AwsFacts { vcpu: 2, memory_mib: 8192, arch: "amd64".into(), enis_default_card: Some(3), ipv4_per_eni: Some(10), branch_enis: 9, local_nvme_gb: 0 }
    }

    #[test]
    fn m5_large_matches_karpenters_published_allocatable() {
        let f = m5_large();
        let k = KubeletSettings::default();
        let cap = capacity(&f, "AL2023", &k, None, false, &Resources::default());
        let alloc = cap.minus(&overhead(&f, "AL2023", &k, &cap));
        assert_eq!(cap.pods, 29);
        assert_eq!(alloc.cpu_m, 1930);
        assert_eq!(alloc.memory, 6903 * MIB);
        assert_eq!(alloc.ephemeral, 17 * GIB);
    }

    #[test]
    fn cpu_bands() {
        assert_eq!(kube_reserved_cpu_m(1), 60);
        assert_eq!(kube_reserved_cpu_m(2), 70);
        assert_eq!(kube_reserved_cpu_m(4), 80);
        assert_eq!(kube_reserved_cpu_m(96), 310);
    }

    #[test]
    fn kubelet_overrides() {
        let f = m5_large();
        let k = KubeletSettings { max_pods: Some(110), pods_per_core: Some(10), ..Default::default() };
        assert_eq!(max_pods(&f, "AL2023", &k), 20, "podsPerCore caps maxPods");
        assert_eq!(max_pods(&f, "Bottlerocket", &k), 110, "Bottlerocket ignores podsPerCore");
        let cap = capacity(&f, "AL2023", &k, None, false, &Resources::default());
        // AL2023 keeps the ENI-limited pod count (29) in the memory reservation.
        assert_eq!(overhead(&f, "AL2023", &k, &cap).memory, (11 * 29 + 255 + 100) * MIB);
        let ev = KubeletSettings { eviction_hard: vec![("memory.available".into(), EvictionValue::Percent(100.0))], ..Default::default() };
        assert_eq!(overhead(&f, "AL2023", &ev, &cap).memory, (11 * 29 + 255) * MIB);
    }

    #[test]
    fn ebs_attach_limits_follow_the_csi_drivers_rule() {
        // Expected values worked by hand from aws-ebs-csi-driver's getVolumesLimit (node.go) and its
        // tables (pkg/cloud/volume_limits.go, commit 09f742f7), one ENI, no extra block devices.
        // Nitro, shared: 28 − 1 ENI − 1 root.
        assert_eq!(ebs_attach_limit("m5.large", 0), 26);
        assert_eq!(ebs_attach_limit("c6i.32xlarge", 0), 26);
        // Nitro with NVMe instance stores: c5d.large has 1 device, i3en.24xlarge 8.
        assert_eq!(ebs_attach_limit("c5d.large", 0), 25);
        assert_eq!(ebs_attach_limit("i3en.24xlarge", 0), 18);
        // Xen: 39 − 1 root, no ENI or instance-store sharing.
        assert_eq!(ebs_attach_limit("m4.large", 0), 38);
        assert_eq!(ebs_attach_limit("t2.micro", 0), 38);
        // Dedicated EBS limits (m7i, c7a, ...): by size, minus the root volume only.
        assert_eq!(ebs_attach_limit("m7i.large", 0), 31);
        assert_eq!(ebs_attach_limit("c7a.16xlarge", 0), 47);
        assert_eq!(ebs_attach_limit("r7i.48xlarge", 0), 127);
        // Per-type maximums: bare metal 31, d3.8xlarge 3, g5.48xlarge 9 (with 2 NVMe devices).
        assert_eq!(ebs_attach_limit("m5.metal", 0), 26, "min(28, 31) − 1 − 1");
        assert_eq!(ebs_attach_limit("d3.8xlarge", 0), 1);
        assert_eq!(ebs_attach_limit("g5.48xlarge", 0), 5);
        assert_eq!(ebs_attach_limit("u-6tb1.metal", 0), 17, "min(28, 19) − 1 − 1");
        // Extra block devices of the NodeClass each take an attachment; never below 1.
        assert_eq!(ebs_attach_limit("m5.large", 2), 24);
        assert_eq!(ebs_attach_limit("d3.8xlarge", 5), 1);
    }
}
