//! Capacity reservations (Karpenter's `reserved` capacity type, EC2 On-Demand Capacity Reservations and
//! Capacity Blocks).
//!
//! ```text
//! ∀ reservation r:  |{ new node n : reservation(n) = r }| ≤ count_r
//! ```
//!
//! A reservation is for one instance type in one zone; `count_r` is the number of instances that may
//! still launch into it (EC2's available instance count, less the launches since it was read). Nodes
//! already running in it are not counted again: EC2's count excludes them. A node launched into a
//! reservation is labelled with its id, type and interruptibility, so pods may select it.

use std::sync::Arc;

use crate::domain::catalog::Catalog;

/// A reservation some candidate configuration launches into, with the instances it still takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cap {
    pub id: String,
    pub count: u32,
}

/// A new node a reservation cannot take: the caller launches it on-demand or spot instead, or leaves
/// the pod pending with this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("capacity reservation {id} is full: {count} instance(s) available, all planned")]
pub struct Full {
    pub id: String,
    pub count: u32,
}

/// The reservations of every NodePool's catalog view, by id (the smallest count where views differ).
pub fn caps(views: &[Arc<Catalog>]) -> Vec<Cap> {
    let mut out: Vec<Cap> = Vec::new();
    for view in views {
        for r in view.types.iter().flat_map(|t| &t.offerings).filter_map(|o| o.reservation.as_ref()) {
            match out.iter_mut().find(|c| c.id == r.id) {
                Some(c) => c.count = c.count.min(r.count),
                None => out.push(Cap { id: r.id.clone(), count: r.count }),
            }
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Checks one more new node in reservation `r` given `used` new nodes per reservation.
pub fn check(caps: &[Cap], used: &[u32], r: Option<usize>) -> Result<(), Full> {
    match r {
        Some(r) => caps[r].one_more(used.get(r).copied().unwrap_or(0)),
        None => Ok(()),
    }
}

impl Cap {
    /// Checks one more new node in this reservation given `used` new nodes in it.
    pub fn one_more(&self, used: u32) -> Result<(), Full> {
        if used >= self.count { Err(Full { id: self.id.clone(), count: self.count }) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalog::{InstanceType, Offering, Reservation};

    fn view(counts: &[(&str, u32)]) -> Arc<Catalog> {
        let offerings = counts
            .iter()
            .map(|(id, n)| Offering {
                zone: "z1".into(),
                capacity_type: "reserved".into(),
                price: 0.0,
                available: *n > 0,
                synthetic: false,
                reservation: Some(Reservation { id: id.to_string(), kind: "default".into(), interruptible: false, count: *n }),
            })
            .collect();
        let t =
            InstanceType { name: "m5.large".into(), labels: Default::default(), capacity: Default::default(), overhead: Default::default(), offerings, aws: None, attach_limits: Default::default() };
        Arc::new(Catalog { types: vec![t], ..Default::default() })
    }

    #[test]
    fn counts_are_per_reservation_and_the_smallest_view_wins() {
        let caps = caps(&[view(&[("cr-b", 2), ("cr-a", 1)]), view(&[("cr-b", 1)])]);
        assert_eq!(caps, vec![Cap { id: "cr-a".into(), count: 1 }, Cap { id: "cr-b".into(), count: 1 }]);
        assert!(check(&caps, &[0, 0], Some(0)).is_ok());
        assert_eq!(check(&caps, &[1, 0], Some(0)).unwrap_err().to_string(), "capacity reservation cr-a is full: 1 instance(s) available, all planned");
        assert!(check(&caps, &[1, 0], Some(1)).is_ok());
        assert!(check(&caps, &[9, 9], None).is_ok(), "on-demand and spot nodes take no reservation");
    }
}
