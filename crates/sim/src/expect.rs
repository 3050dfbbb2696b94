//! `expect` steps: each field of an [`Expect`] becomes one [`Check`] with what was expected, whether it
//! held and what was observed. Checks read the world (objects) and its domain snapshot; they never
//! read plans, so they judge what the cluster ended up as, not what was intended.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::cloud::Cloud;
use super::scenario::{Expect, NodeCount};
use super::world::World;
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::keys;
use stowage_core::domain::node::Node;
use stowage_core::domain::pod::{Pod, PodPhase};
use stowage_core::domain::resources::Resources;
use stowage_core::semantics::{node_affinity, nodepool};
use stowage_input::convert::{Ctx, node_selector_term};

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub step: usize,
    pub expectation: String,
    pub held: bool,
    pub observed: String,
}

/// Everything an expectation may look at.
pub(crate) struct Observed<'a> {
    pub world: &'a World,
    pub cluster: &'a Cluster,
    pub cloud: &'a Cloud,
    /// The catalog as the planner sees it now (refused offerings unavailable).
    pub catalog: &'a Catalog,
    pub launches: usize,
    pub launch_batches: usize,
    pub batches: usize,
    pub consolidations: usize,
    /// Nodes launched since the previous `expect` step.
    pub new_nodes: &'a BTreeSet<String>,
}

impl Observed<'_> {
    fn registered(&self) -> impl Iterator<Item = &Node> {
        self.cluster.nodes.iter().filter(|n| !n.in_flight)
    }

    /// Pods bound to `node` and alive; DaemonSet pods only if `daemons`.
    fn pods_on<'b>(&'b self, node: &'b str, daemons: bool) -> impl Iterator<Item = &'b Pod> + 'b {
        self.cluster.pods.iter().filter(move |p| p.node_name.as_deref() == Some(node) && !p.is_terminal() && (daemons || !p.is_daemon()))
    }
}

fn count(step: usize, what: String, want: usize, got: usize) -> Check {
    Check { step, expectation: format!("{what} = {want}"), held: want == got, observed: got.to_string() }
}

pub(crate) fn evaluate(step: usize, e: &Expect, o: &Observed) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(want) = e.pending_pods {
        let pending: Vec<String> = o.cluster.pending().into_iter().map(|id| o.cluster.pod(id).key()).collect();
        let mut c = count(step, "pendingPods".into(), want, pending.len());
        if !pending.is_empty() {
            c.observed = format!("{} ({})", pending.len(), pending.join(", "));
        }
        out.push(c);
    }
    if let Some(want) = e.running_pods {
        let n = o.cluster.pods.iter().filter(|p| p.node_name.is_some() && p.phase == PodPhase::Running && !p.is_daemon()).count();
        out.push(count(step, "runningPods".into(), want, n));
    }
    for (i, nc) in e.nodes.iter().enumerate() {
        let matching: Vec<&Node> = o.registered().filter(|n| node_matches(o, nc, n)).collect();
        let names: Vec<&str> = matching.iter().map(|n| n.name.as_str()).collect();
        out.push(Check {
            step,
            expectation: format!("nodes[{i}] {}: count = {}", describe(nc), nc.count),
            held: matching.len() == nc.count,
            observed: if names.is_empty() { "0".into() } else { format!("{} ({})", names.len(), names.join(", ")) },
        });
    }
    if let Some(want) = e.launches {
        out.push(count(step, "launches".into(), want, o.launches));
    }
    if let Some(want) = e.launch_batches {
        out.push(count(step, "launchBatches".into(), want, o.launch_batches));
    }
    if let Some(want) = e.batches {
        out.push(count(step, "batches".into(), want, o.batches));
    }
    if let Some(want) = e.consolidations {
        out.push(count(step, "consolidations".into(), want, o.consolidations));
    }
    for (i, d) in e.domains.iter().enumerate() {
        let per = domain_counts(o, &d.key, &d.selector, d.namespace.as_deref());
        let mut got: Vec<usize> = per.values().copied().collect();
        got.sort();
        let mut want = d.counts.clone();
        want.sort();
        out.push(Check { step, expectation: format!("domains[{i}] {} {}: counts {:?}", d.key, selector_text(&d.selector), want), held: got == want, observed: per_text(&per) });
    }
    for (i, s) in e.skew.iter().enumerate() {
        let per = domain_counts(o, &s.key, &s.selector, s.namespace.as_deref());
        let skew = match (per.values().max(), per.values().min()) {
            (Some(a), Some(b)) => (*a - *b) as i64,
            _ => 0,
        };
        out.push(Check { step, expectation: format!("skew[{i}] {} {}: at most {}", s.key, selector_text(&s.selector), s.max), held: skew <= s.max, observed: format!("{skew} ({})", per_text(&per)) });
    }
    if let Some(want) = e.pods_in_volume_zones {
        let bad = volume_violations(o);
        out.push(Check {
            step,
            expectation: format!("podsInVolumeZones = {want}"),
            held: bad.is_empty() == want,
            observed: if bad.is_empty() { "every bound pod's node satisfies its volumes".into() } else { bad.join("; ") },
        });
    }
    if let Some(want) = e.bound_claims {
        out.push(count(step, "boundClaims".into(), want, super::volumes::bound_claims(o.world)));
    }
    if let Some(r) = &e.cost_per_hour {
        let c = o.cloud.cost_per_hour();
        let held = r.min.is_none_or(|m| c >= m - 1e-9) && r.max.is_none_or(|m| c <= m + 1e-9);
        let bounds = match (r.min, r.max) {
            (Some(a), Some(b)) => format!("in [{a}, {b}]"),
            (Some(a), None) => format!(">= {a}"),
            (None, Some(b)) => format!("<= {b}"),
            (None, None) => String::new(),
        };
        out.push(Check { step, expectation: format!("costPerHour {bounds}"), held, observed: format!("{c:.4}") });
    }
    out
}

