//! EC2 error codes, how each is classified, and the conversion into the controller's [`CloudError`].
//!
//! Every SDK error becomes an [`AwsError`] that keeps the operation, the EC2 error code, the message and
//! the HTTP status. Its [`Class`] decides what the provider does:
//!
//! | class | codes | provider | controller sees |
//! |---|---|---|---|
//! | `Throttled` | `RequestLimitExceeded`, `Throttling`, `ThrottlingException`, `RequestThrottled`, `RequestThrottledException`, `TooManyRequestsException`, `EC2ThrottledException`, `PriorRequestNotComplete`, `SlowDown`, `BandwidthLimitExceeded`; HTTP 429 | retried with backoff ([`super::retry`]) | `Throttled` after the bound |
//! | `Transient` | `InternalError`, `InternalFailure`, `ServiceUnavailable`, `Unavailable`; HTTP 5xx without a code; timeouts and connection failures | retried like throttling | `Throttled` after the bound (same action: retry later) |
//! | `NotFound` | `InvalidInstanceID.NotFound`, `InvalidLaunchTemplateName.NotFoundException`, `InvalidLaunchTemplateId.NotFound` | per call site | `NotFound` |
//! | `Fatal` | everything else (`UnauthorizedOperation`, `AuthFailure`, `InvalidParameterValue`, ...) | not retried | `Fatal` |
//!
//! Capacity errors arrive inside a 200 CreateFleet response (`Errors[].ErrorCode`), not as SDK errors;
//! [`is_capacity_error`] lists the codes Karpenter treats as "this offering is unavailable right now"
//! (`pkg/errors/errors.go`).

use std::fmt;

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

use stowage_decide::cloud::CloudError;

/// CreateFleet `Errors[].ErrorCode` values that mean "no capacity for this offering now" (Karpenter's
/// `unfulfillableCapacityErrorCodes`): the offering goes into the ICE cache.
pub(crate) const CAPACITY_ERROR_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
    "InsufficientCapacityOnHost",
    "SpotMaxPriceTooLow",
];

/// Codes that mean the request rate is too high.
const THROTTLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "EC2ThrottledException",
    "PriorRequestNotComplete",
    "SlowDown",
    "BandwidthLimitExceeded",
];

/// Server-side failures worth retrying.
const TRANSIENT_CODES: &[&str] = &["InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"];

const NOT_FOUND_CODES: &[&str] = &["InvalidInstanceID.NotFound", "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"];

pub(crate) const LAUNCH_TEMPLATE_NOT_FOUND: &str = "InvalidLaunchTemplateName.NotFoundException";
pub(crate) const LAUNCH_TEMPLATE_ALREADY_EXISTS: &str = "InvalidLaunchTemplateName.AlreadyExistsException";

pub(crate) fn is_capacity_error(code: &str) -> bool {
    CAPACITY_ERROR_CODES.contains(&code)
}

pub(crate) fn is_throttle_code(code: &str) -> bool {
    THROTTLE_CODES.contains(&code)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Throttled,
    Transient,
    NotFound,
    Fatal,
}

impl Class {
    pub fn retryable(self) -> bool {
        matches!(self, Class::Throttled | Class::Transient)
    }
}

/// One failed EC2 call.
#[derive(Clone, Debug)]
pub struct AwsError {
    /// The EC2 action, e.g. `CreateFleet`.
    pub op: &'static str,
    pub code: Option<String>,
    pub message: String,
    pub status: Option<u16>,
    pub class: Class,
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.op)?;
        if let Some(c) = &self.code {
            write!(f, " {c}")?;
        }
        if let Some(s) = self.status {
            write!(f, " (HTTP {s})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for AwsError {}

pub(crate) fn classify(code: Option<&str>, status: Option<u16>) -> Class {
    match code {
        Some(c) if THROTTLE_CODES.contains(&c) => Class::Throttled,
        Some(c) if TRANSIENT_CODES.contains(&c) => Class::Transient,
        Some(c) if NOT_FOUND_CODES.contains(&c) => Class::NotFound,
        Some(_) => Class::Fatal,
        None => match status {
            Some(429) => Class::Throttled,
            Some(s) if s >= 500 => Class::Transient,
            _ => Class::Fatal,
        },
    }
}

impl AwsError {
    /// Classifies an SDK error of operation `op`.
    pub(crate) fn from_sdk<E>(op: &'static str, err: SdkError<E, HttpResponse>) -> AwsError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = err.code().map(str::to_string);
        let (message, class) = match &err {
            // No response at all: the request timed out or the connection failed. Both are worth a retry.
            SdkError::TimeoutError(_) => ("request timed out".to_string(), Class::Transient),
            SdkError::DispatchFailure(d) => {
                let m = format!("request failed: {}", aws_sdk_ec2::error::DisplayErrorContext(&err));
                let class = if d.is_io() || d.is_timeout() { Class::Transient } else { Class::Fatal };
                (m, class)
            }
            SdkError::ConstructionFailure(_) => (format!("invalid request: {}", aws_sdk_ec2::error::DisplayErrorContext(&err)), Class::Fatal),
            _ => {
                let m = err.message().map(str::to_string).unwrap_or_else(|| aws_sdk_ec2::error::DisplayErrorContext(&err).to_string());
                (m, classify(code.as_deref(), status))
            }
        };
        AwsError { op, code, message, status, class }
    }

    pub(crate) fn has_code(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }

    /// An error the provider makes up (an unusable response), classified `Fatal`.
    pub(crate) fn invalid_response(op: &'static str, message: impl Into<String>) -> AwsError {
        AwsError { op, code: None, message: message.into(), status: None, class: Class::Fatal }
    }
}

impl From<AwsError> for CloudError {
    fn from(e: AwsError) -> CloudError {
        match e.class {
            Class::Throttled | Class::Transient => CloudError::Throttled(e.to_string()),
            Class::NotFound => CloudError::NotFound(e.to_string()),
            Class::Fatal => CloudError::Fatal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(classify(Some("RequestLimitExceeded"), Some(503)), Class::Throttled);
        assert_eq!(classify(Some("InternalError"), Some(500)), Class::Transient);
        assert_eq!(classify(None, Some(502)), Class::Transient);
        assert_eq!(classify(None, Some(429)), Class::Throttled);
        assert_eq!(classify(Some("UnauthorizedOperation"), Some(403)), Class::Fatal);
        assert_eq!(classify(Some("InvalidInstanceID.NotFound"), Some(400)), Class::NotFound);
        assert!(is_capacity_error("InsufficientInstanceCapacity"));
        assert!(!is_capacity_error("InvalidParameterValue"));
    }

    #[test]
    fn cloud_error_mapping_keeps_the_context() {
        let e = AwsError { op: "CreateFleet", code: Some("RequestLimitExceeded".into()), message: "slow down".into(), status: Some(503), class: Class::Throttled };
        let c = CloudError::from(e);
        assert!(matches!(&c, CloudError::Throttled(m) if m == "CreateFleet RequestLimitExceeded (HTTP 503): slow down"), "{c}");
    }
}
