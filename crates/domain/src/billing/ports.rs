//! What billing needs from outside: storage of credits, holds, purchases and the ledger, and a
//! payment provider.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::{CreditHold, HoldRequest, LedgerEntry, Purchase};
use crate::events::Event;
use crate::ids::{CreditHoldId, TenantId};
use crate::pagination::Page;
use crate::tenancy::Plan;

/// Credits, holds, purchases and the ledger.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait CreditRepository: Send + Sync {
    /// Takes `min(wanted, balance)` credits from the balance and records the hold, atomically,
    /// if that is at least `minimum`; returns the hold, or `None` (and changes nothing) when the
    /// balance is below `minimum`. MUST never let the balance go below zero under concurrency.
    async fn hold(&self, request: &HoldRequest) -> anyhow::Result<Option<CreditHold>>;

    /// Grows a hold by `min(wanted, balance)` credits taken from the balance, atomically, if
    /// that is at least `minimum` (a chat that calls tools holds for each further model call),
    /// and marks it taken `at`, so that the stale-hold sweeper leaves a chat that is still
    /// working alone (`wanted` 0 only does that); returns the credits added, or `None`
    /// (changing nothing) when the balance is below `minimum` or the hold no longer exists.
    /// MUST never let the balance go below zero.
    async fn extend_hold(
        &self,
        hold: &CreditHold,
        wanted: i64,
        minimum: i64,
        at: DateTime<Utc>,
    ) -> anyhow::Result<Option<i64>>;

    /// Returns a hold's credits to the balance (the chat failed). Idempotent.
    async fn release(&self, hold: &CreditHoldId) -> anyhow::Result<()>;

    /// Releases holds taken before `before` (left by a crash); returns how many.
    async fn release_stale(&self, before: DateTime<Utc>) -> anyhow::Result<u64>;

    /// The available balance and plan of a tenant.
    async fn account(&self, tenant: &TenantId) -> anyhow::Result<Option<(i64, Plan)>>;

    /// A page of the ledger, newest first, and the total number of entries.
    async fn ledger(&self, tenant: &TenantId, page: Page) -> anyhow::Result<(Vec<LedgerEntry>, u64)>;

    /// The credits the tenant's charges (its negative ledger entries) took per UTC day since
    /// `since` (a day's start), in any order; a day without charges has no row. Summed by the
    /// database: a tenant's chats make a ledger entry each, thousands a day, and the answer
    /// stays one row a day.
    async fn spent_per_day(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(NaiveDate, i64)>>;

    /// Adds a completed purchase: its credits, its ledger entry and its event, atomically;
    /// returns the new balance.
    async fn record_purchase(
        &self,
        purchase: &Purchase,
        entry: &LedgerEntry,
        event: &Event,
    ) -> anyhow::Result<i64>;

    /// Changes a tenant's plan (an operator action).
    async fn set_plan(&self, tenant: &TenantId, plan: Plan) -> anyhow::Result<bool>;
}

/// The outcome of a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentOutcome {
    /// Paid; the provider's reference.
    Completed(String),
    /// Refused, with the provider's reason.
    Declined(String),
}

/// Takes payments for credits.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait PaymentProvider: Send + Sync {
    /// The provider's name (`manual`).
    fn name(&self) -> &'static str;

    /// Charges the tenant for `credits`.
    async fn charge(&self, tenant: &TenantId, credits: i64) -> anyhow::Result<PaymentOutcome>;
}
