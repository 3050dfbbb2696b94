//! `stowage controller` and `stowage record`: flags, logging, the Kubernetes client and the AWS provider.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use stowage_controller::Config;
use stowage_controller::leader::LeaderConfig;
use stowage_controller::provisioner::PlannerSettings;
use stowage_controller::registration::Timeouts;
use stowage_decide::batch::BatchConfig;

use super::{SolveArgs, parse_duration};
use stowage_aws::cluster::ClusterFlags;
use stowage_aws::{AwsOptions, AwsProvider};
use stowage_core::weights::{MinValuesPolicy, PreferencePolicy, Weights};
use stowage_decide::cloud::CloudProvider;

/// How to reach the cluster and the cloud (shared by both commands).
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Kubeconfig file; default: in-cluster config or $KUBECONFIG / ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster name: instances are tagged `kubernetes.io/cluster/<name>=owned` and only those are
    /// managed. AWS credentials and region come from the usual environment (AWS_REGION, ...).
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// API server URL written into node user data (default: from eks:DescribeCluster).
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// Base64 PEM of the cluster CA, for node user data (default: from eks:DescribeCluster).
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "")]
    pub cluster_ca_bundle: String,
    /// Service CIDR, for node user data (default: from eks:DescribeCluster; the controller refuses to
    /// start when neither gives it, since nodes cannot join without it).
    #[arg(long)]
    pub service_cidr: Option<String>,
    /// Kubernetes minor version (e.g. 1.31) whose public SSM AMI parameters `al2023@`, `al2@` and
    /// `bottlerocket@` aliases read (default: from eks:DescribeCluster).
    #[arg(long)]
    pub kubernetes_version: Option<String>,
    /// Cluster DNS addresses (comma separated), for node user data.
    #[arg(long, value_delimiter = ',')]
    pub cluster_dns: Vec<String>,
    /// Karpenter's isolatedVPC: the AWS Price List API is not reachable, so on-demand prices stay the
    /// embedded (us-east-1) table's instead of the region's.
    #[arg(long, env = "ISOLATED_VPC", default_value_t = false, action = clap::ArgAction::Set)]
    pub isolated_vpc: bool,
    /// Resolve `al2023@...` AMI aliases whose SSM parameters give no image to plain Amazon Linux 2023
    /// images (EC2 emulators only).
    #[arg(long, hide = true)]
    pub plain_al2023_fallback: bool,
}

