//! The outbox as a stream with a cursor per consumer ([`EventStream`]).
//!
//! Each event carries a position from its transaction (migration `event_consumers`): on
//! PostgreSQL the id of the transaction that wrote it, and a read takes only events of
//! transactions older than every one still running (`pg_snapshot_xmin`), so a cursor is never
//! passed by an event that commits later; on SQLite, whose single writer commits in write order,
//! the next number as it is inserted.

use agentry_domain::events::Event;
use agentry_domain::events::consumers::{
    ConsumerStatus, EventStream, FailedEvent, Progress, StreamBatch, StreamPosition, StreamedEvent,
};
use agentry_domain::ids::{EventId, TenantId};
use agentry_domain::work::Lease;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::RunQueryDsl;

use crate::database::{Backend, Database};
use crate::events::EventRow;
use crate::schema::{event_consumer_failures, event_consumers, events, instances};
use crate::types::DbTime;

/// An event as the stream reads it: the row, its position, and whether it is settled (no
/// transaction still running may add an event before it).
#[derive(QueryableByName)]
struct PositionedRow {
    #[diesel(embed)]
    event: EventRow,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    position: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    settled: bool,
}

/// A failure as stored.
#[derive(Clone, Queryable, Selectable)]
#[diesel(table_name = event_consumer_failures, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct FailureRow {
    consumer: String,
    event_id: String,
    tenant_id: String,
    attempts: i32,
    error: String,
    next_attempt_at: Option<DbTime>,
    failed_at: DbTime,
}

impl FailureRow {
    fn into_domain(self) -> FailedEvent {
        FailedEvent {
            event_id: EventId::from_string(self.event_id),
            tenant_id: TenantId::from_string(self.tenant_id),
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            error: self.error,
            next_attempt_at: self.next_attempt_at.map(|t| t.0),
            failed_at: self.failed_at.0,
        }
    }
}

/// Events after parameters 1 and 2 (position, id), in stream order, at most parameter 3, each
/// with whether it is settled. On PostgreSQL an event is settled when its transaction is older
/// than every transaction still running (the snapshot's `xmin`): one that began before it may
/// still commit an event with a smaller position. On SQLite every committed event is.
fn read_after_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => {
            "WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin) \
             SELECT id, tenant_id, event_type, data, created_at, position, position < horizon.xmin AS settled \
             FROM events, horizon WHERE (position, id) > ($1, $2) ORDER BY position, id LIMIT $3"
        }
        Backend::Sqlite => {
            "SELECT id, tenant_id, event_type, data, created_at, position, 1 AS settled FROM events \
             WHERE (position, id) > (?1, ?2) ORDER BY position, id LIMIT ?3"
        }
    }
}

/// The outbox read by consumers.
#[derive(Debug, Clone)]
pub struct ConsumerStore {
    db: Database,
}

