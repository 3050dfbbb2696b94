//! The cluster-default topology spread setting (kube-scheduler's PodTopologySpread plugin args) and
//! the defaulted constraints it gives a pod: data only. The rule, with its formula, is
//! `semantics::spread_defaults` (which re-exports these types).

use serde::{Deserialize, Serialize};

use crate::domain::labels::{LabelSelector, keys};
use crate::domain::pod::{InclusionPolicy, SpreadConstraint, WhenUnsatisfiable};

/// `PodTopologySpreadArgs.defaultingType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DefaultingType {
    /// kube-scheduler's built-in defaults (hostname maxSkew 3, zone maxSkew 5, both ScheduleAnyway).
    #[default]
    System,
    /// The listed `defaultConstraints`; none turns defaulting off.
    List,
}

/// A node inclusion policy as the setting spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    Honor,
    Ignore,
}

impl From<Policy> for InclusionPolicy {
    fn from(p: Policy) -> Self {
        match p {
            Policy::Honor => InclusionPolicy::Honor,
            Policy::Ignore => InclusionPolicy::Ignore,
        }
    }
}

/// `whenUnsatisfiable` as the setting spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    DoNotSchedule,
    ScheduleAnyway,
}

impl From<Action> for WhenUnsatisfiable {
    fn from(a: Action) -> Self {
        match a {
            Action::DoNotSchedule => WhenUnsatisfiable::DoNotSchedule,
            Action::ScheduleAnyway => WhenUnsatisfiable::ScheduleAnyway,
        }
    }
}

/// One of `defaultConstraints`: a `TopologySpreadConstraint` without `labelSelector`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<Policy>,
    /// Accepted as kube-scheduler accepts it; no effect (the deduced selector replaces the default's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
    /// Forbidden (the selector is deduced per pod); read only to say so.
    #[serde(default, skip_serializing)]
    pub label_selector: Option<serde_json::Value>,
}

impl DefaultConstraint {
    fn system(key: &str, max_skew: i32) -> Self {
        DefaultConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: Action::ScheduleAnyway,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
            label_selector: None,
        }
    }

    /// The domain constraint with the deduced selector, marked defaulted.
    fn with_selector(&self, selector: &LabelSelector) -> SpreadConstraint {
        SpreadConstraint {
            max_skew: self.max_skew,
            key: self.topology_key.clone(),
            when: self.when_unsatisfiable.into(),
            selector: Some(selector.clone()),
            min_domains: self.min_domains.unwrap_or(1),
            node_affinity_policy: self.node_affinity_policy.map_or(InclusionPolicy::Honor, Into::into),
            node_taints_policy: self.node_taints_policy.map_or(InclusionPolicy::Ignore, Into::into),
            defaulted: true,
        }
    }
}

/// The `topologySpreadDefaults` setting: kube-scheduler's PodTopologySpread plugin args.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadDefaults {
    #[serde(default)]
    pub defaulting_type: DefaultingType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_constraints: Vec<DefaultConstraint>,
}

impl SpreadDefaults {
    /// `defaultingType: List` with these constraints.
    pub fn list(default_constraints: Vec<DefaultConstraint>) -> Self {
        SpreadDefaults { defaulting_type: DefaultingType::List, default_constraints }
    }

    /// The constraints in force: the System pair, or the list.
    pub fn constraints(&self) -> Vec<DefaultConstraint> {
        match self.defaulting_type {
            DefaultingType::System => vec![DefaultConstraint::system(keys::HOSTNAME, 3), DefaultConstraint::system(keys::ZONE, 5)],
            DefaultingType::List => self.default_constraints.clone(),
        }
    }

    /// kube-scheduler's `ValidatePodTopologySpreadArgs`, plus minDomains ≥ 1. Errors name the field
    /// under `prefix` (`topologySpreadDefaults`).
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        if self.defaulting_type == DefaultingType::System && !self.default_constraints.is_empty() {
            return Err(format!("{prefix}.defaultingType: System cannot be used with defaultConstraints (use List to give your own)"));
        }
        for (i, c) in self.default_constraints.iter().enumerate() {
            let f = format!("{prefix}.defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                return Err(format!("{f}.maxSkew: must be at least 1, got {}", c.max_skew));
            }
            if let Err(e) = label_key(&c.topology_key) {
                return Err(format!("{f}.topologyKey: {e}"));
            }
            if c.label_selector.is_some() {
                return Err(format!("{f}.labelSelector: forbidden: a default constraint must not define a selector, as it is deduced for each pod"));
            }
            if let Some(md) = c.min_domains
                && md < 1
            {
                return Err(format!("{f}.minDomains: must be at least 1, got {md}"));
            }
            if let Some(j) = self.default_constraints[..i].iter().position(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable) {
                return Err(format!("{f}: duplicate of defaultConstraints[{j}] ({}, {:?})", c.topology_key, c.when_unsatisfiable));
            }
        }
        Ok(())
    }

    /// The defaulted constraints a pod gets (the module comment): none if it has constraints of its own
    /// or no selector was deduced, else the `DoNotSchedule` defaults with `selector` (defaulted
    /// `ScheduleAnyway` constraints only score and are not kept).
    pub fn filtering_for(&self, own: &[SpreadConstraint], selector: Option<&LabelSelector>) -> Vec<SpreadConstraint> {
        let Some(sel) = selector.filter(|s| !s.requirements.is_empty()) else { return Vec::new() };
        if !own.is_empty() {
            return Vec::new();
        }
        self.constraints().iter().filter(|c| c.when_unsatisfiable == Action::DoNotSchedule).map(|c| c.with_selector(sel)).collect()
    }
}

