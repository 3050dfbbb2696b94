//! The CreateFleet request of one launch and the reading of its answer.
//!
//! | field | value |
//! |---|---|
//! | `Type` | `instant` |
//! | `ClientToken` | `stowage-<hash of cluster, NodeClaim name and the overrides>` ([`client_token`]) |
//! | `TargetCapacitySpecification` | `TotalTargetCapacity` 1, `DefaultTargetCapacityType` on-demand or spot; for a reserved launch on-demand, `capacity-block` (capacity blocks) or `reserved-capacity` (interruptible reservations, with `ReservedCapacityOptions.ReservationTypes` `interruptible-capacity-reservation`) |
//! | `OnDemandOptions.AllocationStrategy` | `prioritized` (on-demand launches, and reserved ones into default reservations) |
//! | `SpotOptions.AllocationStrategy` | `capacity-optimized-prioritized` (spot launches) |
//! | `LaunchTemplateConfigs[]` | one per launch template, in the order of their best override: `LaunchTemplateName`, `Version $Latest`, `Overrides[]` = `InstanceType`, `SubnetId`, `AvailabilityZone`, `Priority` = the offering's rank in the request (0 = the plan's choice) |
//! | `TagSpecifications` | instance (launch tags + `karpenter.sh/nodeclaim`), volume and fleet (launch tags) |
//! | `Context` | `spec.context`, if set |
//!
//! Karpenter uses `lowest-price` / `price-capacity-optimized` and lets EC2 pick among up to 60 types;
//! stowage's plan already chose, so the strategies are the prioritized ones and the plan's order is
//! the priority. Spot's `capacity-optimized-prioritized` honours priorities on a best-effort basis
//! (EC2 may prefer a deeper pool), which is the point of spot.
//!
//! **Idempotency.** EC2 keeps the answer of an instant fleet under its client token, so retrying the
//! same request after a crash or a lost response returns the original instance instead of a second
//! one. The token hashes the overrides too: after a capacity error the next attempt for the same
//! NodeClaim has other overrides, and must not get the cached "no capacity" answer back (EC2 would
//! also answer `IdempotentParameterMismatch` to a reused token with other parameters). moto ignores
//! `ClientToken` altogether, so the provider also looks for a live instance tagged with the NodeClaim
//! before every CreateFleet (`instances::find_by_nodeclaim`); that check covers a crash after the
//! launch followed by a retry with different overrides, too.

use std::collections::BTreeMap;

use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetOnDemandAllocationStrategy, FleetReservationType,
    FleetType, InstanceLifecycle, InstanceType, OnDemandOptionsRequest, ReservedCapacityOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, TagSpecification,
    TargetCapacitySpecificationRequest,
};

use super::launch_template::{hash128, tags};
use stowage_decide::cloud::OfferingRef;

/// One (type, zone) the fleet may launch, with the subnet and template it uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    pub offering: OfferingRef,
    pub subnet_id: String,
    pub template: String,
    /// 0 for the plan's choice, then 1, 2, ... (lower wins).
    pub priority: f64,
}

#[derive(Clone, Debug)]
pub struct FleetRequest {
    pub capacity_type: String,
    /// Sorted by priority.
    pub overrides: Vec<Override>,
    pub launch_tags: BTreeMap<String, String>,
    pub instance_tags: BTreeMap<String, String>,
    pub context: Option<String>,
    pub client_token: String,
}

/// `stowage-` + 32 hex digits (EC2 allows 64 characters).
pub(crate) fn client_token(cluster: &str, nodeclaim: &str, overrides: &[Override]) -> String {
    let mut s = format!("{cluster}\n{nodeclaim}\n");
    for o in overrides {
        s += &format!("{}|{}|{}|{}|{}\n", o.offering.instance_type, o.offering.zone, o.subnet_id, o.template, o.priority);
    }
    format!("stowage-{}", hash128(&s))
}

