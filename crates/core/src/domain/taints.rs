//! Taints and tolerations, as data. Matching rules: `semantics::taints`.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl Effect {
    pub fn parse(s: &str) -> Option<Effect> {
        Some(match s {
            "NoSchedule" => Effect::NoSchedule,
            "PreferNoSchedule" => Effect::PreferNoSchedule,
            "NoExecute" => Effect::NoExecute,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::NoSchedule => "NoSchedule",
            Effect::PreferNoSchedule => "PreferNoSchedule",
            Effect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: Effect,
}

impl Taint {
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: Effect) -> Self {
        Taint { key: key.into(), value: value.into(), effect }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() { write!(f, "{}:{}", self.key, self.effect.as_str()) } else { write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str()) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TolerationOp {
    Equal,
    Exists,
}

/// A toleration. An empty `key` with `Exists` tolerates every taint; `effect == None` matches all
/// effects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Toleration {
    pub key: String,
    pub op: TolerationOp,
    pub value: String,
    pub effect: Option<Effect>,
}

impl Toleration {
    pub fn exists(key: impl Into<String>, effect: Option<Effect>) -> Self {
        Toleration { key: key.into(), op: TolerationOp::Exists, value: String::new(), effect }
    }

    pub fn equal(key: impl Into<String>, value: impl Into<String>, effect: Option<Effect>) -> Self {
        Toleration { key: key.into(), op: TolerationOp::Equal, value: value.into(), effect }
    }
}

/// Well-known taints.
pub mod well_known {
    pub(crate) const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    pub(crate) const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
    pub(crate) const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
    pub(crate) const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
    pub(crate) const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
    pub const KARPENTER_UNREGISTERED: &str = "karpenter.sh/unregistered";
    pub const KARPENTER_DISRUPTED: &str = "karpenter.sh/disrupted";
}
