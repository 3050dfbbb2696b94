//! `stowage record`: the current batch of a live cluster as files `stowage plan` and `stowage bench`
//! read: the workload (every object the planner reads, as the controller's snapshot has them: managed
//! Nodes without their registration taints, NodeClaims in flight with their planning size, only the
//! pods kube-scheduler found unschedulable among the unbound ones) and the catalog the controller would
//! plan with (the cloud's, with the offerings it refused marked unavailable).
//!
//! Planning the recorded files offline gives the plan the controller makes from the same state: both go
//! through the same `ClusterState::snapshot` and the same `Problem`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use super::state::{ClusterState, Kind, StateObject};
use stowage_core::domain::catalog::Catalog;
use stowage_core::domain::resources::Resources;
use stowage_input::api::{EC2NodeClass, NodeClaim, NodePool};
use stowage_input::catalog::file::{AwsFile, CatalogFile, OfferingFile, OverheadFile, ReservationFile, SCHEMA, TypeFile};
use stowage_input::quantity;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Listing a kind failed: check the kubeconfig and that the identity may list it (the Karpenter
    /// CRDs must be installed).
    #[error("listing {kind}: {error}")]
    List { kind: Kind, error: kube::Error },
    #[error(transparent)]
    Snapshot(#[from] super::state::StateError),
}

/// What `stowage record` writes.
pub struct Recording {
    /// A `v1 List` (docs/formats.md §1).
    pub workload: serde_json::Value,
    pub catalog: CatalogFile,
    /// Provisionable pods in the batch.
    pub pending: usize,
    /// Objects left out because stowage cannot read them.
    pub excluded: Vec<String>,
    /// Fields of the recorded NodePools and EC2NodeClasses stowage does not act on, one line each
    /// naming the object and the field ([`unsupported`]).
    pub unsupported: Vec<String>,
}

async fn list_into<K: StateObject + DeserializeOwned + std::fmt::Debug>(client: &kube::Client, s: &mut ClusterState) -> Result<(), RecordError> {
    let api: Api<K> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await.map_err(|error| RecordError::List { kind: K::KIND, error })?;
    s.init::<K>();
    for o in list.items {
        s.init_apply(o);
    }
    s.init_done::<K>();
    Ok(())
}

/// Lists everything the planner reads.
pub async fn cluster_state(client: &kube::Client) -> Result<ClusterState, RecordError> {
    let mut s = ClusterState::default();
    list_into::<Pod>(client, &mut s).await?;
    list_into::<Node>(client, &mut s).await?;
    list_into::<NodePool>(client, &mut s).await?;
    list_into::<NodeClaim>(client, &mut s).await?;
    list_into::<EC2NodeClass>(client, &mut s).await?;
    list_into::<PersistentVolumeClaim>(client, &mut s).await?;
    list_into::<PersistentVolume>(client, &mut s).await?;
    list_into::<StorageClass>(client, &mut s).await?;
    list_into::<CSINode>(client, &mut s).await?;
    list_into::<DaemonSet>(client, &mut s).await?;
    list_into::<Namespace>(client, &mut s).await?;
    list_into::<Service>(client, &mut s).await?;
    list_into::<ReplicationController>(client, &mut s).await?;
    list_into::<ReplicaSet>(client, &mut s).await?;
    list_into::<StatefulSet>(client, &mut s).await?;
    Ok(s)
}

/// Records the current batch; `catalog` is the one the controller plans with.
pub async fn record(client: &kube::Client, catalog: &Catalog) -> Result<Recording, RecordError> {
    let s = cluster_state(client).await?;
    recording(&s, catalog)
}

/// The recording of a state (pure).
pub fn recording(s: &ClusterState, catalog: &Catalog) -> Result<Recording, RecordError> {
    let snap = s.snapshot(catalog)?;
    Ok(Recording {
        workload: stowage_input::export::to_list(&snap.objects),
        catalog: catalog_file(catalog),
        pending: snap.cluster.pending().len(),
        excluded: snap.excluded.iter().map(|x| x.reason.clone()).collect(),
        unsupported: unsupported(s),
    })
}

/// Every field of the state's NodePools and EC2NodeClasses that stowage reads but does not act on
/// (`stowage_input::unsupported`), as `<Kind> <name>: <field>: not supported by stowage: <what it does>`.
pub fn unsupported(s: &ClusterState) -> Vec<String> {
    let line = |kind: &str, name: Option<&String>, u: stowage_input::unsupported::Unsupported| format!("{kind} {}: {}: not supported by stowage: {}", name.map_or("", |n| n.as_str()), u.path, u.note);
    let pools = s.nodepools.iter().flat_map(|p| stowage_input::unsupported::nodepool(p).into_iter().map(|u| line("NodePool", p.metadata.name.as_ref(), u)));
    let classes = s.nodeclasses.iter().flat_map(|c| stowage_input::unsupported::nodeclass(c).into_iter().map(|u| line("EC2NodeClass", c.metadata.name.as_ref(), u)));
    pools.chain(classes).collect()
}

fn quantities(r: &Resources) -> BTreeMap<String, String> {
    r.iter().map(|(n, v)| (n.to_string(), quantity::format(n, v))).collect()
}

/// A catalog as a file that loads back into the same catalog.
pub(crate) fn catalog_file(c: &Catalog) -> CatalogFile {
    CatalogFile {
        schema: SCHEMA.into(),
        name: c.name.clone(),
        region: c.region.clone(),
        zones: c.zones.clone(),
        provenance: c.provenance.iter().cloned().chain(["recorded by stowage record from the controller's cloud catalog".to_string()]).collect(),
        instance_types: c
            .types
            .iter()
            .map(|t| TypeFile {
                name: t.name.clone(),
                labels: t.labels.clone(),
                capacity: quantities(&t.capacity),
                // The overhead is kept as one sum; only the total matters (allocatable = capacity - overhead).
                overhead: Some(OverheadFile { kube_reserved: quantities(&t.overhead), ..Default::default() }),
                offerings: t
                    .offerings
                    .iter()
                    .map(|o| OfferingFile {
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.clone(),
                        price: o.price,
                        available: o.available,
                        price_source: o.synthetic.then(|| "synthetic".to_string()),
                        reservation: o.reservation.as_ref().map(|r| ReservationFile { id: r.id.clone(), kind: r.kind.clone(), interruptible: r.interruptible, count: r.count }),
                    })
                    .collect(),
                aws: t.aws.as_ref().map(|a| AwsFile {
                    vcpu: a.vcpu,
                    memory_mib: a.memory_mib,
                    arch: a.arch.clone(),
                    enis_default_card: a.enis_default_card,
                    ipv4_per_eni: a.ipv4_per_eni,
                    branch_enis: a.branch_enis,
                    local_nvme_gb: a.local_nvme_gb,
                }),
                // The EBS limit of a type with AWS facts is derived again on load.
                attach_limits: t.attach_limits.iter().filter(|(d, _)| t.aws.is_none() || d.as_str() != stowage_core::catalog::aws::EBS_CSI_DRIVER).map(|(d, n)| (d.clone(), *n)).collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_fields_of_the_recorded_objects_are_named() {
        let mut s = ClusterState::default();
        let mut fixed = NodePool::new("fixed", Default::default());
        fixed.spec.replicas = Some(1);
        s.init::<NodePool>();
        s.init_apply(fixed);
        s.init_apply(NodePool::new("dynamic", Default::default()));
        s.init_done::<NodePool>();
        let mut nc = EC2NodeClass::new("default", Default::default());
        nc.spec.cpu_options = Some(serde_json::json!({"coreCount": 2}));
        s.init::<EC2NodeClass>();
        s.init_apply(nc);
        s.init_done::<EC2NodeClass>();
        assert_eq!(
            unsupported(&s),
            vec![
                format!("NodePool fixed: spec.replicas: not supported by stowage: {}", stowage_input::unsupported::STATIC),
                "EC2NodeClass default: spec.cpuOptions: not supported by stowage: read, not acted on".to_string(),
            ]
        );
    }

    #[test]
    fn a_catalog_round_trips_through_its_file() {
        let c = stowage_input::catalog::default_catalog();
        let text = stowage_input::catalog::generate::to_json(&catalog_file(c));
        let back = stowage_input::catalog::parse("recorded", &text).unwrap();
        assert_eq!(back.types.len(), c.types.len());
        for (a, b) in c.types.iter().zip(&back.types) {
            assert_eq!(a.allocatable(), b.allocatable(), "{}", a.name);
            assert_eq!(a.capacity, b.capacity, "{}", a.name);
            assert_eq!(a.offerings, b.offerings, "{}", a.name);
            assert_eq!(a.labels, b.labels);
            assert_eq!(a.aws, b.aws);
        }
    }
}
