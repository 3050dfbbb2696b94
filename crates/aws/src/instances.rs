//! Instances the provider owns: listing, lookup by NodeClaim, termination, tagging after registration.
//!
//! | call | parameters |
//! |---|---|
//! | `DescribeInstances` (list) | filters `tag-key=karpenter.sh/nodepool`, `tag-key=karpenter.k8s.aws/ec2nodeclass`, `tag:eks:eks-cluster-name=<cluster>`, `instance-state-name` ∈ pending, running, stopping, stopped, shutting-down; `MaxResults` 1000, paginated |
//! | `DescribeInstances` (by NodeClaim, before every launch) | filters `tag:karpenter.sh/nodeclaim=<name>`, `tag:eks:eks-cluster-name=<cluster>`, `instance-state-name` ∈ pending, running, stopping, stopped |
//! | `TerminateInstances` | `InstanceIds=[id]` |
//! | `CreateTags` | `Resources=[id]`, `Name=<node>`, `karpenter.sh/nodeclaim=<nodeclaim>`, `eks:eks-cluster-name=<cluster>` |

use aws_sdk_ec2::types::{Filter, InstanceLifecycleType, Tag};

use super::errors::{AwsError, Class};
use super::filters::filter;
use super::{Ec2, TAG_EKS_CLUSTER, TAG_NODECLAIM, TAG_NODECLASS, TAG_NODEPOOL};
use stowage_decide::cloud::{CloudError, Instance};

/// States `list` reports (Karpenter's list filter): everything but terminated.
pub(crate) const LISTED_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];
/// States in which an instance still counts as the NodeClaim's (a relaunch returns it).
pub(crate) const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// `aws:///<zone>/<instance-id>` → instance id. Also accepts a bare instance id.
pub fn instance_id(provider_id: &str) -> Result<String, CloudError> {
    let id = match provider_id.strip_prefix("aws://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(""),
        None => provider_id,
    };
    if id.starts_with("i-") && id.len() > 2 && id[2..].chars().all(|c| c.is_ascii_alphanumeric()) {
        Ok(id.to_string())
    } else {
        Err(CloudError::Fatal(format!("invalid provider id {provider_id:?}: expected aws:///<zone>/i-<id>")))
    }
}

pub fn provider_id(zone: &str, id: &str) -> String {
    format!("aws:///{zone}/{id}")
}

pub(crate) fn to_instance(i: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    let id = i.instance_id()?.to_string();
    let zone = i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string();
    let tag = |k: &str| i.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()).map(str::to_string);
    Some(Instance {
        provider_id: provider_id(&zone, &id),
        id,
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone,
        capacity_type: if i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot) { "spot" } else { "on-demand" }.to_string(),
        state: i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default(),
        nodepool: tag(TAG_NODEPOOL),
        nodeclaim: tag(TAG_NODECLAIM),
        launched_at: i.launch_time().map(|t| t.secs()).unwrap_or(0),
        image_id: i.image_id().map(str::to_string),
        subnet_id: i.subnet_id().map(str::to_string),
        // A VPC instance is always in at least one group: an empty list is a description that lacks
        // them (moto's, for an instance a launch template put in groups), not a fact, so unknown.
        security_group_ids: Some(i.security_groups().iter().filter_map(|g| g.group_id().map(str::to_string)).collect::<Vec<_>>()).filter(|g| !g.is_empty()),
        capacity_reservation_id: i.capacity_reservation_id().map(str::to_string),
    })
}

async fn describe(ec2: &Ec2, filters: Vec<Filter>) -> Result<Vec<Instance>, AwsError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let req = ec2.client.describe_instances().set_filters(Some(filters.clone())).max_results(1000).set_next_token(token.clone());
        let page = ec2.call("DescribeInstances", || req.clone().send()).await?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(to_instance));
        token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    out.sort_by(|a, b| (a.launched_at, &a.id).cmp(&(b.launched_at, &b.id)));
    Ok(out)
}

