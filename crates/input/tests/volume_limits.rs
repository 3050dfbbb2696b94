//! CSINode objects and the volumes NodeVolumeLimits counts, read from kubectl-style files: per node its
//! drivers' `allocatable.count`; per pod, bound or pending, the driver and handle of each claim. A
//! CSINode the API server would refuse is an error naming file, object and field.

use std::path::Path;

use stowage_core::domain::pod::AttachVolume;
use stowage_input::{Workload, load_texts};

const EBS: &str = "ebs.csi.aws.com";

fn load(text: &str) -> Result<Workload, String> {
    load_texts([(Path::new("vols.yaml"), text)]).map_err(|e| e.to_string())
}

const NODE: &str = "---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}
";

fn csinode(drivers: &str) -> String {
    format!("---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {{name: n1}}\nspec: {{drivers: [{drivers}]}}\n")
}

#[test]
fn csinode_counts_become_the_nodes_attach_limits() {
    let text = format!("{NODE}{}", csinode(&format!("{{name: {EBS}, nodeID: i-1, allocatable: {{count: 25}}}}, {{name: efs.csi.aws.com, nodeID: i-1}}")));
    let w = load(&text).expect("loads");
    let n = w.cluster.node("n1").expect("n1");
    assert_eq!(n.attach_limits.get(EBS), Some(&25));
    assert_eq!(n.attach_limits.get("efs.csi.aws.com"), None, "a driver without a count has no limit");
    // Without a CSINode, no limit at all.
    let w = load(NODE).expect("loads");
    assert!(w.cluster.node("n1").unwrap().attach_limits.is_empty());
}

#[test]
fn a_csinode_the_api_server_would_refuse_names_file_object_and_field() {
    let negative = format!("{NODE}{}", csinode(&format!("{{name: {EBS}, nodeID: i-1, allocatable: {{count: -1}}}}")));
    let msg = load(&negative).expect_err("a negative count fails");
    for part in ["vols.yaml", "CSINode n1", "spec.drivers[0].allocatable.count", "non-negative"] {
        assert!(msg.contains(part), "the error does not name {part:?}: {msg}");
    }
    let twice = format!("{NODE}{}", csinode(&format!("{{name: {EBS}, nodeID: i-1}}, {{name: {EBS}, nodeID: i-1}}")));
    let msg = load(&twice).expect_err("a driver twice fails");
    for part in ["CSINode n1", "spec.drivers[1].name", "listed twice"] {
        assert!(msg.contains(part), "the error does not name {part:?}: {msg}");
    }
    // A field of the wrong type is the parser's error, with the field.
    let bad = format!("{NODE}{}", csinode(&format!("{{name: {EBS}, nodeID: i-1, allocatable: {{count: many}}}}")));
    let msg = load(&bad).expect_err("a count that is not a number fails");
    assert!(msg.contains("CSINode n1") && msg.contains("spec.drivers"), "{msg}");
}

fn class(name: &str, provisioner: &str) -> String {
    format!("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: {provisioner}\nvolumeBindingMode: WaitForFirstConsumer\n")
}

fn claim(name: &str, class: &str, volume: &str) -> String {
    let bound = if volume.is_empty() { String::new() } else { format!(", volumeName: {volume}") };
    format!(
        "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\nspec: {{accessModes: [ReadWriteOnce], storageClassName: {class}, resources: {{requests: {{storage: 1Gi}}}}{bound}}}\n"
    )
}

fn pv(name: &str, source: &str) -> String {
    format!("---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{capacity: {{storage: 1Gi}}, accessModes: [ReadWriteOnce], storageClassName: gp3, {source}}}\n")
}

fn attach(w: &Workload, pod: &str) -> Vec<AttachVolume> {
    w.cluster.pods.iter().find(|p| p.name == pod).unwrap_or_else(|| panic!("pod {pod}")).volumes.attach.clone()
}

fn v(driver: &str, handle: &str) -> AttachVolume {
    AttachVolume { driver: driver.into(), handle: handle.into() }
}

#[test]
fn claims_count_by_volume_handle_or_by_provisioner() {
    let text = [
        NODE.to_string(),
        class("gp3", EBS),
        class("gp2-in-tree", "kubernetes.io/aws-ebs"),
        class("azurefile-in-tree", "kubernetes.io/azure-file"),
        pv("csi", &format!("csi: {{driver: {EBS}, volumeHandle: vol-1}}")),
        pv("in-tree", "awsElasticBlockStore: {volumeID: \"aws://zone-a/vol-2\"}"),
        pv("nfs", "nfs: {server: s, path: /x}"),
        claim("bound-csi", "gp3", "csi"),
        claim("bound-in-tree", "gp3", "in-tree"),
        claim("bound-nfs", "gp3", "nfs"),
        claim("unbound", "gp3", ""),
        claim("unbound-in-tree", "gp2-in-tree", ""),
        claim("unbound-azurefile", "azurefile-in-tree", ""),
        // Bound to n1: what it uses is attached there.
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: old, namespace: default}\nspec: {nodeName: n1, containers: [{name: c, image: pause}], volumes: [{name: a, persistentVolumeClaim: {claimName: bound-csi}}, {name: b, persistentVolumeClaim: {claimName: bound-in-tree}}, {name: c, persistentVolumeClaim: {claimName: bound-nfs}}]}\n".to_string(),
        // Pending, with unbound claims and a generic ephemeral volume.
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: new, namespace: default}\nspec: {containers: [{name: c, image: pause}], volumes: [{name: a, persistentVolumeClaim: {claimName: unbound}}, {name: b, persistentVolumeClaim: {claimName: unbound-in-tree}}, {name: c, persistentVolumeClaim: {claimName: unbound-azurefile}}, {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], storageClassName: gp3, resources: {requests: {storage: 1Gi}}}}}}]}\n".to_string(),
    ]
    .concat();
    let w = load(&text).expect("loads");
    // A CSI volume by its handle; an in-tree EBS volume under the EBS CSI driver, by its volume ID; NFS
    // is no attachable volume.
    assert_eq!(attach(&w, "old"), vec![v(EBS, "vol-1"), v(EBS, "vol-2")]);
    // Unbound claims by their class's provisioner (the in-tree EBS one migrated, Azure File not
    // counted), the ephemeral volume's claim named after pod and volume.
    assert_eq!(attach(&w, "new"), vec![v(EBS, "pvc:default/new-scratch"), v(EBS, "pvc:default/unbound"), v(EBS, "pvc:default/unbound-in-tree")]);
}
