//! The selector kube-scheduler deduces for a pod's cluster-default topology spread
//! (`DefaultSelector`, `stowage_core::semantics::spread_defaults` has the rule): the selectors of the
//! Services of the pod's namespace that select it, and of its controller if that is a
//! ReplicationController, ReplicaSet or StatefulSet, ANDed.
//!
//! - A Service with no `spec.selector` selects nothing (it is skipped); one whose selector matches the
//!   pod's labels adds its labels (an empty map adds nothing).
//! - The controller is the owner reference with `controller: true`, matched by apiVersion and kind
//!   (`v1` ReplicationController, `apps/v1` ReplicaSet and StatefulSet) and looked up by name in the
//!   pod's namespace; a controller that is not in the workload adds nothing, as a lister miss does
//!   upstream. One exception: a Deployment's ReplicaSet that the workload does not list (stowage
//!   expands Deployments into pods directly) is the ReplicaSet the Deployment controller would create:
//!   the Deployment's selector plus `pod-template-hash` with the pod's value.
//! - A controller selector that does not parse adds nothing (kube-scheduler ignores the error; the
//!   controller's own checks report it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use stowage_core::domain::labels::{LabelSelector, SelectorOp, SelectorRequirement};

use crate::convert;
use crate::objects::Objects;
use crate::read::Source;

/// The label Kubernetes' Deployment controller adds to its ReplicaSets' selectors and pods.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The deduced selector of `pod`, `None` when it would be empty (then no default applies).
pub fn default_selector(pod: &Pod, o: &Objects) -> Option<LabelSelector> {
    let md = &pod.metadata;
    let ns = md.namespace.as_deref().unwrap_or("default");
    let empty = BTreeMap::new();
    let labels = md.labels.as_ref().unwrap_or(&empty);
    let mut sel = LabelSelector::everything();
    let in_ns = |m: &meta::ObjectMeta| m.namespace.as_deref().unwrap_or("default") == ns;
    for s in &o.services {
        let Some(selector) = s.obj.spec.as_ref().and_then(|x| x.selector.as_ref()) else { continue };
        if in_ns(&s.obj.metadata) && selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            sel = add_map(sel, selector);
        }
    }
    let owner = md.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    if let Some(r) = owner {
        let named = |m: &meta::ObjectMeta| in_ns(m) && m.name.as_deref() == Some(r.name.as_str());
        match (r.api_version.as_str(), r.kind.as_str()) {
            ("v1", "ReplicationController") => {
                if let Some(rc) = o.replicationcontrollers.iter().find(|x| named(&x.obj.metadata))
                    && let Some(m) = rc.obj.spec.as_ref().and_then(|s| s.selector.as_ref())
                {
                    sel = add_map(sel, m);
                }
            }
            ("apps/v1", "ReplicaSet") => match o.replicasets.iter().find(|x| named(&x.obj.metadata)) {
                Some(rs) => sel = add_selector(sel, rs.obj.spec.as_ref().map(|s| &s.selector)),
                None => sel = implied_replicaset(sel, ns, &r.name, labels, o),
            },
            ("apps/v1", "StatefulSet") => {
                if let Some(ss) = o.statefulsets.iter().find(|x| named(&x.obj.metadata)) {
                    sel = add_selector(sel, ss.obj.spec.as_ref().map(|s| &s.selector));
                }
            }
            _ => {}
        }
    }
    (!sel.requirements.is_empty()).then_some(sel)
}

fn add_map(mut sel: LabelSelector, m: &BTreeMap<String, String>) -> LabelSelector {
    for (k, v) in m {
        sel = sel.and(SelectorRequirement::new(k.as_str(), SelectorOp::In, [v.as_str()]));
    }
    sel
}

/// `selector.Add(requirements...)` of a controller's selector; a nil or unparsable one adds nothing.
fn add_selector(mut sel: LabelSelector, s: Option<&meta::LabelSelector>) -> LabelSelector {
    let Some(s) = s else { return sel };
    let source = Source { file: Default::default(), doc: 0, item: None };
    let ctx = convert::Ctx { source: &source, object: String::new() };
    if let Ok(other) = convert::label_selector(&ctx, "", s) {
        for r in other.requirements {
            sel = sel.and(r);
        }
    }
    sel
}

/// The ReplicaSet `<deployment>-<pod-template-hash>` a Deployment of the workload would own: its
/// selector is the Deployment's plus the hash.
fn implied_replicaset(sel: LabelSelector, ns: &str, rs_name: &str, labels: &BTreeMap<String, String>, o: &Objects) -> LabelSelector {
    let Some(hash) = labels.get(POD_TEMPLATE_HASH) else { return sel };
    let Some(deployment) = rs_name.strip_suffix(hash.as_str()).and_then(|n| n.strip_suffix('-')) else { return sel };
    let Some(d) = o.deployments.iter().find(|d| d.obj.metadata.namespace.as_deref().unwrap_or("default") == ns && d.obj.metadata.name.as_deref() == Some(deployment)) else {
        return sel;
    };
    let sel = add_selector(sel, d.obj.spec.as_ref().map(|s| &s.selector));
    sel.and(SelectorRequirement::new(POD_TEMPLATE_HASH, SelectorOp::In, [hash.as_str()]))
}
