//! InterPodAffinity (`interpodaffinity/filtering.go`; KEP-2249 namespaces, KEP-3633 label keys).
//!
//! ```text
//! term matches pod q  ⇔ q.namespace ∈ term.namespaces ∧ term.selector(q.labels)     (nil selector: none)
//!
//! required affinity of incoming p on node n:
//!   n carries every term's key, and for every term t: count(t.key, n[t.key]) > 0,
//!   where count(k, v) = pods q on nodes with label k = v such that q matches ALL of p's terms.
//!   First-pod exception: if no such pod exists anywhere (no counted pair) and p matches all its own
//!   terms, any node carrying the keys passes.
//! required anti-affinity of incoming p: n fails if, for some term t with n carrying t.key, a pod
//!   matching t runs on a node with the same t.key value. A node without the key is not constrained.
//! symmetry: n fails if an existing pod e has a required anti-affinity term t that matches p and e's
//!   node has the same t.key value as n. Existing pods' required affinity is not symmetric.
//! preferred terms only score.
//! ```
//!
//! Term namespaces are resolved against the term owner's namespace when pods are loaded: unset ⇒ the
//! owner's own namespace, `namespaceSelector: {}` ⇒ all namespaces.

use crate::domain::pod::{Pod, PodAffinityTerm};

use super::{Plugin, Reject, selectors};

pub fn term_matches(term: &PodAffinityTerm, pod: &Pod) -> bool {
    term.namespaces.contains(&pod.namespace) && selectors::opt_matches(term.selector.as_ref(), &pod.labels)
}

/// `podMatchesAllAffinityTerms`: false for an empty term list.
pub(crate) fn matches_all(terms: &[PodAffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| term_matches(t, pod))
}

pub(crate) fn reject_affinity() -> Reject {
    Reject::new(Plugin::InterPodAffinity, "node(s) didn't match pod affinity rules")
}

pub(crate) fn reject_affinity_missing_key() -> Reject {
    Reject::unresolvable(Plugin::InterPodAffinity, "node(s) didn't match pod affinity rules")
}

pub(crate) fn reject_anti_affinity() -> Reject {
    Reject::new(Plugin::InterPodAffinity, "node(s) didn't match pod anti-affinity rules")
}

pub(crate) fn reject_existing_anti_affinity() -> Reject {
    Reject::new(Plugin::InterPodAffinity, "node(s) didn't satisfy existing pods anti-affinity rules")
}
