//! Instance profiles for `spec.role` (Karpenter `pkg/providers/instanceprofile`,
//! `pkg/controllers/nodeclass/instanceprofile.go`, `.../garbagecollection`).
//!
//! EC2 launches with an instance *profile*, not a role; a Karpenter v1 EC2NodeClass names the role
//! (`spec.role`) and the controller makes a profile for it. `spec.instanceProfile` is used as is.
//!
//! - **Reuse.** The profile in `status.instanceProfile` is kept while it exists and carries the role
//!   (so a NodeClass moved from Karpenter keeps Karpenter's profile).
//! - **Create.** Otherwise the profile [`profile_name`] (`<cluster>_<hash of region, NodeClass name,
//!   uid and role>`, Karpenter's `<cluster>_<hash>` shape; deterministic, so a restarted controller
//!   finds its own, and a changed role gets a new profile as in Karpenter) is created if missing under
//!   Karpenter's path `/karpenter/<region>/<cluster>/<nodeclass uid>/` with [`profile_tags`], and the role
//!   is added (a different role is removed first; a profile holds one role).
//! - **Garbage collection** ([`garbage_collect`]): profiles under `/karpenter/<region>/<cluster>/` that
//!   carry the managed tags (`kubernetes.io/cluster/<cluster>=owned` and `karpenter.k8s.aws/ec2nodeclass`)
//!   and that no EC2NodeClass uses and no live instance of the cluster is attached to, lose their role
//!   and are deleted. Profiles outside that path or without those tags are never touched.
//!
//! | call | parameters |
//! |---|---|
//! | `GetInstanceProfile` | the status's profile, then the computed name; each GC candidate (for its tags) |
//! | `CreateInstanceProfile` | name, path, tags |
//! | `AddRoleToInstanceProfile` / `RemoveRoleFromInstanceProfile` | the profile, the role name (without its path) |
//! | `ListInstanceProfiles` | `PathPrefix=/karpenter/<region>/<cluster>/`, paginated (GC) |
//! | `DeleteInstanceProfile` | GC |

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_iam::types::Tag;

use super::errors::AwsError;
use super::retry::{RetryPolicy, call_with_retries};
use super::{TAG_EKS_CLUSTER, TAG_NODECLASS, cluster_tag};
use stowage_input::api::EC2NodeClass;

pub(crate) const TAG_REGION: &str = "topology.kubernetes.io/region";
const NO_SUCH_ENTITY: &str = "NoSuchEntity";
const ALREADY_EXISTS: &str = "EntityAlreadyExists";

/// The IAM client and the retry policy its calls go through.
#[derive(Clone, Debug)]
pub struct Iam {
    pub client: aws_sdk_iam::Client,
    pub retry: RetryPolicy,
}

/// FNV-1a, 64 bits: a stable hash (the standard library's is not stable across releases).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `<cluster>_<hash>`: Karpenter's shape (it hashes region, name and a random uuid; stowage hashes the
/// uid and the role instead, so the name is reproducible and changes with the role).
pub fn profile_name(cluster: &str, region: &str, nc: &EC2NodeClass, role: &str) -> String {
    let name = nc.metadata.name.as_deref().unwrap_or_default();
    let uid = nc.metadata.uid.as_deref().unwrap_or_default();
    format!("{cluster}_{}", fnv1a(&format!("{region}\u{0}{name}\u{0}{uid}\u{0}{role}")))
}

/// `/karpenter/<region>/<cluster>/<uid>/` (Karpenter's; its GC lists by the cluster prefix).
pub fn profile_path(cluster: &str, region: &str, nc: &EC2NodeClass) -> String {
    let uid = nc.metadata.uid.as_deref().filter(|u| !u.is_empty()).unwrap_or("none");
    format!("{}{uid}/", cluster_prefix(cluster, region))
}

fn cluster_prefix(cluster: &str, region: &str) -> String {
    format!("/karpenter/{region}/{cluster}/")
}

/// `spec.tags` ∪ {`kubernetes.io/cluster/<c>=owned`, `eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass`,
/// `topology.kubernetes.io/region`} (Karpenter's `InstanceProfileTags`; the last four win).
pub fn profile_tags(cluster: &str, region: &str, nc: &EC2NodeClass) -> BTreeMap<String, String> {
    let mut tags = nc.spec.tags.clone().unwrap_or_default();
    tags.insert(cluster_tag(cluster), "owned".into());
    tags.insert(TAG_EKS_CLUSTER.into(), cluster.into());
    tags.insert(TAG_NODECLASS.into(), nc.metadata.name.clone().unwrap_or_default());
    tags.insert(TAG_REGION.into(), region.into());
    tags
}

