//! The simulator and the controller decide alike: batching, the refused-offering cache and disruption
//! are one implementation (`stowage_decide`), which the controller runs on tokio's clock (the API
//! server's timestamps for disruption) and the simulator on its simulated one. These tests pin both
//! halves of that claim: the controller's types *are* the shared ones (they do not compile otherwise),
//! and the same inputs at the same offsets give the same decisions on both clocks (the simulator counts
//! whole milliseconds, tokio nanoseconds): the same batch, the same refused offering, the same
//! disruption, and the same NodeClaim lifecycle steps at the same moments (the controller deciding on
//! real NodeClaim and Node objects read through its clock, under tokio's paused time).

use std::collections::BTreeSet;
use std::time::Duration;

use stowage_core::domain::catalog::Catalog;
use stowage_decide::batch::{BatchConfig, Batcher};
use stowage_decide::offerings::Unavailable;
use stowage_sim::time::SimTime;
use tokio::time::Instant;

/// A fixed, irregular schedule of (milliseconds, pod) triggers with repeats, gaps longer than the idle
/// window and a burst longer than the max window.
fn schedule() -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut t = 0;
    for i in 0..200u64 {
        t += [10, 300, 999, 1_000, 1_001, 5, 2_500, 40][(i * 7 % 8) as usize];
        let pod = format!("p{}", i * 13 % 37);
        out.push((t, pod));
    }
    out
}

#[test]
fn the_same_triggers_close_the_same_batches_on_both_clocks() {
    let config = BatchConfig { idle: Duration::from_secs(1), max: Duration::from_secs(10) };
    let mut ctl: Batcher<Instant> = Batcher::new(config);
    let mut sim: Batcher<SimTime> = Batcher::new(config);
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut closed = (Vec::new(), Vec::new());
    for (ms, pod) in schedule() {
        // Each side polls before the event (a due window closes first), then sees the trigger.
        if let Some(n) = ctl.close_if_due(at(ms)) {
            closed.0.push((ms, n));
        }
        if let Some(n) = sim.close_if_due(SimTime(ms)) {
            closed.1.push((ms, n));
        }
        ctl.trigger(&pod, at(ms));
        sim.trigger(&pod, SimTime(ms));
        let d_ctl = ctl.deadline().map(|d| d.duration_since(t0).as_millis() as u64);
        let d_sim = sim.deadline().map(|d| d.0);
        assert_eq!(d_ctl, d_sim, "deadline after the trigger at {ms} ms");
    }
    assert_eq!(closed.0, closed.1);
    assert!(closed.0.len() > 20, "the schedule closes many windows: {closed:?}");
    assert!(closed.0.iter().any(|&(_, n)| n >= 5), "and some hold several pods: {closed:?}");
}

#[test]
fn the_same_refusals_hide_the_same_offerings_on_both_clocks() {
    let catalog: &Catalog = stowage_input::catalog::default_catalog();
    let ttl = Duration::from_secs(180);
    let t0 = Instant::now();
    // The controller's cache is its own type alias of the shared one.
    let mut ctl: stowage_controller::launcher::Unavailable = Unavailable::default();
    let mut sim: Unavailable<SimTime> = Unavailable::default();
    let refusals = [(0, "m5.large", "us-east-1a", "spot"), (60_000, "m5.large", "us-east-1a", "spot"), (90_000, "c5.xlarge", "us-east-1b", "on-demand"), (200_000, "m5.large", "us-east-1c", "spot")];
    let hidden = |c: &Catalog| -> BTreeSet<(String, String, String)> {
        c.types.iter().flat_map(|t| t.offerings.iter().filter(|o| !o.available).map(move |o| (t.name.clone(), o.zone.clone(), o.capacity_type.clone()))).collect()
    };
    let base = hidden(catalog);
    let mut applied = 0;
    for ms in [0, 179_999, 180_000, 200_000, 239_999, 240_000, 269_999, 270_000, 379_999, 380_000] {
        while applied < refusals.len() && refusals[applied].0 <= ms {
            let (at, t, z, ct) = refusals[applied];
            ctl.mark((t.into(), z.into(), ct.into()), t0 + Duration::from_millis(at) + ttl);
            sim.mark((t.into(), z.into(), ct.into()), SimTime(at) + ttl);
            applied += 1;
        }
        let a = hidden(&ctl.view(catalog, t0 + Duration::from_millis(ms)));
        let b = hidden(&sim.view(catalog, SimTime(ms)));
        assert_eq!(a, b, "at {ms} ms");
        // An offering is hidden while its latest refusal is younger than the TTL.
        let mut expect = base.clone();
        for &(_, t, z, ct) in &refusals {
            let last = refusals.iter().filter(|r| (r.1, r.2, r.3) == (t, z, ct) && r.0 <= ms).map(|r| r.0).max();
            if last.is_some_and(|l| l + 180_000 > ms) {
                expect.insert((t.into(), z.into(), ct.into()));
            }
        }
        assert_eq!(a, expect, "at {ms} ms");
    }
}

