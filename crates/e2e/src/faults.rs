//! Fault injection into a [`Moto`] server: capacity errors and throttling, through the middleware
//! `tests/moto/ice_server.py` puts in front of moto (its HTTP API is documented there).
//!
//! ```no_run
//! # async fn demo(moto: &stowage_e2e::Moto) -> Result<(), stowage_e2e::Error> {
//! use stowage_e2e::CapacityError;
//! // m5.large on-demand in us-east-1a has no capacity from now on:
//! moto.inject_capacity_error(&CapacityError::offering("on-demand", "m5.large", "us-east-1a")).await?;
//! // the next 3 CreateFleet calls answer RequestLimitExceeded (HTTP 503):
//! moto.throttle(Some("CreateFleet"), 3).await?;
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

    /// Removes every rule and resets the counters.
    pub async fn reset_faults(&self) -> Result<()> {
        self.fault_request("POST", "/stowage/reset", json!({})).await.map(|_| ())
    }

    /// `{"iceRules", "throttleRules", "requests": {action: n}, "throttled": {action: n}, "iceErrors"}`.
    pub async fn fault_state(&self) -> Result<Value> {
        self.fault_request("GET", "/stowage/state", json!({})).await
    }
}
