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
//! **AMIs.** Terms are resolved as Karpenter's `amifamily.DescribeImageQueries` does:
//!
//! - an `alias` term (it must stand alone) reads the public SSM parameters of its family, version and
//!   the cluster's Kubernetes minor version ([`super::amifamily`], [`super::ssm`]); the image ids found
//!   are described (`DescribeImages image-id=…`) and each image carries the requirements of its
//!   variant (standard, nvidia, neuron) besides its architecture. Parameters that do not exist are
//!   skipped. Two options serve environments without those parameters: `AliasOptions::image_ids`
//!   (EC2 arch → AMI id, for `al2023@` aliases: that image for every type of the arch, SSM not asked
//!   for the arch) and `AliasOptions::plain_al2023_fallback` (emulators only: an `al2023@` alias whose
//!   parameters give no image for an arch takes the newest non-minimal plain `al2023-ami-2023.*-<arch>`
//!   image owned by `amazon`; it has no kubelet, so this is never right against real EC2);
//! - `id` terms, and the AMI ids `ssmParameter` terms' parameters hold (`GetParameter`; a missing
//!   parameter or a value that is not an AMI id is skipped and named if nothing is found), go into one
//!   `image-id` filter;
//! - `name` / `tags` / `owner` terms are one `DescribeImages` each (`Owners` = the term's owner or, for
//!   name terms, `self,amazon`).
//!
//! Among all images the terms return, each requirement set (architecture, variant) takes the newest
//! non-deprecated image (a deprecated one only if nothing else matches); the list is ordered newest
//! first, as Karpenter orders `status.amis`, and a launch gives each instance type the first image its
//! labels satisfy.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::Filter;

use super::Ec2;
use super::amifamily::{self, Family, Variant};
use super::errors::AwsError;
use super::filters::{filter, tag_filters};
use super::ssm::Ssm;
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
    /// The instance types an alias's image is for (from its SSM parameter); `None`: every type of
    /// its architecture (id, name, tags, ssmParameter terms; configured and fallback images).
    pub variant: Option<Variant>,
}

impl Ami {
    /// `status.amis[].requirements`: the architecture, then the variant's.
    pub fn requirements(&self) -> Vec<k8s_openapi::api::core::v1::NodeSelectorRequirement> {
        let mut v = vec![k8s_openapi::api::core::v1::NodeSelectorRequirement { key: "kubernetes.io/arch".into(), operator: "In".into(), values: Some(vec![self.arch.clone()]) }];
        v.extend(self.variant.map(Variant::requirements).unwrap_or_default());
        v
    }

    /// Whether an instance type of `arch` with `labels` may run this image.
    pub fn admits(&self, arch: &str, labels: &BTreeMap<String, String>) -> bool {
        self.arch == arch && self.variant.is_none_or(|v| v.admits(labels))
    }
}

/// A NodeClass with everything its selectors found.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<SecurityGroup>,
    /// At most one per requirement set (architecture, variant), newest first.
    pub amis: Vec<Ami>,
    /// The user data stowage writes.
    pub family: Family,
    /// Sizing view of the NodeClass (kubelet settings, root volume) for maxPods.
    pub sizing: NodeClass,
    /// `spec.instanceProfile`, or the profile made for `spec.role` ([`super::instance_profile`]; set by
    /// the provider after discovery).
    pub instance_profile: Option<String>,
    /// The capacity reservations `capacityReservationSelectorTerms` select, by id
    /// ([`super::capacity_reservations`]).
    pub capacity_reservations: Vec<super::capacity_reservations::CapacityReservation>,
}

impl Resolved {
    pub fn zones(&self) -> BTreeSet<String> {
        self.subnets.iter().map(|s| s.zone.clone()).collect()
    }

    /// The image an instance type of `arch` with `labels` launches with: the first that admits it.
    pub(crate) fn ami_for(&self, arch: &str, labels: &BTreeMap<String, String>) -> Option<&Ami> {
        self.amis.iter().find(|a| a.admits(arch, labels))
    }

