//! How a step leads on (PRODUCT.md §18): whether a failed attempt is tried again and after how
//! long (`retry`), where a failure goes (`on_error`), and which step follows it (`next`).
//!
//! ```json
//! {"id": "fetch", "type": "http_request", "method": "GET", "url": "…",
//!  "retry": {"max_attempts": 3, "backoff_seconds": 2, "on": ["server_error", "network"]},
//!  "on_error": "notify", "next": "store"}
//! ```

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, de};

use super::StepId;
use crate::decode;
use crate::validation::FieldErrorKind;
use crate::workflows::failure::{FailureKind, StepFailure};

/// Most attempts a step may make.
pub const MAX_ATTEMPTS: u32 = 10;
/// The longest a step may wait before its next attempt, `Retry-After` included.
pub const MAX_BACKOFF_SECONDS: u32 = 86_400;

/// A whole number from `MIN` to `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Bounded<const MIN: u32, const MAX: u32>(u32);

impl<const MIN: u32, const MAX: u32> Bounded<MIN, MAX> {
    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de, const MIN: u32, const MAX: u32> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Whole<const MIN: u32, const MAX: u32>;
        impl<const MIN: u32, const MAX: u32> Whole<MIN, MAX> {
            fn check<E: de::Error>(n: Option<u32>) -> Result<Bounded<MIN, MAX>, E> {
                match n {
                    Some(n) if (MIN..=MAX).contains(&n) => Ok(Bounded(n)),
                    _ => Err(decode::fault(
                        FieldErrorKind::OutOfRange,
                        format!("must be a whole number from {MIN} to {MAX}"),
                    )),
                }
            }
        }
        impl<const MIN: u32, const MAX: u32> de::Visitor<'_> for Whole<MIN, MAX> {
            type Value = Bounded<MIN, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Self::check(u32::try_from(n).ok())
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Self::check(u32::try_from(n).ok())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Self::check(None)
            }
        }
        deserializer.deserialize_any(Whole::<MIN, MAX>)
    }
}

/// The factor each wait is multiplied by: a number from 1 to 10.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Factor(f64);

impl<'de> Deserialize<'de> for Factor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = f64::deserialize(deserializer)?;
        if (1.0..=10.0).contains(&n) {
            Ok(Self(n))
        } else {
            Err(decode::fault(FieldErrorKind::OutOfRange, "must be a number from 1 to 10"))
        }
    }
}

/// The failures a step's `retry` tries again after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryOn {
    /// The step ran out of its time.
    Timeout,
    /// The server answered 5xx or 429.
    ServerError,
    /// No answer: the name did not resolve, the connection failed or broke.
    Network,
    /// Any failure.
    Any,
}

impl RetryOn {
    fn covers(self, kind: FailureKind) -> bool {
        match self {
            Self::Any => true,
            Self::Timeout => kind == FailureKind::Timeout,
            Self::ServerError => kind == FailureKind::ServerError,
            Self::Network => kind == FailureKind::Network,
        }
    }
}

/// A step's `retry`: every field optional, each with its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (default 1: no retry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<Bounded<1, MAX_ATTEMPTS>>,
    /// The wait before the second attempt (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_seconds: Option<Bounded<0, MAX_BACKOFF_SECONDS>>,
    /// What each further wait is multiplied by (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<Factor>,
    /// The longest wait (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_seconds: Option<Bounded<0, MAX_BACKOFF_SECONDS>>,
    /// The failures tried again (default `["any"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Vec<RetryOn>>,
}

impl RetryPolicy {
    /// Attempts in all.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.map_or(1, Bounded::get)
    }

    /// How long to wait after failed attempt `attempt` (from 1) with `failure` before the next
    /// one, or `None` when it is not tried again: the attempts are spent, or the policy does
    /// not cover the failure. The wait grows by the factor from `backoff_seconds` up to
    /// `max_backoff_seconds`; a server's `Retry-After` makes it longer, never shorter (up to
    /// [`MAX_BACKOFF_SECONDS`]).
    pub fn wait_after(&self, attempt: u32, failure: &StepFailure) -> Option<Duration> {
        if attempt >= self.max_attempts() {
            return None;
        }
        let on = self.on.as_deref().unwrap_or(&[RetryOn::Any]);
        if !on.iter().any(|o| o.covers(failure.kind)) {
            return None;
        }
        let base = f64::from(self.backoff_seconds.map_or(1, Bounded::get));
        let factor = self.factor.map_or(2.0, |f| f.0);
        let most = f64::from(self.max_backoff_seconds.map_or(300, Bounded::get));
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let backoff = Duration::from_secs_f64((base * factor.powi(exponent)).min(most));
        let limit = Duration::from_secs(u64::from(MAX_BACKOFF_SECONDS));
        Some(failure.retry_after.map_or(backoff, |asked| asked.max(backoff)).min(limit))
    }
}

