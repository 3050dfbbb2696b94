//! minValues under `minValuesPolicy: Strict` (Karpenter): the instance types a new node may launch as
//! keep at least minValues distinct values of each key its NodePool asks it of
//! (`semantics::min_values`).
//!
//! ```text
//!   pattern (f, a) is valid  ⇔  ∀ (k, m) ∈ minValues(pool(f)):
//!       |{ labels(t)[k] | t ∈ launch(f, pods a) }| ≥ m           (launch: semantics::min_values)
//! ```
//!
//! A per-node rule only: patterns whose candidates fall short are not columns. No rows, no auxiliary
//! columns. Its cap depends on the configuration, which the `cap` hook does not get, so pricing's
//! fill asks [`MinValues::cap_on`] (the candidates only shrink as pods join, so the most pods of a
//! class a node may still take is found by bisection) and the other pattern sources rely on `validate`. Under
//! BestEffort the family checks nothing (the plan records the relaxation). Bounds: the aggregated
//! relaxation and the size-class bound drop it, so both stay bounds.

use super::{Cx, Family, InvalidPattern, Node};
use crate::semantics::min_values::{self, Load, Shortfall};
use crate::solve::milp::ids::{Class, Config, Row};

#[derive(Default)]
pub struct MinValues;

/// The first minValues requirement a node of configuration `f` holding `counts` falls short of.
fn shortfall(cx: &Cx, f: usize, counts: &[(Class, u32)]) -> Option<Shortfall> {
    let mut load = Load::default();
    for &(c, k) in counts {
        load.add(cx.p.pod(cx.p.classes[c.ix()].rep), k);
    }
    let cfg = &cx.p.configs[f];
    let lt = cx.p.launch_types(cfg.group);
    let cands = min_values::candidates(lt, &cfg.labels, &load);
    min_values::shortfalls(lt, &cands).into_iter().next()
}

impl MinValues {
    /// Most pods of class `c` a node of configuration `f` holding `counts` may take, up to `most`.
    pub(crate) fn cap_on(cx: &Cx, f: Config, c: Class, counts: &[(Class, u32)], most: u32) -> u32 {
        let with = |k: u32| -> Vec<(Class, u32)> {
            let mut v: Vec<(Class, u32)> = counts.iter().copied().filter(|x| x.0 != c).collect();
            let had = counts.iter().find(|x| x.0 == c).map_or(0, |x| x.1);
            v.push((c, had + k));
            v
        };
        super::most_that_fit(most, |k| shortfall(cx, f.ix(), &with(k)).is_none())
    }
}

impl Family for MinValues {
    fn validate(&self, cx: &Cx, node: &Node, _flags: &mut Vec<Vec<Row>>) -> Result<(), InvalidPattern> {
        let f = node.config.ix();
        if !cx.p.strict_min_values(f) {
            return Ok(());
        }
        match shortfall(cx, f, node.counts) {
            Some(s) => Err(InvalidPattern::MinValues { key: s.key, min_values: s.min_values, kept: s.kept }),
            None => Ok(()),
        }
    }
}
