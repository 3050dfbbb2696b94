//! SSM parameters: the public AMI parameters behind `amiSelectorTerms` aliases
//! ([`super::amifamily`]) and the parameters `ssmParameter` terms name.
//!
//! | call | parameters |
//! |---|---|
//! | `ssm:GetParameter` | `Name` = the parameter (no decryption); `ParameterNotFound` means "no such parameter" |
//!
//! Answers, found or not found, are cached for the discovery TTL (`AwsOptions::discovery_ttl`), so
//! NodeClasses naming the same alias share one call per TTL. Throttling and transient errors are
//! retried like EC2's ([`super::retry`]) and then returned; other errors (access denied) are
//! returned as they are, for the caller to report on the NodeClass.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::errors::AwsError;
use super::retry::{RetryPolicy, call_with_retries};

/// The SSM error code of a parameter that does not exist.
const PARAMETER_NOT_FOUND: &str = "ParameterNotFound";

/// An SSM client with a cache of parameter values.
pub struct Ssm {
    client: aws_sdk_ssm::Client,
    retry: RetryPolicy,
    ttl: Duration,
    /// name → (value, or `None` for "no such parameter"; when asked).
    cache: Mutex<BTreeMap<String, (Option<String>, Instant)>>,
}

impl Ssm {
    /// A client built from `sdk` with the SDK's own retries off (the provider retries).
    pub fn new(sdk: &aws_config::SdkConfig, retry: RetryPolicy, ttl: Duration) -> Self {
        let conf = aws_sdk_ssm::config::Builder::from(sdk).retry_config(aws_sdk_ssm::config::retry::RetryConfig::standard().with_max_attempts(1)).build();
        Ssm { client: aws_sdk_ssm::Client::from_conf(conf), retry, ttl, cache: Mutex::new(BTreeMap::new()) }
    }

    /// The parameter's value, `None` when it does not exist.
    pub async fn get(&self, name: &str) -> Result<Option<String>, AwsError> {
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((v, at)) = cache.get(name)
                && at.elapsed() < self.ttl
            {
                return Ok(v.clone());
            }
        }
        let req = self.client.get_parameter().name(name);
        let value = match call_with_retries(&self.retry, "GetParameter", || req.clone().send()).await {
            Ok(out) => out.parameter().and_then(|p| p.value()).map(str::to_string),
            Err(e) if e.has_code(PARAMETER_NOT_FOUND) => None,
            Err(e) => return Err(e),
        };
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), (value.clone(), Instant::now()));
        Ok(value)
    }
}