/// A step's `on_error`: what a failure (after any retries) does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnError {
    /// The execution fails (the default).
    Fail,
    /// The step is recorded failed and the execution goes on as if it had completed.
    Continue,
    /// The step is recorded failed and the execution goes on at this step.
    Goto(StepId),
}

impl Serialize for OnError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Fail => serializer.serialize_str("fail"),
            Self::Continue => serializer.serialize_str("continue"),
            Self::Goto(id) => id.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for OnError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Route;
        impl de::Visitor<'_> for Route {
            type Value = OnError;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, raw: &str) -> Result<OnError, E> {
                match raw {
                    "fail" => Ok(OnError::Fail),
                    "continue" => Ok(OnError::Continue),
                    id => StepId::parse(id).map(OnError::Goto).map_err(|f| {
                        decode::fault(
                            FieldErrorKind::InvalidValue,
                            format!(
                                "must be \"fail\", \"continue\" or a step id, and {id:?} is neither ({})",
                                f.message()
                            ),
                        )
                    }),
                }
            }
        }
        deserializer.deserialize_any(Route)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: serde_json::Value) -> RetryPolicy {
        serde_json::from_value(json).unwrap()
    }

    fn failure(kind: FailureKind) -> StepFailure {
        StepFailure::of(kind, "it failed")
    }

    #[test]
    fn waits_grow_by_the_factor_up_to_the_longest() {
        let p = policy(
            serde_json::json!({"max_attempts": 6, "backoff_seconds": 2, "factor": 3, "max_backoff_seconds": 30}),
        );
        let waits: Vec<u64> =
            (1..6).map(|a| p.wait_after(a, &failure(FailureKind::Other)).unwrap().as_secs()).collect();
        assert_eq!(waits, [2, 6, 18, 30, 30]);
        assert_eq!(p.wait_after(6, &failure(FailureKind::Other)), None, "the attempts are spent");
    }

    #[test]
    fn defaults_try_once() {
        let p = policy(serde_json::json!({}));
        assert_eq!(p.max_attempts(), 1);
        assert_eq!(p.wait_after(1, &failure(FailureKind::Network)), None);
        let p = policy(serde_json::json!({"max_attempts": 2}));
        assert_eq!(p.wait_after(1, &failure(FailureKind::Other)), Some(Duration::from_secs(1)));
    }

    #[test]
    fn only_the_failures_named_are_tried_again() {
        let p = policy(serde_json::json!({"max_attempts": 3, "on": ["server_error", "timeout"]}));
        assert!(p.wait_after(1, &failure(FailureKind::ServerError)).is_some());
        assert!(p.wait_after(1, &failure(FailureKind::Timeout)).is_some());
        assert_eq!(p.wait_after(1, &failure(FailureKind::Network)), None);
        assert_eq!(p.wait_after(1, &failure(FailureKind::Other)), None);
    }

    #[test]
    fn a_retry_after_lengthens_the_wait_and_never_shortens_it() {
        let p = policy(serde_json::json!({"max_attempts": 3, "backoff_seconds": 5}));
        let asked = |secs| failure(FailureKind::ServerError).with_retry_after(Duration::from_secs(secs));
        assert_eq!(p.wait_after(1, &asked(20)), Some(Duration::from_secs(20)));
        assert_eq!(p.wait_after(1, &asked(1)), Some(Duration::from_secs(5)));
        let most = Duration::from_secs(u64::from(MAX_BACKOFF_SECONDS));
        assert_eq!(p.wait_after(1, &asked(10_000_000)), Some(most));
    }

    #[test]
    fn on_error_reads_its_keywords_and_step_ids() {
        let read = |v: &str| serde_json::from_value::<OnError>(serde_json::json!(v));
        assert_eq!(read("fail").unwrap(), OnError::Fail);
        assert_eq!(read("continue").unwrap(), OnError::Continue);
        assert_eq!(read("notify").unwrap(), OnError::Goto(StepId("notify".into())));
        assert!(read("not an id").is_err());
        assert_eq!(serde_json::to_value(OnError::Goto(StepId("x".into()))).unwrap(), serde_json::json!("x"));
    }
}
