//! The AWS provider against a real moto server (one per test, `stowage_e2e::Moto`), with capacity
//! errors and throttling injected by the middleware in front of it (`tests/moto/ice_server.py`).
//! No mocks: every call goes through aws-sdk-ec2 and moto's EC2 implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use stowage_aws::cluster::{ClusterError, ClusterFlags};
use stowage_aws::retry::RetryPolicy;
use stowage_aws::userdata::base64_decode;
use stowage_aws::{AwsOptions, AwsProvider, ClusterInfo};
use stowage_core::domain::taints::{Effect, Taint};
use stowage_decide::cloud::{CloudError, CloudProvider, LaunchRequest, OfferingRef};
use stowage_e2e::{CapacityError, DISCOVERY_TAG_KEY, DISCOVERY_TAG_VALUE, Moto, NODE_ROLE};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::{AmiSelectorTerm, EC2NodeClassSpec, SelectorTerm};

const CLUSTER: &str = "demo";

fn tags(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn nodeclass(name: &str) -> EC2NodeClass {
    let discovery = SelectorTerm { tags: Some(tags(&[(DISCOVERY_TAG_KEY, DISCOVERY_TAG_VALUE)])), ..Default::default() };
    EC2NodeClass::new(
        name,
        EC2NodeClassSpec {
            subnet_selector_terms: vec![discovery.clone()],
            security_group_selector_terms: vec![discovery],
            ami_selector_terms: vec![AmiSelectorTerm { alias: Some("al2023@latest".into()), ..Default::default() }],
            role: Some(NODE_ROLE.into()),
            tags: Some(tags(&[("team", "platform")])),
            ..Default::default()
        },
    )
}

fn options() -> AwsOptions {
    let mut o = AwsOptions {
        cluster: ClusterInfo { endpoint: "https://127.0.0.1:6443".into(), ca_bundle: "Q0EK".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec!["10.100.0.10".into()] },
        // Fast backoff so the throttling tests take milliseconds, not seconds.
        retry: RetryPolicy { max_attempts: 4, base_delay: Duration::from_millis(20), max_delay: Duration::from_millis(100) },
        ..Default::default()
    };
    // moto preloads plain Amazon Linux 2023 images but no EKS-optimized ones.
    o.alias.plain_al2023_fallback = true;
    o
}

/// moto, a provider on it and the resolved default NodeClass.
async fn setup(name: &str) -> (Moto, AwsProvider, EC2NodeClass) {
    let moto = Moto::start(name).await.unwrap();
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, options()).unwrap();
    let nc = nodeclass("default");
    aws.resolve_nodeclass(&nc).await.unwrap();
    (moto, aws, nc)
}

fn offering(capacity_type: &str, instance_type: &str, zone: &str) -> OfferingRef {
    let price =
        stowage_input::catalog::default_catalog().get(instance_type).and_then(|t| t.offerings.iter().find(|o| o.capacity_type == capacity_type && o.zone == zone)).map(|o| o.price).unwrap_or(0.1);
    OfferingRef { instance_type: instance_type.into(), zone: zone.into(), capacity_type: capacity_type.into(), price, reservation: None }
}

fn request(nodeclaim: &str, offerings: Vec<OfferingRef>) -> LaunchRequest {
    LaunchRequest {
        nodeclaim: nodeclaim.into(),
        nodepool: "general".into(),
        nodeclass: "default".into(),
        offerings,
        labels: tags(&[("karpenter.sh/nodepool", "general"), ("workload", "web"), ("topology.kubernetes.io/zone", "us-east-1b")]),
        taints: vec![Taint::new("dedicated", "web", Effect::NoSchedule)],
        tags: tags(&[("cost-center", "42")]),
    }
}

async fn describe(moto: &Moto, id: &str) -> aws_sdk_ec2::types::Instance {
    let out = moto.ec2().describe_instances().instance_ids(id).send().await.unwrap();
    out.reservations()[0].instances()[0].clone()
}

fn tag_map(i: &aws_sdk_ec2::types::Instance) -> BTreeMap<String, String> {
    i.tags().iter().map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect()
}

async fn count(moto: &Moto, what: &str, action: &str) -> u64 {
    moto.fault_state().await.unwrap()[what][action].as_u64().unwrap_or(0)
}

fn offering_available(c: &stowage_core::domain::catalog::Catalog, o: &OfferingRef) -> bool {
    c.get(&o.instance_type)
        .and_then(|t| t.offerings.iter().find(|x| x.zone == o.zone && x.capacity_type == o.capacity_type))
        .map(|x| x.available)
        .unwrap_or_else(|| panic!("{o:?} is not in the catalog"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_finds_subnets_groups_and_images_and_reports_what_is_missing() {
    let t0 = Instant::now();
    let moto = Moto::start("cloud-aws-discovery").await.unwrap();
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, options()).unwrap();
    let net = moto.network().clone();

    // Launching with a NodeClass the provider has never seen waits for it.
    let err = aws.launch(&request("nc-unknown", vec![offering("on-demand", "m5.large", "us-east-1a")])).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("has not been resolved")), "{err}");

    let status = aws.resolve_nodeclass(&nodeclass("default")).await.unwrap();
    let subnets = status.subnets.unwrap();
    assert_eq!(subnets.len(), 3);
    for s in &subnets {
        assert_eq!(net.subnets.get(&s.zone), Some(&s.id), "{s:?}");
    }
    assert_eq!(status.security_groups.unwrap().iter().map(|g| g.id.clone()).collect::<Vec<_>>(), vec![net.security_group_id.clone()]);
    let amis = status.amis.unwrap();
    let mut archs: Vec<_> = amis.iter().map(|a| a.requirements[0].values.clone().unwrap()[0].clone()).collect();
    archs.sort();
    assert_eq!(archs, vec!["amd64", "arm64"]);
    assert!(amis.iter().all(|a| a.name.as_deref().is_some_and(|n| n.starts_with("al2023-ami-2023") && !n.contains("minimal"))), "{amis:?}");
    // spec.role: an instance profile made for the role (tests below check it in IAM).
    assert!(status.instance_profile.as_deref().is_some_and(|p| p.starts_with("demo_")), "{:?}", status.instance_profile);

    // Terms are ORed: one subnet by id plus a tag term that matches nothing; security group by name.
    let mut by_id = nodeclass("by-id");
    by_id.spec.subnet_selector_terms =
        vec![SelectorTerm { id: Some(net.subnets["us-east-1c"].clone()), ..Default::default() }, SelectorTerm { tags: Some(tags(&[("no-such-tag", "*")])), ..Default::default() }];
    by_id.spec.security_group_selector_terms = vec![SelectorTerm { name: Some("stowage-e2e".into()), ..Default::default() }];
    by_id.spec.ami_selector_terms = vec![AmiSelectorTerm { id: Some(net.ami_id.clone()), ..Default::default() }];
    // Without an alias Karpenter's CRD requires amiFamily; stowage refuses the NodeClass without it.
    let err = aws.resolve_nodeclass(&by_id).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("spec.amiFamily is required")), "{err}");
    by_id.spec.ami_family = Some("AL2023".into());
    let s = aws.resolve_nodeclass(&by_id).await.unwrap();
    assert_eq!(s.subnets.unwrap().iter().map(|s| s.zone.clone()).collect::<Vec<_>>(), vec!["us-east-1c"]);
    assert_eq!(s.security_groups.unwrap()[0].id, net.security_group_id);
    assert_eq!(s.amis.unwrap().iter().map(|a| a.id.clone()).collect::<Vec<_>>(), vec![net.ami_id.clone()]);
    // The catalog covers the zones of every resolved NodeClass; catalog_for only one's.
    assert_eq!(aws.catalog_for("by-id").await.unwrap().zones, vec!["us-east-1c"]);

    // A deleted NodeClass is forgotten: its zones leave the catalog, launches naming it wait again.
    aws.forget_nodeclass("by-id");
    let mut req = request("nc-forgotten", vec![offering("on-demand", "m5.large", "us-east-1c")]);
    req.nodeclass = "by-id".into();
    assert!(matches!(aws.launch(&req).await, Err(CloudError::NodeClassNotReady(_))));

    // Tags are ANDed within a term: nothing matches; every missing part is named at once.
    let mut broken = nodeclass("broken");
    broken.spec.subnet_selector_terms = vec![SelectorTerm { tags: Some(tags(&[(DISCOVERY_TAG_KEY, DISCOVERY_TAG_VALUE), ("tier", "private")])), ..Default::default() }];
    broken.spec.security_group_selector_terms = vec![SelectorTerm { id: Some("sg-00000000000000000".into()), ..Default::default() }];
    broken.spec.ami_selector_terms = vec![AmiSelectorTerm { name: Some("no-such-image-*".into()), ..Default::default() }];
    broken.spec.ami_family = Some("Custom".into());
    let err = aws.resolve_nodeclass(&broken).await.unwrap_err();
    let CloudError::NodeClassNotReady(m) = &err else { panic!("{err}") };
    assert!(m.contains("no subnet") && m.contains("no security group") && m.contains("no AMI"), "{m}");
    let mut req = request("nc-broken", vec![offering("on-demand", "m5.large", "us-east-1a")]);
    req.nodeclass = "broken".into();
    assert!(matches!(aws.launch(&req).await, Err(CloudError::NodeClassNotReady(_))));

    // Without the plain-AL2023 fallback an alias needs its SSM parameters: without a Kubernetes
    // version they cannot be named; with one, moto has none (no parameter seeded here).
    let strict = AwsProvider::new(&moto.sdk_config(), CLUSTER, AwsOptions { alias: Default::default(), ..options() }).unwrap();
    let err = strict.resolve_nodeclass(&nodeclass("default")).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("no AMI") && m.contains("Kubernetes version is unknown")), "{err}");
    let mut with_version = AwsOptions { alias: Default::default(), ..options() };
    with_version.alias.kubernetes_version = Some("1.31".into());
    let strict = AwsProvider::new(&moto.sdk_config(), CLUSTER, with_version).unwrap();
    let err = strict.resolve_nodeclass(&nodeclass("default")).await.unwrap_err();
    assert!(
        matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("0 of its 5 SSM parameters exist") && m.contains("/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id")),
        "{err}"
    );
    moto.stop().await.unwrap();
    eprintln!("discovery test: {:.1}s", t0.elapsed().as_secs_f64());
}

