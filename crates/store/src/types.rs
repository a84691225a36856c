//! Column types that mean the same on both backends but are spelled differently.
//!
//! - [`UtcTime`]: `timestamptz` on PostgreSQL; on SQLite fixed-width RFC 3339 text with
//!   microseconds and `Z` (`2026-11-01T12:00:00.000000Z`), which sorts in time order.
//! - [`Json`]: `jsonb` on PostgreSQL; JSON text on SQLite (diesel's SQLite `Jsonb` would write
//!   SQLite's binary JSONB, which older tools cannot read).

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types::{Jsonb, SqlType, Text, Timestamptz};
use diesel::sqlite::{Sqlite, SqliteValue};

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

/// A JSON document as stored.
#[derive(Debug, Clone, PartialEq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Json)]
pub struct DbJson(pub serde_json::Value);

const SQLITE_TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

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
        out.set_value(self.0.format(SQLITE_TIME_FORMAT).to_string());
        Ok(IsNull::No)
    }
}

impl FromSql<UtcTime, Sqlite> for DbTime {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<Text, Sqlite>>::from_sql(value)?;
        let naive = NaiveDateTime::parse_from_str(&text, SQLITE_TIME_FORMAT)
            .map_err(|e| format!("unreadable timestamp {text:?}: {e}"))?;
        Ok(Self(naive.and_utc()))
    }
}

impl ToSql<Json, Pg> for DbJson {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <serde_json::Value as ToSql<Jsonb, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<Json, Pg> for DbJson {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        <serde_json::Value as FromSql<Jsonb, Pg>>::from_sql(bytes).map(Self)
    }
}

impl ToSql<Json, Sqlite> for DbJson {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}

impl FromSql<Json, Sqlite> for DbJson {
    fn from_sql(value: SqliteValue<'_, '_, '_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<Text, Sqlite>>::from_sql(value)?;
        Ok(Self(serde_json::from_str(&text)?))
    }
}
