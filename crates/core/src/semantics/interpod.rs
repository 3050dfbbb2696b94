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
//! preferred terms only score: kube-scheduler adds w · count(t.key, n[t.key]) per affinity term and
//!   subtracts it per anti-affinity term. Under `preferencePolicy: Priced` (`preferred_shortfall`) a
//!   placed pod leaves unmet, in the final state,
//!     w of an affinity term when no other pod its term matches shares its t.key domain,
//!     w of an anti-affinity term when another pod its term matches does,
//!   the units of `soft.preferredPodAffinity` and `soft.preferredPodAntiAffinity`.
//! ```
//!
//! Term namespaces are resolved against the term owner's namespace when pods are loaded: unset ⇒ the
//! owner's own namespace, `namespaceSelector: {}` ⇒ all namespaces.

use std::collections::HashMap;

use crate::domain::labels::Labels;
use crate::domain::pod::{Pod, PodAffinityTerm};

use super::{Plugin, Reject, selectors};

pub fn term_matches(term: &PodAffinityTerm, pod: &Pod) -> bool {
    term.namespaces.contains(&pod.namespace) && selectors::opt_matches(term.selector.as_ref(), &pod.labels)
}

/// `podMatchesAllAffinityTerms`: false for an empty term list.
pub(crate) fn matches_all(terms: &[PodAffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| term_matches(t, pod))
}

/// The preferred (anti-)affinity weight a placed pod leaves unmet (module comment), given `others(t)`:
/// how many pods other than the pod itself its term `t` matches in the pod's `t.key` domain (None: the
/// node does not carry the key, and the term is moot). Returns (affinity, anti-affinity) units.
pub fn preferred_shortfall<'a>(pod: &'a Pod, mut others: impl FnMut(&'a PodAffinityTerm) -> Option<i64>) -> (i64, i64) {
    let aff = pod.preferred_affinity.iter().filter(|t| others(&t.term) == Some(0)).map(|t| t.weight as i64).sum();
    let anti = pod.preferred_anti_affinity.iter().filter(|t| others(&t.term).is_some_and(|n| n > 0)).map(|t| t.weight as i64).sum();
    (aff, anti)
}

/// [`preferred_shortfall`] summed over the pods `placed` (pod, node index) of a final state: `nodes` are
/// every node's labels and every pod on it, the placed pods included. Returns (affinity,
/// anti-affinity) units.
pub fn preferred_shortfall_in<'p>(nodes: &[(&Labels, Vec<&'p Pod>)], placed: impl IntoIterator<Item = (&'p Pod, usize)>) -> (i64, i64) {
    let mut counts: HashMap<(&PodAffinityTerm, &str), i64> = HashMap::new();
    let (mut aff, mut anti) = (0, 0);
    for (pod, n) in placed {
        if pod.preferred_affinity.is_empty() && pod.preferred_anti_affinity.is_empty() {
            continue;
        }
        let (a, b) = preferred_shortfall(pod, |t| {
            let v = nodes[n].0.get(&t.key)?;
            let c =
                *counts.entry((t, v.as_str())).or_insert_with(|| nodes.iter().filter(|(l, _)| l.get(&t.key) == Some(v)).map(|(_, ps)| ps.iter().filter(|q| term_matches(t, q)).count() as i64).sum());
            Some(c - term_matches(t, pod) as i64)
        });
        aff += a;
        anti += b;
    }
    (aff, anti)
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