    /// What the controller writes into `EC2NodeClass.status` (conditions are the controller's).
    pub fn status(&self) -> EC2NodeClassStatus {
        EC2NodeClassStatus {
            subnets: Some(self.subnets.iter().map(|s| SubnetStatus { id: s.id.clone(), zone: s.zone.clone(), zone_id: s.zone_id.clone() }).collect()),
            security_groups: Some(self.security_groups.iter().map(|g| SecurityGroupStatus { id: g.id.clone(), name: g.name.clone() }).collect()),
            amis: Some(self.amis.iter().map(|a| AmiStatus { id: a.id.clone(), name: a.name.clone(), requirements: a.requirements() }).collect()),
            instance_profile: self.instance_profile.clone(),
            capacity_reservations: (!self.capacity_reservations.is_empty()).then(|| self.capacity_reservations.iter().map(|r| r.status()).collect()),
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
    /// Kubernetes minor version (`1.36`) whose SSM parameters aliases read; aliases find no image
    /// without it (except through `image_ids` and the fallback).
    pub kubernetes_version: Option<String>,
    /// Fall back to plain Amazon Linux 2023 images (emulators only).
    pub plain_al2023_fallback: bool,
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
            out_images.push(Ami { id: id.into(), name: i.name().map(str::to_string), arch: arch.into(), created: i.creation_date().unwrap_or_default().to_string(), deprecated, variant: None });
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

/// A retryable error is returned (the caller keeps its previous result); any other SSM error is a
/// note for the NodeClass's condition.
fn ssm_note(e: AwsError, what: &str, notes: &mut Vec<String>) -> Result<(), AwsError> {
    if e.class.retryable() {
        return Err(e);
    }
    notes.push(format!("{what}: {e}"));
    Ok(())
}

/// The images of an alias term (module docs). `Err` inside: why the alias cannot be resolved at all;
/// an empty list comes with notes saying what was looked for.
async fn alias_images(ec2: &Ec2, ssm: &Ssm, alias: &str, opts: &AliasOptions, notes: &mut Vec<String>) -> Result<Result<Vec<Ami>, String>, AwsError> {
    let (family, version) = match Family::of_alias(alias) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("amiSelectorTerms[0]: {e}"))),
    };
    let mut found: Vec<Ami> = Vec::new();
    if family == Family::Al2023 {
        for id in opts.image_ids.values() {
            found.extend(describe_images(ec2, &[], vec![filter("image-id", [id.as_str()])]).await?);
        }
    }
    let configured: BTreeSet<String> = found.iter().map(|a| a.arch.clone()).collect();
    match opts.kubernetes_version.as_deref().and_then(amifamily::minor_version) {
        Some(k8s) => {
            let params = match amifamily::alias_parameters(family, &version, &k8s) {
                Ok(p) => p,
                Err(e) => return Ok(Err(format!("amiSelectorTerms[0]: {e}"))),
            };
            let mut ids: BTreeMap<String, Vec<Variant>> = BTreeMap::new();
            let mut missing = Vec::new();
            for p in &params {
                match ssm.get(&p.name).await {
                    Ok(Some(id)) => ids.entry(id).or_default().extend(p.variants.iter().copied()),
                    Ok(None) => missing.push(p.name.clone()),
                    Err(e) => ssm_note(e, &format!("SSM parameter {}", p.name), notes)?,
                }
            }
            if !ids.is_empty() {
                for img in describe_images(ec2, &[], vec![filter("image-id", ids.keys().map(String::as_str))]).await? {
                    if configured.contains(&img.arch) {
                        continue;
                    }
                    for v in ids.get(&img.id).into_iter().flatten() {
                        found.push(Ami { variant: Some(*v), ..img.clone() });
                    }
                }
            }
            if found.is_empty() {
                notes.push(format!(
                    "alias {alias}: {} of its {} SSM parameters exist{}",
                    params.len() - missing.len(),
                    params.len(),
                    if missing.is_empty() { String::new() } else { format!(" (not found: {})", missing.join(", ")) }
                ));
            }
        }
        None => notes.push(format!("alias {alias}: the cluster's Kubernetes version is unknown (eks:DescribeCluster or --kubernetes-version), so its SSM parameters cannot be named")),
    }
    if family == Family::Al2023 && opts.plain_al2023_fallback {
        for (ec2_arch, arch) in [("x86_64", "amd64"), ("arm64", "arm64")] {
            if found.iter().any(|a| a.arch == arch) {
                continue;
            }
            let plain = format!("al2023-ami-2023.*-{ec2_arch}");
            let images = describe_images(ec2, &["amazon".to_string()], vec![filter("name", [plain])]).await?;
            found.extend(newest(images.into_iter().filter(|a| !a.name.as_deref().unwrap_or("").contains("minimal"))));
        }
    }
    Ok(Ok(found))
}