#[test]
fn the_same_nodes_are_disrupted_on_both_clocks() {
    use k8s_openapi::jiff::Timestamp;
    use stowage_decide::disruption::{Candidate, Disruption, PoolPolicy};

    let t0 = Timestamp::from_second(1_800_000_000).unwrap();
    let pools: std::collections::BTreeMap<String, PoolPolicy> = [
        ("fast".to_string(), PoolPolicy { consolidate_after: Some(Duration::ZERO), budgets: vec!["50%".into()] }),
        ("slow".to_string(), PoolPolicy { consolidate_after: Some(Duration::from_secs(30)), budgets: vec!["10%".into()] }),
        ("never".to_string(), PoolPolicy { consolidate_after: None, budgets: vec!["100%".into()] }),
    ]
    .into();
    let observations: Vec<Vec<Observation>> = vec![
        vec![("a", "fast", 0, false, None), ("b", "fast", 0, true, None), ("c", "slow", 0, false, None), ("d", "slow", 2, false, Some(100)), ("e", "never", 0, false, None)],
        vec![("b", "fast", 0, false, None), ("c", "slow", 1, false, None), ("d", "slow", 2, false, Some(100)), ("e", "never", 0, false, None), ("f", "fast", 0, false, None)],
        vec![("c", "slow", 0, false, None), ("d", "slow", 2, false, Some(100)), ("e", "never", 0, false, None)],
    ];
    let times = [0u64, 20, 45, 60, 75, 101];
    let mut ctl: stowage_controller::disruption::Disruption = Disruption::default();
    let mut sim: Disruption<SimTime> = Disruption::default();
    let mut decided = (Vec::new(), Vec::new());
    for (i, &s) in times.iter().enumerate() {
        let obs = &observations[i.min(observations.len() - 1)];
        let c_ctl: Vec<Candidate<Timestamp>> = candidates(obs, t0);
        let c_sim: Vec<Candidate<SimTime>> = candidates(obs, SimTime(0));
        let a = ctl.decide(&c_ctl, &pools, t0 + Duration::from_secs(s));
        let b = sim.decide(&c_sim, &pools, SimTime(s * 1000));
        decided.0.push((s, a));
        decided.1.push((s, b));
    }
    assert_eq!(decided.0, decided.1);
    let names: Vec<(u64, String)> = decided.0.iter().flat_map(|(s, a)| a.iter().map(move |x| (*s, x.nodeclaim.clone()))).collect();
    assert!(names.contains(&(0, "a".to_string())), "an empty node of a 0s pool goes at once: {names:?}");
    assert!(!names.iter().any(|(_, n)| n == "e"), "consolidateAfter: Never keeps it: {names:?}");
    assert!(names.contains(&(101, "d".to_string())), "expireAfter removes a busy node: {names:?}");
}

