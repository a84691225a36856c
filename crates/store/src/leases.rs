//! What every lease queue (jobs, webhook deliveries, workflow executions) shares: when a row's
//! lease is free to take, and the instances whose heartbeats keep their leases held.
//!
//! A lease is free when it was never taken, when it ran out, or when the instance that took it
//! has not beaten its heartbeat since `stale_before` (it crashed or was killed): work such an
//! instance held is taken over in seconds, not when its lease runs out.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::ExpressionMethods as _;
use diesel::QueryDsl as _;
use diesel_async::RunQueryDsl as _;

use agentry_domain::jobs::InstanceRegistry;

use crate::database::Database;
use crate::schema::{instances, jobs, webhook_deliveries, workflow_executions};
use crate::types::DbTime;

/// The condition, in SQL, that a row's lease is free at `now`, with the placeholders of the
/// claim it is part of (`$3` or `?3` …) for `now` and `stale_before`.
pub(crate) fn free_sql(now: &str, stale_before: &str) -> String {
    format!(
        "(lease_until IS NULL OR lease_until < {now} OR (lease_owner IS NOT NULL AND lease_owner NOT IN \
         (SELECT id FROM instances WHERE heartbeat_at >= {stale_before})))"
    )
}

/// The running instances of the service, by their heartbeats.
#[derive(Debug, Clone)]
pub struct InstanceStore {
    db: Database,
}

impl InstanceStore {
    /// A registry over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

/// Instances silent for this long are forgotten (their leases were free long before).
const FORGET_AFTER: chrono::Duration = chrono::Duration::hours(1);

#[async_trait]
impl InstanceRegistry for InstanceStore {
    async fn beat(&self, id: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
        let (id, at) = (id.to_owned(), DbTime(now));
        let forget_before = DbTime(now - FORGET_AFTER);
        transaction!(self.db, conn => {
            diesel::insert_into(instances::table)
                .values((instances::id.eq(&id), instances::started_at.eq(at), instances::heartbeat_at.eq(at)))
                .on_conflict(instances::id)
                .do_update()
                .set(instances::heartbeat_at.eq(at))
                .execute(conn)
                .await?;
            diesel::delete(instances::table.filter(instances::heartbeat_at.lt(forget_before))).execute(conn).await?;
            Ok::<_, crate::database::StoreError>(())
        })?;
        Ok(())
    }

    async fn leave(&self, id: &str) -> anyhow::Result<()> {
        let id = id.to_owned();
        transaction!(self.db, conn => Ok::<_, crate::database::StoreError>(
            diesel::delete(instances::table.filter(instances::id.eq(&id))).execute(conn).await?
        ))?;
        Ok(())
    }

    async fn free_all_leases(&self) -> anyhow::Result<u64> {
        // Running jobs are due again once their lease has run out: the epoch has.
        let past = DbTime(DateTime::<Utc>::UNIX_EPOCH);
        let freed = transaction!(self.db, conn => {
            let jobs = diesel::update(jobs::table.filter(jobs::lease_until.is_not_null()))
                .set((jobs::lease_until.eq(past), jobs::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            let deliveries = diesel::update(webhook_deliveries::table.filter(webhook_deliveries::lease_until.is_not_null()))
                .set((webhook_deliveries::lease_until.eq(past), webhook_deliveries::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            let executions = diesel::update(workflow_executions::table.filter(workflow_executions::lease_until.is_not_null()))
                .set((workflow_executions::lease_until.eq(past), workflow_executions::lease_owner.eq(None::<String>)))
                .execute(conn)
                .await?;
            Ok::<_, crate::database::StoreError>(jobs + deliveries + executions)
        })?;
        Ok(u64::try_from(freed).unwrap_or(0))
    }
}
