//! k8s-openapi objects into domain types. Every error names the file, the object and the field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::read::Source;
use super::{InputError, quantity};
use stowage_core::domain::labels::{LabelSelector, Labels, NodeMatcher, NodeOp, NodeRequirement, NodeSelectorTerm, PreferredTerm, SelectorOp, SelectorRequirement};
use stowage_core::domain::node::Node;
use stowage_core::domain::pod::{HostPort, InclusionPolicy, InvalidSpec, Namespaces, Owner, Pod, PodAffinityTerm, PodPhase, SpreadConstraint, VolumeNeeds, WeightedAffinityTerm, WhenUnsatisfiable};
use stowage_core::domain::resources::Resources;
use stowage_core::domain::taints::{Effect, Taint, Toleration, TolerationOp};
use stowage_core::semantics::resources::{InitContainer, pod_request};
use stowage_core::semantics::selectors;

/// Error context: which object of which file.
pub struct Ctx<'a> {
    pub source: &'a Source,
    pub object: String,
}

impl Ctx<'_> {
    /// An error at `field` of this object; `msg` is any message or typed error (a [`quantity::QuantityError`]).
    pub fn err(&self, field: impl AsRef<str>, msg: impl std::fmt::Display) -> InputError {
        InputError::at(self.source, Some(self.object.clone()), Some(field.as_ref()), msg.to_string())
    }
}

pub(crate) fn resources(ctx: &Ctx, field: &str, list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>) -> Result<Resources, InputError> {
    match list {
        None => Ok(Resources::default()),
        Some(l) => quantity::resources(l).map_err(|(name, e)| ctx.err(format!("{field}.{name}"), e)),
    }
}

/// A requirement of a pod's node affinity (kube-apiserver's operators).
pub fn node_requirement(ctx: &Ctx, field: &str, key: &str, op: &str, values: &[String]) -> Result<NodeRequirement, InputError> {
    if matches!(NodeOp::parse(op), Some(NodeOp::Gte | NodeOp::Lte)) {
        return Err(ctx.err(
            format!("{field}.operator"),
            format!("operator {op} is Karpenter's (NodePool and NodeClaim requirements); kube-apiserver refuses it in a pod (In, NotIn, Exists, DoesNotExist, Gt, Lt)"),
        ));
    }
    karpenter_requirement(ctx, field, key, op, values)
}

/// A requirement of a NodePool or NodeClaim: kube-apiserver's operators plus Karpenter v1.14's `Gte`
/// and `Lte`.
pub fn karpenter_requirement(ctx: &Ctx, field: &str, key: &str, op: &str, values: &[String]) -> Result<NodeRequirement, InputError> {
    let Some(op_) = NodeOp::parse(op) else {
        return Err(ctx.err(format!("{field}.operator"), format!("unknown operator {op:?} (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte)")));
    };
    if key.is_empty() {
        return Err(ctx.err(format!("{field}.key"), "empty key"));
    }
    match op_ {
        NodeOp::In | NodeOp::NotIn if values.is_empty() => {
            return Err(ctx.err(format!("{field}.values"), format!("operator {op} needs at least one value")));
        }
        NodeOp::Exists | NodeOp::DoesNotExist if !values.is_empty() => {
            return Err(ctx.err(format!("{field}.values"), format!("operator {op} takes no values")));
        }
        NodeOp::Gt | NodeOp::Lt | NodeOp::Gte | NodeOp::Lte => {
            if values.len() != 1 {
                return Err(ctx.err(format!("{field}.values"), format!("operator {op} needs exactly one value")));
            }
            if values[0].parse::<i64>().is_err() {
                return Err(ctx.err(format!("{field}.values[0]"), format!("operator {op} needs an integer, got {:?}", values[0])));
            }
        }
        _ => {}
    }
    Ok(NodeRequirement::new(key, op_, values.iter().cloned()))
}

pub fn node_selector_term(ctx: &Ctx, field: &str, t: &core::NodeSelectorTerm) -> Result<NodeSelectorTerm, InputError> {
    let mut out = NodeSelectorTerm::default();
    for (i, e) in t.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        out.expressions.push(node_requirement(ctx, &f, &e.key, &e.operator, e.values.as_deref().unwrap_or(&[]))?);
    }
    for (i, e) in t.match_fields.iter().flatten().enumerate() {
        let f = format!("{field}.matchFields[{i}]");
        if e.key != "metadata.name" {
            return Err(ctx.err(format!("{f}.key"), format!("unsupported field {:?} (only metadata.name)", e.key)));
        }
        out.fields.push(node_requirement(ctx, &f, &e.key, &e.operator, e.values.as_deref().unwrap_or(&[]))?);
    }
    Ok(out)
}

