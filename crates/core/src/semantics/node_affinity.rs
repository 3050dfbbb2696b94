//! Node selector and node affinity (`nodeaffinity/node_affinity.go`, component-helpers
//! `scheduling/corev1/nodeaffinity`).
//!
//! ```text
//! fits(pod, node) = ∀ (k,v) ∈ nodeSelector: node.labels[k] == v
//!                 ∧ (no required affinity ∨ ∃ term: ∀ expr ∈ term: expr(node))      terms ORed
//! In            label present ∧ value ∈ values
//! NotIn         label absent  ∨ value ∉ values
//! Exists        label present
//! DoesNotExist  label absent
//! Gt / Lt       label present ∧ value parses as an integer ∧ value > / < the requirement's integer
//! Gte / Lte     the same with ≥ / ≤ (Karpenter v1.14; NodePool and NodeClaim requirements only)
//! ```
//!
//! An empty term (no expressions, no fields) matches nothing. `matchFields` only supports
//! `metadata.name`. Preferred terms only score.

use crate::domain::labels::{Labels, NodeMatcher, NodeOp, NodeRequirement, NodeSelectorTerm, PreferredTerm};

use super::{Plugin, Reject};

/// Evaluates one requirement against a label value (`None` = label absent).
pub fn requirement_matches_value(req: &NodeRequirement, value: Option<&str>) -> bool {
    match req.op {
        NodeOp::In => value.is_some_and(|v| req.has_value(v)),
        NodeOp::NotIn => value.is_none_or(|v| !req.has_value(v)),
        NodeOp::Exists => value.is_some(),
        NodeOp::DoesNotExist => value.is_none(),
        NodeOp::Gt => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|n| n > req.int),
        NodeOp::Lt => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|n| n < req.int),
        NodeOp::Gte => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|n| n >= req.int),
        NodeOp::Lte => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|n| n <= req.int),
    }
}

pub fn requirement_matches(req: &NodeRequirement, labels: &Labels) -> bool {
    requirement_matches_value(req, labels.get(&req.key).map(String::as_str))
}

/// A term matches when all its expressions and fields match; an empty term matches nothing.
/// `node_name == None` stands for a node whose name is not known yet (a node the plan will launch):
/// field requirements `In` fail on it and `NotIn` pass.
pub fn term_matches(term: &NodeSelectorTerm, labels: &Labels, node_name: Option<&str>) -> bool {
    if term.expressions.is_empty() && term.fields.is_empty() {
        return false;
    }
    term.expressions.iter().all(|r| requirement_matches(r, labels)) && term.fields.iter().all(|r| requirement_matches_value(r, node_name))
}

/// Terms are ORed.
pub fn terms_match(terms: &[NodeSelectorTerm], labels: &Labels, node_name: Option<&str>) -> bool {
    terms.iter().any(|t| term_matches(t, labels, node_name))
}

/// nodeSelector AND required node affinity.
pub fn matcher_matches(m: &NodeMatcher, labels: &Labels, node_name: Option<&str>) -> bool {
    m.selector.iter().all(|(k, v)| labels.get(k).is_some_and(|x| x == v)) && m.terms.as_ref().is_none_or(|terms| terms_match(terms, labels, node_name))
}

/// The NodeAffinity filter.
pub fn filter(m: &NodeMatcher, labels: &Labels, node_name: Option<&str>) -> Result<(), Reject> {
    if matcher_matches(m, labels, node_name) { Ok(()) } else { Err(Reject::unresolvable(Plugin::NodeAffinity, "node(s) didn't match Pod's node affinity/selector")) }
}

/// Sum of the weights of the preferred terms the node matches (the NodeAffinity score before
/// normalisation).
pub fn preferred_score(prefs: &[PreferredTerm], labels: &Labels, node_name: Option<&str>) -> i64 {
    prefs.iter().filter(|p| term_matches(&p.term, labels, node_name)).map(|p| p.weight as i64).sum()
}

