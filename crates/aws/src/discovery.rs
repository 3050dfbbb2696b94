//! EC2NodeClass discovery: subnets, security groups and AMIs from the selector terms.
//!
//! Semantics (Karpenter `pkg/providers/{subnet,securitygroup,amifamily}`): terms are ORed, the
//! fields of one term (tags, id, name, owner) are ANDed; a tag value `*` means "the key exists".
//!
//! | call | parameters |
//! |---|---|
//! | `DescribeSubnets` | one call per term with tags (`tag:<k>=<v>` or `tag-key=<k>` for `*`, plus `subnet-id` if the term also has an id); one call for all id-only terms (`subnet-id` = the ids); `MaxResults` 500, paginated |
//! | `DescribeSecurityGroups` | the same with `group-id`, and `group-name` for name terms |
//! | `DescribeImages` | id terms: `image-id`; name/tags terms: `name`, `tag:<k>`, `Owners` = the term's owner or, for name terms, `self,amazon`; alias terms: see below. Always `state=available`, `MaxResults` 1000, paginated |
//!
//! Subnets are sorted by free IPv4 addresses (most first), then id, as in `status.subnets`; the launch
//! path takes the first subnet of a zone. Security groups are sorted by id.
//!
//! **AMI aliases.** Karpenter resolves `alias: al2023@<version>` through the public SSM parameter
//! `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/standard/recommended/image_id`.
//! stowage does not call SSM (moto's SSM has no such public parameters, and it would be one more
//! SDK and IAM permission), so an alias resolves, per architecture (x86_64, arm64), by the first of:
//!
//! 1. `AwsOptions::alias_image_ids[arch]` if configured: `DescribeImages image-id=<id>`;
//! 2. the EKS-optimized image by name: `DescribeImages Owners=amazon`,
//!    `name=amazon-eks-node-al2023-<arch>-standard-<k8s minor or *>-<v<version> or v*>`, newest
//!    `CreationDate` (then name) wins. This is the image the SSM parameter points to (same owner,
//!    same naming), give or take a release still rolling out;
//! 3. only when `AwsOptions::plain_al2023_fallback` is set (emulators: moto preloads plain Amazon
//!    Linux 2023 images but no EKS images): the newest non-minimal
//!    `al2023-ami-2023.*-<arch>` owned by `amazon`. A plain AL2023 image has no kubelet, so this is
//!    never right against real EC2, and it is off by default.
//!
//! Only the `standard` variant is resolved (no `nvidia` / `neuron` images for GPU / Inferentia types),
//! and only AL2023 aliases (stowage writes nodeadm user data only); other alias families and
//! `ssmParameter` terms make the NodeClass not ready with a message saying so.
//!
//! Among all images the terms return, each architecture takes the newest non-deprecated one (a
//! deprecated one only if nothing else matches).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::Filter;

use super::Ec2;
use super::errors::AwsError;
use stowage_core::domain::nodepool::NodeClass;
use stowage_input::api::EC2NodeClass;
use stowage_input::api::ec2nodeclass::{AmiStatus, EC2NodeClassStatus, SecurityGroupStatus, SelectorTerm, SubnetStatus};

#[derive(Clone, Debug, PartialEq)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub zone_id: Option<String>,
    pub free_ips: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SecurityGroup {
    pub id: String,
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ami {
    pub id: String,
    pub name: Option<String>,
    /// Kubernetes arch: `amd64` or `arm64`.
    pub arch: String,
    pub created: String,
    pub deprecated: bool,
}

/// A NodeClass with everything its selectors found.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<SecurityGroup>,
    /// At most one per architecture, sorted by arch.
    pub amis: Vec<Ami>,
    /// AL2023 or Custom: the user data stowage writes.
    pub ami_family: String,
    /// Sizing view of the NodeClass (kubelet settings, root volume) for maxPods.
    pub sizing: NodeClass,
    /// `spec.instanceProfile`, or the profile made for `spec.role` ([`super::instance_profile`]; set by
    /// the provider after discovery).
    pub instance_profile: Option<String>,
}

