//! Catalog generators.
//!
//! * [`aws`]: the default catalog from the offline AWS data (`models/aws/`, extracted from
//!   aws/karpenter-provider-aws, see models/aws/README.md). Capacity and overhead come from Karpenter's
//!   formulas with AL2023 defaults and are checked against the allocatable Karpenter publishes for
//!   every type. On-demand prices are real; **spot prices are synthetic** (the data has none):
//!   `spot = on-demand × (0.30 + 0.25 × u)`, with u ∈ [0, 1) a stable hash of (type, zone), rounded to
//!   6 decimals, and every spot offering carries `priceSource: synthetic`.
//! * [`karpenter_benchmark`]: Karpenter's scheduling-benchmark types (`fake.InstanceTypes(n)`,
//!   ../shared/docs/karpenter.md §13): type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, kube-reserved
//!   100m / 10Mi, spot in test-zone-1/2 and on-demand in test-zone-1/2/3, price (i+1) × 0.3147483648
//!   (0.1 per vCPU + 0.1 per GB) for both.

use std::collections::BTreeMap;

use serde_json::Value;

use super::CatalogError;
use super::file::{AwsFile, CatalogFile, OfferingFile, OverheadFile, SCHEMA, TypeFile};
use crate::ids::stable_hash;
use crate::quantity::format as qfmt;
use stowage_core::catalog::aws as formulas;
use stowage_core::domain::catalog::AwsFacts;
use stowage_core::domain::nodepool::KubeletSettings;
use stowage_core::domain::resources::Resources;