pub(crate) fn label_selector(ctx: &Ctx, field: &str, s: &meta::LabelSelector) -> Result<LabelSelector, InputError> {
    let mut sel = LabelSelector::everything();
    for (k, v) in s.match_labels.iter().flatten() {
        sel = sel.and(SelectorRequirement::new(k.as_str(), SelectorOp::In, [v.as_str()]));
    }
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let Some(op) = SelectorOp::parse(&e.operator) else {
            return Err(ctx.err(format!("{f}.operator"), format!("unknown operator {:?} (In, NotIn, Exists, DoesNotExist)", e.operator)));
        };
        let values = e.values.clone().unwrap_or_default();
        match op {
            SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
                return Err(ctx.err(format!("{f}.values"), format!("operator {} needs at least one value", e.operator)));
            }
            SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
                return Err(ctx.err(format!("{f}.values"), format!("operator {} takes no values", e.operator)));
            }
            _ => {}
        }
        sel = sel.and(SelectorRequirement::new(e.key.as_str(), op, values));
    }
    Ok(sel)
}

pub(crate) fn taint(ctx: &Ctx, field: &str, t: &core::Taint) -> Result<Taint, InputError> {
    let Some(effect) = Effect::parse(&t.effect) else {
        return Err(ctx.err(format!("{field}.effect"), format!("unknown taint effect {:?} (NoSchedule, PreferNoSchedule, NoExecute)", t.effect)));
    };
    if t.key.is_empty() {
        return Err(ctx.err(format!("{field}.key"), "empty taint key"));
    }
    Ok(Taint::new(t.key.as_str(), t.value.clone().unwrap_or_default(), effect))
}

pub(crate) fn taints(ctx: &Ctx, field: &str, ts: Option<&Vec<core::Taint>>) -> Result<Vec<Taint>, InputError> {
    ts.into_iter().flatten().enumerate().map(|(i, t)| taint(ctx, &format!("{field}[{i}]"), t)).collect()
}

fn toleration(ctx: &Ctx, field: &str, t: &core::Toleration) -> Result<Toleration, InputError> {
    let op = match t.operator.as_deref() {
        None | Some("") | Some("Equal") => TolerationOp::Equal,
        Some("Exists") => TolerationOp::Exists,
        Some(other) => return Err(ctx.err(format!("{field}.operator"), format!("unknown toleration operator {other:?} (Equal, Exists)"))),
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(Effect::parse(e).ok_or_else(|| ctx.err(format!("{field}.effect"), format!("unknown effect {e:?}")))?),
    };
    let key = t.key.clone().unwrap_or_default();
    if key.is_empty() && op != TolerationOp::Exists {
        return Err(ctx.err(format!("{field}.operator"), "an empty key needs operator Exists"));
    }
    if op == TolerationOp::Exists && !t.value.as_deref().unwrap_or("").is_empty() {
        return Err(ctx.err(format!("{field}.value"), "operator Exists takes no value"));
    }
    Ok(Toleration { key, op, value: t.value.clone().unwrap_or_default(), effect })
}

/// Resolves the namespaces of a pod (anti-)affinity term: `namespaces` ∪ namespaces matching
/// `namespaceSelector`; neither ⇒ the pod's own; an empty selector ⇒ all.
fn term_namespaces(ctx: &Ctx, field: &str, t: &core::PodAffinityTerm, own: &str, known: &BTreeMap<String, Labels>) -> Result<Namespaces, InputError> {
    let listed: Vec<String> = t.namespaces.clone().unwrap_or_default();
    match &t.namespace_selector {
        None if listed.is_empty() => Ok(Namespaces::Set(vec![own.to_string()])),
        None => {
            let mut v = listed;
            v.sort();
            v.dedup();
            Ok(Namespaces::Set(v))
        }
        Some(sel) => {
            let s = label_selector(ctx, &format!("{field}.namespaceSelector"), sel)?;
            if s.requirements.is_empty() {
                return Ok(Namespaces::All);
            }
            let mut v = listed;
            v.extend(known.iter().filter(|(_, l)| selectors::matches(&s, l)).map(|(n, _)| n.clone()));
            v.sort();
            v.dedup();
            Ok(Namespaces::Set(v))
        }
    }
}

