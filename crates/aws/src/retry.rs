//! Bounded retries with exponential backoff and jitter for throttled and transient EC2 errors.
//!
//! The provider builds its EC2 client with the SDK's own retries off (one attempt per call) and retries
//! here instead, so that the bound is exact and known to the controller (`CloudError::Throttled` means
//! "`max_attempts` calls were throttled"), and tests see every attempt.
//!
//! Delay before retry n (n = 1, 2, ...): `min(max_delay, base_delay × 2^(n-1))` scaled by a random
//! factor in [0.5, 1) ("equal jitter": never zero, so a burst of throttled callers spreads out but
//! still waits).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::errors::AwsError;

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Calls in total, the first included (≥ 1).
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 6 attempts, 200 ms doubling to at most 5 s: about 5-6 s of waiting in the worst case, well
    /// inside the 5-minute launch timeout Karpenter gives a NodeClaim.
    fn default() -> Self {
        RetryPolicy { max_attempts: 6, base_delay: Duration::from_millis(200), max_delay: Duration::from_secs(5) }
    }
}

impl RetryPolicy {
    /// The un-jittered delay before retry `n` (1-based).
    pub(crate) fn ceiling(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1).min(30)).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    pub fn delay(&self, n: u32) -> Duration {
        self.ceiling(n).mul_f64(0.5 + 0.5 * jitter())
    }
}

/// A uniform number in [0, 1). Jitter needs no cryptographic quality: a splitmix64 step over a global
/// counter seeded from the clock.
fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let mut z = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(seed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Sends an SDK request (built anew by `send` for every attempt) of any AWS client with
/// [`with_retries`], its error classified as [`AwsError`] for operation `op`.
pub async fn call_with_retries<T, E, F, Fut>(policy: &RetryPolicy, op: &'static str, mut send: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, aws_sdk_ec2::error::SdkError<E, aws_sdk_ec2::config::http::HttpResponse>>>,
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    with_retries(policy, || {
        let fut = send();
        async move { fut.await.map_err(|e| AwsError::from_sdk(op, e)) }
    })
    .await
}

/// Runs `call` until it succeeds, fails with an error that is not retryable, or `policy.max_attempts`
/// attempts have failed. The last error of an exhausted run says how many attempts were made.
pub(crate) async fn with_retries<T, F, Fut>(policy: &RetryPolicy, mut call: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AwsError>>,
{
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if e.class.retryable() && attempt < policy.max_attempts.max(1) => {
                let delay = policy.delay(attempt);
                tracing::debug!(op = e.op, attempt, delay_ms = delay.as_millis() as u64, error = %e, "retrying EC2 call");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(mut e) => {
                if e.class.retryable() {
                    e.message = format!("{} (gave up after {attempt} attempts in {:.1}s)", e.message, started.elapsed().as_secs_f64());
                }
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::Class;

    fn throttle() -> AwsError {
        AwsError { op: "Test", code: Some("RequestLimitExceeded".into()), message: "slow".into(), status: Some(503), class: Class::Throttled }
    }

    #[test]
    fn delays_double_up_to_the_cap_and_stay_in_the_jitter_band() {
        let p = RetryPolicy { max_attempts: 10, base_delay: Duration::from_millis(100), max_delay: Duration::from_millis(1000) };
        assert_eq!(p.ceiling(1), Duration::from_millis(100));
        assert_eq!(p.ceiling(3), Duration::from_millis(400));
        assert_eq!(p.ceiling(9), Duration::from_millis(1000));
        assert_eq!(p.ceiling(200), Duration::from_millis(1000));
        for n in 1..6 {
            let d = p.delay(n);
            assert!(d >= p.ceiling(n) / 2 && d < p.ceiling(n), "{d:?}");
        }
    }

    #[tokio::test]
    async fn retries_throttling_until_success_and_stops_at_the_bound() {
        let p = RetryPolicy { max_attempts: 4, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) };
        let mut calls = 0;
        let r = with_retries(&p, || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { Err(throttle()) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r.unwrap(), 3);

        let mut calls = 0;
        let e = with_retries(&p, || {
            calls += 1;
            async { Err::<(), _>(throttle()) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 4);
        assert!(e.message.contains("gave up after 4 attempts"), "{e}");

        let mut calls = 0;
        let fatal = AwsError { class: Class::Fatal, ..throttle() };
        let _ = with_retries(&p, || {
            calls += 1;
            let f = fatal.clone();
            async move { Err::<(), _>(f) }
        })
        .await;
        assert_eq!(calls, 1, "fatal errors are not retried");
    }
}
