//! Volume attach limits (NodeVolumeLimits, `semantics::volume_limits`): the volumes of each CSI driver
//! on a node stay within the node's limit for that driver.
//!
//! ```text
//!   existing target t, driver d with a limit:
//!       Σ_c new_{c,t,d} x_{c,t} ≤ limit_{t,d} − |attached_{t,d}|
//!       new_{c,t,d} = max over the pods of c of their d-volumes not attached to t yet
//!   new node (pattern) of configuration f, driver d with a limit:
//!       Σ_c vol_{c,d} a_c ≤ limit_{f,d}                                        (pattern check)
//!       vol_{c,d} = the d-volumes of one pod of c (equal for the pods of a class)
//! ```
//!
//! Conservative where pods share a claim: two pods of the plan that share a volume count it twice
//! (kube-scheduler once), so every plan the model accepts passes the filter; the replay judges the
//! plan exactly all the same. A configuration group agrees on the limits of the batch's drivers
//! (`Problem::new`), so growing a node within its group keeps them. No auxiliary columns. Bounds: the
//! aggregated relaxation and the size-class bound drop the family, so both stay bounds.

use std::collections::BTreeMap;

use super::{Cx, Family, InvalidPattern, Node};
use crate::semantics::volume_limits;
use crate::solve::milp::ids::{Class, Config, Row, Target};
use crate::solve::milp::model::{INF, Model};

#[derive(Default)]
pub struct VolumeLimits {
    /// Per target: (driver, row) for each limited driver some class brings volumes of.
    rows: Vec<Vec<(String, Row)>>,
    /// Per (class, target): per driver, the new volumes one pod of the class brings at most.
    new: BTreeMap<(Class, Target), BTreeMap<String, i64>>,
}

/// Per driver, the volumes one pod of class `c` brings to an empty node.
fn class_counts(cx: &Cx, c: Class) -> BTreeMap<String, i64> {
    volume_limits::counts(cx.p.pod(cx.p.classes[c.ix()].rep)).into_iter().map(|(d, n)| (d.to_string(), n)).collect()
}

impl VolumeLimits {
    /// Most pods of class `c` a new node of configuration `f` holding `counts` may take by its attach
    /// limits; None if the class brings no volume of a limited driver.
    pub(crate) fn cap_on(cx: &Cx, f: Config, c: Class, counts: &[(Class, u32)]) -> Option<i64> {
        let limits = &cx.p.configs[f.ix()].attach_limits;
        let own = class_counts(cx, c);
        let mut cap: Option<i64> = None;
        for (d, per_pod) in &own {
            let Some(&limit) = limits.get(d) else { continue };
            let used: i64 = counts.iter().filter(|x| x.0 != c).map(|&(o, k)| class_counts(cx, o).get(d).copied().unwrap_or(0) * k as i64).sum();
            let k = (limit - used).max(0) / per_pod;
            cap = Some(cap.map_or(k, |x: i64| x.min(k)));
        }
        cap
    }
}

impl Family for VolumeLimits {
    fn target_rows(&mut self, cx: &Cx, m: &mut Model) {
        let (p, s) = (cx.p, cx.s);
        // Only classes with volumes enter the rows (the pods of a class bring as many per driver).
        let with_volumes: Vec<Class> = s.classes().filter(|&c| !p.pod(p.classes[c.ix()].rep).volumes.attach.is_empty()).collect();
        let mut on_node: BTreeMap<&str, Vec<&crate::domain::Pod>> = BTreeMap::new();
        if !with_volumes.is_empty() {
            for q in p.cluster.pods.iter().filter(|q| !q.is_terminal() && !q.volumes.attach.is_empty()) {
                if let Some(n) = q.node_name.as_deref() {
                    on_node.entry(n).or_default().push(q);
                }
            }
        }
        for (t, &e) in s.targets.iter().enumerate() {
            let node = &p.cluster.nodes[e];
            let mut rows = Vec::new();
            if !node.attach_limits.is_empty() && !with_volumes.is_empty() {
                let attached = volume_limits::attached(&node.attach_limits, on_node.get(node.name.as_str()).into_iter().flatten().copied());
                for &c in &with_volumes {
                    if s.cap_on(c, Target::at(t)).is_none() {
                        continue;
                    }
                    let mut per: BTreeMap<String, i64> = BTreeMap::new();
                    for &id in &p.classes[c.ix()].pods {
                        let mut mine: BTreeMap<&str, i64> = BTreeMap::new();
                        for v in &p.pod(id).volumes.attach {
                            if node.attach_limits.contains_key(&v.driver) && !attached.get(v.driver.as_str()).is_some_and(|h| h.contains(v.handle.as_str())) {
                                *mine.entry(v.driver.as_str()).or_default() += 1;
                            }
                        }
                        for (d, n) in mine {
                            let e = per.entry(d.to_string()).or_default();
                            *e = (*e).max(n);
                        }
                    }
                    for d in per.keys() {
                        if !rows.iter().any(|(x, _): &(String, Row)| x == d) {
                            let room = node.attach_limits[d] - attached.get(d.as_str()).map_or(0, |h| h.len() as i64);
                            rows.push((d.clone(), m.row(-INF, room.max(0) as f64)));
                        }
                    }
                    if !per.is_empty() {
                        self.new.insert((c, Target::at(t)), per);
                    }
                }
            }
            self.rows.push(rows);
        }
    }

    fn target_entries(&self, _cx: &Cx, c: Class, t: Target, out: &mut Vec<(Row, f64)>) {
        let Some(per) = self.new.get(&(c, t)) else { return };
        for (d, r) in &self.rows[t.ix()] {
            if let Some(&n) = per.get(d)
                && n > 0
            {
                out.push((*r, n as f64));
            }
        }
    }

    fn validate(&self, cx: &Cx, node: &Node, _flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        let limits = &cx.p.configs[node.config.ix()].attach_limits;
        if limits.is_empty() {
            return Ok(());
        }
        let mut used: BTreeMap<String, i64> = BTreeMap::new();
        for &(c, k) in node.counts {
            for (d, n) in class_counts(cx, c) {
                if limits.contains_key(&d) {
                    *used.entry(d).or_default() += n * k as i64;
                }
            }
        }
        for (d, n) in used {
            if n > limits[&d] {
                return Err(InvalidPattern::AttachLimit { driver: d.clone(), used: n, limit: limits[&d] });
            }
        }
        Ok(())
    }
}
