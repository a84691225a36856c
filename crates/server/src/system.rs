//! The real clock and identifier generator.

use std::sync::Mutex;

use agentry_domain::ids::IdGenerator;
use agentry_domain::time::Clock;
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
            let mut generator = self
                .generator
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Overflow needs 2^80 ids in one millisecond; fall back to a fresh random one.
            generator.generate().unwrap_or_else(|_| ulid::Ulid::new())
        };
        format!("{prefix}_{}", ulid.to_string().to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_url_safe_and_ordered() {
        let ids = UlidIds::default();
        let generated: Vec<String> = (0..1000).map(|_| ids.generate("usr")).collect();
        assert!(
            generated
                .iter()
                .all(|id| id.len() == 30 && id.starts_with("usr_"))
        );
        assert!(
            generated
                .iter()
                .all(|id| id[4..].chars().all(|c| c.is_ascii_alphanumeric()))
        );
        assert!(generated.windows(2).all(|w| w[0] < w[1]), "monotonic");
    }

    #[test]
    fn clock_has_millisecond_precision() {
        assert_eq!(SystemClock.now().timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
