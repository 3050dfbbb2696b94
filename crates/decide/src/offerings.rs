//! The refused-offering cache, for the controller and the simulator alike: a launch refused with
//! insufficient capacity marks its offering (instance type, zone, capacity type) unavailable until
//! `now + ttl` (Karpenter's `unavailableOfferingTTL`, 3 minutes), and the planner sees the catalog with
//! those offerings `available: false`:
//!
//! ```text
//! unavailable(o, now) ⇔ until(o) > now        (marking again keeps the later deadline)
//! ```
//!
//! Pure and generic over the clock (`T`: tokio's `Instant` in the controller, `SimTime` in the simulator).

use std::collections::BTreeMap;

use stowage_core::domain::catalog::Catalog;

/// (instance type, zone, capacity type).
pub type OfferingKey = (String, String, String);

/// Offerings the cloud refused recently, until when.
#[derive(Clone, Debug)]
pub struct Unavailable<T> {
    until: BTreeMap<OfferingKey, T>,
}

impl<T> Default for Unavailable<T> {
    fn default() -> Self {
        Unavailable { until: BTreeMap::new() }
    }
}

impl<T: Copy + Ord> Unavailable<T> {
    pub fn mark(&mut self, key: OfferingKey, until: T) {
        let e = self.until.entry(key).or_insert(until);
        *e = (*e).max(until);
    }

    /// When the next entry expires.
    pub fn next_expiry(&self) -> Option<T> {
        self.until.values().min().copied()
    }

    /// Forgets entries whose time has come; returns them (the simulator reports them).
    pub fn expire(&mut self, now: T) -> Vec<OfferingKey> {
        let gone: Vec<OfferingKey> = self.until.iter().filter(|(_, t)| **t <= now).map(|(k, _)| k.clone()).collect();
        for k in &gone {
            self.until.remove(k);
        }
        gone
    }

    pub fn contains(&self, instance_type: &str, zone: &str, capacity_type: &str, now: T) -> bool {
        self.until.get(&(instance_type.to_string(), zone.to_string(), capacity_type.to_string())).is_some_and(|t| *t > now)
    }

    pub fn len(&self) -> usize {
        self.until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }

    /// The catalog as the planner must see it at `now`: refused offerings unavailable.
    pub fn view(&self, base: &Catalog, now: T) -> Catalog {
        let mut c = base.clone();
        if self.until.is_empty() {
            return c;
        }
        for t in &mut c.types {
            for o in &mut t.offerings {
                if self.contains(&t.name, &o.zone, &o.capacity_type, now) {
                    o.available = false;
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str) -> OfferingKey {
        (t.into(), "us-east-1a".into(), "spot".into())
    }

    #[test]
    fn an_offering_is_unavailable_until_its_deadline_and_marking_again_keeps_the_later_one() {
        let mut u: Unavailable<u64> = Unavailable::default();
        u.mark(key("m5.large"), 180);
        u.mark(key("m5.large"), 100);
        assert!(u.contains("m5.large", "us-east-1a", "spot", 179));
        assert!(!u.contains("m5.large", "us-east-1a", "spot", 180));
        assert!(!u.contains("m5.large", "us-east-1b", "spot", 0), "zone is part of the key");
        assert_eq!(u.next_expiry(), Some(180));
        assert_eq!(u.expire(179), Vec::<OfferingKey>::new());
        assert_eq!(u.expire(180), vec![key("m5.large")]);
        assert!(u.is_empty());
    }
}
