//! The catalog from EC2: instance types, where they are offered, prices, and the ICE cache.
//!
//! | call | parameters |
//! |---|---|
//! | `DescribeInstanceTypes` | filters `supported-virtualization-type=hvm`, `processor-info.supported-architecture` ∈ x86_64, arm64; `MaxResults` 100, paginated |
//! | `DescribeInstanceTypeOfferings` | `LocationType=availability-zone`; `MaxResults` 1000, paginated |
//!
//! A type enters the catalog when EC2 describes it and the embedded catalog has an on-demand price for
//! it (see [`super::pricing`]). Its facts (vCPUs, memory, architecture, ENIs on the default network
//! card, IPv4 addresses per ENI, local NVMe) come from DescribeInstanceTypes; capacity and overhead are
//! recomputed from them with Karpenter's AL2023 formulas (`catalog::aws`), so the planner's
//! `catalog::for_nodeclass` can redo them for any EC2NodeClass. Labels, extended resources (GPUs,
//! Neuron, EFA, pod ENIs: trunking limits are not in the EC2 API) and the branch-ENI count come from
//! the embedded catalog's entry for the type.
//!
//! Offerings: one per zone in (the type's offering zones ∩ the catalog's zones) × capacity type
//! (on-demand always, spot when `SupportedUsageClasses` has it); `available` is false while the
//! offering is in the ICE cache, or for spot without a spot price.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use aws_sdk_ec2::types::{Filter, LocationType, UsageClassType};

use super::Ec2;
use super::errors::AwsError;
use super::ice::IceCache;
use super::pricing::{self, OnDemandPrices, SpotPrices};
use stowage_core::catalog::aws as formulas;
use stowage_core::domain::catalog::{AwsFacts, Catalog, InstanceType, Offering};
use stowage_core::domain::nodepool::KubeletSettings;
use stowage_core::domain::resources::Resources;
use stowage_input::catalog::default_catalog;

/// What DescribeInstanceTypes says about one type.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeInfo {
    pub name: String,
    pub vcpu: i64,
    pub memory_mib: i64,
    /// Kubernetes arch (amd64, arm64).
    pub arch: String,
    pub spot: bool,
    pub on_demand: bool,
    pub enis_default_card: Option<i64>,
    pub ipv4_per_eni: Option<i64>,
    pub local_nvme_gb: i64,
}

/// Types and where they are offered, as fetched.
#[derive(Clone, Debug)]
pub struct TypeData {
    pub types: Vec<TypeInfo>,
    /// type → zones offering it.
    pub zones: BTreeMap<String, BTreeSet<String>>,
    pub fetched_at: Instant,
}

fn to_info(t: &aws_sdk_ec2::types::InstanceTypeInfo) -> Option<TypeInfo> {
    let name = t.instance_type()?.as_str().to_string();
    let arch = t.processor_info()?.supported_architectures().iter().find_map(|a| match a.as_str() {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    })?;
    let net = t.network_info();
    let default_card = net.and_then(|n| n.default_network_card_index()).unwrap_or(0);
    let card_enis = net.and_then(|n| n.network_cards().iter().find(|c| c.network_card_index() == Some(default_card)).and_then(|c| c.maximum_network_interfaces()));
    let storage = t.instance_storage_info();
    let nvme = storage.filter(|s| s.nvme_support().is_some_and(|n| n.as_str() != "unsupported")).and_then(|s| s.total_size_in_gb()).unwrap_or(0);
    Some(TypeInfo {
        name,
        vcpu: i64::from(t.v_cpu_info()?.default_v_cpus()?),
        memory_mib: t.memory_info()?.size_in_mib()?,
        arch: arch.to_string(),
        spot: t.supported_usage_classes().contains(&UsageClassType::Spot),
        on_demand: t.supported_usage_classes().contains(&UsageClassType::OnDemand),
        enis_default_card: card_enis.or_else(|| net.and_then(|n| n.maximum_network_interfaces())).map(i64::from),
        ipv4_per_eni: net.and_then(|n| n.ipv4_addresses_per_interface()).map(i64::from),
        local_nvme_gb: nvme,
    })
}

