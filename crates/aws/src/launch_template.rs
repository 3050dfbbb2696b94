//! Launch templates: one per distinct (AMI, maxPods, NodeClass settings, node labels and taints, tags),
//! named `stowage/<128-bit hash of the content>`, created when missing.
//!
//! Karpenter (`pkg/providers/launchtemplate/`) groups instance types the same way and names its
//! templates `karpenter.k8s.aws/<hash>`; because the name is a hash of everything in the template, a
//! template never needs updating: different content is a different name.
//!
//! | call | parameters |
//! |---|---|
//! | `DescribeLaunchTemplates` | `LaunchTemplateNames=[name]`; `InvalidLaunchTemplateName.NotFoundException` means "create it" |
//! | `CreateLaunchTemplate` | `LaunchTemplateName`, `LaunchTemplateData` (below), `TagSpecifications` launch-template = the launch tags; `InvalidLaunchTemplateName.AlreadyExistsException` (a concurrent creator won) counts as success |
//!
//! `LaunchTemplateData`: `ImageId`; `UserData` (base64, [`super::userdata`]); `IamInstanceProfile.Name`
//! (`spec.instanceProfile`, else the instance profile made for `spec.role`); `BlockDeviceMappings`
//! (`spec.blockDeviceMappings`, else the family's defaults: [`block_devices`]); `MetadataOptions` (`spec.metadataOptions`,
//! defaults endpoint enabled, IPv6 disabled, hop limit 1, tokens required, instance tags disabled);
//! `Monitoring.Enabled` (`spec.detailedMonitoring`); `SecurityGroupIds`, or with
//! `spec.associatePublicIPAddress` one `NetworkInterfaces[0]` (device 0, the groups, the flag);
//! `CapacityReservationSpecification` preference `none` (open ODCRs are not consumed, as in Karpenter), or for a
//! reserved launch preference `capacity-reservations-only` with `CapacityReservationTarget.CapacityReservationId` =
//! the reservation, and `InstanceMarketOptions.MarketType` `capacity-block` for a capacity block (Karpenter's);
//! `TagSpecifications` network-interface = the launch tags.
//!
//! The provider remembers names it created or saw for [`TEMPLATE_CACHE_TTL`]; CreateFleet answering
//! `InvalidLaunchTemplateName.NotFoundException` (someone deleted one) empties that memory and the
//! launch is retried once. stowage never deletes templates (Karpenter deletes its own after a minute
//! unused); their number is bounded by the distinct label/taint/AMI/maxPods combinations.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget, LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest, LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6, LaunchTemplateInstanceMetadataTagsState, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest, MarketType, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use serde::Serialize;

use super::Ec2;
use super::amifamily::Family;
use super::errors::{AwsError, LAUNCH_TEMPLATE_ALREADY_EXISTS, LAUNCH_TEMPLATE_NOT_FOUND};
use stowage_input::api::EC2NodeClass;

