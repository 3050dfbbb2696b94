//! Capacity blocks that end: Karpenter's `capacityreservation.expiration` controller, as a decision.
//!
//! ```text
//! ids(claims)             = { label capacity-reservation-id of c | c a NodeClaim not being deleted }
//! expire(claims, expiring) = { c | c not being deleted, its capacity-reservation-id ∈ expiring }
//! ```
//!
//! `expiring` is what the cloud says of `ids(claims)`: the capacity blocks within 40 minutes of their end
//! (`stowage_aws::capacity_reservations`). EC2 reclaims a capacity block's instances when it ends; the
//! NodeClaims are deleted before that, so their nodes drain as any deleted NodeClaim's do (PDBs,
//! terminationGracePeriod) and their pods are planned again elsewhere, as Karpenter deletes them every
//! minute. A reservation of the default kind never expires this way.

use std::collections::BTreeSet;

use stowage_core::domain::labels::keys;
use stowage_input::api::NodeClaim;

fn live_reservation(c: &NodeClaim) -> Option<&str> {
    if c.metadata.deletion_timestamp.is_some() {
        return None;
    }
    c.metadata.labels.as_ref()?.get(keys::CAPACITY_RESERVATION_ID).map(String::as_str)
}

/// The reservations the NodeClaims run in, to ask the cloud about (sorted, once each).
pub fn ids(claims: &[NodeClaim]) -> Vec<String> {
    let ids: BTreeSet<&str> = claims.iter().filter_map(live_reservation).collect();
    ids.into_iter().map(str::to_string).collect()
}

/// The NodeClaims (names) to delete because their capacity block is expiring.
pub fn expire(claims: &[NodeClaim], expiring: &BTreeSet<String>) -> Vec<String> {
    claims.iter().filter(|c| live_reservation(c).is_some_and(|id| expiring.contains(id))).filter_map(|c| c.metadata.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, reservation: Option<&str>, deleting: bool) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "np"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}
        }))
        .unwrap();
        if let Some(r) = reservation {
            c.metadata.labels.get_or_insert_with(Default::default).insert(keys::CAPACITY_RESERVATION_ID.into(), r.into());
        }
        if deleting {
            c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        c
    }

    #[test]
    fn claims_in_an_expiring_block_are_deleted_once() {
        let claims = [claim("a", Some("cr-1"), false), claim("b", Some("cr-2"), false), claim("c", None, false), claim("d", Some("cr-1"), true), claim("e", Some("cr-1"), false)];
        assert_eq!(ids(&claims), vec!["cr-1".to_string(), "cr-2".to_string()]);
        let expiring: BTreeSet<String> = ["cr-1".to_string()].into();
        assert_eq!(expire(&claims, &expiring), vec!["a".to_string(), "e".to_string()], "not the on-demand one, not one already being deleted");
        assert!(expire(&claims, &BTreeSet::new()).is_empty());
    }
}
