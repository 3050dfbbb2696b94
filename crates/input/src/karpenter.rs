//! NodePools, EC2NodeClasses and NodeClaims into domain types.

use std::time::Duration;

use super::convert::{Ctx, karpenter_requirement, resources, taints};
use super::objects::Obj;
use super::{InputError, quantity};
use crate::api;
use stowage_core::domain::labels::{Labels, NodeOp, keys};
use stowage_core::domain::node::Node;
use stowage_core::domain::nodepool::{ConsolidationPolicy, EvictionValue, KubeletSettings, NodeClass, NodePool, PoolLimits, PoolRequirement};
use stowage_core::domain::resources::Resources;

/// A Go-style duration ("720h", "1h30m", "30s") or "Never" (`None`).
pub fn duration(ctx: &Ctx, field: &str, v: &str) -> Result<Option<u64>, InputError> {
    if v == "Never" {
        return Ok(None);
    }
    humantime::parse_duration(v).map(|d: Duration| Some(d.as_secs())).map_err(|e| ctx.err(field, format!("invalid duration {v:?} ({e}); use e.g. 30s, 10m, 720h or Never")))
}

pub fn nodepool(o: &Obj<api::NodePool>) -> Result<NodePool, InputError> {
    let md = &o.obj.metadata;
    let name = md.name.clone().unwrap_or_default();
    let ctx = Ctx { source: &o.source, object: format!("NodePool {name}") };
    if name.is_empty() {
        return Err(ctx.err("metadata.name", "missing name"));
    }
    let spec = &o.obj.spec;
    let tspec = &spec.template.spec;
    let mut requirements = Vec::new();
    for (i, r) in tspec.requirements.iter().enumerate() {
        let f = format!("spec.template.spec.requirements[{i}]");
        let req = karpenter_requirement(&ctx, &f, &r.key, &r.operator, &r.values)?;
        if let Some(mv) = r.min_values {
            if mv < 1 {
                return Err(ctx.err(format!("{f}.minValues"), format!("must be at least 1, got {mv}")));
            }
            if req.op == NodeOp::In && (mv as usize) > req.values.len() {
                return Err(ctx.err(format!("{f}.minValues"), format!("{mv} is more than the {} values listed", req.values.len())));
            }
        }
        requirements.push(PoolRequirement { req, min_values: r.min_values.map(|v| v as u32) });
    }
    let labels: Labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    for k in labels.keys() {
        if k == keys::NODEPOOL || k == keys::HOSTNAME {
            return Err(ctx.err(format!("spec.template.metadata.labels.{k}"), "label is restricted (set by Karpenter)"));
        }
    }
    let limits = match &spec.limits {
        None => None,
        Some(l) => {
            let mut pl = PoolLimits::default();
            for (rname, q) in l {
                let f = format!("spec.limits.{rname}");
                if rname == "nodes" {
                    pl.nodes = Some(quantity::value(&q.0).map_err(|e| ctx.err(&f, e))?);
                } else {
                    let v = quantity::amount(rname, &q.0).map_err(|e| ctx.err(&f, e))?;
                    pl.resources.set(rname, v);
                    pl.limited.push(rname.clone());
                }
            }
            Some(pl)
        }
    };
    let disruption = spec.disruption.clone().unwrap_or_default();
    let consolidation = match disruption.consolidation_policy.as_deref() {
        None | Some("WhenEmptyOrUnderutilized") => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        // Karpenter v1.14: underutilised nodes go only when the saving outweighs the disruption
        // (stowage_decide::balanced).
        Some("Balanced") => ConsolidationPolicy::Balanced,
        Some("WhenEmpty") => ConsolidationPolicy::WhenEmpty,
        Some(o) => {
            return Err(ctx.err("spec.disruption.consolidationPolicy", format!("unknown policy {o:?} (WhenEmpty, WhenEmptyOrUnderutilized, Balanced)")));
        }
    };
    let consolidate_after = duration(&ctx, "spec.disruption.consolidateAfter", disruption.consolidate_after.as_deref().unwrap_or("0s"))?;
    for (i, b) in disruption.budgets.iter().flatten().enumerate() {
        budget(&ctx, &format!("spec.disruption.budgets[{i}]"), b)?;
    }
    let expire_after = duration(&ctx, "spec.template.spec.expireAfter", tspec.expire_after.as_deref().unwrap_or("720h"))?;
    if tspec.node_class_ref.name.is_empty() {
        return Err(ctx.err("spec.template.spec.nodeClassRef.name", "missing node class name"));
    }
    // Karpenter's CRD: `weight` is 1-100 when set (unset ranks below every weighted pool).
    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        return Err(ctx.err("spec.weight", format!("must be 1-100 (Karpenter's range), got {w}")));
    }
    Ok(NodePool {
        name,
        weight: spec.weight.unwrap_or(0),
        requirements,
        labels,
        taints: taints(&ctx, "spec.template.spec.taints", tspec.taints.as_ref())?,
        startup_taints: taints(&ctx, "spec.template.spec.startupTaints", tspec.startup_taints.as_ref())?,
        limits,
        node_class: tspec.node_class_ref.name.clone(),
        consolidation,
        consolidate_after,
        expire_after,
    })
}

