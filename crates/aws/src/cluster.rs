//! What nodes need to join the cluster, from `eks:DescribeCluster` (Karpenter reads endpoint, CA,
//! service CIDR, IP family and version the same way), with the controller's flags taking precedence.
//!
//! | field | EKS | flag |
//! |---|---|---|
//! | API server endpoint | `cluster.endpoint` | `--cluster-endpoint` |
//! | CA bundle (base64 PEM) | `cluster.certificateAuthority.data` | `--cluster-ca-bundle` |
//! | service CIDR | `kubernetesNetworkConfig.serviceIpv4Cidr`, or `serviceIpv6Cidr` for an `ipv6` cluster | `--service-cidr` |
//! | IP family | `kubernetesNetworkConfig.ipFamily` | (from the service CIDR) |
//! | Kubernetes version | `cluster.version` | `--kubernetes-version` |
//!
//! nodeadm refuses a NodeConfig without the service CIDR, so a node launched without one is paid for
//! until the registration timeout and never joins: [`resolve`] fails, naming `--service-cidr`, when
//! neither EKS nor a flag gives it, and the controller does not start.

use aws_sdk_eks::types::IpFamily;

use super::errors::AwsError;
use super::retry::{RetryPolicy, call_with_retries};
use super::userdata::ClusterInfo;

/// What `DescribeCluster` said (each field as EKS returned it, or `None`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EksCluster {
    pub endpoint: Option<String>,
    pub ca_bundle: Option<String>,
    pub service_cidr: Option<String>,
    /// `ipv4` or `ipv6`.
    pub ip_family: Option<String>,
    /// `1.31`.
    pub version: Option<String>,
}

/// The controller's flags (empty = not given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFlags {
    pub endpoint: Option<String>,
    pub ca_bundle: Option<String>,
    pub service_cidr: Option<String>,
    pub cluster_dns: Vec<String>,
    pub kubernetes_version: Option<String>,
}

/// Cluster facts after the flags are applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub info: ClusterInfo,
    /// `ipv4` or `ipv6`.
    pub ip_family: String,
    /// Kubernetes minor version (`1.31`), if known: AMI aliases resolve for it.
    pub kubernetes_version: Option<String>,
}

/// Why the cluster facts are incomplete.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "the cluster's service CIDR is unknown: eks:DescribeCluster for {cluster:?} {why}; pass --service-cidr (Helm value serviceCIDR) with the cluster's Kubernetes service range, e.g. 10.100.0.0/16, or nodes cannot join"
    )]
    NoServiceCidr { cluster: String, why: String },
    #[error("--service-cidr {0:?} is not an IPv4 or IPv6 CIDR (address/prefix)")]
    InvalidServiceCidr(String),
}

/// Calls `eks:DescribeCluster` for `name`.
pub async fn describe(client: &aws_sdk_eks::Client, retry: &RetryPolicy, name: &str) -> Result<EksCluster, AwsError> {
    let req = client.describe_cluster().name(name);
    let out = call_with_retries(retry, "DescribeCluster", || req.clone().send()).await?;
    let Some(c) = out.cluster() else { return Ok(EksCluster::default()) };
    let net = c.kubernetes_network_config();
    let ip_family = net.and_then(|n| n.ip_family()).map(|f| f.as_str().to_string());
    let v6 = net.and_then(|n| n.ip_family()) == Some(&IpFamily::Ipv6);
    let service_cidr = net.and_then(|n| if v6 { n.service_ipv6_cidr() } else { n.service_ipv4_cidr() }).map(str::to_string);
    Ok(EksCluster {
        endpoint: c.endpoint().map(str::to_string),
        ca_bundle: c.certificate_authority().and_then(|a| a.data()).map(str::to_string),
        service_cidr,
        ip_family,
        version: c.version().map(str::to_string),
    })
}

/// `DescribeCluster` through an EKS client built from `sdk` (SDK retries off; `retry` instead), then
/// [`resolve`]. A failed call is not fatal by itself: the flags may give everything.
pub async fn discover(sdk: &aws_config::SdkConfig, name: &str, flags: &ClusterFlags, retry: &RetryPolicy) -> Result<Cluster, ClusterError> {
    let conf = aws_sdk_eks::config::Builder::from(sdk).retry_config(aws_sdk_eks::config::retry::RetryConfig::standard().with_max_attempts(1)).build();
    let client = aws_sdk_eks::Client::from_conf(conf);
    let eks = describe(&client, retry, name).await.map_err(|e| e.to_string());
    if let Err(e) = &eks {
        tracing::warn!(cluster = name, error = %e, "eks:DescribeCluster failed; using the flags only");
    }
    resolve(name, eks, flags)
}

