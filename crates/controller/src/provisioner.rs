//! One batch: snapshot → [`Problem`] → planner (MILP with greedy warm start and fallback, or greedy) →
//! NodeClaims to create, nominations and unschedulable pods.
//!
//! Each new node of the plan becomes one NodeClaim (`karpenter.sh/v1`, `generateName: <nodepool>-`) whose
//! requirements pin the chosen offering: `node.kubernetes.io/instance-type In [chosen, fallbacks...]`,
//! the zone, the capacity type and the values the plan chose for keys the NodePool leaves open (for
//! example `capacity-spread In ["1"]`), followed by the NodePool's other requirements. Fallback types
//! (for capacity errors) are ranked by price and admitted only if a node of that type would take the
//! same pods under every constraint: same zone and capacity type, the same values on every label key a
//! constraint of the batch reads, room for the pods plus the DaemonSets that would run there, every
//! pod's static filters, and no more capacity in a NodePool-limited resource than the chosen type.
//!
//! Invariants: the function is pure apart from the MILP's time budget (same snapshot, same NodeClaims:
//! every order is explicit); the planner counts existing nodes and NodeClaims in flight (the snapshot
//! holds them), so NodePool limits include in-flight capacity and pods already planned onto an
//! in-flight NodeClaim are planned there again rather than launched for twice.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::state::{TERMINATION_FINALIZER, quantities};
use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::labels::{Labels, keys};
use stowage_core::domain::pod::PodId;
use stowage_core::domain::resources::Resources;
use stowage_core::plan::Plan;
use stowage_core::semantics::{daemonsets, nodepool};
use stowage_core::solve::problem::{Config, static_check};
use stowage_core::solve::{self, Outcome, Problem, Target};
use stowage_core::weights::Weights;
use stowage_input::Objects;
use stowage_input::api::{self, NodeClaim, NodeClaimSpec, NodeSelectorRequirementWithMinValues};

/// Annotation naming the batch a NodeClaim was planned in.
pub const BATCH_ANNOTATION: &str = "stowage.dev/batch";

/// How a batch is planned: the planner (`stowage_core::solve::Planner`, what every command uses) and
/// how many instance types one NodeClaim may offer the cloud.
#[derive(Clone, Debug)]
pub struct PlannerSettings {
    pub planner: solve::Planner,
    /// Most instance types one NodeClaim allows (the chosen one and its fallbacks).
    pub max_instance_types: usize,
}

impl Default for PlannerSettings {
    fn default() -> Self {
        PlannerSettings { planner: solve::Planner::default(), max_instance_types: 20 }
    }
}

/// A pod, as events and logs name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where the plan puts a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nominated {
    /// A registered node.
    Node(String),
    /// A NodeClaim in flight (created by an earlier batch).
    InFlight(String),
    /// A NodeClaim of this batch (index into [`Decision::claims`]).
    New(usize),
}

/// A NodeClaim to create, with the pods the plan put on it.
#[derive(Clone, Debug)]
pub struct PlannedClaim {
    pub nodeclaim: NodeClaim,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
    pub pods: Vec<PodRef>,
}

/// What a batch decided.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The plan as `stowage plan` writes it (solver report, placements, costs).
    pub plan: Plan,
    pub claims: Vec<PlannedClaim>,
    pub nominations: Vec<(PodRef, Nominated)>,
    /// Pods left pending, with the planner's reason.
    pub unschedulable: Vec<(PodRef, String)>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProvisionError {
    /// The snapshot cannot be planned (a NodePool's node class is missing, or the weights make leaving a
    /// pod pending cheaper than a node). Fix the named object or the weights; the batch is retried on the
    /// next change.
    #[error("cannot plan the batch: {0}")]
    Problem(#[from] solve::problem::ProblemError),
}

fn pod_ref(cluster: &Cluster, id: PodId) -> PodRef {
    let p = cluster.pod(id);
    PodRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() }
}