/// Drift's facts from EC2 (issue 17): a listed instance carries the subnet it was launched into and
/// its security groups, which match what the EC2NodeClass resolves (no drift); after
/// ModifyInstanceAttribute puts it in another group, the next listing shows it and the shared drift
/// decision names Karpenter's AWS provider's reason, `SecurityGroupDrift`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_instances_carry_their_network_and_a_changed_group_drifts() {
    use stowage_input::api::{NodeClaim, NodePool};
    let (moto, aws, mut nc) = setup("cloud-aws-network-drift").await;
    nc.status = Some(aws.resolve_nodeclass(&nc).await.unwrap());
    let net = moto.network().clone();
    let inst = aws.launch(&request("general-drift", vec![offering("on-demand", "m5.large", "us-east-1b")])).await.unwrap();
    let listed = |instances: Vec<stowage_decide::cloud::Instance>| instances.into_iter().find(|i| i.id == inst.id).expect("the launched instance is listed");
    // moto 5.2's CreateFleet takes a launch template's groups from a `GroupSet` key that EC2's
    // template data does not have, so the instance starts in no group there (EC2 puts it in the
    // template's): put it in the NodeClass's group as EC2 would, through the API drift will see.
    let put_in = |group: String| {
        let ec2 = moto.ec2();
        let id = inst.id.clone();
        async move { ec2.modify_instance_attribute().instance_id(id).groups(group).send().await.unwrap() }
    };
    let launched = listed(aws.list().await.unwrap());
    assert_ne!(launched.security_group_ids, Some(Vec::new()), "no group listed is unknown, not an empty set that would drift every node");
    put_in(net.security_group_id.clone()).await;
    let before = listed(aws.list().await.unwrap());
    assert_eq!(before.subnet_id.as_deref(), Some(net.subnets["us-east-1b"].as_str()), "{before:?}");
    assert_eq!(before.security_group_ids, Some(vec![net.security_group_id.clone()]), "{before:?}");
    let pool: NodePool = serde_json::from_value(serde_json::json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}))
    .unwrap();
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "general-drift"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"providerID": inst.provider_id, "imageID": inst.image_id}}))
    .unwrap();
    assert_eq!(stowage_decide::drift::drifted(&claim, &pool, Some(&nc), Some(&before), None), None, "launched as the NodeClass resolves: not drifted");

    let other = moto.ec2().create_security_group().group_name("other").description("not the NodeClass's").vpc_id(&net.vpc_id).send().await.unwrap().group_id.unwrap();
    put_in(other.clone()).await;
    let after = listed(aws.list().await.unwrap());
    assert_eq!(after.security_group_ids, Some(vec![other.clone()]));
    let cause = stowage_decide::drift::drifted(&claim, &pool, Some(&nc), Some(&after), None);
    assert_eq!(cause.as_ref().map(|c| c.reason()), Some("SecurityGroupDrift"), "{cause:?}");
    moto.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_list_tag_terminate_and_idempotent_relaunch() {
    let t0 = Instant::now();
    let (moto, aws, _) = setup("cloud-aws-launch").await;
    let net = moto.network().clone();

    let req = request("general-abc12", vec![offering("on-demand", "m5.large", "us-east-1b"), offering("on-demand", "m5.xlarge", "us-east-1c")]);
    let inst = aws.launch(&req).await.unwrap();
    assert_eq!((inst.instance_type.as_str(), inst.zone.as_str(), inst.capacity_type.as_str()), ("m5.large", "us-east-1b", "on-demand"));
    assert_eq!(inst.provider_id, format!("aws:///us-east-1b/{}", inst.id));
    assert_eq!(inst.nodeclaim.as_deref(), Some("general-abc12"));

    let ec2 = describe(&moto, &inst.id).await;
    assert_eq!(ec2.instance_type().unwrap().as_str(), "m5.large");
    assert_eq!(ec2.subnet_id(), Some(net.subnets["us-east-1b"].as_str()));
    assert_eq!(ec2.placement().and_then(|p| p.availability_zone()), Some("us-east-1b"));
    let t = tag_map(&ec2);
    for (k, v) in [
        ("kubernetes.io/cluster/demo", "owned"),
        ("karpenter.sh/nodepool", "general"),
        ("eks:eks-cluster-name", "demo"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("karpenter.sh/nodeclaim", "general-abc12"),
        ("team", "platform"),
        ("cost-center", "42"),
    ] {
        assert_eq!(t.get(k).map(String::as_str), Some(v), "tag {k} in {t:?}");
    }

    // One launch template per maxPods (m5.large 29, m5.xlarge 58), named by its hash, tagged, with the
    // AL2023 user data.
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let ours: Vec<_> = lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))).collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    let status = aws.resolve_nodeclass(&nodeclass("default")).await.unwrap();
    let amd64 = status.amis.unwrap().into_iter().find(|a| a.requirements[0].values.as_ref().unwrap()[0] == "amd64").unwrap();
    let mut user_data = BTreeMap::new();
    for lt in &ours {
        let lt_tags: BTreeMap<_, _> = lt.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
        assert_eq!(lt_tags.get("karpenter.sh/nodepool").map(String::as_str), Some("general"));
        assert_eq!(lt_tags.get("kubernetes.io/cluster/demo").map(String::as_str), Some("owned"));
        let version = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let data = version.launch_template_versions()[0].launch_template_data().unwrap().clone();
        assert_eq!(data.image_id(), Some(amd64.id.as_str()), "m5 types get the x86_64 image");
        let ud = String::from_utf8(base64_decode(data.user_data().unwrap()).unwrap()).unwrap();
        let max_pods = if ud.contains("maxPods: 29") {
            29
        } else if ud.contains("maxPods: 58") {
            58
        } else {
            panic!("{ud}")
        };
        user_data.insert(max_pods, (ud, data));
    }
    assert_eq!(user_data.keys().copied().collect::<Vec<_>>(), vec![29, 58]);
    let (ud, data) = &user_data[&29];
    assert!(ud.contains("kind: NodeConfig") && ud.contains("maxPods: 29"), "{ud}");
    assert!(ud.contains("--register-with-taints=dedicated=web:NoSchedule,karpenter.sh/unregistered:NoExecute"), "{ud}");
    assert!(ud.contains("--node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=general,workload=web"), "zone labels are not kubelet's to set: {ud}");
    assert!(ud.contains("apiServerEndpoint: \"https://127.0.0.1:6443\""), "{ud}");
    let bdm = &data.block_device_mappings()[0];
    assert_eq!((bdm.device_name(), bdm.ebs().and_then(|e| e.volume_size())), (Some("/dev/xvda"), Some(20)));
    assert_eq!(data.metadata_options().and_then(|m| m.http_put_response_hop_limit()), Some(1));

    // Same NodeClaim again (a retry after a crash): the same instance, no second CreateFleet.
    let fleets_before = count(&moto, "requests", "CreateFleet").await;
    let again = aws.launch(&req).await.unwrap();
    assert_eq!(again.id, inst.id);
    assert_eq!(count(&moto, "requests", "CreateFleet").await, fleets_before);

    // An instance someone else launched is not ours.
    let foreign = moto.run_instance("us-east-1a", "t3.micro").await.unwrap();
    let listed = aws.list().await.unwrap();
    assert_eq!(listed.iter().map(|i| i.id.clone()).collect::<Vec<_>>(), vec![inst.id.clone()]);
    assert_eq!(listed[0].nodepool.as_deref(), Some("general"));
    assert_eq!(listed[0].state, "running");
    assert!(listed[0].launched_at > 0);
    let described_image = describe(&moto, &inst.id).await.image_id().map(str::to_string);
    assert!(described_image.is_some(), "moto records the launch template's image");
    assert_eq!(inst.image_id, described_image, "the launch reports the image the instance runs (drift compares it)");
    assert_eq!(listed[0].image_id, described_image);

    aws.tag_registered(&inst.provider_id, "general-abc12", "ip-10-0-2-4.ec2.internal").await.unwrap();
    let t = tag_map(&describe(&moto, &inst.id).await);
    assert_eq!(t.get("Name").map(String::as_str), Some("ip-10-0-2-4.ec2.internal"));

    aws.terminate(&inst.provider_id).await.unwrap();
    assert!(aws.list().await.unwrap().iter().all(|i| i.id != inst.id || i.state == "shutting-down"));
    assert!(matches!(aws.terminate(&inst.provider_id).await, Err(CloudError::NotFound(_))));
    assert!(matches!(aws.terminate("aws:///us-east-1a/i-00000000000000000").await, Err(CloudError::NotFound(_))));
    assert!(matches!(aws.terminate("not-a-provider-id").await, Err(CloudError::Fatal(_))));
    // (CreateTags on an unknown instance: EC2 answers InvalidInstanceID.NotFound, mapped to NotFound;
    // moto tags anything without checking, so that is not tested here.)

    // After termination the NodeClaim's instance is gone: a relaunch starts a new one.
    let relaunched = aws.launch(&req).await.unwrap();
    assert_ne!(relaunched.id, inst.id);
    moto.terminate_instance(foreign.instance_id().unwrap()).await.unwrap();
    moto.stop().await.unwrap();
    eprintln!("launch test: {:.1}s", t0.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_from_ec2_with_embedded_prices_and_synthetic_spot() {
    let t0 = Instant::now();
    let (moto, aws, _) = setup("cloud-aws-catalog").await;
    let c = aws.catalog().await.unwrap();
    eprintln!("catalog: {} types, zones {:?}, {:.1}s", c.types.len(), c.zones, t0.elapsed().as_secs_f64());
    assert_eq!(c.region.as_deref(), Some("us-east-1"));
    assert_eq!(c.zones, vec!["us-east-1a", "us-east-1b", "us-east-1c"], "the zones of the NodeClass subnets");
    assert!(c.types.len() > 500, "{}", c.types.len());
    let m5 = c.get("m5.large").unwrap();
    let a = m5.allocatable();
    assert_eq!((a.cpu_m, a.memory >> 20, a.ephemeral >> 30, a.pods), (1930, 6903, 17, 29), "Karpenter's published m5.large allocatable");
    assert!(m5.aws.is_some(), "facts kept for catalog::for_nodeclass");
    let od: Vec<_> = m5.offerings.iter().filter(|o| o.capacity_type == "on-demand").collect();
    assert_eq!(od.len(), 3);
    assert!(od.iter().all(|o| (o.price - 0.096).abs() < 1e-9 && o.available && !o.synthetic));
    // moto's spot prices are one constant: stowage keeps its synthetic ones and says so.
    assert!(m5.offerings.iter().filter(|o| o.capacity_type == "spot").all(|o| o.synthetic && o.price > 0.02 && o.available));
    assert!(c.provenance.iter().any(|p| p.starts_with("SPOT PRICES ARE SYNTHETIC") && p.contains("same price")), "{:#?}", c.provenance);
    assert!(c.has_synthetic_prices());
    // Per-zone availability is EC2's: every offering's zone is one EC2 offers the type in.
    let offered = moto.ec2().describe_instance_type_offerings().location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone).send().await.unwrap();
    let pairs: std::collections::BTreeSet<(String, String)> =
        offered.instance_type_offerings().iter().map(|o| (o.instance_type().unwrap().as_str().to_string(), o.location().unwrap().to_string())).collect();
    for t in &c.types {
        for o in &t.offerings {
            assert!(pairs.contains(&(t.name.clone(), o.zone.clone())), "{} in {} is not offered by EC2", t.name, o.zone);
        }
    }
    // The second call is served from the cache.
    let t1 = Instant::now();
    let before = count(&moto, "requests", "DescribeInstanceTypes").await;
    aws.catalog().await.unwrap();
    assert_eq!(count(&moto, "requests", "DescribeInstanceTypes").await, before);
    eprintln!("cached catalog: {:.3}s", t1.elapsed().as_secs_f64());
    moto.stop().await.unwrap();
    eprintln!("catalog test: {:.1}s", t0.elapsed().as_secs_f64());
}

