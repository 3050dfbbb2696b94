//! `stowage plan` and `stowage check` with a cluster-default topology spread (issue 15, behaviour 6):
//! `plan` builds the workload under the weights' `topologySpreadDefaults` and records it; `check`
//! rebuilds the workload under the plan's setting, so a plan is judged for the pods it was made for.
//! Two tainted nodes no pod tolerates make zones b and c domains kube-scheduler sees (its spread counts
//! real nodes only, and nodeTaintsPolicy defaults to Ignore).

use std::process::Command;

fn stowage() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
}

const WORKLOAD: &str = "---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {role: test, amiSelectorTerms: [{alias: al2023@latest}], subnetSelectorTerms: [{tags: {k: v}}], securityGroupSelectorTerms: [{tags: {k: v}}]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: v1
kind: Node
metadata: {name: tainted-b, labels: {kubernetes.io/hostname: tainted-b, topology.kubernetes.io/zone: us-east-1b}}
spec: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}
status: {allocatable: {cpu: '4', memory: 16Gi, pods: '110'}, capacity: {cpu: '4', memory: 16Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: tainted-c, labels: {kubernetes.io/hostname: tainted-c, topology.kubernetes.io/zone: us-east-1c}}
spec: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}
status: {allocatable: {cpu: '4', memory: 16Gi, pods: '110'}, capacity: {cpu: '4', memory: 16Gi, pods: '110'}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]}
";

fn zones(plan: &serde_json::Value) -> std::collections::BTreeSet<String> {
    plan["newNodes"].as_array().unwrap().iter().filter(|n| !n["pods"].as_array().unwrap().is_empty()).map(|n| n["zone"].as_str().unwrap().to_string()).collect()
}

#[test]
fn plan_applies_the_weights_defaults_and_check_judges_by_the_plans() {
    let dir = std::env::temp_dir().join(format!("stowage-cli-spread-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("workload.yaml");
    std::fs::write(&workload, WORKLOAD).unwrap();
    let weights = dir.join("weights.yaml");
    let list = "topologySpreadDefaults:\n  defaultingType: List\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";
    std::fs::write(&weights, stowage_core::weights::DEFAULT_YAML.replace("topologySpreadDefaults:\n  defaultingType: System\n", list)).unwrap();

    let plan = |extra: &[&std::ffi::OsStr]| -> serde_json::Value {
        let out = stowage().arg("plan").arg(&workload).args(["-o", "json"]).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let spread = plan(&["--weights".as_ref(), weights.as_os_str()]);
    assert_eq!(spread["topologySpreadDefaults"]["defaultingType"], "List");
    assert_eq!(zones(&spread).len(), 3, "the zone default spreads the six replicas over three zones: {spread:#}");
    let packed = plan(&[]);
    assert_eq!(packed["topologySpreadDefaults"]["defaultingType"], "System");
    assert_eq!(zones(&packed).len(), 1, "System defaults only score: one node in one zone: {packed:#}");

    let check = |p: &serde_json::Value, name: &str| -> (Option<i32>, String) {
        let f = dir.join(name);
        std::fs::write(&f, p.to_string()).unwrap();
        let out = stowage().arg("check").arg(&workload).arg("--plan").arg(&f).output().unwrap();
        (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    // Each plan is valid for the pods it was made for (check takes no --weights: the plan says).
    assert_eq!(check(&spread, "spread.json").0, Some(0));
    assert_eq!(check(&packed, "packed.json").0, Some(0));
    // The packed plan claimed to be made under the zone default: judged so, it breaks it.
    let mut forged = packed.clone();
    forged["topologySpreadDefaults"] = spread["topologySpreadDefaults"].clone();
    let (code, out) = check(&forged, "forged.json");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("PodTopologySpread"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
