//! One batch in the controller: the shared provisioning decision (`stowage_decide::provision`, which
//! the simulator runs too and which documents the rules: NodeClaims, fallback types, persisted
//! nominations) over the controller's snapshot, with the controller's planner settings.
//!
//! Invariants: the function is pure apart from the MILP's time budget (same snapshot, same NodeClaims);
//! the planner counts existing nodes and NodeClaims in flight (the snapshot holds them), and pods a
//! NodeClaim in flight names in its nominated-pods annotation are planned onto it, so a batch (even the
//! first after a restart) never launches twice for the same pods.

use stowage_core::domain::Cluster;
use stowage_core::domain::catalog::Catalog;
use stowage_core::solve;
use stowage_core::weights::Weights;
use stowage_decide::provision::{self, Input};
pub use stowage_decide::provision::{BATCH_ANNOTATION, Decision, NOMINATED_PODS_ANNOTATION, Nominated, PlannedClaim, PodRef, ProvisionError};
use stowage_input::Objects;

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

/// Plans a batch. `objects` are the snapshot's objects (the NodePools' owner references and templates,
/// the NodeClaims' nominations come from them); `catalog` already has the offerings the cloud refused
/// marked unavailable.
pub fn plan_batch(cluster: &Cluster, objects: &Objects, catalog: &Catalog, weights: &Weights, settings: &PlannerSettings, batch_id: &str) -> Result<Decision, ProvisionError> {
    let input = Input { cluster, objects, catalog, weights, max_instance_types: settings.max_instance_types, batch: batch_id };
    let mut planner = settings.planner;
    provision::decide(&input, &mut planner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ClusterState, TERMINATION_FINALIZER};
    use std::path::Path;
    use stowage_core::domain::labels::keys;

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

    /// A controller restarted between creating its NodeClaims and their registration: a fresh
    /// `ClusterState` lists the pods (still unschedulable) and the NodeClaims (not launched yet), and
    /// the first batch plans nothing new. The NodeClaims' nominated-pods annotation carries it: every
    /// pod is pinned to the NodeClaim created for it, none is given to the planner.
    #[test]
    fn a_restarted_controller_does_not_plan_the_same_pods_twice() {
        let (cluster, objects) = load(&[
            "scenarios/common-ec2nodeclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/nodepools.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/storageclass.yaml",
            "scenarios/seed-1-statefulset-capacity-spread/statefulset.yaml",
        ]);
        let cat = stowage_input::catalog::default_catalog();
        let d = plan_batch(&cluster, &objects, cat, &Weights::default(), &PlannerSettings::default(), "b").unwrap();
        assert_eq!(d.claims.len(), 3);
        let restarted = |annotate: bool| {
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
                let mut nc = c.named(&format!("claim-{i}"));
                nc.metadata.uid = Some(format!("uid-{i}"));
                if !annotate {
                    nc.metadata.annotations.get_or_insert_with(Default::default).remove(NOMINATED_PODS_ANNOTATION);
                }
                s.apply(nc);
            }
            let snap = s.snapshot(cat).unwrap();
            plan_batch(&snap.cluster, &snap.objects, cat, &Weights::default(), &PlannerSettings::default(), "b2").unwrap()
        };
        let again = restarted(true);
        assert!(again.claims.is_empty(), "{:#?}", again.plan);
        assert_eq!(again.pins.len(), 3, "the annotation pins every pod to its NodeClaim");
        assert!(again.plan.placements.is_empty(), "pinned pods are not planned again: {:#?}", again.plan);
        let mut nominated: Vec<(String, Nominated)> = again.nominations.iter().map(|(p, n)| (p.uid.clone(), n.clone())).collect();
        nominated.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected: Vec<(String, Nominated)> = d.claims.iter().enumerate().flat_map(|(i, c)| c.pods.iter().map(move |p| (p.uid.clone(), Nominated::InFlight(format!("claim-{i}"))))).collect();
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(nominated, expected, "each pod stays with the NodeClaim created for it");
        // Without the annotation the planner sees the pods again (and, here, finds the same in-flight
        // room): the pin is what the annotation adds.
        let unannotated = restarted(false);
        assert!(unannotated.pins.is_empty());
        assert_eq!(unannotated.plan.placements.len(), 3);
    }
}
