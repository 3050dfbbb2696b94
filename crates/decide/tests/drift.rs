//! Table tests for `stowage_decide::drift`: the causes Karpenter and its AWS provider name (AMI,
//! security groups, subnet, capacity reservation, as EC2 describes the instance), and several drifted nodes replaced at
//! once within the pool's `Drifted` budget, pass after pass, on real YAML through `stowage_input`.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use stowage_decide::cloud::Instance;
use stowage_decide::drift::{self, Cause, Round};
use stowage_decide::provision::quantities;
use stowage_input::Workload;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// The EC2NodeClass `default`, resolved to image ami-1, subnets subnet-a (us-east-1a) and subnet-b,
/// security groups sg-1 and sg-2.
fn nodeclass() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
        "status": {"amis": [{"id": "ami-1", "requirements": []}],
                   "subnets": [{"id": "subnet-a", "zone": "us-east-1a"}, {"id": "subnet-b", "zone": "us-east-1b"}],
                   "securityGroups": [{"id": "sg-1"}, {"id": "sg-2"}]}})
}

fn pool(budgets: Value) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
        "spec": {"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m", "budgets": budgets},
                 "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})
}

fn node(name: &str) -> Value {
    let t = stowage_input::catalog::default_catalog().get("m5.large").unwrap();
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "np",
            "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true", "topology.kubernetes.io/zone": "us-east-1a"}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
        "status": {"allocatable": quantities(&t.allocatable()), "capacity": quantities(&t.capacity), "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// The NodeClaim of node `name`, running ami-1; `drifted_since` is its `Drifted` condition's time.
fn claim(name: &str, drifted_since: Option<&str>) -> Value {
    let conditions = match drifted_since {
        Some(t) => json!([{"type": "Drifted", "status": "True", "reason": "SubnetDrift", "lastTransitionTime": t}]),
        None => json!([]),
    };
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "np", "karpenter.sh/capacity-type": "on-demand"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"nodeName": name, "providerID": format!("aws:///us-east-1a/i-{name}"), "imageID": "ami-1", "conditions": conditions}})
}

fn pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running"}})
}

fn load(items: Vec<Value>) -> Workload {
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    stowage_input::load_texts([(Path::new("test.yaml"), text.as_str())]).unwrap()
}

fn instance(name: &str, subnet: Option<&str>, groups: Option<&[&str]>) -> Instance {
    Instance {
        id: format!("i-{name}"),
        provider_id: format!("aws:///us-east-1a/i-{name}"),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: "on-demand".into(),
        state: "running".into(),
        nodepool: Some("np".into()),
        nodeclaim: Some(name.into()),
        launched_at: 1_800_000_000,
        image_id: Some("ami-1".into()),
        subnet_id: subnet.map(str::to_string),
        security_group_ids: groups.map(|g| g.iter().map(|s| s.to_string()).collect()),
        capacity_reservation_id: None,
    }
}

/// Nodes a..d of pool `np` under `budgets`; pods on a and b (c and d are empty).
fn cluster(budgets: Value, claims: Vec<Value>) -> Workload {
    let mut items = vec![nodeclass(), pool(budgets)];
    items.extend(NAMES.iter().map(|n| node(n)));
    items.extend(claims);
    items.extend([pod("web-a", "a"), pod("web-b", "b")]);
    load(items)
}

fn pass(w: &Workload, instances: &[Instance], disrupting: &BTreeSet<String>) -> Option<drift::Drifted> {
    drift::candidate(&w.cluster, &w.objects, &Round { instances, now: None, disrupting, skip: &|_| false, catalog: None })
}

