//! The simulated cloud: instances launched from catalog offerings, a boot delay, launches refused with
//! insufficient capacity when the scenario says so (`failOfferings`), and a bill.
//!
//! Boot time is `launchDelay` plus a share of `launchJitter` fixed by a hash of the node name, so
//! nodes of one batch register in a realistic, uneven but reproducible order. An instance is billed
//! from the moment it runs until it is terminated, at its offering's price.

use std::time::Duration;

use serde::Serialize;

use super::scenario::FailOffering;
use super::time::SimTime;
use stowage_input::ids::stable_hash;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub id: String,
    /// The Node (and NodeClaim) name.
    pub node: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price_per_hour: f64,
    pub running_at: SimTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminated_at: Option<SimTime>,
    /// A node of the scenario's manifests, not launched by the simulation.
    pub adopted: bool,
}

impl Instance {
    /// USD billed up to `now`.
    pub(crate) fn billed(&self, now: SimTime) -> f64 {
        let end = self.terminated_at.unwrap_or(now).min(now);
        self.price_per_hour * end.hours_since(self.running_at)
    }
}

/// Why a launch failed (the EC2 error code).
pub(crate) const INSUFFICIENT_CAPACITY: &str = "InsufficientInstanceCapacity";

/// A launch the cloud refused. Shown as EC2's error code, which is what the timeline reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A `failOfferings` rule of the scenario refuses the offering.
    #[error("{}", INSUFFICIENT_CAPACITY)]
    InsufficientCapacity,
}

pub struct Cloud {
    instances: Vec<Instance>,
    /// Rules and how many more launches each may fail (`None`: every one).
    fail: Vec<(FailOffering, Option<u32>)>,
    launch_delay: Duration,
    launch_jitter: Duration,
    serial: u64,
}

impl Cloud {
    pub fn new(fail: &[FailOffering], launch_delay: Duration, launch_jitter: Duration) -> Self {
        Cloud { instances: Vec::new(), fail: fail.iter().map(|f| (f.clone(), f.times)).collect(), launch_delay, launch_jitter, serial: 0 }
    }

    fn next_id(&mut self, node: &str) -> String {
        self.serial += 1;
        format!("i-0{:016x}", stable_hash(&[node, &self.serial.to_string()]))
    }

    /// How long the instance for `node` takes from the request to running.
    pub(crate) fn boot_time(&self, node: &str) -> Duration {
        let share = (stable_hash(&[node, "boot"]) % 1001) as f64 / 1000.0;
        self.launch_delay + self.launch_jitter.mul_f64(share)
    }

    /// Requests an instance (CreateFleet). The answer is immediate, as EC2's is: an instance id that
    /// will be running at `now + boot_time`, or the error code.
    pub fn launch(&mut self, node: &str, instance_type: &str, zone: &str, capacity_type: &str, price: f64, now: SimTime) -> Result<Instance, LaunchError> {
        for (rule, left) in &mut self.fail {
            if rule.matches(instance_type, zone, capacity_type) && left.is_none_or(|n| n > 0) {
                if let Some(n) = left {
                    *n -= 1;
                }
                return Err(LaunchError::InsufficientCapacity);
            }
        }
        let inst = Instance {
            id: self.next_id(node),
            node: node.to_string(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price_per_hour: price,
            running_at: now.plus(self.boot_time(node)),
            terminated_at: None,
            adopted: false,
        };
        self.instances.push(inst.clone());
        Ok(inst)
    }

    /// Whether a launch of this offering would be refused now (a `failOfferings` rule still applies).
    pub fn refuses(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.fail.iter().any(|(rule, left)| rule.matches(instance_type, zone, capacity_type) && left.is_none_or(|n| n > 0))
    }

    /// Records a node that came with the scenario's manifests, so it is billed like the others.
    pub fn adopt(&mut self, node: &str, instance_type: &str, zone: &str, capacity_type: &str, price: f64, now: SimTime) {
        if self.instances.iter().any(|i| i.node == node && i.terminated_at.is_none()) {
            return;
        }
        let id = self.next_id(node);
        self.instances.push(Instance {
            id,
            node: node.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price_per_hour: price,
            running_at: now,
            terminated_at: None,
            adopted: true,
        });
    }

    pub fn terminate(&mut self, node: &str, now: SimTime) {
        for i in self.instances.iter_mut().filter(|i| i.node == node && i.terminated_at.is_none()) {
            i.terminated_at = Some(now);
        }
    }

    /// The live instance behind a node.
    pub fn instance(&self, node: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.node == node && i.terminated_at.is_none())
    }

    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Hourly price of every instance not terminated (running or booting).
    pub fn cost_per_hour(&self) -> f64 {
        self.instances.iter().filter(|i| i.terminated_at.is_none()).map(|i| i.price_per_hour).sum()
    }

    /// USD billed so far.
    pub fn bill(&self, now: SimTime) -> f64 {
        self.instances.iter().map(|i| i.billed(now)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_offerings_fail_the_given_number_of_times() {
        let rule = FailOffering { instance_type: Some("m5.large".into()), zone: None, capacity_type: Some("spot".into()), times: Some(1) };
        let mut c = Cloud::new(&[rule], Duration::from_secs(30), Duration::ZERO);
        assert_eq!(c.launch("a", "m5.large", "us-east-1a", "spot", 0.03, SimTime(0)).unwrap_err().to_string(), INSUFFICIENT_CAPACITY);
        assert!(c.launch("b", "m5.large", "us-east-1a", "on-demand", 0.096, SimTime(0)).is_ok());
        let i = c.launch("c", "m5.large", "us-east-1a", "spot", 0.03, SimTime(0)).unwrap();
        assert_eq!(i.running_at, SimTime(30_000));
    }

    #[test]
    fn the_bill_counts_running_time_only() {
        let mut c = Cloud::new(&[], Duration::from_secs(60), Duration::ZERO);
        c.launch("a", "t", "z", "on-demand", 1.0, SimTime(0)).unwrap();
        c.terminate("a", SimTime(3_660_000));
        assert!((c.bill(SimTime(7_200_000)) - 1.0).abs() < 1e-9);
        assert_eq!(c.cost_per_hour(), 0.0);
    }
}
