//! Pod label selectors (`metav1.LabelSelector`).
//!
//! ```text
//! In            label present ∧ value ∈ values
//! NotIn         label absent  ∨ value ∉ values
//! Exists        label present
//! DoesNotExist  label absent
//! ```
//!
//! Requirements are ANDed; an empty selector matches everything; a nil selector (`None`) matches
//! nothing (topology spread and pod affinity both treat it so).

use crate::domain::labels::{LabelSelector, Labels, SelectorOp};

pub fn matches(sel: &LabelSelector, labels: &Labels) -> bool {
    sel.requirements.iter().all(|r| {
        let v = labels.get(&r.key);
        let has = |v: &String| r.values.binary_search(v).is_ok();
        match r.op {
            SelectorOp::In => v.is_some_and(has),
            SelectorOp::NotIn => v.is_none_or(|v| !has(v)),
            SelectorOp::Exists => v.is_some(),
            SelectorOp::DoesNotExist => v.is_none(),
        }
    })
}

/// A nil selector matches nothing.
pub fn opt_matches(sel: Option<&LabelSelector>, labels: &Labels) -> bool {
    sel.is_some_and(|s| matches(s, labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::SelectorRequirement;

    #[test]
    fn selector_semantics() {
        let labels: Labels = [("app".to_string(), "web".to_string())].into();
        assert!(matches(&LabelSelector::everything(), &labels));
        assert!(!opt_matches(None, &labels));
        let sel = LabelSelector::from_labels([("app", "web")]);
        assert!(matches(&sel, &labels));
        let notin = LabelSelector::everything().and(SelectorRequirement::new("tier", SelectorOp::NotIn, ["db"]));
        assert!(matches(&notin, &labels), "NotIn passes when the label is absent");
        let dne = LabelSelector::everything().and(SelectorRequirement::new("app", SelectorOp::DoesNotExist, [] as [&str; 0]));
        assert!(!matches(&dne, &labels));
    }
}