#[test]
fn security_group_and_subnet_drift_as_the_aws_provider_judges_them() {
    let w = cluster(json!([{"nodes": "100%"}]), vec![claim("a", None)]);
    let c = &w.objects.nodeclaims.iter().find(|c| c.obj.metadata.name.as_deref() == Some("a")).unwrap().obj;
    let p = &w.objects.nodepools[0].obj;
    let nc = &w.objects.nodeclasses[0].obj;
    let both: &[&str] = &["sg-2", "sg-1"];
    // (instance facts, the reason Karpenter's AWS provider gives, or none)
    let table: Vec<(Instance, Option<&str>)> = vec![
        (instance("a", Some("subnet-a"), Some(both)), None),
        (instance("a", Some("subnet-b"), Some(both)), None),
        (instance("a", Some("subnet-old"), Some(both)), Some("SubnetDrift")),
        (instance("a", Some("subnet-a"), Some(&["sg-1"])), Some("SecurityGroupDrift")),
        (instance("a", Some("subnet-a"), Some(&["sg-1", "sg-2", "sg-3"])), Some("SecurityGroupDrift")),
        (instance("a", Some("subnet-a"), Some(&[])), Some("SecurityGroupDrift")),
        (instance("a", Some("subnet-old"), Some(&["sg-9"])), Some("SecurityGroupDrift")),
        (instance("a", None, None), None),
    ];
    for (i, want) in &table {
        assert_eq!(drift::drifted(c, p, Some(nc), Some(i), None).map(|c| c.reason()), *want, "{i:?}");
    }
    assert_eq!(drift::drifted(c, p, Some(nc), None, None), None, "no description of the instance: only the NodeClaim's own causes");
    // The image is judged before the instance: AMIDrift, Karpenter's AWS provider's name.
    let mut new_ami = nc.clone();
    new_ami.status.as_mut().unwrap().amis.as_mut().unwrap()[0].id = "ami-2".into();
    assert_eq!(drift::drifted(c, p, Some(&new_ami), Some(&table[2].0), None), Some(Cause::Image { image: "ami-1".into() }));
    assert_eq!(Cause::Image { image: "ami-1".into() }.reason(), "AMIDrift");
    // A NodeClass that resolves no subnets or no security groups (yet) drifts nothing by them.
    let mut unresolved = nc.clone();
    let s = unresolved.status.as_mut().unwrap();
    s.subnets = Some(Vec::new());
    s.security_groups = None;
    assert_eq!(drift::drifted(c, p, Some(&unresolved), Some(&table[6].0), None), None);
    assert_eq!(drift::drifted(c, p, Some(nc), Some(&table[3].0), None).map(|c| c.to_string()), Some("SecurityGroupDrift: security groups [sg-1] are not the EC2NodeClass's".into()));
}

#[test]
fn an_instance_in_a_reservation_the_nodeclass_no_longer_selects_drifts() {
    let w = cluster(json!([{"nodes": "100%"}]), vec![claim("a", None)]);
    let c = &w.objects.nodeclaims.iter().find(|c| c.obj.metadata.name.as_deref() == Some("a")).unwrap().obj;
    let p = &w.objects.nodepools[0].obj;
    let mut nc = w.objects.nodeclasses[0].obj.clone();
    let both: &[&str] = &["sg-1", "sg-2"];
    let in_reservation = |id: Option<&str>| Instance { capacity_reservation_id: id.map(str::to_string), ..instance("a", Some("subnet-a"), Some(both)) };
    // The NodeClass's status selects no reservation (its terms were removed): an instance in one drifts.
    assert_eq!(drift::drifted(c, p, Some(&nc), Some(&in_reservation(Some("cr-1"))), None), Some(Cause::CapacityReservation { id: "cr-1".into() }));
    assert_eq!(Cause::CapacityReservation { id: "cr-1".into() }.reason(), "CapacityReservationDrift");
    assert_eq!(drift::drifted(c, p, Some(&nc), Some(&in_reservation(None)), None), None, "on-demand: nothing to judge (an ended reservation leaves the instance on-demand)");
    let selected: Vec<stowage_input::api::ec2nodeclass::CapacityReservationStatus> = serde_json::from_value(json!([
        {"id": "cr-1", "availabilityZone": "us-east-1a", "instanceType": "m5.large", "instanceMatchCriteria": "targeted", "ownerID": "123456789012"}
    ]))
    .unwrap();
    nc.status.as_mut().unwrap().capacity_reservations = Some(selected);
    assert_eq!(drift::drifted(c, p, Some(&nc), Some(&in_reservation(Some("cr-1"))), None), None, "still selected");
    assert_eq!(drift::drifted(c, p, Some(&nc), Some(&in_reservation(Some("cr-2"))), None).map(|c| c.reason()), Some("CapacityReservationDrift"));
    // Before the NodeClass has a status, nothing is judged.
    nc.status = None;
    assert_eq!(drift::drifted(c, p, Some(&nc), Some(&in_reservation(Some("cr-2"))), None), None);
}