/// The AMI ids of `ssmParameter` terms: missing parameters and values that are not AMI ids are skipped
/// (as Karpenter does) and noted.
async fn ssm_parameter_image(ssm: &Ssm, i: usize, name: &str, notes: &mut Vec<String>) -> Result<Option<String>, AwsError> {
    let what = format!("amiSelectorTerms[{i}].ssmParameter {name}");
    match ssm.get(name).await {
        Ok(Some(v)) if v.trim().starts_with("ami-") => return Ok(Some(v.trim().to_string())),
        Ok(Some(v)) => notes.push(format!("{what}: its value {v:?} is not an AMI id")),
        Ok(None) => notes.push(format!("{what}: no such SSM parameter")),
        Err(e) => ssm_note(e, &what, notes)?,
    }
    Ok(None)
}

/// The images of the terms, newest per requirement set, newest first. `Err` inside: the terms are
/// invalid, or nothing was found (the message says what was looked for).
pub async fn amis(ec2: &Ec2, ssm: &Ssm, nc: &EC2NodeClass, opts: &AliasOptions) -> Result<Result<Vec<Ami>, String>, AwsError> {
    let terms = &nc.spec.ami_selector_terms;
    if terms.is_empty() {
        return Ok(Err("amiSelectorTerms is empty".into()));
    }
    let mut all = Vec::new();
    let mut notes = Vec::new();
    let mut ids = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        if let Some(alias) = &t.alias {
            if terms.len() > 1 {
                return Ok(Err(format!("amiSelectorTerms[{i}]: an alias term must be the only term")));
            }
            match alias_images(ec2, ssm, alias, opts, &mut notes).await? {
                Ok(v) => all.extend(v),
                Err(e) => return Ok(Err(e)),
            }
            continue;
        }
        if let Some(p) = t.ssm_parameter.as_deref().filter(|p| !p.is_empty()) {
            ids.extend(ssm_parameter_image(ssm, i, p, &mut notes).await?);
            continue;
        }
        if let Some(id) = t.id.as_deref().filter(|id| !id.is_empty()) {
            ids.push(id.to_string());
            continue;
        }
        let mut fs = tag_filters(&t.tags.clone().unwrap_or_default());
        if let Some(name) = &t.name {
            fs.push(filter("name", [name.as_str()]));
        }
        if fs.is_empty() {
            return Ok(Err(format!("amiSelectorTerms[{i}] selects nothing (no alias, id, name, tags or ssmParameter)")));
        }
        let owners: Vec<String> = match (&t.owner, &t.name) {
            (Some(o), _) => o.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
            (None, Some(_)) => vec!["self".into(), "amazon".into()],
            _ => Vec::new(),
        };
        all.extend(describe_images(ec2, &owners, fs).await?);
    }
    if !ids.is_empty() {
        all.extend(describe_images(ec2, &[], vec![filter("image-id", ids.iter().map(String::as_str))]).await?);
    }
    let mut by_reqs: BTreeMap<(String, Option<Variant>), Vec<Ami>> = BTreeMap::new();
    for a in all {
        by_reqs.entry((a.arch.clone(), a.variant)).or_default().push(a);
    }
    let mut found: Vec<Ami> = by_reqs.into_values().filter_map(newest).collect();
    // Karpenter's order of status.amis: newest first, then by id.
    found.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| a.id.cmp(&b.id)).then_with(|| a.variant.cmp(&b.variant)));
    if found.is_empty() {
        let why = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
        return Ok(Err(format!("no AMI matches amiSelectorTerms{why}")));
    }
    Ok(Ok(found))
}

