//! Batching pending pods (Karpenter's `batcher.go`, karpenter.md §1), for the controller and the
//! simulator alike.
//!
//! A window opens at the first trigger (a pod found unschedulable, or a replan request). It closes when
//! no *new* trigger has come for `idle` (default 1 s) or when `max` (default 10 s) has passed since it
//! opened:
//!
//! ```text
//! closes_at = min(last_new + idle, opened + max)
//! ```
//!
//! A trigger repeated by the same key (a pod whose status is updated again) does not extend the window.
//! The batch is not the set of triggers: it is every provisionable pod when the window closes.
//!
//! Pure and generic over the clock: `T` is the controller's tokio `Instant` or the simulator's
//! `SimTime`; time is always passed in.

use std::collections::BTreeSet;
use std::ops::Add;
use std::time::Duration;

/// Batch window settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchConfig {
    /// Close the window when no new pod has triggered for this long.
    pub idle: Duration,
    /// Close the window at the latest this long after it opened.
    pub max: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig { idle: Duration::from_secs(1), max: Duration::from_secs(10) }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Window<T> {
    opened: T,
    last_new: T,
    keys: BTreeSet<String>,
}

/// The open window, if any.
#[derive(Clone, Debug)]
pub struct Batcher<T> {
    config: BatchConfig,
    window: Option<Window<T>>,
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Batcher<T> {
    pub fn new(config: BatchConfig) -> Self {
        Batcher { config, window: None }
    }

    /// Something wants a batch (a pod uid, or `replan/<reason>`).
    pub fn trigger(&mut self, key: &str, now: T) {
        match &mut self.window {
            None => self.window = Some(Window { opened: now, last_new: now, keys: [key.to_string()].into() }),
            Some(w) => {
                if w.keys.insert(key.to_string()) {
                    w.last_new = now;
                }
            }
        }
    }

    /// When the open window closes (`None`: no window).
    pub fn deadline(&self) -> Option<T> {
        self.window.as_ref().map(|w| (w.last_new + self.config.idle).min(w.opened + self.config.max))
    }

    /// Closes the window if its deadline has passed; returns how many distinct triggers it collected.
    pub fn close_if_due(&mut self, now: T) -> Option<usize> {
        if self.deadline().is_some_and(|d| d <= now) { self.window.take().map(|w| w.keys.len()) } else { None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock of whole milliseconds, as the simulator's.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Ms(u64);

    impl Add<Duration> for Ms {
        type Output = Ms;
        fn add(self, d: Duration) -> Ms {
            Ms(self.0 + d.as_millis() as u64)
        }
    }

    #[test]
    fn the_window_closes_after_idle_or_max_and_repeats_do_not_extend_it() {
        let mut b = Batcher::new(BatchConfig::default());
        assert_eq!(b.deadline(), None);
        assert_eq!(b.close_if_due(Ms(5_000)), None);
        b.trigger("a", Ms(0));
        assert_eq!(b.deadline(), Some(Ms(1_000)));
        b.trigger("b", Ms(900));
        assert_eq!(b.deadline(), Some(Ms(1_900)), "a new pod extends the idle timer");
        b.trigger("a", Ms(1_800));
        assert_eq!(b.deadline(), Some(Ms(1_900)), "a repeated pod does not");
        assert_eq!(b.close_if_due(Ms(1_899)), None);
        for i in 0..20 {
            b.trigger(&format!("p{i}"), Ms(1_800 + 800 * i));
        }
        assert_eq!(b.deadline(), Some(Ms(10_000)), "the max timer bounds the window");
        assert_eq!(b.close_if_due(Ms(10_000)), Some(22));
        assert_eq!(b.deadline(), None, "closed");
        // The next trigger opens a fresh window.
        b.trigger("a", Ms(20_000));
        assert_eq!(b.deadline(), Some(Ms(21_000)));
    }

    #[test]
    fn settings_are_honoured() {
        let t0 = std::time::Instant::now();
        let mut b = Batcher::new(BatchConfig { idle: Duration::from_millis(200), max: Duration::from_millis(500) });
        b.trigger("a", t0);
        assert_eq!(b.deadline(), Some(t0 + Duration::from_millis(200)));
        b.trigger("b", t0 + Duration::from_millis(400));
        assert_eq!(b.deadline(), Some(t0 + Duration::from_millis(500)));
    }
}