/// The on-demand price of a type in a catalog (the same in every zone).
fn on_demand_price(c: &stowage_core::domain::catalog::Catalog, instance_type: &str) -> Option<f64> {
    c.get(instance_type)?.offerings.iter().find(|o| o.capacity_type == "on-demand").map(|o| o.price)
}

/// Issue 16 item 5: on-demand prices per region from the AWS Price List API (moto has none; the
/// middleware answers GetProducts in its JSON shape from seeded prices), sent to the endpoint Karpenter
/// picks for the region, over the embedded us-east-1 table; the table where the API is not asked
/// (isolatedVPC) or fails, said in the provenance; throttled calls retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_demand_prices_come_from_the_price_list_api_per_region() {
    let moto = Moto::start("cloud-aws-pricing").await.unwrap();
    moto.seed_prices("eu-west-1", &[("m5.large", 0.107), ("c5.large", 0.101)], &[("m5.metal", 5.136)]).await.unwrap();
    let embedded = |t: &str| stowage_aws::pricing::on_demand(t).unwrap();

    // eu-west-1, the API answering (after two throttled calls, retried).
    moto.throttle(Some("GetProducts"), 2).await.unwrap();
    let aws = AwsProvider::new(&moto.sdk_config_in("eu-west-1"), CLUSTER, options()).unwrap();
    let c = aws.catalog().await.unwrap();
    assert_eq!(c.region.as_deref(), Some("eu-west-1"));
    assert_eq!(on_demand_price(&c, "m5.large"), Some(0.107));
    assert_eq!(on_demand_price(&c, "c5.large"), Some(0.101));
    if c.get("m5.metal").is_some() {
        assert_eq!(on_demand_price(&c, "m5.metal"), Some(5.136), "bare metal comes from the second query");
    }
    assert_eq!(on_demand_price(&c, "r5.large"), Some(embedded("r5.large")), "a type the API does not price keeps the table's price");
    assert!(c.provenance.iter().any(|p| p.contains("Price List API for eu-west-1 (3 types)")), "{:#?}", c.provenance);
    assert_eq!(count(&moto, "throttled", "GetProducts").await, 2);
    let state = moto.fault_state().await.unwrap();
    let regions: BTreeSet<&str> = state["pricingRegions"].as_array().unwrap().iter().filter_map(|r| r.as_str()).collect();
    assert_eq!(regions, BTreeSet::from(["eu-central-1"]), "eu- regions ask the eu-central-1 endpoint");
    // Cached: a second catalog asks nothing.
    let calls = count(&moto, "requests", "GetProducts").await;
    aws.catalog().await.unwrap();
    assert_eq!(count(&moto, "requests", "GetProducts").await, calls);

    // isolatedVPC: not asked; us-east-1's table, said loudly.
    let isolated = AwsProvider::new(&moto.sdk_config_in("eu-west-1"), CLUSTER, AwsOptions { isolated_vpc: true, ..options() }).unwrap();
    let c = isolated.catalog().await.unwrap();
    assert_eq!(count(&moto, "requests", "GetProducts").await, calls, "isolatedVPC sends no GetProducts");
    assert_eq!(on_demand_price(&c, "m5.large"), Some(embedded("m5.large")));
    assert!(c.provenance.iter().any(|p| p.contains("US-EAST-1 PRICES USED FOR THIS REGION") && p.contains("isolatedVPC")), "{:#?}", c.provenance);

    // A region the API has no prices for: the table, and why; the ap- endpoint.
    let sydney = AwsProvider::new(&moto.sdk_config_in("ap-southeast-2"), CLUSTER, options()).unwrap();
    let c = sydney.catalog().await.unwrap();
    assert_eq!(on_demand_price(&c, "m5.large"), Some(embedded("m5.large")));
    assert!(c.provenance.iter().any(|p| p.contains("US-EAST-1 PRICES") && p.contains("Price List API failed") && p.contains("ap-southeast-2")), "{:#?}", c.provenance);
    let state = moto.fault_state().await.unwrap();
    assert_eq!(state["pricingRegions"].as_array().unwrap().last().and_then(|r| r.as_str()), Some("ap-south-1"));
    moto.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_error_on_the_first_offering_launches_the_fallback() {
    let t0 = Instant::now();
    let (moto, aws, _) = setup("cloud-aws-ice-fallback").await;
    moto.inject_capacity_error(&CapacityError::offering("on-demand", "m5.large", "us-east-1a")).await.unwrap();
    // Two launch templates (arm64 and amd64 images); the plan's order is the priority across both.
    let offerings = vec![offering("on-demand", "m5.large", "us-east-1a"), offering("on-demand", "m6g.large", "us-east-1a"), offering("on-demand", "m5.large", "us-east-1b")];
    let inst = aws.launch(&request("general-fallback", offerings.clone())).await.unwrap();
    assert_eq!((inst.instance_type.as_str(), inst.zone.as_str()), ("m6g.large", "us-east-1a"));
    let ec2 = describe(&moto, &inst.id).await;
    assert_eq!(ec2.instance_type().unwrap().as_str(), "m6g.large");
    assert_eq!(count(&moto, "requests", "CreateFleet").await, 1);
    assert_eq!(moto.fault_state().await.unwrap()["iceErrors"].as_u64(), Some(1));
    let c = aws.catalog().await.unwrap();
    assert!(!offering_available(&c, &offerings[0]), "the failed offering is unavailable");
    assert!(offering_available(&c, &offerings[1]) && offering_available(&c, &offerings[2]));
    assert!(offering_available(&c, &offering("spot", "m5.large", "us-east-1a")), "spot is another offering");
    assert_eq!(aws.ice().entries().iter().map(|e| e.key.clone()).collect::<Vec<_>>(), vec!["on-demand:m5.large:us-east-1a"]);
    assert!(aws.ice().entries()[0].expires_in <= Duration::from_secs(180));

    // The next launch leaves the cached offering out of the request altogether.
    let next = aws.launch(&request("general-fallback-2", offerings.clone())).await.unwrap();
    assert_eq!(next.instance_type, "m6g.large");
    assert_eq!(moto.fault_state().await.unwrap()["iceErrors"].as_u64(), Some(1), "no second capacity error");
    moto.stop().await.unwrap();
    eprintln!("fallback test: {:.1}s", t0.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_errors_on_every_offering_are_insufficient_capacity() {
    let t0 = Instant::now();
    let (moto, aws, _) = setup("cloud-aws-ice-all").await;
    moto.inject_capacity_error(&CapacityError { capacity_type: Some("on-demand".into()), ..Default::default() }).await.unwrap();
    let offerings = vec![offering("on-demand", "m5.large", "us-east-1a"), offering("on-demand", "c5.large", "us-east-1b")];
    let err = aws.launch(&request("general-ice", offerings.clone())).await.unwrap_err();
    let CloudError::InsufficientCapacity { offerings: failed, message } = &err else { panic!("{err}") };
    assert_eq!(failed, &offerings);
    assert!(message.contains("InsufficientInstanceCapacity"), "{message}");
    assert!(err.to_string().contains("insufficient capacity"));
    let c = aws.catalog().await.unwrap();
    for o in &offerings {
        assert!(!offering_available(&c, o), "{o:?}");
    }
    assert!(offering_available(&c, &offering("on-demand", "m5.large", "us-east-1c")));
    // A retry for the same offerings fails at once, without asking EC2.
    let fleets = count(&moto, "requests", "CreateFleet").await;
    assert!(matches!(aws.launch(&request("general-ice", offerings)).await, Err(CloudError::InsufficientCapacity { .. })));
    assert_eq!(count(&moto, "requests", "CreateFleet").await, fleets);
    // Spot is unaffected: the controller's next plan may use it.
    let spot = aws.launch(&request("general-ice-spot", vec![offering("spot", "m5.large", "us-east-1a")])).await.unwrap();
    assert_eq!(spot.capacity_type, "spot");
    assert_eq!(describe(&moto, &spot.id).await.instance_lifecycle().map(|l| l.as_str().to_string()).as_deref(), Some("spot"));
    // Offerings of the other capacity type in the same request are ignored (never mixed in a fleet).
    let mixed = vec![offering("on-demand", "m5.large", "us-east-1c"), offering("spot", "m5.large", "us-east-1a")];
    let err = aws.launch(&request("general-ice-mixed", mixed)).await.unwrap_err();
    assert!(matches!(&err, CloudError::InsufficientCapacity { offerings, .. } if offerings.len() == 1), "{err}");
    moto.stop().await.unwrap();
    eprintln!("insufficient-capacity test: {:.1}s", t0.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_retried_with_backoff_up_to_the_bound() {
    let t0 = Instant::now();
    let (moto, aws, _) = setup("cloud-aws-throttle").await;
    let o = vec![offering("on-demand", "m5.large", "us-east-1a")];
    // 3 throttled CreateFleet calls, bound 4 attempts: the 4th succeeds.
    moto.throttle(Some("CreateFleet"), 3).await.unwrap();
    let started = Instant::now();
    let inst = aws.launch(&request("general-throttle", o.clone())).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(inst.instance_type, "m5.large");
    assert_eq!(count(&moto, "throttled", "CreateFleet").await, 3);
    assert_eq!(count(&moto, "requests", "CreateFleet").await, 4);
    // Backoff 20, 40, 80 ms with jitter in [0.5, 1): at least 70 ms of waiting.
    assert!(waited >= Duration::from_millis(70), "{waited:?}");

    // 10 throttled calls: the provider gives up after 4 attempts.
    moto.throttle(Some("CreateFleet"), 10).await.unwrap();
    let err = aws.launch(&request("general-throttle-2", o.clone())).await.unwrap_err();
    assert!(matches!(&err, CloudError::Throttled(m) if m.contains("RequestLimitExceeded") && m.contains("4 attempts")), "{err}");
    assert!(err.retryable());
    assert_eq!(count(&moto, "requests", "CreateFleet").await, 8);
    // Throttled reads are retried the same way.
    moto.reset_faults().await.unwrap();
    moto.throttle(Some("DescribeInstances"), 2).await.unwrap();
    assert_eq!(aws.list().await.unwrap().len(), 1);
    assert_eq!(count(&moto, "throttled", "DescribeInstances").await, 2);
    moto.stop().await.unwrap();
    eprintln!("throttling test: {:.1}s", t0.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_catalog_serves_when_ec2_cannot_be_reached() {
    // An endpoint nothing listens on: the catalog falls back, launches fail with a typed error.
    let sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url("http://127.0.0.1:9")
        .credentials_provider(aws_sdk_ec2::config::SharedCredentialsProvider::new(aws_sdk_ec2::config::Credentials::new("k", "s", None, None, "test")))
        .build();
    let mut o = options();
    o.retry = RetryPolicy { max_attempts: 2, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) };
    let aws = AwsProvider::new(&sdk, CLUSTER, o).unwrap();
    let c = aws.catalog().await.unwrap();
    assert!(c.provenance[0].starts_with("OFFLINE"), "{:?}", c.provenance);
    assert!(c.get("m5.large").is_some());
    let err = aws.resolve_nodeclass(&nodeclass("default")).await.unwrap_err();
    assert!(matches!(err, CloudError::Throttled(_)), "a connection failure is transient: {err}");
}

struct Profile {
    path: String,
    roles: Vec<String>,
    tags: BTreeMap<String, String>,
}

async fn profile(moto: &Moto, name: &str) -> Option<Profile> {
    let out = match moto.iam().get_instance_profile().instance_profile_name(name).send().await {
        Ok(o) => o,
        Err(e) if aws_sdk_iam::error::ProvideErrorMetadata::code(&e) == Some("NoSuchEntity") => return None,
        Err(e) => panic!("{}", aws_sdk_iam::error::DisplayErrorContext(&e)),
    };
    let p = out.instance_profile().unwrap();
    Some(Profile {
        path: p.path().to_string(),
        roles: p.roles().iter().map(|r| r.role_name().to_string()).collect(),
        tags: p.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect(),
    })
}

async fn make_profile(moto: &Moto, name: &str, path: &str, tags: &[(&str, &str)]) {
    let tags: Vec<aws_sdk_iam::types::Tag> = tags.iter().map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(*k).value(*v).build().unwrap()).collect();
    moto.iam().create_instance_profile().instance_profile_name(name).path(path).set_tags(Some(tags)).send().await.unwrap();
    moto.iam().add_role_to_instance_profile().instance_profile_name(name).role_name(NODE_ROLE).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_gets_an_instance_profile_that_launches_use_and_gc_collects_when_unused() {
    let moto = Moto::start("cloud-aws-profile").await.unwrap();
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, options()).unwrap();
    let mut nc = nodeclass("default");
    nc.metadata.uid = Some("uid-default".into());

    let status = aws.resolve_nodeclass(&nc).await.unwrap();
    let name = status.instance_profile.clone().unwrap();
    assert!(name.starts_with("demo_") && name != NODE_ROLE, "{name}");
    let p = profile(&moto, &name).await.expect("the profile exists");
    assert_eq!(p.roles, vec![NODE_ROLE.to_string()]);
    assert_eq!(p.path, "/karpenter/us-east-1/demo/uid-default/");
    for (k, v) in
        [("kubernetes.io/cluster/demo", "owned"), ("karpenter.k8s.aws/ec2nodeclass", "default"), ("eks:eks-cluster-name", "demo"), ("topology.kubernetes.io/region", "us-east-1"), ("team", "platform")]
    {
        assert_eq!(p.tags.get(k).map(String::as_str), Some(v), "tag {k} in {:?}", p.tags);
    }

    // The launch template names the profile, not the role.
    aws.launch(&request("general-prof1", vec![offering("on-demand", "m5.large", "us-east-1a")])).await.unwrap();
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let lt = lts.launch_templates().iter().find(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))).unwrap();
    let v = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
    let data = v.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.iam_instance_profile().and_then(|p| p.name()), Some(name.as_str()));

    // A second resolve (a restarted controller, the status written) reuses it; no second profile.
    nc.status = Some(status.clone());
    let again = AwsProvider::new(&moto.sdk_config(), CLUSTER, options()).unwrap();
    assert_eq!(again.resolve_nodeclass(&nc).await.unwrap().instance_profile.as_deref(), Some(name.as_str()));
    let all = moto.iam().list_instance_profiles().send().await.unwrap();
    assert_eq!(all.instance_profiles().len(), 1, "{:?}", all.instance_profiles());

    // GC: an orphaned managed profile goes; the one in use, a hand-made one (no managed tags, even
    // under our path) and one outside our path stay.
    make_profile(&moto, "demo_orphan", "/karpenter/us-east-1/demo/uid-gone/", &[("kubernetes.io/cluster/demo", "owned"), ("karpenter.k8s.aws/ec2nodeclass", "gone")]).await;
    make_profile(&moto, "handmade", "/karpenter/us-east-1/demo/uid-gone/", &[("team", "x")]).await;
    make_profile(&moto, "KarpenterNodeInstanceProfile-demo", "/", &[("kubernetes.io/cluster/demo", "owned"), ("karpenter.k8s.aws/ec2nodeclass", "x")]).await;
    make_profile(&moto, "other_cluster", "/karpenter/us-east-1/other/uid-1/", &[("kubernetes.io/cluster/other", "owned"), ("karpenter.k8s.aws/ec2nodeclass", "x")]).await;
    let deleted = again.collect_instance_profiles(std::slice::from_ref(&nc)).await.unwrap();
    assert_eq!(deleted, vec!["demo_orphan".to_string()]);
    assert!(profile(&moto, "demo_orphan").await.is_none());
    for keep in [name.as_str(), "handmade", "KarpenterNodeInstanceProfile-demo", "other_cluster"] {
        assert!(profile(&moto, keep).await.is_some(), "{keep} was deleted");
    }
    // Through the CloudProvider seam (what the controller calls every NodeClass round), rate-limited.
    assert!(aws.collect_nodeclass_resources(std::slice::from_ref(&nc)).await.unwrap().is_empty());

    // A role that does not exist: the NodeClass is not ready, saying so.
    let mut missing = nodeclass("missing-role");
    missing.spec.role = Some("NoSuchRole".into());
    let err = aws.resolve_nodeclass(&missing).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("spec.role NoSuchRole") && m.contains("no such IAM role")), "{err}");
    // spec.instanceProfile is used as is.
    let mut given = nodeclass("given");
    given.spec.role = None;
    given.spec.instance_profile = Some("KarpenterNodeInstanceProfile-demo".into());
    assert_eq!(aws.resolve_nodeclass(&given).await.unwrap().instance_profile.as_deref(), Some("KarpenterNodeInstanceProfile-demo"));
    moto.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_facts_come_from_eks_describe_cluster_and_flags_override() {
    let moto = Moto::start("cloud-aws-eks").await.unwrap();
    moto.create_eks_cluster(CLUSTER, "1.31", Some("10.100.0.0/16")).await.unwrap();
    let retry = options().retry;
    let c = stowage_aws::cluster::discover(&moto.sdk_config(), CLUSTER, &ClusterFlags::default(), &retry).await.unwrap();
    assert_eq!(c.info.service_cidr.as_deref(), Some("10.100.0.0/16"));
    assert!(c.info.endpoint.starts_with("https://"), "{}", c.info.endpoint);
    assert!(!c.info.ca_bundle.is_empty());
    assert_eq!((c.ip_family.as_str(), c.kubernetes_version.as_deref()), ("ipv4", Some("1.31")));

    let flags = ClusterFlags { endpoint: Some("https://10.0.0.1:443".into()), service_cidr: Some("172.16.0.0/12".into()), kubernetes_version: Some("1.30".into()), ..Default::default() };
    let c = stowage_aws::cluster::discover(&moto.sdk_config(), CLUSTER, &flags, &retry).await.unwrap();
    assert_eq!((c.info.endpoint.as_str(), c.info.service_cidr.as_deref(), c.kubernetes_version.as_deref()), ("https://10.0.0.1:443", Some("172.16.0.0/12"), Some("1.30")));
    assert!(!c.info.ca_bundle.is_empty(), "the CA still comes from EKS");

    // No such cluster and no flag: refuse, naming the flag.
    let err = stowage_aws::cluster::discover(&moto.sdk_config(), "no-such-cluster", &ClusterFlags::default(), &retry).await.unwrap_err();
    assert!(matches!(err, ClusterError::NoServiceCidr { .. }));
    assert!(err.to_string().contains("--service-cidr") && err.to_string().contains("ResourceNotFoundException"), "{err}");

    // The service CIDR reaches nodeadm's NodeConfig in the launch template.
    let found = stowage_aws::cluster::discover(&moto.sdk_config(), CLUSTER, &ClusterFlags::default(), &retry).await.unwrap();
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, AwsOptions { cluster: found.info, ..options() }).unwrap();
    aws.resolve_nodeclass(&nodeclass("default")).await.unwrap();
    aws.launch(&request("general-eks1", vec![offering("on-demand", "m5.large", "us-east-1a")])).await.unwrap();
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let lt = lts.launch_templates().iter().find(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))).unwrap();
    let v = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
    let ud = String::from_utf8(base64_decode(v.launch_template_versions()[0].launch_template_data().unwrap().user_data().unwrap()).unwrap()).unwrap();
    assert!(ud.contains("    cidr: \"10.100.0.0/16\"\n"), "{ud}");
    moto.stop().await.unwrap();
}

