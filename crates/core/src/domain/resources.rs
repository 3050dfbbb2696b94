//! Resource vectors: what a pod requests and what a node offers.
//!
//! CPU is kept in millicores; every other resource in whole units (bytes for memory and ephemeral
//! storage, counts for pods and extended resources), which is how kube-scheduler's NodeResourcesFit
//! compares them (`MilliValue()` for cpu, `Value()` for the rest).
//!
//! Arithmetic saturates at the bounds of `i64`: every quantity the loader accepts is below 9·10^18, but
//! sums over containers, pods or nodes can pass `i64::MAX`; saturated, such a request simply fits no
//! node instead of overflowing.

use std::fmt;

pub const CPU: &str = "cpu";
pub(crate) const MEMORY: &str = "memory";
pub(crate) const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A resource amount vector. The four common resources have fields; extended resources
/// (`nvidia.com/gpu`, `vpc.amazonaws.com/pod-eni`, hugepages, ...) live in a short sorted list with no
/// zero entries, so equal vectors compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    pub cpu_m: i64,
    pub memory: i64,
    pub ephemeral: i64,
    pub pods: i64,
    extended: Vec<(String, i64)>,
}

impl Resources {
    pub fn new(cpu_m: i64, memory: i64, ephemeral: i64, pods: i64) -> Self {
        Resources { cpu_m, memory, ephemeral, pods, extended: Vec::new() }
    }

    /// Sets one resource by its Kubernetes name. `amount` is millicores for cpu, whole units otherwise.
    pub fn set(&mut self, name: &str, amount: i64) {
        match name {
            CPU => self.cpu_m = amount,
            MEMORY => self.memory = amount,
            EPHEMERAL_STORAGE => self.ephemeral = amount,
            PODS => self.pods = amount,
            _ => match self.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) if amount == 0 => {
                    self.extended.remove(i);
                }
                Ok(i) => self.extended[i].1 = amount,
                Err(_) if amount == 0 => {}
                Err(i) => self.extended.insert(i, (name.to_string(), amount)),
            },
        }
    }

    pub fn with(mut self, name: &str, amount: i64) -> Self {
        self.set(name, amount);
        self
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu_m,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral,
            PODS => self.pods,
            _ => self.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)).map(|i| self.extended[i].1).unwrap_or(0),
        }
    }

    pub fn extended(&self) -> &[(String, i64)] {
        &self.extended
    }

    /// Every (name, amount) pair with a non-zero amount, common resources first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        [(CPU, self.cpu_m), (MEMORY, self.memory), (EPHEMERAL_STORAGE, self.ephemeral), (PODS, self.pods)]
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .chain(self.extended.iter().map(|(n, v)| (n.as_str(), *v)))
    }

    pub fn add(&mut self, other: &Resources) {
        self.cpu_m = self.cpu_m.saturating_add(other.cpu_m);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral = self.ephemeral.saturating_add(other.ephemeral);
        self.pods = self.pods.saturating_add(other.pods);
        for (n, v) in &other.extended {
            let cur = self.get(n);
            self.set(n, cur.saturating_add(*v));
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        self.cpu_m = self.cpu_m.saturating_sub(other.cpu_m);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral = self.ephemeral.saturating_sub(other.ephemeral);
        self.pods = self.pods.saturating_sub(other.pods);
        for (n, v) in &other.extended {
            let cur = self.get(n);
            self.set(n, cur.saturating_sub(*v));
        }
    }

    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    pub fn minus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.sub(other);
        r
    }

    /// Component-wise maximum.
    pub(crate) fn max_each(&self, other: &Resources) -> Resources {
        let mut r = Resources::new(self.cpu_m.max(other.cpu_m), self.memory.max(other.memory), self.ephemeral.max(other.ephemeral), self.pods.max(other.pods));
        for (n, _) in self.extended.iter().chain(other.extended.iter()) {
            r.set(n, self.get(n).max(other.get(n)));
        }
        r
    }

    pub fn scaled(&self, k: i64) -> Resources {
        let mut r = Resources::new(self.cpu_m.saturating_mul(k), self.memory.saturating_mul(k), self.ephemeral.saturating_mul(k), self.pods.saturating_mul(k));
        for (n, v) in &self.extended {
            r.set(n, v.saturating_mul(k));
        }
        r
    }

    /// NodeResourcesFit for a request against what is free: every requested amount must be available.
    /// Resources the request does not name are not checked (kube-scheduler checks only requested ones;
    /// the pod slot is always requested).
    pub fn fits_in(&self, free: &Resources) -> bool {
        self.first_shortage(free).is_none()
    }

    /// `self.fits_in(&cap.minus(used))` without building the difference (a hot path: the local
    /// improvement asks it of every node it scans).
    pub(crate) fn fits_beside(&self, used: &Resources, cap: &Resources) -> bool {
        let ok = |r: i64, u: i64, c: i64| r <= 0 || r <= c.saturating_sub(u);
        ok(self.cpu_m, used.cpu_m, cap.cpu_m)
            && ok(self.memory, used.memory, cap.memory)
            && ok(self.ephemeral, used.ephemeral, cap.ephemeral)
            && ok(self.pods, used.pods, cap.pods)
            && self.extended.iter().all(|(n, v)| ok(*v, used.get(n), cap.get(n)))
    }

    /// The first resource (in Kubernetes' order: cpu, memory, ephemeral-storage, pods, extended) whose
    /// request exceeds what is free.
    pub(crate) fn first_shortage(&self, free: &Resources) -> Option<&str> {
        if self.cpu_m > 0 && self.cpu_m > free.cpu_m {
            return Some(CPU);
        }
        if self.memory > 0 && self.memory > free.memory {
            return Some(MEMORY);
        }
        if self.ephemeral > 0 && self.ephemeral > free.ephemeral {
            return Some(EPHEMERAL_STORAGE);
        }
        if self.pods > 0 && self.pods > free.pods {
            return Some(PODS);
        }
        self.extended.iter().find(|(n, v)| *v > 0 && *v > free.get(n)).map(|(n, _)| n.as_str())
    }

    /// How many copies of `self` fit into `free` (u32::MAX if `self` requests nothing).
    pub(crate) fn copies_in(&self, free: &Resources) -> u32 {
        let mut k = i64::MAX;
        // The common resources by field (a hot path of the greedy planner's look-ahead), then the rest.
        for (v, f) in [(self.cpu_m, free.cpu_m), (self.memory, free.memory), (self.ephemeral, free.ephemeral), (self.pods, free.pods)] {
            if v > 0 {
                k = k.min(f.max(0) / v);
            }
        }
        for (n, v) in &self.extended {
            if *v > 0 {
                k = k.min(free.get(n).max(0) / v);
            }
        }
        k.min(u32::MAX as i64) as u32
    }

    /// Names of all resources with a non-zero amount in either vector.
    pub fn names<'a>(&'a self, other: &'a Resources) -> Vec<&'a str> {
        let mut v: Vec<&str> = self.iter().map(|(n, _)| n).chain(other.iter().map(|(n, _)| n)).collect();
        v.sort();
        v.dedup();
        v
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (n, v) in self.iter() {
            if !first {
                write!(f, ", ")?;
            }
            first = false;
            write!(f, "{n}={}", format_amount(n, v))?;
        }
        if first {
            write!(f, "(none)")?;
        }
        Ok(())
    }
}