fn affinity_term(ctx: &Ctx, field: &str, t: &core::PodAffinityTerm, pod_ns: &str, pod_labels: &Labels, known: &BTreeMap<String, Labels>) -> Result<PodAffinityTerm, InputError> {
    if t.topology_key.is_empty() {
        return Err(ctx.err(format!("{field}.topologyKey"), "empty topologyKey"));
    }
    let mut selector = match &t.label_selector {
        None => None,
        Some(s) => Some(label_selector(ctx, &format!("{field}.labelSelector"), s)?),
    };
    // matchLabelKeys / mismatchLabelKeys (KEP-3633): merged into the selector with the pod's values.
    for k in t.match_label_keys.iter().flatten() {
        if let (Some(sel), Some(v)) = (selector.as_mut(), pod_labels.get(k)) {
            *sel = std::mem::take(sel).and(SelectorRequirement::new(k.as_str(), SelectorOp::In, [v.as_str()]));
        }
    }
    for k in t.mismatch_label_keys.iter().flatten() {
        if let (Some(sel), Some(v)) = (selector.as_mut(), pod_labels.get(k)) {
            *sel = std::mem::take(sel).and(SelectorRequirement::new(k.as_str(), SelectorOp::NotIn, [v.as_str()]));
        }
    }
    Ok(PodAffinityTerm { selector, namespaces: term_namespaces(ctx, field, t, pod_ns, known)?, key: t.topology_key.clone() })
}

fn policy(ctx: &Ctx, field: &str, v: Option<&str>, default: InclusionPolicy) -> Result<InclusionPolicy, InputError> {
    match v {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(o) => Err(ctx.err(field, format!("unknown policy {o:?} (Honor, Ignore)"))),
    }
}

fn spread_constraint(ctx: &Ctx, field: &str, c: &core::TopologySpreadConstraint, pod_labels: &Labels) -> Result<SpreadConstraint, InputError> {
    let when = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        o => return Err(ctx.err(format!("{field}.whenUnsatisfiable"), format!("unknown value {o:?} (DoNotSchedule, ScheduleAnyway)"))),
    };
    if c.max_skew < 1 {
        return Err(ctx.err(format!("{field}.maxSkew"), format!("must be at least 1, got {}", c.max_skew)));
    }
    if c.topology_key.is_empty() {
        return Err(ctx.err(format!("{field}.topologyKey"), "empty topologyKey"));
    }
    if let Some(md) = c.min_domains {
        if md < 1 {
            return Err(ctx.err(format!("{field}.minDomains"), format!("must be at least 1, got {md}")));
        }
        if when != WhenUnsatisfiable::DoNotSchedule {
            return Err(ctx.err(format!("{field}.minDomains"), "only allowed with whenUnsatisfiable: DoNotSchedule"));
        }
    }
    let mut selector = match &c.label_selector {
        None => None,
        Some(s) => Some(label_selector(ctx, &format!("{field}.labelSelector"), s)?),
    };
    for k in c.match_label_keys.iter().flatten() {
        if let (Some(sel), Some(v)) = (selector.as_mut(), pod_labels.get(k)) {
            *sel = std::mem::take(sel).and(SelectorRequirement::new(k.as_str(), SelectorOp::In, [v.as_str()]));
        }
    }
    // kube-scheduler counts no pod for an empty selector (`countPodsMatchSelector` returns 0 when
    // `selector.Empty()`), so `labelSelector: {}` never binds, like a nil one: both become `None`.
    // (Its selfMatch would be 1, but with every count 0 the skew 1 never exceeds maxSkew ≥ 1.)
    if selector.as_ref().is_some_and(|s| s.requirements.is_empty()) {
        selector = None;
    }
    Ok(SpreadConstraint {
        max_skew: c.max_skew,
        key: c.topology_key.clone(),
        when,
        selector,
        min_domains: c.min_domains.unwrap_or(1),
        node_affinity_policy: policy(ctx, &format!("{field}.nodeAffinityPolicy"), c.node_affinity_policy.as_deref(), InclusionPolicy::Honor)?,
        node_taints_policy: policy(ctx, &format!("{field}.nodeTaintsPolicy"), c.node_taints_policy.as_deref(), InclusionPolicy::Ignore)?,
        defaulted: false,
    })
}

