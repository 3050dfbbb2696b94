//! The AWS provider: [`CloudProvider`] on EC2 through aws-sdk-ec2, modelled on Karpenter's AWS provider
//! (`../shared/docs/aws.md`).
//!
//! ```no_run
//! # async fn demo(nodeclass: stowage_input::api::EC2NodeClass, req: stowage_decide::cloud::LaunchRequest) -> Result<(), stowage_decide::cloud::CloudError> {
//! use stowage_decide::cloud::CloudProvider;
//! use stowage_aws::{AwsOptions, AwsProvider};
//! let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
//! // Endpoint, CA, service CIDR and version from eks:DescribeCluster; flags would override.
//! let flags = stowage_aws::cluster::ClusterFlags::default();
//! let cluster = stowage_aws::cluster::discover(&sdk, "my-cluster", &flags, &Default::default()).await.map_err(|e| stowage_decide::cloud::CloudError::Fatal(e.to_string()))?;
//! let mut options = AwsOptions { cluster: cluster.info, ..Default::default() };
//! options.alias.kubernetes_version = cluster.kubernetes_version;
//! let aws = AwsProvider::new(&sdk, "my-cluster", options)?;
//! let status = aws.resolve_nodeclass(&nodeclass).await?; // discovery; write it into the NodeClass status
//! let catalog = aws.catalog().await?;                     // types, offerings, prices, ICE applied
//! let instance = aws.launch(&req).await?;                 // CreateFleet instant
//! # Ok(()) }
//! ```
//!
//! # Behaviour
//!
//! - **NodeClasses** are registered with [`CloudProvider::resolve_nodeclass`], which runs discovery
//!   ([`discovery`]) and caches the result for `discovery_ttl` (1 min, as Karpenter). `launch` looks
//!   the NodeClass up by `LaunchRequest::nodeclass` and re-runs discovery when the cache is stale; a
//!   NodeClass never resolved, or whose selectors find nothing, gives `NodeClassNotReady` naming what
//!   is missing. When a refresh fails on an API error, the last good resolution is used.
//! - **`catalog()`** ([`instance_types`], [`pricing`]): types and offerings are fetched at most every
//!   12 h, spot prices every 12 h; zones are the union of the resolved NodeClasses' subnet zones (all
//!   zones EC2 offers types in, before any NodeClass is resolved). The ICE cache is applied on every
//!   call. If EC2 cannot be asked and nothing was fetched before, the embedded catalog is returned
//!   (provenance says OFFLINE) and EC2 is asked again after `offline_retry`.
//! - **`launch`**: looks for a live instance tagged with the NodeClaim first (returned as is); keeps
//!   the offerings of the first offering's capacity type, in the request's order, minus those in the
//!   ICE cache; per zone the subnet with the most free addresses; per instance type the first AMI
//!   whose requirements it satisfies (architecture; GPU / accelerator variant of an alias's images)
//!   and the maxPods of Karpenter's formula; one launch template per distinct content
//!   ([`launch_template`]); one CreateFleet ([`fleet`]). Capacity errors in the answer are put in the
//!   ICE cache ([`ice`]); zero instances and only capacity errors is `InsufficientCapacity` naming the
//!   offerings that failed. Offerings that cannot be launched with the NodeClass at all (no subnet in
//!   the zone, no AMI for the architecture) are cached the same way (reason `NoSubnetInZone` /
//!   `NoImageForArchitecture`), so a replan avoids them for 3 minutes instead of looping.
//! - **Capacity reservations** ([`capacity_reservations`]): resolved with the NodeClass (its
//!   `status.capacityReservations`); `catalog()` offers each as a `reserved` offering with the count it
//!   still takes; a reserved launch uses a launch template targeting the reservation and lowers the
//!   count; `ReservationCapacityExceeded` sets it to 0.
//! - **Instance profiles** ([`instance_profile`]): a NodeClass with `spec.role` gets an instance profile
//!   made, tagged and given the role during resolution (Karpenter's naming, path and tags); its name is
//!   `status.instanceProfile` and the launch templates' `IamInstanceProfile.Name`. `spec.instanceProfile`
//!   is used as is. `collect_nodeclass_resources` deletes managed profiles no NodeClass uses (at most
//!   every `profile_gc_interval`).
//! - **AMIs and user data** ([`discovery`], [`amifamily`], [`ssm`], [`userdata`]): aliases of the
//!   AL2023, AL2 and Bottlerocket families read the public SSM parameters for the cluster's
//!   Kubernetes version; `ssmParameter` terms read theirs; the user data is the family's (nodeadm
//!   `NodeConfig`, `bootstrap.sh`, Bottlerocket TOML, or Custom verbatim). Windows is refused.
//! - **Cluster facts** ([`cluster`]): endpoint, CA, service CIDR, IP family and Kubernetes version from
//!   `eks:DescribeCluster`, flags overriding; `launch` refuses (Fatal) when the options carry no service
//!   CIDR, since nodeadm would refuse the node's NodeConfig.
//! - **Retries**: throttled and transient EC2 errors are retried with backoff ([`retry`]); the SDK's
//!   own retries are turned off for this client so the bound is exact. Past the bound: `Throttled`.
//! - **Tags**: launch tags = `spec.tags` ∪ `LaunchRequest::tags` ∪ {`kubernetes.io/cluster/<c>=owned`,
//!   `karpenter.sh/nodepool`, `eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass`} (the last four
//!   win) on the instance, its volumes, the fleet and the launch template; the instance also gets
//!   `karpenter.sh/nodeclaim` at launch. Karpenter adds that tag only after registration (so that
//!   sibling requests can be batched); stowage does not batch, and the tag is what makes a retried
//!   launch find its instance when `ClientToken` cannot (moto ignores it).
//! - **Interruption queue** ([`sqs`]): [`sqs::SqsQueue`] is the `InterruptionQueue` seam on SQS, a
//!   separate object from the provider (the binary makes one only when `interruptionQueue` is set).
//!
//! # Every AWS call
//!
//! | call | where | parameters |
//! |---|---|---|
//! | `DescribeSubnets` | [`discovery`] | tag / tag-key / subnet-id filters per term; MaxResults 500 |
//! | `DescribeSecurityGroups` | [`discovery`] | tag / tag-key / group-id / group-name filters per term; MaxResults 500 |
//! | `DescribeImages` | [`discovery`] | image-id / name / tag filters, Owners, state=available; MaxResults 1000 |
//! | `DescribeCapacityReservations` | [`capacity_reservations`] | per `capacityReservationSelectorTerms` term: CapacityReservationIds, or tag / tag-key / owner-id / instance-match-criteria filters; state=active; MaxResults 1000 |
//! | `ssm:GetParameter` | [`ssm`] | the public AMI parameters of an alias ([`amifamily`]), `ssmParameter` terms; cached for the discovery TTL |
//! | `DescribeInstanceTypes` | [`instance_types`] | hvm, x86_64/arm64; MaxResults 100 |
//! | `DescribeInstanceTypeOfferings` | [`instance_types`] | LocationType availability-zone; MaxResults 1000 |
//! | `DescribeSpotPriceHistory` | [`pricing`] | Linux/UNIX (+ Amazon VPC), StartTime now; MaxResults 1000 |
//! | `DescribeLaunchTemplates` | [`launch_template`] | LaunchTemplateNames=[stowage/<hash>] |
//! | `CreateLaunchTemplate` | [`launch_template`] | name, data, launch-template tags |
//! | `CreateFleet` | [`fleet`] | instant, prioritized strategies, overrides with SubnetId/AZ/Priority, tags, ClientToken |
//! | `DescribeInstances` | [`instances`] | ownership tag filters + states (list); nodeclaim tag (before launch); MaxResults 1000 |
//! | `TerminateInstances` | [`instances`] | InstanceIds=[id] |
//! | `CreateTags` | [`instances`] | Name, karpenter.sh/nodeclaim, eks:eks-cluster-name |
//! | `DescribeInstances` | [`instances`] | cluster tag + states: the instance profiles live instances use (profile GC) |
//! | `iam:GetInstanceProfile`, `CreateInstanceProfile`, `AddRoleToInstanceProfile`, `RemoveRoleFromInstanceProfile`, `ListInstanceProfiles`, `DeleteInstanceProfile` | [`instance_profile`] | profile for `spec.role`; GC under `/karpenter/<region>/<cluster>/` |
//! | `eks:DescribeCluster` | [`cluster`] | cluster name (once, at start, by the binary) |
//! | `sqs:GetQueueUrl`, `ReceiveMessage`, `DeleteMessage` | [`sqs`] | the interruption queue (`interruptionQueue`; only when set): long poll of 10 messages, 20 s |
//!
//! The IAM policy for these calls is `docs/iam-policy.json`.

