//! Fault injection into a [`Moto`] server: capacity errors and throttling, through the middleware
//! `tests/moto/ice_server.py` puts in front of moto (its HTTP API is documented there).
//!
//! ```no_run
//! # async fn demo(moto: &stowage_e2e::Moto) -> Result<(), stowage_e2e::Error> {
//! use stowage_e2e::{CapacityError, RandomFaults};
//! // m5.large on-demand in us-east-1a has no capacity from now on:
//! moto.inject_capacity_error(&CapacityError::offering("on-demand", "m5.large", "us-east-1a")).await?;
//! // the next 3 CreateFleet calls answer RequestLimitExceeded (HTTP 503):
//! moto.throttle(Some("CreateFleet"), 3).await?;
//! // from now on 10 % of the requests of the client built from `moto.sdk_config_as("ctl")` fail at
//! // random (throttling or InternalError), seeded:
//! moto.inject_random_faults(&RandomFaults::any_action(0.1, 42).from_app("ctl")).await?;
//! let state = moto.fault_state().await?; // rules left and counters, as JSON
//! moto.reset_faults().await?;
//! # Ok(()) }
//! ```

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Error, Moto, Result};

/// A CreateFleet capacity-error rule; `None` fields match anything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapacityError {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    /// The `ErrorCode`; `InsufficientInstanceCapacity` when unset.
    pub code: Option<String>,
}

impl CapacityError {
    pub fn offering(capacity_type: &str, instance_type: &str, zone: &str) -> Self {
        CapacityError { instance_type: Some(instance_type.into()), zone: Some(zone.into()), capacity_type: Some(capacity_type.into()), code: None }
    }
}

/// Random, seeded EC2 faults on every matching request (`POST /stowage/faults` of the middleware).
#[derive(Clone, Debug, PartialEq)]
pub struct RandomFaults {
    /// Probability that a matching request fails, in [0, 1]; 0 turns random faults off.
    pub rate: f64,
    /// Seeds the middleware's RNG: the same seed and the same sequence of requests give the same faults.
    pub seed: u64,
    /// The EC2 actions that may fail (`None`: every action).
    pub actions: Option<Vec<String>>,
    /// Only requests from a client whose user agent names this app (`app/<name>`, see
    /// [`Moto::sdk_config_as`]) fail; `None`: every client (the kubelet stand-in too).
    pub app: Option<String>,
    /// (error code, HTTP status) pairs, drawn uniformly; empty means EC2's throttling
    /// (`RequestLimitExceeded`, 503) and 5xx (`InternalError`, 500).
    pub errors: Vec<(String, u16)>,
}

impl RandomFaults {
    /// Throttling and InternalError on any action from any client at `rate`.
    pub fn any_action(rate: f64, seed: u64) -> Self {
        RandomFaults { rate, seed, actions: None, app: None, errors: vec![] }
    }

    /// Only requests of the clients built with [`Moto::sdk_config_as`]`(app)`.
    pub fn from_app(mut self, app: &str) -> Self {
        self.app = Some(app.to_string());
        self
    }
}

