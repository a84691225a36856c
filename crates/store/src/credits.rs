//! [`CreditRepository`]: balances, holds, purchases and the ledger.

use agentry_domain::billing::{CreditHold, CreditRepository, LedgerEntry, LedgerReason, Purchase};
use agentry_domain::events::Event;
use agentry_domain::ids::{CreditHoldId, LedgerEntryId, TenantId};
use agentry_domain::pagination::Page;
use agentry_domain::tenancy::Plan;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::accounts::parse_stored;
use crate::database::{Database, StoreError};
use crate::events::EventRow;
use crate::schema::{credit_holds, credit_ledger, events, purchases, tenants};
use crate::types::DbTime;

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
    async fn hold(&self, hold: &CreditHold) -> anyhow::Result<Option<i64>> {
        let amount = hold.amount;
        let left = transaction!(self.db, conn => {
            // The hold row first, the tenant row last: the tenant row stays locked until the
            // commit and every chat of the tenant needs it.
            diesel::insert_into(credit_holds::table)
                .values((
                    credit_holds::id.eq(hold.id.as_str()),
                    credit_holds::tenant_id.eq(hold.tenant_id.as_str()),
                    credit_holds::amount.eq(amount),
                    credit_holds::created_at.eq(DbTime(hold.created_at)),
                ))
                .execute(conn)
                .await?;
            // The condition and the decrement are one statement: two chats can never both
            // take the last credits.
            let left: Option<i64> = diesel::update(
                tenants::table.filter(tenants::id.eq(hold.tenant_id.as_str())).filter(tenants::credits.ge(amount)),
            )
            .set((tenants::credits.eq(tenants::credits - amount), tenants::held.eq(tenants::held + amount)))
            .returning(tenants::credits)
            .get_result(conn)
            .await
            .optional()?;
            match left {
                Some(left) => Ok(left),
                // Not enough: roll the hold row back with everything else.
                None => Err(StoreError::Precondition("insufficient credits")),
            }
        });
        let left = match left {
            Ok(left) => Some(left),
            Err(StoreError::Precondition(_)) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(left)
    }

    async fn release(&self, hold: &CreditHoldId) -> anyhow::Result<()> {
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
        let (rows, total): (Vec<LedgerRow>, i64) = with_conn!(self.db, conn => {
            let rows = credit_ledger::table
                .filter(credit_ledger::tenant_id.eq(tenant.as_str()))
                .order((credit_ledger::seq.desc(), credit_ledger::id.desc()))
                .limit(page.limit())
                .offset(page.offset())
                .select(LedgerRow::as_select())
                .load(conn)
                .await?;
            let total =
                credit_ledger::table.filter(credit_ledger::tenant_id.eq(tenant.as_str())).count().get_result(conn).await?;
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
                    reason: LedgerReason::parse(&r.reason)
                        .ok_or_else(|| anyhow::anyhow!("stored ledger reason {:?} is invalid", r.reason))?,
                    reference: r.reference,
                    created_at: r.created_at.0,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok((entries, u64::try_from(total).unwrap_or(0)))
    }

    async fn record_purchase(
        &self,
        purchase: &Purchase,
        entry: &LedgerEntry,
        event: &Event,
    ) -> anyhow::Result<i64> {
        let event = EventRow::from_domain(event);
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
            // One statement, while it locks the tenant row, gives the new balance, what chats in
            // flight hold (the ledger runs on the settled balance) and this entry's number.
            let (balance, held, seq): (i64, i64, i64) =
                diesel::update(tenants::table.filter(tenants::id.eq(purchase.tenant_id.as_str())))
                    .set((
                        tenants::credits.eq(tenants::credits + purchase.credits),
                        tenants::ledger_seq.eq(tenants::ledger_seq + 1),
                    ))
                    .returning((tenants::credits, tenants::held, tenants::ledger_seq))
                    .get_result(conn)
                    .await?;
            let settled = balance + held;
            diesel::insert_into(credit_ledger::table)
                .values((
                    credit_ledger::id.eq(entry.id.as_str()),
                    credit_ledger::tenant_id.eq(entry.tenant_id.as_str()),
                    credit_ledger::delta.eq(entry.delta),
                    credit_ledger::balance_after.eq(settled),
                    credit_ledger::reason.eq(entry.reason.as_str()),
                    credit_ledger::created_at.eq(DbTime(entry.created_at)),
                    credit_ledger::reference.eq(entry.reference.as_deref()),
                    credit_ledger::seq.eq(seq),
                ))
                .execute(conn)
                .await?;
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok::<_, StoreError>(balance)
        })?;
        Ok(balance)
    }

    async fn set_plan(&self, tenant: &TenantId, plan: Plan) -> anyhow::Result<bool> {
        let n = with_conn!(self.db, conn => diesel::update(tenants::table.filter(tenants::id.eq(tenant.as_str())))
            .set(tenants::plan.eq(plan.as_str()))
            .execute(conn)
            .await)?;
        Ok(n == 1)
    }
}