impl Resolved {
    pub fn zones(&self) -> BTreeSet<String> {
        self.subnets.iter().map(|s| s.zone.clone()).collect()
    }

    pub(crate) fn ami_for_arch(&self, arch: &str) -> Option<&Ami> {
        self.amis.iter().find(|a| a.arch == arch)
    }

    /// What the controller writes into `EC2NodeClass.status` (conditions are the controller's).
    pub fn status(&self) -> EC2NodeClassStatus {
        EC2NodeClassStatus {
            subnets: Some(self.subnets.iter().map(|s| SubnetStatus { id: s.id.clone(), zone: s.zone.clone(), zone_id: s.zone_id.clone() }).collect()),
            security_groups: Some(self.security_groups.iter().map(|g| SecurityGroupStatus { id: g.id.clone(), name: g.name.clone() }).collect()),
            amis: Some(
                self.amis
                    .iter()
                    .map(|a| AmiStatus {
                        id: a.id.clone(),
                        name: a.name.clone(),
                        requirements: vec![k8s_openapi::api::core::v1::NodeSelectorRequirement { key: "kubernetes.io/arch".into(), operator: "In".into(), values: Some(vec![a.arch.clone()]) }],
                    })
                    .collect(),
            ),
            instance_profile: self.instance_profile.clone(),
            conditions: None,
        }
    }
}

/// Why a NodeClass could not be resolved.
#[derive(Debug)]
pub enum DiscoveryError {
    /// The selectors are invalid or found nothing: the message lists everything missing.
    NotReady(String),
    /// An EC2 call failed.
    Aws(AwsError),
}

impl From<AwsError> for DiscoveryError {
    fn from(e: AwsError) -> Self {
        DiscoveryError::Aws(e)
    }
}

/// How AMI aliases resolve (module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AliasOptions {
    /// EC2 arch (`x86_64`, `arm64`) → AMI id to use for `al2023@...` aliases.
    pub image_ids: BTreeMap<String, String>,
    /// Kubernetes minor version (`1.36`) for the EKS image name; any version when unset.
    pub kubernetes_version: Option<String>,
    /// Fall back to plain Amazon Linux 2023 images (emulators only).
    pub plain_al2023_fallback: bool,
}

fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    let mut f = Filter::builder().name(name);
    for v in values {
        f = f.values(v);
    }
    f.build()
}

fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter().map(|(k, v)| if v == "*" { filter("tag-key", [k.as_str()]) } else { filter(&format!("tag:{k}"), [v.as_str()]) }).collect()
}

/// The filter sets of subnet / security group terms: one per tag term, one for all id-only terms.
/// Errors name an empty or invalid term.
fn term_filters(what: &str, terms: &[SelectorTerm], id_filter: &str, name_filter: Option<&str>) -> Result<Vec<Vec<Filter>>, String> {
    if terms.is_empty() {
        return Err(format!("{what} is empty"));
    }
    let mut sets = Vec::new();
    let mut ids = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        let tags = t.tags.clone().unwrap_or_default();
        let name = t.name.as_deref().filter(|n| !n.is_empty());
        if t.name.is_some() && name_filter.is_none() {
            return Err(format!("{what}[{i}].name is not a selector for subnets"));
        }
        match (t.id.as_deref().filter(|s| !s.is_empty()), name, tags.is_empty()) {
            (Some(id), None, true) => ids.push(id.to_string()),
            (None, None, true) => return Err(format!("{what}[{i}] selects nothing (no id, name or tags)")),
            (id, name, _) => {
                let mut fs = tag_filters(&tags);
                if let Some(id) = id {
                    fs.push(filter(id_filter, [id]));
                }
                if let (Some(n), Some(nf)) = (name, name_filter) {
                    fs.push(filter(nf, [n]));
                }
                sets.push(fs);
            }
        }
    }
    if !ids.is_empty() {
        sets.push(vec![filter(id_filter, ids)]);
    }
    Ok(sets)
}

