//! Capacity reservations (On-Demand Capacity Reservations and Capacity Blocks): Karpenter's `reserved`
//! capacity type.
//!
//! **Selection** (Karpenter `pkg/providers/capacityreservation`): each `capacityReservationSelectorTerms`
//! term is one `DescribeCapacityReservations` query, always filtered on `state=active`: an `id` term
//! asks for that id (`CapacityReservationIds`, no `MaxResults`); a term with `tags` or
//! `instanceMatchCriteria` filters on `tag:<k>` (`tag-key` for `*`), `owner-id` and
//! `instance-match-criteria`, `MaxResults` 1000, paginated. Terms are ORed; results are kept once per
//! id, sorted by id, and written into `status.capacityReservations`. A capacity block is `expiring`
//! within 40 minutes of its end (Karpenter's window): its offering is then unavailable.
//!
//! **Availability.** Each reservation's `AvailableInstanceCount` is read at every resolution (the
//! discovery TTL, 1 minute as Karpenter polls) and kept per id. A launch into a reservation lowers the
//! kept count by one until the next read (EC2's count already excludes running instances, so a later
//! read replaces it); a launch refused with `ReservationCapacityExceeded` sets it to 0.
//!
//! **Offerings.** Every reservation of a resolved NodeClass becomes a `reserved` offering of its
//! instance type in its zone, priced at the type's on-demand price / 10,000,000 (Karpenter's constant:
//! the capacity is already paid for, and the ratio keeps consolidation's order among reservations),
//! available while its count is above 0 and it is not expiring.
//!
//! **Launch.** A reserved offering launches through a launch template whose
//! `CapacityReservationSpecification.CapacityReservationTarget` is the reservation (other launch
//! templates keep the preference `none`, so open reservations are not consumed by accident), with
//! `DefaultTargetCapacityType` `on-demand`, `capacity-block` for capacity blocks and
//! `reserved-capacity` for interruptible reservations, as Karpenter's CreateFleet does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_sdk_ec2::types::{CapacityReservation as Ec2Reservation, CapacityReservationType, Filter};

use super::Ec2;
use super::errors::AwsError;
use super::filters::{filter, tag_filters};
use stowage_core::domain::catalog::{Catalog, Offering, RESERVED, Reservation};
use stowage_input::api::ec2nodeclass::{CapacityReservationSelectorTerm, CapacityReservationStatus};

/// How long before its end a capacity block counts as expiring (Karpenter's
/// `capacityReservationExpirationPeriod`).
pub const EXPIRATION_WINDOW_SECS: i64 = 40 * 60;

/// Karpenter divides the on-demand price by this for a reserved offering.
pub const PRICE_DIVISOR: f64 = 10_000_000.0;

/// The EC2 error code of a launch into a full reservation.
pub const RESERVATION_FULL: &str = "ReservationCapacityExceeded";

#[derive(Clone, Debug, PartialEq)]
pub struct CapacityReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub owner_id: String,
    /// `open` or `targeted`.
    pub match_criteria: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    /// RFC 3339.
    pub end_time: Option<String>,
    pub expiring: bool,
    /// `AvailableInstanceCount` when it was read.
    pub available: u32,
}

impl CapacityReservation {
    pub fn status(&self) -> CapacityReservationStatus {
        CapacityReservationStatus {
            availability_zone: self.zone.clone(),
            end_time: self.end_time.clone(),
            id: self.id.clone(),
            instance_match_criteria: self.match_criteria.clone(),
            instance_type: self.instance_type.clone(),
            owner_id: self.owner_id.clone(),
            reservation_type: self.kind.clone(),
            interruptible: self.interruptible,
            state: if self.expiring { "expiring".into() } else { "active".into() },
        }
    }
}

/// One `DescribeCapacityReservations` query: ids, or filters (`state=active` always).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Query {
    Id(String),
    Filters(Vec<Filter>),
}