pub async fn fetch(ec2: &Ec2) -> Result<TypeData, AwsError> {
    let filters =
        vec![Filter::builder().name("supported-virtualization-type").values("hvm").build(), Filter::builder().name("processor-info.supported-architecture").values("x86_64").values("arm64").build()];
    let mut types = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let req = ec2.client.describe_instance_types().set_filters(Some(filters.clone())).max_results(100).set_next_token(token.clone());
        let page = ec2.call("DescribeInstanceTypes", || req.clone().send()).await?;
        types.extend(page.instance_types().iter().filter_map(to_info));
        token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    let mut zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let req = ec2.client.describe_instance_type_offerings().location_type(LocationType::AvailabilityZone).max_results(1000).set_next_token(token.clone());
        let page = ec2.call("DescribeInstanceTypeOfferings", || req.clone().send()).await?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                zones.entry(t.as_str().to_string()).or_default().insert(z.to_string());
            }
        }
        token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    types.sort_by(|a, b| a.name.cmp(&b.name));
    types.dedup_by(|a, b| a.name == b.name);
    if types.is_empty() {
        return Err(AwsError::invalid_response("DescribeInstanceTypes", "no instance types (hvm, x86_64/arm64) returned"));
    }
    Ok(TypeData { types, zones, fetched_at: Instant::now() })
}

/// The AWS facts of a type: from the fetched data when there is some, else the embedded catalog.
pub fn facts(data: Option<&TypeData>, name: &str) -> Option<AwsFacts> {
    let embedded = default_catalog().get(name).and_then(|t| t.aws.clone());
    let Some(info) = data.and_then(|d| d.types.iter().find(|t| t.name == name)) else { return embedded };
    Some(AwsFacts {
        vcpu: info.vcpu,
        memory_mib: info.memory_mib,
        arch: info.arch.clone(),
        enis_default_card: info.enis_default_card.or(embedded.as_ref().and_then(|e| e.enis_default_card)),
        ipv4_per_eni: info.ipv4_per_eni.or(embedded.as_ref().and_then(|e| e.ipv4_per_eni)),
        branch_enis: embedded.as_ref().map(|e| e.branch_enis).unwrap_or(0),
        local_nvme_gb: info.local_nvme_gb,
    })
}

fn offerings(name: &str, zones: &BTreeSet<String>, od: f64, spot_ok: bool, od_ok: bool, spot: &SpotPrices, ice: &IceCache) -> Vec<Offering> {
    let mut v = Vec::new();
    for z in zones {
        if od_ok {
            v.push(Offering { zone: z.clone(), capacity_type: "on-demand".into(), price: od, available: !ice.offering_unavailable("on-demand", name, z), synthetic: false, reservation: None });
        }
        if spot_ok {
            let (price, synthetic, priced) = match spot.price(name, z, od) {
                Some((p, s)) => (p, s, true),
                None => (od, false, false),
            };
            v.push(Offering { zone: z.clone(), capacity_type: "spot".into(), price, available: priced && !ice.offering_unavailable("spot", name, z), synthetic, reservation: None });
        }
    }
    v
}

