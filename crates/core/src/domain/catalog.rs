//! Instance types and their offerings (zone × capacity type → price).

use super::labels::Labels;
use super::resources::Resources;

pub const SPOT: &str = "spot";
pub const RESERVED: &str = "reserved";

#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
    /// The price was derived, not observed (stowage's default spot prices).
    pub synthetic: bool,
    /// The capacity reservation a `reserved` offering launches into (None for on-demand and spot).
    pub reservation: Option<Reservation>,
}

/// An EC2 capacity reservation as an offering of its instance type in its zone (Karpenter's `reserved`
/// capacity type): at most `count` new nodes launch into it. A reservation is for one instance type in
/// one zone; an instance type has one reserved offering per reservation that the EC2NodeClass selects.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    pub id: String,
    /// `default` or `capacity-block` (`karpenter.k8s.aws/capacity-reservation-type`).
    pub kind: String,
    pub interruptible: bool,
    /// Instances that may still launch into it (EC2's available instance count, less the launches made
    /// since it was read).
    pub count: u32,
}

impl Reservation {
    /// The labels of a node launched into it (Karpenter's `karpenter.k8s.aws/capacity-reservation-*`).
    pub fn labels(&self) -> Labels {
        use super::labels::keys;
        [
            (keys::CAPACITY_RESERVATION_ID.to_string(), self.id.clone()),
            (keys::CAPACITY_RESERVATION_TYPE.to_string(), self.kind.clone()),
            (keys::CAPACITY_RESERVATION_INTERRUPTIBLE.to_string(), self.interruptible.to_string()),
        ]
        .into_iter()
        .collect()
    }
}

impl Offering {
    pub fn reservation_id(&self) -> Option<&str> {
        self.reservation.as_ref().map(|r| r.id.as_str())
    }

    /// Whether this is the offering a node with these labels launches from: its zone, capacity type and
    /// (for reserved capacity) its reservation.
    pub fn is_for(&self, labels: &Labels) -> bool {
        labels.get(super::labels::keys::ZONE) == Some(&self.zone)
            && labels.get(super::labels::keys::CAPACITY_TYPE) == Some(&self.capacity_type)
            && labels.get(super::labels::keys::CAPACITY_RESERVATION_ID).map(String::as_str) == self.reservation_id()
    }
}

/// EC2 facts that let stowage recompute capacity and overhead for an EC2NodeClass's kubelet settings.
#[derive(Clone, Debug, PartialEq)]
pub struct AwsFacts {
    pub vcpu: i64,
    pub memory_mib: i64,
    pub arch: String,
    pub enis_default_card: Option<i64>,
    pub ipv4_per_eni: Option<i64>,
    pub branch_enis: i64,
    pub local_nvme_gb: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    pub name: String,
    /// Labels of every node of this type, except zone, capacity type, region and hostname.
    pub labels: Labels,
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold.
    pub overhead: Resources,
    pub offerings: Vec<Offering>,
    pub aws: Option<AwsFacts>,
    /// What a node of this type will report in its CSINode, per CSI driver (for AWS types, the EBS CSI
    /// driver's limit: `catalog::aws::ebs_attach_limit`). A driver absent here has no limit.
    pub attach_limits: super::node::AttachLimits,
}

impl InstanceType {
    pub fn allocatable(&self) -> Resources {
        let mut a = self.capacity.minus(&self.overhead);
        // Never negative (a kube-reserved larger than a tiny type's capacity).
        a.cpu_m = a.cpu_m.max(0);
        a.memory = a.memory.max(0);
        a.ephemeral = a.ephemeral.max(0);
        a.pods = a.pods.max(0);
        a
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Catalog {
    pub name: String,
    pub region: Option<String>,
    pub zones: Vec<String>,
    pub provenance: Vec<String>,
    pub types: Vec<InstanceType>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.types.iter().find(|t| t.name == name)
    }

    /// Lowers each reservation's count by `taken(id)` instances; a reservation left without any makes its
    /// offering unavailable.
    pub fn take_reservations(&mut self, taken: impl Fn(&str) -> u32) {
        for o in self.types.iter_mut().flat_map(|t| t.offerings.iter_mut()) {
            if let Some(r) = o.reservation.as_mut() {
                r.count = r.count.saturating_sub(taken(&r.id));
                o.available &= r.count > 0;
            }
        }
    }

    pub fn has_synthetic_prices(&self) -> bool {
        self.types.iter().any(|t| t.offerings.iter().any(|o| o.synthetic))
    }
}
