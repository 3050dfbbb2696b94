//! Pure data types. No IO, no Kubernetes client, no cloud SDK, no async runtime.

pub mod catalog;
pub mod cluster;
pub mod labels;
pub mod node;
pub mod nodepool;
pub mod pod;
pub mod resources;
pub mod spread_defaults;
pub mod taints;

pub use catalog::{Catalog, InstanceType, Offering};
pub use cluster::{Cluster, DaemonSet};
pub use labels::{LabelSelector, Labels, NodeMatcher, NodeOp, NodeRequirement, NodeSelectorTerm};
pub use node::Node;
pub use nodepool::{NodeClass, NodePool};
pub use pod::{Pod, PodId};
pub use resources::Resources;
pub use taints::{Effect, Taint, Toleration};