/// The interruption queue on moto's SQS (same endpoint as EC2): the URL from GetQueueUrl by name;
/// an empty queue answers after the long-poll wait; at most 10 messages per receive; each body is the
/// EventBridge event sent, which the shared decision parses; a deleted message is gone (the queue's
/// depth counts in-flight messages too); a missing queue is `Fatal` naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_queue_receives_and_deletes_on_moto_sqs() {
    use stowage_aws::sqs::SqsQueue;
    use stowage_decide::cloud::InterruptionQueue;
    use stowage_decide::interruption::{self, Kind};

    let moto = Moto::start("sqs").await.unwrap();
    let url = moto.create_queue("demo-interruptions").await.unwrap();
    let q = SqsQueue::new(&moto.sdk_config(), "demo-interruptions", options().retry).unwrap().with_wait_seconds(1);
    assert_eq!(q.url().await.unwrap(), url);
    assert_eq!(q.name(), "demo-interruptions");

    let t = Instant::now();
    assert!(q.receive().await.unwrap().is_empty());
    assert!(t.elapsed() >= Duration::from_millis(900), "an empty queue answers after the long poll ({:?})", t.elapsed());

    let kinds = [Kind::SpotInterrupted, Kind::RebalanceRecommendation, Kind::ScheduledChange, Kind::InstanceStopped, Kind::InstanceTerminated, Kind::NoOp];
    let mut sent = BTreeMap::new();
    for i in 0..12 {
        let id = format!("i-{i:017x}");
        let k = kinds[i % kinds.len()];
        moto.send_message(&url, &interruption::event_body(k, &id, "us-east-1", "2026-12-01T12:00:00Z")).await.unwrap();
        sent.insert(id, k);
    }
    moto.send_message(&url, "{not an event").await.unwrap();
    assert_eq!(moto.queue_depth(&url).await.unwrap(), 13);

    let mut got = BTreeMap::new();
    let mut unreadable = 0;
    let mut receives = 0;
    let mut received = 0;
    while received < 13 {
        receives += 1;
        assert!(receives < 20, "messages never all arrived: {got:?}");
        let batch = q.receive().await.unwrap();
        assert!(batch.len() <= 10, "{} messages in one receive", batch.len());
        for m in batch {
            received += 1;
            assert!(!m.receipt.is_empty() && !m.id.is_empty());
            match interruption::parse(&m.body) {
                Ok(msg) => {
                    let id = if msg.kind == Kind::NoOp { msg.time.map(|_| "no_op".to_string()).unwrap() } else { msg.instance_ids[0].clone() };
                    got.entry(id).or_insert(Vec::new()).push(msg.kind);
                }
                Err(e) => {
                    assert_eq!(e.field, "(body)");
                    unreadable += 1;
                }
            }
            q.delete(&m.receipt).await.unwrap();
        }
    }
    assert_eq!(unreadable, 1);
    for (id, k) in &sent {
        if *k != Kind::NoOp {
            assert_eq!(got.get(id), Some(&vec![*k]), "{id}");
        }
    }
    assert_eq!(got.get("no_op").map(Vec::len), Some(2));
    assert_eq!(moto.queue_depth(&url).await.unwrap(), 0, "every handled message was deleted");

    // The URL form of the setting is used as is; a queue that does not exist is Fatal, naming it.
    let by_url = SqsQueue::new(&moto.sdk_config(), url.clone(), options().retry).unwrap().with_wait_seconds(0);
    assert!(by_url.receive().await.unwrap().is_empty());
    let missing = SqsQueue::new(&moto.sdk_config(), "no-such-queue", options().retry).unwrap().with_wait_seconds(0);
    match missing.receive().await {
        Err(CloudError::Fatal(m)) => assert!(m.contains("no-such-queue"), "{m}"),
        other => panic!("expected Fatal, got {other:?}"),
    }
    assert!(matches!(SqsQueue::new(&moto.sdk_config(), " ", options().retry), Err(CloudError::Fatal(_))));
    moto.stop().await.unwrap();
}