#[derive(clap::Args, Clone, Debug)]
pub struct ControllerArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Close a batch when no new pod has become pending for this long (Karpenter's flag; `--batch-idle`
    /// is kept as an alias).
    #[arg(long = "batch-idle-duration", alias = "batch-idle", env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = parse_duration)]
    pub batch_idle: Duration,
    /// Close a batch at the latest this long after it opened (Karpenter's flag; alias `--batch-max`).
    #[arg(long = "batch-max-duration", alias = "batch-max", env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = parse_duration)]
    pub batch_max: Duration,
    #[command(flatten)]
    pub solve: SolveArgs,
    /// Cost weights (stowage.dev/weights/v1); default: models/weights/default.yaml.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Karpenter's minValuesPolicy: Strict (a node whose instance types cannot keep a NodePool's
    /// minValues is not created) or BestEffort (minValues relaxed, the NodeClaim annotated). Default:
    /// $MIN_VALUES_POLICY, else the weights file's `minValuesPolicy` (Strict).
    #[arg(long, env = "MIN_VALUES_POLICY", value_parser = parse_min_values_policy)]
    pub min_values_policy: Option<MinValuesPolicy>,
    /// Karpenter's preferencePolicy: Respect (preferences planned as requirements, relaxed in
    /// Karpenter's order only while a pod cannot be placed), Ignore, or stowage's Priced (the weights'
    /// soft terms). Default: $PREFERENCE_POLICY, else the weights file's `preferencePolicy` (Respect).
    #[arg(long, env = "PREFERENCE_POLICY", value_parser = super::parse_preference_policy)]
    pub preference_policy: Option<PreferencePolicy>,
    /// Most instance types one NodeClaim allows (the plan's choice and fallbacks for capacity errors).
    #[arg(long, default_value_t = 20)]
    pub max_instance_types: usize,
    /// Delete a NodeClaim not launched within this long.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub launch_timeout: Duration,
    /// Delete a NodeClaim whose Node has not registered this long after launch.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub registration_timeout: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub gc_interval: Duration,
    /// Age before an instance no NodeClaim tracks is terminated.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub gc_grace: Duration,
    /// Replace a spot node by a cheaper spot node when consolidating (Karpenter's
    /// SpotToSpotConsolidation feature gate; off: spot nodes are only deleted or replaced by on-demand).
    /// Default: the `--feature-gates` value, else off.
    #[arg(long, action = clap::ArgAction::Set)]
    pub spot_to_spot_consolidation: Option<bool>,
    /// Karpenter's feature gates, in its format (`SpotToSpotConsolidation=true,NodeRepair=false`).
    /// SpotToSpotConsolidation is implemented and ReservedCapacity accepted (capacity reservations are
    /// not planned yet; an EC2NodeClass selecting them says so); NodeRepair, NodeOverlay,
    /// StaticCapacity and CapacityBuffer are not implemented, and turning one on is refused. Unknown
    /// names are logged and ignored, as Karpenter ignores them.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    /// How long a consolidation decision waits before it is decided again and, if unchanged, carried out;
    /// an empty node likewise stays empty this long past consolidateAfter before it goes (Karpenter: 15 s).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub consolidation_validation: Duration,
    /// Elect a leader through a Lease (run several replicas safely).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the Lease; default: $POD_NAMESPACE, else kube-system.
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// This replica's identity (the Pod name); default: $POD_NAME, else the host name.
    #[arg(long)]
    pub identity: Option<String>,
    /// The SQS queue of interruption events (spot interruption warnings, rebalance recommendations,
    /// scheduled changes, instance state changes; Karpenter's `interruptionQueue`), by name or URL.
    /// Default: $INTERRUPTION_QUEUE; unset: no interruption handling.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// Where /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    #[arg(long, value_enum, default_value = "json")]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(clap::Args, Clone, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Workload file to write (a v1 List); `-` for standard output.
    #[arg(short, long, default_value = "-")]
    pub out: PathBuf,
    /// Write the catalog the controller would plan with here (stowage.dev/catalog/v1).
    #[arg(long)]
    pub catalog_out: Option<PathBuf>,
    /// Plan with this catalog file instead of asking the cloud (without --cluster-name: the embedded one).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second initialisation (tests) is harmless.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

async fn kube_client(path: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = match path {
        Some(p) => {
            let kc = Kubeconfig::read_from(p).map_err(|e| format!("{}: {e}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| format!("no Kubernetes configuration found ({e}); pass --kubeconfig"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("building the Kubernetes client: {e}"))
}

/// The AWS provider. `launches`: the controller, which refuses to start without the cluster facts
/// nodes need to join (the service CIDR above all); `stowage record` only reads the catalog and goes on
/// with the flags when EKS cannot be asked.
async fn aws_provider(c: &ConnectArgs, launches: bool) -> Result<AwsProvider, String> {
    let cluster = c.cluster_name.clone().ok_or("--cluster-name (or CLUSTER_NAME) is required: it scopes the instances stowage manages")?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let flags = ClusterFlags {
        endpoint: Some(c.cluster_endpoint.clone()),
        ca_bundle: Some(c.cluster_ca_bundle.clone()),
        service_cidr: c.service_cidr.clone(),
        cluster_dns: c.cluster_dns.clone(),
        kubernetes_version: c.kubernetes_version.clone(),
    };
    let mut opts = AwsOptions::default();
    match stowage_aws::cluster::discover(&sdk, &cluster, &flags, &opts.retry).await {
        Ok(found) => {
            tracing::info!(cluster = %cluster, endpoint = %found.info.endpoint, service_cidr = ?found.info.service_cidr, ip_family = %found.ip_family, kubernetes_version = ?found.kubernetes_version, "cluster facts for node user data");
            opts.cluster = found.info;
            opts.alias.kubernetes_version = found.kubernetes_version;
        }
        Err(e) if launches => return Err(e.to_string()),
        Err(e) => tracing::debug!(error = %e, "no cluster facts; not needed to read the catalog"),
    }
    opts.alias.plain_al2023_fallback = c.plain_al2023_fallback;
    opts.isolated_vpc = c.isolated_vpc;
    AwsProvider::new(&sdk, cluster, opts).map_err(|e| e.to_string())
}

/// The interruption queue, when `--interruption-queue` or $INTERRUPTION_QUEUE names one.
async fn interruption_queue(a: &ControllerArgs) -> Result<Option<stowage_controller::interruption::QueueHandle>, String> {
    let Some(name) = a.interruption_queue.clone().filter(|q| !q.trim().is_empty()) else {
        return Ok(None);
    };
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let queue = stowage_aws::sqs::SqsQueue::new(&sdk, name, stowage_aws::retry::RetryPolicy::default()).map_err(|e| e.to_string())?;
    Ok(Some(stowage_controller::interruption::QueueHandle(Arc::new(queue))))
}

/// Worker threads get 8 MiB of stack rather than std's 2 MiB: the controller's futures (reconcilers
/// awaiting cloud and API calls while holding a batch's plan) are large, and a debug build's more so.
const WORKER_STACK: usize = 8 << 20;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(WORKER_STACK).build().map_err(|e| format!("starting the async runtime: {e}"))
}

/// Karpenter v1.14's feature gates (`--feature-gates` / $FEATURE_GATES): `Name=bool` pairs separated
/// by commas, booleans as Go's strconv.ParseBool reads them, defaults as Karpenter's (every gate
/// stowage acts on is off by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    pub spot_to_spot_consolidation: bool,
    /// Names given that Karpenter v1.14 does not have (logged; Karpenter ignores them too).
    pub unknown: Vec<String>,
}

impl FeatureGates {
    pub const KNOWN: [&'static str; 6] = ["NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity", "CapacityBuffer"];
    /// Gates stowage does not implement: on, they would change what Karpenter does in ways stowage
    /// would silently not, so turning one on is refused.
    const UNIMPLEMENTED: [&'static str; 4] = ["NodeRepair", "NodeOverlay", "StaticCapacity", "CapacityBuffer"];

    pub fn parse(s: &str) -> Result<FeatureGates, String> {
        let mut g = FeatureGates { spot_to_spot_consolidation: false, unknown: Vec::new() };
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').ok_or_else(|| format!("--feature-gates: {pair:?} is not Name=true|false"))?;
            let (name, value) = (name.trim(), value.trim());
            let on = match value {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return Err(format!("--feature-gates: {name}={value:?}: expected true or false")),
            };
            match name {
                "SpotToSpotConsolidation" => g.spot_to_spot_consolidation = on,
                // Either value is accepted: stowage plans no capacity reservations yet, and an EC2NodeClass
                // that selects some is told so on its own status.
                "ReservedCapacity" => {}
                n if Self::UNIMPLEMENTED.contains(&n) => {
                    if on {
                        return Err(format!("--feature-gates: {n}=true: stowage does not implement Karpenter's {n} feature; set it to false (or leave it out) to run stowage"));
                    }
                }
                n => g.unknown.push(n.to_string()),
            }
        }
        Ok(g)
    }
}

fn parse_min_values_policy(s: &str) -> Result<MinValuesPolicy, String> {
    MinValuesPolicy::parse(s).ok_or_else(|| format!("{s:?}: expected Strict or BestEffort"))
}

/// The controller's settings from its flags.
pub fn config(a: &ControllerArgs) -> Result<Config, String> {
    let mut weights = match &a.weights {
        Some(p) => stowage_input::weights::load(p).map_err(|e| e.to_string())?,
        None => Weights::default(),
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(p) = a.min_values_policy {
        weights.min_values_policy = p;
    }
    if let Some(p) = a.preference_policy {
        weights.preference_policy = p;
    }
    let gates = FeatureGates::parse(&a.feature_gates)?;
    for name in &gates.unknown {
        tracing::warn!(gate = %name, "unknown feature gate ignored (stowage knows Karpenter v1.14's: {})", FeatureGates::KNOWN.join(", "));
    }
    let identity = a.identity.clone().or_else(|| env("POD_NAME")).or_else(|| env("HOSTNAME")).unwrap_or_else(|| format!("stowage-{}", std::process::id()));
    let namespace = a.leader_election_namespace.clone().or_else(|| env("POD_NAMESPACE")).unwrap_or_else(|| "kube-system".into());
    Ok(Config {
        batch: BatchConfig { idle: a.batch_idle, max: a.batch_max },
        planner: planner_settings(&a.solve, a.max_instance_types),
        weights,
        timeouts: Timeouts { launch: a.launch_timeout, registration: a.registration_timeout },
        gc_interval: a.gc_interval,
        gc_grace: a.gc_grace,
        consolidation: stowage_decide::consolidation::Settings { spot_to_spot: a.spot_to_spot_consolidation.unwrap_or(gates.spot_to_spot_consolidation), ..Default::default() },
        consolidation_validation: a.consolidation_validation,
        leader: a.leader_elect.then(|| LeaderConfig::new(namespace, identity.clone())),
        metrics_addr: Some(a.metrics_addr),
        identity,
        ..Default::default()
    })
}

pub(crate) fn planner_settings(s: &SolveArgs, max_instance_types: usize) -> PlannerSettings {
    PlannerSettings { planner: s.planner(), max_instance_types }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
        }
        // Without signal handlers, only Ctrl-C through tokio's portable handler.
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `stowage controller`.
pub fn controller(args: ControllerArgs) -> ExitCode {
    init_logging(args.log_format);
    let r = (|| -> Result<(), String> {
        let config = config(&args)?;
        let rt = runtime()?;
        rt.block_on(async {
            let client = kube_client(args.connect.kubeconfig.as_ref()).await?;
            let cloud = Arc::new(aws_provider(&args.connect, true).await?);
            let mut config = config;
            config.interruption_queue = interruption_queue(&args).await?;
            stowage_controller::run(client, cloud, config, shutdown_signal()).await.map_err(|e| e.to_string())
        })
    })();
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the controller cannot run");
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `stowage record`.
pub fn record(args: RecordArgs) -> ExitCode {
    let r = (|| -> Result<String, String> {
        let rt = runtime()?;
        rt.block_on(async {
            let client = kube_client(args.connect.kubeconfig.as_ref()).await?;
            let state = stowage_controller::record::cluster_state(&client).await.map_err(|e| e.to_string())?;
            let catalog = match (&args.catalog, &args.connect.cluster_name) {
                (Some(p), _) => stowage_input::catalog::load(p).map_err(|e| e.to_string())?,
                (None, Some(_)) => {
                    let cloud = aws_provider(&args.connect, false).await?;
                    // The catalog's zones are those of the resolved NodeClasses, as in the controller.
                    for nc in state.nodeclasses.iter() {
                        if let Err(e) = cloud.resolve_nodeclass(nc).await {
                            eprintln!("warning: EC2NodeClass {}: {e}", nc.metadata.name.as_deref().unwrap_or(""));
                        }
                    }
                    cloud.catalog().await.map_err(|e| e.to_string())?
                }
                (None, None) => stowage_input::catalog::default_catalog().clone(),
            };
            let rec = stowage_controller::record::recording(&state, &catalog).map_err(|e| e.to_string())?;
            for x in &rec.excluded {
                eprintln!("warning: left out: {x}");
            }
            for x in &rec.unsupported {
                eprintln!("warning: {}: {x}", args.out.display());
            }
            let text = serde_json::to_string_pretty(&rec.workload).map_err(|e| e.to_string())?;
            if args.out.as_os_str() == "-" {
                super::out::outln!("{text}")?;
            } else {
                stowage_input::output::write_atomic(&args.out, (text + "\n").as_bytes())?;
            }
            if let Some(p) = &args.catalog_out {
                let c = stowage_input::catalog::generate::to_json(&rec.catalog);
                stowage_input::output::write_atomic(p, c.as_bytes())?;
            }
            Ok(format!("recorded {} pending pod(s)", rec.pending))
        })
    })();
    super::report(r)
}
