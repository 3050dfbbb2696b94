//! Interruption messages (Karpenter's AWS provider: an SQS queue fed by EventBridge rules), read and
//! acted on the same way by the controller (crates/controller/src/interruption.rs, messages from SQS)
//! and the simulator (a scenario's `interrupt` step):
//!
//! ```text
//! message = EventBridge envelope { source, detail-type, time, detail }
//!   aws.ec2    "EC2 Spot Instance Interruption Warning"  detail.instance-id        → spot_interrupted
//!   aws.ec2    "EC2 Instance Rebalance Recommendation"   detail.instance-id        → rebalance_recommendation
//!   aws.ec2    "EC2 Instance State-change Notification"  detail.instance-id, state
//!                 state ∈ {stopping, stopped}                                      → instance_stopped
//!                 state ∈ {shutting-down, terminated}                              → instance_terminated
//!                 any other state                                                  → no_op
//!   aws.health "AWS Health Event"  detail.service = EC2 ∧ eventTypeCategory = scheduledChange,
//!                 detail.affectedEntities[].entityValue                            → scheduled_change
//!                 any other service or category                                    → no_op
//!   any other (source, detail-type)                                                → no_op
//!
//! for each instance id of the message with a NodeClaim (status.providerID aws:///<zone>/<id>):
//!   event on the NodeClaim and its Node (reason by kind)
//!   spot_interrupted                 ⇒ offering (type, zone, spot) unavailable, as a capacity error
//!   kind ≠ rebalance_recommendation ∧ kind ≠ no_op ∧ NodeClaim not deleting
//!                                    ⇒ the NodeClaim is deleted now (termination cordons with
//!                                      karpenter.sh/disrupted and drains it; its pods are planned again)
//! ```
//!
//! A body that is not such an envelope, or whose detail lacks the field its kind needs, is an error
//! naming the field; the caller logs it and deletes the message (it would never parse later either).
//! Pure: no IO, no clock; the queue itself is [`crate::cloud::InterruptionQueue`].

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use stowage_core::domain::labels::keys;
use stowage_input::api::NodeClaim;

use crate::offerings::OfferingKey;

/// What a message says, by Karpenter's `message_type` label values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    SpotInterrupted,
    RebalanceRecommendation,
    ScheduledChange,
    InstanceStopped,
    InstanceTerminated,
    /// A message of a source or kind this controller does not act on.
    NoOp,
}

impl Kind {
    /// Karpenter's `message_type` label.
    pub fn label(self) -> &'static str {
        match self {
            Kind::SpotInterrupted => "spot_interrupted",
            Kind::RebalanceRecommendation => "rebalance_recommendation",
            Kind::ScheduledChange => "scheduled_change",
            Kind::InstanceStopped => "instance_stopped",
            Kind::InstanceTerminated => "instance_terminated",
            Kind::NoOp => "no_op",
        }
    }

    /// Whether the instance is going away, so its NodeClaim is disrupted now (a rebalance
    /// recommendation is only an event: Karpenter's default).
    pub fn disrupts(self) -> bool {
        matches!(self, Kind::SpotInterrupted | Kind::ScheduledChange | Kind::InstanceStopped | Kind::InstanceTerminated)
    }

    /// Karpenter's event reason and message on the NodeClaim and its Node.
    pub fn event(self) -> Option<(&'static str, &'static str)> {
        match self {
            Kind::SpotInterrupted => Some(("SpotInterrupted", "Spot interruption warning was triggered")),
            Kind::RebalanceRecommendation => Some(("SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered")),
            Kind::ScheduledChange => Some(("InstanceUnhealthy", "An unhealthy warning was triggered for the instance")),
            Kind::InstanceStopped => Some(("InstanceStopping", "Instance is stopping")),
            Kind::InstanceTerminated => Some(("InstanceTerminating", "Instance is terminating")),
            Kind::NoOp => None,
        }
    }
}

/// Karpenter's event on a NodeClaim (and Node) an interruption message deletes.
pub const TERMINATING_ON_INTERRUPTION: (&str, &str) = ("TerminatingOnInterruption", "Interruption triggered termination for the NodeClaim");

/// One parsed message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub kind: Kind,
    /// The EC2 instances it is about (empty for `NoOp`).
    pub instance_ids: Vec<String>,
    /// The envelope's `time` (when AWS sent the event), for the queue-duration metric.
    pub time: Option<Timestamp>,
    /// `source` / `detail-type` as sent, for logs.
    pub source: String,
    pub detail_type: String,
}

/// A body that is not an interruption message; `field` is the JSON path at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interruption message: {field}: {reason}")]
pub struct ParseError {
    pub field: String,
    pub reason: String,
}

fn bad(field: &str, reason: impl Into<String>) -> ParseError {
    ParseError { field: field.to_string(), reason: reason.into() }
}