/// Consolidation on both clocks: the same cluster, observed at the start and judged at the same
/// offsets, gives the same outcome (nothing before `consolidateAfter`, then the same nodes removed and
/// the same replacements), the controller's memory keyed on the API server's timestamps, the
/// simulator's on `SimTime`.
#[test]
fn the_same_underutilised_nodes_are_consolidated_on_both_clocks() {
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;
    use stowage_decide::consolidation::{Consolidation, Input, Outcome, Settings};

    let catalog = stowage_input::catalog::default_catalog();
    let node = |name: &str| {
        let t = catalog.get("m5.xlarge").unwrap();
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.xlarge", "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "np",
                "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true", "topology.kubernetes.io/zone": "us-east-1a"}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
            "status": {"allocatable": stowage_decide::provision::quantities(&t.allocatable()), "capacity": stowage_decide::provision::quantities(&t.capacity), "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let pod = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]},
            "status": {"phase": "Running"}})
    };
    let items = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np", "uid": "np-uid"},
         "spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s", "budgets": [{"nodes": "100%"}]},
                  "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [
                      {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                      {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}]}}}},
        node("a"), node("b"), node("c"), pod("web-a", "a"), pod("web-b", "b"), pod("web-c", "c"),
    ]});
    let text = serde_json::to_string(&items).unwrap();
    let w = stowage_input::load_texts([(std::path::Path::new("three-half-empty.yaml"), text.as_str())]).unwrap();
    let weights = stowage_core::weights::Weights::default();
    let settings = Settings::default();
    let input = Input { base: stowage_decide::provision::Input { cluster: &w.cluster, objects: &w.objects, catalog, weights: &weights, max_instance_types: 20, batch: "c-1" }, settings: &settings };
    let greedy = || stowage_core::solve::Planner { solver: stowage_core::solve::Solver::Greedy, ..Default::default() };
    // What a decision is, apart from the clock: removed nodes, replacements (type, zone, capacity type, pods).
    let summary = |o: Outcome| match o {
        Outcome::Consolidate(d) => {
            let r = stowage_core::check::check(&d.planned_on, catalog, &d.replacements.plan);
            assert!(r.valid(), "the checker rejects the displaced pods' placement: {:?}", r.violations);
            let claims: Vec<String> = d.replacements.claims.iter().map(|c| format!("{} {} {} {}", c.instance_type, c.zone, c.capacity_type, c.pods.len())).collect();
            format!("remove {:?}, launch {claims:?}", d.remove.iter().map(|r| r.node.clone()).collect::<Vec<_>>())
        }
        Outcome::Nothing { candidates, .. } => format!("nothing ({candidates} candidates)"),
        Outcome::NotSettled => "not settled".to_string(),
    };
    let t0 = Timestamp::from_second(1_800_000_000).unwrap();
    let mut decided = (Vec::new(), Vec::new());
    for s in [10u64, 29, 30, 45] {
        let mut ctl: Consolidation<Timestamp> = Consolidation::default();
        let mut sim: Consolidation<SimTime> = Consolidation::default();
        ctl.observe(&w.cluster, t0);
        sim.observe(&w.cluster, SimTime(0));
        let (mut p, mut q) = (greedy(), greedy());
        decided.0.push((s, summary(ctl.decide(&input, &mut p, t0 + Duration::from_secs(s)).unwrap())));
        decided.1.push((s, summary(sim.decide(&input, &mut q, SimTime(s * 1000)).unwrap())));
    }
    assert_eq!(decided.0, decided.1);
    assert_eq!(decided.0[0].1, "nothing (0 candidates)", "before consolidateAfter nothing is due");
    assert!(decided.0[2].1.starts_with("remove"), "at consolidateAfter the half-empty nodes go: {:?}", decided.0);
}

/// (node, pool, workload pods, nominated, expireAfter in seconds) as the shared decision's candidates,
/// created at `created`.
type Observation<'a> = (&'a str, &'a str, usize, bool, Option<u64>);

