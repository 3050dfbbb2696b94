//! NodeVolumeLimits (`nodevolumelimits/csi.go`): how many volumes of each CSI driver a node may have.
//!
//! ```text
//! unique(v)        = v.driver + "/" + v.handle          (a claim shared by pods on a node counts once)
//! attached(n, d)   = { unique(v) | v ∈ volumes(q), q ∈ pods(n), v.driver = d }
//! new(p, n, d)     = { unique(v) | v ∈ volumes(p), v.driver = d } \ attached(n, d)
//! filter(p, n)     = ∀ d with limit(n, d):  |attached(n, d)| + |new(p, n, d)| ≤ limit(n, d)
//!                                                       else "node(s) exceed max volume count"
//! limit(n, d)      = n's CSINode spec.drivers[name = d].allocatable.count; absent ⇒ no limit
//! ```
//!
//! `volumes(p)` are the pod's claims (and generic ephemeral volumes) backed by a CSI driver: a bound
//! claim counts under its PersistentVolume's `spec.csi.driver` and volume handle, or, for an in-tree
//! PersistentVolume kube-scheduler migrates (EBS, GCE PD, Azure Disk, Cinder), under the CSI driver
//! it migrates to; an unbound claim counts under its StorageClass's provisioner (the in-tree ones
//! mapped the same way) with the claim itself as handle (the input builds them: `Pod::volumes.attach`).
//! Nodes a plan launches carry their instance type's limit (`InstanceType::attach_limits`), which is
//! what their CSI driver will report once they register.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::node::AttachLimits;
use crate::domain::pod::{AttachVolume, Pod};

use super::{Plugin, Reject};

pub const REASON: &str = "node(s) exceed max volume count";

pub fn reject() -> Reject {
    Reject::new(Plugin::NodeVolumeLimits, REASON)
}

/// The distinct volumes per limited driver among `pods` (the pods on a node).
pub fn attached<'p>(limits: &AttachLimits, pods: impl IntoIterator<Item = &'p Pod>) -> BTreeMap<&'p str, BTreeSet<&'p str>> {
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for q in pods {
        for v in &q.volumes.attach {
            if limits.contains_key(&v.driver) {
                out.entry(v.driver.as_str()).or_default().insert(v.handle.as_str());
            }
        }
    }
    out
}

/// NodeVolumeLimits for `pod` on a node with `limits` holding `pods`.
pub fn filter<'p>(limits: &AttachLimits, pods: impl IntoIterator<Item = &'p Pod>, pod: &Pod) -> Result<(), Reject> {
    if limits.is_empty() || !pod.volumes.attach.iter().any(|v| limits.contains_key(&v.driver)) {
        return Ok(());
    }
    let on_node = attached(limits, pods);
    fits(limits, &on_node, &pod.volumes.attach)
}

/// The check itself, on the node's distinct volumes per driver.
pub fn fits(limits: &AttachLimits, on_node: &BTreeMap<&str, BTreeSet<&str>>, wanted: &[AttachVolume]) -> Result<(), Reject> {
    let mut new: BTreeMap<&str, i64> = BTreeMap::new();
    for v in wanted {
        if !limits.contains_key(&v.driver) {
            continue;
        }
        if on_node.get(v.driver.as_str()).is_some_and(|s| s.contains(v.handle.as_str())) {
            continue;
        }
        *new.entry(v.driver.as_str()).or_default() += 1;
    }
    for (d, n) in new {
        let have = on_node.get(d).map_or(0, |s| s.len() as i64);
        if have + n > limits[d] {
            return Err(reject());
        }
    }
    Ok(())
}

/// Per driver, how many volumes a pod brings to an empty node (its attach volumes are distinct).
pub fn counts(pod: &Pod) -> BTreeMap<&str, i64> {
    let mut out: BTreeMap<&str, i64> = BTreeMap::new();
    for v in &pod.volumes.attach {
        *out.entry(v.driver.as_str()).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pod::VolumeNeeds;

    fn pod(vols: &[(&str, &str)]) -> Pod {
        let volumes = VolumeNeeds { attach: vols.iter().map(|(d, h)| AttachVolume { driver: d.to_string(), handle: h.to_string() }).collect(), ..Default::default() };
        Pod { volumes, ..Pod::new("default", "p", Default::default()) }
    }

    const EBS: &str = "ebs.csi.aws.com";

    #[test]
    fn counts_distinct_volumes_against_the_drivers_limit() {
        let limits: AttachLimits = [(EBS.to_string(), 2)].into();
        let on = [pod(&[(EBS, "vol-a")])];
        assert_eq!(filter(&limits, &on, &pod(&[(EBS, "vol-b"), (EBS, "vol-c")])).unwrap_err().reason, REASON);
        assert!(filter(&limits, &on, &pod(&[(EBS, "vol-b")])).is_ok());
        // A volume already attached to the node counts once.
        assert!(filter(&limits, &on, &pod(&[(EBS, "vol-a"), (EBS, "vol-b")])).is_ok());
        // Two pods on the node sharing a volume count it once.
        let shared = [pod(&[(EBS, "vol-a")]), pod(&[(EBS, "vol-a")])];
        assert!(filter(&limits, &shared, &pod(&[(EBS, "vol-b")])).is_ok());
    }

    #[test]
    fn drivers_without_a_limit_are_free() {
        let limits: AttachLimits = [(EBS.to_string(), 1)].into();
        let on = [pod(&[(EBS, "vol-a")])];
        assert!(filter(&limits, &on, &pod(&[("efs.csi.aws.com", "fs-1"), ("efs.csi.aws.com", "fs-2")])).is_ok());
        assert!(filter(&AttachLimits::new(), &on, &pod(&[(EBS, "vol-b")])).is_ok(), "no CSINode: no limit");
        // An exhausted driver still rejects, even beside free ones.
        assert!(filter(&limits, &on, &pod(&[("efs.csi.aws.com", "fs-1"), (EBS, "vol-b")])).is_err());
    }

    #[test]
    fn a_limit_of_zero_admits_only_attached_volumes() {
        let limits: AttachLimits = [(EBS.to_string(), 0)].into();
        assert!(filter(&limits, &[], &pod(&[(EBS, "vol-a")])).is_err());
        assert!(filter(&limits, &[], &pod(&[])).is_ok());
    }
}
