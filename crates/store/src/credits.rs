//! [`CreditRepository`]: balances, holds, purchases and the ledger.

use agentry_domain::billing::{CreditHold, CreditRepository, HoldRequest, LedgerEntry, Purchase};
use agentry_domain::events::Event;
use agentry_domain::ids::{CreditHoldId, LedgerEntryId, TenantId};
use agentry_domain::pagination::Page;
use agentry_domain::tenancy::Plan;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;

use crate::database::{Database, DbPool, PgPools, StoreError, split_page};
use crate::events::EventRow;
use crate::schema::{credit_holds, credit_ledger, events, purchases, tenants};
use crate::signals::WorkQueue;
use crate::types::{DbTime, UtcTime};
use crate::types::{parse_named, parse_stored};

/// Credits in the database.
#[derive(Debug, Clone)]
pub struct CreditStore {
    db: Database,
}

impl CreditStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// SQLite: read the balance, hold `min(wanted, balance)` if that is at least `minimum`, in
    /// one unit of the single writer, which runs units one at a time: nothing can take the
    /// credits between the read and the update.
    async fn hold_in_the_writer(&self, r: &HoldRequest) -> Result<Option<i64>, StoreError> {
        let r = r.clone();
        transaction!(self.db, conn => {
            let balance: Option<i64> = tenants::table
                .filter(tenants::id.eq(r.tenant_id.as_str()))
                .select(tenants::credits)
                .first(conn)
                .await
                .optional()?;
            let amount = r.wanted.min(balance.unwrap_or(0));
            if amount < r.minimum || amount <= 0 {
                return Ok(None);
            }
            diesel::insert_into(credit_holds::table)
                .values((
                    credit_holds::id.eq(r.id.as_str()),
                    credit_holds::tenant_id.eq(r.tenant_id.as_str()),
                    credit_holds::amount.eq(amount),
                    credit_holds::created_at.eq(DbTime(r.created_at)),
                ))
                .execute(conn)
                .await?;
            // The CHECK on `credits` would refuse a negative balance anyway; the condition
            // makes a broken assumption an error rather than a constraint violation.
            let taken = diesel::update(
                tenants::table.filter(tenants::id.eq(r.tenant_id.as_str())).filter(tenants::credits.ge(amount)),
            )
            .set((tenants::credits.eq(tenants::credits - amount), tenants::held.eq(tenants::held + amount)))
            .execute(conn)
            .await?;
            if taken == 0 {
                return Err(StoreError::Precondition("the balance changed while the hold was taken"));
            }
            Ok(Some(amount))
        })
    }
}

/// PostgreSQL: the hold as one statement (one round trip, no transaction around it). The tenant
/// row is locked by the statement's first step, so the amount is computed from the balance as
/// it is while no other chat can change it; the update and the hold row follow only when that
/// amount reaches `minimum`. Two chats can never both take the last credits, and nothing
/// retries: a concurrent hold makes this one wait for the row, then read it afresh.
async fn hold_in_one_statement(pools: &PgPools, r: &HoldRequest) -> Result<Option<i64>, StoreError> {
    let held: Option<HeldRow> = with_pg_conn!(pools, conn => diesel::sql_query(HOLD_SQL)
        .bind::<Text, _>(r.tenant_id.as_str())
        .bind::<BigInt, _>(r.wanted)
        .bind::<BigInt, _>(r.minimum)
        .bind::<Text, _>(r.id.as_str())
        .bind::<UtcTime, _>(DbTime(r.created_at))
        .get_result(conn)
        .await
        .optional())?;
    Ok(held.map(|h| h.amount))
}

/// The statement of [`hold_in_one_statement`]. Binds: tenant, wanted, minimum, hold id,
/// created at. Answers the amount held, or no row when the balance does not reach `minimum`.
/// `MATERIALIZED` keeps the locking read a step of its own before the update.
const HOLD_SQL: &str = "\
WITH balance AS MATERIALIZED (
    SELECT id, LEAST($2, credits) AS amount FROM tenants WHERE id = $1 FOR UPDATE
), taken AS (
    UPDATE tenants SET credits = tenants.credits - balance.amount, held = tenants.held + balance.amount
    FROM balance
    WHERE tenants.id = balance.id AND balance.amount >= $3 AND balance.amount > 0
    RETURNING balance.amount
)
INSERT INTO credit_holds (id, tenant_id, amount, created_at)
SELECT $4, $1, amount, $5 FROM taken
RETURNING amount";

const HOLD_GONE: &str = "the credit hold no longer exists";

