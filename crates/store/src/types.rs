//! Column types that mean the same on both backends but are spelled differently.
//!
//! - [`UtcTime`]: `timestamptz` on PostgreSQL; on SQLite fixed-width RFC 3339 text with
//!   microseconds and `Z` (`2026-11-01T12:00:00.000000Z`), which sorts in time order.
//! - [`Json`]: `jsonb` on PostgreSQL; JSON text on SQLite (diesel's SQLite `Jsonb` would write
//!   SQLite's binary JSONB, which older tools cannot read).

use chrono::{DateTime, Utc};
use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types::{SqlType, Timestamptz};
use diesel::sqlite::{Sqlite, SqliteValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write as _;

/// SQL type of a UTC instant.
#[derive(Debug, Clone, Copy, SqlType, diesel::query_builder::QueryId)]
#[diesel(postgres_type(oid = 1184, array_oid = 1185))]
#[diesel(sqlite_type(name = "Text"))]
pub struct UtcTime;

/// SQL type of a JSON document.
#[derive(Debug, Clone, Copy, SqlType, diesel::query_builder::QueryId)]
#[diesel(postgres_type(oid = 3802, array_oid = 3807))]
#[diesel(sqlite_type(name = "Text"))]
pub struct Json;

/// A UTC instant as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, AsExpression, FromSqlRow)]
#[diesel(sql_type = UtcTime)]
pub struct DbTime(pub DateTime<Utc>);

impl From<DateTime<Utc>> for DbTime {
    fn from(value: DateTime<Utc>) -> Self {
        Self(value)
    }
}

/// A JSON document of any shape, as stored.
pub type DbJson = DbJsonAs<serde_json::Value>;

/// Timestamps in SQLite: UTC text of fixed width, `2026-11-01T12:00:00.123456Z`, so that text
/// order is time order in comparisons and indexes. Written and read by hand: chrono's
/// format-string machinery was a twentieth of a list request's CPU time (docs/performance.md).
mod sqlite_time {
    use std::fmt::Write as _;

    use chrono::{DateTime, Datelike as _, NaiveDate, NaiveDateTime, Timelike as _, Utc};

    /// The same layout for chrono, for what the fast paths do not cover.
    const FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

    pub(super) fn format(t: &DateTime<Utc>) -> String {
        let micros = t.timestamp_subsec_micros();
        if !(0..=9999).contains(&t.year()) || micros >= 1_000_000 {
            // Years of other widths and leap seconds: rare, and chrono gets them right.
            return t.format(FORMAT).to_string();
        }
        let mut text = String::with_capacity(27);
        let _ = write!(
            text,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        text
    }

    pub(super) fn parse(text: &str) -> Result<DateTime<Utc>, String> {
        fast_parse(text.as_bytes())
            .or_else(|| NaiveDateTime::parse_from_str(text, FORMAT).ok())
            .map(|naive| naive.and_utc())
            .ok_or_else(|| format!("unreadable timestamp {text:?}"))
    }

    /// Digits at `range` of `bytes` as a number, or `None` for anything but digits.
    fn number(bytes: &[u8], range: std::ops::Range<usize>) -> Option<u32> {
        bytes[range].iter().try_fold(0_u32, |n, &b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
    }

    fn fast_parse(b: &[u8]) -> Option<NaiveDateTime> {
        let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (26, b'Z')];
        if b.len() != 27 || separators.iter().any(|&(at, c)| b[at] != c) {
            return None;
        }
        let year = i32::try_from(number(b, 0..4)?).ok()?;
        NaiveDate::from_ymd_opt(year, number(b, 5..7)?, number(b, 8..10)?)?.and_hms_micro_opt(
            number(b, 11..13)?,
            number(b, 14..16)?,
            number(b, 17..19)?,
            number(b, 20..26)?,
        )
    }

    #[cfg(test)]
    mod tests {
        use chrono::TimeZone as _;

        use super::*;

        #[test]
        fn the_fast_paths_agree_with_chrono() {
            let times = [
                Utc.with_ymd_and_hms(2026, 11, 23, 18, 5, 9).unwrap(),
                Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap(),
                Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap()
                    + chrono::Duration::microseconds(999_999),
                Utc.with_ymd_and_hms(2024, 2, 29, 12, 0, 0).unwrap() + chrono::Duration::milliseconds(7),
                Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap(),
            ];
            for t in times {
                let text = format(&t);
                assert_eq!(text, t.format(FORMAT).to_string());
                assert!(fast_parse(text.as_bytes()).is_some(), "{text}");
                assert_eq!(parse(&text).unwrap(), t);
            }
        }

        #[test]
        fn other_years_and_bad_text_fall_back_or_fail() {
            let far = Utc.with_ymd_and_hms(12026, 1, 1, 0, 0, 0).unwrap();
            let text = format(&far);
            assert_eq!(text, far.format(FORMAT).to_string());
            assert_eq!(parse(&text).unwrap(), far);
            for bad in [
                "",
                "2026-11-23",
                "2026-13-01T00:00:00.000000Z",
                "2026-11-23T18:05:09.00000xZ",
                "2026-11-23 18:05:09.000000Z",
            ] {
                assert!(parse(bad).is_err(), "{bad}");
            }
        }
    }
}

impl ToSql<UtcTime, Pg> for DbTime {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <DateTime<Utc> as ToSql<Timestamptz, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<UtcTime, Pg> for DbTime {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        <DateTime<Utc> as FromSql<Timestamptz, Pg>>::from_sql(bytes).map(Self)
    }
}

impl ToSql<UtcTime, Sqlite> for DbTime {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(sqlite_time::format(&self.0));
        Ok(IsNull::No)
    }
}

impl FromSql<UtcTime, Sqlite> for DbTime {
    fn from_sql(mut value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        Ok(Self(sqlite_time::parse(value.read_text())?))
    }
}

/// A JSON document, read straight into `T` and written from it. With a known shape there is no
/// [`serde_json::Value`] tree in between, which for a list of agents was most of the reading;
/// [`DbJson`] is the one for documents of any shape.
#[derive(Debug, Clone, PartialEq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Json)]
pub struct DbJsonAs<T: Serialize + DeserializeOwned + std::fmt::Debug>(pub T);

/// The version byte PostgreSQL puts before `jsonb` in its binary format.
const JSONB_VERSION: u8 = 1;

impl<T: Serialize + DeserializeOwned + std::fmt::Debug> ToSql<Json, Pg> for DbJsonAs<T> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(&[JSONB_VERSION])?;
        serde_json::to_writer(out, &self.0)?;
        Ok(IsNull::No)
    }
}