fn selector_text(s: &BTreeMap<String, String>) -> String {
    let kv: Vec<String> = s.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", kv.join(", "))
}

fn per_text(per: &BTreeMap<String, usize>) -> String {
    let kv: Vec<String> = per.iter().map(|(d, c)| format!("{d}: {c}")).collect();
    kv.join(", ")
}

fn describe(nc: &NodeCount) -> String {
    let mut parts = Vec::new();
    for (k, v) in [("name", &nc.name), ("nodePool", &nc.node_pool), ("zone", &nc.zone), ("capacityType", &nc.capacity_type), ("instanceType", &nc.instance_type)] {
        if let Some(v) = v {
            parts.push(format!("{k}={v}"));
        }
    }
    for (k, v) in &nc.labels {
        parts.push(format!("{k}={v}"));
    }
    if let Some(b) = nc.new {
        parts.push(format!("new={b}"));
    }
    if let Some(n) = nc.pods {
        parts.push(format!("pods={n}"));
    }
    if !nc.holds.is_empty() {
        parts.push(format!("holds={}", nc.holds.join("+")));
    }
    if let Some(b) = nc.cheapest {
        parts.push(format!("cheapest={b}"));
    }
    if parts.is_empty() { "(all)".into() } else { format!("{{{}}}", parts.join(", ")) }
}

fn node_matches(o: &Observed, nc: &NodeCount, n: &Node) -> bool {
    let label_is = |k: &str, want: &Option<String>| want.as_deref().is_none_or(|w| n.label(k) == Some(w));
    nc.name.as_deref().is_none_or(|w| n.name == w)
        && label_is(keys::NODEPOOL, &nc.node_pool)
        && label_is(keys::ZONE, &nc.zone)
        && label_is(keys::CAPACITY_TYPE, &nc.capacity_type)
        && label_is(keys::INSTANCE_TYPE, &nc.instance_type)
        && nc.labels.iter().all(|(k, v)| n.label(k) == Some(v.as_str()))
        && nc.new.is_none_or(|b| o.new_nodes.contains(&n.name) == b)
        && nc.pods.is_none_or(|want| o.pods_on(&n.name, false).count() == want)
        && nc.holds.iter().all(|key| o.pods_on(&n.name, false).any(|p| &p.key() == key))
        && nc.cheapest.is_none_or(|b| cheapest(o, n).is_ok() == b)
}

/// Matching pods per domain of `key`; the domains are the key's values over registered nodes.
fn domain_counts(o: &Observed, key: &str, selector: &BTreeMap<String, String>, namespace: Option<&str>) -> BTreeMap<String, usize> {
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    let mut domain_of: BTreeMap<&str, &str> = BTreeMap::new();
    for n in o.registered() {
        if let Some(v) = n.label(key) {
            per.entry(v.to_string()).or_default();
            domain_of.insert(n.name.as_str(), v);
        }
    }
    for p in &o.cluster.pods {
        if p.is_terminal() || namespace.is_some_and(|ns| ns != p.namespace) || !selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)) {
            continue;
        }
        if let Some(d) = p.node_name.as_deref().and_then(|n| domain_of.get(n)) {
            *per.entry(d.to_string()).or_default() += 1;
        }
    }
    per
}

/// Why a node's instance type is not among the cheapest its NodePool allows (see [`cheapest`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum NotCheapest {
    #[error("not a NodePool's node")]
    NoNodePool,
    #[error("the node lacks a zone, capacity type or instance type label")]
    MissingLabels,
    #[error("{instance_type} has no {capacity_type} offering in {zone} in the catalog")]
    NoOffering { instance_type: String, capacity_type: String, zone: String },
    #[error("{instance_type} costs ${own}/h; {cheaper} at ${price}/h also fits")]
    Cheaper { instance_type: String, own: f64, cheaper: String, price: f64 },
}

