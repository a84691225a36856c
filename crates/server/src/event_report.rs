//! `agentry events consumers`: the outbox's consumers as an operator reads them — where each
//! stands, how far behind it is, and the events it failed (waiting for another attempt, or
//! parked until someone retries them with `agentry events retry`).

use std::fmt::Write as _;

use agentry_domain::events::consumers::ConsumerStatus;

/// The report of `statuses`, one block per consumer.
pub fn consumers_report(statuses: &[ConsumerStatus]) -> String {
    let mut out = String::new();
    if statuses.is_empty() {
        out.push_str("no consumer has read the outbox yet\n");
    }
    for s in statuses {
        let cursor =
            if s.cursor.event_id.is_empty() { "the start".to_owned() } else { s.cursor.event_id.clone() };
        let parked = s.failures.iter().filter(|f| f.next_attempt_at.is_none()).count();
        let _ = writeln!(
            out,
            "{}: after {cursor} (position {}), {} behind, {} failing, {parked} parked",
            s.name,
            s.cursor.position,
            s.behind,
            s.failures.len() - parked,
        );
        for f in &s.failures {
            let state = match f.next_attempt_at {
                Some(at) => format!("next attempt {}", at.to_rfc3339()),
                None => "parked".to_owned(),
            };
            let _ = writeln!(
                out,
                "  {} (tenant {}): {} attempts, {state}; last error at {}: {}",
                f.event_id,
                f.tenant_id,
                f.attempts,
                f.failed_at.to_rfc3339(),
                f.error
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use agentry_domain::events::consumers::{FailedEvent, StreamPosition};
    use agentry_domain::ids::{EventId, TenantId};
    use chrono::{TimeZone, Utc};

    use super::*;

    #[test]
    fn the_report_shows_cursors_lag_and_each_failure() {
        let at = Utc.with_ymd_and_hms(2026, 11, 28, 9, 0, 0).unwrap();
        let failure = |id: &str, next| FailedEvent {
            event_id: EventId::from_string(id),
            tenant_id: TenantId::from_string("ten_1"),
            attempts: 6,
            error: "embedder down".into(),
            next_attempt_at: next,
            failed_at: at,
        };
        let statuses = [
            ConsumerStatus {
                name: "memory_extraction".into(),
                cursor: StreamPosition { position: 812, event_id: "evt_9".into() },
                behind: 3,
                failures: vec![failure("evt_4", None), failure("evt_5", Some(at))],
            },
            ConsumerStatus {
                name: "webhook_fanout".into(),
                cursor: StreamPosition::default(),
                behind: 0,
                failures: vec![],
            },
        ];
        assert_eq!(
            consumers_report(&statuses),
            "memory_extraction: after evt_9 (position 812), 3 behind, 1 failing, 1 parked\n  \
             evt_4 (tenant ten_1): 6 attempts, parked; last error at 2026-11-28T09:00:00+00:00: embedder down\n  \
             evt_5 (tenant ten_1): 6 attempts, next attempt 2026-11-28T09:00:00+00:00; last error at 2026-11-28T09:00:00+00:00: embedder down\n\
             webhook_fanout: after the start (position 0), 0 behind, 0 failing, 0 parked\n"
        );
    }
}