impl<T: Serialize + DeserializeOwned + std::fmt::Debug> FromSql<Json, Pg> for DbJsonAs<T> {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        match value.as_bytes().split_first() {
            Some((&JSONB_VERSION, document)) => Ok(Self(serde_json::from_slice(document)?)),
            _ => Err("unsupported jsonb encoding version".into()),
        }
    }
}

impl<T: Serialize + DeserializeOwned + std::fmt::Debug> ToSql<Json, Sqlite> for DbJsonAs<T> {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}

impl<T: Serialize + DeserializeOwned + std::fmt::Debug> FromSql<Json, Sqlite> for DbJsonAs<T> {
    fn from_sql(mut value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        Ok(Self(serde_json::from_str(value.read_text())?))
    }
}

/// Parses an enum stored as text; a failure means the database holds something this version
/// does not know, which is a bug or a botched migration.
pub(crate) fn parse_stored<T: std::str::FromStr>(value: &str, what: &str) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| anyhow::anyhow!("stored {what} {value:?} is invalid: {e}"))
}

/// Reads a [`string_enum!`](agentry_domain::string_enum) value stored by its name; an unknown
/// name is an error naming `what` (a newer version's value, or a botched migration).
pub(crate) fn parse_named<T: agentry_domain::Named>(value: &str, what: &str) -> anyhow::Result<T> {
    T::from_name(value).ok_or_else(|| anyhow::anyhow!("stored {what} {value:?} is unknown"))
}

/// A span of time that rows are counted per: the UTC hour or day a time falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    /// `2026-11-01T12`.
    Hour,
    /// `2026-11-01`.
    Day,
}

/// SQL naming the [`Bucket`] that the [`UtcTime`] `column` falls in, as text of the same form on
/// both backends (`2026-11-01T12`, `2026-11-01`), for `GROUP BY`. SQLite stores times as
/// fixed-width RFC 3339 text, so the bucket is its prefix; PostgreSQL formats the instant in
/// UTC, whatever the session's time zone.
pub(crate) fn bucket_sql(backend: crate::database::Backend, column: &str, bucket: Bucket) -> String {
    use crate::database::Backend;
    match (backend, bucket) {
        (Backend::Postgres, Bucket::Hour) => {
            format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24')")
        }
        (Backend::Postgres, Bucket::Day) => format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
        (Backend::Sqlite, Bucket::Hour) => format!("substr({column}, 1, 13)"),
        (Backend::Sqlite, Bucket::Day) => format!("substr({column}, 1, 10)"),
    }
}

/// The start of the hour [`bucket_sql`] named (`2026-11-01T12`).
pub(crate) fn parse_hour(text: &str) -> anyhow::Result<DateTime<Utc>> {
    chrono::NaiveDateTime::parse_from_str(&format!("{text}:00"), "%Y-%m-%dT%H:%M")
        .map(|t| t.and_utc())
        .map_err(|e| anyhow::anyhow!("unreadable hour {text:?}: {e}"))
}

/// The day [`bucket_sql`] named (`2026-11-01`).
pub(crate) fn parse_day(text: &str) -> anyhow::Result<chrono::NaiveDate> {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|e| anyhow::anyhow!("unreadable day {text:?}: {e}"))
}

#[cfg(test)]
mod bucket_tests {
    use chrono::TimeZone as _;

    use super::*;

    #[test]
    fn buckets_read_back_as_their_start() {
        assert_eq!(parse_hour("2026-11-01T07").unwrap(), Utc.with_ymd_and_hms(2026, 11, 1, 7, 0, 0).unwrap());
        assert_eq!(parse_day("2026-11-01").unwrap(), chrono::NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        assert!(parse_hour("2026-11-01").is_err());
        assert!(parse_day("2026-11-01T07").is_err());
    }
}