/// How long a template the provider created or saw is assumed to still exist.
pub(crate) const TEMPLATE_CACHE_TTL: Duration = Duration::from_secs(300);
pub(crate) const NAME_PREFIX: &str = "stowage/";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockDevice {
    pub device_name: String,
    pub volume_size_gib: Option<i32>,
    pub volume_type: Option<String>,
    pub encrypted: Option<bool>,
    pub delete_on_termination: Option<bool>,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metadata {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub hop_limit: i32,
    pub http_tokens: String,
}

/// Everything in one launch template. Its JSON is what the name hashes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct TemplateSpec {
    pub image_id: String,
    /// Plain text; base64-encoded in the request.
    pub user_data: String,
    pub instance_profile: Option<String>,
    pub security_group_ids: Vec<String>,
    pub associate_public_ip: Option<bool>,
    pub block_devices: Vec<BlockDevice>,
    pub metadata: Metadata,
    pub detailed_monitoring: bool,
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation a reserved launch targets; None: preference `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_id: Option<String>,
    /// The targeted reservation is a capacity block (market type `capacity-block`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub capacity_block: bool,
}

/// FNV-1a over the bytes with two different offset bases: 128 bits, stable across Rust and stowage
/// versions (unlike `std`'s hasher), which is what a resource name needs.
pub(crate) fn hash128(s: &str) -> String {
    let fnv = |mut h: u64| {
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        h
    };
    format!("{:016x}{:016x}", fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142))
}

impl TemplateSpec {
    pub fn name(&self) -> String {
        format!("{NAME_PREFIX}{}", hash128(&serde_json::to_string(self).unwrap_or_default()))
    }

    fn data(&self) -> RequestLaunchTemplateData {
        let mut d = RequestLaunchTemplateData::builder()
            .image_id(&self.image_id)
            .user_data(super::userdata::base64_encode(self.user_data.as_bytes()))
            .monitoring(LaunchTemplatesMonitoringRequest::builder().enabled(self.detailed_monitoring).build())
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(self.metadata.http_endpoint.as_str()))
                    .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(self.metadata.http_protocol_ipv6.as_str()))
                    .http_put_response_hop_limit(self.metadata.hop_limit)
                    .http_tokens(LaunchTemplateHttpTokensState::from(self.metadata.http_tokens.as_str()))
                    .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Disabled)
                    .build(),
            )
            .capacity_reservation_specification(match &self.capacity_reservation_id {
                Some(id) => LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_preference(CapacityReservationPreference::CapacityReservationsOnly)
                    .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(id).build())
                    .build(),
                None => LaunchTemplateCapacityReservationSpecificationRequest::builder().capacity_reservation_preference(CapacityReservationPreference::None).build(),
            })
            .tag_specifications(LaunchTemplateTagSpecificationRequest::builder().resource_type(ResourceType::NetworkInterface).set_tags(Some(tags(&self.tags))).build());
        if self.capacity_block {
            d = d.instance_market_options(LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build());
        }
        if let Some(p) = &self.instance_profile {
            d = d.iam_instance_profile(LaunchTemplateIamInstanceProfileSpecificationRequest::builder().name(p).build());
        }
        match self.associate_public_ip {
            Some(public) => {
                d = d.network_interfaces(
                    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder().device_index(0).associate_public_ip_address(public).set_groups(Some(self.security_group_ids.clone())).build(),
                );
            }
            None => d = d.set_security_group_ids(Some(self.security_group_ids.clone())),
        }
        for b in &self.block_devices {
            let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
                .set_volume_size(b.volume_size_gib)
                .set_volume_type(b.volume_type.as_deref().map(VolumeType::from))
                .set_encrypted(b.encrypted)
                .set_delete_on_termination(b.delete_on_termination)
                .set_iops(b.iops)
                .set_throughput(b.throughput)
                .set_kms_key_id(b.kms_key_id.clone())
                .set_snapshot_id(b.snapshot_id.clone())
                .build();
            d = d.block_device_mappings(LaunchTemplateBlockDeviceMappingRequest::builder().device_name(&b.device_name).ebs(ebs).build());
        }
        d.build()
    }
}

pub fn tags(m: &BTreeMap<String, String>) -> Vec<Tag> {
    m.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

/// Karpenter's default EBS volume (`DefaultEBS`): gp3, encrypted, deleted on termination.
fn default_volume(device: &str, gib: i32) -> BlockDevice {
    BlockDevice {
        device_name: device.into(),
        volume_size_gib: Some(gib),
        volume_type: Some("gp3".into()),
        encrypted: Some(true),
        delete_on_termination: Some(true),
        iops: None,
        throughput: None,
        kms_key_id: None,
        snapshot_id: None,
    }
}

/// The NodeClass's block devices, or the family's defaults (Karpenter's `DefaultBlockDeviceMappings`):
/// AL2023 and AL2 a 20 GiB root `/dev/xvda`; Bottlerocket a 4 GiB OS volume `/dev/xvda` and a 20 GiB
/// data volume `/dev/xvdb`; Custom the AMI's own. Errors name the field.
pub(crate) fn block_devices(nc: &EC2NodeClass, family: Family) -> Result<Vec<BlockDevice>, String> {
    let Some(bdms) = nc.spec.block_device_mappings.as_ref().filter(|b| !b.is_empty()) else {
        return Ok(match family {
            Family::Custom => Vec::new(),
            Family::Bottlerocket => vec![default_volume("/dev/xvda", 4), default_volume("/dev/xvdb", 20)],
            Family::Al2023 | Family::Al2 => vec![default_volume("/dev/xvda", 20)],
        });
    };
    let mut out = Vec::new();
    for (i, b) in bdms.iter().enumerate() {
        let at = format!("spec.blockDeviceMappings[{i}]");
        let device_name = b.device_name.clone().ok_or_else(|| format!("{at}.deviceName is required"))?;
        let ebs = b.ebs.clone().unwrap_or_default();
        let size = match &ebs.volume_size {
            Some(q) => {
                let bytes = stowage_input::quantity::value(&q.0).map_err(|e| format!("{at}.ebs.volumeSize: {e}"))?;
                Some(i32::try_from((bytes + (1 << 30) - 1) >> 30).map_err(|_| format!("{at}.ebs.volumeSize: too large"))?)
            }
            None => None,
        };
        let small = |v: Option<i64>, f: &str| v.map(|x| i32::try_from(x).map_err(|_| format!("{at}.ebs.{f}: out of range"))).transpose();
        out.push(BlockDevice {
            device_name,
            volume_size_gib: size,
            volume_type: ebs.volume_type.clone(),
            encrypted: ebs.encrypted,
            delete_on_termination: ebs.delete_on_termination,
            iops: small(ebs.iops, "iops")?,
            throughput: small(ebs.throughput, "throughput")?,
            kms_key_id: ebs.kms_key_id.clone(),
            snapshot_id: ebs.snapshot_id.clone(),
        });
    }
    Ok(out)
}

/// Karpenter's metadata defaults, overridden field by field by `spec.metadataOptions`.
pub fn metadata(nc: &EC2NodeClass) -> Metadata {
    let m = nc.spec.metadata_options.clone().unwrap_or_default();
    Metadata {
        http_endpoint: m.http_endpoint.unwrap_or_else(|| "enabled".into()),
        http_protocol_ipv6: m.http_protocol_ipv6.unwrap_or_else(|| "disabled".into()),
        hop_limit: m.http_put_response_hop_limit.and_then(|h| i32::try_from(h).ok()).unwrap_or(1),
        http_tokens: m.http_tokens.unwrap_or_else(|| "required".into()),
    }
}

/// Makes sure the template exists (module docs). Throttling is retried by `ec2.call`.
pub(crate) async fn ensure(ec2: &Ec2, spec: &TemplateSpec, name: &str) -> Result<(), AwsError> {
    let describe = ec2.client.describe_launch_templates().launch_template_names(name);
    match ec2.call("DescribeLaunchTemplates", || describe.clone().send()).await {
        Ok(out) if !out.launch_templates().is_empty() => return Ok(()),
        Ok(_) => {}
        Err(e) if e.has_code(LAUNCH_TEMPLATE_NOT_FOUND) => {}
        Err(e) => return Err(e),
    }
    let create = ec2
        .client
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(spec.data())
        .tag_specifications(TagSpecification::builder().resource_type(ResourceType::LaunchTemplate).set_tags(Some(tags(&spec.tags))).build());
    match ec2.call("CreateLaunchTemplate", || create.clone().send()).await {
        Ok(_) => {
            tracing::info!(launch_template = name, image = %spec.image_id, "created launch template");
            Ok(())
        }
        Err(e) if e.has_code(LAUNCH_TEMPLATE_ALREADY_EXISTS) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_hash_the_content() {
        let spec = TemplateSpec {
            image_id: "ami-1".into(),
            user_data: "x".into(),
            instance_profile: None,
            security_group_ids: vec!["sg-1".into()],
            associate_public_ip: None,
            block_devices: vec![],
            metadata: metadata(&EC2NodeClass::new("x", Default::default())),
            detailed_monitoring: false,
            tags: BTreeMap::new(),
            capacity_reservation_id: None,
            capacity_block: false,
        };
        let a = spec.name();
        assert!(a.starts_with("stowage/") && a.len() == "stowage/".len() + 32, "{a}");
        assert_eq!(a, spec.clone().name());
        let other = TemplateSpec { image_id: "ami-2".into(), ..spec };
        assert_ne!(a, other.name());
        assert_eq!(hash128(""), "cbf29ce4842223256c62272e07bb0142");
    }

    #[test]
    fn block_device_sizes_round_up_to_gib() {
        let mut nc = EC2NodeClass::new("x", Default::default());
        assert_eq!(block_devices(&nc, Family::Al2023).unwrap()[0].volume_size_gib, Some(20));
        let br: Vec<_> = block_devices(&nc, Family::Bottlerocket).unwrap().into_iter().map(|b| (b.device_name, b.volume_size_gib)).collect();
        assert_eq!(br, vec![("/dev/xvda".to_string(), Some(4)), ("/dev/xvdb".to_string(), Some(20))]);
        assert!(block_devices(&nc, Family::Custom).unwrap().is_empty());
        nc.spec.block_device_mappings = Some(vec![stowage_input::api::ec2nodeclass::BlockDeviceMapping {
            device_name: Some("/dev/xvda".into()),
            ebs: Some(stowage_input::api::ec2nodeclass::BlockDevice { volume_size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("100G".into())), ..Default::default() }),
            root_volume: Some(true),
        }]);
        assert_eq!(block_devices(&nc, Family::Al2023).unwrap()[0].volume_size_gib, Some(94));
    }
}