/// Bodies larger than this are not EventBridge events (SQS's own limit is 256 KiB).
pub const MAX_BODY: usize = 256 * 1024;

fn string<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str, ParseError> {
    match v.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(bad(path, "is empty")),
        Some(other) => Err(bad(path, format!("expected a string, got {other}"))),
        None => Err(bad(path, "missing")),
    }
}

/// Parses one SQS message body.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    if body.len() > MAX_BODY {
        return Err(bad("(body)", format!("{} bytes, more than the {MAX_BODY} an SQS message may hold", body.len())));
    }
    let v: Value = serde_json::from_str(body).map_err(|e| bad("(body)", format!("not JSON: {e}")))?;
    if !v.is_object() {
        return Err(bad("(body)", "expected an EventBridge event (a JSON object)"));
    }
    let source = string(&v, "source", "source")?.to_string();
    let detail_type = string(&v, "detail-type", "detail-type")?.to_string();
    let time = match v.get("time") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.parse::<Timestamp>().map_err(|e| bad("time", format!("not an RFC 3339 time: {e}")))?),
        Some(other) => return Err(bad("time", format!("expected a string, got {other}"))),
    };
    let mut msg = Message { kind: Kind::NoOp, instance_ids: Vec::new(), time, source, detail_type };
    let detail = || -> Result<&Value, ParseError> {
        match v.get("detail") {
            Some(d) if d.is_object() => Ok(d),
            Some(other) => Err(bad("detail", format!("expected an object, got {other}"))),
            None => Err(bad("detail", "missing")),
        }
    };
    match (msg.source.as_str(), msg.detail_type.as_str()) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            msg.kind = Kind::SpotInterrupted;
            msg.instance_ids.push(string(detail()?, "instance-id", "detail.instance-id")?.to_string());
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            msg.kind = Kind::RebalanceRecommendation;
            msg.instance_ids.push(string(detail()?, "instance-id", "detail.instance-id")?.to_string());
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let d = detail()?;
            let id = string(d, "instance-id", "detail.instance-id")?.to_string();
            let state = string(d, "state", "detail.state")?.to_ascii_lowercase();
            msg.kind = match state.as_str() {
                "stopping" | "stopped" => Kind::InstanceStopped,
                "shutting-down" | "terminated" => Kind::InstanceTerminated,
                _ => Kind::NoOp,
            };
            if msg.kind != Kind::NoOp {
                msg.instance_ids.push(id);
            }
        }
        ("aws.health", "AWS Health Event") => {
            let d = detail()?;
            let service = d.get("service").and_then(Value::as_str).unwrap_or_default();
            let category = d.get("eventTypeCategory").and_then(Value::as_str).unwrap_or_default();
            if service == "EC2" && category == "scheduledChange" {
                msg.kind = Kind::ScheduledChange;
                let entities = match d.get("affectedEntities") {
                    Some(Value::Array(a)) => a,
                    Some(other) => return Err(bad("detail.affectedEntities", format!("expected a list, got {other}"))),
                    None => return Err(bad("detail.affectedEntities", "missing")),
                };
                for (i, e) in entities.iter().enumerate() {
                    msg.instance_ids.push(string(e, "entityValue", &format!("detail.affectedEntities[{i}].entityValue"))?.to_string());
                }
            }
        }
        _ => {}
    }
    Ok(msg)
}

/// A NodeClaim as the decision sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub nodeclaim: String,
    pub node: Option<String>,
    pub nodepool: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    pub deleting: bool,
}

/// `aws:///<zone>/<instance-id>` (or a bare id) → the instance id.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.rsplit('/').next().unwrap_or_default();
    id.starts_with("i-").then_some(id)
}

/// The NodeClaims with an instance, by instance id.
pub fn targets<'a>(claims: impl IntoIterator<Item = &'a NodeClaim>) -> BTreeMap<String, Target> {
    let mut out = BTreeMap::new();
    for c in claims {
        let Some(id) = c.status.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id) else { continue };
        let label = |k: &str| c.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
        out.insert(
            id.to_string(),
            Target {
                nodeclaim: c.metadata.name.clone().unwrap_or_default(),
                node: c.status.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()),
                nodepool: label(keys::NODEPOOL),
                instance_type: label(keys::INSTANCE_TYPE),
                zone: label(keys::ZONE),
                capacity_type: label(keys::CAPACITY_TYPE),
                deleting: c.metadata.deletion_timestamp.is_some(),
            },
        );
    }
    out
}

/// What to do about one NodeClaim a message names.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub instance_id: String,
    pub target: Target,
    pub kind: Kind,
    /// Delete the NodeClaim now (termination drains it).
    pub delete: bool,
    /// Mark this offering unavailable for the refused-offering TTL.
    pub unavailable: Option<OfferingKey>,
}