pub async fn list(ec2: &Ec2, cluster: &str) -> Result<Vec<Instance>, AwsError> {
    describe(ec2, vec![filter("tag-key", [TAG_NODEPOOL]), filter("tag-key", [TAG_NODECLASS]), filter(&format!("tag:{TAG_EKS_CLUSTER}"), [cluster]), filter("instance-state-name", LISTED_STATES)]).await
}

/// The names of the instance profiles the cluster's listed instances are launched with (from
/// `IamInstanceProfile.Arn`, `arn:aws:iam::<account>:instance-profile[/<path>]/<name>`).
pub(crate) async fn attached_profiles(ec2: &Ec2, cluster: &str) -> Result<Vec<String>, AwsError> {
    let filters = vec![filter(&format!("tag:{TAG_EKS_CLUSTER}"), [cluster]), filter("instance-state-name", LISTED_STATES)];
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let req = ec2.client.describe_instances().set_filters(Some(filters.clone())).max_results(1000).set_next_token(token.clone());
        let page = ec2.call("DescribeInstances", || req.clone().send()).await?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.iam_instance_profile()?.arn()?.rsplit('/').next().map(str::to_string)));
        token = page.next_token().filter(|t| !t.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}

/// The live instance launched for this NodeClaim, if any (the oldest if a past bug made several).
pub(crate) async fn find_by_nodeclaim(ec2: &Ec2, cluster: &str, nodeclaim: &str) -> Result<Option<Instance>, AwsError> {
    let found = describe(ec2, vec![filter(&format!("tag:{TAG_NODECLAIM}"), [nodeclaim]), filter(&format!("tag:{TAG_EKS_CLUSTER}"), [cluster]), filter("instance-state-name", LIVE_STATES)]).await?;
    if found.len() > 1 {
        tracing::warn!(nodeclaim, instances = ?found.iter().map(|i| &i.id).collect::<Vec<_>>(), "several live instances carry this NodeClaim's tag");
    }
    Ok(found.into_iter().next())
}

/// `NotFound` when the instance does not exist or was already terminated.
pub async fn terminate(ec2: &Ec2, provider_id: &str) -> Result<(), CloudError> {
    let id = instance_id(provider_id)?;
    let req = ec2.client.terminate_instances().instance_ids(&id);
    let out = match ec2.call("TerminateInstances", || req.clone().send()).await {
        Ok(o) => o,
        Err(e) if e.class == Class::NotFound || e.has_code("InvalidInstanceID.Malformed") => {
            return Err(CloudError::NotFound(format!("instance {id}: {e}")));
        }
        Err(e) => return Err(e.into()),
    };
    let previous = out.terminating_instances().iter().find(|c| c.instance_id() == Some(id.as_str())).and_then(|c| c.previous_state()).and_then(|s| s.name());
    if previous.map(|s| s.as_str()) == Some("terminated") {
        return Err(CloudError::NotFound(format!("instance {id} was already terminated")));
    }
    tracing::info!(instance = %id, "terminated instance");
    Ok(())
}

pub async fn tag_registered(ec2: &Ec2, cluster: &str, provider_id: &str, nodeclaim: &str, node: &str) -> Result<(), CloudError> {
    let id = instance_id(provider_id)?;
    let req = ec2
        .client
        .create_tags()
        .resources(&id)
        .tags(Tag::builder().key("Name").value(node).build())
        .tags(Tag::builder().key(TAG_NODECLAIM).value(nodeclaim).build())
        .tags(Tag::builder().key(TAG_EKS_CLUSTER).value(cluster).build());
    match ec2.call("CreateTags", || req.clone().send()).await {
        Ok(_) => Ok(()),
        Err(e) if e.class == Class::NotFound => Err(CloudError::NotFound(format!("instance {id}: {e}"))),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_parse() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc123").unwrap(), "i-0abc123");
        assert_eq!(instance_id("i-0abc123").unwrap(), "i-0abc123");
        assert!(matches!(instance_id("aws:///us-east-1a/"), Err(CloudError::Fatal(_))));
        assert!(matches!(instance_id("gce://x/y"), Err(CloudError::Fatal(_))));
        assert_eq!(provider_id("us-east-1a", "i-1"), "aws:///us-east-1a/i-1");
    }
}