/// Requests of one container, with the API server's defaulting (a limit without a request becomes the
/// request).
fn container_requests(ctx: &Ctx, field: &str, c: &core::Container) -> Result<Resources, InputError> {
    let res = c.resources.as_ref();
    let mut r = resources(ctx, &format!("{field}.resources.requests"), res.and_then(|r| r.requests.as_ref()))?;
    let limits = resources(ctx, &format!("{field}.resources.limits"), res.and_then(|r| r.limits.as_ref()))?;
    for (name, v) in limits.iter() {
        let has_request = res.and_then(|r| r.requests.as_ref()).is_some_and(|m| m.contains_key(name));
        if !has_request {
            r.set(name, v);
        }
    }
    Ok(r)
}

/// A container's ports, validated as the API server does (ports 1-65535, protocol TCP, UDP or SCTP);
/// the host ports it claims go to `out`.
fn host_ports(ctx: &Ctx, field: &str, c: &core::Container, out: &mut Vec<HostPort>) -> Result<(), InputError> {
    for (i, p) in c.ports.iter().flatten().enumerate() {
        let f = format!("{field}.ports[{i}]");
        if !(1..=65535).contains(&p.container_port) {
            return Err(ctx.err(format!("{f}.containerPort"), format!("must be 1-65535, got {}", p.container_port)));
        }
        if let Some(hp) = p.host_port
            && !(0..=65535).contains(&hp)
        {
            return Err(ctx.err(format!("{f}.hostPort"), format!("must be 1-65535 (or 0 for none), got {hp}")));
        }
        let protocol = p.protocol.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "TCP".into());
        if !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP") {
            return Err(ctx.err(format!("{f}.protocol"), format!("unknown protocol {protocol:?} (TCP, UDP, SCTP)")));
        }
        if let Some(hp) = p.host_port
            && hp > 0
        {
            out.push(HostPort { protocol, ip: p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| stowage_core::semantics::ports::ANY_IP.into()), port: hp });
        }
    }
    Ok(())
}

/// A pod's requests (kube-scheduler's effective request: containers, init containers and sidecars,
/// overhead, pod-level resources) and the host ports its containers and sidecars claim.
fn requests_and_ports(ctx: &Ctx, spec: &core::PodSpec) -> Result<(Resources, Vec<HostPort>), InputError> {
    let mut containers = Vec::new();
    let mut ports = Vec::new();
    if spec.containers.is_empty() {
        return Err(ctx.err("spec.containers", "a pod needs at least one container"));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        containers.push(container_requests(ctx, &format!("spec.containers[{i}]"), c)?);
        host_ports(ctx, &format!("spec.containers[{i}]"), c, &mut ports)?;
    }
    let mut init = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        init.push(InitContainer { requests: container_requests(ctx, &format!("spec.initContainers[{i}]"), c)?, sidecar });
        if sidecar {
            host_ports(ctx, &format!("spec.initContainers[{i}]"), c, &mut ports)?;
        }
    }
    let overhead = resources(ctx, "spec.overhead", spec.overhead.as_ref())?;
    let pod_level = match spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        Some(r) => Some(resources(ctx, "spec.resources.requests", Some(r))?),
        None => None,
    };
    Ok((pod_request(&containers, &init, &overhead, pod_level.as_ref()), ports))
}

/// `spec.affinity.nodeAffinity` into the matcher's required terms (`None`: no required affinity) and
/// the preferred terms.
fn node_affinity(ctx: &Ctx, na: &core::NodeAffinity) -> Result<(Option<Vec<NodeSelectorTerm>>, Vec<PreferredTerm>), InputError> {
    let mut required = None;
    if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
        let f = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        required = Some(req.node_selector_terms.iter().enumerate().map(|(i, t)| node_selector_term(ctx, &format!("{f}[{i}]"), t)).collect::<Result<Vec<_>, _>>()?);
    }
    let mut preferred = Vec::new();
    for (i, pt) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        let f = format!("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        if !(1..=100).contains(&pt.weight) {
            return Err(ctx.err(format!("{f}.weight"), format!("must be 1-100, got {}", pt.weight)));
        }
        preferred.push(PreferredTerm { weight: pt.weight, term: node_selector_term(ctx, &format!("{f}.preference"), &pt.preference)? });
    }
    Ok((required, preferred))
}