pub mod amifamily;
pub mod capacity_reservations;
pub mod cluster;
pub mod discovery;
pub mod errors;
pub mod filters;
pub mod fleet;
pub mod ice;
pub mod instance_profile;
pub mod instance_types;
pub mod instances;
pub mod launch_template;
pub mod pricing;
pub mod retry;
pub mod sqs;
pub mod ssm;
pub mod userdata;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

use self::discovery::{AliasOptions, DiscoveryError, Resolved};
use self::errors::{AwsError, LAUNCH_TEMPLATE_NOT_FOUND, is_capacity_error, is_throttle_code};
use self::fleet::{FleetRequest, Override};
use self::ice::{IceCache, offering_key, subnet_key};
use self::instance_profile::Iam;
use self::instance_types::TypeData;
use self::launch_template::TemplateSpec;
use self::pricing::{OnDemandPrices, PriceList, SpotPrices};
use self::retry::{RetryPolicy, call_with_retries};
use self::ssm::Ssm;
pub use self::userdata::ClusterInfo;
use stowage_core::domain::catalog::Catalog;
use stowage_decide::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, OfferingRef};
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::EC2NodeClassStatus;

pub(crate) const TAG_NODEPOOL: &str = "karpenter.sh/nodepool";
pub(crate) const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
pub(crate) const TAG_NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
pub(crate) const TAG_EKS_CLUSTER: &str = "eks:eks-cluster-name";

/// `kubernetes.io/cluster/<cluster>`, value `owned`.
pub(crate) fn cluster_tag(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}

/// The EC2 client and the retry policy every call goes through.
#[derive(Clone, Debug)]
pub struct Ec2 {
    pub client: aws_sdk_ec2::Client,
    pub retry: RetryPolicy,
}

impl Ec2 {
    /// Sends a request (built anew by `send` for every attempt) with [`retry::with_retries`].
    pub async fn call<T, E, F, Fut>(&self, op: &'static str, send: F) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        call_with_retries(&self.retry, op, send).await
    }
}

#[derive(Clone, Debug)]
pub struct AwsOptions {
    /// What nodeadm needs to join the cluster (endpoint, CA, service CIDR, DNS).
    pub cluster: ClusterInfo,
    /// How `alias:` AMI terms resolve: the Kubernetes version their SSM parameters name; configured
    /// ids and the plain AL2023 fallback for environments without those parameters.
    pub alias: AliasOptions,
    pub retry: RetryPolicy,
    /// Discovery cache (Karpenter: 1 min).
    pub discovery_ttl: Duration,
    /// Instance types and offerings (Karpenter: 12 h).
    pub types_ttl: Duration,
    /// Spot and on-demand prices (Karpenter: 12 h).
    pub prices_ttl: Duration,
    /// Karpenter's `isolatedVPC`: no endpoint for the Price List API, so on-demand prices stay the
    /// embedded table's.
    pub isolated_vpc: bool,
    /// Unavailable offerings (Karpenter: 3 min).
    pub ice_ttl: Duration,
    /// After a failed fetch, how long the offline catalog / synthetic spot prices are served before
    /// EC2 is asked again.
    pub offline_retry: Duration,
    /// How often `collect_nodeclass_resources` garbage-collects instance profiles (the controller asks
    /// every NodeClass round).
    pub profile_gc_interval: Duration,
    /// Whether `list()` reports the instances' security groups, the facts of `SecurityGroupDrift`
    /// (on by default, as Karpenter). The end-to-end tests turn it off: moto's CreateFleet does not
    /// put an instance in its launch template's groups (a spot instance lands in the default VPC's
    /// default group), so every node would drift.
    pub security_group_facts: bool,
}

