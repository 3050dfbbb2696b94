//! Labels, node selectors and pod label selectors, as data. What they mean (matching) lives in
//! `semantics::node_affinity` and `semantics::selectors`.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

/// Well-known label keys.
pub mod keys {
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    pub const REGION: &str = "topology.kubernetes.io/region";
    pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
    pub const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
    pub const NODEPOOL: &str = "karpenter.sh/nodepool";
    pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
    /// The labels of a node launched into a capacity reservation (`reserved` capacity type).
    pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
    pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
    pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str = "karpenter.k8s.aws/capacity-reservation-interruptible";
    pub const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
}

/// Operators of node selector requirements (`NodeSelectorOperator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    /// Karpenter v1.14 NodePool / NodeClaim requirements only (kube-apiserver refuses them in pods):
    /// the label is an integer ≥ / ≤ the value.
    Gte,
    Lte,
}

impl NodeOp {
    pub fn parse(s: &str) -> Option<NodeOp> {
        Some(match s {
            "In" => NodeOp::In,
            "NotIn" => NodeOp::NotIn,
            "Exists" => NodeOp::Exists,
            "DoesNotExist" => NodeOp::DoesNotExist,
            "Gt" => NodeOp::Gt,
            "Lt" => NodeOp::Lt,
            "Gte" => NodeOp::Gte,
            "Lte" => NodeOp::Lte,
            _ => return None,
        })
    }

    /// Gt, Lt, Gte, Lte: one integer value, compared numerically.
    pub fn is_numeric(self) -> bool {
        matches!(self, NodeOp::Gt | NodeOp::Lt | NodeOp::Gte | NodeOp::Lte)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeOp::In => "In",
            NodeOp::NotIn => "NotIn",
            NodeOp::Exists => "Exists",
            NodeOp::DoesNotExist => "DoesNotExist",
            NodeOp::Gt => "Gt",
            NodeOp::Lt => "Lt",
            NodeOp::Gte => "Gte",
            NodeOp::Lte => "Lte",
        }
    }
}

/// One requirement on a node label (or, in `match_fields`, on the node name).
/// Invariant (checked by the loader): In/NotIn have at least one value, Exists/DoesNotExist none,
/// Gt/Lt/Gte/Lte exactly one integer, kept in `int`. `values` is sorted and deduplicated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeRequirement {
    pub key: String,
    pub op: NodeOp,
    pub values: Vec<String>,
    pub int: i64,
}

impl NodeRequirement {
    pub fn new(key: impl Into<String>, op: NodeOp, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        values.sort();
        values.dedup();
        let int = if op.is_numeric() { values.first().and_then(|v| v.parse().ok()).unwrap_or(0) } else { 0 };
        NodeRequirement { key: key.into(), op, values, int }
    }

    pub fn is_in(key: impl Into<String>, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::new(key, NodeOp::In, values)
    }

    pub(crate) fn has_value(&self, v: &str) -> bool {
        self.values.binary_search_by(|x| x.as_str().cmp(v)).is_ok()
    }
}

/// A node selector term: expressions and fields are ANDed. An empty term matches nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeSelectorTerm {
    pub expressions: Vec<NodeRequirement>,
    /// Only `metadata.name` is supported by Kubernetes; stored with key `metadata.name`.
    pub fields: Vec<NodeRequirement>,
}

/// What a pod requires of its node: `spec.nodeSelector` (ANDed) and the required node affinity terms
/// (ORed). `terms == None` means no required node affinity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeMatcher {
    pub selector: Vec<(String, String)>,
    pub terms: Option<Vec<NodeSelectorTerm>>,
}

impl NodeMatcher {
    pub fn is_empty(&self) -> bool {
        self.selector.is_empty() && self.terms.is_none()
    }
}

/// A weighted preferred scheduling term (scores only).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PreferredTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

/// Operators of pod label selectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl SelectorOp {
    pub fn parse(s: &str) -> Option<SelectorOp> {
        Some(match s {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectorRequirement {
    pub key: String,
    pub op: SelectorOp,
    /// Sorted, deduplicated.
    pub values: Vec<String>,
}

impl SelectorRequirement {
    pub fn new(key: impl Into<String>, op: SelectorOp, values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        values.sort();
        values.dedup();
        SelectorRequirement { key: key.into(), op, values }
    }
}

/// A pod label selector (`metav1.LabelSelector`), matchLabels folded into `In` requirements. An empty
/// selector matches every pod; "no selector" is represented by `Option::None` where Kubernetes says a
/// nil selector matches nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    pub requirements: Vec<SelectorRequirement>,
}

impl LabelSelector {
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    #[cfg(test)]
    pub(crate) fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut requirements: Vec<SelectorRequirement> = labels.into_iter().map(|(k, v)| SelectorRequirement::new(k, SelectorOp::In, [v])).collect();
        requirements.sort();
        LabelSelector { requirements }
    }

    pub fn and(mut self, req: SelectorRequirement) -> Self {
        self.requirements.push(req);
        self.requirements.sort();
        self.requirements.dedup();
        self
    }
}