/// Credits spent in one day, as [`spent_per_day_sql`] counts them.
#[derive(QueryableByName)]
struct SpentRow {
    #[diesel(sql_type = Text)]
    day: String,
    #[diesel(sql_type = BigInt)]
    spent: i64,
}

/// A tenant's charges (parameter 1) since parameter 2, summed per UTC day. The
/// (tenant_id, created_at) index makes it a range read of the window; the database sums, so
/// the answer is a row a day however many chats there were.
fn spent_per_day_sql(backend: crate::database::Backend) -> String {
    let p = |n: u8| crate::leases::param(backend, n);
    format!(
        "SELECT {day} AS day, CAST(SUM(-delta) AS BIGINT) AS spent FROM credit_ledger \
         WHERE tenant_id = {} AND created_at >= {} AND delta < 0 GROUP BY 1",
        p(1),
        p(2),
        day = crate::types::bucket_sql(backend, "created_at", crate::types::Bucket::Day),
    )
}

/// The amount a hold took.
#[derive(QueryableByName)]
struct HeldRow {
    #[diesel(sql_type = BigInt)]
    amount: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = credit_ledger, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct LedgerRow {
    id: String,
    tenant_id: String,
    delta: i64,
    balance_after: i64,
    reason: String,
    reference: Option<String>,
    created_at: DbTime,
}

#[async_trait]
impl CreditRepository for CreditStore {
    async fn hold(&self, request: &HoldRequest) -> anyhow::Result<Option<CreditHold>> {
        let amount = match &self.db.pool {
            DbPool::Pg(pools) => hold_in_one_statement(pools, request).await?,
            DbPool::Sqlite(_) => self.hold_in_the_writer(request).await?,
        };
        Ok(amount.map(|amount| CreditHold {
            id: request.id.clone(),
            tenant_id: request.tenant_id.clone(),
            amount,
            created_at: request.created_at,
        }))
    }

