//! The clock port: the domain never reads the system time directly.

use chrono::{DateTime, Utc};

/// Tells the current time. Implementations should return millisecond precision, the precision
/// every timestamp of the API carries, so a value read back from storage equals the one written.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Clock: Send + Sync {
    /// The current instant in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// Serde helpers for RFC 3339 UTC timestamps with millisecond precision and `Z`
/// (`2026-11-01T12:00:00.123Z`), the form of every timestamp of the API and of event data.
pub mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Formats `t`.
    pub fn format(t: &DateTime<Utc>) -> String {
        t.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// `#[serde(with = "rfc3339")]`: serialises.
    ///
    /// # Errors
    /// As the serializer's.
    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(t))
    }

    /// `#[serde(with = "rfc3339")]`: deserialises any RFC 3339 time.
    ///
    /// # Errors
    /// For text that is not an RFC 3339 time.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text).map(|t| t.with_timezone(&Utc)).map_err(serde::de::Error::custom)
    }
}
