//! What the controller end-to-end tests (`tests/e2e_controller.rs`, `tests/e2e_faults.rs`) set up alike:
//! logging, the AWS provider's options against moto, the controller's short timings, and a client
//! acting as the Helm chart's ServiceAccount. One copy, so a setting the controller comes to require
//! (as the service CIDR did) reaches every suite.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, PostParams};
use stowage_aws::retry::RetryPolicy;
use stowage_aws::{AwsOptions, ClusterInfo};
use stowage_controller::Config;
use stowage_controller::leader::LeaderConfig;
use stowage_controller::registration::Timeouts;
use stowage_decide::batch::BatchConfig;
use stowage_e2e::{ControlPlane, Probe, poll_until};
use stowage_input::api::NodeClaim;

const POLL: Duration = Duration::from_millis(250);

/// Logs `stowage=info` (or `RUST_LOG`) into the test's output, or with `to` into that file (created
/// afresh): a long run's log would bury the failure message, and a CI report keeps only the head and
/// the tail of a failed test's output.
pub fn init_tracing(to: Option<&std::path::Path>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("stowage=info"));
    let _ = match to {
        None => tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init(),
        Some(path) => {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
            tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(std::sync::Mutex::new(file)).try_init()
        }
    };
}

pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

pub fn aws_options() -> AwsOptions {
    let mut o = AwsOptions {
        cluster: ClusterInfo { endpoint: "https://127.0.0.1:6443".into(), ca_bundle: "Q0EK".into(), service_cidr: Some("10.100.0.0/16".into()), cluster_dns: vec![] },
        retry: RetryPolicy { max_attempts: 3, base_delay: Duration::from_millis(50), max_delay: Duration::from_millis(200) },
        ..Default::default()
    };
    // moto preloads plain Amazon Linux 2023 images, no EKS-optimised ones.
    o.alias.plain_al2023_fallback = true;
    // moto's CreateFleet ignores the launch template's security groups: without this every node
    // would be SecurityGroupDrift (the one test of that drift turns it back on, with on-demand nodes).
    o.security_group_facts = false;
    o
}

/// Short timings so a scenario takes seconds, not minutes; `metrics_addr` `None` serves no metrics
/// endpoint (the registry is still read through `Controller::metrics`).
pub fn controller_config(identity: &str, metrics_addr: Option<std::net::SocketAddr>) -> Config {
    Config {
        batch: BatchConfig { idle: Duration::from_millis(500), max: Duration::from_secs(5) },
        timeouts: Timeouts { launch: Duration::from_secs(60), registration: Duration::from_secs(60) },
        gc_interval: Duration::from_secs(1),
        gc_grace: Duration::from_secs(8),
        disruption_interval: Duration::from_millis(500),
        consolidation_validation: Duration::from_secs(1),
        replan_interval: Duration::from_secs(5),
        nomination_ttl: Duration::from_secs(10),
        leader: Some(LeaderConfig {
            namespace: "kube-system".into(),
            name: "stowage".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
        }),
        metrics_addr,
        shutdown_grace: Duration::from_secs(10),
        identity: identity.into(),
        ..Default::default()
    }
}

/// A client acting as the ServiceAccount the Helm chart creates, with exactly the chart's RBAC rules
/// (`charts/stowage/files/*.yaml`: a verb missing there fails the tests), once the API server enforces
/// them. Creating the objects again (a second controller in one test) is not an error.
pub async fn chart_rbac_client(cp: &ControlPlane, admin: &kube::Client) -> kube::Client {
    let rules = |f: &str| -> Vec<PolicyRule> { serde_saphyr::from_str(&std::fs::read_to_string(repo(f)).unwrap()).unwrap() };
    let meta = |ns: Option<&str>| kube::api::ObjectMeta { name: Some("stowage".into()), namespace: ns.map(str::to_string), ..Default::default() };
    let subject = Subject { kind: "ServiceAccount".into(), name: "stowage".into(), namespace: Some("kube-system".into()), ..Default::default() };
    let role_ref = |kind: &str| RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: kind.into(), name: "stowage".into() };
    let pp = PostParams::default();
    let ignore_exists = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        other => other.unwrap(),
    };
    let sa = ServiceAccount { metadata: meta(Some("kube-system")), ..Default::default() };
    ignore_exists(Api::<ServiceAccount>::namespaced(admin.clone(), "kube-system").create(&pp, &sa).await.map(|_| ()));
    let cr = ClusterRole { metadata: meta(None), rules: Some(rules("charts/stowage/files/clusterrole-rules.yaml")), ..Default::default() };
    ignore_exists(Api::<ClusterRole>::all(admin.clone()).create(&pp, &cr).await.map(|_| ()));
    let crb = ClusterRoleBinding { metadata: meta(None), role_ref: role_ref("ClusterRole"), subjects: Some(vec![subject.clone()]) };
    ignore_exists(Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &crb).await.map(|_| ()));
    let role = Role { metadata: meta(Some("kube-system")), rules: Some(rules("charts/stowage/files/role-rules.yaml")) };
    ignore_exists(Api::<Role>::namespaced(admin.clone(), "kube-system").create(&pp, &role).await.map(|_| ()));
    let rb = RoleBinding { metadata: meta(Some("kube-system")), role_ref: role_ref("Role"), subjects: Some(vec![subject]) };
    ignore_exists(Api::<RoleBinding>::namespaced(admin.clone(), "kube-system").create(&pp, &rb).await.map(|_| ()));

    let kc = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    config.auth_info.impersonate = Some("system:serviceaccount:kube-system:stowage".into());
    config.auth_info.impersonate_groups = Some(vec!["system:serviceaccounts".into(), "system:serviceaccounts:kube-system".into(), "system:authenticated".into()]);
    let client = kube::Client::try_from(config).unwrap();
    // The API server's RBAC authorizer learns new bindings from its own watch: until it has, the
    // ServiceAccount is refused (403), and the controller would count that as an error of its own.
    // Wait until both the Role (the Lease) and the ClusterRole (NodeClaims) are in force.
    let (leases, claims) = (Api::<Lease>::namespaced(client.clone(), "kube-system"), Api::<NodeClaim>::all(client.clone()));
    let r = poll_until("the chart's RBAC rules in force", Duration::from_secs(30), POLL, || async {
        let lease = leases.get_opt("stowage").await.map(|_| ());
        let claim = claims.list(&ListParams::default().limit(1)).await.map(|_| ());
        Ok(match lease.and(claim) {
            Ok(()) => Probe::Done(()),
            Err(e) => Probe::Waiting(e.to_string()),
        })
    })
    .await;
    if let Err(e) = r {
        panic!("the ServiceAccount never got the chart's RBAC rules: {e:?}");
    }
    client
}