/// The user data of every stowage launch template that launches `image`.
async fn user_data_for_image(moto: &Moto, image: &str) -> Vec<String> {
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let mut out = Vec::new();
    for lt in lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))) {
        let v = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap();
        if data.image_id() == Some(image) {
            out.push(String::from_utf8(base64_decode(data.user_data().unwrap()).unwrap()).unwrap());
        }
    }
    assert!(!out.is_empty(), "no launch template launches {image}");
    out
}

/// The part of a MIME multipart user data with this content type (its body).
fn mime_part<'a>(ud: &'a str, content_type: &str) -> &'a str {
    let header = format!("Content-Type: {content_type}\n\n");
    let start = ud.find(&header).unwrap_or_else(|| panic!("no {content_type} part in {ud}")) + header.len();
    let end = ud[start..].find("\n--//").map(|e| start + e).unwrap_or(ud.len());
    &ud[start..end]
}

/// nodeadm's NodeConfig schema (node.eks.aws/v1alpha1): the fields it reads, the four cluster fields
/// it requires, kubelet flags as a list of strings.
fn check_node_config(yaml: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!((v["apiVersion"].as_str(), v["kind"].as_str()), (Some("node.eks.aws/v1alpha1"), Some("NodeConfig")), "{yaml}");
    let known = |obj: &serde_json::Value, keys: &[&str], at: &str| {
        for k in obj.as_object().unwrap_or_else(|| panic!("{at} is not a mapping: {yaml}")).keys() {
            assert!(keys.contains(&k.as_str()), "{at}.{k} is not a NodeConfig field: {yaml}");
        }
    };
    known(&v, &["apiVersion", "kind", "spec"], "");
    known(&v["spec"], &["cluster", "kubelet", "containerd", "instance", "featureGates"], "spec");
    known(&v["spec"]["cluster"], &["name", "apiServerEndpoint", "certificateAuthority", "cidr", "enableOutpost", "id"], "spec.cluster");
    for required in ["name", "apiServerEndpoint", "certificateAuthority", "cidr"] {
        assert!(v["spec"]["cluster"][required].as_str().is_some_and(|s| !s.is_empty()), "nodeadm requires spec.cluster.{required}: {yaml}");
    }
    known(&v["spec"]["kubelet"], &["config", "flags"], "spec.kubelet");
    assert!(v["spec"]["kubelet"]["config"].is_object(), "{yaml}");
    assert!(v["spec"]["kubelet"]["flags"].as_array().is_some_and(|f| f.iter().all(|x| x.is_string())), "{yaml}");
    v
}