/// The terms of `spec.affinity.podAffinity` and `podAntiAffinity`.
#[derive(Default)]
struct PodAffinities {
    affinity: Vec<PodAffinityTerm>,
    anti_affinity: Vec<PodAffinityTerm>,
    preferred_affinity: Vec<WeightedAffinityTerm>,
    preferred_anti_affinity: Vec<WeightedAffinityTerm>,
}

/// The pod (anti-)affinity terms of `aff`, resolved against the pod's namespace and labels and the
/// known namespaces.
fn pod_affinities(ctx: &Ctx, aff: &core::Affinity, namespace: &str, labels: &Labels, known_ns: &BTreeMap<String, Labels>) -> Result<PodAffinities, InputError> {
    let mut out = PodAffinities::default();
    for (kind, src, req_out, pref_out) in [
        (
            "podAffinity",
            aff.pod_affinity.as_ref().map(|a| (&a.required_during_scheduling_ignored_during_execution, &a.preferred_during_scheduling_ignored_during_execution)),
            &mut out.affinity,
            &mut out.preferred_affinity,
        ),
        (
            "podAntiAffinity",
            aff.pod_anti_affinity.as_ref().map(|a| (&a.required_during_scheduling_ignored_during_execution, &a.preferred_during_scheduling_ignored_during_execution)),
            &mut out.anti_affinity,
            &mut out.preferred_anti_affinity,
        ),
    ] {
        let Some((req, pref)) = src else { continue };
        for (i, t) in req.iter().flatten().enumerate() {
            let f = format!("spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
            req_out.push(affinity_term(ctx, &f, t, namespace, labels, known_ns)?);
        }
        for (i, wt) in pref.iter().flatten().enumerate() {
            let f = format!("spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            if !(1..=100).contains(&wt.weight) {
                return Err(ctx.err(format!("{f}.weight"), format!("must be 1-100, got {}", wt.weight)));
            }
            pref_out.push(WeightedAffinityTerm { weight: wt.weight, term: affinity_term(ctx, &format!("{f}.podAffinityTerm"), &wt.pod_affinity_term, namespace, labels, known_ns)? });
        }
    }
    Ok(out)
}

fn phase(p: &core::Pod) -> PodPhase {
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        _ => PodPhase::Pending,
    }
}

/// Converts a pod. `volumes` is resolved separately (it needs claims, volumes and classes).
pub(crate) fn pod(ctx: &Ctx, p: &core::Pod, seq: u32, volumes: VolumeNeeds, known_ns: &BTreeMap<String, Labels>) -> Result<Pod, InputError> {
    let md = &p.metadata;
    let namespace = md.namespace.clone().unwrap_or_else(|| "default".into());
    let name = md.name.clone().ok_or_else(|| ctx.err("metadata.name", "missing name"))?;
    let labels: Labels = md.labels.clone().unwrap_or_default();
    let empty = core::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty);
    let (requests, ports) = requests_and_ports(ctx, spec)?;

    let mut node_matcher = NodeMatcher { selector: spec.node_selector.clone().unwrap_or_default().into_iter().collect(), terms: None };
    let mut preferred_node = Vec::new();
    let mut pod_aff = PodAffinities::default();
    if let Some(aff) = &spec.affinity {
        if let Some(na) = &aff.node_affinity {
            (node_matcher.terms, preferred_node) = node_affinity(ctx, na)?;
        }
        pod_aff = pod_affinities(ctx, aff, &namespace, &labels, known_ns)?;
    }
    let tolerations = spec.tolerations.iter().flatten().enumerate().map(|(i, t)| toleration(ctx, &format!("spec.tolerations[{i}]"), t)).collect::<Result<Vec<_>, _>>()?;
    let spread = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| spread_constraint(ctx, &format!("spec.topologySpreadConstraints[{i}]"), c, &labels))
        .collect::<Result<Vec<_>, _>>()?;
    let owner = md.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| Owner { kind: o.kind.clone(), name: o.name.clone() });
    Ok(Pod {
        uid: md.uid.clone().unwrap_or_else(|| super::ids::stable_uid(&["Pod", &namespace, &name])),
        namespace,
        name,
        labels,
        requests,
        node_matcher,
        preferred_node,
        tolerations,
        spread,
        affinity: pod_aff.affinity,
        anti_affinity: pod_aff.anti_affinity,
        preferred_affinity: pod_aff.preferred_affinity,
        preferred_anti_affinity: pod_aff.preferred_anti_affinity,
        host_ports: ports,
        volumes,
        hardened: Default::default(),
        invalid: None,
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        terminating: md.deletion_timestamp.is_some(),
        phase: phase(p),
        owner,
        priority: spec.priority.unwrap_or(0),
        seq,
    })
}