/// The disruption reasons a budget may name (Karpenter v1's `DisruptionReason` enum).
pub const BUDGET_REASONS: [&str; 3] = ["Underutilized", "Empty", "Drifted"];

/// What Karpenter's CRD refuses in a disruption budget: `nodes` not a count or a 0-100 percentage
/// (`^((100|[0-9]{1,2})%|[0-9]+)$`), a reason outside [`BUDGET_REASONS`], `schedule` without
/// `duration` or the reverse.
fn budget(ctx: &Ctx, field: &str, b: &api::nodepool::Budget) -> Result<(), InputError> {
    if let Some(n) = &b.nodes {
        let ok = match n.strip_suffix('%') {
            Some(p) => !p.is_empty() && p.len() <= 3 && p.bytes().all(|c| c.is_ascii_digit()) && (p.len() < 3 || p == "100"),
            None => !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()),
        };
        if !ok {
            return Err(ctx.err(format!("{field}.nodes"), format!("{n:?} is neither a node count nor a percentage from 0% to 100%")));
        }
    }
    for (j, r) in b.reasons.iter().flatten().enumerate() {
        if !BUDGET_REASONS.contains(&r.as_str()) {
            return Err(ctx.err(format!("{field}.reasons[{j}]"), format!("unknown disruption reason {r:?} (Underutilized, Empty, Drifted)")));
        }
    }
    if b.schedule.is_some() != b.duration.is_some() {
        return Err(ctx.err(field, "'schedule' must be set with 'duration'"));
    }
    Ok(())
}

fn reserved(ctx: &Ctx, field: &str, m: Option<&std::collections::BTreeMap<String, String>>) -> Result<Option<Resources>, InputError> {
    let Some(m) = m else { return Ok(None) };
    let mut r = Resources::default();
    for (k, v) in m {
        r.set(k, quantity::amount(k, v).map_err(|e| ctx.err(format!("{field}.{k}"), e))?);
    }
    Ok(Some(r))
}

