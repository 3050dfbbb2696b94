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
}