impl Default for AwsOptions {
    fn default() -> Self {
        AwsOptions {
            cluster: ClusterInfo::default(),
            alias: AliasOptions::default(),
            retry: RetryPolicy::default(),
            discovery_ttl: Duration::from_secs(60),
            types_ttl: Duration::from_secs(12 * 3600),
            prices_ttl: Duration::from_secs(12 * 3600),
            isolated_vpc: false,
            ice_ttl: ice::DEFAULT_TTL,
            offline_retry: Duration::from_secs(60),
            profile_gc_interval: Duration::from_secs(300),
            security_group_facts: true,
        }
    }
}

struct NodeClassEntry {
    spec: Arc<EC2NodeClass>,
    /// The spec's JSON: a changed spec is resolved again at once.
    key: String,
    resolved: Option<(Arc<Resolved>, Instant)>,
    not_ready: Option<(String, Instant)>,
}

#[derive(Default)]
struct CatalogState {
    types: Option<Arc<TypeData>>,
    types_failed: Option<(Instant, String)>,
    spot: Option<(SpotPrices, Instant, Duration)>,
    on_demand: Option<(OnDemandPrices, Instant, Duration)>,
}

/// The AWS implementation of [`CloudProvider`] (module docs).
pub struct AwsProvider {
    ec2: Ec2,
    iam: Iam,
    price_list: PriceList,
    ssm: Ssm,
    cluster: String,
    region: String,
    opts: AwsOptions,
    ice: IceCache,
    nodeclasses: Mutex<BTreeMap<String, NodeClassEntry>>,
    catalog: tokio::sync::Mutex<CatalogState>,
    templates: Mutex<BTreeMap<String, Instant>>,
    /// The last fetched type data, readable without waiting for a catalog refresh in progress (the
    /// launch path needs instance facts, not a fresh catalog).
    types: Mutex<Option<Arc<TypeData>>>,
    /// When instance profiles were last garbage-collected.
    profiles_collected: Mutex<Option<Instant>>,
    /// What each capacity reservation still takes ([`capacity_reservations`]).
    reservations: capacity_reservations::Availability,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded maps are only ever replaced entry by entry, so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Labels kubelet may set on itself with `--node-labels`: not the well-known ones kubelet and the
/// cloud provider set, nothing type- or zone-specific (one launch template serves several types and
/// zones), and in the `kubernetes.io` / `k8s.io` namespaces only `kubelet.` and `node.` subdomains.
/// The controller puts the rest on the Node at registration.
pub(crate) fn kubelet_settable_label(key: &str) -> bool {
    let Some((ns, name)) = key.split_once('/') else { return true };
    if ns == "karpenter.k8s.aws" && name.starts_with("instance-") {
        return false;
    }
    if ns == "topology.k8s.aws" || key == "node.kubernetes.io/instance-type" || key == "node.kubernetes.io/windows-build" {
        return false;
    }
    let restricted = |d: &str| ns == d || ns.ends_with(&format!(".{d}"));
    if restricted("kubernetes.io") || restricted("k8s.io") {
        let allowed = |d: &str| ns == d || ns.ends_with(&format!(".{d}"));
        return (allowed("kubelet.kubernetes.io") || allowed("node.kubernetes.io")) && !ns.starts_with("node-restriction.");
    }
    true
}

impl AwsProvider {
    /// A provider for `cluster` in the SdkConfig's region. The SDK's retries are replaced by the
    /// provider's ([`retry`]).
    pub fn new(sdk: &aws_config::SdkConfig, cluster: impl Into<String>, options: AwsOptions) -> Result<Self, CloudError> {
        let cluster = cluster.into();
        if cluster.is_empty() {
            return Err(CloudError::Fatal("AwsProvider: the cluster name is empty".into()));
        }
        let region = sdk.region().map(|r| r.to_string()).ok_or_else(|| CloudError::Fatal("AwsProvider: the SdkConfig has no region".into()))?;

        let conf = aws_sdk_ec2::config::Builder::from(sdk).retry_config(RetryConfig::standard().with_max_attempts(1)).build();
        let iam_conf = aws_sdk_iam::config::Builder::from(sdk).retry_config(aws_sdk_iam::config::retry::RetryConfig::standard().with_max_attempts(1)).build();
        // The Price List API answers from a few regions only (pricing::pricing_api_region).
        let pricing_conf = aws_sdk_pricing::config::Builder::from(sdk)
            .region(aws_sdk_pricing::config::Region::new(pricing::pricing_api_region(&region)))
            .retry_config(aws_sdk_pricing::config::retry::RetryConfig::standard().with_max_attempts(1))
            .build();
        Ok(AwsProvider {
            price_list: PriceList { client: aws_sdk_pricing::Client::from_conf(pricing_conf), retry: options.retry.clone() },
            ec2: Ec2 { client: aws_sdk_ec2::Client::from_conf(conf), retry: options.retry.clone() },
            iam: Iam { client: aws_sdk_iam::Client::from_conf(iam_conf), retry: options.retry.clone() },
            ssm: Ssm::new(sdk, options.retry.clone(), options.discovery_ttl),
            cluster,
            region,
            ice: IceCache::new(options.ice_ttl),
            opts: options,
            nodeclasses: Mutex::new(BTreeMap::new()),
            catalog: tokio::sync::Mutex::new(CatalogState::default()),
            templates: Mutex::new(BTreeMap::new()),
            types: Mutex::new(None),
            profiles_collected: Mutex::new(None),
            reservations: Default::default(),
        })
    }