impl Moto {
    async fn fault_request(&self, method: &str, path: &str, body: Value) -> Result<Value> {
        let what = format!("{method} {path} on moto {}", self.name());
        let body = body.to_string();
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port())).await.map_err(|e| Error::io(what.clone(), e))?;
        let req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", self.port(), body.len());
        stream.write_all(req.as_bytes()).await.map_err(|e| Error::io(what.clone(), e))?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.map_err(|e| Error::io(what.clone(), e))?;
        let text = String::from_utf8_lossy(&out);
        let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
            return Err(Error::Invalid(format!("{what}: {} {payload} (is the fault-injection middleware running? STOWAGE_MOTO_PLAIN must not be 1)", head.lines().next().unwrap_or(""))));
        }
        serde_json::from_str(payload).map_err(|e| Error::Invalid(format!("{what}: invalid JSON {payload:?}: {e}")))
    }

    /// From now on, CreateFleet overrides matching `rule` fail with a capacity error.
    pub async fn inject_capacity_error(&self, rule: &CapacityError) -> Result<()> {
        let body = json!({"instanceType": rule.instance_type, "zone": rule.zone, "capacityType": rule.capacity_type, "code": rule.code});
        self.fault_request("POST", "/stowage/ice", body).await.map(|_| ())
    }

    /// The next `count` requests for `action` (any EC2 action if `None`) fail with
    /// `RequestLimitExceeded` (HTTP 503).
    pub async fn throttle(&self, action: Option<&str>, count: u32) -> Result<()> {
        self.fault_request("POST", "/stowage/throttle", json!({"action": action, "count": count})).await.map(|_| ())
    }

    /// Replaces the random-fault rule (see [`RandomFaults`]).
    pub async fn inject_random_faults(&self, faults: &RandomFaults) -> Result<()> {
        if !(0.0..=1.0).contains(&faults.rate) {
            return Err(Error::Invalid(format!("random fault rate {} is not in [0, 1]", faults.rate)));
        }
        let errors: Option<Vec<Value>> = (!faults.errors.is_empty()).then(|| faults.errors.iter().map(|(code, status)| json!({"code": code, "status": status})).collect());
        let body = json!({"rate": faults.rate, "seed": faults.seed, "actions": faults.actions, "userAgent": faults.app.as_ref().map(|a| format!("app/{a}")), "errors": errors});
        self.fault_request("POST", "/stowage/faults", body).await.map(|_| ())
    }

    /// Seeds the Price List API the middleware emulates (moto has none) for `region`: on-demand prices of
    /// shared-tenancy types and of bare-metal types (USD per hour).
    pub async fn seed_prices(&self, region: &str, prices: &[(&str, f64)], metal: &[(&str, f64)]) -> Result<()> {
        let map = |v: &[(&str, f64)]| v.iter().map(|(t, p)| (t.to_string(), json!(p))).collect::<serde_json::Map<String, Value>>();
        self.fault_request("POST", "/stowage/prices", json!({"region": region, "prices": map(prices), "metalPrices": map(metal)})).await.map(|_| ())
    }

    /// Writes public SSM parameters (name → value, e.g. an EKS AMI parameter → an AMI id) into moto's
    /// SSM backend (`POST /stowage/ssm`): moto, like AWS, refuses PutParameter under `/aws/`.
    pub async fn put_public_parameters(&self, parameters: &[(&str, &str)]) -> Result<()> {
        let map: serde_json::Map<String, Value> = parameters.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect();
        self.fault_request("POST", "/stowage/ssm", json!({"parameters": map})).await.map(|_| ())
    }

    /// Seeds capacity reservations moto does not have (`POST /stowage/capacity-reservations`; each a JSON
    /// object with `id`, `instanceType`, `zone`, `count` and optionally `ownerId`, `tags`,
    /// `matchCriteria`, `type`, `interruptible`, `state`, `endDate`): `DescribeCapacityReservations`
    /// answers from them and CreateFleet launches into them through launch templates that target them.
    pub async fn seed_capacity_reservations(&self, reservations: Value) -> Result<()> {
        self.fault_request("POST", "/stowage/capacity-reservations", json!({"reservations": reservations})).await.map(|_| ())
    }

    /// Removes every rule and resets the counters.
    pub async fn reset_faults(&self) -> Result<()> {
        self.fault_request("POST", "/stowage/reset", json!({})).await.map(|_| ())
    }

    /// `{"iceRules", "throttleRules", "faultRule", "requests": {action: n}, "throttled": {action: n},
    /// "iceErrors", "injected": {action: {code: n}}, "pricingRegions": [signing region of each
    /// GetProducts], "reservations": {id: {..., "available": n}}, "reservationLaunches": {id: n}}`
    /// (`injected` counts the random faults).
    pub async fn fault_state(&self) -> Result<Value> {
        self.fault_request("GET", "/stowage/state", json!({})).await
    }
}