fn candidates<T: Copy>(obs: &[Observation], created: T) -> Vec<stowage_decide::disruption::Candidate<T>> {
    obs.iter()
        .map(|&(n, p, pods, nominated, expire)| stowage_decide::disruption::Candidate {
            nodeclaim: n.into(),
            nodepool: p.into(),
            created: Some(created),
            expire_after: expire.map(Duration::from_secs),
            deleting: false,
            initialized: true,
            workload_pods: pods,
            do_not_disrupt: false,
            nominated,
        })
        .collect()
}

// Provisioning: the same cluster state, through the controller's path (its watch index, snapshot and
// `provisioner::plan_batch`) and the simulator's (its world and `provisioner::decide`), gives the same
// NodeClaims, nominations and unschedulable pods.

mod provisioning {
    use std::path::Path;

    use k8s_openapi::api::core::v1::PodCondition;
    use stowage_controller::provisioner::{Decision, NOMINATED_PODS_ANNOTATION, Nominated, PlannerSettings, plan_batch};
    use stowage_controller::state::ClusterState;
    use stowage_core::domain::catalog::Catalog;
    use stowage_core::solve::{Planner, Solver};
    use stowage_core::weights::Weights;
    use stowage_decide::offerings::Unavailable;
    use stowage_input::Objects;
    use stowage_input::api::NodeClaim;
    use stowage_sim::time::SimTime;
    use stowage_sim::world::World;

    fn load(files: &[&str]) -> Objects {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let paths: Vec<_> = files.iter().map(|f| root.join(f)).collect();
        stowage_input::load(&paths).unwrap().objects
    }

    fn greedy() -> Planner {
        Planner { solver: Solver::Greedy, ..Planner::default() }
    }

    /// The controller: a fresh watch index fed the objects (pods as kube-scheduler leaves them:
    /// unschedulable), its snapshot, its batch.
    fn controller(objects: &Objects, catalog: &Catalog) -> Decision {
        let mut s = ClusterState::default();
        objects.nodepools.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.nodeclasses.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.storageclasses.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.csinodes.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.pvcs.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.pvs.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.daemonsets.iter().for_each(|o| s.apply(o.obj.clone()));
        objects.nodeclaims.iter().for_each(|o| s.apply(o.obj.clone()));
        for o in &objects.pods {
            let mut p = o.obj.clone();
            p.status.get_or_insert_with(Default::default).conditions =
                Some(vec![PodCondition { type_: "PodScheduled".into(), status: "False".into(), reason: Some("Unschedulable".into()), ..Default::default() }]);
            s.apply(p);
        }
        let snap = s.snapshot(catalog).unwrap();
        plan_batch(&snap.cluster, &snap.objects, catalog, &Weights::default(), &PlannerSettings { planner: greedy(), max_instance_types: 20 }, "sim-1").unwrap()
    }

    /// The simulator: its world holding the same objects, its batch.
    fn simulator(objects: &Objects, catalog: &Catalog) -> Decision {
        let mut world = World::default();
        world.apply(objects.clone());
        let cluster = world.build().unwrap();
        stowage_sim::provisioner::decide(&world, &cluster, catalog, &Weights::default(), &mut greedy(), 1).unwrap()
    }

    /// What must agree: every NodeClaim as JSON, the offerings in launch order, the nominations by pod
    /// uid, the unschedulable pods.
    type Summary = (Vec<String>, Vec<Vec<(String, String, String)>>, Vec<(String, Nominated)>, Vec<(String, String)>);

    fn summary(d: &Decision) -> Summary {
        let claims = d.claims.iter().map(|c| serde_json::to_string(&c.nodeclaim).unwrap()).collect();
        let offerings = d.claims.iter().map(|c| c.offerings.iter().map(|o| (o.instance_type.clone(), o.zone.clone(), o.capacity_type.clone())).collect()).collect();
        let mut noms: Vec<(String, Nominated)> = d.nominations.iter().map(|(p, n)| (p.uid.clone(), n.clone())).collect();
        noms.sort_by(|a, b| a.0.cmp(&b.0));
        let unsched = d.unschedulable.iter().map(|(p, r)| (p.uid.clone(), r.clone())).collect();
        (claims, offerings, noms, unsched)
    }

