//! The `wait` step (PRODUCT.md §18): the execution pauses for `seconds`, or until the time
//! `until` renders to, holding no worker, lease or connection meanwhile: it waits as a row of
//! the queue, due when the wait ends, and survives restarts.
//!
//! ```json
//! {"id": "cool_off", "type": "wait", "seconds": 3600}
//! {"id": "at_nine", "type": "wait", "until": "{{ input.send_at }}"}
//! ```
//!
//! Its output is `{waited_until}`: the time it waited for (RFC 3339). A time already past does
//! not wait.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, de};

use super::params::{Text, TextValue};
use crate::decode;
use crate::validation::FieldErrorKind;

/// The longest wait `seconds` may ask for: a year.
pub const MAX_WAIT_SECONDS: u32 = 366 * 24 * 3600;

/// A `wait` step: exactly one of `seconds` and `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitStep {
    /// How long to wait: 1–[`MAX_WAIT_SECONDS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<WaitSeconds>,
    /// Until when: an RFC 3339 time, or a template rendering to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Text<WaitTime>>,
}

impl WaitStep {
    /// Whether it says how long to wait in exactly one way.
    ///
    /// # Errors
    /// The sentence refusing it.
    pub fn check(&self) -> Result<(), &'static str> {
        match (&self.seconds, &self.until) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            (None, None) => Err("a wait step takes seconds or until"),
            (Some(_), Some(_)) => Err("a wait step takes seconds or until, not both"),
        }
    }
}

/// How long a wait is, in whole seconds: 1–[`MAX_WAIT_SECONDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct WaitSeconds(u32);

impl WaitSeconds {
    /// The seconds.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for WaitSeconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seconds;
        fn in_range<E: de::Error>(n: Option<u64>) -> Result<WaitSeconds, E> {
            match n.and_then(|n| u32::try_from(n).ok()) {
                Some(n) if (1..=MAX_WAIT_SECONDS).contains(&n) => Ok(WaitSeconds(n)),
                _ => Err(decode::fault(
                    FieldErrorKind::OutOfRange,
                    format!("must be a whole number of seconds from 1 to {MAX_WAIT_SECONDS}"),
                )),
            }
        }
        impl de::Visitor<'_> for Seconds {
            type Value = WaitSeconds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number of seconds")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<WaitSeconds, E> {
                in_range(Some(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<WaitSeconds, E> {
                in_range(u64::try_from(n).ok())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<WaitSeconds, E> {
                in_range(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<WaitSeconds, E> {
                Err(decode::missing())
            }
        }
        deserializer.deserialize_any(Seconds)
    }
}

/// The time a `wait` step's `until` reads as: RFC 3339, with its offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTime(pub DateTime<Utc>);

impl TextValue for WaitTime {
    const REFUSAL: FieldErrorKind = FieldErrorKind::InvalidFormat;

    fn read(text: String) -> Result<Self, String> {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|t| Self(t.with_timezone(&Utc)))
            .map_err(|_| format!("{text:?} is not an RFC 3339 time (such as 2026-12-01T09:00:00Z)"))
    }
}

/// What a rendered `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// This long from when it starts.
    Seconds(u32),
    /// This time.
    Until(DateTime<Utc>),
}

impl WaitFor {
    /// When a wait that starts at `now` ends.
    pub fn ends(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Self::Seconds(s) => now + chrono::Duration::seconds(i64::from(s)),
            Self::Until(until) => until,
        }
    }
}

#[cfg(test)]
mod tests;