/// AMI aliases of every family and `ssmParameter` terms through moto's SSM (public parameters seeded
/// into its backend, pointing at copies of moto's plain images named like the real ones): per arch and
/// variant, the image a launch picks per instance type (GPU → nvidia, Inferentia → neuron), the user
/// data each family's bootstrapper reads, SSM caching and throttling, and what is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ami_aliases_and_ssm_parameters_resolve_per_family_arch_and_variant() {
    let t0 = Instant::now();
    let moto = Moto::start("cloud-aws-ssm").await.unwrap();
    let k8s = "1.31";
    let image = seed_ami_parameters(&moto).await;
    let img = |name: &str| image[name].clone();

    let mut o = AwsOptions { alias: Default::default(), ..options() };
    o.alias.kubernetes_version = Some(k8s.into());
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, o).unwrap();
    let requirements = |s: &stowage_input::api::ec2nodeclass::AmiStatus| -> Vec<String> {
        s.requirements.iter().map(|r| format!("{} {} {}", r.key, r.operator, r.values.clone().unwrap_or_default().join(","))).collect()
    };

    // al2023@latest: five images, each with its variant's requirements.
    let status = aws.resolve_nodeclass(&nodeclass("default")).await.unwrap();
    let amis: BTreeMap<String, Vec<String>> = status.amis.unwrap().iter().map(|a| (a.name.clone().unwrap(), requirements(a))).collect();
    let none = "karpenter.k8s.aws/instance-accelerator-count DoesNotExist ,karpenter.k8s.aws/instance-gpu-count DoesNotExist ";
    let want = |arch: &str, rest: &str| -> Vec<String> { std::iter::once(format!("kubernetes.io/arch In {arch}")).chain(rest.split(',').filter(|s| !s.is_empty()).map(str::to_string)).collect() };
    assert_eq!(amis.len(), 5, "{amis:?}");
    assert_eq!(amis["amazon-eks-node-al2023-x86_64-standard-1.31-v20261201"], want("amd64", none));
    assert_eq!(amis["amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261201"], want("amd64", "karpenter.k8s.aws/instance-gpu-count Exists "));
    assert_eq!(amis["amazon-eks-node-al2023-x86_64-neuron-1.31-v20261201"], want("amd64", "karpenter.k8s.aws/instance-accelerator-count Exists "));
    assert_eq!(amis["amazon-eks-node-al2023-arm64-standard-1.31-v20261201"], want("arm64", none));
    assert_eq!(amis["amazon-eks-node-al2023-arm64-nvidia-1.31-v20261201"], want("arm64", "karpenter.k8s.aws/instance-gpu-count Exists "));

    // Each instance type launches with its image: GPU → nvidia, Inferentia → neuron, else standard.
    let mut n = 0;
    let mut launch = |nodeclass: &'static str, instance_type: &'static str| {
        n += 1;
        let mut req = request(&format!("general-ami{n}"), vec![offering("on-demand", instance_type, "us-east-1a")]);
        req.nodeclass = nodeclass.into();
        req
    };
    for (t, name) in [
        ("m5.large", "amazon-eks-node-al2023-x86_64-standard-1.31-v20261201"),
        ("g5.xlarge", "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261201"),
        ("inf2.xlarge", "amazon-eks-node-al2023-x86_64-neuron-1.31-v20261201"),
        ("m6g.large", "amazon-eks-node-al2023-arm64-standard-1.31-v20261201"),
        ("g5g.xlarge", "amazon-eks-node-al2023-arm64-nvidia-1.31-v20261201"),
    ] {
        let inst = aws.launch(&launch("default", t)).await.unwrap();
        assert_eq!(inst.image_id.as_deref(), Some(img(name).as_str()), "{t} launches {name}");
    }
    // AL2023 user data is a NodeConfig nodeadm accepts.
    for ud in user_data_for_image(&moto, &img("amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261201")).await {
        let v = check_node_config(mime_part(&ud, "application/node.eks.aws"));
        assert_eq!(v["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert!(v["spec"]["kubelet"]["config"]["maxPods"].as_i64().is_some_and(|m| m > 0), "{ud}");
    }

    // A pinned version reads its own parameter; only the x86_64 standard one exists here.
    let mut pinned = nodeclass("pinned");
    pinned.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("al2023@v20261101".into()), ..Default::default() }];
    let s = aws.resolve_nodeclass(&pinned).await.unwrap();
    assert_eq!(s.amis.unwrap().iter().map(|a| a.id.clone()).collect::<Vec<_>>(), vec![img("amazon-eks-node-al2023-x86_64-standard-1.31-v20261101")]);

    // Bottlerocket: x86_64 standard serves neuron types too, nvidia has its own image; no arm64 nvidia.
    let mut bottlerocket = nodeclass("bottlerocket");
    bottlerocket.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("bottlerocket@latest".into()), ..Default::default() }];
    bottlerocket.spec.user_data = Some("[settings.host-containers.admin]\nenabled = true\n[settings.kubernetes]\nmax-pods = 3\n".into());
    bottlerocket.spec.kubelet = Some(stowage_input::api::ec2nodeclass::KubeletConfiguration { image_gc_high_threshold_percent: Some(85), cpu_cfs_quota: Some(false), ..Default::default() });
    let s = aws.resolve_nodeclass(&bottlerocket).await.unwrap();
    let amis: Vec<(String, Vec<String>)> = s.amis.unwrap().iter().map(|a| (a.name.clone().unwrap(), requirements(a))).collect();
    assert_eq!(amis.len(), 4, "x86_64 standard twice (standard, neuron), arm64 standard, x86_64 nvidia: {amis:?}");
    for (t, name) in [
        ("m5.large", "bottlerocket-aws-k8s-1.31-x86_64-v1.26.0"),
        ("inf2.xlarge", "bottlerocket-aws-k8s-1.31-x86_64-v1.26.0"),
        ("g5.xlarge", "bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.26.0"),
        ("m6g.large", "bottlerocket-aws-k8s-1.31-aarch64-v1.26.0"),
    ] {
        let inst = aws.launch(&launch("bottlerocket", t)).await.unwrap();
        assert_eq!(inst.image_id.as_deref(), Some(img(name).as_str()), "{t} launches {name}");
    }
    // No arm64 nvidia image: a g5g offering cannot launch (cached as NoImageForArchitecture).
    let err = aws.launch(&launch("bottlerocket", "g5g.xlarge")).await.unwrap_err();
    assert!(matches!(&err, CloudError::InsufficientCapacity { message, .. } if message.contains("no AMI of EC2NodeClass bottlerocket for g5g.xlarge")), "{err}");
    check_bottlerocket_templates(&moto, &img("bottlerocket-aws-k8s-1.31-x86_64-v1.26.0")).await;
    let mut br_pinned = nodeclass("br-pinned");
    br_pinned.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("bottlerocket@v1.25.0".into()), ..Default::default() }];
    let s = aws.resolve_nodeclass(&br_pinned).await.unwrap();
    assert!(s.amis.unwrap().iter().all(|a| a.id == img("bottlerocket-aws-k8s-1.31-x86_64-v1.25.0")), "the v is dropped from the path");

    // AL2: bootstrap.sh with the cluster and kubelet flags; the GPU image serves GPU types.
    let mut al2 = nodeclass("al2");
    al2.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("al2@latest".into()), ..Default::default() }];
    aws.resolve_nodeclass(&al2).await.unwrap();
    for (t, name) in [("m5.large", "amazon-eks-node-1.31-v20261201"), ("g5.xlarge", "amazon-eks-gpu-node-1.31-v20261201"), ("m6g.large", "amazon-eks-arm64-node-1.31-v20261201")] {
        let inst = aws.launch(&launch("al2", t)).await.unwrap();
        assert_eq!(inst.image_id.as_deref(), Some(img(name).as_str()), "{t} launches {name}");
    }
    for ud in user_data_for_image(&moto, &img("amazon-eks-node-1.31-v20261201")).await {
        let script = mime_part(&ud, "text/x-shellscript; charset=\"us-ascii\"");
        assert!(script.starts_with("#!/bin/bash -xe\n"), "{script}");
        assert!(script.contains("/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://127.0.0.1:6443' --b64-cluster-ca 'Q0EK'"), "{script}");
        for flag in ["--dns-cluster-ip '10.100.0.10'", "--use-max-pods false", "--max-pods=29", "karpenter.sh/unregistered:NoExecute", "--node-labels=\""] {
            assert!(script.contains(flag), "{flag} in {script}");
        }
    }

    ssm_parameter_terms(&aws, &img("team-web-image")).await;

    // SSM answers are cached: another NodeClass with the same alias asks nothing.
    let asked = count(&moto, "requests", "GetParameter").await;
    assert_eq!(asked, 5 + 5 + 4 + 4 + 3 + 1 + 2, "one GetParameter per parameter of each alias and ssmParameter term");
    aws.resolve_nodeclass(&nodeclass("default-2")).await.unwrap();
    assert_eq!(count(&moto, "requests", "GetParameter").await, asked);
    // Throttled SSM calls are retried within the bound.
    moto.throttle(Some("GetParameter"), 2).await.unwrap();
    let mut fresh = nodeclass("fresh");
    fresh.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("bottlerocket@v1.24.0".into()), ..Default::default() }];
    let err = aws.resolve_nodeclass(&fresh).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("0 of its 4 SSM parameters exist")), "{err}");
    assert_eq!(count(&moto, "throttled", "GetParameter").await, 2);

    refused_families(&moto, &aws, &al2).await;
    moto.stop().await.unwrap();
    eprintln!("ssm test: {:.1}s", t0.elapsed().as_secs_f64());
}