    pub fn cluster_name(&self) -> &str {
        &self.cluster
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn options(&self) -> &AwsOptions {
        &self.opts
    }

    /// The unavailable-offerings cache `launch` fills and `catalog()` applies.
    pub fn ice(&self) -> &IceCache {
        &self.ice
    }

    /// Marks an offering unavailable for the ICE TTL (e.g. after a spot interruption warning).
    pub(crate) fn mark_unavailable(&self, o: &OfferingRef, reason: &str) {
        self.ice.mark(&offering_key(&o.capacity_type, &o.instance_type, &o.zone), reason);
    }

    /// Runs discovery for `spec` unless a fresh result for the same spec is cached.
    async fn refresh(&self, spec: Arc<EC2NodeClass>) -> Result<Arc<Resolved>, CloudError> {
        let name = spec.metadata.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| CloudError::Fatal("EC2NodeClass without a name".into()))?;
        let key = serde_json::to_string(&spec.spec).unwrap_or_default();
        let ttl = self.opts.discovery_ttl;
        {
            let mut map = lock(&self.nodeclasses);
            let e = map.entry(name.clone()).or_insert_with(|| NodeClassEntry { spec: spec.clone(), key: key.clone(), resolved: None, not_ready: None });
            if e.key != key {
                *e = NodeClassEntry { spec: spec.clone(), key: key.clone(), resolved: None, not_ready: None };
            }
            if let Some((r, at)) = &e.resolved
                && at.elapsed() < ttl
            {
                return Ok(r.clone());
            }
            if let Some((m, at)) = &e.not_ready
                && at.elapsed() < ttl
            {
                return Err(CloudError::NodeClassNotReady(m.clone()));
            }
        }
        let outcome = self.discover(&spec).await;
        let mut map = lock(&self.nodeclasses);
        let Some(e) = map.get_mut(&name).filter(|e| e.key == key) else {
            // Forgotten or changed meanwhile: report this result without caching it.
            return outcome.map(Arc::new).map_err(|e| match e {
                DiscoveryError::NotReady(m) => CloudError::NodeClassNotReady(m),
                DiscoveryError::Aws(a) => a.into(),
            });
        };
        match outcome {
            Ok(r) => {
                self.reservations.sync(&r.capacity_reservations);
                let r = Arc::new(r);
                e.resolved = Some((r.clone(), Instant::now()));
                e.not_ready = None;
                Ok(r)
            }
            Err(DiscoveryError::NotReady(m)) => {
                tracing::warn!(nodeclass = %name, "{m}");
                e.resolved = None;
                e.not_ready = Some((m.clone(), Instant::now()));
                Err(CloudError::NodeClassNotReady(m))
            }
            Err(DiscoveryError::Aws(a)) => match &e.resolved {
                Some((r, _)) => {
                    tracing::warn!(nodeclass = %name, error = %a, "discovery failed; using the previous result");
                    Ok(r.clone())
                }
                None => Err(a.into()),
            },
        }
    }

    /// Discovery, then the instance profile ([`instance_profile::ensure`]). An IAM error that retrying
    /// cannot fix (access denied, an invalid role name) makes the NodeClass not ready with that error,
    /// so that it shows in the NodeClass's condition and not only in a log.
    async fn discover(&self, spec: &EC2NodeClass) -> Result<Resolved, DiscoveryError> {
        let mut r = discovery::resolve(&self.ec2, &self.ssm, spec, &self.opts.alias).await?;
        let name = spec.metadata.name.as_deref().unwrap_or_default();
        match instance_profile::ensure(&self.iam, &self.cluster, &self.region, spec).await {
            Ok(Ok(p)) => r.instance_profile = Some(p),
            Ok(Err(m)) => return Err(DiscoveryError::NotReady(format!("EC2NodeClass {name}: {m}"))),
            Err(e) if e.class == errors::Class::Fatal => return Err(DiscoveryError::NotReady(format!("EC2NodeClass {name}: instance profile: {e}"))),
            Err(e) => return Err(DiscoveryError::Aws(e)),
        }
        Ok(r)
    }

    /// Deletes the instance profiles this cluster's controller made (stowage's or Karpenter's) that no
    /// EC2NodeClass in `nodeclasses` (nor one resolved by this provider) names in its status and no live
    /// instance of the cluster uses ([`instance_profile::garbage_collect`]). Returns the deleted names.
    pub async fn collect_instance_profiles(&self, nodeclasses: &[EC2NodeClass]) -> Result<Vec<String>, CloudError> {
        let mut in_use: BTreeSet<String> = nodeclasses.iter().filter_map(|n| n.status.as_ref()?.instance_profile.clone()).collect();
        in_use.extend(lock(&self.nodeclasses).values().filter_map(|e| e.resolved.as_ref()?.0.instance_profile.clone()));
        in_use.extend(instances::attached_profiles(&self.ec2, &self.cluster).await?);
        Ok(instance_profile::garbage_collect(&self.iam, &self.cluster, &self.region, &in_use).await?)
    }

    /// The resolved NodeClass `name` (registered by `resolve_nodeclass`), refreshed when stale.
    async fn resolved(&self, name: &str) -> Result<(Arc<EC2NodeClass>, Arc<Resolved>), CloudError> {
        let spec = lock(&self.nodeclasses)
            .get(name)
            .map(|e| e.spec.clone())
            .ok_or_else(|| CloudError::NodeClassNotReady(format!("EC2NodeClass {name} has not been resolved by the AWS provider yet (resolve_nodeclass)")))?;
        let r = self.refresh(spec.clone()).await?;
        Ok((spec, r))
    }

