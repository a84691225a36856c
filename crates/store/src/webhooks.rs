//! [`WebhookRepository`]: subscriptions, the fan-out of the outbox into deliveries, deliveries
//! claimed with leases, and the delivery log.
//!
//! The fan-out reads the outbox and the subscriptions and writes the deliveries that the
//! domain's [`fan_out`](agentry_domain::webhooks::fan_out) decides, in one transaction; rows are
//! turned into entities only through their constructors (`Subscription::restore`,
//! `Delivery::restore`), which refuse a state they do not know.
//!
//! Deliveries are a lease queue claimed through the one claim statement ([`crate::leases`]);
//! the fan-out takes events as claims take rows: on PostgreSQL `FOR UPDATE SKIP LOCKED`, so
//! several instances take disjoint ones without waiting; SQLite runs one write transaction at a
//! time, so the same statements suffice there. A unique index on (event, subscription) makes a second delivery of one pair
//! impossible whatever the workers do, and every outcome is applied only under the lease it
//! was claimed with.

use agentry_domain::events::Event;
use agentry_domain::ids::{DeliveryId, EventId, TenantId, UserId, WebhookId};
use agentry_domain::metrics::{Backlog, QueueBacklog};
use agentry_domain::tenancy::Role;
use agentry_domain::webhooks::{
    Attempt, AttemptErrorKind, ClaimedDelivery, DELIVERY_QUEUE, Delivery, DeliveryCounts, DeliveryStats,
    DeliveryStatus, Dispatched, DueDelivery, FanOut, HourCount, NewDelivery, Requeue, SealedSecret,
    Settlement, StoredDelivery, StoredSubscription, Subscription, SubscriptionStatus, SubscriptionStop,
    SubscriptionTarget, WebhookRepository, nearest_rank_offset,
};
use agentry_domain::work::{Lease, LeaseQueue};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{Map, Value};

use crate::database::{Backend, Database, StoreError};
use crate::schema::{memberships, webhook_attempts, webhook_deliveries, webhook_subscriptions};
use crate::types::{DbJsonAs, DbTime};

#[macro_use]
mod rows;
mod statements;

use rows::*;

use statements::{ClaimedRow, HourRow, due_deliveries, one_delivery, per_hour_sql};

use crate::leases::prepare_claim;
use crate::signals::WorkQueue;

/// Webhooks in the database.
#[derive(Debug, Clone)]
pub struct WebhookStore {
    db: Database,
}

impl WebhookStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Deliveries of every tenant in each status, for tests and benchmarks.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn count_deliveries(&self, status: DeliveryStatus) -> anyhow::Result<i64> {
        let status = status.as_str();
        Ok(with_conn!(self.db, conn => webhook_deliveries::table
            .filter(webhook_deliveries::status.eq(status))
            .count()
            .get_result(conn)
            .await)?)
    }

    /// The (event, subscription) pair of every delivery row of every tenant, for tests that
    /// check no pair was recorded twice.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn delivery_pairs(&self) -> anyhow::Result<Vec<(String, String)>> {
        Ok(with_conn!(self.db, conn => webhook_deliveries::table
            .select((webhook_deliveries::event_id, webhook_deliveries::subscription_id))
            .load::<(String, String)>(conn)
            .await)?)
    }
}

#[async_trait]
impl LeaseQueue<DueDelivery> for WebhookStore {
    async fn claim(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: u32,
    ) -> anyhow::Result<Vec<ClaimedDelivery>> {
        let (sql, params) = prepare_claim(&self.db, due_deliveries, lease, now, limit);
        let (held, now) = (lease.clone(), DbTime(now));
        let claimed = transaction!(self.db, conn => {
            let rows: Vec<ClaimedRow> = claim!(conn, sql, params).await?;
            pair_with_subscriptions!(conn, rows, held, now)
        })?;
        Ok(claimed)
    }
}

#[async_trait]
impl WebhookRepository for WebhookStore {
    async fn insert(&self, subscription: &Subscription) -> anyhow::Result<()> {
        let row = SubscriptionRow::from_domain(subscription);
        transaction!(self.db, conn => Ok(diesel::insert_into(webhook_subscriptions::table).values(&row).execute(conn).await?))?;
        Ok(())
    }