/// Weight of the preferred terms the node does not match: what the planners minimise (the weight a
/// pod loses by landing on this node rather than on one that matches every term).
pub(crate) fn preferred_shortfall(prefs: &[PreferredTerm], labels: &Labels, node_name: Option<&str>) -> i64 {
    if prefs.is_empty() {
        return 0;
    }
    let total: i64 = prefs.iter().map(|t| t.weight as i64).sum();
    total - preferred_score(prefs, labels, node_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::NodeRequirement as R;

    fn labels(kv: &[(&str, &str)]) -> Labels {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn operators() {
        let l = labels(&[("zone", "a"), ("gen", "5"), ("bad", "x5")]);
        assert!(requirement_matches(&R::new("zone", NodeOp::In, ["a", "b"]), &l));
        assert!(!requirement_matches(&R::new("zone", NodeOp::In, ["b"]), &l));
        assert!(requirement_matches(&R::new("zone", NodeOp::NotIn, ["b"]), &l));
        assert!(requirement_matches(&R::new("missing", NodeOp::NotIn, ["b"]), &l), "NotIn passes when absent");
        assert!(requirement_matches(&R::new("zone", NodeOp::Exists, [] as [&str; 0]), &l));
        assert!(requirement_matches(&R::new("missing", NodeOp::DoesNotExist, [] as [&str; 0]), &l));
        assert!(requirement_matches(&R::new("gen", NodeOp::Gt, ["4"]), &l));
        assert!(!requirement_matches(&R::new("gen", NodeOp::Gt, ["5"]), &l), "strictly greater");
        assert!(requirement_matches(&R::new("gen", NodeOp::Lt, ["6"]), &l));
        assert!(!requirement_matches(&R::new("bad", NodeOp::Gt, ["1"]), &l), "non-integer label never matches Gt");
        assert!(!requirement_matches(&R::new("missing", NodeOp::Lt, ["9"]), &l), "absent label never matches Lt");
        assert!(requirement_matches(&R::new("gen", NodeOp::Gte, ["5"]), &l), "Gte includes the bound");
        assert!(!requirement_matches(&R::new("gen", NodeOp::Gte, ["6"]), &l));
        assert!(requirement_matches(&R::new("gen", NodeOp::Lte, ["5"]), &l), "Lte includes the bound");
        assert!(!requirement_matches(&R::new("gen", NodeOp::Lte, ["4"]), &l));
        assert!(!requirement_matches(&R::new("bad", NodeOp::Gte, ["0"]), &l), "non-integer label never matches Gte");
        assert!(!requirement_matches(&R::new("missing", NodeOp::Lte, ["9"]), &l), "absent label never matches Lte");
    }

    #[test]
    fn terms_are_ored_and_empty_terms_match_nothing() {
        let l = labels(&[("zone", "a")]);
        let t_b = NodeSelectorTerm { expressions: vec![R::is_in("zone", ["b"])], fields: vec![] };
        let t_a = NodeSelectorTerm { expressions: vec![R::is_in("zone", ["a"])], fields: vec![] };
        assert!(terms_match(&[t_b.clone(), t_a], &l, Some("n")));
        assert!(!terms_match(&[t_b], &l, Some("n")));
        assert!(!terms_match(&[NodeSelectorTerm::default()], &l, Some("n")));
    }

    #[test]
    fn node_selector_and_affinity_are_anded() {
        let l = labels(&[("zone", "a"), ("disk", "ssd")]);
        let m = NodeMatcher { selector: vec![("disk".into(), "hdd".into())], terms: Some(vec![NodeSelectorTerm { expressions: vec![R::is_in("zone", ["a"])], fields: vec![] }]) };
        assert!(!matcher_matches(&m, &l, Some("n")));
    }

    #[test]
    fn match_fields_on_unknown_names() {
        let l = labels(&[]);
        let t_in = NodeSelectorTerm { expressions: vec![], fields: vec![R::is_in("metadata.name", ["n1"])] };
        let t_notin = NodeSelectorTerm { expressions: vec![], fields: vec![R::new("metadata.name", NodeOp::NotIn, ["n1"])] };
        assert!(term_matches(&t_in, &l, Some("n1")));
        assert!(!term_matches(&t_in, &l, None));
        assert!(term_matches(&t_notin, &l, None));
    }
}