    async fn extend_hold(
        &self,
        hold: &CreditHold,
        wanted: i64,
        minimum: i64,
        at: DateTime<Utc>,
    ) -> anyhow::Result<Option<i64>> {
        let hold = hold.clone();
        let added = transaction!(self.db, conn => {
            let balance: Option<i64> = tenants::table
                .filter(tenants::id.eq(hold.tenant_id.as_str()))
                .select(tenants::credits)
                .first(conn)
                .await
                .optional()?;
            let amount = wanted.min(balance.unwrap_or(0)).max(0);
            if amount < minimum {
                return Ok(None);
            }
            // The condition keeps the balance from going below zero when a concurrent hold
            // took credits since the read (PostgreSQL): the extension is then refused, as
            // when the balance was short.
            let taken = diesel::update(
                tenants::table.filter(tenants::id.eq(hold.tenant_id.as_str())).filter(tenants::credits.ge(amount)),
            )
            .set((tenants::credits.eq(tenants::credits - amount), tenants::held.eq(tenants::held + amount)))
            .execute(conn)
            .await?;
            if taken == 0 {
                return Ok(None);
            }
            let grown = diesel::update(credit_holds::table.filter(credit_holds::id.eq(hold.id.as_str())))
                .set((credit_holds::amount.eq(credit_holds::amount + amount), credit_holds::created_at.eq(DbTime(at))))
                .execute(conn)
                .await?;
            if grown == 0 {
                // Released meanwhile (by the stale-hold sweeper): undo the take by failing the
                // transaction.
                return Err(StoreError::Precondition(HOLD_GONE));
            }
            Ok::<_, StoreError>(Some(amount))
        });
        match added {
            Ok(added) => Ok(added),
            Err(StoreError::Precondition(HOLD_GONE)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn release(&self, hold: &CreditHoldId) -> anyhow::Result<()> {
        let hold = hold.clone();
        transaction!(self.db, conn => {
            let released: Option<(String, i64)> = diesel::delete(credit_holds::table.filter(credit_holds::id.eq(hold.as_str())))
                .returning((credit_holds::tenant_id, credit_holds::amount))
                .get_result(conn)
                .await
                .optional()?;
            if let Some((tenant, amount)) = released {
                diesel::update(tenants::table.filter(tenants::id.eq(tenant)))
                    .set((tenants::credits.eq(tenants::credits + amount), tenants::held.eq(tenants::held - amount)))
                    .execute(conn)
                    .await?;
            }
            Ok::<_, StoreError>(())
        })?;
        Ok(())
    }

    async fn release_stale(&self, before: DateTime<Utc>) -> anyhow::Result<u64> {
        let stale: Vec<String> = with_conn!(self.db, conn => credit_holds::table
            .filter(credit_holds::created_at.lt(DbTime(before)))
            .select(credit_holds::id)
            .load(conn)
            .await)?;
        for id in &stale {
            self.release(&CreditHoldId::from_string(id.clone())).await?;
        }
        Ok(stale.len() as u64)
    }

    async fn account(&self, tenant: &TenantId) -> anyhow::Result<Option<(i64, Plan)>> {
        let row: Option<(i64, String)> = with_conn!(self.db, conn => tenants::table
            .filter(tenants::id.eq(tenant.as_str()))
            .select((tenants::credits, tenants::plan))
            .first(conn)
            .await
            .optional())?;
        row.map(|(credits, plan)| Ok((credits, parse_stored(&plan, "plan")?))).transpose()
    }

    async fn ledger(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<LedgerEntry>, u64)> {
        // The total rides along as an uncorrelated subquery: see `AgentStore::list`.
        let counted = diesel::alias!(credit_ledger as counted);
        let in_tenant = counted.filter(counted.field(credit_ledger::tenant_id).eq(tenant.as_str()));
        let (rows, total): (Vec<LedgerRow>, i64) = with_conn!(self.db, conn => {
            let rows = credit_ledger::table
                .filter(credit_ledger::tenant_id.eq(tenant.as_str()))
                .order((credit_ledger::seq.desc(), credit_ledger::id.desc()))
                .limit(page.limit())
                .offset(page.offset())
                .select((LedgerRow::as_select(), in_tenant.count().single_value().assume_not_null()))
                .load(conn)
                .await?;
            let (rows, total) = split_page(rows, page);
            let total = match total {
                Some(total) => total,
                None => {
                    credit_ledger::table.filter(credit_ledger::tenant_id.eq(tenant.as_str())).count().get_result(conn).await?
                }
            };
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        let entries = rows
            .into_iter()
            .map(|r| {
                Ok(LedgerEntry {
                    id: LedgerEntryId::from_string(r.id),
                    tenant_id: TenantId::from_string(r.tenant_id),
                    delta: r.delta,
                    balance_after: r.balance_after,
                    reason: parse_named(&r.reason, "ledger reason")?,
                    reference: r.reference,
                    created_at: r.created_at.0,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok((entries, u64::try_from(total).unwrap_or(0)))
    }

    async fn spent_per_day(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(chrono::NaiveDate, i64)>> {
        let sql = spent_per_day_sql(self.db.backend());
        let (tenant, since) = (tenant.to_string(), DbTime(since));
        let rows: Vec<SpentRow> = with_conn!(self.db, conn => diesel::sql_query(&sql)
            .bind::<Text, _>(tenant.as_str())
            .bind::<UtcTime, _>(since)
            .load(conn)
            .await)?;
        rows.into_iter().map(|r| Ok((crate::types::parse_day(&r.day)?, r.spent))).collect()
    }

    async fn record_purchase(
        &self,
        purchase: &Purchase,
        entry: &LedgerEntry,
        event: &Event,
    ) -> anyhow::Result<i64> {
        let event = EventRow::from_domain(event)?;
        let (purchase, entry) = (purchase.clone(), entry.clone());
        let balance = transaction!(self.db, conn => {
            diesel::insert_into(purchases::table)
                .values((
                    purchases::id.eq(purchase.id.as_str()),
                    purchases::tenant_id.eq(purchase.tenant_id.as_str()),
                    purchases::credits.eq(purchase.credits),
                    purchases::provider.eq(&purchase.provider),
                    purchases::provider_reference.eq(&purchase.provider_reference),
                    purchases::created_at.eq(DbTime(purchase.created_at)),
                ))
                .execute(conn)
                .await?;
            let (balance, _) = append_ledger!(conn, &entry, credits: purchase.credits, held: 0_i64)?;
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok::<_, StoreError>(balance)
        })?;
        self.db.stored(WorkQueue::Outbox);
        Ok(balance)
    }

    async fn set_plan(&self, tenant: &TenantId, plan: Plan) -> anyhow::Result<bool> {
        let tenant = tenant.clone();
        let n = transaction!(self.db, conn => Ok(diesel::update(tenants::table.filter(tenants::id.eq(tenant.as_str())))
            .set(tenants::plan.eq(plan.as_str()))
            .execute(conn)
            .await?))?;
        Ok(n == 1)
    }
}
