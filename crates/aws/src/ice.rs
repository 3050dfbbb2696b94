//! The unavailable-offerings ("ICE") cache: offerings that just failed with a capacity error.
//!
//! Karpenter's `pkg/cache/unavailableofferings.go`: entries keyed `<capacityType>:<instanceType>:<zone>`
//! live 3 minutes; marking again restarts the TTL. While an offering is in the cache, `catalog()`
//! reports it `available: false` and `launch` leaves it out of CreateFleet. Subnets that ran out of
//! addresses (`InsufficientFreeAddressesInSubnet`) are cached the same way under `subnet:<id>` and are
//! not chosen for a zone while cached.
//!
//! Time is passed in (`*_at` methods) so that tests can step it; the provider uses `Instant::now()`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Karpenter's `UnavailableOfferingsTTL`.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(180);

/// `<capacityType>:<instanceType>:<zone>`, Karpenter's key.
pub(crate) fn offering_key(capacity_type: &str, instance_type: &str, zone: &str) -> String {
    format!("{capacity_type}:{instance_type}:{zone}")
}

pub(crate) fn subnet_key(subnet_id: &str) -> String {
    format!("subnet:{subnet_id}")
}

/// One live entry, for display.
#[derive(Clone, Debug, PartialEq)]
pub struct IceEntry {
    pub key: String,
    /// The EC2 error code that put it there.
    pub reason: String,
    pub expires_in: Duration,
}

#[derive(Debug)]
pub struct IceCache {
    ttl: Duration,
    entries: Mutex<BTreeMap<String, (Instant, String)>>,
}

impl IceCache {
    pub fn new(ttl: Duration) -> Self {
        IceCache { ttl, entries: Mutex::new(BTreeMap::new()) }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Instant, String)>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts/removes).
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn mark(&self, key: &str, reason: &str) {
        self.mark_at(key, reason, Instant::now());
    }

    pub(crate) fn mark_at(&self, key: &str, reason: &str, now: Instant) {
        self.lock().insert(key.to_string(), (now + self.ttl, reason.to_string()));
    }

    pub fn contains(&self, key: &str) -> bool {
        self.contains_at(key, Instant::now())
    }

    pub(crate) fn contains_at(&self, key: &str, now: Instant) -> bool {
        let mut m = self.lock();
        match m.get(key) {
            Some((until, _)) if *until > now => true,
            Some(_) => {
                m.remove(key);
                false
            }
            None => false,
        }
    }

    pub(crate) fn offering_unavailable(&self, capacity_type: &str, instance_type: &str, zone: &str) -> bool {
        self.contains(&offering_key(capacity_type, instance_type, zone))
    }

    /// Live entries, sorted by key (expired ones are dropped).
    pub fn entries(&self) -> Vec<IceEntry> {
        self.entries_at(Instant::now())
    }

    pub(crate) fn entries_at(&self, now: Instant) -> Vec<IceEntry> {
        let mut m = self.lock();
        m.retain(|_, (until, _)| *until > now);
        m.iter().map(|(k, (until, reason))| IceEntry { key: k.clone(), reason: reason.clone(), expires_in: *until - now }).collect()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_ttl_and_re_marking_restarts_it() {
        let c = IceCache::new(Duration::from_secs(180));
        let t0 = Instant::now();
        let k = offering_key("spot", "m5.large", "us-east-1a");
        assert_eq!(k, "spot:m5.large:us-east-1a");
        c.mark_at(&k, "InsufficientInstanceCapacity", t0);
        assert!(c.contains_at(&k, t0 + Duration::from_secs(179)));
        c.mark_at(&k, "InsufficientInstanceCapacity", t0 + Duration::from_secs(100));
        assert!(c.contains_at(&k, t0 + Duration::from_secs(250)));
        assert!(!c.contains_at(&k, t0 + Duration::from_secs(281)));
        assert!(c.entries_at(t0).is_empty(), "expired entries are removed");
        assert!(!c.contains_at(&offering_key("on-demand", "m5.large", "us-east-1a"), t0), "capacity types are separate");
    }
}