/// Builds the catalog for `zones` from fetched data (module docs).
pub fn build(region: &str, zones: &BTreeSet<String>, data: &TypeData, spot: &SpotPrices, on_demand: &OnDemandPrices, ice: &IceCache) -> Catalog {
    let mut types = Vec::new();
    let (mut unpriced, mut changed) = (0, 0);
    for info in &data.types {
        let Some(base) = default_catalog().get(&info.name) else {
            unpriced += 1;
            continue;
        };
        let Some(od) = on_demand.price(&info.name) else {
            unpriced += 1;
            continue;
        };
        let Some(f) = facts(Some(data), &info.name) else { continue };
        let type_zones: BTreeSet<String> = data.zones.get(&info.name).map(|z| z.intersection(zones).cloned().collect()).unwrap_or_default();
        let mut t: InstanceType = base.clone();
        if t.aws.as_ref() != Some(&f) {
            changed += 1;
            let mut extended = Resources::default();
            for (n, v) in base.capacity.extended() {
                extended.set(n, *v);
            }
            let k = KubeletSettings::default();
            let mut cap = formulas::capacity(&f, "AL2023", &k, None, false, &extended);
            if f.enis_default_card.is_none() || f.ipv4_per_eni.is_none() {
                // Without ENI data the formula says 110; the embedded catalog has Karpenter's count.
                cap.pods = base.capacity.pods;
            }
            t.overhead = formulas::overhead(&f, "AL2023", &k, &cap);
            t.capacity = cap;
            t.labels.insert("karpenter.k8s.aws/instance-cpu".into(), f.vcpu.to_string());
            t.labels.insert("karpenter.k8s.aws/instance-memory".into(), f.memory_mib.to_string());
            t.labels.insert("kubernetes.io/arch".into(), f.arch.clone());
            t.aws = Some(f);
        }
        t.offerings = offerings(&info.name, &type_zones, od, info.spot, info.on_demand, spot, ice);
        if !t.offerings.is_empty() {
            types.push(t);
        }
    }
    let provenance = vec![
        format!(
            "Instance types: EC2 DescribeInstanceTypes in {region} ({} hvm x86_64/arm64 types; {unpriced} left out for want of an on-demand price); offerings: DescribeInstanceTypeOfferings by availability zone, restricted to the zones of the EC2NodeClass subnets ({}).",
            data.types.len(),
            zones.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
        format!(
            "Capacity and overhead: Karpenter's AL2023 formulas (src/catalog/aws.rs) on the API's facts; {changed} types' facts differ from the embedded catalog's and were recomputed. Labels and extended resources: the embedded catalog."
        ),
        on_demand.provenance(region),
        spot.provenance(),
        "Availability: offerings in the unavailable-offerings (ICE) cache for 3 minutes after a capacity error are marked available: false.".to_string(),
    ];
    Catalog { name: format!("aws-{region}"), region: Some(region.to_string()), zones: zones.iter().cloned().collect(), provenance, types }
}

/// The embedded catalog moved onto `zones`, for when EC2 cannot be asked (`why`).
pub fn offline(region: &str, zones: &BTreeSet<String>, ice: &IceCache, why: &str) -> Catalog {
    let base = default_catalog();
    let zones: BTreeSet<String> = if zones.is_empty() { base.zones.iter().cloned().collect() } else { zones.clone() };
    let spot = SpotPrices::synthetic("EC2 was not reachable");
    let mut types = Vec::with_capacity(base.types.len());
    for t in &base.types {
        let Some(od) = pricing::on_demand(&t.name) else { continue };
        let spot_ok = t.offerings.iter().any(|o| o.capacity_type == "spot");
        let mut t = t.clone();
        t.offerings = offerings(&t.name, &zones, od, spot_ok, true, &spot, ice);
        types.push(t);
    }
    let mut provenance = vec![format!(
        "OFFLINE: EC2 could not be asked ({why}); this is stowage's embedded catalog with every type offered in every zone ({}), which may include types or zones EC2 does not offer.",
        zones.iter().cloned().collect::<Vec<_>>().join(", ")
    )];
    provenance.extend(base.provenance.iter().cloned());
    Catalog { name: format!("aws-{region}"), region: Some(region.to_string()), zones: zones.into_iter().collect(), provenance, types }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn data() -> TypeData {
        let m5 =
            TypeInfo { name: "m5.large".into(), vcpu: 2, memory_mib: 8192, arch: "amd64".into(), spot: true, on_demand: true, enis_default_card: Some(3), ipv4_per_eni: Some(10), local_nvme_gb: 0 };
        let odd = TypeInfo { name: "zz.unknown".into(), ..m5.clone() };
        let zones = [("m5.large".to_string(), ["us-east-1a", "us-east-1b", "us-east-1e"].iter().map(|s| s.to_string()).collect())].into_iter().collect();
        TypeData { types: vec![m5, odd], zones, fetched_at: Instant::now() }
    }

    #[test]
    fn catalog_from_api_data_matches_karpenter_and_applies_zones_and_ice() {
        let zones: BTreeSet<String> = ["us-east-1a", "us-east-1b", "us-east-1c"].iter().map(|s| s.to_string()).collect();
        let ice = IceCache::new(Duration::from_secs(180));
        ice.mark("spot:m5.large:us-east-1b", "InsufficientInstanceCapacity");
        let c = build("us-east-1", &zones, &data(), &SpotPrices::synthetic("test"), &OnDemandPrices::embedded("test"), &ice);
        assert_eq!(c.types.len(), 1, "types without a price are left out");
        let m5 = c.get("m5.large").unwrap();
        let a = m5.allocatable();
        assert_eq!((a.cpu_m, a.memory >> 20, a.pods), (1930, 6903, 29));
        let zs: BTreeSet<&str> = m5.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(zs, ["us-east-1a", "us-east-1b"].into_iter().collect(), "offering zones ∩ subnet zones");
        let spot_b = m5.offerings.iter().find(|o| o.zone == "us-east-1b" && o.capacity_type == "spot").unwrap();
        assert!(!spot_b.available && spot_b.synthetic);
        assert!(m5.offerings.iter().filter(|o| o.capacity_type == "on-demand").all(|o| o.available && (o.price - 0.096).abs() < 1e-9));
        assert!(c.provenance.iter().any(|p| p.starts_with("SPOT PRICES ARE SYNTHETIC")));
    }

    #[test]
    fn the_price_list_apis_prices_win_and_unpriced_types_keep_the_tables() {
        let zones: BTreeSet<String> = ["eu-west-1a"].iter().map(|s| s.to_string()).collect();
        let mut d = data();
        d.zones.insert("m5.large".into(), zones.clone());
        let ice = IceCache::new(Duration::from_secs(180));
        // The API prices m5.large for the region and also the type the table lacks.
        let api = OnDemandPrices::from_api("eu-west-1", [("m5.large".to_string(), 0.107), ("zz.unknown".to_string(), 1.0)].into_iter().collect());
        let c = build("eu-west-1", &zones, &d, &SpotPrices::synthetic("test"), &api, &ice);
        let od = c.get("m5.large").unwrap().offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap().price;
        assert!((od - 0.107).abs() < 1e-12, "{od}");
        assert!(c.get("zz.unknown").is_none(), "a type the embedded catalog lacks has no labels or facts to plan with");
        assert!(c.provenance.iter().any(|p| p.contains("Price List API for eu-west-1 (2 types)")), "{:?}", c.provenance);
        // Without the API, eu-west-1 gets us-east-1's prices, and the provenance shouts it.
        let c = build("eu-west-1", &zones, &d, &SpotPrices::synthetic("test"), &OnDemandPrices::embedded("isolatedVPC is set"), &ice);
        let od = c.get("m5.large").unwrap().offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap().price;
        assert!((od - 0.096).abs() < 1e-12, "{od}");
        assert!(c.provenance.iter().any(|p| p.contains("US-EAST-1 PRICES USED FOR THIS REGION") && p.contains("isolatedVPC")), "{:?}", c.provenance);
    }

    #[test]
    fn offline_catalog_uses_the_given_zones() {
        let zones: BTreeSet<String> = ["us-east-1d"].iter().map(|s| s.to_string()).collect();
        let c = offline("us-east-1", &zones, &IceCache::new(Duration::from_secs(1)), "test");
        assert_eq!(c.zones, vec!["us-east-1d"]);
        assert!(c.provenance[0].starts_with("OFFLINE"));
        assert!(c.get("m5.large").unwrap().offerings.iter().all(|o| o.zone == "us-east-1d"));
    }
}