pub async fn subnets(ec2: &Ec2, terms: &[SelectorTerm]) -> Result<Result<Vec<Subnet>, String>, AwsError> {
    let sets = match term_filters("subnetSelectorTerms", terms, "subnet-id", None) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let mut found: BTreeMap<String, Subnet> = BTreeMap::new();
    for fs in sets {
        let mut token: Option<String> = None;
        loop {
            let req = ec2.client.describe_subnets().set_filters(Some(fs.clone())).max_results(500).set_next_token(token.clone());
            let out = ec2.call("DescribeSubnets", || req.clone().send()).await?;
            for s in out.subnets() {
                let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else { continue };
                found.insert(
                    id.to_string(),
                    Subnet { id: id.into(), zone: zone.into(), zone_id: s.availability_zone_id().map(str::to_string), free_ips: s.available_ip_address_count().unwrap_or(0) as i64 },
                );
            }
            token = out.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    let mut v: Vec<Subnet> = found.into_values().collect();
    v.sort_by(|a, b| b.free_ips.cmp(&a.free_ips).then_with(|| a.id.cmp(&b.id)));
    Ok(Ok(v))
}

pub async fn security_groups(ec2: &Ec2, terms: &[SelectorTerm]) -> Result<Result<Vec<SecurityGroup>, String>, AwsError> {
    let sets = match term_filters("securityGroupSelectorTerms", terms, "group-id", Some("group-name")) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let mut found: BTreeMap<String, SecurityGroup> = BTreeMap::new();
    for fs in sets {
        let mut token: Option<String> = None;
        loop {
            let req = ec2.client.describe_security_groups().set_filters(Some(fs.clone())).max_results(500).set_next_token(token.clone());
            let out = ec2.call("DescribeSecurityGroups", || req.clone().send()).await?;
            for g in out.security_groups() {
                let Some(id) = g.group_id() else { continue };
                found.insert(id.to_string(), SecurityGroup { id: id.into(), name: g.group_name().map(str::to_string) });
            }
            token = out.next_token().filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(Ok(found.into_values().collect()))
}

fn k8s_arch(ec2_arch: &str) -> Option<&'static str> {
    match ec2_arch {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

async fn describe_images(ec2: &Ec2, owners: &[String], filters: Vec<Filter>) -> Result<Vec<Ami>, AwsError> {
    let mut filters = filters;
    filters.push(filter("state", ["available"]));
    let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
    let mut out_images = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let req = ec2.client.describe_images().set_owners((!owners.is_empty()).then(|| owners.to_vec())).set_filters(Some(filters.clone())).max_results(1000).set_next_token(token.clone());
        let out = ec2.call("DescribeImages", || req.clone().send()).await?;
        for i in out.images() {
            let (Some(id), Some(arch)) = (i.image_id(), i.architecture().and_then(|a| k8s_arch(a.as_str()))) else { continue };
            let deprecated = i.deprecation_time().and_then(|t| aws_sdk_ec2::primitives::DateTime::from_str(t, aws_sdk_ec2::primitives::DateTimeFormat::DateTime).ok()).is_some_and(|t| t < now);
            out_images.push(Ami { id: id.into(), name: i.name().map(str::to_string), arch: arch.into(), created: i.creation_date().unwrap_or_default().to_string(), deprecated });
        }
        token = out.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(out_images)
}

/// Newest first: non-deprecated, then creation date, then name (the version in AMI names sorts).
fn newest(images: impl IntoIterator<Item = Ami>) -> Option<Ami> {
    images.into_iter().max_by(|a, b| (!a.deprecated, &a.created, &a.name).cmp(&(!b.deprecated, &b.created, &b.name)))
}

async fn alias_images(ec2: &Ec2, alias: &str, opts: &AliasOptions) -> Result<Result<Vec<Ami>, String>, AwsError> {
    let (family, version) = alias.split_once('@').unwrap_or((alias, "latest"));
    if family != "al2023" {
        return Ok(Err(format!(
            "amiSelectorTerms alias {alias:?}: stowage resolves al2023 aliases only (it writes AL2023 nodeadm user data); use amiFamily Custom with id/name/tags terms for other images"
        )));
    }
    let mut found = Vec::new();
    for arch in ["x86_64", "arm64"] {
        if let Some(id) = opts.image_ids.get(arch) {
            found.extend(describe_images(ec2, &[], vec![filter("image-id", [id.as_str()])]).await?);
            continue;
        }
        let k8s = opts.kubernetes_version.as_deref().unwrap_or("*");
        let v = if version == "latest" { "v*".to_string() } else { version.to_string() };
        let eks = format!("amazon-eks-node-al2023-{arch}-standard-{k8s}-{v}");
        let images = describe_images(ec2, &["amazon".to_string()], vec![filter("name", [eks])]).await?;
        if let Some(a) = newest(images) {
            found.push(a);
            continue;
        }
        if opts.plain_al2023_fallback {
            let plain = format!("al2023-ami-2023.*-{arch}");
            let images = describe_images(ec2, &["amazon".to_string()], vec![filter("name", [plain])]).await?;
            found.extend(newest(images.into_iter().filter(|a| !a.name.as_deref().unwrap_or("").contains("minimal"))));
        }
    }
    Ok(Ok(found))
}

pub async fn amis(ec2: &Ec2, nc: &EC2NodeClass, opts: &AliasOptions) -> Result<Result<Vec<Ami>, String>, AwsError> {
    let terms = &nc.spec.ami_selector_terms;
    if terms.is_empty() {
        return Ok(Err("amiSelectorTerms is empty".into()));
    }
    let mut all = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        if let Some(alias) = &t.alias {
            if terms.len() > 1 {
                return Ok(Err(format!("amiSelectorTerms[{i}]: an alias term must be the only term")));
            }
            match alias_images(ec2, alias, opts).await? {
                Ok(v) => all.extend(v),
                Err(e) => return Ok(Err(e)),
            }
            continue;
        }
        if t.ssm_parameter.is_some() {
            return Ok(Err(format!("amiSelectorTerms[{i}].ssmParameter: stowage does not read SSM parameters; select the image by id, name or tags")));
        }
        let mut fs = tag_filters(&t.tags.clone().unwrap_or_default());
        if let Some(id) = &t.id {
            fs.push(filter("image-id", [id.as_str()]));
        }
        if let Some(name) = &t.name {
            fs.push(filter("name", [name.as_str()]));
        }
        if fs.is_empty() {
            return Ok(Err(format!("amiSelectorTerms[{i}] selects nothing (no alias, id, name or tags)")));
        }
        let owners: Vec<String> = match (&t.owner, &t.name) {
            (Some(o), _) => o.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
            (None, Some(_)) if t.id.is_none() => vec!["self".into(), "amazon".into()],
            _ => Vec::new(),
        };
        all.extend(describe_images(ec2, &owners, fs).await?);
    }
    let mut by_arch: BTreeMap<String, Vec<Ami>> = BTreeMap::new();
    for a in all {
        by_arch.entry(a.arch.clone()).or_default().push(a);
    }
    Ok(Ok(by_arch.into_values().filter_map(newest).collect()))
}

/// The AMI family that decides the user data (`spec.amiFamily`, else the alias's, else Custom).
pub fn ami_family(nc: &EC2NodeClass) -> String {
    if let Some(f) = &nc.spec.ami_family {
        return f.clone();
    }
    match nc.spec.ami_selector_terms.iter().find_map(|t| t.alias.as_deref()).map(|a| a.split('@').next().unwrap_or("")) {
        Some("al2023") => "AL2023".into(),
        Some("al2") => "AL2".into(),
        Some("bottlerocket") => "Bottlerocket".into(),
        Some(other) if !other.is_empty() => other.to_string(),
        _ => "Custom".into(),
    }
}

/// Resolves everything; `NotReady` lists every missing part at once.
pub async fn resolve(ec2: &Ec2, nc: &EC2NodeClass, opts: &AliasOptions) -> Result<Resolved, DiscoveryError> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let mut missing = Vec::new();
    let family = ami_family(nc);
    if !matches!(family.as_str(), "AL2023" | "Custom") {
        missing.push(format!("amiFamily {family}: stowage writes user data for AL2023 (nodeadm) and Custom only"));
    }
    // Karpenter's CRD refuses these; the controller reports them as ValidationSucceeded=False and
    // never gets here, a caller that does gets NotReady instead of nodes whose kubelet does not start.
    missing.extend(nc.spec.kubelet.as_ref().map(|k| k.validate()).unwrap_or_default());
    let source = stowage_input::Source { file: format!("<EC2NodeClass {name}>").into(), doc: 1, item: None };
    let sizing = match stowage_input::karpenter::nodeclass(&stowage_input::objects::Obj { source, obj: nc.clone() }) {
        Ok(s) => Some(s),
        Err(e) => {
            missing.push(e.to_string());
            None
        }
    };
    let subnets = subnets(ec2, &nc.spec.subnet_selector_terms).await?;
    let groups = security_groups(ec2, &nc.spec.security_group_selector_terms).await?;
    let amis = amis(ec2, nc, opts).await?;
    match &subnets {
        Ok(v) if v.is_empty() => missing.push("no subnet matches subnetSelectorTerms".into()),
        Err(e) => missing.push(e.clone()),
        _ => {}
    }
    match &groups {
        Ok(v) if v.is_empty() => missing.push("no security group matches securityGroupSelectorTerms".into()),
        Err(e) => missing.push(e.clone()),
        _ => {}
    }
    match &amis {
        Ok(v) if v.is_empty() => missing.push(format!(
            "no AMI matches amiSelectorTerms{}",
            if nc.spec.ami_selector_terms.iter().any(|t| t.alias.is_some()) { " (aliases resolve by EKS image name, see AwsOptions::alias_image_ids and plain_al2023_fallback)" } else { "" }
        )),
        Err(e) => missing.push(e.clone()),
        _ => {}
    }
    match (missing.is_empty(), subnets, groups, amis, sizing) {
        (true, Ok(subnets), Ok(security_groups), Ok(amis), Some(sizing)) => {
            Ok(Resolved { subnets, security_groups, amis, ami_family: family, sizing, instance_profile: nc.spec.instance_profile.clone() })
        }
        _ => Err(DiscoveryError::NotReady(format!("EC2NodeClass {name}: {}", missing.join("; ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(tags: &[(&str, &str)], id: Option<&str>, name: Option<&str>) -> SelectorTerm {
        SelectorTerm { tags: (!tags.is_empty()).then(|| tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()), id: id.map(str::to_string), name: name.map(str::to_string) }
    }

    fn names(fs: &[Filter]) -> Vec<String> {
        fs.iter().map(|f| format!("{}={}", f.name().unwrap_or(""), f.values().join(","))).collect()
    }

    #[test]
    fn terms_are_ored_tags_anded_and_ids_merged() {
        let terms = vec![term(&[("karpenter.sh/discovery", "demo"), ("tier", "*")], None, None), term(&[], Some("subnet-1"), None), term(&[], Some("subnet-2"), None)];
        let sets = term_filters("subnetSelectorTerms", &terms, "subnet-id", None).unwrap();
        assert_eq!(sets.len(), 2);
        assert_eq!(names(&sets[0]), vec!["tag:karpenter.sh/discovery=demo", "tag-key=tier"]);
        assert_eq!(names(&sets[1]), vec!["subnet-id=subnet-1,subnet-2"]);
        let sg = term_filters("securityGroupSelectorTerms", &[term(&[], None, Some("nodes"))], "group-id", Some("group-name")).unwrap();
        assert_eq!(names(&sg[0]), vec!["group-name=nodes"]);
        assert!(term_filters("subnetSelectorTerms", &[term(&[], None, None)], "subnet-id", None).unwrap_err().contains("[0] selects nothing"));
        assert!(term_filters("subnetSelectorTerms", &[], "subnet-id", None).unwrap_err().contains("empty"));
    }

    #[test]
    fn newest_prefers_non_deprecated_then_date_then_name() {
        let a = |id: &str, created: &str, dep: bool| Ami { id: id.into(), name: Some(id.into()), arch: "amd64".into(), created: created.into(), deprecated: dep };
        let n = newest(vec![a("x", "2026-01-01", false), a("y", "2026-06-01", true), a("z", "2026-03-01", false)]).unwrap();
        assert_eq!(n.id, "z");
    }
}
