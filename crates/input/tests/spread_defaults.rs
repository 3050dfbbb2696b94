//! The cluster-default topology spread as the input applies it (issue 15, behaviour 6): the selector
//! kube-scheduler's `DefaultSelector` deduces from the Services and controllers selecting a pod, the
//! defaults applied only to pods without constraints of their own, and Services and
//! ReplicationControllers read with errors naming file, object and field.

use std::path::Path;

use stowage_core::domain::labels::{LabelSelector, SelectorOp, SelectorRequirement};
use stowage_core::domain::pod::{Pod, WhenUnsatisfiable};
use stowage_core::semantics::spread_defaults::{Action, DefaultConstraint, SpreadDefaults};

fn zone_hard() -> SpreadDefaults {
    SpreadDefaults::list(vec![
        DefaultConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: Action::DoNotSchedule,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
            label_selector: None,
        },
        DefaultConstraint {
            max_skew: 3,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: Action::ScheduleAnyway,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
            label_selector: None,
        },
    ])
}

fn load(text: &str) -> stowage_input::Workload {
    stowage_input::load_texts([(Path::new("w.yaml"), text)]).unwrap_or_else(|e| panic!("{e}"))
}

fn pod<'a>(w: &'a stowage_input::Workload, prefix: &str) -> Vec<&'a Pod> {
    w.cluster.pods.iter().filter(|p| p.name.starts_with(prefix)).collect()
}

fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    pairs.iter().fold(LabelSelector::everything(), |s, (k, v)| s.and(SelectorRequirement::new(*k, SelectorOp::In, [*v])))
}

fn pod_doc(name: &str, labels: &str, owner: &str, spec_extra: &str) -> String {
    format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {labels}{owner}}}\nspec: {{containers: [{{name: c, image: i}}]{spec_extra}}}\n")
}

const WORKLOAD: &str = "
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}}
---
apiVersion: v1
kind: Service
metadata: {name: tier, namespace: default}
spec: {selector: {tier: front}}
---
apiVersion: v1
kind: Service
metadata: {name: external, namespace: default}
spec: {type: ExternalName, externalName: example.com}
---
apiVersion: v1
kind: Service
metadata: {name: elsewhere, namespace: other}
spec: {selector: {app: lonely}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 1
  serviceName: db
  selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy, namespace: default}
spec: {replicas: 1, selector: {app: legacy}}
";

fn workload() -> String {
    let rc_owner = ", ownerReferences: [{apiVersion: v1, kind: ReplicationController, name: legacy, uid: u1, controller: true}]";
    let mut s = WORKLOAD.to_string();
    s += &pod_doc("legacy-1", "{app: legacy}", rc_owner, "");
    s += &pod_doc("lonely-1", "{app: lonely}", "", "");
    s += &pod_doc(
        "own-1",
        "{app: own, tier: front}",
        "",
        ", topologySpreadConstraints: [{maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]",
    );
    s
}

#[test]
fn the_selector_is_deduced_as_kube_scheduler_does() {
    let w = load(&workload()).with_spread_defaults(&zone_hard()).unwrap();
    assert_eq!(w.cluster.spread_defaults, zone_hard());
    // A Deployment's pods: both Services that select them, and the ReplicaSet the Deployment would
    // create (its selector plus pod-template-hash).
    let web = pod(&w, "web-");
    assert_eq!(web.len(), 2);
    for p in &web {
        let hash = p.labels.get("pod-template-hash").expect("expanded pods carry the hash");
        assert_eq!(p.spread.len(), 1, "{:?}", p.spread);
        let c = &p.spread[0];
        assert!(c.defaulted && c.when == WhenUnsatisfiable::DoNotSchedule && c.key == "topology.kubernetes.io/zone" && c.max_skew == 1);
        assert_eq!(c.selector, Some(sel(&[("app", "web"), ("tier", "front"), ("pod-template-hash", hash)])), "{}", p.name);
    }
    // A StatefulSet's: its matchExpressions (no Service selects them).
    let db = pod(&w, "db-");
    assert_eq!(db[0].spread[0].selector, Some(sel(&[("app", "db")])));
    // A ReplicationController's: its selector map.
    assert_eq!(pod(&w, "legacy-")[0].spread[0].selector, Some(sel(&[("app", "legacy")])));
    // Nothing in its namespace selects it (the Service that would is in another one; ExternalName
    // Services have no selector): no default.
    assert!(pod(&w, "lonely-")[0].spread.is_empty());
    // Its own constraints: the defaults do not apply.
    let own = &pod(&w, "own-")[0].spread;
    assert!(own.len() == 1 && !own[0].defaulted && own[0].when == WhenUnsatisfiable::ScheduleAnyway, "{own:?}");
}

#[test]
fn system_defaults_keep_no_constraint_and_rebuilding_is_exact() {
    let w = load(&workload());
    assert_eq!(w.cluster.spread_defaults, SpreadDefaults::default());
    // System defaults are ScheduleAnyway: they only score, and only filtering defaults are kept.
    assert!(w.cluster.pods.iter().filter(|p| !p.name.starts_with("own-")).all(|p| p.spread.is_empty()));
    let list = w.clone().with_spread_defaults(&zone_hard()).unwrap();
    assert!(list.cluster.pods.iter().filter(|p| p.name.starts_with("web-")).all(|p| p.spread.len() == 1));
    let back = list.with_spread_defaults(&SpreadDefaults::default()).unwrap();
    assert_eq!(back.cluster, w.cluster, "rebuilding under System gives the pods loading gave");
    // Selecting other pods keeps the setting.
    let re = stowage_input::load_texts([(Path::new("w.yaml"), workload().as_str())]).unwrap().with_spread_defaults(&zone_hard()).unwrap();
    let re = re.reselect(stowage_input::Selection::AllUnbound).unwrap();
    assert_eq!(re.cluster.spread_defaults, zone_hard());
    assert!(pod(&re, "web-").iter().all(|p| p.spread.len() == 1));
}

#[test]
fn a_replicaset_in_the_workload_gives_its_own_selector() {
    let text = "
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}, matchExpressions: [{key: track, operator: NotIn, values: [canary]}]}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: i}]}
";
    let w = load(text).with_spread_defaults(&zone_hard()).unwrap();
    let p = pod(&w, "rs-");
    assert_eq!(p.len(), 1);
    let want = sel(&[("app", "rs")]).and(SelectorRequirement::new("track", SelectorOp::NotIn, ["canary"]));
    assert_eq!(p[0].spread[0].selector, Some(want));
}

#[test]
fn bad_services_and_replication_controllers_name_file_object_and_field() {
    let cases = [
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: default}\nspec: {selector: [app]}\n", "Service default/s", "spec.selector"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: default}\nspec: {selector: {app: {nested: x}}}\n", "Service default/s", "spec.selector"),
        ("apiVersion: v1\nkind: ReplicationController\nmetadata: {name: r, namespace: default}\nspec: {replicas: many}\n", "ReplicationController default/r", "spec.replicas"),
    ];
    for (text, object, field) in cases {
        let e = stowage_input::load_texts([(Path::new("bad.yaml"), text)]).expect_err(text);
        let msg = e.to_string();
        assert!(msg.contains("bad.yaml") && msg.contains(object) && msg.contains(field), "{msg}");
    }
    let dup = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {a: b}}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: default}\nspec: {}\n";
    let msg = stowage_input::load_texts([(Path::new("dup.yaml"), dup)]).expect_err("duplicate").to_string();
    assert!(msg.contains("dup.yaml") && msg.contains("Service default/s") && msg.contains("metadata.name") && msg.contains("duplicate"), "{msg}");
}