/// The actions for a message, one per instance it names that has a NodeClaim (others are not ours).
pub fn decide(msg: &Message, targets: &BTreeMap<String, Target>) -> Vec<Action> {
    if msg.kind == Kind::NoOp {
        return Vec::new();
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for id in &msg.instance_ids {
        if !seen.insert(id.as_str()) {
            continue;
        }
        let Some(t) = targets.get(id) else { continue };
        let unavailable = match (msg.kind, &t.instance_type, &t.zone) {
            (Kind::SpotInterrupted, Some(it), Some(z)) => Some((it.clone(), z.clone(), "spot".to_string())),
            _ => None,
        };
        out.push(Action { instance_id: id.clone(), target: t.clone(), kind: msg.kind, delete: msg.kind.disrupts() && !t.deleting, unavailable });
    }
    out
}

/// An EventBridge message body of `kind` for `instance_id` at `time` (RFC 3339), as AWS sends it: for
/// the simulator's `interrupt` step and for tests, so they go through [`parse`] like a real message.
pub fn event_body(kind: Kind, instance_id: &str, region: &str, time: &str) -> String {
    let envelope = |source: &str, detail_type: &str, detail: Value| {
        serde_json::json!({
            "version": "0",
            "id": format!("{}-{instance_id}", kind.label()),
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": time,
            "region": region,
            "resources": [format!("arn:aws:ec2:{region}:123456789012:instance/{instance_id}")],
            "detail": detail,
        })
        .to_string()
    };
    match kind {
        Kind::SpotInterrupted => envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", serde_json::json!({"instance-id": instance_id, "instance-action": "terminate"})),
        Kind::RebalanceRecommendation => envelope("aws.ec2", "EC2 Instance Rebalance Recommendation", serde_json::json!({"instance-id": instance_id})),
        Kind::InstanceStopped => envelope("aws.ec2", "EC2 Instance State-change Notification", serde_json::json!({"instance-id": instance_id, "state": "stopping"})),
        Kind::InstanceTerminated => envelope("aws.ec2", "EC2 Instance State-change Notification", serde_json::json!({"instance-id": instance_id, "state": "shutting-down"})),
        Kind::ScheduledChange => envelope(
            "aws.health",
            "AWS Health Event",
            serde_json::json!({
                "eventArn": format!("arn:aws:health:{region}::event/EC2/EC2_INSTANCE_RETIREMENT_SCHEDULED/x"),
                "service": "EC2",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": "scheduledChange",
                "affectedEntities": [{"entityValue": instance_id}],
            }),
        ),
        Kind::NoOp => envelope("aws.ec2", "EC2 Instance State-change Notification", serde_json::json!({"instance-id": instance_id, "state": "running"})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real EventBridge shapes (AWS's documented examples, ids changed).
    const SPOT: &str = r#"{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-12-01T12:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}}"#;
    const REBALANCE: &str = r#"{"version":"0","id":"5ad9e3d9-b7c6-1b0b-e8a4-d2d2c7a1e9f0","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","account":"123456789012","time":"2026-12-01T12:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],"detail":{"instance-id":"i-0b662ef9931388ba0"}}"#;
    const HEALTH: &str = r#"{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012","time":"2026-12-01T12:00:00Z","region":"us-east-1","resources":[],"detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/EC2_INSTANCE_RETIREMENT_SCHEDULED/x","service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","startTime":"Sat, 05 Jun 2027 17:00:00 GMT","eventDescription":[{"language":"en_US","latestDescription":"retirement"}],"affectedEntities":[{"entityValue":"i-0b662ef9931388ba0"},{"entityValue":"i-0c0c0c0c0c0c0c0c0"}]}}"#;

    fn state(s: &str) -> String {
        format!(
            r#"{{"version":"0","id":"x","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"123456789012","time":"2026-12-01T12:00:00Z","region":"us-east-1","resources":[],"detail":{{"instance-id":"i-0b662ef9931388ba0","state":"{s}"}}}}"#
        )
    }

    #[test]
    fn every_message_kind_parses_from_its_eventbridge_shape() {
        let m = parse(SPOT).unwrap();
        assert_eq!((m.kind, m.instance_ids.as_slice()), (Kind::SpotInterrupted, ["i-0b662ef9931388ba0".to_string()].as_slice()));
        assert_eq!(m.time, Some("2026-12-01T12:00:00Z".parse().unwrap()));
        assert_eq!(parse(REBALANCE).unwrap().kind, Kind::RebalanceRecommendation);
        let h = parse(HEALTH).unwrap();
        assert_eq!((h.kind, h.instance_ids.len()), (Kind::ScheduledChange, 2));
        for (s, k) in [
            ("stopping", Kind::InstanceStopped),
            ("stopped", Kind::InstanceStopped),
            ("shutting-down", Kind::InstanceTerminated),
            ("terminated", Kind::InstanceTerminated),
            ("running", Kind::NoOp),
            ("pending", Kind::NoOp),
        ] {
            assert_eq!(parse(&state(s)).unwrap().kind, k, "state {s}");
        }
        // Another source, or a health event about another service: not ours to act on.
        assert_eq!(parse(r#"{"source":"aws.s3","detail-type":"Object Created","detail":{}}"#).unwrap().kind, Kind::NoOp);
        assert_eq!(parse(&HEALTH.replace(r#""service":"EC2""#, r#""service":"RDS""#)).unwrap().kind, Kind::NoOp);
        assert_eq!(parse(&HEALTH.replace("scheduledChange", "issue")).unwrap().kind, Kind::NoOp);
    }

    #[test]
    fn the_generated_bodies_parse_back_to_their_kind() {
        for k in [Kind::SpotInterrupted, Kind::RebalanceRecommendation, Kind::ScheduledChange, Kind::InstanceStopped, Kind::InstanceTerminated, Kind::NoOp] {
            let m = parse(&event_body(k, "i-1", "us-east-1", "2026-12-01T00:00:00Z")).unwrap();
            assert_eq!(m.kind, k);
            assert_eq!(m.instance_ids, if k == Kind::NoOp { Vec::<String>::new() } else { vec!["i-1".to_string()] });
        }
    }

    #[test]
    fn bad_messages_name_the_field() {
        let field = |b: &str| parse(b).unwrap_err().field;
        assert_eq!(field("not json"), "(body)");
        assert_eq!(field("[1]"), "(body)");
        assert_eq!(field(r#"{"detail-type":"x","detail":{}}"#), "source");
        assert_eq!(field(r#"{"source":"aws.ec2","detail":{}}"#), "detail-type");
        assert_eq!(field(&SPOT.replace(r#""instance-id":"i-0b662ef9931388ba0","#, "")), "detail.instance-id");
        assert_eq!(field(&SPOT.replace(r#""instance-id":"i-0b662ef9931388ba0""#, r#""instance-id":7"#)), "detail.instance-id");
        assert_eq!(field(&SPOT.replace("2026-12-01T12:00:00Z", "yesterday")), "time");
        assert_eq!(field(&state("").replace(r#","state":"""#, "")), "detail.state");
        assert_eq!(field(&HEALTH.replace(r#"{"entityValue":"i-0c0c0c0c0c0c0c0c0"}"#, "{}")), "detail.affectedEntities[1].entityValue");
        assert_eq!(field(r#"{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":"x"}"#), "detail");
        assert_eq!(field(&" ".repeat(MAX_BODY + 1)), "(body)");
        assert!(parse("not json").unwrap_err().to_string().contains("not JSON"));
    }

    fn claim(name: &str, provider: &str, deleting: bool) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": "spot", "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1b", "karpenter.sh/capacity-type": "spot"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": provider, "nodeName": format!("node-{name}")}
        }))
        .unwrap();
        if deleting {
            c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH));
        }
        c
    }

    #[test]
    fn spot_interruption_deletes_the_nodeclaim_and_marks_its_offering() {
        let claims = [claim("a", "aws:///us-east-1b/i-0b662ef9931388ba0", false), claim("b", "aws:///us-east-1b/i-0c0c0c0c0c0c0c0c0", true)];
        let t = targets(&claims);
        let a = decide(&parse(SPOT).unwrap(), &t);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].target.nodeclaim.as_str(), a[0].target.node.as_deref(), a[0].delete), ("a", Some("node-a"), true));
        assert_eq!(a[0].unavailable, Some(("m5.large".into(), "us-east-1b".into(), "spot".into())));
        // A rebalance recommendation is an event only.
        let r = decide(&parse(REBALANCE).unwrap(), &t);
        assert_eq!((r.len(), r[0].delete, r[0].unavailable.clone()), (1, false, None));
        // A scheduled change names two instances: one is deleted, the other is already deleting.
        let h = decide(&parse(HEALTH).unwrap(), &t);
        assert_eq!(h.iter().map(|a| (a.target.nodeclaim.as_str(), a.delete, a.unavailable.is_some())).collect::<Vec<_>>(), vec![("a", true, false), ("b", false, false)]);
        for s in ["stopping", "terminated"] {
            assert!(decide(&parse(&state(s)).unwrap(), &t)[0].delete);
        }
        assert!(decide(&parse(&state("running")).unwrap(), &t).is_empty());
        // Instances without a NodeClaim are not ours.
        assert!(decide(&parse(&SPOT.replace("i-0b662ef9931388ba0", "i-0999")).unwrap(), &t).is_empty());
    }

    #[test]
    fn instance_ids_come_from_provider_ids() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("kind://docker/x"), None);
        assert_eq!(instance_id("aws:///us-east-1a/"), None);
    }
}
