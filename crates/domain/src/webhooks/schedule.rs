//! When a failed delivery is tried again.

use chrono::{DateTime, Duration, Utc};

/// The delays before each attempt (the first is usually 0: immediate); their number is the
/// attempt limit. Default `0,60,300,1800,7200` seconds, as the spec's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    delays: Vec<Duration>,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self { delays: [0, 60, 300, 1800, 7200].into_iter().map(Duration::seconds).collect() }
    }
}

/// Delays longer than this get jitter, so that receivers that failed together are not all
/// retried in the same second.
const JITTER_ABOVE: Duration = Duration::seconds(60);
/// The most jitter adds: a tenth of the delay.
const JITTER_DIVISOR: i32 = 10;

impl RetrySchedule {
    /// A schedule of these delays.
    ///
    /// # Errors
    /// When there is no delay, or a delay is negative.
    pub fn new(delays: Vec<Duration>) -> Result<Self, String> {
        if delays.is_empty() {
            return Err("the retry schedule needs at least one attempt".into());
        }
        if delays.iter().any(|d| *d < Duration::zero()) {
            return Err("retry delays must not be negative".into());
        }
        Ok(Self { delays })
    }

    /// Parses comma-separated seconds (`0,60,300,1800,7200`).
    ///
    /// # Errors
    /// When a part is not a whole number of seconds, or as [`RetrySchedule::new`].
    pub fn parse(text: &str) -> Result<Self, String> {
        let delays = text
            .split(',')
            .map(|part| {
                part.trim()
                    .parse::<i64>()
                    .ok()
                    .and_then(Duration::try_seconds)
                    .ok_or_else(|| format!("{part:?} is not a number of seconds"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(delays)
    }

    /// Attempts in all.
    pub fn max_attempts(&self) -> u32 {
        u32::try_from(self.delays.len()).unwrap_or(u32::MAX)
    }

    /// When attempt `attempt + 1` is due after attempt `attempt` (from 1) failed at `now`, or
    /// `None` when that was the last. `jitter` in [0, 1) adds up to a tenth of delays over a
    /// minute.
    pub fn next_after_failure(&self, attempt: u32, now: DateTime<Utc>, jitter: f64) -> Option<DateTime<Utc>> {
        let delay = *self.delays.get(usize::try_from(attempt).ok()?)?;
        if delay <= JITTER_ABOVE {
            return Some(now + delay);
        }
        let max_extra_ms = (delay / JITTER_DIVISOR).num_milliseconds() as f64;
        let extra = Duration::milliseconds((max_extra_ms * jitter.clamp(0.0, 1.0)) as i64);
        Some(now + delay + extra)
    }

    /// The delay before the first attempt.
    pub fn first_delay(&self) -> Duration {
        self.delays.first().copied().unwrap_or_else(Duration::zero)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn the_default_is_the_spec_table_of_five_attempts() {
        let s = RetrySchedule::default();
        assert_eq!(s.max_attempts(), 5);
        let after: Vec<Option<i64>> =
            (1..=5).map(|a| s.next_after_failure(a, t0(), 0.0).map(|t| (t - t0()).num_seconds())).collect();
        assert_eq!(after, [Some(60), Some(300), Some(1800), Some(7200), None]);
        assert_eq!(s, RetrySchedule::parse("0, 60,300,1800,7200").unwrap());
    }

    #[test]
    fn jitter_adds_at_most_a_tenth_and_only_over_a_minute() {
        let s = RetrySchedule::parse("0,60,300").unwrap();
        assert_eq!(s.next_after_failure(1, t0(), 0.99), Some(t0() + Duration::seconds(60)));
        let late = s.next_after_failure(2, t0(), 0.5).unwrap();
        assert_eq!(late - t0(), Duration::seconds(315));
        let latest = s.next_after_failure(2, t0(), 7.0).unwrap();
        assert_eq!(latest - t0(), Duration::seconds(330));
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(RetrySchedule::parse("").is_err());
        assert!(RetrySchedule::parse("0,x").is_err());
        assert!(RetrySchedule::parse("0,-1").is_err());
        assert_eq!(RetrySchedule::parse("0,1,1").unwrap().max_attempts(), 3);
    }
}
