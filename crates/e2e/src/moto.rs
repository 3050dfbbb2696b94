//! The moto EC2 emulator per test, with a discoverable network (VPC, subnets, security group) and the
//! node IAM role EC2NodeClasses name ([`NODE_ROLE`]). moto serves IAM and EKS on the same port.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_ec2::types::{Filter, Instance, InstanceType, Tag};

use super::process::{DirLock, PortBlock, Watchdog, port_taken, run_script};
use super::{Error, Result, check_name, e2e_root, repo_root};

pub const REGION: &str = "us-east-1";
/// The zones that get a subnet.
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// The tag EC2NodeClass `subnetSelectorTerms` / `securityGroupSelectorTerms` select on.
pub const DISCOVERY_TAG_KEY: &str = "karpenter.sh/discovery";
pub const DISCOVERY_TAG_VALUE: &str = "demo";
/// The IAM role `spec.role` of the test NodeClasses names (created at start; the provider makes an
/// instance profile for it).
pub const NODE_ROLE: &str = "KarpenterNodeRole-demo";
const ACCESS_KEY: &str = "testing";
const SECRET_KEY: &str = "testing";

/// What [`Moto::start`] created.
#[derive(Clone, Debug)]
pub struct Network {
    pub vpc_id: String,
    /// zone → subnet id, one per entry of [`ZONES`] (10.0.1.0/24, 10.0.2.0/24, 10.0.3.0/24).
    pub subnets: BTreeMap<String, String>,
    pub security_group_id: String,
    /// An x86_64 Amazon Linux 2023 AMI from moto's preloaded set.
    pub ami_id: String,
}

/// A running moto server. Stopped on [`Moto::stop`] or drop (and by its watchdog if the test dies).
pub struct Moto {
    name: String,
    port: u16,
    dir: PathBuf,
    ec2: aws_sdk_ec2::Client,
    network: Network,
    started_in: Duration,
    watchdog: Watchdog,
    _ports: PortBlock,
    _lock: DirLock,
}

impl Moto {
    /// Creates the venv if needed, starts moto on a free port with its run dir in `target/e2e/<name>/moto`,
    /// and creates the VPC, one subnet per zone in [`ZONES`] and a security group, all tagged
    /// `karpenter.sh/discovery: demo`.
    pub async fn start(name: &str) -> Result<Self> {
        check_name(name)?;
        let t0 = Instant::now();
        let top = e2e_root().join(name);
        let dir = top.join("moto");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock = DirLock::acquire(top.join("moto.lock")).await?;
        let script = repo_root().join("tests").join("moto").join("moto.sh");
        let log = top.join("moto-scripts.log");

        let mut skip = Vec::new();
        let (watchdog, ports) = loop {
            let ports = PortBlock::allocate(&format!("moto/{name}"), 1, &skip)?;
            let envs = vec![("MOTO_PORT".to_string(), ports.base.to_string()), ("STOWAGE_MOTO_DIR".to_string(), dir.display().to_string())];
            let mut watchdog = Watchdog::spawn(&script, &envs, &log, &format!("moto {name}"))?;
            match run_script(&script, "start", &envs, &log).await {
                Ok(_) => break (watchdog, ports),
                Err(e) if port_taken(&e) && skip.len() < 3 => {
                    watchdog.stop().await?;
                    skip.push(ports.base);
                }
                Err(e) => return Err(e),
            }
        };
        let port = ports.base;
        let ec2 = aws_sdk_ec2::Client::from_conf(ec2_config(&endpoint(port)));
        let network = create_network(&ec2).await?;
        create_node_role(&aws_sdk_iam::Client::from_conf(aws_sdk_iam::config::Builder::from(&sdk_config(port)).build())).await?;
        let started_in = t0.elapsed();
        eprintln!("stowage e2e: moto {name} up in {:.1}s ({}, vpc {}, run dir {})", started_in.as_secs_f64(), endpoint(port), network.vpc_id, dir.display());
        Ok(Moto { name: name.to_string(), port, dir, ec2, network, started_in, watchdog, _ports: ports, _lock: lock })
    }

    /// An EC2 client for this server: static dummy credentials, us-east-1, one attempt per call.
    pub fn ec2(&self) -> aws_sdk_ec2::Client {
        self.ec2.clone()
    }

    /// The same settings as an `SdkConfig`, for code that builds its own clients from one.
    pub fn sdk_config(&self) -> aws_config::SdkConfig {
        sdk_config(self.port)
    }

    /// [`Moto::sdk_config`] in another region (moto serves every region on the same endpoint; the
    /// network [`Moto::start`] prepared is in us-east-1 only).
    pub fn sdk_config_in(&self, region: &str) -> aws_config::SdkConfig {
        self.sdk_config().into_builder().region(aws_config::Region::new(region.to_string())).build()
    }