fn valid_cidr(s: &str) -> bool {
    let Some((addr, prefix)) = s.split_once('/') else { return false };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix.parse::<u8>().is_ok_and(|p| p <= 32),
        Ok(std::net::IpAddr::V6(_)) => prefix.parse::<u8>().is_ok_and(|p| p <= 128),
        Err(_) => false,
    }
}

/// The flags over what EKS said (`eks` is `Err` with the reason when DescribeCluster failed).
pub fn resolve(cluster: &str, eks: Result<EksCluster, String>, flags: &ClusterFlags) -> Result<Cluster, ClusterError> {
    let nonempty = |s: &Option<String>| s.clone().filter(|v| !v.trim().is_empty());
    let (api, why) = match eks {
        Ok(c) => (c, "returned no service CIDR".to_string()),
        Err(e) => (EksCluster::default(), format!("failed ({e})")),
    };
    let service_cidr = match nonempty(&flags.service_cidr).or_else(|| nonempty(&api.service_cidr)) {
        Some(c) if valid_cidr(c.trim()) => c.trim().to_string(),
        Some(c) => return Err(ClusterError::InvalidServiceCidr(c)),
        None => return Err(ClusterError::NoServiceCidr { cluster: cluster.to_string(), why }),
    };
    let ip_family = if service_cidr.contains(':') { "ipv6" } else { "ipv4" }.to_string();
    let info = ClusterInfo {
        endpoint: nonempty(&flags.endpoint).or(api.endpoint).unwrap_or_default(),
        ca_bundle: nonempty(&flags.ca_bundle).or(api.ca_bundle).unwrap_or_default(),
        service_cidr: Some(service_cidr),
        cluster_dns: flags.cluster_dns.iter().filter(|d| !d.trim().is_empty()).cloned().collect(),
    };
    Ok(Cluster { info, ip_family, kubernetes_version: nonempty(&flags.kubernetes_version).or(api.version) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eks() -> EksCluster {
        EksCluster {
            endpoint: Some("https://ABC.gr7.us-east-1.eks.amazonaws.com".into()),
            ca_bundle: Some("Q0E=".into()),
            service_cidr: Some("172.20.0.0/16".into()),
            ip_family: Some("ipv4".into()),
            version: Some("1.31".into()),
        }
    }

    #[test]
    fn eks_fills_what_the_flags_leave_out() {
        let c = resolve("demo", Ok(eks()), &ClusterFlags::default()).unwrap();
        assert_eq!(c.info.endpoint, "https://ABC.gr7.us-east-1.eks.amazonaws.com");
        assert_eq!(c.info.ca_bundle, "Q0E=");
        assert_eq!(c.info.service_cidr.as_deref(), Some("172.20.0.0/16"));
        assert_eq!((c.ip_family.as_str(), c.kubernetes_version.as_deref()), ("ipv4", Some("1.31")));
    }

    #[test]
    fn flags_override() {
        let flags = ClusterFlags {
            endpoint: Some("https://10.0.0.1".into()),
            service_cidr: Some("fd00::/108".into()),
            kubernetes_version: Some("1.30".into()),
            cluster_dns: vec!["fd00::a".into()],
            ..Default::default()
        };
        let c = resolve("demo", Ok(eks()), &flags).unwrap();
        assert_eq!(c.info.endpoint, "https://10.0.0.1");
        assert_eq!(c.info.ca_bundle, "Q0E=", "not overridden");
        assert_eq!(c.info.service_cidr.as_deref(), Some("fd00::/108"));
        assert_eq!(c.info.cluster_dns, vec!["fd00::a"]);
        assert_eq!((c.ip_family.as_str(), c.kubernetes_version.as_deref()), ("ipv6", Some("1.30")));
    }

    #[test]
    fn no_service_cidr_names_the_flag() {
        let e = resolve("demo", Err("ResourceNotFoundException: no cluster".into()), &ClusterFlags::default()).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("--service-cidr") && m.contains("ResourceNotFoundException") && m.contains("\"demo\""), "{m}");
        let e = resolve("demo", Ok(EksCluster { service_cidr: None, ..eks() }), &ClusterFlags::default()).unwrap_err();
        assert!(e.to_string().contains("returned no service CIDR"), "{e}");
        let flags = ClusterFlags { service_cidr: Some("10.100.0.0".into()), ..Default::default() };
        assert!(matches!(resolve("demo", Ok(eks()), &flags), Err(ClusterError::InvalidServiceCidr(_))));
        let flags = ClusterFlags { service_cidr: Some("10.100.0.0/16".into()), ..Default::default() };
        assert_eq!(resolve("demo", Err("AccessDenied".into()), &flags).unwrap().info.service_cidr.as_deref(), Some("10.100.0.0/16"));
    }
}
