//! Cluster-default topology spread: kube-scheduler's PodTopologySpread `defaultingType` and
//! `defaultConstraints` (`podtopologyspread/plugin.go`, `common.go` `buildDefaultConstraints`,
//! `helper/spread.go` `DefaultSelector`; KEP-1258).
//!
//! ```text
//! constraints(pod) = pod.spec.topologySpreadConstraints                      if it has any
//!                  = { c with selector S | c ∈ defaults(setting) }           if S = DefaultSelector(pod) ≠ ∅
//!                  = ∅                                                       otherwise
//!
//! defaults(System)    = { hostname maxSkew 3 ScheduleAnyway, zone maxSkew 5 ScheduleAnyway }
//! defaults(List, cs)  = cs                                   (List with no constraints: defaulting off)
//! DefaultSelector(p)  = ⋀ selector of every Service in p's namespace whose (non-nil) selector matches
//!                       p's labels, ∧ the selector of p's controller if it is a ReplicationController,
//!                       ReplicaSet or StatefulSet (an empty result: no default applies)
//! ```
//!
//! The selector replaces whatever the default would carry (so `matchLabelKeys` of a default has no
//! effect, as in kube-scheduler); minDomains defaults to 1, nodeAffinityPolicy to Honor,
//! nodeTaintsPolicy to Ignore. A default with `DoNotSchedule` filters like the pod's own constraint;
//! one with `ScheduleAnyway` only scores (the System defaults never filter).
//!
//! Where stowage applies them: once, when the workload is built (`stowage_input`, which knows the
//! Services and controllers); the domain pod then carries its defaulted `DoNotSchedule` constraints
//! marked [`SpreadConstraint::defaulted`](crate::domain::pod::SpreadConstraint::defaulted), so planners, checker, simulator and controller see the same
//! constraints. Defaulted `ScheduleAnyway` constraints are not kept: kube-scheduler only scores them,
//! and stowage prices (and a preference policy hardens) only what the pod itself asked for.
//! stowage's hostname intent rule (`spread`, `hostnameSpread: intent`) is about the user's intent too:
//! a defaulted hostname constraint is judged by kube-scheduler's rule alone.

pub use crate::domain::spread_defaults::{Action, DefaultConstraint, DefaultingType, Policy, SpreadDefaults};