/// Plans a batch. `objects` are the snapshot's objects (the NodePools' owner references and templates
/// come from them); `catalog` already has the offerings the cloud refused marked unavailable.
pub(crate) fn plan_batch(cluster: &Cluster, objects: &Objects, catalog: &Catalog, weights: &Weights, settings: &PlannerSettings, batch_id: &str) -> Result<Decision, ProvisionError> {
    let (problem, outcome, report) = solve::driver::build_and_plan(cluster, catalog, weights, settings.planner)?;
    let plan = solve::to_plan(&problem, &outcome, report);

    let mut views: BTreeMap<String, Catalog> = BTreeMap::new();
    let mut claims = Vec::new();
    for k in 0..outcome.new_nodes.len() {
        let f = outcome.new_nodes[k];
        let pool = &cluster.nodepools[problem.configs[f].pool];
        let view = views.entry(pool.node_class.clone()).or_insert_with(|| match cluster.nodeclass(&pool.node_class) {
            Some(nc) => stowage_core::catalog::for_nodeclass(catalog, nc),
            None => catalog.clone(),
        });
        let pool_obj = objects.nodepools.iter().map(|o| &o.obj).find(|o| o.metadata.name.as_deref() == Some(pool.name.as_str()));
        claims.push(planned_claim(&problem, &outcome, k, view, pool_obj, settings.max_instance_types, batch_id));
    }
    let mut nominations = Vec::new();
    for &(id, t) in &outcome.placements {
        let target = match t {
            Target::New(k) => Nominated::New(k),
            Target::Existing(n) => {
                let node = &cluster.nodes[n];
                if node.in_flight { Nominated::InFlight(node.name.clone()) } else { Nominated::Node(node.name.clone()) }
            }
        };
        nominations.push((pod_ref(cluster, id), target));
    }
    let unschedulable = outcome.unschedulable.iter().map(|(id, r)| (pod_ref(cluster, *id), r.to_string())).collect();
    Ok(Decision { plan, claims, nominations, unschedulable })
}

/// The NodeClaim for new node `k` of an outcome.
fn planned_claim(p: &Problem, o: &Outcome, k: usize, view: &Catalog, pool_obj: Option<&api::NodePool>, max_types: usize, batch_id: &str) -> PlannedClaim {
    let cluster = p.cluster;
    let c = &p.configs[o.new_nodes[k]];
    let pool = &cluster.nodepools[c.pool];
    let pods: Vec<PodId> = o.placements.iter().filter(|(_, t)| *t == Target::New(k)).map(|(id, _)| *id).collect();
    let types = instance_types(p, c, &pods, view, max_types);

    // Keys the plan chose a value for that neither the type, the offering nor the template fixes.
    let base = view.get(&c.instance_type).map(|t| nodepool::base_labels(pool, t, &c.zone, &c.capacity_type, p.region.as_deref())).unwrap_or_default();
    let open: Labels = c.labels.iter().filter(|(k, _)| !base.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();

    let mut pinned: BTreeSet<&str> = [keys::INSTANCE_TYPE, keys::ZONE, keys::CAPACITY_TYPE].into();
    pinned.extend(open.keys().map(String::as_str));
    let template = pool_obj.map(|o| &o.spec.template);
    let pool_reqs: &[NodeSelectorRequirementWithMinValues] = template.map(|t| t.spec.requirements.as_slice()).unwrap_or(&[]);
    let type_min_values = pool_reqs.iter().filter(|r| r.key == keys::INSTANCE_TYPE).find_map(|r| r.min_values).filter(|&m| m >= 1 && (m as usize) <= types.len());
    let in_req = |key: &str, values: Vec<String>, min_values: Option<i64>| NodeSelectorRequirementWithMinValues { key: key.into(), operator: "In".into(), values, min_values };
    let mut requirements =
        vec![in_req(keys::INSTANCE_TYPE, types.clone(), type_min_values), in_req(keys::ZONE, vec![c.zone.clone()], None), in_req(keys::CAPACITY_TYPE, vec![c.capacity_type.clone()], None)];
    for (key, v) in &open {
        requirements.push(in_req(key, vec![v.clone()], None));
    }
    requirements.extend(pool_reqs.iter().filter(|r| !pinned.contains(r.key.as_str())).cloned());

    let mut labels: Labels = pool.labels.clone();
    labels.insert(keys::NODEPOOL.into(), pool.name.clone());
    labels.insert(keys::NODECLASS.into(), pool.node_class.clone());
    labels.insert(keys::ZONE.into(), c.zone.clone());
    labels.insert(keys::CAPACITY_TYPE.into(), c.capacity_type.clone());
    if let [only] = types.as_slice() {
        labels.insert(keys::INSTANCE_TYPE.into(), only.clone());
    }
    labels.extend(open.clone());

    let mut requests = c.ds_overhead.clone();
    for &id in &pods {
        requests.add(&cluster.pod(id).requests);
    }

    let owner = pool_obj.and_then(|o| {
        Some(OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            name: o.metadata.name.clone()?,
            uid: o.metadata.uid.clone()?,
            block_owner_deletion: Some(true),
            controller: None,
        })
    });
    let tspec = template.map(|t| &t.spec);
    let spec = NodeClaimSpec {
        taints: tspec.and_then(|s| s.taints.clone()),
        startup_taints: tspec.and_then(|s| s.startup_taints.clone()),
        requirements,
        resources: Some(api::nodeclaim::ResourceRequirements { requests: Some(quantities(&requests)) }),
        node_class_ref: tspec.map(|s| s.node_class_ref.clone()).unwrap_or_else(|| api::NodeClassReference {
            group: "karpenter.k8s.aws".into(),
            kind: "EC2NodeClass".into(),
            name: pool.node_class.clone(),
        }),
        expire_after: Some(tspec.and_then(|s| s.expire_after.clone()).unwrap_or_else(|| "720h".into())),
        termination_grace_period: tspec.and_then(|s| s.termination_grace_period.clone()),
    };
    let mut annotations: BTreeMap<String, String> = template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(BATCH_ANNOTATION.into(), batch_id.into());
    let nodeclaim = NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", pool.name)),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: Some(vec![TERMINATION_FINALIZER.into()]),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec,
        status: None,
    };
    PlannedClaim {
        nodeclaim,
        nodepool: pool.name.clone(),
        instance_type: c.instance_type.clone(),
        zone: c.zone.clone(),
        capacity_type: c.capacity_type.clone(),
        price: c.price,
        pods: pods.iter().map(|&id| pod_ref(cluster, id)).collect(),
    }
}