    fn seed(name: &str, files: &[&str]) -> Objects {
        let mut all = vec!["scenarios/common-ec2nodeclass.yaml".to_string()];
        all.extend(files.iter().map(|f| format!("scenarios/{name}/{f}")));
        load(&all.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn the_same_pending_pods_give_the_same_nodeclaims_and_nominations() {
        let catalog = stowage_input::catalog::default_catalog();
        for objects in [
            seed("seed-1-statefulset-capacity-spread", &["nodepools.yaml", "storageclass.yaml", "statefulset.yaml"]),
            seed("seed-1b-statefulset-zonal-rescale", &["nodepool.yaml", "storageclass.yaml", "statefulset.yaml"]),
            seed("seed-2-apiserver-anti-affinity", &["nodepool.yaml", "deployment.yaml", "companions.yaml"]),
        ] {
            let (a, b) = (controller(&objects, catalog), simulator(&objects, catalog));
            assert!(!a.claims.is_empty());
            assert!(a.claims.iter().all(|c| c.offerings.first().map(|o| &o.instance_type) == Some(&c.instance_type)), "the plan's offering is tried first");
            assert_eq!(summary(&a), summary(&b));
        }
    }

    /// A refused offering, on each side's clock, hides the same offerings: both decide the same
    /// NodeClaims around it, and neither offers it to the cloud.
    #[test]
    fn the_same_refused_offering_gives_the_same_nodeclaims() {
        let base = stowage_input::catalog::default_catalog();
        let objects = seed("seed-1-statefulset-capacity-spread", &["nodepools.yaml", "storageclass.yaml", "statefulset.yaml"]);
        let first = controller(&objects, base);
        let c = &first.claims[0];
        let key = (c.instance_type.clone(), c.zone.clone(), c.capacity_type.clone());
        let t0 = tokio::time::Instant::now();
        let mut ctl: stowage_controller::launcher::Unavailable = Unavailable::default();
        ctl.mark(key.clone(), t0 + std::time::Duration::from_secs(180));
        let mut sim: Unavailable<SimTime> = Unavailable::default();
        sim.mark(key.clone(), SimTime(180_000));
        let (a, b) = (controller(&objects, &ctl.view(base, t0)), simulator(&objects, &sim.view(base, SimTime(0))));
        assert_eq!(summary(&a), summary(&b));
        for c in &a.claims {
            assert!(!c.offerings.iter().any(|o| (&o.instance_type, &o.zone, &o.capacity_type) == (&key.0, &key.1, &key.2)), "{key:?} offered again");
        }
    }

    /// NodeClaims in flight with their persisted nominations and a new pending pod: both sides pin the
    /// nominated pods to their NodeClaims and plan the new pod alone, alike.
    #[test]
    fn the_same_in_flight_nodeclaims_give_the_same_decision() {
        let catalog = stowage_input::catalog::default_catalog();
        let mut objects = seed("seed-2-apiserver-anti-affinity", &["nodepool.yaml", "deployment.yaml", "companions.yaml"]);
        let first = controller(&objects, catalog);
        let mut claims: Vec<NodeClaim> = first.claims.iter().enumerate().map(|(i, c)| c.named(&format!("control-plane-{i}"))).collect();
        for (i, c) in claims.iter_mut().enumerate() {
            c.metadata.uid = Some(format!("claim-uid-{i}"));
            // Launched, as both write it: the instance's capacity in the status.
            let t = catalog.get(&first.claims[i].instance_type).unwrap();
            let status = c.status.get_or_insert_with(Default::default);
            status.capacity = Some(stowage_decide::provision::quantities(&t.capacity));
            status.allocatable = Some(stowage_decide::provision::quantities(&t.allocatable()));
            assert!(!c.metadata.annotations.as_ref().unwrap()[NOMINATED_PODS_ANNOTATION].is_empty());
        }
        objects.nodeclaims = claims.into_iter().map(|obj| stowage_input::objects::Obj { source: stowage_input::Source { file: "<test>".into(), doc: 0, item: None }, obj }).collect();
        let (a, b) = (controller(&objects, catalog), simulator(&objects, catalog));
        assert_eq!(summary(&a), summary(&b));
        assert_eq!(a.pins.len(), first.nominations.len(), "every pod of the first batch is pinned");
        assert!(a.claims.is_empty(), "nothing is launched twice: {:#?}", a.plan);
    }
}
/// What happened to one NodeClaim by a moment: (seconds, change).
#[derive(Clone, Copy, Debug)]
enum Change {
    Launched,
    NodeAppears,
    Registered,
    NodeReady,
    Initialized,
    NodeDeleting,
    InstanceGone,
    Deleting,
}

#[derive(Clone, Debug, Default)]
struct History {
    launched: Option<u64>,
    node: bool,
    registered: bool,
    ready: bool,
    initialized: bool,
    node_deleting: bool,
    instance_gone: bool,
    deleting: bool,
}

impl History {
    fn at(changes: &[(u64, Change)], s: u64) -> History {
        let mut h = History::default();
        for &(at, c) in changes.iter().filter(|(at, _)| *at <= s) {
            match c {
                Change::Launched => h.launched = Some(at),
                Change::NodeAppears => h.node = true,
                Change::Registered => h.registered = true,
                Change::NodeReady => h.ready = true,
                Change::Initialized => h.initialized = true,
                Change::NodeDeleting => h.node_deleting = true,
                Change::InstanceGone => h.instance_gone = true,
                Change::Deleting => h.deleting = true,
            }
        }
        h
    }

    /// As the simulator observes its NodeClaims (created at 0).
    fn observed(&self) -> stowage_decide::lifecycle::Observed<SimTime> {
        use stowage_decide::lifecycle::{NodeSeen, Observed};
        let node = self.node.then(|| NodeSeen { name: "n1".into(), deleting: self.node_deleting, registered: self.registered, ready: self.ready, initialized: self.initialized });
        Observed { created: Some(SimTime(0)), deleting: self.deleting, finalizer: true, launched: self.launched.map(|s| SimTime(s * 1000)), instance_gone: self.instance_gone, node }
    }

    /// As the controller sees it: a NodeClaim created at `t0` and its Node, as the API server holds them.
    fn objects(&self, t0: k8s_openapi::jiff::Timestamp) -> (stowage_input::api::NodeClaim, Option<k8s_openapi::api::core::v1::Node>) {
        use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        use stowage_input::api::{Condition, NodeClaim, NodeClaimSpec, NodeClaimStatus};
        let at = |s: u64| t0 + Duration::from_secs(s);
        let cond = |t: &str, s: u64| Condition {
            type_: t.into(),
            status: "True".into(),
            reason: None,
            message: None,
            last_transition_time: Some(stowage_controller::conditions::timestamp(at(s))),
            observed_generation: None,
        };
        let mut c = NodeClaim::new("np-a", NodeClaimSpec::default());
        c.metadata.creation_timestamp = Some(Time(t0));
        c.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
        if self.deleting {
            c.metadata.deletion_timestamp = Some(Time(t0));
        }
        let pid = "aws:///us-east-1a/i-1".to_string();
        if let Some(l) = self.launched {
            let mut conditions = vec![cond("Launched", l)];
            let mut status = NodeClaimStatus { provider_id: Some(pid.clone()), ..Default::default() };
            if self.registered {
                conditions.push(cond("Registered", l));
                status.node_name = Some("n1".into());
            }
            if self.initialized {
                conditions.push(cond("Initialized", l));
            }
            status.conditions = Some(conditions);
            c.status = Some(status);
        }
        let node = self.node.then(|| {
            let mut labels = std::collections::BTreeMap::new();
            let mut finalizers = None;
            let mut taints = vec![k8s_openapi::api::core::v1::Taint { key: "karpenter.sh/unregistered".into(), effect: "NoExecute".into(), ..Default::default() }];
            if self.registered {
                labels.insert("karpenter.sh/registered".to_string(), "true".to_string());
                finalizers = Some(vec!["karpenter.sh/termination".to_string()]);
                taints.clear();
            }
            if self.initialized {
                labels.insert("karpenter.sh/initialized".to_string(), "true".to_string());
            }
            Node {
                metadata: ObjectMeta { name: Some("n1".into()), labels: Some(labels), finalizers, deletion_timestamp: self.node_deleting.then_some(Time(t0)), ..Default::default() },
                spec: Some(NodeSpec { provider_id: Some(pid.clone()), taints: Some(taints), ..Default::default() }),
                status: Some(NodeStatus {
                    conditions: Some(vec![NodeCondition { type_: "Ready".into(), status: if self.ready { "True" } else { "False" }.into(), ..Default::default() }]),
                    ..Default::default()
                }),
            }
        });
        (c, node)
    }
}

/// The same NodeClaim histories give the same lifecycle steps, with the same deadlines, at the same
/// moments: the controller decides on NodeClaim and Node objects at its clock's now, with tokio's time
/// paused and advanced (no real time passes across the 15-minute registration timeout); the simulator
/// on `SimTime`. Histories are in whole seconds, as the API server's condition timestamps are.
#[tokio::test(start_paused = true)]
async fn the_same_nodeclaim_histories_take_the_same_lifecycle_steps_on_both_clocks() {
    use Change::*;
    use stowage_controller::clock::Clock;
    use stowage_controller::registration;
    use stowage_decide::lifecycle::{Step, Timeouts, decide};

    let t0 = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let timeouts = Timeouts::default();
    let histories: Vec<Vec<(u64, Change)>> = vec![
        vec![(2, Launched), (40, NodeAppears), (41, Registered), (60, NodeReady), (61, Initialized)],
        vec![(5, Launched)],
        vec![],
        vec![(3, Launched), (50, NodeAppears), (51, Registered), (52, NodeReady), (53, Initialized), (400, NodeDeleting), (401, Deleting)],
        vec![(3, Launched), (20, InstanceGone)],
        vec![(3, Launched), (1000, NodeAppears)],
    ];
    let moments: Vec<u64> = vec![0, 1, 2, 3, 5, 20, 40, 41, 50, 52, 53, 60, 61, 299, 300, 400, 401, 902, 903, 904, 905, 906, 999, 1000];
    let mut seen_steps = BTreeSet::new();
    for (i, changes) in histories.iter().enumerate() {
        let start = tokio::time::Instant::now();
        let clock = Clock::anchored(t0);
        for &s in &moments {
            tokio::time::sleep_until(start + Duration::from_secs(s)).await;
            let h = History::at(changes, s);
            let (claim, node) = h.objects(t0);
            let ctl = registration::decision(&claim, node.as_ref(), h.instance_gone, clock.now(), &timeouts);
            let sim = decide(&h.observed(), SimTime(s * 1000), &timeouts);
            assert_eq!(ctl.step, sim.step, "history {i} at {s}s");
            let ctl_until = ctl.until.map(|u| stowage_decide::disruption::Moment::since(u, t0).as_millis() as u64);
            assert_eq!(ctl_until, sim.until.map(|u| u.0), "history {i} at {s}s: the deadline");
            seen_steps.insert(format!("{:?}", std::mem::discriminant(&sim.step)));
            if s == 905 && i == 1 {
                assert_eq!(sim.step, Step::RegistrationTimeout { since_launch: Duration::from_secs(900) }, "launch + 15 min");
            }
            if s == 300 && i == 2 {
                assert_eq!(sim.step, Step::LaunchTimeout { age: Duration::from_secs(300) });
            }
        }
    }
    assert!(seen_steps.len() >= 10, "the histories reach most steps: {seen_steps:?}");
}
