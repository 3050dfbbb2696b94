//! The instance catalog seen through a NodeClass: Karpenter's AWS sizing formulas ([`aws`]) applied to
//! an EC2NodeClass's AMI family, kubelet settings and root volume. The catalog types are in
//! `domain::catalog`; the file format and the embedded default are in `stowage_input::catalog`.

pub mod aws;

use crate::domain::catalog::Catalog;
use crate::domain::nodepool::NodeClass;
use crate::domain::resources::Resources;

/// The catalog as seen through an EC2NodeClass: types with AWS facts get capacity and overhead
/// recomputed for its AMI family, kubelet settings and root volume, and their EBS attach limit for its
/// block devices. Types without facts are kept. Reserved offerings are kept for the capacity
/// reservations the EC2NodeClass selects and dropped for the others.
pub fn for_nodeclass(c: &Catalog, nc: &NodeClass) -> Catalog {
    let mut out = c.clone();
    for t in &mut out.types {
        t.offerings.retain(|o| o.reservation_id().is_none_or(|id| nc.capacity_reservations.iter().any(|r| r == id)));
    }
    for t in &mut out.types {
        let Some(f) = &t.aws else { continue };
        let mut extended = Resources::default();
        for (n, v) in t.capacity.extended() {
            extended.set(n, *v);
        }
        let raid0 = false;
        let cap = aws::capacity(f, &nc.ami_family, &nc.kubelet, nc.root_volume, raid0, &extended);
        t.overhead = aws::overhead(f, &nc.ami_family, &nc.kubelet, &cap);
        t.capacity = cap;
        t.attach_limits.insert(aws::EBS_CSI_DRIVER.to_string(), aws::ebs_attach_limit(&t.name, nc.extra_ebs_volumes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalog::{AwsFacts, InstanceType};
    use crate::domain::nodepool::KubeletSettings;

    #[test]
    fn a_nodeclass_with_more_block_devices_lowers_the_ebs_limit() {
        let f = AwsFacts { vcpu: 2, memory_mib: 8192, arch: "amd64".into(), enis_default_card: Some(3), ipv4_per_eni: Some(10), branch_enis: 9, local_nvme_gb: 0 };
        let t = InstanceType {
            name: "m5.large".into(),
            labels: Default::default(),
            capacity: Resources::default(),
            overhead: Resources::default(),
            offerings: vec![],
            aws: Some(f),
            attach_limits: Default::default(),
        };
        let c = Catalog { types: vec![t], ..Default::default() };
        let nc = |extra| NodeClass { name: "n".into(), ami_family: "AL2023".into(), kubelet: KubeletSettings::default(), root_volume: None, extra_ebs_volumes: extra, capacity_reservations: vec![] };
        assert_eq!(for_nodeclass(&c, &nc(0)).types[0].attach_limits[aws::EBS_CSI_DRIVER], 26);
        assert_eq!(for_nodeclass(&c, &nc(2)).types[0].attach_limits[aws::EBS_CSI_DRIVER], 24);
    }
}