    fn known_zones(&self) -> BTreeSet<String> {
        lock(&self.nodeclasses).values().filter_map(|e| e.resolved.as_ref()).flat_map(|(r, _)| r.zones()).collect()
    }

    /// Fetches what is stale; returns the type data (if any), the spot and the on-demand prices.
    async fn catalog_data(&self) -> (Option<Arc<TypeData>>, Option<String>, SpotPrices, OnDemandPrices) {
        let mut st = self.catalog.lock().await;
        let types_stale = st.types.as_ref().is_none_or(|t| t.fetched_at.elapsed() >= self.opts.types_ttl);
        let recently_failed = st.types_failed.as_ref().is_some_and(|(at, _)| at.elapsed() < self.opts.offline_retry);
        if types_stale && !recently_failed {
            match instance_types::fetch(&self.ec2).await {
                Ok(d) => {
                    tracing::info!(types = d.types.len(), "fetched EC2 instance types and offerings");
                    let d = Arc::new(d);
                    *lock(&self.types) = Some(d.clone());
                    st.types = Some(d);
                    st.types_failed = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot fetch instance types; serving the {} catalog", if st.types.is_some() { "previous" } else { "embedded" });
                    st.types_failed = Some((Instant::now(), e.to_string()));
                }
            }
        }
        let spot_stale = st.spot.as_ref().is_none_or(|(_, at, ttl)| at.elapsed() >= *ttl);
        if spot_stale {
            match pricing::fetch_spot(&self.ec2).await {
                Ok(q) => {
                    let p = SpotPrices::judge(q);
                    if let pricing::SpotSource::Synthetic(why) = &p.source {
                        tracing::info!("spot prices: {why}; using synthetic ones");
                    }
                    st.spot = Some((p, Instant::now(), self.opts.prices_ttl));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot fetch spot prices");
                    if st.spot.is_none() {
                        st.spot = Some((SpotPrices::synthetic(format!("DescribeSpotPriceHistory failed ({e})")), Instant::now(), self.opts.offline_retry));
                    } else if let Some(s) = st.spot.as_mut() {
                        // Keep the old prices; ask again after offline_retry.
                        s.1 = Instant::now();
                        s.2 = self.opts.offline_retry;
                    }
                }
            }
        }
        let on_demand_stale = st.on_demand.as_ref().is_none_or(|(_, at, ttl)| at.elapsed() >= *ttl);
        if on_demand_stale {
            if !pricing::pricing_api_serves(&self.region, self.opts.isolated_vpc) {
                let why = if self.opts.isolated_vpc { "isolatedVPC is set".to_string() } else { format!("{} has no Price List API", self.region) };
                st.on_demand = Some((OnDemandPrices::embedded(why), Instant::now(), Duration::MAX));
            } else {
                match pricing::fetch_on_demand(&self.price_list, &self.region).await {
                    Ok(p) => {
                        tracing::info!(types = p.len(), region = %self.region, "fetched on-demand prices from the Price List API");
                        st.on_demand = Some((OnDemandPrices::from_api(&self.region, p), Instant::now(), self.opts.prices_ttl));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot fetch on-demand prices; keeping the {} ones", if st.on_demand.as_ref().is_some_and(|p| p.0.from_the_api()) { "previous" } else { "embedded" });
                        match st.on_demand.as_mut() {
                            Some(p) if p.0.from_the_api() => {
                                p.1 = Instant::now();
                                p.2 = self.opts.offline_retry;
                            }
                            _ => st.on_demand = Some((OnDemandPrices::embedded(format!("the Price List API failed ({e})")), Instant::now(), self.opts.offline_retry)),
                        }
                    }
                }
            }
        }
        let spot = st.spot.as_ref().map(|s| s.0.clone()).unwrap_or_else(|| SpotPrices::synthetic("no spot prices yet"));
        let on_demand = st.on_demand.as_ref().map(|s| s.0.clone()).unwrap_or_else(|| OnDemandPrices::embedded("not fetched yet"));
        (st.types.clone(), st.types_failed.as_ref().map(|(_, e)| e.clone()), spot, on_demand)
    }

    async fn catalog_for_zones(&self, zones: BTreeSet<String>) -> Catalog {
        let (types, failed, spot, on_demand) = self.catalog_data().await;
        let mut catalog = match types {
            Some(d) => {
                let zones = if zones.is_empty() { d.zones.values().flatten().cloned().collect() } else { zones };
                instance_types::build(&self.region, &zones, &d, &spot, &on_demand, &self.ice)
            }
            None => instance_types::offline(&self.region, &zones, &self.ice, failed.as_deref().unwrap_or("no data")),
        };
        // Every resolved NodeClass's reservations; each NodeClass's view keeps its own
        // (`stowage_core::catalog::for_nodeclass`, by `status.capacityReservations`).
        let resolved: Vec<Arc<Resolved>> = lock(&self.nodeclasses).values().filter_map(|e| e.resolved.as_ref().map(|(r, _)| r.clone())).collect();
        capacity_reservations::add_offerings(&mut catalog, resolved.iter().flat_map(|r| &r.capacity_reservations), &self.reservations);
        catalog
    }

    /// The catalog restricted to the zones of one NodeClass's subnets.
    pub async fn catalog_for(&self, nodeclass: &str) -> Result<Catalog, CloudError> {
        let (_, r) = self.resolved(nodeclass).await?;
        Ok(self.catalog_for_zones(r.zones()).await)
    }

