//! The expanded batch as one `v1 List` (docs/formats.md §1).

use serde_json::{Value, json};

use super::objects::Objects;

fn with_kind<T: serde::Serialize>(api_version: &str, kind: &str, obj: &T) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    v
}

pub fn to_list(o: &Objects) -> Value {
    let mut items = Vec::new();
    items.extend(o.namespaces.iter().map(|x| with_kind("v1", "Namespace", &x.obj)));
    items.extend(o.nodeclasses.iter().map(|x| with_kind("karpenter.k8s.aws/v1", "EC2NodeClass", &x.obj)));
    items.extend(o.nodepools.iter().map(|x| with_kind("karpenter.sh/v1", "NodePool", &x.obj)));
    items.extend(o.nodeclaims.iter().map(|x| with_kind("karpenter.sh/v1", "NodeClaim", &x.obj)));
    items.extend(o.nodes.iter().map(|x| with_kind("v1", "Node", &x.obj)));
    items.extend(o.storageclasses.iter().map(|x| with_kind("storage.k8s.io/v1", "StorageClass", &x.obj)));
    items.extend(o.csinodes.iter().map(|x| with_kind("storage.k8s.io/v1", "CSINode", &x.obj)));
    items.extend(o.pvs.iter().map(|x| with_kind("v1", "PersistentVolume", &x.obj)));
    items.extend(o.pvcs.iter().map(|x| with_kind("v1", "PersistentVolumeClaim", &x.obj)));
    items.extend(o.daemonsets.iter().map(|x| with_kind("apps/v1", "DaemonSet", &x.obj)));
    // For the cluster-default spread's selector (ReplicaSets and StatefulSets are not written: loading
    // them again would expand them into pods).
    items.extend(o.services.iter().map(|x| with_kind("v1", "Service", &x.obj)));
    items.extend(o.replicationcontrollers.iter().map(|x| with_kind("v1", "ReplicationController", &x.obj)));
    items.extend(o.pods.iter().map(|x| with_kind("v1", "Pod", &x.obj)));
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}