    /// An IAM client for this server (same settings as [`Moto::ec2`]).
    pub fn iam(&self) -> aws_sdk_iam::Client {
        aws_sdk_iam::Client::from_conf(aws_sdk_iam::config::Builder::from(&self.sdk_config()).build())
    }

    /// An EKS client for this server (same settings as [`Moto::ec2`]).
    pub fn eks(&self) -> aws_sdk_eks::Client {
        aws_sdk_eks::Client::from_conf(aws_sdk_eks::config::Builder::from(&self.sdk_config()).build())
    }

    /// An SQS client for this server (same settings as [`Moto::ec2`]): moto serves SQS on the same
    /// endpoint.
    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::from_conf(aws_sdk_sqs::config::Builder::from(&self.sdk_config()).build())
    }

    /// Creates an SQS queue (the interruption queue) and returns its URL.
    pub async fn create_queue(&self, name: &str) -> Result<String> {
        let out = self
            .sqs()
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| Error::Aws { what: format!("sqs CreateQueue {name}"), message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string() })?;
        out.queue_url.ok_or_else(|| Error::Aws { what: format!("sqs CreateQueue {name}"), message: "no queue URL in the answer".into() })
    }

    /// Sends one message body to a queue.
    pub async fn send_message(&self, queue_url: &str, body: &str) -> Result<()> {
        self.sqs()
            .send_message()
            .queue_url(queue_url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| Error::Aws { what: "sqs SendMessage".into(), message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string() })?;
        Ok(())
    }

    /// How many messages the queue holds (visible and in flight): `ApproximateNumberOfMessages` +
    /// `ApproximateNumberOfMessagesNotVisible`.
    pub async fn queue_depth(&self, queue_url: &str) -> Result<u64> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .sqs()
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| Error::Aws { what: "sqs GetQueueAttributes".into(), message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string() })?;
        let attrs = out.attributes.unwrap_or_default();
        let n = |k: A| attrs.get(&k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        Ok(n(A::ApproximateNumberOfMessages) + n(A::ApproximateNumberOfMessagesNotVisible))
    }

    /// Creates an EKS cluster in moto (in the test network), with `service_cidr` as its
    /// `kubernetesNetworkConfig.serviceIpv4Cidr` when given (moto's default otherwise: 172.20.0.0/16).
    pub async fn create_eks_cluster(&self, name: &str, version: &str, service_cidr: Option<&str>) -> Result<()> {
        let vpc = aws_sdk_eks::types::VpcConfigRequest::builder().set_subnet_ids(Some(self.network.subnets.values().cloned().collect())).security_group_ids(&self.network.security_group_id).build();
        let net = service_cidr.map(|c| aws_sdk_eks::types::KubernetesNetworkConfigRequest::builder().service_ipv4_cidr(c).build());
        self.eks()
            .create_cluster()
            .name(name)
            .version(version)
            .role_arn(format!("arn:aws:iam::123456789012:role/{NODE_ROLE}"))
            .resources_vpc_config(vpc)
            .set_kubernetes_network_config(net)
            .send()
            .await
            .map_err(|e| Error::aws(format!("eks:CreateCluster {name}"), e))?;
        Ok(())
    }

    /// [`Moto::sdk_config`] whose clients name themselves `app/<app>` in their user agent, so that
    /// [`crate::RandomFaults::from_app`] can aim faults at them alone. `app`: letters, digits, `-`, `_`.
    pub fn sdk_config_as(&self, app: &str) -> Result<aws_config::SdkConfig> {
        let name = aws_config::AppName::new(app.to_string()).map_err(|e| Error::Invalid(format!("app name {app:?}: {e}")))?;
        Ok(self.sdk_config().into_builder().app_name(name).build())
    }

    /// Environment for a child process that uses the default AWS credential and endpoint chain.
    pub fn env_vars(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint_url()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_DEFAULT_REGION", REGION.to_string()),
            ("AWS_MAX_ATTEMPTS", "1".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    pub fn endpoint_url(&self) -> String {
        endpoint(self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    /// The run dir (`moto.log`, `moto.pid`).
    pub fn run_dir(&self) -> &Path {
        &self.dir
    }

    /// Wall time of [`Moto::start`] including the network setup.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Launches one instance of `instance_type` in the subnet of `zone` with the network's AMI and security
    /// group (RunInstances, as a test would without a controller). moto reports it `running` at once.
    pub async fn run_instance(&self, zone: &str, instance_type: &str) -> Result<Instance> {
        let subnet = self.network.subnets.get(zone).ok_or_else(|| Error::Invalid(format!("no subnet in zone {zone}; moto's subnets are in {ZONES:?}")))?;
        let what = format!("RunInstances {instance_type} in {zone}");
        let out = self
            .ec2
            .run_instances()
            .image_id(&self.network.ami_id)
            .instance_type(InstanceType::from(instance_type))
            .subnet_id(subnet)
            .security_group_ids(&self.network.security_group_id)
            .min_count(1)
            .max_count(1)
            .send()
            .await
            .map_err(|e| Error::aws(what.clone(), e))?;
        out.instances.unwrap_or_default().into_iter().next().ok_or_else(|| Error::Invalid(format!("{what}: no instance returned")))
    }

    /// A copy of the preloaded image `source` named `name` (same architecture), e.g. to stand in for an
    /// EKS-optimized or Bottlerocket image moto does not have. Returns its id.
    pub async fn copy_image(&self, source: &str, name: &str) -> Result<String> {
        let out = self.ec2.copy_image().source_image_id(source).source_region(REGION).name(name).send().await.map_err(|e| Error::aws(format!("CopyImage {source} as {name}"), e))?;
        out.image_id.ok_or_else(|| Error::Invalid(format!("CopyImage {source} as {name}: no ImageId returned")))
    }

    /// The newest non-minimal preloaded Amazon Linux 2023 image of an EC2 architecture (`x86_64`, `arm64`).
    pub async fn plain_al2023_image(&self, arch: &str) -> Result<String> {
        newest_plain_al2023(&self.ec2, arch).await
    }

    pub async fn terminate_instance(&self, instance_id: &str) -> Result<()> {
        self.ec2.terminate_instances().instance_ids(instance_id).send().await.map_err(|e| Error::aws(format!("TerminateInstances {instance_id}"), e))?;
        Ok(())
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) -> Result<()> {
        self.watchdog.stop().await
    }
}

fn endpoint(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

fn credentials() -> Credentials {
    Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "stowage-e2e")
}

fn ec2_config(endpoint: &str) -> aws_sdk_ec2::Config {
    aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(credentials())
        // No silent retries: a test sees every error moto returns.
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .build()
}

fn sdk_config(port: u16) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(endpoint(port))
        .credentials_provider(SharedCredentialsProvider::new(credentials()))
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .build()
}

/// The node role ([`NODE_ROLE`]), assumable by EC2, as the Karpenter getting-started guide creates it.
async fn create_node_role(iam: &aws_sdk_iam::Client) -> Result<()> {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    iam.create_role().role_name(NODE_ROLE).assume_role_policy_document(trust).send().await.map_err(|e| Error::aws(format!("iam:CreateRole {NODE_ROLE}"), e))?;
    Ok(())
}

fn discovery_tag() -> Tag {
    Tag::builder().key(DISCOVERY_TAG_KEY).value(DISCOVERY_TAG_VALUE).build()
}

async fn create_network(ec2: &aws_sdk_ec2::Client) -> Result<Network> {
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.map_err(|e| Error::aws("CreateVpc", e))?;
    let vpc_id = vpc.vpc.and_then(|v| v.vpc_id).ok_or_else(|| Error::Invalid("CreateVpc returned no VpcId".into()))?;
    let mut subnets = BTreeMap::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let out = ec2.create_subnet().vpc_id(&vpc_id).cidr_block(format!("10.0.{}.0/24", i + 1)).availability_zone(*zone).send().await.map_err(|e| Error::aws(format!("CreateSubnet in {zone}"), e))?;
        let id = out.subnet.and_then(|s| s.subnet_id).ok_or_else(|| Error::Invalid(format!("CreateSubnet in {zone} returned no SubnetId")))?;
        subnets.insert(zone.to_string(), id);
    }
    let sg = ec2.create_security_group().group_name("stowage-e2e").description("stowage e2e nodes").vpc_id(&vpc_id).send().await.map_err(|e| Error::aws("CreateSecurityGroup", e))?;
    let security_group_id = sg.group_id.ok_or_else(|| Error::Invalid("CreateSecurityGroup returned no GroupId".into()))?;

    let mut tag = ec2.create_tags().tags(discovery_tag()).tags(Tag::builder().key("Name").value("stowage-e2e").build());
    for id in std::iter::once(&vpc_id).chain(subnets.values()).chain(std::iter::once(&security_group_id)) {
        tag = tag.resources(id);
    }
    tag.send().await.map_err(|e| Error::aws("CreateTags on the VPC, subnets and security group", e))?;

    let ami_id = newest_plain_al2023(ec2, "x86_64").await?;
    Ok(Network { vpc_id, subnets, security_group_id, ami_id })
}

async fn newest_plain_al2023(ec2: &aws_sdk_ec2::Client, arch: &str) -> Result<String> {
    let pattern = format!("al2023-ami-2023.*-{arch}");
    let images = ec2.describe_images().owners("amazon").filters(Filter::builder().name("name").values(&pattern).build()).send().await.map_err(|e| Error::aws("DescribeImages", e))?;
    let mut candidates: Vec<(String, String)> = images.images.unwrap_or_default().into_iter().filter_map(|i| Some((i.name?, i.image_id?))).filter(|(name, _)| !name.contains("minimal")).collect();
    candidates.sort();
    candidates.pop().map(|(_, id)| id).ok_or_else(|| Error::Invalid(format!("moto has no Amazon Linux 2023 {arch} image ({pattern})")))
}
