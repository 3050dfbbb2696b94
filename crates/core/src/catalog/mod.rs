//! The instance catalog seen through a NodeClass: Karpenter's AWS sizing formulas ([`aws`]) applied to
//! an EC2NodeClass's AMI family, kubelet settings and root volume. The catalog types are in
//! `domain::catalog`; the file format and the embedded default are in `stowage_input::catalog`.

pub mod aws;

use crate::domain::catalog::Catalog;
use crate::domain::nodepool::NodeClass;
use crate::domain::resources::Resources;

/// The catalog as seen through an EC2NodeClass: types with AWS facts get capacity and overhead
/// recomputed for its AMI family, kubelet settings and root volume, and their EBS attach limit for its
/// block devices. Types without facts are kept.
pub fn for_nodeclass(c: &Catalog, nc: &NodeClass) -> Catalog {
    let mut out = c.clone();
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