/// Synthetic spot price for a type in a zone (see module docs).
pub fn synthetic_spot(on_demand: f64, itype: &str, zone: &str) -> f64 {
    let u = (stable_hash(&[itype, zone, "spot"]) % 1_000_000) as f64 / 1_000_000.0;
    round6(on_demand * (0.30 + 0.25 * u))
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(|x| match x {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

fn i(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn map(r: &Resources) -> BTreeMap<String, String> {
    r.iter().map(|(n, v)| (n.to_string(), qfmt(n, v))).collect()
}

/// Builds the default AWS catalog. `types_json` is `instance-types.json` (an array), `prices_json` is
/// `ondemand-prices.json`. Returns the catalog and the number of types checked against Karpenter's
/// published allocatable; errors list every mismatch.
pub fn aws(types_json: &str, prices_json: &str, region: &str, zones: &[&str]) -> Result<(CatalogFile, usize), CatalogError> {
    let types: Vec<Value> = serde_json::from_str(types_json).map_err(|e| CatalogError::AwsData { file: "instance-types.json", message: e.to_string() })?;
    let prices: Value = serde_json::from_str(prices_json).map_err(|e| CatalogError::AwsData { file: "ondemand-prices.json", message: e.to_string() })?;
    let prices = prices.get(region).ok_or_else(|| CatalogError::NoRegion { region: region.to_string() })?;
    let mut out = Vec::new();
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for t in &types {
        let Some(built) = aws_type(t, prices, zones) else { continue };
        match built.published {
            Published::Absent => {}
            Published::Matches => checked += 1,
            Published::Differs(m) => {
                checked += 1;
                mismatches.push(m);
            }
        }
        out.push(built.file);
    }
    if !mismatches.is_empty() {
        return Err(CatalogError::AllocatableMismatch { mismatches });
    }
    Ok((
        CatalogFile {
            schema: SCHEMA.into(),
            name: format!("aws-{region}"),
            region: Some(region.into()),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            provenance: aws_provenance(region, zones),
            instance_types: out,
        },
        checked,
    ))
}

/// How a generated type compares with the allocatable Karpenter publishes for it.
enum Published {
    /// Karpenter publishes none for this type.
    Absent,
    Matches,
    /// `<type>: published .., computed ..`.
    Differs(String),
}

/// One entry of `instance-types.json` as a catalog type.
struct AwsType {
    file: TypeFile,
    published: Published,
}

/// The catalog type of one entry of `instance-types.json`, or `None` for an entry the catalog leaves
/// out (no price in the region, missing hardware facts, a1.*).
fn aws_type(t: &Value, prices: &Value, zones: &[&str]) -> Option<AwsType> {
    let name = s(t, "name")?;
    let price = prices.get(&name).and_then(Value::as_f64)?;
    let (Some(vcpu), Some(memory_mib), Some(arch)) = (i(t, "vcpu"), i(t, "memory_mib"), s(t, "architecture")) else { return None };
    // a1.* cannot run AL2023 (Karpenter's compatibility filter); the default NodeClass family.
    if name.starts_with("a1.") {
        return None;
    }
    let facts = AwsFacts {
        vcpu,
        memory_mib,
        arch: arch.clone(),
        enis_default_card: i(t, "enis_default_card"),
        ipv4_per_eni: i(t, "ipv4_per_eni"),
        branch_enis: if t.get("trunking_compatible").and_then(Value::as_bool).unwrap_or(false) { i(t, "branch_enis").unwrap_or(0) } else { 0 },
        local_nvme_gb: i(t, "local_nvme_gb").unwrap_or(0),
    };
    let gpus = i(t, "gpu_count").unwrap_or(0);
    let k = KubeletSettings::default();
    let mut cap = formulas::capacity(&facts, "AL2023", &k, None, false, &extended_resources(t, &facts, gpus));
    // Karpenter falls back to 110 pods only without ENI data; the published table then gives the
    // real count, which we take.
    let published = t.get("karpenter_al2023_allocatable");
    if facts.enis_default_card.is_none()
        && let Some(p) = published.and_then(|p| i(p, "pods"))
    {
        cap.pods = p;
    }
    let over = formulas::overhead(&facts, "AL2023", &k, &cap);
    let alloc = cap.minus(&over);
    let published = match published.filter(|p| !p.is_null()) {
        None => Published::Absent,
        Some(p) => {
            let want = (i(p, "cpu_millicores"), i(p, "memory_mib"), i(p, "ephemeral_storage_gib"), i(p, "pods"));
            let got = (Some(alloc.cpu_m), Some(alloc.memory >> 20), Some(alloc.ephemeral >> 30), Some(alloc.pods));
            if want != got { Published::Differs(format!("{name}: published {want:?}, computed {got:?}")) } else { Published::Matches }
        }
    };
    let labels = aws_labels(t, &name, &facts, gpus);
    let kube_reserved = Resources::new(formulas::kube_reserved_cpu_m(vcpu), over.memory - 100 * (1 << 20), 1 << 30, 0);
    let eviction = Resources::new(0, 100 << 20, over.ephemeral - (1 << 30), 0);
    debug_assert_eq!(kube_reserved.plus(&eviction), over);
    let mut offerings = Vec::new();
    for z in zones {
        offerings.push(OfferingFile { zone: z.to_string(), capacity_type: "on-demand".into(), price, available: true, price_source: None, reservation: None });
        offerings.push(OfferingFile {
            zone: z.to_string(),
            capacity_type: "spot".into(),
            price: synthetic_spot(price, &name, z),
            available: true,
            price_source: Some("synthetic".into()),
            reservation: None,
        });
    }
    let file = TypeFile {
        name,
        labels,
        capacity: map(&cap),
        overhead: Some(OverheadFile { kube_reserved: map(&kube_reserved), system_reserved: BTreeMap::new(), eviction_threshold: map(&eviction) }),
        offerings,
        aws: Some(AwsFile { vcpu, memory_mib, arch, enis_default_card: facts.enis_default_card, ipv4_per_eni: facts.ipv4_per_eni, branch_enis: facts.branch_enis, local_nvme_gb: facts.local_nvme_gb }),
        attach_limits: BTreeMap::new(),
    };
    Some(AwsType { file, published })
}

/// The extended resources a type offers (GPUs, Neuron devices, EFA interfaces, branch ENIs).
fn extended_resources(t: &Value, facts: &AwsFacts, gpus: i64) -> Resources {
    let mut extended = Resources::default();
    match s(t, "gpu_manufacturer").as_deref() {
        Some("nvidia") if gpus > 0 => extended.set("nvidia.com/gpu", gpus),
        Some("amd") if gpus > 0 => extended.set("amd.com/gpu", gpus),
        _ => {}
    }
    extended.set("aws.amazon.com/neuron", i(t, "neuron_devices").unwrap_or(0));
    extended.set("aws.amazon.com/neuroncore", i(t, "neuron_cores").unwrap_or(0));
    extended.set("vpc.amazonaws.com/efa", i(t, "efa_max_interfaces").unwrap_or(0));
    extended.set("vpc.amazonaws.com/pod-eni", facts.branch_enis);
    extended
}

/// The well-known labels Karpenter puts on a node of the type.
fn aws_labels(t: &Value, name: &str, facts: &AwsFacts, gpus: i64) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            labels.insert(k.to_string(), v);
        }
    };
    put("node.kubernetes.io/instance-type", Some(name.to_string()));
    put("kubernetes.io/arch", Some(facts.arch.clone()));
    put("kubernetes.io/os", Some("linux".into()));
    put("karpenter.k8s.aws/instance-category", s(t, "category"));
    put("karpenter.k8s.aws/instance-family", s(t, "family"));
    put("karpenter.k8s.aws/instance-generation", s(t, "generation"));
    put("karpenter.k8s.aws/instance-size", s(t, "size"));
    put("karpenter.k8s.aws/instance-cpu", Some(facts.vcpu.to_string()));
    put("karpenter.k8s.aws/instance-cpu-manufacturer", s(t, "cpu_manufacturer"));
    put("karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", s(t, "cpu_sustained_clock_mhz").or(Some("0".into())));
    put("karpenter.k8s.aws/instance-memory", Some(facts.memory_mib.to_string()));
    put("karpenter.k8s.aws/instance-hypervisor", s(t, "hypervisor"));
    put("karpenter.k8s.aws/instance-encryption-in-transit-supported", s(t, "encryption_in_transit_supported"));
    put("karpenter.k8s.aws/instance-capability-flex", s(t, "capability_flex"));
    put("karpenter.k8s.aws/instance-network-bandwidth", s(t, "network_bandwidth_mbps"));
    put("karpenter.k8s.aws/instance-ebs-bandwidth", s(t, "ebs_max_bandwidth_mbps"));
    if facts.local_nvme_gb > 0 {
        put("karpenter.k8s.aws/instance-local-nvme", Some(facts.local_nvme_gb.to_string()));
    }
    if gpus > 0 {
        put("karpenter.k8s.aws/instance-gpu-name", s(t, "gpu_name"));
        put("karpenter.k8s.aws/instance-gpu-manufacturer", s(t, "gpu_manufacturer"));
        put("karpenter.k8s.aws/instance-gpu-count", Some(gpus.to_string()));
        put("karpenter.k8s.aws/instance-gpu-memory", s(t, "gpu_memory_mib"));
    }
    if i(t, "accelerator_count").unwrap_or(0) > 0 {
        put("karpenter.k8s.aws/instance-accelerator-name", s(t, "accelerator_name"));
        put("karpenter.k8s.aws/instance-accelerator-manufacturer", s(t, "accelerator_manufacturer"));
        put("karpenter.k8s.aws/instance-accelerator-count", s(t, "accelerator_count"));
    }
    labels
}

/// Where the generated catalog's numbers come from (written into the file).
fn aws_provenance(region: &str, zones: &[&str]) -> Vec<String> {
    vec![
        "Instance facts: models/aws/instance-types.json, extracted from aws/karpenter-provider-aws at 1d927085dd81a9df9301e613f371dac5b4d16bfe (Apache-2.0); see models/aws/README.md.".to_string(),
        format!("On-demand prices: models/aws/ondemand-prices.json ({region}, AWS Pricing API via Karpenter's generated table of 2026-07-20), USD per hour, Linux, shared tenancy."),
        "Capacity and overhead: Karpenter's AL2023 formulas (docs in src/catalog/aws.rs), checked against Karpenter's published allocatable for every type.".to_string(),
        "SPOT PRICES ARE SYNTHETIC: spot = on-demand x (0.30 + 0.25 u), u a stable hash of (type, zone); offerings marked priceSource: synthetic.".to_string(),
        format!(
            "Zones: {} (the zones of the default EC2NodeClass subnets assumed by the seed scenarios); every type is offered in every zone, since the data has no per-zone availability.",
            zones.join(", ")
        ),
        "Excluded: types without hardware facts or without a price in the region, and a1.* (not compatible with AL2023).".to_string(),
    ]
}

/// Karpenter's scheduling-benchmark instance types (see module docs).
pub fn karpenter_benchmark(n: usize) -> CatalogFile {
    let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
    let mut types = Vec::new();
    for i in 0..n {
        let cpu = (i + 1) as i64;
        let mem_gi = 2 * cpu;
        let name = format!("fake-it-{i}");
        let price = round6(cpu as f64 * 0.1 + (mem_gi << 30) as f64 / 1e9 * 0.1);
        let large = cpu > 4 && mem_gi > 8;
        let mut labels = BTreeMap::new();
        labels.insert("node.kubernetes.io/instance-type".to_string(), name.clone());
        labels.insert("kubernetes.io/arch".to_string(), "amd64".to_string());
        labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
        labels.insert("size".to_string(), if large { "large" } else { "small" }.to_string());
        if large {
            labels.insert("special".to_string(), "optional".to_string());
        }
        labels.insert("integer".to_string(), cpu.to_string());
        let cap = Resources::new(cpu * 1000, mem_gi << 30, 0, 10 * cpu);
        let mut offerings = Vec::new();
        for (zi, z) in zones.iter().enumerate() {
            if zi < 2 {
                offerings.push(OfferingFile { zone: z.to_string(), capacity_type: "spot".into(), price, available: true, price_source: None, reservation: None });
            }
            offerings.push(OfferingFile { zone: z.to_string(), capacity_type: "on-demand".into(), price, available: true, price_source: None, reservation: None });
        }
        types.push(TypeFile {
            name,
            labels,
            capacity: map(&cap),
            overhead: Some(OverheadFile { kube_reserved: map(&Resources::new(100, 10 << 20, 0, 0)), ..Default::default() }),
            offerings,
            aws: None,
            attach_limits: BTreeMap::new(),
        });
    }
    CatalogFile {
        schema: SCHEMA.into(),
        name: format!("karpenter-benchmark-{n}"),
        region: None,
        zones: zones.iter().map(|z| z.to_string()).collect(),
        provenance: vec![
            "Karpenter's scheduling benchmark instance types: kubernetes-sigs/karpenter pkg/cloudprovider/fake InstanceTypes(n) at 2266468 (Apache-2.0), as described in ../shared/docs/karpenter.md section 13.".into(),
            "Prices are Karpenter's fake PriceFromResources (0.1 per vCPU + 0.1 per GB), equal for spot and on-demand.".into(),
        ],
        instance_types: types,
    }
}

/// Writes a catalog as JSON with one instance type per line (diffable).
pub fn to_json(c: &CatalogFile) -> String {
    let mut s = String::new();
    s.push_str("{\n");
    s.push_str(&format!("  \"schema\": {},\n", serde_json::to_string(&c.schema).unwrap()));
    s.push_str(&format!("  \"name\": {},\n", serde_json::to_string(&c.name).unwrap()));
    if let Some(r) = &c.region {
        s.push_str(&format!("  \"region\": {},\n", serde_json::to_string(r).unwrap()));
    }
    s.push_str(&format!("  \"zones\": {},\n", serde_json::to_string(&c.zones).unwrap()));
    s.push_str("  \"provenance\": [\n");
    for (i, p) in c.provenance.iter().enumerate() {
        let sep = if i + 1 < c.provenance.len() { "," } else { "" };
        s.push_str(&format!("    {}{sep}\n", serde_json::to_string(p).unwrap()));
    }
    s.push_str("  ],\n  \"instanceTypes\": [\n");
    for (i, t) in c.instance_types.iter().enumerate() {
        let sep = if i + 1 < c.instance_types.len() { "," } else { "" };
        s.push_str(&format!("    {}{sep}\n", serde_json::to_string(t).unwrap()));
    }
    s.push_str("  ]\n}\n");
    s
}