/// Formats an amount the way Kubernetes users read it: cpu in cores or millicores, bytes in Mi/Gi.
pub fn format_amount(name: &str, v: i64) -> String {
    match name {
        CPU if v % 1000 == 0 => format!("{}", v / 1000),
        CPU => format!("{v}m"),
        MEMORY | EPHEMERAL_STORAGE => {
            const GI: i64 = 1 << 30;
            const MI: i64 = 1 << 20;
            if v % GI == 0 {
                format!("{}Gi", v / GI)
            } else if v % MI == 0 {
                format!("{}Mi", v / MI)
            } else {
                format!("{v}")
            }
        }
        _ => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resources_stay_sorted_and_drop_zeros() {
        let mut r = Resources::default().with("nvidia.com/gpu", 2).with("amd.com/gpu", 1);
        assert_eq!(r.extended(), &[("amd.com/gpu".to_string(), 1), ("nvidia.com/gpu".to_string(), 2)]);
        r.set("amd.com/gpu", 0);
        assert_eq!(r.extended(), &[("nvidia.com/gpu".to_string(), 2)]);
        assert_eq!(r, Resources::default().with("nvidia.com/gpu", 2));
    }

    #[test]
    fn fit_checks_only_requested_resources() {
        let free = Resources::new(1000, 1 << 30, 0, 10);
        let req = Resources::new(500, 0, 0, 1);
        assert!(req.fits_in(&free));
        let gpu = req.clone().with("nvidia.com/gpu", 1);
        assert_eq!(gpu.first_shortage(&free), Some("nvidia.com/gpu"));
        let big = Resources::new(1001, 0, 0, 1);
        assert_eq!(big.first_shortage(&free), Some(CPU));
    }

    #[test]
    fn arithmetic_saturates() {
        let huge = Resources::new(0, 4_000_000_000_000_000_000, 0, 1).with("nvidia.com/gpu", i64::MAX);
        let sum = huge.plus(&huge).plus(&huge);
        assert_eq!(sum.memory, i64::MAX);
        assert_eq!(sum.get("nvidia.com/gpu"), i64::MAX);
        assert_eq!(Resources::default().minus(&sum).memory, -i64::MAX);
        assert_eq!(huge.scaled(3).memory, i64::MAX);
        assert!(!sum.fits_in(&huge));
    }

    #[test]
    fn copies_counts_the_binding_dimension() {
        let free = Resources::new(1930, 6903 << 20, 17 << 30, 29);
        let pod = Resources::new(100, 0, 0, 1);
        assert_eq!(pod.copies_in(&free), 19);
        let tiny = Resources::new(0, 0, 0, 1);
        assert_eq!(tiny.copies_in(&free), 29);
    }
}
