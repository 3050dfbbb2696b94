//! The simulated cloud: instances launched from catalog offerings, a boot delay, launches refused with
//! insufficient capacity when the scenario says so (`failOfferings`), and a bill. It implements the
//! controller's cloud seam, [`stowage_decide::cloud::CloudProvider`], as EC2 does in `stowage-aws`: the
//! simulator launches through the trait, and tests use it as an in-process fake cloud.
//!
//! Boot time is `launchDelay` plus a share of `launchJitter` fixed by a hash of the node name, so
//! nodes of one batch register in a realistic, uneven but reproducible order. An instance is billed
//! from the moment it runs until it is terminated, at its offering's price.
//!
//! A launch is CreateFleet's: the request's offerings are tried in order; refused ones are remembered
//! (the simulator marks them unavailable, as the AWS provider's ICE cache does) and the first one with
//! capacity is launched; when all are refused the launch fails with `InsufficientCapacity` naming them.
//! A capacity reservation takes at most its catalog count of live instances: a launch into a full one
//! is refused like a capacity error (EC2's `ReservationCapacityExceeded`), and the catalog the cloud
//! answers ([`Cloud::reservations_now`]) shows what each still takes. A launch is idempotent per
//! NodeClaim name. The trait's futures are ready at once (no runtime: poll
//! them with [`ready`]); the clock is the simulator's, set with [`Cloud::set_now`].

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;

use super::scenario::FailOffering;
use super::time::SimTime;
use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{self, CloudError, CloudProvider, LaunchRequest, OfferingRef};
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
    /// The capacity reservation it was launched into.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    /// The subnet and security groups it was launched with (its EC2NodeClass's resolved ones at
    /// launch, [`Cloud::set_network`]), if the NodeClass's status names any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_group_ids: Option<Vec<String>>,
}

impl Instance {
    /// USD billed up to `now`.
    pub(crate) fn billed(&self, now: SimTime) -> f64 {
        let end = self.terminated_at.unwrap_or(now).min(now);
        self.price_per_hour * end.hours_since(self.running_at)
    }

    /// `aws:///<zone>/<instance-id>`, as EC2's.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }
}

/// Why a launch failed (the EC2 error code).
pub(crate) const INSUFFICIENT_CAPACITY: &str = "InsufficientInstanceCapacity";

/// Polls a future once: the simulated cloud's futures are ready at once. `None` if one is not (a
/// provider that needs a runtime).
pub fn ready<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

struct State {
    instances: Vec<Instance>,
    /// Rules and how many more launches each may fail (`None`: every one).
    fail: Vec<(FailOffering, Option<u32>)>,
    serial: u64,
    /// Offerings refused by launches since the last [`Cloud::take_refused`].
    refused: Vec<OfferingRef>,
}

pub struct Cloud {
    state: Mutex<State>,
    catalog: Catalog,
    launch_delay: Duration,
    launch_jitter: Duration,
    /// The simulated clock, in milliseconds.
    now: AtomicU64,
}

