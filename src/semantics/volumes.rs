//! Volume topology: VolumeBinding and VolumeZone (`volumebinding/binder.go`, `volumezone/volume_zone.go`).
//!
//! ```text
//! bound PVC          node ∈ PV.spec.nodeAffinity (terms ORed)           else "volume node affinity conflict"
//!                    node.labels[zone|region] ∈ PV zone|region labels   else "no available volume zone"
//!                      (a node without the label passes VolumeZone)
//! unbound, WFFC      node matches the StorageClass allowedTopologies (terms ORed, expressions ANDed);
//!                    a claim with volume.kubernetes.io/selected-node fits only that node
//! unbound, Immediate the pod waits: UnschedulableAndUnresolvable
//! ```
//!
//! Volume constraints restrict the nodes a pod may land on. They are never part of the pod's own node
//! affinity, so they never change which nodes or domains count for its spread constraints.

use crate::domain::labels::{keys, Labels};
use crate::domain::pod::VolumeNeeds;

use super::node_affinity::terms_match;
use super::{Plugin, Reject};

/// The label keys VolumeZone compares, with their GA/beta twins.
fn node_value<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    let twin = match key {
        keys::ZONE => Some(keys::ZONE_BETA),
        keys::ZONE_BETA => Some(keys::ZONE),
        keys::REGION => Some(keys::REGION_BETA),
        keys::REGION_BETA => Some(keys::REGION),
        _ => None,
    };
    labels.get(key).or_else(|| twin.and_then(|t| labels.get(t))).map(String::as_str)
}

pub fn filter(v: &VolumeNeeds, labels: &Labels, node_name: Option<&str>) -> Result<(), Reject> {
    if let Some(why) = &v.blocked {
        return Err(Reject::unresolvable(Plugin::VolumeBinding, why.clone()));
    }
    if let Some(sel) = &v.selected_node
        && node_name != Some(sel.as_str())
    {
        return Err(Reject::unresolvable(Plugin::VolumeBinding, "node(s) had volume node affinity conflict"));
    }
    for (key, allowed) in &v.zone_labels {
        if let Some(val) = node_value(labels, key)
            && !allowed.iter().any(|a| a == val)
        {
            return Err(Reject::unresolvable(Plugin::VolumeZone, "node(s) had no available volume zone"));
        }
    }
    for alternatives in &v.node_terms {
        if !terms_match(alternatives, labels, node_name) {
            return Err(Reject::unresolvable(Plugin::VolumeBinding, "node(s) had volume node affinity conflict"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{NodeRequirement, NodeSelectorTerm};

    fn zone(z: &str) -> Labels {
        [(keys::ZONE.to_string(), z.to_string())].into()
    }

    #[test]
    fn pv_node_affinity_alternatives_are_ored() {
        let t = |z: &str| NodeSelectorTerm { expressions: vec![NodeRequirement::is_in(keys::ZONE, [z])], fields: vec![] };
        let v = VolumeNeeds { node_terms: vec![vec![t("a"), t("b")]], ..Default::default() };
        assert!(filter(&v, &zone("b"), Some("n")).is_ok());
        let e = filter(&v, &zone("c"), Some("n")).unwrap_err();
        assert_eq!(e.plugin, Plugin::VolumeBinding);
        assert!(e.unresolvable);
    }

    #[test]
    fn volume_zone_passes_nodes_without_zone_labels_and_reads_beta_labels() {
        let v = VolumeNeeds { zone_labels: vec![(keys::ZONE.into(), vec!["a".into()])], ..Default::default() };
        assert!(filter(&v, &Labels::new(), Some("n")).is_ok());
        let beta: Labels = [(keys::ZONE_BETA.to_string(), "b".to_string())].into();
        assert_eq!(filter(&v, &beta, Some("n")).unwrap_err().plugin, Plugin::VolumeZone);
    }

    #[test]
    fn immediate_unbound_claims_block() {
        let v = VolumeNeeds { blocked: Some("pod has unbound immediate PersistentVolumeClaims".into()), ..Default::default() };
        assert!(filter(&v, &zone("a"), Some("n")).unwrap_err().unresolvable);
    }
}