/// Whether `n`'s instance type is among the cheapest that its NodePool allows in its zone and capacity
/// type (with the values it carries for the pool's open keys) and that hold every pod bound to it.
pub(crate) fn cheapest(o: &Observed, n: &Node) -> Result<(), NotCheapest> {
    let pool = n.nodepool.as_deref().and_then(|p| o.cluster.nodepool(p)).ok_or(NotCheapest::NoNodePool)?;
    let view = match o.cluster.nodeclass(&pool.node_class) {
        Some(nc) => stowage_core::catalog::for_nodeclass(o.catalog, nc),
        None => o.catalog.clone(),
    };
    let (Some(zone), Some(ct), Some(it)) = (n.label(keys::ZONE), n.label(keys::CAPACITY_TYPE), n.label(keys::INSTANCE_TYPE)) else {
        return Err(NotCheapest::MissingLabels);
    };
    let own = view.get(it).and_then(|t| t.offerings.iter().find(|x| x.zone == zone && x.capacity_type == ct)).map(|x| x.price).ok_or_else(|| NotCheapest::NoOffering {
        instance_type: it.to_string(),
        capacity_type: ct.to_string(),
        zone: zone.to_string(),
    })?;
    let pods: Vec<&Pod> = o.pods_on(&n.name, true).collect();
    let mut need = Resources::default();
    for p in &pods {
        need.add(&p.requests);
    }
    let mut best: Option<(f64, &str)> = None;
    for t in &view.types {
        let Some(offer) = t.offerings.iter().find(|x| x.zone == zone && x.capacity_type == ct && x.available && !o.cloud.refuses(&t.name, zone, ct)) else { continue };
        let mut labels = nodepool::base_labels(pool, t, zone, ct, o.catalog.region.as_deref());
        for r in &pool.requirements {
            if !labels.contains_key(&r.req.key)
                && let Some(v) = n.label(&r.req.key)
            {
                labels.insert(r.req.key.clone(), v.to_string());
            }
        }
        if nodepool::violated(pool, &labels).is_some() || pods.iter().any(|p| !node_affinity::matcher_matches(&p.node_matcher, &labels, None)) || !need.fits_in(&t.allocatable()) {
            continue;
        }
        if best.is_none_or(|(p, name)| (offer.price, t.name.as_str()) < (p, name)) {
            best = Some((offer.price, &t.name));
        }
    }
    match best {
        Some((p, name)) if own > p + 1e-9 => Err(NotCheapest::Cheaper { instance_type: it.to_string(), own, cheaper: name.to_string(), price: p }),
        _ => Ok(()),
    }
}

/// Bound pods whose node does not satisfy a bound volume's node affinity or zone label.
fn volume_violations(o: &Observed) -> Vec<String> {
    let mut bad = Vec::new();
    let objects = &o.world.objects;
    for p in &objects.pods {
        let Some(node_name) = p.obj.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
        let Some(node) = o.cluster.node(node_name) else { continue };
        let ns = p.obj.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let pod_name = p.obj.metadata.name.clone().unwrap_or_default();
        for v in p.obj.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let claim = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => c.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", v.name),
                _ => continue,
            };
            let Some(pvc) = objects.pvcs.iter().find(|c| c.obj.metadata.namespace.as_deref() == Some(ns.as_str()) && c.obj.metadata.name.as_deref() == Some(claim.as_str())) else {
                continue;
            };
            let Some(pv_name) = pvc.obj.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|s| !s.is_empty()) else { continue };
            let Some(pv) = objects.pvs.iter().find(|v| v.obj.metadata.name.as_deref() == Some(pv_name)) else { continue };
            if let Some(terms) = pv.obj.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) {
                let ctx = Ctx { source: &pv.source, object: format!("PersistentVolume {pv_name}") };
                let terms: Vec<_> = terms.node_selector_terms.iter().filter_map(|t| node_selector_term(&ctx, "spec.nodeAffinity", t).ok()).collect();
                if !node_affinity::terms_match(&terms, &node.labels, Some(&node.name)) {
                    bad.push(format!("{ns}/{pod_name} on {node_name} ({}), volume {pv_name} elsewhere", node.label(keys::ZONE).unwrap_or("no zone")));
                    continue;
                }
            }
            if let Some(z) = pv.obj.metadata.labels.as_ref().and_then(|l| l.get(keys::ZONE))
                && node.label(keys::ZONE).is_some_and(|nz| !z.split("__").any(|x| x == nz))
            {
                bad.push(format!("{ns}/{pod_name} on {node_name}, volume {pv_name} in {z}"));
            }
        }
    }
    bad
}