impl Cloud {
    /// A cloud selling `catalog`'s offerings (what `CloudProvider::catalog` answers).
    pub fn new(catalog: Catalog, fail: &[FailOffering], launch_delay: Duration, launch_jitter: Duration) -> Self {
        let state = State { instances: Vec::new(), fail: fail.iter().map(|f| (f.clone(), f.times)).collect(), serial: 0, refused: Vec::new() };
        Cloud { state: Mutex::new(state), catalog, launch_delay, launch_jitter, now: AtomicU64::new(0) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the clock the trait's calls read.
    pub fn set_now(&self, now: SimTime) {
        self.now.store(now.0, Ordering::Relaxed);
    }

    fn now(&self) -> SimTime {
        SimTime(self.now.load(Ordering::Relaxed))
    }

    /// How long the instance for `node` takes from the request to running.
    pub(crate) fn boot_time(&self, node: &str) -> Duration {
        let share = (stable_hash(&[node, "boot"]) % 1001) as f64 / 1000.0;
        self.launch_delay + self.launch_jitter.mul_f64(share)
    }

    fn next_id(s: &mut State, node: &str) -> String {
        s.serial += 1;
        format!("i-0{:016x}", stable_hash(&[node, &s.serial.to_string()]))
    }

    /// Whether a `failOfferings` rule refuses this launch now; counts it if so.
    fn refuse(s: &mut State, o: &OfferingRef) -> bool {
        for (rule, left) in &mut s.fail {
            if rule.matches(&o.instance_type, &o.zone, &o.capacity_type) && left.is_none_or(|n| n > 0) {
                if let Some(n) = left {
                    *n -= 1;
                }
                return true;
            }
        }
        false
    }

    /// Live instances in reservation `id`.
    fn in_reservation(s: &State, id: &str) -> u32 {
        s.instances.iter().filter(|i| i.terminated_at.is_none() && i.reservation.as_deref() == Some(id)).count() as u32
    }

    /// Whether `o` is a reserved offering whose reservation already has as many live instances as the
    /// cloud's catalog says it takes.
    fn reservation_full(&self, s: &State, o: &OfferingRef) -> bool {
        let Some(r) = &o.reservation else { return false };
        let count = self.catalog.types.iter().flat_map(|t| &t.offerings).find_map(|x| x.reservation.as_ref().filter(|x| x.id == r.id)).map_or(0, |x| x.count);
        Self::in_reservation(s, &r.id) >= count
    }

    /// `catalog` with each reservation's count lowered by its live instances (unavailable when none is
    /// left), as EC2's available instance count would read.
    pub fn reservations_now(&self, mut catalog: Catalog) -> Catalog {
        let s = self.state();
        catalog.take_reservations(|id| Self::in_reservation(&s, id));
        catalog
    }

    /// CreateFleet for `node` (module doc): the instance, running at `now + boot_time`, or the
    /// offerings refused.
    fn launch_at(&self, node: &str, offerings: &[OfferingRef], now: SimTime) -> Result<Instance, Vec<OfferingRef>> {
        let mut s = self.state();
        if let Some(i) = s.instances.iter().find(|i| i.node == node && i.terminated_at.is_none()) {
            return Ok(i.clone());
        }
        let mut refused = Vec::new();
        for o in offerings {
            if Self::refuse(&mut s, o) || self.reservation_full(&s, o) {
                refused.push(o.clone());
                continue;
            }
            s.refused.extend(refused);
            let inst = Instance {
                id: Self::next_id(&mut s, node),
                node: node.to_string(),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                price_per_hour: o.price,
                running_at: now.plus(self.boot_time(node)),
                terminated_at: None,
                adopted: false,
                reservation: o.reservation.as_ref().map(|r| r.id.clone()),
                subnet_id: None,
                security_group_ids: None,
            };
            s.instances.push(inst.clone());
            return Ok(inst);
        }
        s.refused.extend(refused.iter().cloned());
        Err(refused)
    }

    /// Offerings refused since the last call, in the order they were tried.
    pub fn take_refused(&self) -> Vec<OfferingRef> {
        std::mem::take(&mut self.state().refused)
    }

    /// Whether a launch of this offering would be refused now (a `failOfferings` rule still applies).
    pub fn refuses(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        self.state().fail.iter().any(|(rule, left)| rule.matches(instance_type, zone, capacity_type) && left.is_none_or(|n| n > 0))
    }

    /// Records a node that came with the scenario's manifests, so it is billed like the others.
    pub fn adopt(&self, node: &str, instance_type: &str, zone: &str, capacity_type: &str, price: f64, now: SimTime) {
        let mut s = self.state();
        if s.instances.iter().any(|i| i.node == node && i.terminated_at.is_none()) {
            return;
        }
        let id = Self::next_id(&mut s, node);
        s.instances.push(Instance {
            id,
            node: node.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price_per_hour: price,
            running_at: now,
            terminated_at: None,
            adopted: true,
            reservation: None,
            subnet_id: None,
            security_group_ids: None,
        });
    }

    /// Terminates the instance behind a node.
    pub fn terminate_node(&self, node: &str, now: SimTime) {
        for i in self.state().instances.iter_mut().filter(|i| i.node == node && i.terminated_at.is_none()) {
            i.terminated_at = Some(now);
        }
    }

    /// The live instance behind a node.
    pub fn instance(&self, node: &str) -> Option<Instance> {
        self.state().instances.iter().find(|i| i.node == node && i.terminated_at.is_none()).cloned()
    }

    pub fn instances(&self) -> Vec<Instance> {
        self.state().instances.clone()
    }

    /// Hourly price of every instance not terminated (running or booting).
    pub fn cost_per_hour(&self) -> f64 {
        self.state().instances.iter().filter(|i| i.terminated_at.is_none()).map(|i| i.price_per_hour).sum()
    }

    /// USD billed so far.
    pub fn bill(&self, now: SimTime) -> f64 {
        self.state().instances.iter().map(|i| i.billed(now)).sum()
    }

    /// An instance as the cloud seam reports it.
    fn seam(&self, i: &Instance, nodepool: Option<String>) -> cloud::Instance {
        let now = self.now();
        cloud::Instance {
            id: i.id.clone(),
            provider_id: i.provider_id(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type.clone(),
            state: if i.running_at <= now { "running".into() } else { "pending".into() },
            nodepool,
            nodeclaim: (!i.adopted).then(|| i.node.clone()),
            launched_at: (i.running_at.0.saturating_sub(self.boot_time(&i.node).as_millis() as u64) / 1000) as i64,
            image_id: None,
            subnet_id: i.subnet_id.clone(),
            security_group_ids: i.security_group_ids.clone(),
            capacity_reservation_id: i.reservation.clone(),
        }
    }

    /// Records the subnet and security groups the live instance behind `node` runs with.
    pub fn set_network(&self, node: &str, subnet_id: Option<String>, security_group_ids: Option<Vec<String>>) {
        for i in self.state().instances.iter_mut().filter(|i| i.node == node && i.terminated_at.is_none()) {
            i.subnet_id = subnet_id.clone();
            i.security_group_ids = security_group_ids.clone();
        }
    }
}

impl CloudProvider for Cloud {
    fn provider_name(&self) -> &'static str {
        "simulated"
    }

    fn catalog(&self) -> impl Future<Output = Result<Catalog, CloudError>> + Send {
        let c = self.reservations_now(self.catalog.clone());
        async move { Ok(c) }
    }

    fn launch(&self, req: &LaunchRequest) -> impl Future<Output = Result<cloud::Instance, CloudError>> + Send {
        let r = match self.launch_at(&req.nodeclaim, &req.offerings, self.now()) {
            Ok(i) => Ok(self.seam(&i, Some(req.nodepool.clone()))),
            Err(offerings) => Err(CloudError::InsufficientCapacity { offerings, message: INSUFFICIENT_CAPACITY.into() }),
        };
        async move { r }
    }

    fn terminate(&self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let now = self.now();
        let r = {
            let mut s = self.state();
            match s.instances.iter_mut().find(|i| i.terminated_at.is_none() && i.provider_id() == provider_id) {
                Some(i) => {
                    i.terminated_at = Some(now);
                    Ok(())
                }
                None => Err(CloudError::NotFound(provider_id.to_string())),
            }
        };
        async move { r }
    }

    fn list(&self) -> impl Future<Output = Result<Vec<cloud::Instance>, CloudError>> + Send {
        let live: Vec<Instance> = self.state().instances.iter().filter(|i| i.terminated_at.is_none()).cloned().collect();
        let r = live.iter().map(|i| self.seam(i, None)).collect();
        async move { Ok(r) }
    }

    fn tag_registered(&self, provider_id: &str, _nodeclaim: &str, _node: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let found = self.state().instances.iter().any(|i| i.terminated_at.is_none() && i.provider_id() == provider_id);
        let r = if found { Ok(()) } else { Err(CloudError::NotFound(provider_id.to_string())) };
        async move { r }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(t: &str, zone: &str, ct: &str, price: f64) -> OfferingRef {
        OfferingRef { instance_type: t.into(), zone: zone.into(), capacity_type: ct.into(), price, reservation: None }
    }

    fn request(node: &str, offerings: Vec<OfferingRef>) -> LaunchRequest {
        LaunchRequest { nodeclaim: node.into(), nodepool: "np".into(), nodeclass: "default".into(), offerings, labels: Default::default(), taints: Vec::new(), tags: Default::default() }
    }

    #[test]
    fn failing_offerings_fail_the_given_number_of_times_and_fallbacks_launch() {
        let rule = FailOffering { instance_type: Some("m5.large".into()), zone: None, capacity_type: Some("spot".into()), times: Some(1) };
        let c = Cloud::new(Catalog::default(), &[rule], Duration::from_secs(30), Duration::ZERO);
        let e = ready(c.launch(&request("a", vec![offering("m5.large", "us-east-1a", "spot", 0.03)]))).unwrap().unwrap_err();
        assert!(matches!(&e, CloudError::InsufficientCapacity { offerings, .. } if offerings.len() == 1), "{e}");
        assert_eq!(c.take_refused().len(), 1);
        let b = ready(c.launch(&request("b", vec![offering("m5.large", "us-east-1a", "on-demand", 0.096)]))).unwrap().unwrap();
        assert_eq!(b.state, "pending");
        let i = ready(c.launch(&request("c", vec![offering("m5.large", "us-east-1a", "spot", 0.03)]))).unwrap().unwrap();
        assert_eq!(c.instance("c").unwrap().running_at, SimTime(30_000));
        assert_eq!(i.provider_id, format!("aws:///us-east-1a/{}", i.id));
        // A refused first choice falls back to the next offering, in the same launch.
        let rule = FailOffering { instance_type: Some("m5.large".into()), zone: None, capacity_type: None, times: None };
        let c = Cloud::new(Catalog::default(), &[rule], Duration::from_secs(30), Duration::ZERO);
        let i = ready(c.launch(&request("d", vec![offering("m5.large", "us-east-1a", "spot", 0.03), offering("m5.xlarge", "us-east-1a", "spot", 0.06)]))).unwrap().unwrap();
        assert_eq!(i.instance_type, "m5.xlarge");
        assert_eq!(c.take_refused(), vec![offering("m5.large", "us-east-1a", "spot", 0.03)]);
        // Idempotent per NodeClaim.
        let again = ready(c.launch(&request("d", vec![offering("m5.xlarge", "us-east-1a", "spot", 0.06)]))).unwrap().unwrap();
        assert_eq!(again.id, i.id);
        assert_eq!(ready(c.list()).unwrap().unwrap().len(), 1);
        ready(c.terminate(&i.provider_id)).unwrap().unwrap();
        assert!(matches!(ready(c.terminate(&i.provider_id)).unwrap(), Err(CloudError::NotFound(_))));
    }

    #[test]
    fn a_reservation_takes_its_count_of_live_instances() {
        use stowage_core::domain::catalog::{InstanceType, Offering, Reservation};
        let r = Reservation { id: "cr-1".into(), kind: "default".into(), interruptible: false, count: 1 };
        let reserved = Offering { zone: "z".into(), capacity_type: "reserved".into(), price: 0.0, available: true, synthetic: false, reservation: Some(r.clone()) };
        let t = InstanceType {
            name: "t".into(),
            labels: Default::default(),
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: vec![reserved],
            aws: None,
            attach_limits: Default::default(),
        };
        let c = Cloud::new(Catalog { types: vec![t], ..Default::default() }, &[], Duration::from_secs(30), Duration::ZERO);
        let into = OfferingRef { reservation: Some(r), ..offering("t", "z", "reserved", 0.0) };
        let a = ready(c.launch(&request("a", vec![into.clone()]))).unwrap().unwrap();
        assert_eq!(c.instance("a").unwrap().reservation.as_deref(), Some("cr-1"));
        let now = ready(c.catalog()).unwrap().unwrap();
        let o = &now.types[0].offerings[0];
        assert_eq!((o.reservation.as_ref().unwrap().count, o.available), (0, false), "full while its instance lives");
        let e = ready(c.launch(&request("b", vec![into.clone()]))).unwrap().unwrap_err();
        assert!(matches!(e, CloudError::InsufficientCapacity { .. }), "{e}");
        ready(c.terminate(&a.provider_id)).unwrap().unwrap();
        assert!(ready(c.launch(&request("b", vec![into]))).unwrap().is_ok(), "a terminated instance gives its place back");
    }

    #[test]
    fn the_bill_counts_running_time_only() {
        let c = Cloud::new(Catalog::default(), &[], Duration::from_secs(60), Duration::ZERO);
        assert!(ready(c.launch(&request("a", vec![offering("t", "z", "on-demand", 1.0)]))).unwrap().is_ok());
        c.terminate_node("a", SimTime(3_660_000));
        assert!((c.bill(SimTime(7_200_000)) - 1.0).abs() < 1e-9);
        assert_eq!(c.cost_per_hour(), 0.0);
    }
}