/// A pod whose spec `pod` refused with `err`, kept so that the batch goes on without it: pending with
/// the error as its reason (`Pod::invalid`), with its identity, owner and what of its requests could be
/// read (a bound pod still occupies its node). Fails only when the pod has no name.
pub(crate) fn invalid_pod(ctx: &Ctx, p: &core::Pod, seq: u32, volumes: VolumeNeeds, err: &InputError) -> Result<Pod, InputError> {
    let md = &p.metadata;
    let namespace = md.namespace.clone().unwrap_or_else(|| "default".into());
    let name = md.name.clone().ok_or_else(|| ctx.err("metadata.name", "missing name"))?;
    let empty = core::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty);
    let requests = requests_and_ports(ctx, spec).map(|(r, _)| r).unwrap_or_else(|_| pod_request(&[], &[], &Resources::default(), None));
    Ok(Pod {
        uid: md.uid.clone().unwrap_or_else(|| super::ids::stable_uid(&["Pod", &namespace, &name])),
        namespace,
        name,
        labels: md.labels.clone().unwrap_or_default(),
        requests,
        node_matcher: NodeMatcher::default(),
        preferred_node: Vec::new(),
        tolerations: Vec::new(),
        spread: Vec::new(),
        affinity: Vec::new(),
        anti_affinity: Vec::new(),
        preferred_affinity: Vec::new(),
        preferred_anti_affinity: Vec::new(),
        host_ports: Vec::new(),
        volumes,
        hardened: Default::default(),
        invalid: Some(InvalidSpec { field: err.field.clone().unwrap_or_default(), message: err.message.clone() }),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        terminating: md.deletion_timestamp.is_some(),
        phase: phase(p),
        owner: md.owner_references.iter().flatten().find(|o| o.controller == Some(true)).map(|o| Owner { kind: o.kind.clone(), name: o.name.clone() }),
        priority: spec.priority.unwrap_or(0),
        seq,
    })
}

pub(crate) fn node(ctx: &Ctx, n: &core::Node) -> Result<Node, InputError> {
    let md = &n.metadata;
    let name = md.name.clone().ok_or_else(|| ctx.err("metadata.name", "missing name"))?;
    let mut labels: Labels = md.labels.clone().unwrap_or_default();
    labels.entry(stowage_core::domain::labels::keys::HOSTNAME.into()).or_insert_with(|| name.clone());
    let spec = n.spec.clone().unwrap_or_default();
    let status = n.status.clone().unwrap_or_default();
    let capacity = resources(ctx, "status.capacity", status.capacity.as_ref())?;
    let allocatable = match status.allocatable.as_ref() {
        Some(a) => resources(ctx, "status.allocatable", Some(a))?,
        None if status.capacity.is_some() => capacity.clone(),
        None => return Err(ctx.err("status.allocatable", "a node needs status.allocatable (or status.capacity)")),
    };
    let taints = taints(ctx, "spec.taints", spec.taints.as_ref())?;
    let deleting = md.deletion_timestamp.is_some() || taints.iter().any(|t| t.key == stowage_core::domain::taints::well_known::KARPENTER_DISRUPTED);
    Ok(Node {
        nodepool: labels.get(stowage_core::domain::labels::keys::NODEPOOL).cloned(),
        name,
        labels,
        taints,
        allocatable,
        capacity,
        unschedulable: spec.unschedulable.unwrap_or(false),
        provider_id: spec.provider_id.clone(),
        deleting,
        in_flight: false,
        attach_limits: Default::default(),
    })
}