    async fn ensure_template(&self, name: &str, spec: &TemplateSpec) -> Result<(), CloudError> {
        let fresh = lock(&self.templates).get(name).is_some_and(|at| at.elapsed() < launch_template::TEMPLATE_CACHE_TTL);
        if fresh {
            return Ok(());
        }
        launch_template::ensure(&self.ec2, spec, name).await?;
        lock(&self.templates).insert(name.to_string(), Instant::now());
        Ok(())
    }

    fn launch_tags(&self, nc: &EC2NodeClass, req: &LaunchRequest) -> BTreeMap<String, String> {
        let mut tags = nc.spec.tags.clone().unwrap_or_default();
        tags.extend(req.tags.clone());
        tags.remove(TAG_NODECLAIM);
        tags.retain(|k, _| !k.starts_with("kubernetes.io/cluster/"));
        tags.insert(cluster_tag(&self.cluster), "owned".into());
        tags.insert(TAG_NODEPOOL.into(), req.nodepool.clone());
        tags.insert(TAG_EKS_CLUSTER.into(), self.cluster.clone());
        tags.insert(TAG_NODECLASS.into(), req.nodeclass.clone());
        tags
    }

    fn template_spec(&self, nc: &EC2NodeClass, r: &Resolved, image_id: &str, max_pods: i64, req: &LaunchRequest, capacity_type: &str) -> Result<TemplateSpec, CloudError> {
        let mut labels: BTreeMap<String, String> = req.labels.iter().filter(|(k, _)| kubelet_settable_label(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        labels.insert(TAG_NODEPOOL.into(), req.nodepool.clone());
        labels.insert("karpenter.sh/capacity-type".into(), capacity_type.into());
        let input = userdata::UserDataInput {
            cluster_name: &self.cluster,
            cluster: &self.opts.cluster,
            max_pods,
            kubelet: nc.spec.kubelet.as_ref(),
            labels: &labels,
            taints: &req.taints,
            raid0: nc.spec.instance_store_policy.as_deref() == Some("RAID0"),
            custom_user_data: nc.spec.user_data.as_deref(),
        };
        let user_data = userdata::for_family(r.family, &input).map_err(|m| CloudError::NodeClassNotReady(format!("EC2NodeClass {}: {m}", req.nodeclass)))?;
        Ok(TemplateSpec {
            image_id: image_id.to_string(),
            user_data,
            instance_profile: r.instance_profile.clone(),
            security_group_ids: r.security_groups.iter().map(|g| g.id.clone()).collect(),
            associate_public_ip: nc.spec.associate_public_ip_address,
            block_devices: launch_template::block_devices(nc, r.family).map_err(|m| CloudError::NodeClassNotReady(format!("EC2NodeClass {}: {m}", req.nodeclass)))?,
            metadata: launch_template::metadata(nc),
            detailed_monitoring: nc.spec.detailed_monitoring.unwrap_or(false),
            tags: self.launch_tags(nc, req),
            capacity_reservation_id: None,
            capacity_block: false,
        })
    }

    async fn launch_inner(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        let ct = launch_capacity_type(req)?;
        // nodeadm refuses a NodeConfig without it: the node would be paid for and never join.
        if self.opts.cluster.service_cidr.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return Err(CloudError::Fatal(format!(
                "launch {}: the cluster's service CIDR is unknown (AwsOptions::cluster.service_cidr: stowage_aws::cluster::discover reads it from EKS, or pass --service-cidr); a node launched without it cannot join",
                req.nodeclaim
            )));
        }
        let (nc, r) = self.resolved(&req.nodeclass).await?;
        if let Some(existing) = instances::find_by_nodeclaim(&self.ec2, &self.cluster, &req.nodeclaim).await? {
            tracing::info!(nodeclaim = %req.nodeclaim, instance = %existing.id, "NodeClaim already has an instance; not launching another");
            return Ok(existing);
        }
        let tags = self.launch_tags(&nc, req);
        let (templates, overrides) = self.fleet_overrides(&nc, &r, req, &ct)?;
        let mut instance_tags = tags.clone();
        instance_tags.insert(TAG_NODECLAIM.into(), req.nodeclaim.clone());
        let freq = FleetRequest {
            capacity_type: ct.clone(),
            client_token: fleet::client_token(&self.cluster, &req.nodeclaim, &overrides),
            overrides,
            launch_tags: tags,
            instance_tags,
            context: nc.spec.context.clone(),
        };
        // One retry when a launch template vanished between our cache and the call.
        for attempt in 0..2 {
            for (name, spec) in &templates {
                self.ensure_template(name, spec).await?;
            }
            let call = fleet::request(&self.ec2.client, &freq);
            let out = match self.ec2.call("CreateFleet", || call.clone().send()).await {
                Ok(o) => o,
                Err(e) if e.has_code(LAUNCH_TEMPLATE_NOT_FOUND) && attempt == 0 => {
                    tracing::warn!(error = %e, "a launch template vanished; recreating");
                    lock(&self.templates).clear();
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let outcome = fleet::parse(&out, &freq);
            self.remember_capacity_errors(&ct, &freq, &outcome);
            if let Some(l) = outcome.launched {
                if !outcome.errors.is_empty() {
                    tracing::info!(nodeclaim = %req.nodeclaim, errors = outcome.errors.len(), "launched after errors on better offerings");
                }
                tracing::info!(nodeclaim = %req.nodeclaim, instance = %l.id, instance_type = %l.instance_type, zone = %l.zone, capacity_type = %l.capacity_type, "launched instance");
                // The image is the launch template's of the override the fleet chose.
                let chosen = freq.overrides.iter().find(|o| o.offering.instance_type == l.instance_type && o.offering.zone == l.zone);
                let image = chosen.and_then(|o| templates.get(&o.template)).map(|t| t.image_id.clone());
                if let Some(r) = chosen.and_then(|o| o.offering.reservation.as_ref()) {
                    self.reservations.launched(&r.id);
                }
                return Ok(launched_instance(l, req, image));
            }
            if attempt == 0 && outcome.errors.iter().any(|f| f.code == LAUNCH_TEMPLATE_NOT_FOUND) {
                lock(&self.templates).clear();
                continue;
            }
            return Err(nothing_launched(req, &freq, &outcome));
        }
        Err(CloudError::Fatal(format!("CreateFleet for NodeClaim {}: launch template not found twice", req.nodeclaim)))
    }

    /// The fleet's launch templates and overrides, one per offering of the NodeClaim's capacity type in
    /// its order of preference; offerings that cannot be launched now are skipped (and remembered as
    /// unavailable where the reason will not change soon). None left: insufficient capacity.
    fn fleet_overrides(&self, nc: &EC2NodeClass, r: &Resolved, req: &LaunchRequest, ct: &str) -> Result<(BTreeMap<String, TemplateSpec>, Vec<Override>), CloudError> {
        let types = lock(&self.types).clone();
        let mut templates: BTreeMap<String, TemplateSpec> = BTreeMap::new();
        let mut overrides: Vec<Override> = Vec::new();
        let mut skipped: Vec<(OfferingRef, String)> = Vec::new();
        let mut seen = BTreeSet::new();
        for (rank, o) in req.offerings.iter().enumerate() {
            // Spot and on-demand are never mixed in one fleet (Karpenter neither); others are ignored.
            if o.capacity_type != ct || !seen.insert((o.instance_type.clone(), o.zone.clone())) {
                continue;
            }
            if self.ice.offering_unavailable(ct, &o.instance_type, &o.zone) {
                skipped.push((o.clone(), "in the unavailable-offerings cache".into()));
                continue;
            }
            let Some(subnet) = r.subnets.iter().find(|s| s.zone == o.zone && !self.ice.contains(&subnet_key(&s.id))) else {
                self.mark_unavailable(o, "NoSubnetInZone");
                skipped.push((o.clone(), format!("no usable subnet of EC2NodeClass {} in {}", req.nodeclass, o.zone)));
                continue;
            };
            let facts = instance_types::facts(types.as_deref(), &o.instance_type);
            // The image whose requirements the type's labels (GPU and accelerator counts) satisfy.
            let labels = stowage_input::catalog::default_catalog().get(&o.instance_type).map(|t| t.labels.clone()).unwrap_or_default();
            let image = match &facts {
                Some(f) => r.ami_for(&f.arch, &labels),
                None if r.amis.len() == 1 => r.amis.first(),
                None => None,
            };
            let Some(image) = image else {
                self.mark_unavailable(o, "NoImageForArchitecture");
                let arch = facts.as_ref().map(|f| f.arch.as_str()).unwrap_or("unknown");
                skipped.push((o.clone(), format!("no AMI of EC2NodeClass {} for {} ({arch}; GPU and accelerator types need the alias's nvidia / neuron image)", req.nodeclass, o.instance_type)));
                continue;
            };
            let max_pods = facts.as_ref().map(|f| stowage_core::catalog::aws::max_pods(f, &r.sizing.ami_family, &r.sizing.kubelet)).unwrap_or(110);
            let mut spec = self.template_spec(nc, r, &image.id, max_pods, req, ct)?;
            spec.capacity_reservation_id = o.reservation.as_ref().map(|x| x.id.clone());
            spec.capacity_block = o.reservation.as_ref().is_some_and(|x| x.kind == "capacity-block");
            let name = spec.name();
            templates.entry(name.clone()).or_insert(spec);
            overrides.push(Override { offering: o.clone(), subnet_id: subnet.id.clone(), template: name, priority: rank as f64 });
        }
        if overrides.is_empty() {
            let why: Vec<String> = skipped.iter().map(|(o, why)| format!("{}/{}/{}: {why}", o.capacity_type, o.instance_type, o.zone)).collect();
            return Err(CloudError::InsufficientCapacity {
                offerings: skipped.into_iter().map(|(o, _)| o).collect(),
                message: format!("no offering of NodeClaim {} can be launched now: {}", req.nodeclaim, why.join("; ")),
            });
        }

        Ok((templates, overrides))
    }

    /// Capacity errors of a fleet answer go into the unavailable-offerings cache (and a subnet out of
    /// addresses into the subnet cache), so that the planner stops choosing them.
    fn remember_capacity_errors(&self, ct: &str, freq: &FleetRequest, outcome: &fleet::Outcome) {
        for f in &outcome.errors {
            if !is_capacity_error(&f.code) {
                continue;
            }
            if let (Some(t), Some(z)) = (&f.instance_type, &f.zone) {
                tracing::info!(capacity_type = %ct, instance_type = %t, zone = %z, code = %f.code, "offering unavailable");
                self.ice.mark(&offering_key(ct, t, z), &f.code);
                if f.code == capacity_reservations::RESERVATION_FULL {
                    for r in freq.overrides.iter().filter(|o| &o.offering.instance_type == t && &o.offering.zone == z).filter_map(|o| o.offering.reservation.as_ref()) {
                        self.reservations.full(&r.id);
                    }
                }
            }
            if f.code == "InsufficientFreeAddressesInSubnet"
                && let Some(o) = freq.overrides.iter().find(|o| Some(&o.offering.zone) == f.zone.as_ref())
            {
                self.ice.mark(&subnet_key(&o.subnet_id), &f.code);
            }
        }
    }
}

/// The capacity type of a launch (its first offering's), after checking the request is launchable.
fn launch_capacity_type(req: &LaunchRequest) -> Result<String, CloudError> {
    let first = req.offerings.first().ok_or_else(|| CloudError::Fatal(format!("launch {}: no offerings", req.nodeclaim)))?;
    if req.nodeclaim.is_empty() {
        return Err(CloudError::Fatal("launch: the NodeClaim name is empty".into()));
    }
    let ct = first.capacity_type.clone();
    if ct != "on-demand" && ct != "spot" && ct != "reserved" {
        return Err(CloudError::Fatal(format!("launch {}: capacity type {ct:?} is not supported (on-demand, spot, reserved)", req.nodeclaim)));
    }
    if ct == "reserved" && first.reservation.is_none() {
        return Err(CloudError::Fatal(format!("launch {}: a reserved offering without its capacity reservation", req.nodeclaim)));
    }
    Ok(ct)
}

fn launched_instance(l: fleet::Launched, req: &LaunchRequest, image_id: Option<String>) -> Instance {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let reservation =
        req.offerings.iter().find(|o| o.instance_type == l.instance_type && o.zone == l.zone && o.capacity_type == l.capacity_type).and_then(|o| o.reservation.as_ref()).map(|r| r.id.clone());
    Instance {
        provider_id: instances::provider_id(&l.zone, &l.id),
        id: l.id,
        instance_type: l.instance_type,
        zone: l.zone,
        capacity_type: l.capacity_type,
        state: "pending".into(),
        nodepool: Some(req.nodepool.clone()),
        nodeclaim: Some(req.nodeclaim.clone()),
        launched_at: now,
        image_id,
        // CreateFleet's answer does not say; the instance's description (`list`) does.
        subnet_id: None,
        security_group_ids: None,
        capacity_reservation_id: reservation,
    }
}

/// Why a fleet launched nothing: insufficient capacity (naming the offerings that failed, so the
/// caller can plan around them), throttling (retry later), or a fatal error.
fn nothing_launched(req: &LaunchRequest, freq: &FleetRequest, outcome: &fleet::Outcome) -> CloudError {
    let summary: Vec<String> = outcome.errors.iter().map(|f| format!("{} {}/{}: {}", f.code, f.instance_type.as_deref().unwrap_or("?"), f.zone.as_deref().unwrap_or("?"), f.message)).collect();
    if outcome.errors.is_empty() {
        return CloudError::Fatal(format!("CreateFleet for NodeClaim {} returned neither an instance nor an error", req.nodeclaim));
    }
    if outcome.errors.iter().all(|f| is_capacity_error(&f.code)) {
        let named: Vec<OfferingRef> = freq
            .overrides
            .iter()
            .filter(|o| outcome.errors.iter().any(|f| f.instance_type.as_deref() == Some(&o.offering.instance_type) && f.zone.as_deref() == Some(&o.offering.zone)))
            .map(|o| o.offering.clone())
            .collect();
        let offerings = if named.is_empty() { freq.overrides.iter().map(|o| o.offering.clone()).collect() } else { named };
        return CloudError::InsufficientCapacity { offerings, message: format!("CreateFleet launched nothing: {}", summary.join("; ")) };
    }
    if outcome.errors.iter().all(|f| is_capacity_error(&f.code) || is_throttle_code(&f.code)) {
        return CloudError::Throttled(format!("CreateFleet launched nothing: {}", summary.join("; ")));
    }
    CloudError::Fatal(format!("CreateFleet for NodeClaim {} launched nothing: {}", req.nodeclaim, summary.join("; ")))
}

impl CloudProvider for AwsProvider {
    fn provider_name(&self) -> &'static str {
        "aws"
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        Ok(self.catalog_for_zones(self.known_zones()).await)
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        self.launch_inner(req).await
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), CloudError> {
        instances::terminate(&self.ec2, provider_id).await
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        let mut listed = instances::list(&self.ec2, &self.cluster).await?;
        if !self.opts.security_group_facts {
            listed.iter_mut().for_each(|i| i.security_group_ids = None);
        }
        Ok(listed)
    }

    async fn tag_registered(&self, provider_id: &str, nodeclaim: &str, node: &str) -> Result<(), CloudError> {
        instances::tag_registered(&self.ec2, &self.cluster, provider_id, nodeclaim, node).await
    }

    async fn resolve_nodeclass(&self, nodeclass: &EC2NodeClass) -> Result<EC2NodeClassStatus, CloudError> {
        Ok(self.refresh(Arc::new(nodeclass.clone())).await?.status())
    }

    fn forget_nodeclass(&self, name: &str) {
        lock(&self.nodeclasses).remove(name);
    }

    async fn expiring_reservations(&self, ids: &[String]) -> Result<Vec<String>, CloudError> {
        let terms: Vec<_> = ids.iter().map(|id| stowage_input::api::ec2nodeclass::CapacityReservationSelectorTerm { id: Some(id.clone()), ..Default::default() }).collect();
        let found = capacity_reservations::describe(&self.ec2, &terms).await?;
        Ok(found.into_iter().filter(|r| r.expiring).map(|r| r.id).collect())
    }

    async fn collect_nodeclass_resources(&self, nodeclasses: &[EC2NodeClass]) -> Result<Vec<String>, CloudError> {
        {
            let mut last = lock(&self.profiles_collected);
            if last.is_some_and(|at| at.elapsed() < self.opts.profile_gc_interval) {
                return Ok(Vec::new());
            }
            *last = Some(Instant::now());
        }
        self.collect_instance_profiles(nodeclasses).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_label_rules() {
        assert!(kubelet_settable_label("team"));
        assert!(kubelet_settable_label("karpenter.sh/nodepool"));
        assert!(kubelet_settable_label("node.kubernetes.io/role"));
        assert!(kubelet_settable_label("example.kubelet.kubernetes.io/x"));
        assert!(!kubelet_settable_label("node-restriction.kubernetes.io/x"));
        assert!(!kubelet_settable_label("topology.kubernetes.io/zone"));
        assert!(!kubelet_settable_label("kubernetes.io/arch"));
        assert!(!kubelet_settable_label("node.kubernetes.io/instance-type"));
        assert!(!kubelet_settable_label("karpenter.k8s.aws/instance-cpu"));
        assert!(!kubelet_settable_label("example.k8s.io/x"));
    }
}
