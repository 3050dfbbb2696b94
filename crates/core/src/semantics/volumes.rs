//! Volume topology: VolumeBinding and VolumeZone (`volumebinding/binder.go`, `volumezone/volume_zone.go`).
//!
//! ```text
//! bound PVC          node ∈ PV.spec.nodeAffinity (terms ORed)           else "volume node affinity conflict"
//!                    VolumeZone: a node with none of the four topology labels (zone, region, GA or
//!                    beta) passes; otherwise for every topology label k of the PV,
//!                    node.labels[k] (or, for a beta k, node.labels[GA(k)]) ∈ PV values
//!                                                                       else "no available volume zone"
//! unbound, WFFC      node matches the StorageClass allowedTopologies (terms ORed, expressions ANDed);
//!                    a claim with volume.kubernetes.io/selected-node fits only that node
//! unbound, Immediate the pod waits: UnschedulableAndUnresolvable
//! ```
//!
//! Volume constraints restrict the nodes a pod may land on. They are never part of the pod's own node
//! affinity, so they never change which nodes or domains count for its spread constraints.

use crate::domain::labels::{Labels, keys};
use crate::domain::pod::VolumeNeeds;

use super::node_affinity::terms_match;
use super::{Plugin, Reject};

/// The topology labels VolumeZone reads (`topologyLabels` in volume_zone.go).
const TOPOLOGY_LABELS: [&str; 4] = [keys::ZONE_BETA, keys::REGION_BETA, keys::ZONE, keys::REGION];

/// The node's value for a PV topology label: the label itself, or for a beta key its GA form
/// (`translateToGALabel`; a GA key never falls back to the beta label).
fn node_value<'a>(labels: &'a Labels, key: &str) -> Option<&'a str> {
    let ga = match key {
        keys::ZONE_BETA => Some(keys::ZONE),
        keys::REGION_BETA => Some(keys::REGION),
        _ => None,
    };
    labels.get(key).or_else(|| ga.and_then(|t| labels.get(t))).map(String::as_str)
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
    // A node with no topology label at all passes (single-zone clusters); a node with some must carry
    // every topology label of the PV with an allowed value.
    if !v.zone_labels.is_empty() && TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        for (key, allowed) in &v.zone_labels {
            if !node_value(labels, key).is_some_and(|val| allowed.iter().any(|a| a == val)) {
                return Err(Reject::unresolvable(Plugin::VolumeZone, "node(s) had no available volume zone"));
            }
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
        // A GA PV key does not fall back to the node's beta label, even with the right value.
        let beta_a: Labels = [(keys::ZONE_BETA.to_string(), "a".to_string())].into();
        assert_eq!(filter(&v, &beta_a, Some("n")).unwrap_err().plugin, Plugin::VolumeZone);
        // A beta PV key falls back to the node's GA label.
        let vb = VolumeNeeds { zone_labels: vec![(keys::ZONE_BETA.into(), vec!["a".into()])], ..Default::default() };
        assert!(filter(&vb, &zone("a"), Some("n")).is_ok());
    }

    #[test]
    fn volume_zone_needs_every_pv_topology_label_on_a_labelled_node() {
        let v = VolumeNeeds { zone_labels: vec![(keys::ZONE.into(), vec!["a".into()]), (keys::REGION.into(), vec!["r".into()])], ..Default::default() };
        assert_eq!(filter(&v, &zone("a"), Some("n")).unwrap_err().plugin, Plugin::VolumeZone, "no region label");
        let mut both = zone("a");
        both.insert(keys::REGION.into(), "r".into());
        assert!(filter(&v, &both, Some("n")).is_ok());
    }

    #[test]
    fn immediate_unbound_claims_block() {
        let v = VolumeNeeds { blocked: Some("pod has unbound immediate PersistentVolumeClaims".into()), ..Default::default() };
        assert!(filter(&v, &zone("a"), Some("n")).unwrap_err().unresolvable);
    }
}