/// Copies of moto's plain images under the names of the real EKS / Bottlerocket images, one per public
/// SSM parameter (Kubernetes 1.31), and the parameters seeded into moto's SSM; plus a team parameter
/// and one whose value is not an AMI id. Returns image name → id.
async fn seed_ami_parameters(moto: &Moto) -> BTreeMap<String, String> {
    let x86 = moto.plain_al2023_image("x86_64").await.unwrap();
    let arm = moto.plain_al2023_image("arm64").await.unwrap();
    // (parameter, image copied from, its name): the real images' names, one image per parameter.
    let eks = "/aws/service/eks/optimized-ami/1.31";
    let br = "/aws/service/bottlerocket/aws-k8s-1.31";
    let seeds: Vec<(String, &str, String)> = vec![
        (format!("{eks}/amazon-linux-2023/x86_64/standard/recommended/image_id"), &x86, "amazon-eks-node-al2023-x86_64-standard-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"), &x86, "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2023/x86_64/neuron/recommended/image_id"), &x86, "amazon-eks-node-al2023-x86_64-neuron-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2023/arm64/standard/recommended/image_id"), &arm, "amazon-eks-node-al2023-arm64-standard-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2023/arm64/nvidia/recommended/image_id"), &arm, "amazon-eks-node-al2023-arm64-nvidia-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20261101/image_id"), &x86, "amazon-eks-node-al2023-x86_64-standard-1.31-v20261101".into()),
        (format!("{eks}/amazon-linux-2/recommended/image_id"), &x86, "amazon-eks-node-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2-arm64/recommended/image_id"), &arm, "amazon-eks-arm64-node-1.31-v20261201".into()),
        (format!("{eks}/amazon-linux-2-gpu/recommended/image_id"), &x86, "amazon-eks-gpu-node-1.31-v20261201".into()),
        (format!("{br}/x86_64/latest/image_id"), &x86, "bottlerocket-aws-k8s-1.31-x86_64-v1.26.0".into()),
        (format!("{br}/arm64/latest/image_id"), &arm, "bottlerocket-aws-k8s-1.31-aarch64-v1.26.0".into()),
        (format!("{br}-nvidia/x86_64/latest/image_id"), &x86, "bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.26.0".into()),
        (format!("{br}/x86_64/1.25.0/image_id"), &x86, "bottlerocket-aws-k8s-1.31-x86_64-v1.25.0".into()),
        ("/team/images/web".into(), &x86, "team-web-image".into()),
    ];
    let mut image: BTreeMap<String, String> = BTreeMap::new();
    let mut params = Vec::new();
    for (param, source, name) in &seeds {
        let id = moto.copy_image(source, name).await.unwrap();
        params.push((param.clone(), id.clone()));
        image.insert(name.clone(), id);
    }
    params.push(("/team/images/not-an-ami".into(), "hello".into()));
    moto.put_public_parameters(&params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>()).await.unwrap();
    image
}

/// The Bottlerocket launch templates of `image`: the TOML parsed back keeps the NodeClass's settings
/// and has only Bottlerocket `settings.kubernetes` keys with stowage's values; Karpenter's default
/// volumes.
async fn check_bottlerocket_templates(moto: &Moto, image: &str) {
    for ud in user_data_for_image(moto, image).await {
        let doc: toml::Table = ud.parse().unwrap_or_else(|e| panic!("{e}\n{ud}"));
        assert_eq!(doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(), Some(true), "{ud}");
        let k = doc["settings"]["kubernetes"].as_table().unwrap();
        let keys: Vec<&str> = k.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            vec!["api-server", "cluster-certificate", "cluster-dns-ip", "cluster-name", "cpu-cfs-quota-enforced", "image-gc-high-threshold-percent", "max-pods", "node-labels", "node-taints"],
            "{ud}"
        );
        assert_eq!((k["cluster-name"].as_str(), k["api-server"].as_str(), k["cluster-dns-ip"].as_str()), (Some(CLUSTER), Some("https://127.0.0.1:6443"), Some("10.100.0.10")));
        assert!(k["max-pods"].as_integer().is_some_and(|m| m > 3), "stowage's maxPods wins: {ud}");
        assert_eq!(k["node-labels"]["workload"].as_str(), Some("web"));
        assert_eq!(k["node-taints"]["karpenter.sh/unregistered"].as_array().map(|a| a[0].as_str()), Some(Some(":NoExecute")));
    }
    // Bottlerocket's default volumes: a 4 GiB OS volume and a 20 GiB data volume.
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let mut br_devices = None;
    for lt in lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))) {
        let v = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap();
        if data.image_id() == Some(image) {
            br_devices = Some(data.block_device_mappings().iter().map(|b| (b.device_name().unwrap().to_string(), b.ebs().and_then(|e| e.volume_size()))).collect::<Vec<_>>());
        }
    }
    assert_eq!(br_devices, Some(vec![("/dev/xvda".to_string(), Some(4)), ("/dev/xvdb".to_string(), Some(20))]));
}

/// Refused: Windows, AL2 from Kubernetes 1.33, an amiFamily that contradicts the alias.
async fn refused_families(moto: &Moto, aws: &AwsProvider, al2: &EC2NodeClass) {
    let mut windows = nodeclass("windows");
    windows.spec.ami_selector_terms = vec![AmiSelectorTerm { alias: Some("windows2022@latest".into()), ..Default::default() }];
    let err = aws.resolve_nodeclass(&windows).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("Windows nodes are not supported") && !m.contains("no AMI")), "{err}");
    let mut mismatch = nodeclass("mismatch");
    mismatch.spec.ami_family = Some("Bottlerocket".into());
    let err = aws.resolve_nodeclass(&mismatch).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("spec.amiFamily Bottlerocket does not match the alias")), "{err}");
    let mut o = AwsOptions { alias: Default::default(), ..options() };
    o.alias.kubernetes_version = Some("1.33".into());
    let newer = AwsProvider::new(&moto.sdk_config(), CLUSTER, o).unwrap();
    let err = newer.resolve_nodeclass(al2).await.unwrap_err();
    assert!(matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("AL2 aliases are not supported on Kubernetes 1.33")), "{err}");
}