/// The queries of the selector terms (module doc): an id term asks for its id; a term with tags or
/// instance match criteria (and the owner it names) is one filtered query.
pub(crate) fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let mut out = Vec::new();
    for t in terms {
        if let Some(id) = t.id.as_deref().filter(|s| !s.is_empty()) {
            out.push(Query::Id(id.to_string()));
        }
        let tags = t.tags.clone().unwrap_or_default();
        if !tags.is_empty() || t.instance_match_criteria.is_some() {
            let mut fs = vec![filter("state", ["active"])];
            if let Some(o) = &t.owner_id {
                fs.push(filter("owner-id", [o.as_str()]));
            }
            fs.extend(tag_filters(&tags));
            if let Some(m) = &t.instance_match_criteria {
                fs.push(filter("instance-match-criteria", [m.as_str()]));
            }
            out.push(Query::Filters(fs));
        }
    }
    out
}

/// One EC2 reservation as stowage keeps it; None (with a log line) for what Karpenter also skips: an
/// instance match criteria or reservation type it does not know, or missing fields.
fn from_ec2(r: &Ec2Reservation, now_secs: i64) -> Option<CapacityReservation> {
    let id = r.capacity_reservation_id()?.to_string();
    let criteria = r.instance_match_criteria().map(|c| c.as_str().to_string()).unwrap_or_default();
    if criteria != "open" && criteria != "targeted" {
        tracing::warn!(capacity_reservation = %id, instance_match_criteria = %criteria, "capacity reservation with an unsupported instance match criteria; skipped");
        return None;
    }
    let kind = match r.reservation_type() {
        None | Some(CapacityReservationType::Default) => "default",
        Some(CapacityReservationType::CapacityBlock) => "capacity-block",
        Some(other) => {
            tracing::warn!(capacity_reservation = %id, reservation_type = %other.as_str(), "capacity reservation of an unsupported type; skipped");
            return None;
        }
    };
    let end = r.end_date();
    let expiring = kind == "capacity-block" && end.is_some_and(|e| now_secs >= e.secs() - EXPIRATION_WINDOW_SECS);
    Some(CapacityReservation {
        instance_type: r.instance_type()?.to_string(),
        zone: r.availability_zone()?.to_string(),
        owner_id: r.owner_id().unwrap_or_default().to_string(),
        match_criteria: criteria,
        kind: kind.into(),
        interruptible: r.interruptible().unwrap_or(false),
        end_time: end.and_then(|e| e.fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime).ok()),
        expiring,
        available: r.available_instance_count().unwrap_or(0).max(0) as u32,
        id,
    })
}

