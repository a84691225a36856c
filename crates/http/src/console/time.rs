//! Times in the console's forms. A `datetime-local` input sends `2026-11-26T09:00` (or with
//! seconds) without a zone; the console says the time is UTC and the API takes RFC 3339, so the
//! form's value becomes the API's by adding the zone, and anything else is passed on as typed
//! for the API's own validation to refuse, naming the field.

use chrono::{DateTime, NaiveDateTime, Utc};

/// The RFC 3339 text of a `datetime-local` value read as UTC; blank is `None`.
pub(super) fn utc_from_local(raw: Option<String>) -> Option<String> {
    let raw = raw.filter(|v| !v.trim().is_empty())?;
    let raw = raw.trim();
    let parsed = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f"));
    Some(match parsed {
        Ok(t) => t.and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        Err(_) => raw.to_owned(),
    })
}

/// `t` as a `datetime-local` input's value (UTC, to the minute).
pub(super) fn local_value(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M").to_string()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    #[test]
    fn a_datetime_local_value_is_read_as_utc_and_anything_else_passes_through() {
        let cases = [
            ("2026-11-26T09:00", "2026-11-26T09:00:00Z"),
            ("2026-11-26T09:00:30", "2026-11-26T09:00:30Z"),
            ("2026-11-26T09:00:30.5", "2026-11-26T09:00:30Z"),
            (" 2026-11-26T09:00 ", "2026-11-26T09:00:00Z"),
            ("yesterday", "yesterday"),
            ("2026-11-26T09:00:00+02:00", "2026-11-26T09:00:00+02:00"),
        ];
        for (raw, expected) in cases {
            assert_eq!(utc_from_local(Some(raw.into())).as_deref(), Some(expected), "{raw}");
        }
        assert_eq!(utc_from_local(Some("  ".into())), None);
        assert_eq!(utc_from_local(None), None);
        let t = Utc.with_ymd_and_hms(2026, 11, 26, 9, 5, 59).unwrap();
        assert_eq!(local_value(t), "2026-11-26T09:05");
    }
}
