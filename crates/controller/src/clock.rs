//! The controller's one clock.
//!
//! The controller compares two kinds of time: tokio's monotonic `Instant` (the batch window, backoffs,
//! requeues, caches' TTLs) and the API server's timestamps (a NodeClaim's creation and launch, a
//! deletion, for the launch and registration timeouts, disruption and garbage collection). [`Clock`]
//! reads one source for both: tokio's clock, anchored to the wall clock once, when the controller
//! starts. So timestamps advance exactly as tokio's time does (under `#[tokio::test(start_paused =
//! true)]` too, where `tokio::time::advance` moves both), and a timestamp becomes the `Instant` a
//! requeue sleeps until with [`Clock::instant_of`].
//!
//! The cost: after the wall clock is stepped (NTP), the controller's timestamps differ from the API
//! server's by the step until it restarts. Every timeout it judges is minutes long, so a step of
//! seconds moves a decision by seconds.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use stowage_decide::disruption::Moment;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    wall: Timestamp,
    mono: Instant,
}

impl Clock {
    /// Anchored to the wall clock now.
    pub fn new() -> Self {
        Clock::anchored(Timestamp::now())
    }

    /// Anchored to `wall` at tokio's now (tests: a fixed origin).
    pub fn anchored(wall: Timestamp) -> Self {
        Clock { wall, mono: Instant::now() }
    }

    /// Now, as an API server timestamp.
    pub fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    /// The timestamp of a tokio instant.
    pub fn at(&self, i: Instant) -> Timestamp {
        let ms = i.saturating_duration_since(self.mono).as_millis() as i64 - self.mono.saturating_duration_since(i).as_millis() as i64;
        Timestamp::from_millisecond(self.wall.as_millisecond().saturating_add(ms)).unwrap_or(self.wall)
    }

    /// The tokio instant of a timestamp (for sleeping until it).
    pub fn instant_of(&self, t: Timestamp) -> Instant {
        let now = Instant::now();
        let at = self.at(now);
        if t >= at { now + Moment::since(t, at) } else { now.checked_sub(Moment::since(at, t)).unwrap_or(now) }
    }

    /// How long until `t` (zero if it has passed).
    pub fn until(&self, t: Timestamp) -> Duration {
        Moment::since(t, self.now())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn timestamps_advance_with_tokio_time() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let c = Clock::anchored(t0);
        assert_eq!(c.now(), t0);
        tokio::time::advance(Duration::from_secs(15 * 60)).await;
        assert_eq!(Moment::since(c.now(), t0), Duration::from_secs(900), "no real time passed; tokio's did");
        let later = t0 + Duration::from_secs(1000);
        assert_eq!(c.until(later), Duration::from_secs(100));
        let wake = c.instant_of(later);
        tokio::time::sleep_until(wake).await;
        assert_eq!(c.now(), later);
        assert_eq!(c.until(t0), Duration::ZERO);
        assert_eq!(c.at(c.instant_of(t0)), t0, "a past timestamp maps back");
    }
}