/// The chosen type, then the types that would take the same pods as well, cheapest first (ties by
/// name), at most `max` in all.
pub fn instance_types(p: &Problem, c: &Config, pods: &[PodId], view: &Catalog, max: usize) -> Vec<String> {
    let cluster = p.cluster;
    let pool = &cluster.nodepools[c.pool];
    let projection = |l: &Labels| -> Vec<(String, String)> { l.iter().filter(|(k, _)| p.relevant_keys.contains(*k)).map(|(k, v)| (k.clone(), v.clone())).collect() };
    let wanted = projection(&c.labels);
    let base_chosen = view.get(&c.instance_type).map(|t| nodepool::base_labels(pool, t, &c.zone, &c.capacity_type, p.region.as_deref())).unwrap_or_default();
    let open: Vec<(String, String)> = c.labels.iter().filter(|(k, _)| !base_chosen.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut need = Resources::default();
    for &id in pods {
        need.add(&cluster.pod(id).requests);
    }
    let limited: Vec<String> = pool.limits.as_ref().map(|l| l.limited.clone()).unwrap_or_default();

    let mut others: Vec<(f64, String)> = Vec::new();
    for t in &view.types {
        if t.name == c.instance_type {
            continue;
        }
        let Some(offering) = t.offerings.iter().find(|o| o.available && o.zone == c.zone && o.capacity_type == c.capacity_type) else { continue };
        let mut labels = nodepool::base_labels(pool, t, &c.zone, &c.capacity_type, p.region.as_deref());
        labels.extend(open.iter().cloned());
        if nodepool::violated(pool, &labels).is_some() || projection(&labels) != wanted {
            continue;
        }
        if limited.iter().any(|r| t.capacity.get(r) > c.capacity.get(r)) {
            continue;
        }
        let (ds_overhead, dss) = daemonsets::overhead(&cluster.daemonsets, &labels, &pool.taints, None);
        let alloc = t.allocatable();
        if !need.plus(&ds_overhead).fits_in(&alloc) {
            continue;
        }
        let candidate = Config {
            pool: c.pool,
            instance_type: t.name.clone(),
            zone: c.zone.clone(),
            capacity_type: c.capacity_type.clone(),
            price: offering.price,
            synthetic: offering.synthetic,
            cost: c.cost,
            labels,
            taints: pool.taints.clone(),
            capacity: t.capacity.clone(),
            allocatable: alloc,
            daemonsets: dss.iter().filter_map(|d| cluster.daemonsets.iter().position(|x| std::ptr::eq(x, *d))).collect(),
            ds_overhead,
            group: c.group,
        };
        if pods.iter().all(|&id| static_check(cluster, cluster.pod(id), &candidate).is_ok()) {
            others.push((offering.price, t.name.clone()));
        }
    }
    others.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut out = vec![c.instance_type.clone()];
    out.extend(others.into_iter().map(|(_, n)| n).take(max.saturating_sub(1)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ClusterState;
    use std::path::Path;

    /// A workload of the scenarios folder as the controller would see it (pods unschedulable).
    fn load(files: &[&str]) -> (Cluster, Objects) {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let paths: Vec<_> = files.iter().map(|f| root.join(f)).collect();
        let w = stowage_input::load(&paths).unwrap();
        (w.cluster, w.objects)
    }

    #[test]
    fn seed_2_plans_one_m5_16xlarge_claim_pinned_to_its_offering() {
        let (cluster, objects) = load(&[
            "scenarios/common-ec2nodeclass.yaml",
            "scenarios/seed-2-apiserver-anti-affinity/nodepool.yaml",
            "scenarios/seed-2-apiserver-anti-affinity/deployment.yaml",
            "scenarios/seed-2-apiserver-anti-affinity/companions.yaml",
        ]);
        let d = plan_batch(&cluster, &objects, stowage_input::catalog::default_catalog(), &Weights::default(), &PlannerSettings::default(), "b1").unwrap();
        assert_eq!(d.claims.len(), 1, "{:#?}", d.plan);
        let c = &d.claims[0];
        assert_eq!(c.instance_type, "m5.16xlarge");
        assert_eq!(c.pods.len(), 3);
        let nc = &c.nodeclaim;
        assert_eq!(nc.metadata.generate_name.as_deref(), Some("control-plane-"));
        assert_eq!(nc.metadata.finalizers.as_deref(), Some(&[TERMINATION_FINALIZER.to_string()][..]));
        let req = |k: &str| nc.spec.requirements.iter().filter(|r| r.key == k).map(|r| r.values.clone()).collect::<Vec<_>>();
        assert_eq!(req(keys::INSTANCE_TYPE), vec![vec!["m5.16xlarge".to_string()]], "the pool allows one type: no fallback");
        assert_eq!(req(keys::ZONE), vec![vec![c.zone.clone()]]);
        assert_eq!(req(keys::CAPACITY_TYPE), vec![vec!["on-demand".to_string()]]);
        let labels = nc.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.get("kit.k8s.sh/control-plane-name").map(String::as_str), Some("example"), "template labels");
        assert_eq!(labels.get(keys::NODEPOOL).map(String::as_str), Some("control-plane"));
        assert_eq!(nc.metadata.annotations.as_ref().unwrap().get(BATCH_ANNOTATION).map(String::as_str), Some("b1"));
        assert_eq!(nc.spec.expire_after.as_deref(), Some("720h"));
        let requests = nc.spec.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("3"));
    }

    #[test]
    fn custom_domain_values_are_pinned_and_fallbacks_take_the_same_pods() {
        let (cluster, objects) = load(&[
            "scenarios/common-ec2nodeclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/storageclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml",
        ]);
        let d = plan_batch(&cluster, &objects, stowage_input::catalog::default_catalog(), &Weights::default(), &PlannerSettings::default(), "b").unwrap();
        assert_eq!(d.claims.len(), 3);
        let mut spreads: Vec<String> = Vec::new();
        for c in &d.claims {
            let r = c.nodeclaim.spec.requirements.iter().find(|r| r.key == "capacity-spread").unwrap();
            assert_eq!(r.values.len(), 1, "pinned: {r:?}");
            spreads.push(r.values[0].clone());
            let types = &c.nodeclaim.spec.requirements.iter().find(|r| r.key == keys::INSTANCE_TYPE).unwrap().values;
            assert_eq!(types[0], c.instance_type, "the plan's type first");
            assert!(types.len() > 1 && types.len() <= 20, "{types:?}");
            let cat = stowage_input::catalog::default_catalog();
            for t in types {
                let cat_t = cat.get(t).unwrap();
                let category = cat_t.labels.get("karpenter.k8s.aws/instance-category").unwrap();
                assert!(["c", "m", "r"].contains(&category.as_str()), "{t}: the pool's requirement holds");
                assert!(cat_t.offerings.iter().any(|o| o.zone == c.zone && o.capacity_type == c.capacity_type && o.available));
            }
            // The pool's own requirement on capacity-spread (In [1, 2]) is replaced by the pinned one.
            assert_eq!(c.nodeclaim.spec.requirements.iter().filter(|r| r.key == "capacity-spread").count(), 1);
        }
        spreads.sort();
        assert_eq!(spreads, vec!["1", "2", "3"]);
    }

    #[test]
    fn the_same_state_gives_the_same_nodeclaims() {
        let (cluster, objects) = load(&[
            "scenarios/common-ec2nodeclass.yaml",
            "scenarios/seed-1b-statefulset-zonal-rescale/nodepool.yaml",
            "scenarios/seed-1b-statefulset-zonal-rescale/storageclass.yaml",
            "scenarios/seed-1b-statefulset-zonal-rescale/statefulset.yaml",
        ]);
        let run = || {
            let d = plan_batch(&cluster, &objects, stowage_input::catalog::default_catalog(), &Weights::default(), &PlannerSettings::default(), "b").unwrap();
            d.claims.iter().map(|c| serde_json::to_string(&c.nodeclaim).unwrap()).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a.len(), 5);
        assert_eq!(a, run());
    }

    #[test]
    fn pods_planned_onto_an_in_flight_claim_are_not_launched_for_again() {
        // Plan a batch, feed the NodeClaims back as in flight (not launched yet), plan again.
        let (cluster, objects) = load(&[
            "scenarios/common-ec2nodeclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/storageclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml",
        ]);
        let cat = stowage_input::catalog::default_catalog();
        let d = plan_batch(&cluster, &objects, cat, &Weights::default(), &PlannerSettings::default(), "b").unwrap();
        let mut s = ClusterState::default();
        for o in &objects.nodepools {
            s.apply(o.obj.clone());
        }
        for o in &objects.nodeclasses {
            s.apply(o.obj.clone());
        }
        for o in &objects.storageclasses {
            s.apply(o.obj.clone());
        }
        for o in &objects.pvcs {
            s.apply(o.obj.clone());
        }
        for o in &objects.pods {
            let mut p = o.obj.clone();
            p.status.get_or_insert_with(Default::default).conditions =
                Some(vec![k8s_openapi::api::core::v1::PodCondition { type_: "PodScheduled".into(), status: "False".into(), reason: Some("Unschedulable".into()), ..Default::default() }]);
            s.apply(p);
        }
        for (i, c) in d.claims.iter().enumerate() {
            let mut nc = c.nodeclaim.clone();
            nc.metadata.name = Some(format!("claim-{i}"));
            nc.metadata.uid = Some(format!("uid-{i}"));
            s.apply(nc);
        }
        let snap = s.snapshot(cat).unwrap();
        let again = plan_batch(&snap.cluster, &snap.objects, cat, &Weights::default(), &PlannerSettings::default(), "b2").unwrap();
        assert!(again.claims.is_empty(), "{:#?}", again.plan);
        assert!(again.nominations.iter().all(|(_, n)| matches!(n, Nominated::InFlight(_))));
        assert_eq!(again.nominations.len(), 3);
    }
}