/// ssmParameter terms: the value is the image (its architecture the only requirement); a missing
/// parameter or a value that is not an AMI id leaves nothing, and the NodeClass is not ready naming
/// the parameter.
async fn ssm_parameter_terms(aws: &AwsProvider, image: &str) {
    let mut by_param = nodeclass("by-param");
    by_param.spec.ami_family = Some("AL2023".into());
    by_param.spec.ami_selector_terms = vec![AmiSelectorTerm { ssm_parameter: Some("/team/images/web".into()), ..Default::default() }];
    let s = aws.resolve_nodeclass(&by_param).await.unwrap();
    assert_eq!(
        s.amis
            .unwrap()
            .iter()
            .map(|a| (a.id.clone(), a.requirements.iter().map(|r| format!("{} {} {}", r.key, r.operator, r.values.clone().unwrap_or_default().join(","))).collect::<Vec<_>>()))
            .collect::<Vec<_>>(),
        vec![(image.to_string(), vec!["kubernetes.io/arch In amd64".to_string()])]
    );
    by_param.spec.ami_selector_terms = vec![
        AmiSelectorTerm { ssm_parameter: Some("/team/images/missing".into()), ..Default::default() },
        AmiSelectorTerm { ssm_parameter: Some("/team/images/not-an-ami".into()), ..Default::default() },
    ];
    let err = aws.resolve_nodeclass(&by_param).await.unwrap_err();
    assert!(
        matches!(&err, CloudError::NodeClassNotReady(m) if m.contains("ssmParameter /team/images/missing: no such SSM parameter") && m.contains("/team/images/not-an-ami: its value \"hello\" is not an AMI id")),
        "{err}"
    );
}

/// Capacity reservations (issue 16 item 6): selector terms resolve through DescribeCapacityReservations
/// (the middleware emulates it: moto has none) into `status.capacityReservations`; each becomes a
/// `reserved` offering at Karpenter's price while it has room; a reserved launch goes through a launch
/// template that targets the reservation and takes one of its instances; a full reservation is an
/// insufficient-capacity error and its offering becomes unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_reservations_are_selected_offered_and_launched_into() {
    let moto = Moto::start("cloud-aws-reservations").await.unwrap();
    let soon = {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 600;
        aws_sdk_ec2::primitives::DateTime::from_secs(now as i64).fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime).unwrap()
    };
    moto.seed_capacity_reservations(serde_json::json!([
        {"id": "cr-0aaa", "instanceType": "m5.large", "zone": "us-east-1a", "count": 1, "tags": {"team": "ml"}},
        // A capacity block ending in 10 minutes: within Karpenter's 40-minute window, expiring.
        {"id": "cr-0bbb", "instanceType": "m5.large", "zone": "us-east-1b", "count": 2, "tags": {"team": "ml"}, "type": "capacity-block", "endDate": soon},
        {"id": "cr-0ccc", "instanceType": "m5.xlarge", "zone": "us-east-1a", "count": 3, "tags": {"team": "other"}},
        {"id": "cr-0ddd", "instanceType": "c5.large", "zone": "us-east-1c", "count": 1, "matchCriteria": "open"},
        {"id": "cr-0eee", "instanceType": "c5.large", "zone": "us-east-1c", "count": 1, "tags": {"team": "ml"}, "state": "cancelled"},
    ]))
    .await
    .unwrap();
    let aws = AwsProvider::new(&moto.sdk_config(), CLUSTER, options()).unwrap();
    let mut nc = nodeclass("default");
    nc.spec.capacity_reservation_selector_terms = Some(serde_json::from_value(serde_json::json!([{"tags": {"team": "ml"}}, {"id": "cr-0ddd"}])).unwrap());
    let status = aws.resolve_nodeclass(&nc).await.unwrap();
    let found: Vec<(String, String, String, String)> = status.capacity_reservations.clone().unwrap().into_iter().map(|r| (r.id, r.instance_type, r.reservation_type, r.state)).collect();
    let want = |id: &str, t: &str, kind: &str, state: &str| (id.to_string(), t.to_string(), kind.to_string(), state.to_string());
    assert_eq!(
        found,
        vec![want("cr-0aaa", "m5.large", "default", "active"), want("cr-0bbb", "m5.large", "capacity-block", "expiring"), want("cr-0ddd", "c5.large", "default", "active")],
        "tags and id terms ORed, cancelled and unselected ones left out"
    );
    let s = status.capacity_reservations.unwrap();
    assert_eq!((s[0].availability_zone.as_str(), s[0].owner_id.as_str(), s[0].instance_match_criteria.as_str()), ("us-east-1a", "123456789012", "targeted"));
    assert_eq!(s[2].instance_match_criteria, "open");
    assert!(s[1].end_time.is_some());

    let reserved = |c: &stowage_core::domain::catalog::Catalog, id: &str| -> stowage_core::domain::catalog::Offering {
        c.types.iter().flat_map(|t| &t.offerings).find(|o| o.reservation_id() == Some(id)).cloned().unwrap_or_else(|| panic!("no offering for {id}"))
    };
    let c = aws.catalog().await.unwrap();
    let a = reserved(&c, "cr-0aaa");
    let od = c.get("m5.large").unwrap().offerings.iter().find(|o| o.capacity_type == "on-demand" && o.zone == "us-east-1a").unwrap().price;
    assert_eq!((a.capacity_type.as_str(), a.zone.as_str(), a.available, a.reservation.as_ref().unwrap().count), ("reserved", "us-east-1a", true, 1));
    assert!((a.price - od / 10_000_000.0).abs() < 1e-15, "Karpenter's price: on-demand / 10,000,000");
    assert!(!reserved(&c, "cr-0bbb").available, "an expiring capacity block takes no launch");
    assert!(reserved(&c, "cr-0ddd").available);
    assert!(c.types.iter().flat_map(|t| &t.offerings).all(|o| o.reservation_id() != Some("cr-0ccc")), "not selected");
    let ids = ["cr-0aaa".to_string(), "cr-0bbb".to_string(), "cr-0ccc".to_string()];
    assert_eq!(aws.expiring_reservations(&ids).await.unwrap(), vec!["cr-0bbb".to_string()], "only the capacity block near its end");

    // A launch into cr-0aaa: its launch template targets the reservation, one instance is taken.
    let into_a = OfferingRef { capacity_type: "reserved".into(), reservation: a.reservation.clone(), price: a.price, ..offering("on-demand", "m5.large", "us-east-1a") };
    let inst = aws.launch(&request("general-res01", vec![into_a.clone()])).await.unwrap();
    assert_eq!((inst.instance_type.as_str(), inst.zone.as_str(), inst.capacity_type.as_str()), ("m5.large", "us-east-1a", "reserved"));
    let st = moto.fault_state().await.unwrap();
    assert_eq!(st["reservationLaunches"]["cr-0aaa"], 1, "{st}");
    assert_eq!(st["reservations"]["cr-0aaa"]["available"], 0);
    let lts = moto.ec2().describe_launch_templates().send().await.unwrap();
    let mut targets = Vec::new();
    for lt in lts.launch_templates().iter().filter(|l| l.launch_template_name().is_some_and(|n| n.starts_with("stowage/"))) {
        let v = moto.ec2().describe_launch_template_versions().launch_template_id(lt.launch_template_id().unwrap()).send().await.unwrap();
        let spec = v.launch_template_versions()[0].launch_template_data().unwrap().capacity_reservation_specification().cloned();
        targets.push(spec.and_then(|s| s.capacity_reservation_target().and_then(|t| t.capacity_reservation_id().map(str::to_string))));
    }
    assert_eq!(targets, vec![Some("cr-0aaa".to_string())], "the reserved launch's template targets the reservation");
    // The launch is counted before the next DescribeCapacityReservations: no second plan into it.
    assert!(!reserved(&aws.catalog().await.unwrap(), "cr-0aaa").available);

    // An on-demand launch of the same type keeps the preference `none`: it takes nothing reserved.
    aws.launch(&request("general-od01", vec![offering("on-demand", "m5.large", "us-east-1a")])).await.unwrap();
    assert_eq!(moto.fault_state().await.unwrap()["reservationLaunches"]["cr-0aaa"], 1);

    // A provider that believes cr-0ddd has room while EC2 says it is full (another launcher took it):
    // EC2's ReservationCapacityExceeded is an insufficient-capacity error and the offering is unavailable.
    let d = reserved(&aws.catalog().await.unwrap(), "cr-0ddd");
    moto.seed_capacity_reservations(serde_json::json!([{"id": "cr-0ddd", "instanceType": "c5.large", "zone": "us-east-1c", "count": 0, "matchCriteria": "open"}])).await.unwrap();
    let into_d = OfferingRef { capacity_type: "reserved".into(), reservation: d.reservation.clone(), price: d.price, ..offering("on-demand", "c5.large", "us-east-1c") };
    match aws.launch(&request("general-res02", vec![into_d])).await {
        Err(CloudError::InsufficientCapacity { message, .. }) => assert!(message.contains("ReservationCapacityExceeded"), "{message}"),
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    assert!(!reserved(&aws.catalog().await.unwrap(), "cr-0ddd").available);
}
