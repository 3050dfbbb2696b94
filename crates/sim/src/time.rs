//! Simulated time. The simulator never reads the wall clock: every delay is a value added to a
//! `SimTime`, so the same scenario gives the same timeline.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds since the scenario started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);

    pub fn plus(self, d: Duration) -> SimTime {
        SimTime(self.0.saturating_add(d.as_millis().min(u64::MAX as u128) as u64))
    }

    /// Time elapsed since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: SimTime) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    pub(crate) fn hours_since(self, earlier: SimTime) -> f64 {
        self.0.saturating_sub(earlier.0) as f64 / 3_600_000.0
    }
}

/// `t + d` is [`SimTime::plus`]: what the shared decisions (`stowage_decide`) need of a clock.
impl std::ops::Add<Duration> for SimTime {
    type Output = SimTime;
    fn add(self, d: Duration) -> SimTime {
        self.plus(d)
    }
}

/// The simulated clock runs the controller's own disruption decisions (`stowage_decide::disruption`).
impl stowage_decide::disruption::Moment for SimTime {
    fn since(self, earlier: SimTime) -> Duration {
        SimTime::since(self, earlier)
    }
}

impl fmt::Display for SimTime {
    /// `H:MM:SS`, with milliseconds only when there are some.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0 % 1000;
        let s = self.0 / 1000;
        write!(f, "{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)?;
        if ms != 0 {
            write!(f, ".{ms:03}")?;
        }
        Ok(())
    }
}

impl Serialize for SimTime {
    /// As seconds (a float when there are milliseconds), which is what a reader of the JSON timeline
    /// wants to plot.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_multiple_of(1000) { s.serialize_u64(self.0 / 1000) } else { s.serialize_f64(self.0 as f64 / 1000.0) }
    }
}

/// A duration as a scenario file writes it: `30s`, `10m`, `1h30m`, `500ms` (humantime syntax).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim()).map(Dur).map_err(|e| serde::de::Error::custom(format!("invalid duration {s:?}: {e} (use e.g. 30s, 10m, 1h30m)")))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&short(self.0))
    }
}

/// A duration for people: `45s`, `10m`, `1h2m3s`, `1.5s`.
pub fn short(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if ms == 0 {
        return "0s".into();
    }
    let (h, m, s, rest) = (ms / 3_600_000, (ms / 60_000) % 60, (ms / 1000) % 60, ms % 1000);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if rest > 0 {
        out.push_str(&format!("{s}.{}s", format!("{rest:03}").trim_end_matches('0')));
    } else if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(SimTime(0).to_string(), "0:00:00");
        assert_eq!(SimTime(61_000).to_string(), "0:01:01");
        assert_eq!(SimTime(3_723_500).to_string(), "1:02:03.500");
        assert_eq!(short(Duration::from_secs(90)), "1m30s");
        assert_eq!(short(Duration::from_millis(1500)), "1.5s");
        assert_eq!(short(Duration::from_secs(3600)), "1h");
    }
}