/// The active reservations the terms select, by id (module doc).
pub async fn describe(ec2: &Ec2, terms: &[CapacityReservationSelectorTerm]) -> Result<Vec<CapacityReservation>, AwsError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let mut found: BTreeMap<String, CapacityReservation> = BTreeMap::new();
    for q in queries(terms) {
        let mut token: Option<String> = None;
        loop {
            let req = match &q {
                Query::Id(id) => ec2.client.describe_capacity_reservations().capacity_reservation_ids(id).filters(filter("state", ["active"])),
                Query::Filters(fs) => ec2.client.describe_capacity_reservations().set_filters(Some(fs.clone())).max_results(1000).set_next_token(token.clone()),
            };
            let out = ec2.call("DescribeCapacityReservations", || req.clone().send()).await?;
            for r in out.capacity_reservations() {
                if let Some(r) = from_ec2(r, now) {
                    found.insert(r.id.clone(), r);
                }
            }
            token = out.next_token().filter(|t| !t.is_empty() && matches!(q, Query::Filters(_))).map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(found.into_values().collect())
}

/// The instances each reservation still takes (module doc).
#[derive(Debug, Default)]
pub struct Availability {
    counts: Mutex<BTreeMap<String, u32>>,
}

impl Availability {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes EC2's counts, just read.
    pub fn sync(&self, reservations: &[CapacityReservation]) {
        let mut m = self.lock();
        for r in reservations {
            m.insert(r.id.clone(), r.available);
        }
    }

    pub fn count(&self, id: &str) -> Option<u32> {
        self.lock().get(id).copied()
    }

    /// One instance launched into `id`.
    pub fn launched(&self, id: &str) {
        if let Some(c) = self.lock().get_mut(id) {
            *c = c.saturating_sub(1);
        }
    }

    /// EC2 said `id` is full.
    pub fn full(&self, id: &str) {
        self.lock().insert(id.to_string(), 0);
    }
}

/// Adds a `reserved` offering per reservation to its instance type, if the catalog has the type in
/// the reservation's zone (module doc).
pub fn add_offerings<'r>(catalog: &mut Catalog, reservations: impl IntoIterator<Item = &'r CapacityReservation>, availability: &Availability) {
    for r in reservations {
        let Some(t) = catalog.types.iter_mut().find(|t| t.name == r.instance_type) else { continue };
        if t.offerings.iter().any(|o| o.reservation_id() == Some(r.id.as_str())) {
            continue;
        }
        let Some(od) = t.offerings.iter().find(|o| o.capacity_type == "on-demand" && o.zone == r.zone) else { continue };
        let count = availability.count(&r.id).unwrap_or(r.available);
        let offering = Offering {
            zone: r.zone.clone(),
            capacity_type: RESERVED.into(),
            price: od.price / PRICE_DIVISOR,
            available: count > 0 && !r.expiring,
            synthetic: false,
            reservation: Some(Reservation { id: r.id.clone(), kind: r.kind.clone(), interruptible: r.interruptible, count }),
        };
        t.offerings.push(offering);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stowage_core::domain::catalog::InstanceType;

    fn names(q: &Query) -> Vec<String> {
        match q {
            Query::Id(id) => vec![format!("id={id}")],
            Query::Filters(fs) => fs.iter().map(|f| format!("{}={}", f.name().unwrap_or(""), f.values().join(","))).collect(),
        }
    }

    #[test]
    fn terms_become_karpenters_queries() {
        let terms: Vec<CapacityReservationSelectorTerm> = serde_json::from_value(serde_json::json!([
            {"id": "cr-1"},
            {"tags": {"team": "ml", "env": "*"}, "ownerID": "123456789012"},
            {"instanceMatchCriteria": "targeted"}
        ]))
        .unwrap();
        let q: Vec<Vec<String>> = queries(&terms).iter().map(names).collect();
        assert_eq!(
            q,
            vec![
                vec!["id=cr-1".to_string()],
                vec!["state=active".into(), "owner-id=123456789012".into(), "tag-key=env".into(), "tag:team=ml".into()],
                vec!["state=active".into(), "instance-match-criteria=targeted".into()],
            ]
        );
    }

    fn reservation(id: &str, zone: &str, available: u32, expiring: bool) -> CapacityReservation {
        CapacityReservation {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: zone.into(),
            owner_id: "123456789012".into(),
            match_criteria: "targeted".into(),
            kind: "default".into(),
            interruptible: false,
            end_time: None,
            expiring,
            available,
        }
    }

    #[test]
    fn reservations_are_offerings_at_karpenters_price_while_they_have_room() {
        let od = |zone: &str| Offering { zone: zone.into(), capacity_type: "on-demand".into(), price: 0.096, available: true, synthetic: false, reservation: None };
        let t = InstanceType {
            name: "m5.large".into(),
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: vec![od("z1")],
            aws: None,
            attach_limits: Default::default(),
        };
        let mut c = Catalog { types: vec![t], ..Default::default() };
        let rs = [reservation("cr-a", "z1", 2, false), reservation("cr-b", "z1", 1, true), reservation("cr-c", "z9", 5, false)];
        let avail = Availability::default();
        avail.sync(&rs);
        avail.launched("cr-a");
        add_offerings(&mut c, &rs, &avail);
        let reserved: Vec<_> = c.types[0].offerings.iter().filter(|o| o.capacity_type == RESERVED).collect();
        assert_eq!(reserved.len(), 2, "no offering in a zone the catalog does not serve");
        assert_eq!(reserved[0].reservation.as_ref().unwrap().count, 1, "one of two already launched");
        assert!(reserved[0].available && (reserved[0].price - 0.096 / PRICE_DIVISOR).abs() < 1e-15);
        assert!(!reserved[1].available, "an expiring capacity block takes no launch");
        avail.full("cr-a");
        let mut again = c.clone();
        again.types[0].offerings.retain(|o| o.reservation.is_none());
        add_offerings(&mut again, &rs, &avail);
        assert!(!again.types[0].offerings.iter().find(|o| o.reservation_id() == Some("cr-a")).unwrap().available, "full after ReservationCapacityExceeded");
        assert_eq!(reservation("cr-b", "z1", 1, true).status().state, "expiring");
    }
}