/// Whether a profile's tags mark it as made by stowage or Karpenter for this cluster.
pub fn is_managed(cluster: &str, tags: &BTreeMap<String, String>) -> bool {
    tags.get(&cluster_tag(cluster)).map(String::as_str) == Some("owned") && tags.contains_key(TAG_NODECLASS)
}

/// The role name without an IAM path (`AddRoleToInstanceProfile` takes names only).
fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

struct Profile {
    name: String,
    roles: Vec<String>,
    tags: BTreeMap<String, String>,
}

async fn get(iam: &Iam, name: &str) -> Result<Option<Profile>, AwsError> {
    let req = iam.client.get_instance_profile().instance_profile_name(name);
    match call_with_retries(&iam.retry, "GetInstanceProfile", || req.clone().send()).await {
        Ok(out) => Ok(out.instance_profile().map(|p| Profile {
            name: p.instance_profile_name().to_string(),
            roles: p.roles().iter().map(|r| r.role_name().to_string()).collect(),
            tags: p.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect(),
        })),
        Err(e) if e.has_code(NO_SUCH_ENTITY) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The instance profile for `nc`: `spec.instanceProfile` as is, else one made for `spec.role` (module
/// docs). `Ok(Err(m))`: the NodeClass cannot get one (no role or profile; the role does not exist).
pub async fn ensure(iam: &Iam, cluster: &str, region: &str, nc: &EC2NodeClass) -> Result<Result<String, String>, AwsError> {
    if let Some(p) = nc.spec.instance_profile.as_deref().filter(|p| !p.is_empty()) {
        return Ok(Ok(p.to_string()));
    }
    let Some(role) = nc.spec.role.as_deref().filter(|r| !r.is_empty()) else {
        return Ok(Err("neither spec.role nor spec.instanceProfile is set".into()));
    };
    let role = role_name(role);
    if let Some(current) = nc.status.as_ref().and_then(|s| s.instance_profile.as_deref()).filter(|p| !p.is_empty())
        && let Some(p) = get(iam, current).await?
        && p.roles.iter().any(|r| r == role)
    {
        return Ok(Ok(p.name));
    }
    let name = profile_name(cluster, region, nc, role);
    let profile = match get(iam, &name).await? {
        Some(p) => p,
        None => {
            let tags: Vec<Tag> = profile_tags(cluster, region, nc).into_iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
            let req = iam.client.create_instance_profile().instance_profile_name(&name).path(profile_path(cluster, region, nc)).set_tags(Some(tags));
            match call_with_retries(&iam.retry, "CreateInstanceProfile", || req.clone().send()).await {
                Ok(_) => tracing::info!(instance_profile = %name, nodeclass = ?nc.metadata.name, "created instance profile"),
                // Another replica (or an earlier, interrupted attempt) made it meanwhile.
                Err(e) if e.has_code(ALREADY_EXISTS) => {}
                Err(e) => return Err(e),
            }
            Profile { name: name.clone(), roles: Vec::new(), tags: BTreeMap::new() }
        }
    };
    if profile.roles.iter().any(|r| r == role) {
        return Ok(Ok(profile.name));
    }
    for other in &profile.roles {
        let req = iam.client.remove_role_from_instance_profile().instance_profile_name(&name).role_name(other);
        call_with_retries(&iam.retry, "RemoveRoleFromInstanceProfile", || req.clone().send()).await?;
    }
    let req = iam.client.add_role_to_instance_profile().instance_profile_name(&name).role_name(role);
    match call_with_retries(&iam.retry, "AddRoleToInstanceProfile", || req.clone().send()).await {
        Ok(_) => Ok(Ok(name)),
        Err(e) if e.has_code(NO_SUCH_ENTITY) => Ok(Err(format!("spec.role {role}: no such IAM role ({e}); create it or fix the name"))),
        Err(e) => Err(e),
    }
}

/// The profiles under the cluster's path (filtered here too: not every IAM implementation honours
/// `PathPrefix`).
async fn list_cluster_profiles(iam: &Iam, cluster: &str, region: &str) -> Result<Vec<String>, AwsError> {
    let prefix = cluster_prefix(cluster, region);
    let mut names = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let req = iam.client.list_instance_profiles().path_prefix(&prefix).set_marker(marker.clone());
        let out = call_with_retries(&iam.retry, "ListInstanceProfiles", || req.clone().send()).await?;
        names.extend(out.instance_profiles().iter().filter(|p| p.path().starts_with(&prefix)).map(|p| p.instance_profile_name().to_string()));
        marker = out.marker().filter(|m| out.is_truncated() && !m.is_empty()).map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    Ok(names)
}

/// Deletes the managed profiles of this cluster that are not in `in_use` (module docs); returns their
/// names. A profile deleted meanwhile is skipped.
pub async fn garbage_collect(iam: &Iam, cluster: &str, region: &str, in_use: &BTreeSet<String>) -> Result<Vec<String>, AwsError> {
    let mut deleted = Vec::new();
    for name in list_cluster_profiles(iam, cluster, region).await? {
        if in_use.contains(&name) {
            continue;
        }
        // GetInstanceProfile returns the tags (ListInstanceProfiles does not).
        let Some(profile) = get(iam, &name).await? else { continue };
        if !is_managed(cluster, &profile.tags) {
            continue;
        }
        for role in &profile.roles {
            let req = iam.client.remove_role_from_instance_profile().instance_profile_name(&name).role_name(role);
            call_with_retries(&iam.retry, "RemoveRoleFromInstanceProfile", || req.clone().send()).await?;
        }
        let req = iam.client.delete_instance_profile().instance_profile_name(&name);
        match call_with_retries(&iam.retry, "DeleteInstanceProfile", || req.clone().send()).await {
            Ok(_) => {
                tracing::info!(instance_profile = %name, "deleted an instance profile no EC2NodeClass uses");
                deleted.push(name);
            }
            Err(e) if e.has_code(NO_SUCH_ENTITY) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nc(name: &str, uid: &str) -> EC2NodeClass {
        let mut n = EC2NodeClass::new(name, Default::default());
        n.metadata.uid = Some(uid.into());
        n.spec.tags = Some([("team".to_string(), "a".to_string()), (TAG_NODECLASS.to_string(), "spoofed".to_string())].into_iter().collect());
        n
    }

    #[test]
    fn names_are_stable_and_change_with_the_role_and_the_object() {
        let a = nc("default", "u-1");
        let n = profile_name("demo", "us-east-1", &a, "KarpenterNodeRole-demo");
        assert!(n.starts_with("demo_") && n.len() <= 128 && n[5..].chars().all(|c| c.is_ascii_digit()), "{n}");
        assert_eq!(n, profile_name("demo", "us-east-1", &a, "KarpenterNodeRole-demo"));
        assert_ne!(n, profile_name("demo", "us-east-1", &a, "OtherRole"));
        assert_ne!(n, profile_name("demo", "us-east-1", &nc("default", "u-2"), "KarpenterNodeRole-demo"));
        assert_ne!(n, profile_name("demo", "eu-west-1", &a, "KarpenterNodeRole-demo"));
        assert_eq!(profile_path("demo", "us-east-1", &a), "/karpenter/us-east-1/demo/u-1/");
        assert_eq!(role_name("/nodes/KarpenterNodeRole-demo"), "KarpenterNodeRole-demo");
    }

    #[test]
    fn tags_are_karpenters_and_ours_win() {
        let t = profile_tags("demo", "us-east-1", &nc("default", "u-1"));
        assert_eq!(t.get("kubernetes.io/cluster/demo").map(String::as_str), Some("owned"));
        assert_eq!(t.get(TAG_NODECLASS).map(String::as_str), Some("default"));
        assert_eq!(t.get(TAG_REGION).map(String::as_str), Some("us-east-1"));
        assert_eq!(t.get(TAG_EKS_CLUSTER).map(String::as_str), Some("demo"));
        assert_eq!(t.get("team").map(String::as_str), Some("a"));
        assert!(is_managed("demo", &t));
        assert!(!is_managed("other", &t));
        assert!(!is_managed("demo", &[("kubernetes.io/cluster/demo".to_string(), "owned".to_string())].into_iter().collect()));
    }
}