    async fn get(&self, tenant: &TenantId, id: &WebhookId) -> anyhow::Result<Option<Subscription>> {
        let row: Option<SubscriptionRow> = with_conn!(self.db, conn => webhook_subscriptions::table
            .filter(webhook_subscriptions::tenant_id.eq(tenant.as_str()))
            .filter(webhook_subscriptions::id.eq(id.as_str()))
            .select(SubscriptionRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(SubscriptionRow::into_domain).transpose()
    }

    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<Subscription>> {
        let rows: Vec<SubscriptionRow> = with_conn!(self.db, conn => webhook_subscriptions::table
            .filter(webhook_subscriptions::tenant_id.eq(tenant.as_str()))
            .order(webhook_subscriptions::id.asc())
            .select(SubscriptionRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(SubscriptionRow::into_domain).collect()
    }

    async fn update(&self, subscription: &Subscription) -> anyhow::Result<bool> {
        let row = SubscriptionRow::from_domain(subscription);
        let n = transaction!(self.db, conn => Ok(diesel::update(webhook_subscriptions::table
            .filter(webhook_subscriptions::tenant_id.eq(row.tenant_id.clone()))
            .filter(webhook_subscriptions::id.eq(row.id.clone())))
            .set((
                webhook_subscriptions::url.eq(row.url),
                webhook_subscriptions::events.eq(row.events),
                webhook_subscriptions::description.eq(row.description),
                webhook_subscriptions::metadata.eq(row.metadata),
                webhook_subscriptions::status.eq(row.status),
                webhook_subscriptions::secret_sealed.eq(row.secret_sealed),
                webhook_subscriptions::previous_secret_sealed.eq(row.previous_secret_sealed),
                webhook_subscriptions::previous_secret_until.eq(row.previous_secret_until),
                webhook_subscriptions::updated_at.eq(row.updated_at),
            ))
            .execute(conn)
            .await?))?;
        if n == 1 {
            // Set active again, its pending deliveries are due: this instance looks at once
            // (others at their next poll).
            self.db.stored(WorkQueue::Deliveries);
        }
        Ok(n == 1)
    }

    async fn delete(&self, tenant: &TenantId, id: &WebhookId) -> anyhow::Result<bool> {
        let (tenant, id) = (tenant.to_string(), id.to_string());
        let n = transaction!(self.db, conn => Ok(diesel::delete(webhook_subscriptions::table
            .filter(webhook_subscriptions::tenant_id.eq(tenant))
            .filter(webhook_subscriptions::id.eq(id)))
            .execute(conn)
            .await?))?;
        Ok(n == 1)
    }

    async fn dispatch(
        &self,
        events: &[Event],
        now: DateTime<Utc>,
        first_delay: chrono::Duration,
        fan_out: FanOut,
    ) -> anyhow::Result<Dispatched> {
        let mut tenants: Vec<String> = events.iter().map(|e| e.tenant_id.to_string()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        let events = events.to_vec();
        // Two statements a batch, however many events it holds (their tenants' subscriptions,
        // then the deliveries), the second once per delivery the fan-out decides.
        let dispatched = transaction!(self.db, conn => {
            let mut report = Dispatched { events: events.len(), deliveries: 0 };
            if events.is_empty() {
                return Ok(report);
            }
            // With its maker's role now, if it has a maker: a subscription follows its maker's
            // membership.
            let rows: Vec<TargetRow> = webhook_subscriptions::table
                .left_join(memberships::table.on(memberships::tenant_id
                    .eq(webhook_subscriptions::tenant_id)
                    .and(memberships::user_id.nullable().eq(webhook_subscriptions::created_by))))
                .filter(webhook_subscriptions::tenant_id.eq_any(&tenants))
                .select((
                    webhook_subscriptions::tenant_id,
                    webhook_subscriptions::id,
                    webhook_subscriptions::events,
                    webhook_subscriptions::status,
                    webhook_subscriptions::created_at,
                    webhook_subscriptions::created_by,
                    memberships::role.nullable(),
                ))
                .load(conn)
                .await?;
            // With no subscription in the batch's tenants, nothing can be delivered.
            if rows.is_empty() {
                return Ok(report);
            }
            let encode = |e: anyhow::Error| StoreError::Encode(e.to_string());
            // What cannot be read drops out, logged, rather than stopping the fan-out of every
            // tenant: a subscription whose row is unreadable receives nothing.
            let targets: Vec<SubscriptionTarget> = rows
                .into_iter()
                .filter_map(|(tenant, id, events, status, created_at, maker, role)| {
                    SubscriptionTarget::restore(
                        WebhookId::from_string(id.clone()),
                        TenantId::from_string(tenant),
                        &events.0,
                        &status,
                        created_at.0,
                    )
                    .map(|target| match maker {
                        // A role this version cannot read allows nothing.
                        Some(_) => target.made_by_member(role.and_then(|r| Role::parse(&r))),
                        None => target,
                    })
                    .inspect_err(|e| tracing::error!(subscription = %id, error = %e, "skipping a subscription that cannot be read"))
                    .ok()
                })
                .collect();
            for delivery in fan_out(&events, &targets, now, first_delay).map_err(encode)? {
                report.deliveries += diesel::insert_into(webhook_deliveries::table)
                    .values(&NewDeliveryRow::new(&delivery, None))
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await?;
            }
            if report.deliveries > 0 {
                conn.announce(WorkQueue::Deliveries).await?;
            }
            Ok(report)
        })?;
        if dispatched.deliveries > 0 {
            self.db.stored(WorkQueue::Deliveries);
        }
        Ok(dispatched)
    }

    async fn insert_claimed(&self, delivery: &NewDelivery, lease: &Lease) -> anyhow::Result<()> {
        // Held by this instance, as a claim holds: taken over at once if the instance dies.
        let row = NewDeliveryRow {
            lease_owner: self.db.lease_owner().0,
            ..NewDeliveryRow::new(delivery, Some(lease))
        };
        transaction!(self.db, conn => Ok(diesel::insert_into(webhook_deliveries::table).values(&row).execute(conn).await?))?;
        Ok(())
    }

    async fn claim_one(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        delivery: &DeliveryId,
        lease: &Lease,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<ClaimedDelivery>> {
        use diesel::sql_types::Text;
        let (sql, params) = prepare_claim(&self.db, one_delivery, lease, now, 1);
        let (held, now) = (lease.clone(), DbTime(now));
        let (id, tenant, subscription) = (delivery.to_string(), tenant.to_string(), subscription.to_string());
        let mut claimed = transaction!(self.db, conn => {
            let rows: Vec<ClaimedRow> =
                claim!(conn, sql, params, Text => id, Text => tenant, Text => subscription).await?;
            pair_with_subscriptions!(conn, rows, held, now)
        })?;
        Ok(claimed.pop())
    }

    async fn settle(
        &self,
        delivery: &DeliveryId,
        lease: &Lease,
        settlement: &Settlement,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (id, token, s, now) =
            (delivery.to_string(), lease.token.clone(), settlement.clone(), DbTime(now));
        let held = transaction!(self.db, conn => {
            let a = s.attempt();
            let delivered = s.status() == DeliveryStatus::Delivered;
            let changed = diesel::update(webhook_deliveries::table
                .filter(webhook_deliveries::id.eq(id.as_str()))
                .filter(webhook_deliveries::lease_token.eq(token.as_str())))
                .set((
                    webhook_deliveries::status.eq(s.status().as_str()),
                    webhook_deliveries::next_attempt_at.eq(s.next_attempt_at().map(DbTime)),
                    webhook_deliveries::lease_token.eq(None::<String>),
                    webhook_deliveries::lease_until.eq(None::<DbTime>),
                    webhook_deliveries::response_status.eq(a.response_status.map(i64::from)),
                    webhook_deliveries::response_time_ms.eq(Some(i64::try_from(a.response_time_ms).unwrap_or(i64::MAX))),
                    webhook_deliveries::error.eq(a.error.clone()),
                    webhook_deliveries::delivered_at.eq(delivered.then_some(now)),
                    webhook_deliveries::updated_at.eq(now),
                ))
                .execute(conn)
                .await?;
            if changed == 0 {
                return Ok(false);
            }
            let tenant: String = webhook_deliveries::table
                .filter(webhook_deliveries::id.eq(id.as_str()))
                .select(webhook_deliveries::tenant_id)
                .first(conn)
                .await?;
            let row = AttemptRow {
                delivery_id: id.clone(),
                attempt: i64::from(a.number),
                tenant_id: tenant,
                started_at: DbTime(a.started_at),
                succeeded: a.succeeded,
                response_status: a.response_status.map(i64::from),
                response_time_ms: i64::try_from(a.response_time_ms).unwrap_or(i64::MAX),
                error_kind: a.error_kind.map(|k| k.as_str().to_owned()),
                error: a.error.clone(),
                response_body: a.response_body.clone(),
            };
            diesel::insert_into(webhook_attempts::table).values(&row).on_conflict_do_nothing().execute(conn).await?;
            // `Subscription::stop` on the row, as one conditional update: only a subscription
            // still in `SubscriptionStop::FROM` stops.
            if let Some(stop) = s.subscription_stop() {
                let of_delivery =
                    webhook_deliveries::table.filter(webhook_deliveries::id.eq(id.as_str())).select(webhook_deliveries::subscription_id);
                diesel::update(webhook_subscriptions::table
                    .filter(webhook_subscriptions::id.eq_any(of_delivery))
                    .filter(webhook_subscriptions::status.eq(SubscriptionStop::FROM.as_str())))
                    .set((webhook_subscriptions::status.eq(stop.status().as_str()), webhook_subscriptions::updated_at.eq(now)))
                    .execute(conn)
                    .await?;
            }
            Ok(true)
        })?;
        Ok(held)
    }

    async fn deliveries(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        limit: u32,
    ) -> anyhow::Result<Vec<Delivery>> {
        let rows: Vec<DeliveryRow> = with_conn!(self.db, conn => webhook_deliveries::table
            .filter(webhook_deliveries::tenant_id.eq(tenant.as_str()))
            .filter(webhook_deliveries::subscription_id.eq(subscription.as_str()))
            .order((webhook_deliveries::created_at.desc(), webhook_deliveries::id.desc()))
            .limit(i64::from(limit))
            .select(DeliveryRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(DeliveryRow::into_domain).collect()
    }

    async fn delivery(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        id: &DeliveryId,
    ) -> anyhow::Result<Option<Delivery>> {
        let row: Option<DeliveryRow> = with_conn!(self.db, conn => webhook_deliveries::table
            .filter(webhook_deliveries::tenant_id.eq(tenant.as_str()))
            .filter(webhook_deliveries::subscription_id.eq(subscription.as_str()))
            .filter(webhook_deliveries::id.eq(id.as_str()))
            .select(DeliveryRow::as_select())
            .first(conn)
            .await
            .optional())?;
        row.map(DeliveryRow::into_domain).transpose()
    }

    async fn attempts(&self, tenant: &TenantId, delivery: &DeliveryId) -> anyhow::Result<Vec<Attempt>> {
        let rows: Vec<AttemptRow> = with_conn!(self.db, conn => webhook_attempts::table
            .filter(webhook_attempts::tenant_id.eq(tenant.as_str()))
            .filter(webhook_attempts::delivery_id.eq(delivery.as_str()))
            .order(webhook_attempts::attempt.asc())
            .select(AttemptRow::as_select())
            .load(conn)
            .await)?;
        Ok(rows.into_iter().map(AttemptRow::into_domain).collect())
    }

    async fn requeue(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        requeue: &Requeue,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<u64>> {
        let statuses: Vec<&'static str> = requeue.statuses.iter().map(|s| s.as_str()).collect();
        let (tenant, id, reactivate) = (tenant.to_string(), subscription.to_string(), requeue.reactivate);
        // No delivery predates the epoch: "since then" is "all of them".
        let since = DbTime(requeue.since.unwrap_or(DateTime::<Utc>::UNIX_EPOCH));
        let now = DbTime(now);
        let queued = transaction!(self.db, conn => {
            let found: Option<String> = webhook_subscriptions::table
                .filter(webhook_subscriptions::tenant_id.eq(tenant.as_str()))
                .filter(webhook_subscriptions::id.eq(id.as_str()))
                .select(webhook_subscriptions::id)
                .first(conn)
                .await
                .optional()?;
            if found.is_none() {
                return Ok(None);
            }
            // Test deliveries were the caller's last word: never queued again. A delivery held
            // by a manual attempt is `pending` while held, so none of these is under a lease.
            let queued = diesel::update(webhook_deliveries::table
                .filter(webhook_deliveries::tenant_id.eq(tenant.as_str()))
                .filter(webhook_deliveries::subscription_id.eq(id.as_str()))
                .filter(webhook_deliveries::status.eq_any(&statuses))
                .filter(webhook_deliveries::is_test.eq(false))
                .filter(webhook_deliveries::created_at.ge(since)))
                .set((
                    webhook_deliveries::status.eq(PENDING),
                    webhook_deliveries::next_attempt_at.eq(Some(now)),
                    webhook_deliveries::earlier_attempts
                        .eq(webhook_deliveries::earlier_attempts + webhook_deliveries::attempts),
                    webhook_deliveries::attempts.eq(0),
                    webhook_deliveries::updated_at.eq(now),
                ))
                .execute(conn)
                .await?;
            if reactivate {
                diesel::update(webhook_subscriptions::table
                    .filter(webhook_subscriptions::id.eq(id.as_str()))
                    .filter(webhook_subscriptions::status.ne(ACTIVE)))
                    .set((
                        webhook_subscriptions::status.eq(SubscriptionStatus::Active.as_str()),
                        webhook_subscriptions::updated_at.eq(now),
                    ))
                    .execute(conn)
                    .await?;
            }
            conn.announce(WorkQueue::Deliveries).await?;
            Ok(Some(u64::try_from(queued).unwrap_or(0)))
        })?;
        if queued.is_some() {
            self.db.stored(WorkQueue::Deliveries);
        }
        Ok(queued)
    }

    async fn stats(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<DeliveryStats> {
        let (tenant, id, window) = (tenant.as_str(), subscription.as_str(), since);
        let since = DbTime(since);
        // The attempts of the window that got an answer, as one expression used three times.
        macro_rules! answered {
            () => {
                webhook_attempts::table
                    .filter(webhook_attempts::tenant_id.eq(tenant))
                    .filter(webhook_attempts::started_at.ge(since))
                    .filter(webhook_attempts::response_status.is_not_null())
                    .filter(
                        webhook_attempts::delivery_id.eq_any(
                            webhook_deliveries::table
                                .filter(webhook_deliveries::subscription_id.eq(id))
                                .select(webhook_deliveries::id),
                        ),
                    )
            };
        }
        let (per_status, attempts, answered, p50, p99) = with_conn!(self.db, conn => {
            let per_status: Vec<(String, i64)> = webhook_deliveries::table
                .filter(webhook_deliveries::tenant_id.eq(tenant))
                .filter(webhook_deliveries::subscription_id.eq(id))
                .filter(webhook_deliveries::created_at.ge(since))
                .group_by(webhook_deliveries::status)
                .select((webhook_deliveries::status, diesel::dsl::count_star()))
                .load(conn)
                .await?;
            let attempts: i64 = webhook_attempts::table
                .filter(webhook_attempts::tenant_id.eq(tenant))
                .filter(webhook_attempts::started_at.ge(since))
                .filter(webhook_attempts::delivery_id.eq_any(
                    webhook_deliveries::table
                        .filter(webhook_deliveries::subscription_id.eq(id))
                        .select(webhook_deliveries::id),
                ))
                .count()
                .get_result(conn)
                .await?;
            let answered: i64 = answered!().count().get_result(conn).await?;
            let n = u64::try_from(answered).unwrap_or(0);
            let mut percentiles = [None, None];
            for (slot, percent) in percentiles.iter_mut().zip([50, 99]) {
                if let Some(offset) = nearest_rank_offset(percent, n) {
                    *slot = answered!()
                        .order(webhook_attempts::response_time_ms.asc())
                        .select(webhook_attempts::response_time_ms)
                        .offset(i64::try_from(offset).unwrap_or(i64::MAX))
                        .first::<i64>(conn)
                        .await
                        .optional()?;
                }
            }
            let [p50, p99] = percentiles;
            Ok::<_, diesel::result::Error>((per_status, attempts, n, p50, p99))
        })?;
        let mut counts = DeliveryCounts::default();
        for (status, n) in per_status {
            // A status this version does not know is not counted, as `Delivery::restore` refuses it.
            if let Some(status) = DeliveryStatus::parse(&status) {
                counts.add(status, u64::try_from(n).unwrap_or(0));
            }
        }
        let ms = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        Ok(DeliveryStats {
            since: window,
            counts,
            attempts: u64::try_from(attempts).unwrap_or(0),
            answered,
            p50_ms: ms(p50),
            p99_ms: ms(p99),
        })
    }

    async fn per_hour(
        &self,
        tenant: &TenantId,
        subscription: &WebhookId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<HourCount>> {
        use diesel::sql_types::Text;
        let sql = per_hour_sql(self.db.backend());
        let (tenant, id, since) = (tenant.to_string(), subscription.to_string(), DbTime(since));
        let rows: Vec<HourRow> = with_conn!(self.db, conn => diesel::sql_query(&sql)
            .bind::<Text, _>(tenant.as_str())
            .bind::<Text, _>(id.as_str())
            .bind::<crate::types::UtcTime, _>(since)
            .load(conn)
            .await)?;
        let mut counts = Vec::with_capacity(rows.len());
        for row in rows {
            // A status this version does not know is not counted, as in `stats`.
            if let Some(status) = DeliveryStatus::parse(&row.status) {
                let count = u64::try_from(row.n).unwrap_or(0);
                counts.push(HourCount { hour: crate::types::parse_hour(&row.hour)?, status, count });
            }
        }
        Ok(counts)
    }
}

#[async_trait]
impl QueueBacklog for WebhookStore {
    async fn backlog(&self, now: DateTime<Utc>) -> anyhow::Result<Vec<Backlog>> {
        let (depth, oldest): (i64, Option<DbTime>) = with_conn!(self.db, conn => {
            let pending = webhook_deliveries::table.filter(webhook_deliveries::status.eq(PENDING));
            let depth = pending.count().get_result(conn).await?;
            let oldest = pending
                .filter(webhook_deliveries::next_attempt_at.le(DbTime(now)))
                .order(webhook_deliveries::next_attempt_at.asc())
                .select(webhook_deliveries::next_attempt_at)
                .first::<Option<DbTime>>(conn)
                .await
                .optional()?
                .flatten();
            Ok::<_, diesel::result::Error>((depth, oldest))
        })?;
        Ok(vec![Backlog::new(DELIVERY_QUEUE, depth, oldest.map(|t| t.0), now)])
    }
}

#[cfg(feature = "test-support")]
impl WebhookStore {
    /// One pass of the fan-out consumer, as the consumer runner makes it (for the contract
    /// tests): up to `limit` events after its cursor, dispatched with `fan_out`, and the
    /// cursor moved past them; `Dispatched::events` counts the events read.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn dispatch_pending(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        first_delay: chrono::Duration,
        fan_out: FanOut,
    ) -> anyhow::Result<Dispatched> {
        use agentry_domain::events::consumers::{EventStream as _, Progress};
        let stream = crate::ConsumerStore::new(self.db.clone());
        static PASSES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let pass = PASSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let lease = Lease { token: format!("test-pass-{pass}"), until: now + chrono::Duration::minutes(5) };
        let Some(cursor) = stream.acquire("webhook_fanout", &lease, now).await? else {
            return Ok(Dispatched::default());
        };
        // Events committed behind a transaction still running (another test's) settle once
        // it ends: waited for here, as the service's loop comes back for them.
        let mut batch = stream.read_after(&cursor, limit).await?;
        for _ in 0..2_000 {
            if !batch.unsettled || batch.events.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            batch = stream.read_after(&cursor, limit).await?;
        }
        let read = batch.events;
        let events: Vec<Event> = read.iter().filter_map(|s| s.event.clone().ok()).collect();
        let mut report = self.dispatch(&events, now, first_delay, fan_out).await?;
        report.events = read.len();
        let progress = Progress { cursor: read.last().map(|s| s.at.clone()), ..Progress::default() };
        stream.commit("webhook_fanout", &lease, &progress, now).await?;
        Ok(report)
    }
}