fn tag_spec(kind: ResourceType, m: &BTreeMap<String, String>) -> TagSpecification {
    TagSpecification::builder().resource_type(kind).set_tags(Some(tags(m))).build()
}

pub fn request(client: &aws_sdk_ec2::Client, r: &FleetRequest) -> CreateFleetFluentBuilder {
    let spot = r.capacity_type == "spot";
    // A reserved launch targets one reservation (its launch template names it); its kind decides the
    // target capacity type, as in Karpenter's CreateFleet.
    let reservation = r.overrides.first().and_then(|o| o.offering.reservation.as_ref()).filter(|_| r.capacity_type == "reserved");
    let target = match reservation {
        _ if spot => DefaultTargetCapacityType::Spot,
        Some(x) if x.kind == "capacity-block" => DefaultTargetCapacityType::CapacityBlock,
        Some(x) if x.interruptible => DefaultTargetCapacityType::ReservedCapacity,
        _ => DefaultTargetCapacityType::OnDemand,
    };
    // Templates in the order of their best (first) override.
    let mut order: Vec<&str> = Vec::new();
    for o in &r.overrides {
        if !order.contains(&o.template.as_str()) {
            order.push(&o.template);
        }
    }
    let mut req = client
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token(&r.client_token)
        .target_capacity_specification(TargetCapacitySpecificationRequest::builder().total_target_capacity(1).default_target_capacity_type(target.clone()).build())
        .tag_specifications(tag_spec(ResourceType::Instance, &r.instance_tags))
        .tag_specifications(tag_spec(ResourceType::Volume, &r.launch_tags))
        .tag_specifications(tag_spec(ResourceType::Fleet, &r.launch_tags))
        .set_context(r.context.clone());
    req = match target {
        DefaultTargetCapacityType::Spot => req.spot_options(SpotOptionsRequest::builder().allocation_strategy(SpotAllocationStrategy::CapacityOptimizedPrioritized).build()),
        DefaultTargetCapacityType::ReservedCapacity => {
            req.reserved_capacity_options(ReservedCapacityOptionsRequest::builder().reservation_types(FleetReservationType::InterruptibleCapacityReservation).build())
        }
        DefaultTargetCapacityType::CapacityBlock => req,
        _ => req.on_demand_options(OnDemandOptionsRequest::builder().allocation_strategy(FleetOnDemandAllocationStrategy::Prioritized).build()),
    };
    for t in order {
        let mut cfg = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(FleetLaunchTemplateSpecificationRequest::builder().launch_template_name(t).version("$Latest").build());
        for o in r.overrides.iter().filter(|o| o.template == t) {
            cfg = cfg.overrides(
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(InstanceType::from(o.offering.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .availability_zone(&o.offering.zone)
                    .priority(o.priority)
                    .build(),
            );
        }
        req = req.launch_template_configs(cfg.build());
    }
    req
}

#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

/// One `Errors[]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetFailure {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub launched: Option<Launched>,
    pub errors: Vec<FleetFailure>,
}

/// Reads instances and errors. Zones come from the override's `AvailabilityZone`, else from the
/// request's override with that subnet (or type), which the provider knows.
pub fn parse(out: &CreateFleetOutput, req: &FleetRequest) -> Outcome {
    let zone_of = |zone: Option<&str>, subnet: Option<&str>, itype: Option<&str>| -> Option<String> {
        zone.map(str::to_string)
            .or_else(|| subnet.and_then(|s| req.overrides.iter().find(|o| o.subnet_id == s)).map(|o| o.offering.zone.clone()))
            .or_else(|| itype.and_then(|t| req.overrides.iter().find(|o| o.offering.instance_type == t)).map(|o| o.offering.zone.clone()))
    };
    let mut launched = None;
    for i in out.instances() {
        let Some(id) = i.instance_ids().first() else { continue };
        let ov = i.launch_template_and_overrides().and_then(|l| l.overrides());
        let itype = i.instance_type().map(|t| t.as_str().to_string()).or_else(|| ov.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string()));
        let zone = zone_of(ov.and_then(|o| o.availability_zone()).or(i.availability_zone()), ov.and_then(|o| o.subnet_id()).or(i.subnet_id()), itype.as_deref());
        let capacity_type = match i.lifecycle() {
            // Launched into the reservation its launch template targets (on-demand billing aside).
            _ if req.capacity_type == "reserved" => "reserved".to_string(),
            Some(InstanceLifecycle::Spot) => "spot".to_string(),
            Some(InstanceLifecycle::OnDemand) => "on-demand".to_string(),
            _ => req.capacity_type.clone(),
        };
        launched = Some(Launched { id: id.clone(), instance_type: itype.unwrap_or_default(), zone: zone.unwrap_or_default(), capacity_type });
        break;
    }
    let errors = out
        .errors()
        .iter()
        .map(|e| {
            let ov = e.launch_template_and_overrides().and_then(|l| l.overrides());
            let itype = ov.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string());
            FleetFailure {
                code: e.error_code().unwrap_or("Unknown").to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                zone: zone_of(ov.and_then(|o| o.availability_zone()), ov.and_then(|o| o.subnet_id()), itype.as_deref()),
                instance_type: itype,
            }
        })
        .collect();
    Outcome { launched, errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(t: &str, z: &str, subnet: &str, template: &str, p: f64) -> Override {
        Override {
            offering: OfferingRef { instance_type: t.into(), zone: z.into(), capacity_type: "on-demand".into(), price: 0.1, reservation: None },
            subnet_id: subnet.into(),
            template: template.into(),
            priority: p,
        }
    }

    #[test]
    fn tokens_are_stable_short_and_depend_on_the_overrides() {
        let a = [ov("m5.large", "us-east-1a", "subnet-a", "stowage/x", 0.0)];
        let b = [ov("m5.large", "us-east-1b", "subnet-b", "stowage/x", 0.0)];
        let t = client_token("demo", "default-abc12", &a);
        assert!(t.len() <= 64 && t.starts_with("stowage-"), "{t}");
        assert_eq!(t, client_token("demo", "default-abc12", &a));
        assert_ne!(t, client_token("demo", "default-abc13", &a));
        assert_ne!(t, client_token("demo", "default-abc12", &b));
    }

    #[test]
    fn templates_are_ordered_by_their_best_override() {
        let client = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::Config::builder().behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest()).region(aws_sdk_ec2::config::Region::new("us-east-1")).build(),
        );
        let r = FleetRequest {
            capacity_type: "on-demand".into(),
            overrides: vec![ov("m5.large", "us-east-1a", "s-a", "stowage/b", 0.0), ov("c5.large", "us-east-1a", "s-a", "stowage/a", 1.0), ov("m5.xlarge", "us-east-1b", "s-b", "stowage/b", 2.0)],
            launch_tags: BTreeMap::new(),
            instance_tags: BTreeMap::new(),
            context: None,
            client_token: "t".into(),
        };
        let req = request(&client, &r);
        let cfgs = req.get_launch_template_configs().clone().unwrap();
        let names: Vec<_> = cfgs.iter().map(|c| c.launch_template_specification().and_then(|s| s.launch_template_name()).unwrap().to_string()).collect();
        assert_eq!(names, vec!["stowage/b", "stowage/a"]);
        let first: Vec<_> = cfgs[0].overrides().iter().map(|o| (o.instance_type().unwrap().as_str().to_string(), o.priority().unwrap())).collect();
        assert_eq!(first, vec![("m5.large".to_string(), 0.0), ("m5.xlarge".to_string(), 2.0)]);
        assert_eq!(req.get_on_demand_options().as_ref().and_then(|o| o.allocation_strategy()), Some(&FleetOnDemandAllocationStrategy::Prioritized));
    }
}
