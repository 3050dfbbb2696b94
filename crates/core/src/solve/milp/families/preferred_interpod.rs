//! Preferred pod (anti-)affinity over `kubernetes.io/hostname`, priced (`preferencePolicy: Priced`;
//! `semantics::interpod::preferred_shortfall`).
//!
//! ```text
//!   per new node (pattern), for each class c on it (a_c pods) with a preferred hostname term t of
//!   weight w_t, matching the classes M_t:
//!       others_t = Σ_{q ∈ M_t} a_q − [c ∈ M_t]
//!       affinity:       a_c · w_t · soft.preferredPodAffinity      if others_t = 0
//!       anti-affinity:  a_c · w_t · soft.preferredPodAntiAffinity  if others_t > 0
//! ```
//!
//! in the pattern's cost (`Family::node_soft`, never negative, so the bounds that leave it out stay
//! bounds). Not in the encoding: terms over other keys (they couple nodes), terms against pods on
//! existing nodes and DaemonSet pods; the objective plans are compared by (`solve::objective`) counts
//! the first two exactly, so the driver still keeps the better plan.

use super::{Cx, Family, Node};
use crate::domain::labels::keys;
use crate::semantics::interpod;
use crate::solve::milp::ids::Class;
use crate::solve::milp::structure::Context;

/// One preferred hostname term of a class, priced per pod left unmet.
#[derive(Clone, Debug)]
struct Term {
    class: Class,
    /// $/h per pod of the class when unmet: the term's weight times the soft weight.
    cost: f64,
    anti: bool,
    /// Classes the term matches (sorted).
    matches: Vec<Class>,
    self_match: bool,
}

#[derive(Clone, Debug, Default)]
pub struct PreferredInterPod {
    terms: Vec<Term>,
}

impl PreferredInterPod {
    pub(crate) fn derive(cx: &Context) -> Self {
        let w = &cx.p.weights.soft;
        let mut terms = Vec::new();
        for c in cx.classes() {
            let pod = cx.rep(c);
            let kinds = [(&pod.preferred_affinity, w.preferred_pod_affinity, false), (&pod.preferred_anti_affinity, w.preferred_pod_anti_affinity, true)];
            for (list, unit, anti) in kinds {
                if unit <= 0.0 {
                    continue;
                }
                for t in list.iter().filter(|t| t.term.key == keys::HOSTNAME) {
                    let matches: Vec<Class> = cx.classes().filter(|&q| interpod::term_matches(&t.term, cx.rep(q))).collect();
                    terms.push(Term { class: c, cost: unit * t.weight as f64, anti, self_match: matches.binary_search(&c).is_ok(), matches });
                }
            }
        }
        PreferredInterPod { terms }
    }
}

impl Family for PreferredInterPod {
    fn node_soft(&self, _cx: &Cx, node: &Node) -> f64 {
        let count = |c: Class| node.counts.iter().find(|(q, _)| *q == c).map_or(0, |x| x.1 as i64);
        let mut soft = 0.0;
        for t in &self.terms {
            let a = count(t.class);
            if a == 0 {
                continue;
            }
            let others: i64 = t.matches.iter().map(|&q| count(q)).sum::<i64>() - t.self_match as i64;
            if (t.anti && others > 0) || (!t.anti && others == 0) {
                soft += a as f64 * t.cost;
            }
        }
        soft
    }
}