impl ConsumerStore {
    /// The stream over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[async_trait]
impl EventStream for ConsumerStore {
    async fn acquire(
        &self,
        consumer: &str,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<StreamPosition>> {
        let (name, token, until, now) =
            (consumer.to_owned(), lease.token.clone(), DbTime(lease.until), DbTime(now));
        // As every lease: also free once its instance's heartbeat went silent (killed).
        let (owner, stale_before) = self.db.lease_owner();
        let stale_before = DbTime(stale_before);
        let held: Option<(i64, String)> = transaction!(self.db, conn => {
            diesel::insert_into(event_consumers::table)
                .values((
                    event_consumers::name.eq(&name),
                    event_consumers::after_position.eq(0_i64),
                    event_consumers::after_id.eq(""),
                    event_consumers::updated_at.eq(now),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            Ok(diesel::update(
                event_consumers::table
                    .filter(event_consumers::name.eq(&name))
                    .filter(
                        event_consumers::lease_until
                            .is_null()
                            .or(event_consumers::lease_until.le(now))
                            .or(event_consumers::lease_owner.is_not_null().and(diesel::dsl::not(
                                event_consumers::lease_owner.eq_any(
                                    instances::table.filter(instances::heartbeat_at.ge(stale_before)).select(instances::id.nullable()),
                                ),
                            ))),
                    ),
            )
            .set((
                event_consumers::lease_token.eq(Some(&token)),
                event_consumers::lease_owner.eq(&owner),
                event_consumers::lease_until.eq(Some(until)),
            ))
            .returning((event_consumers::after_position, event_consumers::after_id))
            .get_result(conn)
            .await
            .optional()?)
        })?;
        Ok(held.map(|(position, event_id)| StreamPosition { position, event_id }))
    }

    async fn read_after(&self, after: &StreamPosition, limit: u32) -> anyhow::Result<StreamBatch> {
        use diesel::sql_types::{BigInt, Text};
        let sql = read_after_sql(self.db.backend());
        let (position, id) = (after.position, after.event_id.clone());
        let rows: Vec<PositionedRow> = with_conn!(self.db, conn => diesel::sql_query(sql)
            .bind::<BigInt, _>(position)
            .bind::<Text, _>(id)
            .bind::<BigInt, _>(i64::from(limit))
            .load(conn)
            .await)?;
        // Settled events come first in stream order: the batch is the settled ones.
        let unsettled = rows.iter().any(|row| !row.settled);
        let events = rows
            .into_iter()
            .take_while(|row| row.settled)
            .map(|row| {
                let at = StreamPosition { position: row.position, event_id: row.event.id.clone() };
                StreamedEvent { at, event: row.event.into_domain().map_err(|e| format!("{e:#}")) }
            })
            .collect();
        Ok(StreamBatch { events, unsettled })
    }

    async fn due_failures(
        &self,
        consumer: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<(FailedEvent, Event)>> {
        let (name, now) = (consumer.to_owned(), DbTime(now));
        let rows: Vec<(FailureRow, EventRow)> = with_conn!(self.db, conn => event_consumer_failures::table
            .inner_join(events::table)
            .filter(event_consumer_failures::consumer.eq(name))
            .filter(event_consumer_failures::next_attempt_at.le(now))
            .order(event_consumer_failures::next_attempt_at.asc())
            .limit(i64::from(limit))
            .select((FailureRow::as_select(), EventRow::as_select()))
            .load(conn)
            .await)?;
        rows.into_iter().map(|(failure, event)| Ok((failure.into_domain(), event.into_domain()?))).collect()
    }

    async fn commit(
        &self,
        consumer: &str,
        lease: &Lease,
        progress: &Progress,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (name, token, progress) = (consumer.to_owned(), lease.token.clone(), progress.clone());
        let now = DbTime(now);
        Ok(transaction!(self.db, conn => {
            let mine = event_consumers::table
                .filter(event_consumers::name.eq(&name))
                .filter(event_consumers::lease_token.eq(&token));
            let released = (
                event_consumers::lease_token.eq(None::<String>),
                event_consumers::lease_owner.eq(None::<String>),
                event_consumers::lease_until.eq(None::<DbTime>),
                event_consumers::updated_at.eq(now),
            );
            let held = match &progress.cursor {
                Some(at) => diesel::update(mine)
                    .set((
                        released,
                        event_consumers::after_position.eq(at.position),
                        event_consumers::after_id.eq(&at.event_id),
                    ))
                    .execute(conn)
                    .await?,
                None => diesel::update(mine).set(released).execute(conn).await?,
            };
            if held == 0 {
                return Ok(false);
            }
            for f in &progress.failed {
                diesel::insert_into(event_consumer_failures::table)
                    .values((
                        event_consumer_failures::consumer.eq(&name),
                        event_consumer_failures::event_id.eq(f.event_id.as_str()),
                        event_consumer_failures::tenant_id.eq(f.tenant_id.as_str()),
                        event_consumer_failures::attempts.eq(i32::try_from(f.attempts).unwrap_or(i32::MAX)),
                        event_consumer_failures::error.eq(&f.error),
                        event_consumer_failures::next_attempt_at.eq(f.next_attempt_at.map(DbTime)),
                        event_consumer_failures::failed_at.eq(DbTime(f.failed_at)),
                    ))
                    .on_conflict((event_consumer_failures::consumer, event_consumer_failures::event_id))
                    .do_update()
                    .set((
                        event_consumer_failures::attempts.eq(excluded(event_consumer_failures::attempts)),
                        event_consumer_failures::error.eq(excluded(event_consumer_failures::error)),
                        event_consumer_failures::next_attempt_at.eq(excluded(event_consumer_failures::next_attempt_at)),
                        event_consumer_failures::failed_at.eq(excluded(event_consumer_failures::failed_at)),
                    ))
                    .execute(conn)
                    .await?;
            }
            if !progress.recovered.is_empty() {
                let ids: Vec<&str> = progress.recovered.iter().map(EventId::as_str).collect();
                diesel::delete(
                    event_consumer_failures::table
                        .filter(event_consumer_failures::consumer.eq(&name))
                        .filter(event_consumer_failures::event_id.eq_any(ids)),
                )
                .execute(conn)
                .await?;
            }
            Ok(true)
        })?)
    }

    async fn status(&self) -> anyhow::Result<Vec<ConsumerStatus>> {
        let (consumers, failures): (Vec<(String, i64, String)>, Vec<FailureRow>) = with_conn!(self.db, conn => async {
            let consumers = event_consumers::table
                .order(event_consumers::name.asc())
                .select((event_consumers::name, event_consumers::after_position, event_consumers::after_id))
                .load(conn)
                .await?;
            let failures = event_consumer_failures::table
                .order((event_consumer_failures::consumer.asc(), event_consumer_failures::failed_at.asc()))
                .select(FailureRow::as_select())
                .load(conn)
                .await?;
            Ok::<_, diesel::result::Error>((consumers, failures))
        }.await)?;
        let mut statuses = Vec::with_capacity(consumers.len());
        for (name, position, event_id) in consumers {
            let after = (position, event_id.clone());
            let behind: i64 = with_conn!(self.db, conn => events::table
                .filter(events::position.gt(after.0).or(events::position.eq(after.0).and(events::id.gt(after.1))))
                .count()
                .get_result(conn)
                .await)?;
            statuses.push(ConsumerStatus {
                failures: failures
                    .iter()
                    .filter(|f| f.consumer == name)
                    .map(|f| f.clone().into_domain())
                    .collect(),
                name,
                cursor: StreamPosition { position, event_id },
                behind: u64::try_from(behind).unwrap_or(0),
            });
        }
        Ok(statuses)
    }

    async fn retry_parked(
        &self,
        consumer: &str,
        event: Option<EventId>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<u64> {
        let (name, now) = (consumer.to_owned(), DbTime(now));
        let n = transaction!(self.db, conn => {
            let parked = event_consumer_failures::table
                .filter(event_consumer_failures::consumer.eq(&name))
                .filter(event_consumer_failures::next_attempt_at.is_null());
            Ok(match &event {
                Some(id) => diesel::update(parked.filter(event_consumer_failures::event_id.eq(id.as_str())))
                    .set(event_consumer_failures::next_attempt_at.eq(Some(now)))
                    .execute(conn)
                    .await?,
                None => diesel::update(parked)
                    .set(event_consumer_failures::next_attempt_at.eq(Some(now)))
                    .execute(conn)
                    .await?,
            })
        })?;
        if n > 0 {
            self.db.stored(crate::WorkQueue::Outbox);
        }
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