#[test]
fn several_drifted_nodes_go_pass_after_pass_up_to_the_budget() {
    let moved: Vec<Instance> = NAMES.iter().map(|n| instance(n, Some("subnet-old"), Some(&["sg-1", "sg-2"]))).collect();
    let claims = || NAMES.iter().map(|n| claim(n, None)).collect::<Vec<_>>();
    // Run passes as the controller's round does: each choice joins the disrupting set.
    let roll = |w: &Workload| {
        let mut disrupting = BTreeSet::new();
        let mut order = Vec::new();
        while let Some(d) = pass(w, &moved, &disrupting) {
            assert_eq!(d.cause.reason(), "SubnetDrift");
            assert_eq!(d.empty, d.claim == "c" || d.claim == "d", "{d:?}");
            order.push(d.claim.clone());
            disrupting.insert(d.claim);
        }
        order
    };
    // (budgets, the NodeClaims chosen, in order): empty ones first, then by name.
    let table: [(Value, Vec<&str>); 5] = [
        (json!([{"nodes": "2"}]), vec!["c", "d"]),
        (json!([{"nodes": "50%"}]), vec!["c", "d"]),
        (json!([{"nodes": "1", "reasons": ["Drifted"]}, {"nodes": "0", "reasons": ["Empty"]}]), vec!["c"]),
        (json!([]), vec!["c", "d", "a", "b"]),
        (json!([{"nodes": "0", "reasons": ["Drifted"]}]), vec![]),
    ];
    for (budgets, want) in table {
        assert_eq!(roll(&cluster(budgets.clone(), claims())), want, "{budgets}");
    }
    // No budgets field: Karpenter's 10% of 4 nodes, rounded up: one at a time.
    assert_eq!(roll(&cluster(Value::Null, claims())), vec!["c"]);
    // Without the instances' description nothing drifts here (the NodeClaims match their pool and image).
    assert_eq!(pass(&cluster(json!([]), claims()), &[], &BTreeSet::new()), None);
}