pub fn nodeclass(o: &Obj<api::EC2NodeClass>) -> Result<NodeClass, InputError> {
    let name = o.obj.metadata.name.clone().unwrap_or_default();
    let ctx = Ctx { source: &o.source, object: format!("EC2NodeClass {name}") };
    let spec = &o.obj.spec;
    let ami_family = match &spec.ami_family {
        Some(f) => f.clone(),
        None => {
            let alias = spec.ami_selector_terms.iter().find_map(|t| t.alias.clone());
            match alias.as_deref().map(|a| a.split('@').next().unwrap_or("")) {
                Some("al2023") => "AL2023".into(),
                Some("al2") => "AL2".into(),
                Some("bottlerocket") => "Bottlerocket".into(),
                Some("windows2019") => "Windows2019".into(),
                Some("windows2022") => "Windows2022".into(),
                Some("windows2025") => "Windows2025".into(),
                Some(other) => return Err(ctx.err("spec.amiSelectorTerms[].alias", format!("unknown AMI alias family {other:?}"))),
                None if spec.ami_selector_terms.is_empty() => {
                    return Err(ctx.err("spec.amiSelectorTerms", "at least one AMI selector term is required"));
                }
                None => "Custom".into(),
            }
        }
    };
    let mut kubelet = KubeletSettings::default();
    if let Some(k) = &spec.kubelet {
        kubelet.max_pods = k.max_pods.map(i64::from);
        kubelet.pods_per_core = k.pods_per_core.map(i64::from);
        kubelet.kube_reserved = reserved(&ctx, "spec.kubelet.kubeReserved", k.kube_reserved.as_ref())?;
        kubelet.system_reserved = reserved(&ctx, "spec.kubelet.systemReserved", k.system_reserved.as_ref())?;
        for (sig, v) in k.eviction_hard.iter().flatten() {
            let f = format!("spec.kubelet.evictionHard.{sig}");
            let ev = if let Some(p) = v.strip_suffix('%') {
                EvictionValue::Percent(p.parse::<f64>().map_err(|_| ctx.err(&f, format!("invalid percentage {v:?}")))?)
            } else {
                EvictionValue::Absolute(quantity::value(v).map_err(|e| ctx.err(&f, e))?)
            };
            kubelet.eviction_hard.push((sig.clone(), ev));
        }
    }
    let mut root_volume = None;
    // Karpenter's default mappings: one root volume, plus a data volume on Bottlerocket.
    let mut extra_ebs_volumes = match &spec.block_device_mappings {
        Some(m) if !m.is_empty() => 0,
        _ => i64::from(ami_family == "Bottlerocket"),
    };
    for (i, b) in spec.block_device_mappings.iter().flatten().enumerate() {
        let is_root = b.root_volume == Some(true) || b.device_name.as_deref() == Some("/dev/xvda");
        if !is_root && b.ebs.is_some() {
            extra_ebs_volumes += 1;
        }
        if let (true, Some(size)) = (is_root, b.ebs.as_ref().and_then(|e| e.volume_size.as_ref())) {
            root_volume = Some(quantity::value(&size.0).map_err(|e| ctx.err(format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"), e))?);
        }
    }
    for (i, t) in spec.capacity_reservation_selector_terms.iter().flatten().enumerate() {
        let at = format!("spec.capacityReservationSelectorTerms[{i}]");
        if let Some(problem) = t.validate(&at).into_iter().next() {
            return Err(ctx.err(&at, problem));
        }
    }
    // The reservations its terms selected when the controller last resolved them (Karpenter's status);
    // none when the terms are gone, whatever the status still says.
    let capacity_reservations = match &spec.capacity_reservation_selector_terms {
        Some(t) if !t.is_empty() => o.obj.status.as_ref().and_then(|s| s.capacity_reservations.as_ref()).map(|rs| rs.iter().map(|r| r.id.clone()).collect()).unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok(NodeClass { name, ami_family, kubelet, root_volume, extra_ebs_volumes, capacity_reservations })
}

/// A NodeClaim whose Node has not registered: future capacity the planners may count.
pub fn in_flight(o: &Obj<api::NodeClaim>) -> Result<Option<Node>, InputError> {
    let md = &o.obj.metadata;
    let name = md.name.clone().unwrap_or_default();
    let ctx = Ctx { source: &o.source, object: format!("NodeClaim {name}") };
    let status = o.obj.status.clone().unwrap_or_default();
    if md.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let mut labels: Labels = md.labels.clone().unwrap_or_default();
    for (i, r) in o.obj.spec.requirements.iter().enumerate() {
        let req = karpenter_requirement(&ctx, &format!("spec.requirements[{i}]"), &r.key, &r.operator, &r.values)?;
        if req.op == NodeOp::In && req.values.len() == 1 {
            labels.entry(req.key.clone()).or_insert_with(|| req.values[0].clone());
        }
    }
    let node_name = status.node_name.clone().unwrap_or_else(|| name.clone());
    labels.insert(keys::HOSTNAME.into(), node_name.clone());
    let allocatable = resources(&ctx, "status.allocatable", status.allocatable.as_ref())?;
    if allocatable == Resources::default() {
        // Not launched yet: its size is not known, so it cannot be counted.
        return Ok(None);
    }
    // No CSINode before it registers; an EC2 NodeClaim will report its type's EBS limit (for the
    // default block devices), so the planners count it already.
    let attach_limits = match labels.get(keys::INSTANCE_TYPE) {
        Some(t) if o.obj.spec.node_class_ref.group == "karpenter.k8s.aws" => [(stowage_core::catalog::aws::EBS_CSI_DRIVER.to_string(), stowage_core::catalog::aws::ebs_attach_limit(t, 0))].into(),
        _ => Default::default(),
    };
    Ok(Some(Node {
        attach_limits,
        nodepool: labels.get(keys::NODEPOOL).cloned(),
        name: node_name,
        labels,
        taints: taints(&ctx, "spec.taints", o.obj.spec.taints.as_ref())?,
        capacity: resources(&ctx, "status.capacity", status.capacity.as_ref())?,
        allocatable,
        unschedulable: false,
        provider_id: status.provider_id.clone(),
        deleting: false,
        in_flight: true,
    }))
}

/// Label Karpenter puts on a Node once it is initialized (Ready, startup taints gone, resources
/// registered).
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";

/// The taints a Node sheds once it is Ready and initialized, whatever its NodePool says.
const EPHEMERAL_TAINTS: [&str; 3] = [stowage_core::domain::taints::well_known::NOT_READY, stowage_core::domain::taints::well_known::UNREACHABLE, "node.kubernetes.io/uninitialized"];

/// A Node as kube-scheduler will see it soon, and whether it counts as in flight (issue 15):
///
/// ```text
/// managed      = a NodeClaim owns it (provider id or node name) ∨ label karpenter.sh/nodepool
/// taints       = node taints − karpenter.sh/unregistered                          (registration)
///                − startup taints (NodeClaim's ∪ NodePool's) − not-ready/unreachable/uninitialized
///                                                          if managed ∧ ¬karpenter.sh/initialized
///                + karpenter.sh/disrupted:NoSchedule       if its NodeClaim is being deleted
/// in_flight    = managed ∧ initialized ∧ a Ready condition that is not True
/// ```
///
/// An unmanaged node is taken as it is. An initialized node that is not Ready keeps its taints (no pod
/// lands there now) but is in flight: capacity coming back, not settled (consolidation leaves it, a
/// batch's nominations may wait for it). A node whose status has no Ready condition at all (a dump
/// without status) counts as Ready.
pub fn planning_node(n: &k8s_openapi::api::core::v1::Node, claim: Option<&api::NodeClaim>, pool: Option<&api::NodePool>) -> (k8s_openapi::api::core::v1::Node, bool) {
    use stowage_core::domain::taints::well_known;
    let labels = n.metadata.labels.as_ref();
    let managed = claim.is_some() || labels.is_some_and(|l| l.contains_key(keys::NODEPOOL));
    if !managed {
        return (n.clone(), false);
    }
    let mut n = n.clone();
    let initialized = labels.and_then(|l| l.get(INITIALIZED_LABEL)).is_some_and(|v| v == "true");
    let startup: std::collections::BTreeSet<&str> = claim
        .and_then(|c| c.spec.startup_taints.as_ref())
        .into_iter()
        .flatten()
        .chain(pool.and_then(|p| p.spec.template.spec.startup_taints.as_ref()).into_iter().flatten())
        .map(|t| t.key.as_str())
        .collect();
    let ready = n.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == "Ready")).is_none_or(|c| c.status == "True");
    let deleting = claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
    let spec = n.spec.get_or_insert_with(Default::default);
    let mut taints = spec.taints.take().unwrap_or_default();
    taints.retain(|t| t.key != well_known::KARPENTER_UNREGISTERED && (initialized || !(startup.contains(t.key.as_str()) || EPHEMERAL_TAINTS.contains(&t.key.as_str()))));
    if deleting && !taints.iter().any(|t| t.key == well_known::KARPENTER_DISRUPTED) {
        taints.push(k8s_openapi::api::core::v1::Taint { key: well_known::KARPENTER_DISRUPTED.into(), effect: "NoSchedule".into(), ..Default::default() });
    }
    spec.taints = if taints.is_empty() { None } else { Some(taints) };
    (n, initialized && !ready)
}

/// The NodeClaim that owns a Node: the one whose provider id or node name is the Node's.
pub fn claim_of<'a>(n: &k8s_openapi::api::core::v1::Node, claims: &'a [Obj<api::NodeClaim>]) -> Option<&'a api::NodeClaim> {
    let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
    let name = n.metadata.name.as_deref();
    claims.iter().map(|c| &c.obj).find(|c| {
        let s = c.status.as_ref();
        (pid.is_some() && s.and_then(|s| s.provider_id.as_deref()) == pid) || (name.is_some() && s.and_then(|s| s.node_name.as_deref()) == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::Source;

    fn pool(policy: &str, reqs: serde_json::Value) -> Obj<api::NodePool> {
        let obj: api::NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {
                "disruption": {"consolidationPolicy": policy},
                "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": reqs}}
            }
        }))
        .unwrap();
        Obj { source: Source { file: "p.yaml".into(), doc: 1, item: None }, obj }
    }

    #[test]
    fn consolidation_policies_are_read_and_unknown_ones_refused() {
        let p = nodepool(&pool("Balanced", serde_json::json!([]))).unwrap();
        assert_eq!(p.consolidation, ConsolidationPolicy::Balanced);
        assert_eq!(nodepool(&pool("WhenEmpty", serde_json::json!([]))).unwrap().consolidation, ConsolidationPolicy::WhenEmpty);
        let e = nodepool(&pool("Sometimes", serde_json::json!([]))).unwrap_err().to_string();
        assert!(e.contains("consolidationPolicy") && e.contains("Balanced"), "{e}");
    }

    fn pool_budgets(budgets: serde_json::Value) -> Result<NodePool, InputError> {
        let mut o = pool("WhenEmpty", serde_json::json!([]));
        o.obj.spec.disruption.as_mut().unwrap().budgets = serde_json::from_value(budgets).unwrap();
        nodepool(&o)
    }

    #[test]
    fn budget_reasons_and_nodes_are_validated_naming_the_field() {
        pool_budgets(serde_json::json!([{"nodes": "10%", "reasons": ["Empty", "Drifted", "Underutilized"]}, {"nodes": "0"}, {"nodes": "100%"}])).unwrap();
        let table = [
            (serde_json::json!([{"nodes": "1", "reasons": ["Empty", "Expired"]}]), "spec.disruption.budgets[0].reasons[1]", "unknown disruption reason \"Expired\""),
            (serde_json::json!([{"nodes": "1"}, {"nodes": "1", "reasons": ["empty"]}]), "spec.disruption.budgets[1].reasons[0]", "unknown disruption reason"),
            (serde_json::json!([{"nodes": "101%"}]), "spec.disruption.budgets[0].nodes", "neither a node count"),
            (serde_json::json!([{"nodes": "-1"}]), "spec.disruption.budgets[0].nodes", "neither a node count"),
            (serde_json::json!([{"nodes": "10 %"}]), "spec.disruption.budgets[0].nodes", "neither a node count"),
            (serde_json::json!([{"nodes": "1", "schedule": "@daily"}]), "spec.disruption.budgets[0]", "'schedule' must be set with 'duration'"),
        ];
        for (budgets, field, message) in table {
            let e = pool_budgets(budgets.clone()).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{budgets}: {e}");
            assert!(e.message.contains(message) && e.location == "p.yaml" && e.object.as_deref() == Some("NodePool p"), "{budgets}: {e}");
        }
    }

    #[test]
    fn gte_and_lte_are_numeric_nodepool_requirements() {
        let reqs = serde_json::json!([
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
            {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lte", "values": ["16384"]}
        ]);
        let p = nodepool(&pool("WhenEmpty", reqs)).unwrap();
        let ops: Vec<(NodeOp, i64)> = p.requirements.iter().map(|r| (r.req.op, r.req.int)).collect();
        assert_eq!(ops, vec![(NodeOp::Gte, 4), (NodeOp::Lte, 16384)]);
        let bad = serde_json::json!([{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["four"]}]);
        let e = nodepool(&pool("WhenEmpty", bad)).unwrap_err().to_string();
        assert!(e.contains("requirements[0].values[0]") && e.contains("integer"), "{e}");
        // A pod cannot use them: kube-apiserver refuses Gte / Lte in node affinity.
        let ctx = Ctx { source: &Source { file: "pod.yaml".into(), doc: 1, item: None }, object: "Pod default/x".into() };
        let e = crate::convert::node_requirement(&ctx, "spec.affinity", "k", "Gte", &["1".to_string()]).unwrap_err().to_string();
        assert!(e.contains("kube-apiserver refuses it in a pod"), "{e}");
    }

    fn nc(spec: serde_json::Value) -> NodeClass {
        let obj: api::EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "n"}, "spec": spec
        }))
        .unwrap();
        nodeclass(&Obj { source: Source { file: "nc.yaml".into(), doc: 1, item: None }, obj }).unwrap()
    }

    #[test]
    fn capacity_reservations_are_the_status_ids_while_terms_select_them() {
        let obj = |terms: serde_json::Value| -> Obj<api::EC2NodeClass> {
            let obj = serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "n"},
                "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                         "securityGroupSelectorTerms": [{"tags": {"k": "v"}}], "capacityReservationSelectorTerms": terms},
                "status": {"capacityReservations": [{"id": "cr-1", "availabilityZone": "z", "instanceType": "m5.large", "instanceMatchCriteria": "targeted", "ownerID": "123456789012"}]}
            }))
            .unwrap();
            Obj { source: Source { file: "nc.yaml".into(), doc: 1, item: None }, obj }
        };
        assert_eq!(nodeclass(&obj(serde_json::json!([{"tags": {"team": "ml"}}]))).unwrap().capacity_reservations, vec!["cr-1".to_string()]);
        assert!(nodeclass(&obj(serde_json::json!([]))).unwrap().capacity_reservations.is_empty(), "terms removed: the stale status selects nothing");
        for (terms, want) in [
            (serde_json::json!([{}]), "capacityReservationSelectorTerms[0]: expected at least one of id, tags or instanceMatchCriteria"),
            (serde_json::json!([{"id": "cr-1", "tags": {"a": "b"}}]), "id is mutually exclusive"),
            (serde_json::json!([{"tags": {"a": "b"}, "ownerID": "12"}]), "ownerID: \"12\" is not a 12-digit AWS account id"),
            (serde_json::json!([{"instanceMatchCriteria": "any"}]), "instanceMatchCriteria: \"any\" is not one of open, targeted"),
        ] {
            let e = nodeclass(&obj(terms.clone())).unwrap_err().to_string();
            assert!(e.contains("nc.yaml") && e.contains("EC2NodeClass n") && e.contains(want), "{terms}: {e}");
        }
    }

    #[test]
    fn extra_ebs_volumes_are_the_non_root_block_devices() {
        let base = |extra: serde_json::Value| {
            let mut spec =
                serde_json::json!({"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]});
            spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            spec
        };
        assert_eq!(nc(base(serde_json::json!({}))).extra_ebs_volumes, 0, "AL2023's default: the root volume only");
        let br = base(serde_json::json!({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}));
        assert_eq!(nc(br).extra_ebs_volumes, 1, "Bottlerocket's default: OS and data volumes");
        let two = base(serde_json::json!({"blockDeviceMappings": [
            {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "40Gi"}},
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}},
            {"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "100Gi"}}
        ]}));
        assert_eq!(nc(two).extra_ebs_volumes, 2);
    }

    #[test]
    fn an_ec2_nodeclaim_in_flight_carries_its_types_ebs_limit() {
        let claim = |group: &str| -> Obj<api::NodeClaim> {
            let obj: api::NodeClaim = serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c1", "labels": {"node.kubernetes.io/instance-type": "c5d.large", "karpenter.sh/nodepool": "p"}},
                "spec": {"nodeClassRef": {"group": group, "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
                "status": {"providerID": "aws:///zone-a/i-1", "allocatable": {"cpu": "2", "pods": "29"}}
            }))
            .unwrap();
            Obj { source: Source { file: "c.yaml".into(), doc: 1, item: None }, obj }
        };
        // No CSINode before it registers; the EBS CSI driver will report c5d.large's 25.
        let n = in_flight(&claim("karpenter.k8s.aws")).unwrap().unwrap();
        assert_eq!(n.attach_limits.get("ebs.csi.aws.com"), Some(&25));
        let other = in_flight(&claim("example.com")).unwrap().unwrap();
        assert!(other.attach_limits.is_empty(), "not an EC2 NodeClaim: no limit known");
    }
}