/// A qualified label name (apimachinery `ValidateLabelName`): `[prefix/]name`, the name 1-63 characters
/// of alphanumerics, `-`, `_`, `.`, beginning and ending alphanumeric; the prefix a DNS subdomain.
fn label_key(k: &str) -> Result<(), String> {
    if k.is_empty() {
        return Err("required (a node label key such as topology.kubernetes.io/zone)".into());
    }
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty() && name.len() <= 63 && name.starts_with(alnum) && name.ends_with(alnum) && name.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| !l.is_empty() && l.len() <= 63 && l.starts_with(alnum) && l.ends_with(alnum) && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    });
    if name_ok && prefix_ok { Ok(()) } else { Err(format!("{k:?} is not a valid label key ([prefix/]name: a DNS subdomain prefix, a name of at most 63 alphanumerics, '-', '_', '.')")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::{SelectorOp, SelectorRequirement};

    fn sel() -> LabelSelector {
        LabelSelector::everything().and(SelectorRequirement::new("app", SelectorOp::In, ["web"]))
    }

    fn zone_hard() -> DefaultConstraint {
        DefaultConstraint { when_unsatisfiable: Action::DoNotSchedule, ..DefaultConstraint::system(keys::ZONE, 1) }
    }

    #[test]
    fn system_defaults_never_filter() {
        let s = SpreadDefaults::default();
        assert_eq!(s.constraints().len(), 2);
        assert!(s.constraints().iter().all(|c| c.when_unsatisfiable == Action::ScheduleAnyway));
        assert!(s.filtering_for(&[], Some(&sel())).is_empty());
    }

    #[test]
    fn list_defaults_filter_with_the_deduced_selector_and_only_without_own_constraints() {
        let s = SpreadDefaults::list(vec![zone_hard(), DefaultConstraint::system(keys::HOSTNAME, 2)]);
        let got = s.filtering_for(&[], Some(&sel()));
        assert_eq!(got.len(), 1, "{got:?}");
        let c = &got[0];
        assert!(c.defaulted && c.is_hard() && c.key == keys::ZONE && c.max_skew == 1 && c.min_domains == 1);
        assert_eq!(c.selector, Some(sel()));
        assert_eq!((c.node_affinity_policy, c.node_taints_policy), (InclusionPolicy::Honor, InclusionPolicy::Ignore));
        // The pod's own constraints win; no selector or an empty one: no default.
        assert!(s.filtering_for(&got, Some(&sel())).is_empty());
        assert!(s.filtering_for(&[], None).is_empty());
        assert!(s.filtering_for(&[], Some(&LabelSelector::everything())).is_empty());
        assert!(SpreadDefaults::list(vec![]).filtering_for(&[], Some(&sel())).is_empty());
    }

    #[test]
    fn validation_mirrors_kube_scheduler() {
        assert!(SpreadDefaults::default().validate("t").is_ok());
        assert!(SpreadDefaults::list(vec![]).validate("t").is_ok());
        assert!(SpreadDefaults::list(vec![zone_hard()]).validate("t").is_ok());
        let cases: Vec<(SpreadDefaults, &str)> = vec![
            (SpreadDefaults { defaulting_type: DefaultingType::System, default_constraints: vec![zone_hard()] }, "t.defaultingType"),
            (SpreadDefaults::list(vec![DefaultConstraint { max_skew: 0, ..zone_hard() }]), "t.defaultConstraints[0].maxSkew"),
            (SpreadDefaults::list(vec![DefaultConstraint { topology_key: String::new(), ..zone_hard() }]), "t.defaultConstraints[0].topologyKey"),
            (SpreadDefaults::list(vec![DefaultConstraint { topology_key: "bad key".into(), ..zone_hard() }]), "t.defaultConstraints[0].topologyKey"),
            (SpreadDefaults::list(vec![DefaultConstraint { topology_key: "-x.io/zone".into(), ..zone_hard() }]), "t.defaultConstraints[0].topologyKey"),
            (SpreadDefaults::list(vec![DefaultConstraint { label_selector: Some(serde_json::json!({})), ..zone_hard() }]), "t.defaultConstraints[0].labelSelector"),
            (SpreadDefaults::list(vec![DefaultConstraint { min_domains: Some(0), ..zone_hard() }]), "t.defaultConstraints[0].minDomains"),
            (SpreadDefaults::list(vec![zone_hard(), DefaultConstraint { max_skew: 2, ..zone_hard() }]), "t.defaultConstraints[1]: duplicate"),
        ];
        for (s, want) in cases {
            let e = s.validate("t").expect_err(want);
            assert!(e.starts_with(want), "{want}: {e}");
        }
        // Same key, other action: allowed.
        let ok = SpreadDefaults::list(vec![zone_hard(), DefaultConstraint::system(keys::ZONE, 5)]);
        assert!(ok.validate("t").is_ok());
    }
}