#[test]
fn the_longest_drifted_goes_first_and_deleting_nodes_use_the_budget() {
    let moved: Vec<Instance> = NAMES.iter().map(|n| instance(n, Some("subnet-old"), Some(&["sg-1", "sg-2"]))).collect();
    // Among non-empty ones, the earlier Drifted condition first (b before a).
    let w = cluster(json!([]), vec![claim("a", Some("2027-01-15T10:00:00Z")), claim("b", Some("2027-01-15T09:00:00Z"))]);
    assert_eq!(pass(&w, &moved, &BTreeSet::new()).map(|d| d.claim), Some("b".into()));
    assert_eq!(pass(&w, &moved, &BTreeSet::from(["b".to_string()])).map(|d| d.claim), Some("a".into()));
    // A NodeClaim being deleted counts against the budget of 2: one more may go.
    let mut deleting = claim("a", None);
    deleting["metadata"]["deletionTimestamp"] = json!("2027-01-15T10:00:00Z");
    deleting["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    let w = cluster(json!([{"nodes": "2"}]), vec![deleting, claim("b", None), claim("c", None), claim("d", None)]);
    let first = pass(&w, &moved, &BTreeSet::new()).expect("one may go");
    assert_eq!(first.claim, "c");
    assert_eq!(pass(&w, &moved, &BTreeSet::from([first.claim])), None, "a deleting and c disrupting: the budget of 2 is used");
}

/// The EC2NodeClass `nodeclass()` with two volumes, then `edit`ed.
fn edited(edit: &dyn Fn(&mut Value)) -> stowage_input::api::EC2NodeClass {
    let mut v = nodeclass();
    v["spec"]["blockDeviceMappings"] = json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeType": "gp3"}}, {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}]);
    edit(&mut v);
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_changed_nodeclass_field_drifts_and_a_changed_selector_term_does_not() {
    let w = cluster(json!([]), vec![claim("a", None)]);
    let p = &w.objects.nodepools[0].obj;
    // The NodeClaim as stowage launches it: stamped with its EC2NodeClass's hash (as `provision` does).
    let launched_with = edited(&|_| {});
    let mut c = w.objects.nodeclaims.iter().find(|c| c.obj.metadata.name.as_deref() == Some("a")).unwrap().obj.clone();
    drift::stamp_nodeclass(&launched_with, c.metadata.annotations.get_or_insert_default());
    assert_eq!(drift::drifted(&c, p, Some(&launched_with), None, None), None, "as launched");
    // (what changed in the EC2NodeClass, the reason Karpenter's AWS provider gives, or none)
    type Edit = Box<dyn Fn(&mut Value)>;
    let table: Vec<(&str, Edit, Option<&str>)> = vec![
        ("nothing", Box::new(|_| {}), None),
        ("userData", Box::new(|v| v["spec"]["userData"] = json!("#!/bin/sh\necho hi\n")), Some("NodeClassDrift")),
        ("a volume's size", Box::new(|v| v["spec"]["blockDeviceMappings"][1]["ebs"]["volumeSize"] = json!("200Gi")), Some("NodeClassDrift")),
        ("a volume added", Box::new(|v| v["spec"]["blockDeviceMappings"].as_array_mut().unwrap().push(json!({"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "1Gi"}}))), Some("NodeClassDrift")),
        ("metadataOptions", Box::new(|v| v["spec"]["metadataOptions"] = json!({"httpTokens": "optional"})), Some("NodeClassDrift")),
        ("tags", Box::new(|v| v["spec"]["tags"] = json!({"team": "a"})), Some("NodeClassDrift")),
        ("kubelet", Box::new(|v| v["spec"]["kubelet"] = json!({"maxPods": 20})), Some("NodeClassDrift")),
        ("role", Box::new(|v| v["spec"]["role"] = json!("other")), Some("NodeClassDrift")),
        ("another AMI family by alias", Box::new(|v| v["spec"]["amiSelectorTerms"] = json!([{"alias": "bottlerocket@latest"}])), Some("NodeClassDrift")),
        ("subnetSelectorTerms", Box::new(|v| v["spec"]["subnetSelectorTerms"] = json!([{"id": "subnet-z"}])), None),
        ("securityGroupSelectorTerms", Box::new(|v| v["spec"]["securityGroupSelectorTerms"] = json!([{"name": "other"}])), None),
        ("amiSelectorTerms, same family", Box::new(|v| v["spec"]["amiSelectorTerms"] = json!([{"alias": "al2023@v20250101"}])), None),
        ("capacityReservationSelectorTerms", Box::new(|v| v["spec"]["capacityReservationSelectorTerms"] = json!([{"id": "cr-1"}])), None),
        ("ipPrefixCount", Box::new(|v| v["spec"]["ipPrefixCount"] = json!(2)), None),
        ("amiFamily spelled out as the alias's", Box::new(|v| v["spec"]["amiFamily"] = json!("AL2023")), None),
        ("volumes listed in another order", Box::new(|v| v["spec"]["blockDeviceMappings"].as_array_mut().unwrap().reverse()), None),
        (
            "empty tags and detailedMonitoring false (zero values)",
            Box::new(|v| {
                v["spec"]["tags"] = json!({});
                v["spec"]["detailedMonitoring"] = json!(false)
            }),
            None,
        ),
    ];
    for (what, edit, want) in &table {
        let nc = edited(edit.as_ref());
        assert_eq!(drift::drifted(&c, p, Some(&nc), None, None).map(|c| c.reason()), *want, "{what}");
    }
    let user_data = edited(&|v| v["spec"]["userData"] = json!("#!/bin/sh\n"));
    assert_eq!(drift::drifted(&c, p, Some(&user_data), None, None).map(|c| c.to_string()), Some("NodeClassDrift: the EC2NodeClass changed since launch".into()));
    // Karpenter's order: the static hash before the resolved image.
    let mut both = user_data.clone();
    both.status.as_mut().unwrap().amis.as_mut().unwrap()[0].id = "ami-2".into();
    assert_eq!(drift::drifted(&c, p, Some(&both), None, None), Some(Cause::NodeClass));
    // Another hash version (Karpenter's "v5"): not judged by the hash; the resolved image still is.
    let mut karpenters = c.clone();
    karpenters.metadata.annotations.as_mut().unwrap().insert(drift::EC2NODECLASS_HASH_VERSION.into(), "v5".into());
    assert_eq!(drift::drifted(&karpenters, p, Some(&user_data), None, None), None);
    assert_eq!(drift::drifted(&karpenters, p, Some(&both), None, None), Some(Cause::Image { image: "ami-1".into() }));
    // Not stamped at all: not judged.
    let mut bare = c.clone();
    bare.metadata.annotations = None;
    assert_eq!(drift::drifted(&bare, p, Some(&user_data), None, None), None);
}

/// The NodeClaims `provision` writes carry the hash of their pool's EC2NodeClass, which the drift
/// decision compares.
#[test]
fn provisioned_nodeclaims_are_stamped_with_their_nodeclass_hash() {
    let mut items = vec![nodeclass(), pool(json!([]))];
    items.push(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Pending"}}));
    let w = load(items);
    let catalog = stowage_input::catalog::default_catalog();
    let weights = stowage_core::weights::Weights::default();
    let input = stowage_decide::provision::Input { cluster: &w.cluster, objects: &w.objects, catalog, weights: &weights, max_instance_types: 20, batch: "b" };
    let mut planner = stowage_core::solve::Planner { solver: stowage_core::solve::Solver::Greedy, ..Default::default() };
    let d = stowage_decide::provision::decide(&input, &mut planner).unwrap();
    assert!(!d.claims.is_empty());
    for c in &d.claims {
        let a = c.nodeclaim.metadata.annotations.as_ref().unwrap();
        assert_eq!(a.get(drift::EC2NODECLASS_HASH), Some(&drift::nodeclass_hash(&w.objects.nodeclasses[0].obj)));
        assert_eq!(a.get(drift::EC2NODECLASS_HASH_VERSION).map(String::as_str), Some(drift::HASH_VERSION));
    }
}

#[test]
fn an_instance_type_no_longer_offered_drifts() {
    let w = cluster(json!([]), vec![claim("a", None)]);
    let mut c = w.objects.nodeclaims.iter().find(|c| c.obj.metadata.name.as_deref() == Some("a")).unwrap().obj.clone();
    let p = &w.objects.nodepools[0].obj;
    let nc = &w.objects.nodeclasses[0].obj;
    let full = stowage_input::catalog::default_catalog();
    let labels = c.metadata.labels.as_mut().unwrap();
    labels.insert("node.kubernetes.io/instance-type".into(), "m5.large".into());
    labels.insert("topology.kubernetes.io/zone".into(), "us-east-1a".into());
    let without = |keep: &dyn Fn(&str, &str, &str) -> bool| {
        let mut cat = full.clone();
        for t in &mut cat.types {
            let name = t.name.clone();
            t.offerings.retain(|o| keep(&name, &o.zone, &o.capacity_type));
        }
        cat.types.retain(|t| !t.offerings.is_empty());
        cat
    };
    let mut reserved_only = without(&|_, _, ct| ct != "spot" && ct != "on-demand");
    // (the catalog, the NodeClaim's capacity type, the reason)
    let table: Vec<(&str, stowage_core::domain::catalog::Catalog, &str, Option<&str>)> = vec![
        ("offered", full.clone(), "on-demand", None),
        (
            "an unavailable offering still counts",
            {
                let mut x = full.clone();
                x.types.iter_mut().flat_map(|t| t.offerings.iter_mut()).for_each(|o| o.available = false);
                x
            },
            "on-demand",
            None,
        ),
        ("the type is gone", without(&|t, _, _| t != "m5.large"), "on-demand", Some("InstanceTypeNotFound")),
        ("not in its zone any more", without(&|t, z, _| t != "m5.large" || z != "us-east-1a"), "on-demand", Some("InstanceTypeNotFound")),
        ("only spot left", without(&|t, _, ct| t != "m5.large" || ct == "spot"), "on-demand", Some("InstanceTypeNotFound")),
        ("a spot NodeClaim, spot left", without(&|t, _, ct| t != "m5.large" || ct == "spot"), "spot", None),
        ("a reserved NodeClaim falls back to on-demand", full.clone(), "reserved", None),
        (
            "a reserved NodeClaim with neither",
            {
                reserved_only.types.retain(|t| t.name != "m5.large");
                reserved_only.clone()
            },
            "reserved",
            Some("InstanceTypeNotFound"),
        ),
    ];
    // A pool that allows every capacity type (its requirements are judged first).
    let mut any = p.clone();
    any.spec.template.spec.requirements[0].values = vec!["on-demand".into(), "spot".into(), "reserved".into()];
    for (what, catalog, capacity, want) in &table {
        c.metadata.labels.as_mut().unwrap().insert("karpenter.sh/capacity-type".into(), capacity.to_string());
        assert_eq!(drift::drifted(&c, &any, Some(nc), None, Some(catalog)).map(|c| c.reason()), *want, "{what}");
        assert_eq!(drift::drifted(&c, &any, Some(nc), None, None), None, "{what}: without the catalog, not judged");
    }
    let gone = &table[2].1;
    c.metadata.labels.as_mut().unwrap().insert("karpenter.sh/capacity-type".into(), "on-demand".into());
    assert_eq!(
        drift::drifted(&c, p, Some(nc), None, Some(gone)).map(|c| c.to_string()),
        Some("InstanceTypeNotFound: instance type m5.large is no longer offered in the NodeClaim's zone and capacity type".into())
    );
    // After the requirements (Karpenter's order): a pool that no longer allows on-demand.
    let mut spot_pool = p.clone();
    spot_pool.spec.template.spec.requirements[0].values = vec!["spot".into()];
    assert_eq!(drift::drifted(&c, &spot_pool, Some(nc), None, Some(gone)).map(|c| c.reason()), Some("RequirementsDrifted"));
    // No instance-type label: not judged.
    c.metadata.labels.as_mut().unwrap().remove("node.kubernetes.io/instance-type");
    assert_eq!(drift::drifted(&c, p, Some(nc), None, Some(gone)), None);
}

/// A drift pass judges `InstanceTypeNotFound` only an hour after the NodeClaim's creation, and only
/// with a clock and a catalog (Karpenter's delay).
#[test]
fn a_pass_judges_the_instance_type_an_hour_after_creation() {
    let mut a = claim("a", None);
    a["metadata"]["creationTimestamp"] = json!("2027-01-15T10:00:00Z");
    a["metadata"]["labels"]["node.kubernetes.io/instance-type"] = json!("m5.large");
    let w = cluster(json!([]), vec![a]);
    let mut gone = stowage_input::catalog::default_catalog().clone();
    gone.types.retain(|t| t.name != "m5.large");
    let at = |now: Option<i64>, catalog: Option<&stowage_core::domain::catalog::Catalog>| {
        drift::candidate(&w.cluster, &w.objects, &Round { instances: &[], now, disrupting: &BTreeSet::new(), skip: &|_| false, catalog }).map(|d| d.cause.reason())
    };
    let t0: i64 = "2027-01-15T10:00:00Z".parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_second();
    assert_eq!(at(Some(t0 + 3601), Some(&gone)), Some("InstanceTypeNotFound"));
    assert_eq!(at(Some(t0 + 3599), Some(&gone)), None, "younger than an hour");
    assert_eq!(at(None, Some(&gone)), None, "no clock");
    assert_eq!(at(Some(t0 + 3601), None), None, "no catalog");
    assert_eq!(at(Some(t0 + 3601), Some(stowage_input::catalog::default_catalog())), None, "still offered");
}
