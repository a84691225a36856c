//! The clock port: the domain never reads the system time directly.

use chrono::{DateTime, Utc};

/// Tells the current time. Implementations should return millisecond precision, the precision
/// every timestamp of the API carries, so a value read back from storage equals the one written.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Clock: Send + Sync {
    /// The current instant in UTC.
    fn now(&self) -> DateTime<Utc>;
}
