//! Required pod anti-affinity over keys other than the hostname (zones, custom keys), per term of a
//! class `c` and domain `d`:
//!
//! ```text
//!   self-matching term:  placed_{c,d} ≤ 1
//!   term matching others Q:  placed_{c,d} ≤ n_c w_{a,d};   Σ_{q∈Q} placed_{q,d} ≤ N_Q (1 − w_{a,d})
//!   w_{a,d} ∈ {0,1}  (the class lands in d)
//! ```
//!
//! Existing pods are static exclusions: a domain holding a pod the term matches, or a pod whose own term
//! matches the class, is closed to the class ([`AntiAffinity::derive`] removes those configuration
//! groups; the initial-state filter already removed such targets). Hostname terms are per-node rules:
//! [`super::node_conflicts`]. No per-node rule here. Bounds: the aggregated relaxation keeps the rows;
//! the size-class bound drops them.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::{Cx, Family};
use crate::domain::Labels;
use crate::domain::labels::keys;
use crate::domain::pod::Pod;
use crate::semantics::filter::FilterState;
use crate::semantics::interpod;
use crate::solve::milp::ids::{Class, Col, Place, Row};
use crate::solve::milp::model::{INF, Model};
use crate::solve::milp::structure::{Context, Structure};

/// A required anti-affinity term of a class over a non-hostname key.
#[derive(Clone, Debug)]
pub struct DomainAnti {
    pub class: Class,
    pub key: String,
    pub self_match: bool,
    /// Other classes the term matches (sorted).
    pub others: Vec<Class>,
    pub domains: Vec<String>,
}

/// The rows of one term, per domain.
#[derive(Default)]
struct TermRows {
    self_rows: FxHashMap<String, Row>,
    class_rows: FxHashMap<String, Row>,
    others_rows: FxHashMap<String, Row>,
}

pub struct AntiAffinity {
    pub terms: Vec<DomainAnti>,
    rows: Vec<TermRows>,
    /// The indicators `w_{a,d}` with their class row.
    w_cols: Vec<(Col, Row)>,
}

impl AntiAffinity {
    /// The terms over non-hostname keys, and the configuration groups existing pods close to each class.
    pub(crate) fn derive(cx: &Context, fs: &FilterState, s: &mut Structure) -> Self {
        let mut terms = Vec::new();
        let bound: Vec<(&Pod, &Labels)> = fs.nodes().iter().flat_map(|n| n.pods.iter().map(move |q| (*q, &n.labels))).collect();
        for c in cx.classes() {
            let pod = cx.rep(c);
            let class_groups = &mut s.class_groups[c.ix()];
            for t in &pod.anti_affinity {
                if t.key == keys::HOSTNAME {
                    continue;
                }
                let others: Vec<Class> = cx.classes().filter(|&q| q != c && interpod::term_matches(t, cx.rep(q))).collect();
                let self_match = interpod::term_matches(t, pod);
                // Domains holding an existing pod the term matches are closed to the class.
                let blocked: BTreeSet<&str> = bound.iter().filter(|(q, _)| interpod::term_matches(t, q)).filter_map(|(_, l)| l.get(&t.key).map(String::as_str)).collect();
                class_groups.retain(|&g| cx.group_labels(g).get(&t.key).is_none_or(|d| !blocked.contains(d.as_str())));
                let mut domains: BTreeSet<String> = cx.group_labels.iter().filter_map(|l| l.get(&t.key).cloned()).collect();
                for &e in &cx.targets {
                    if let Some(d) = fs.nodes()[e].labels.get(&t.key) {
                        domains.insert(d.clone());
                    }
                }
                terms.push(DomainAnti { class: c, key: t.key.clone(), self_match, others, domains: domains.into_iter().collect() });
            }
            // Existing pods' required anti-affinity terms that match this class close their domains.
            for (q, l) in &bound {
                for t in &q.anti_affinity {
                    if t.key != keys::HOSTNAME
                        && interpod::term_matches(t, pod)
                        && let Some(d) = l.get(&t.key)
                    {
                        class_groups.retain(|&g| cx.group_labels(g).get(&t.key) != Some(d));
                    }
                }
            }
        }
        AntiAffinity { terms, rows: Vec::new(), w_cols: Vec::new() }
    }
}

/// Pods of the classes term `an` matches besides its own.
fn others_pods(cx: &Cx, an: &DomainAnti) -> f64 {
    an.others.iter().map(|&q| cx.s.n_of(q) as f64).sum()
}

impl Family for AntiAffinity {
    fn rows(&mut self, cx: &Cx, m: &mut Model) {
        for (a, an) in self.terms.iter().enumerate() {
            let mut rows = TermRows::default();
            let others = others_pods(cx, an);
            for d in &an.domains {
                if an.self_match {
                    rows.self_rows.insert(d.clone(), m.named(format!("anti[{a}].self[{d}]"), -INF, 1.0));
                }
                if others > 0.0 {
                    rows.class_rows.insert(d.clone(), m.named(format!("anti[{a}].class[{d}]"), -INF, 0.0));
                    rows.others_rows.insert(d.clone(), m.named(format!("anti[{a}].others[{d}]"), -INF, others));
                }
            }
            self.rows.push(rows);
        }
    }

    fn pod_entries(&self, cx: &Cx, c: Class, at: Place, out: &mut Vec<(Row, f64)>) {
        let labels = cx.labels(at);
        for (an, rows) in self.terms.iter().zip(&self.rows) {
            let Some(d) = labels.get(&an.key) else { continue };
            if an.class == c {
                if let Some(&r) = rows.self_rows.get(d) {
                    out.push((r, 1.0));
                }
                if let Some(&r) = rows.class_rows.get(d) {
                    out.push((r, 1.0));
                }
            } else if an.others.binary_search(&c).is_ok()
                && let Some(&r) = rows.others_rows.get(d)
            {
                out.push((r, 1.0));
            }
        }
    }

    /// `w_{a,d}`: the class lands in `d`.
    fn aux_columns(&mut self, cx: &Cx, m: &mut Model) {
        for (a, (an, rows)) in self.terms.iter().zip(&self.rows).enumerate() {
            let nc = cx.s.n_of(an.class) as f64;
            let others = others_pods(cx, an);
            for d in &an.domains {
                if let (Some(&cr), Some(&or)) = (rows.class_rows.get(d), rows.others_rows.get(d)) {
                    let w = m.aux_col(format!("anti-w {a} {d}"), 0.0, 1.0, true, vec![(cr, -nc), (or, others)]);
                    self.w_cols.push((w, cr));
                }
            }
        }
    }

    fn fill_aux(&self, _cx: &Cx, act: &[f64], x: &mut [f64]) {
        for &(col, class_row) in &self.w_cols {
            x[col.ix()] = (act[class_row.ix()] > 0.5) as u8 as f64;
        }
    }
}