/// The AMI family whose user data stowage writes (Karpenter's CRD rules): `spec.amiFamily`, which
/// must be the alias's family or Custom when there is an alias; else the alias's family. Without an
/// alias `spec.amiFamily` is required. Windows is refused.
pub fn ami_family(nc: &EC2NodeClass) -> Result<Family, String> {
    let alias = nc.spec.ami_selector_terms.iter().find_map(|t| t.alias.as_deref());
    let alias_family = alias.map(|a| Family::of_alias(a).map(|(f, _)| f)).transpose()?;
    match (nc.spec.ami_family.as_deref(), alias_family) {
        (Some(f), Some(a)) => {
            let f = Family::parse(f)?;
            if f != a && f != Family::Custom {
                return Err(format!("spec.amiFamily {} does not match the alias {:?}: it must be {} or Custom", f.as_str(), alias.unwrap_or_default(), a.as_str()));
            }
            Ok(f)
        }
        (Some(f), None) => Family::parse(f),
        (None, Some(a)) => Ok(a),
        (None, None) => Err("spec.amiFamily is required when amiSelectorTerms has no alias (Karpenter's CRD refuses such an EC2NodeClass): AL2023, AL2, Bottlerocket or Custom".into()),
    }
}

/// Resolves everything; `NotReady` lists every missing part at once.
pub async fn resolve(ec2: &Ec2, ssm: &Ssm, nc: &EC2NodeClass, opts: &AliasOptions) -> Result<Resolved, DiscoveryError> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let mut missing = Vec::new();
    let family = match ami_family(nc) {
        Ok(f) => Some(f),
        Err(e) => {
            missing.push(e);
            None
        }
    };
    if family == Some(Family::Bottlerocket)
        && let Err(e) = super::userdata::bottlerocket::parse_user_data(nc.spec.user_data.as_deref())
    {
        missing.push(e);
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
    for (i, t) in nc.spec.capacity_reservation_selector_terms.iter().flatten().enumerate() {
        missing.extend(t.validate(&format!("spec.capacityReservationSelectorTerms[{i}]")));
    }
    let subnets = subnets(ec2, &nc.spec.subnet_selector_terms).await?;
    let capacity_reservations = match &nc.spec.capacity_reservation_selector_terms {
        Some(t) if !t.is_empty() && missing.is_empty() => super::capacity_reservations::describe(ec2, t).await?,
        _ => Vec::new(),
    };
    let groups = security_groups(ec2, &nc.spec.security_group_selector_terms).await?;
    // An unusable family (Windows, a bad alias) is reported once, not again as "no AMI".
    let amis = if family.is_some() { amis(ec2, ssm, nc, opts).await? } else { Err(String::new()) };
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
    if let Some(e) = amis.as_ref().err().filter(|e| !e.is_empty()) {
        missing.push(e.clone());
    }
    match (missing.is_empty(), subnets, groups, amis, sizing, family) {
        (true, Ok(subnets), Ok(security_groups), Ok(amis), Some(sizing), Some(family)) => {
            Ok(Resolved { subnets, security_groups, amis, family, sizing, instance_profile: nc.spec.instance_profile.clone(), capacity_reservations })
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
        let a = |id: &str, created: &str, dep: bool| Ami { id: id.into(), name: Some(id.into()), arch: "amd64".into(), created: created.into(), deprecated: dep, variant: None };
        let n = newest(vec![a("x", "2026-01-01", false), a("y", "2026-06-01", true), a("z", "2026-03-01", false)]).unwrap();
        assert_eq!(n.id, "z");
    }
}
