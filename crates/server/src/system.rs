//! The real clock and identifier generator.

use std::collections::HashMap;
use std::sync::Mutex;

use agentry_domain::ids::IdGenerator;
use agentry_domain::ratelimit::{RateCounter, Window};
use agentry_domain::time::Clock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// The system clock, truncated to milliseconds (the precision of every API timestamp).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        let now = Utc::now();
        DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
    }
}

/// A clock that stands still until told otherwise: for tests (and demos) that need expiries,
/// windows and deadlines to pass without waiting for them.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self { now: Mutex::new(start) }
    }

    /// Moves the clock to `to`.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = to;
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: chrono::Duration) {
        let mut now = self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Lower-case ULIDs: 26 characters, URL-safe, sortable by creation time, and monotonic within
/// this process (two ids made in the same millisecond still sort in creation order).
#[derive(Default)]
pub struct UlidIds {
    generator: Mutex<ulid::Generator>,
}

impl std::fmt::Debug for UlidIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UlidIds")
    }
}

impl IdGenerator for UlidIds {
    fn generate(&self, prefix: &'static str) -> String {
        let ulid = {
            let mut generator = self.generator.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Overflow needs 2^80 ids in one millisecond; fall back to a fresh random one.
            generator.generate().unwrap_or_else(|_| ulid::Ulid::new())
        };
        format!("{prefix}_{}", ulid.to_string().to_lowercase())
    }
}

/// Rate-limit counters in this process's memory: right for a single instance (the SQLite
/// default), wrong for several (each would count alone).
#[derive(Debug, Default)]
pub struct InProcessRateCounter {
    /// Bucket → (window start, window length, hits).
    windows: Mutex<HashMap<String, (i64, i64, u64)>>,
}

/// Buckets kept before ended windows are swept.
const SWEEP_ABOVE: usize = 10_000;

#[async_trait]
impl RateCounter for InProcessRateCounter {
    async fn hit(&self, subject: &str, windows: &[Window]) -> anyhow::Result<Vec<u64>> {
        let mut counters = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // One entry per bucket, holding only its current window, so memory stays bounded by the
        // number of active subjects. Now and then, subjects whose window has ended are
        // forgotten, so memory tracks the subjects active now rather than every one ever seen.
        if counters.len() > SWEEP_ABOVE
            && let Some(first) = windows.first()
        {
            counters.retain(|_, (start, len, _)| *start + *len > first.start);
        }
        let mut counts = Vec::with_capacity(windows.len());
        for window in windows {
            let entry = counters.entry(format!("{subject}:{}", window.name)).or_insert((
                window.start,
                window.secs,
                0,
            ));
            if entry.0 != window.start {
                *entry = (window.start, window.secs, 0);
            }
            entry.2 += 1;
            counts.push(entry.2);
            if entry.2 > window.limit {
                break;
            }
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_url_safe_and_ordered() {
        let ids = UlidIds::default();
        let generated: Vec<String> = (0..1000).map(|_| ids.generate("usr")).collect();
        assert!(generated.iter().all(|id| id.len() == 30 && id.starts_with("usr_")));
        assert!(generated.iter().all(|id| id[4..].chars().all(|c| c.is_ascii_alphanumeric())));
        assert!(generated.windows(2).all(|w| w[0] < w[1]), "monotonic");
    }

    #[tokio::test]
    async fn the_in_process_counter_keeps_the_counter_contract() {
        agentry_domain::ratelimit::contract::run_all(&InProcessRateCounter::default(), "mem").await;
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let t0 = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let clock = ManualClock::new(t0);
        assert_eq!(clock.now(), t0);
        clock.advance(chrono::Duration::seconds(90));
        assert_eq!(clock.now(), t0 + chrono::Duration::seconds(90));
        clock.set(t0);
        assert_eq!(clock.now(), t0);
    }

    #[test]
    fn clock_has_millisecond_precision() {
        assert_eq!(SystemClock.now().timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
