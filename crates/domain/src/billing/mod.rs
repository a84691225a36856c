//! Credits: every change to a tenant's balance is an entry of its ledger.
//!
//! The balance is kept beside the tenant so a charge is one conditional statement. A chat first
//! *holds* an upper bound of its cost (refused with 402 before the model is called when the
//! balance cannot cover it), then settles: the actual cost becomes a ledger entry and the rest
//! of the hold returns. So the balance never goes negative, even with many concurrent chats on
//! several instances, and once no chat is in flight the ledger sums to the balance.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::events::{Event, EventPayload};
use crate::ids::{CreditHoldId, EventId, IdGenerator, LedgerEntryId, PurchaseId, TenantId};
use crate::pagination::Page;
use crate::ratelimit::{PlanTable, Quota};
use crate::tenancy::{Forbidden, Permission, Plan, Principal};
use crate::time::Clock;
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

mod ports;
pub use ports::{CreditRepository, PaymentOutcome, PaymentProvider};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockCreditRepository, MockPaymentProvider};

crate::string_enum! {
    /// Why the balance changed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum LedgerReason {
        /// Credits granted when the tenant was created at registration.
        WelcomeGrant => "welcome_grant",
        /// A chat's token usage.
        ChatUsage => "chat_usage",
        /// A completed purchase.
        Purchase => "purchase",
        /// The model calls that learned facts from a chat (`config.memory_extraction`).
        MemoryExtraction => "memory_extraction",
    }
}

/// One change of a tenant's credit balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Its identifier.
    pub id: LedgerEntryId,
    /// Whose balance changed.
    pub tenant_id: TenantId,
    /// The change: positive for grants and purchases, negative for usage.
    pub delta: i64,
    /// The settled balance right after this entry: the sum of all entries up to it (credits
    /// held by chats still in flight count as not yet spent).
    pub balance_after: i64,
    /// Why.
    pub reason: LedgerReason,
    /// What caused it (a message or purchase id), if anything.
    pub reference: Option<String>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// Credits set aside for a chat in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditHold {
    /// Its id.
    pub id: CreditHoldId,
    /// Whose credits.
    pub tenant_id: TenantId,
    /// How many.
    pub amount: i64,
    /// When it was taken.
    pub created_at: DateTime<Utc>,
}

/// Settling a hold: the charge, its ledger entry, and the low-balance warning to emit if the
/// charge takes the balance across the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// The hold being settled.
    pub hold: CreditHold,
    /// The ledger entry of the charge; the store fills in `balance_after`.
    pub entry: LedgerEntry,
    /// Balance below which `billing.credits.low` is emitted.
    pub low_threshold: i64,
    /// The id to give that event if it is emitted.
    pub low_event: EventId,
}

impl Settlement {
    /// The `billing.credits.low` event to store with this settlement, decided from the settled
    /// balance it left (`settled_after`, what the store's update of the tenant row returned):
    /// an event exactly when its charge took the balance from at or above the threshold to
    /// below it ([`crosses_low_threshold`]), carrying that balance and happening `at`.
    pub fn low_credit_event(&self, settled_after: i64, at: DateTime<Utc>) -> Option<Event> {
        let change = self.entry.balance_change(settled_after);
        crosses_low_threshold(change.before, change.after, self.low_threshold).then(|| Event {
            id: self.low_event.clone(),
            tenant_id: self.hold.tenant_id.clone(),
            payload: EventPayload::BillingCreditsLow { credits: change.after, threshold: self.low_threshold },
            created_at: at,
        })
    }
}

/// A tenant's settled balance just before and just after one ledger entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceChange {
    /// Before the entry.
    pub before: i64,
    /// After it.
    pub after: i64,
}

impl LedgerEntry {
    /// The change of the settled balance this entry made, given the balance after it: the
    /// entry's `delta` is exactly that change (a chat's returned hold moves credits from held
    /// back to available, which leaves the settled balance as it was).
    pub fn balance_change(&self, after: i64) -> BalanceChange {
        BalanceChange { before: after - self.delta, after }
    }
}

/// Whether moving from `before` to `after` crosses below `threshold`.
pub fn crosses_low_threshold(before: i64, after: i64, threshold: i64) -> bool {
    before >= threshold && after < threshold
}

/// A request to set credits aside for a chat: as many as `wanted`, but no fewer than `minimum`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRequest {
    /// The id the hold gets.
    pub id: CreditHoldId,
    /// Whose credits.
    pub tenant_id: TenantId,
    /// The most the chat can cost with the agent's full `max_tokens`.
    pub wanted: i64,
    /// The least the chat can cost (its prompt and one token of reply).
    pub minimum: i64,
    /// When it is taken.
    pub created_at: DateTime<Utc>,
}

/// A credit purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchase {
    /// Its id.
    pub id: PurchaseId,
    /// The buyer.
    pub tenant_id: TenantId,
    /// Credits bought.
    pub credits: i64,
    /// The payment provider that took the payment.
    pub provider: String,
    /// The provider's reference.
    pub provider_reference: String,
    /// When it completed.
    pub created_at: DateTime<Utc>,
}

/// The built-in provider for self-hosted deployments and tests: every purchase completes at
/// once, without money changing hands. Enabled only by configuration.
#[derive(Debug, Default, Clone, Copy)]
pub struct ManualPayments;

#[async_trait]
impl PaymentProvider for ManualPayments {
    fn name(&self) -> &'static str {
        "manual"
    }

    async fn charge(&self, _tenant: &TenantId, credits: i64) -> anyhow::Result<PaymentOutcome> {
        Ok(PaymentOutcome::Completed(format!("manual-{credits}")))
    }
}

/// What a tenant sees of its account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingOverview {
    /// Its plan.
    pub plan: Plan,
    /// Its available balance.
    pub credits: i64,
    /// Its rate limits.
    pub rate_limits: Quota,
}

/// The credits spent on one UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailySpending {
    /// The day.
    pub day: NaiveDate,
    /// The credits its charges took (the ledger's negative entries, as a positive number).
    pub credits: i64,
}

/// The days of [`BillingService::spending_per_day`]: today and those before it.
pub const SPENDING_DAYS: u32 = 30;

/// `days` consecutive days from `first`, each with the credits `rows` give it: every day is
/// there, with zero when nothing was spent; a row outside them is dropped.
pub fn daily(first: NaiveDate, days: u32, rows: &[(NaiveDate, i64)]) -> Vec<DailySpending> {
    let mut out: Vec<DailySpending> = first
        .iter_days()
        .take(usize::try_from(days).unwrap_or(usize::MAX))
        .map(|day| DailySpending { day, credits: 0 })
        .collect();
    for &(day, credits) in rows {
        let offset = (day - first).num_days();
        if let Some(slot) = usize::try_from(offset).ok().and_then(|i| out.get_mut(i)) {
            slot.credits += credits;
        }
    }
    out
}

/// Why a billing operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BillingError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No payment provider is configured.
    #[error("purchases are not enabled on this service")]
    PaymentsDisabled,
    /// The provider refused the payment.
    #[error("the payment was declined: {0}")]
    Declined(String),
    /// Storage or the provider failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Most credits one purchase may buy.
pub const MAX_PURCHASE_CREDITS: i64 = 1_000_000;

/// Balance, ledger and purchases.
#[derive(Clone)]
pub struct BillingService {
    credits: Arc<dyn CreditRepository>,
    payments: Option<Arc<dyn PaymentProvider>>,
    plans: PlanTable,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for BillingService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BillingService").field("plans", &self.plans).finish_non_exhaustive()
    }
}

impl BillingService {
    /// A service over `credits`; purchases need a payment provider.
    pub fn new(
        credits: Arc<dyn CreditRepository>,
        payments: Option<Arc<dyn PaymentProvider>>,
        plans: PlanTable,
        ids: Arc<dyn IdGenerator>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { credits, payments, plans, ids, clock }
    }

    /// Plan, balance and limits of the caller's tenant.
    ///
    /// # Errors
    /// [`BillingError::Forbidden`] without `billing:read`.
    pub async fn overview(&self, caller: &Principal) -> Result<BillingOverview, BillingError> {
        caller.require(Permission::BillingRead)?;
        let (credits, plan) = self
            .credits
            .account(&caller.tenant_id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("tenant {} has no account row", caller.tenant_id))?;
        Ok(BillingOverview { plan, credits, rate_limits: self.plans.quota(plan) })
    }

    /// A page of the ledger, newest first.
    ///
    /// # Errors
    /// [`BillingError::Forbidden`] without `billing:read`.
    pub async fn ledger(
        &self,
        caller: &Principal,
        page: Page,
    ) -> Result<(Vec<LedgerEntry>, u64), BillingError> {
        caller.require(Permission::BillingRead)?;
        Ok(self.credits.ledger(&caller.tenant_id, page).await?)
    }

    /// The credits spent per UTC day over the last [`SPENDING_DAYS`] days, today last (so far),
    /// every day present.
    ///
    /// # Errors
    /// [`BillingError::Forbidden`] without `billing:read`.
    pub async fn spending_per_day(&self, caller: &Principal) -> Result<Vec<DailySpending>, BillingError> {
        caller.require(Permission::BillingRead)?;
        let today = self.clock.now().date_naive();
        let first = today - chrono::Days::new(u64::from(SPENDING_DAYS) - 1);
        let rows = self
            .credits
            .spent_per_day(&caller.tenant_id, first.and_time(chrono::NaiveTime::MIN).and_utc())
            .await?;
        Ok(daily(first, SPENDING_DAYS, &rows))
    }

    /// Buys credits through the payment provider; on success they are on the balance, in the
    /// ledger and announced by `billing.purchase.completed`, together.
    ///
    /// # Errors
    /// [`BillingError::Forbidden`] without billing rights (owners only);
    /// [`BillingError::Invalid`] for an amount outside 1–1,000,000;
    /// [`BillingError::PaymentsDisabled`] without a provider; [`BillingError::Declined`].
    pub async fn purchase(&self, caller: &Principal, credits: i64) -> Result<(Purchase, i64), BillingError> {
        caller.require(Permission::BillingWrite)?;
        let credits = purchase_credits(credits).map_err(ValidationErrors::one)?;
        let provider = self.payments.as_ref().ok_or(BillingError::PaymentsDisabled)?;
        let reference = match provider.charge(&caller.tenant_id, credits).await? {
            PaymentOutcome::Completed(reference) => reference,
            PaymentOutcome::Declined(reason) => return Err(BillingError::Declined(reason)),
        };
        let now = self.clock.now();
        let purchase = Purchase {
            id: PurchaseId::generate(self.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            credits,
            provider: provider.name().to_owned(),
            provider_reference: reference,
            created_at: now,
        };
        let entry = LedgerEntry {
            id: LedgerEntryId::generate(self.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            delta: credits,
            balance_after: 0,
            reason: LedgerReason::Purchase,
            reference: Some(purchase.id.to_string()),
            created_at: now,
        };
        let event = Event::new(
            self.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::BillingPurchaseCompleted {
                purchase_id: purchase.id.clone(),
                credits,
                provider: purchase.provider.clone(),
            },
            now,
        );
        let balance = self.credits.record_purchase(&purchase, &entry, &event).await?;
        Ok((purchase, balance))
    }

    /// Returns holds older than `max_age` to their balances: a crash between hold and
    /// settlement must not lose credits.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn release_stale_holds(&self, max_age: Duration) -> anyhow::Result<u64> {
        self.credits.release_stale(self.clock.now() - max_age).await
    }
}

/// Validates the credits of a purchase: 1–1,000,000.
///
/// # Errors
/// A [`FieldError`] naming `credits`.
pub fn purchase_credits(raw: i64) -> Result<i64, FieldError> {
    if (1..=MAX_PURCHASE_CREDITS).contains(&raw) {
        Ok(raw)
    } else {
        Err(FieldError::new(
            "credits",
            FieldErrorKind::OutOfRange,
            format!("credits must be between 1 and {MAX_PURCHASE_CREDITS}"),
        ))
    }
}

/// What a chat of `total_tokens` costs: one credit per started thousand tokens, at least one.
pub fn chat_cost(total_tokens: u64) -> i64 {
    i64::try_from(total_tokens.div_ceil(1000)).unwrap_or(i64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::ids::{MockIdGenerator, UserId};
    use crate::tenancy::{Credential, Role};
    use crate::time::MockClock;

    #[test]
    fn chat_cost_is_per_started_thousand_tokens_and_at_least_one() {
        for (tokens, cost) in [(0, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (2500, 3)] {
            assert_eq!(chat_cost(tokens), cost, "{tokens}");
        }
    }

    #[test]
    fn the_low_threshold_is_crossed_only_going_down_through_it() {
        assert!(crosses_low_threshold(100, 99, 100));
        assert!(crosses_low_threshold(150, 0, 100));
        assert!(!crosses_low_threshold(99, 98, 100), "already below");
        assert!(!crosses_low_threshold(150, 100, 100), "at the threshold is not below");
        assert!(!crosses_low_threshold(50, 150, 100), "going up");
    }

    /// A settlement of a chat that costs `cost`, with a threshold of 100.
    fn charge(cost: i64) -> Settlement {
        let at = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        let tenant = TenantId::from_string("ten_1");
        Settlement {
            hold: CreditHold {
                id: CreditHoldId::from_string("hld_1"),
                tenant_id: tenant.clone(),
                amount: 50,
                created_at: at,
            },
            entry: LedgerEntry {
                id: LedgerEntryId::from_string("led_1"),
                tenant_id: tenant,
                delta: -cost,
                balance_after: 0,
                reason: LedgerReason::ChatUsage,
                reference: None,
                created_at: at,
            },
            low_threshold: 100,
            low_event: EventId::from_string("evt_low"),
        }
    }

    #[test]
    fn a_charge_that_takes_the_settled_balance_below_the_threshold_emits_one_low_credit_event() {
        let at = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
        // 105 - 10 = 95: crossed.
        let low = charge(10).low_credit_event(95, at).unwrap();
        assert_eq!((low.id.as_str(), low.tenant_id.as_str(), low.created_at), ("evt_low", "ten_1", at));
        assert_eq!(low.payload, EventPayload::BillingCreditsLow { credits: 95, threshold: 100 });
        // 100 - 1 = 99: from exactly the threshold.
        assert!(charge(1).low_credit_event(99, at).is_some());
        // 99 - 1 = 98: already below; 110 - 10 = 100: not below.
        assert!(charge(1).low_credit_event(98, at).is_none(), "already below");
        assert!(charge(10).low_credit_event(100, at).is_none(), "at the threshold is not below");
        assert!(charge(0).low_credit_event(99, at).is_none(), "a free settlement changes nothing");
    }

    #[test]
    fn a_ledger_entry_changes_the_settled_balance_by_its_delta() {
        assert_eq!(charge(7).entry.balance_change(93), BalanceChange { before: 100, after: 93 });
        let mut grant = charge(0).entry;
        grant.delta = 500;
        assert_eq!(grant.balance_change(500), BalanceChange { before: 0, after: 500 });
    }

    fn caller(role: Role) -> Principal {
        Principal {
            user_id: UserId::from_string("usr_1"),
            tenant_id: TenantId::from_string("ten_1"),
            plan: Plan::Starter,
            role,
            credential: Credential::AccessToken,
            chain: Default::default(),
        }
    }

    fn service(repo: MockCreditRepository, payments: Option<Arc<dyn PaymentProvider>>) -> BillingService {
        let mut ids = MockIdGenerator::new();
        ids.expect_generate().returning(|p| format!("{p}_1"));
        let mut clock = MockClock::new();
        clock.expect_now().returning(|| Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap());
        BillingService::new(Arc::new(repo), payments, PlanTable::One, Arc::new(ids), Arc::new(clock))
    }

    #[tokio::test]
    async fn a_purchase_records_credits_ledger_and_event_together() {
        let mut repo = MockCreditRepository::new();
        repo.expect_record_purchase()
            .withf(|p, e, ev| {
                p.credits == 500
                    && p.provider == "manual"
                    && e.delta == 500
                    && e.reason == LedgerReason::Purchase
                    && e.reference.as_deref() == Some("pur_1")
                    && matches!(ev.payload, EventPayload::BillingPurchaseCompleted { credits: 500, .. })
            })
            .times(1)
            .returning(|_, _, _| Ok(1500));
        let (purchase, balance) =
            service(repo, Some(Arc::new(ManualPayments))).purchase(&caller(Role::Owner), 500).await.unwrap();
        assert_eq!((purchase.credits, balance), (500, 1500));
    }

    #[tokio::test]
    async fn purchases_need_an_owner_a_sane_amount_and_a_provider() {
        let s = service(MockCreditRepository::new(), Some(Arc::new(ManualPayments)));
        assert!(matches!(s.purchase(&caller(Role::Admin), 5).await, Err(BillingError::Forbidden(_))));
        assert!(matches!(s.purchase(&caller(Role::Owner), 0).await, Err(BillingError::Invalid(_))));
        assert!(matches!(
            s.purchase(&caller(Role::Owner), MAX_PURCHASE_CREDITS + 1).await,
            Err(BillingError::Invalid(_))
        ));
        let s = service(MockCreditRepository::new(), None);
        assert!(matches!(s.purchase(&caller(Role::Owner), 5).await, Err(BillingError::PaymentsDisabled)));
    }

    #[tokio::test]
    async fn a_declined_payment_records_nothing() {
        let mut provider = MockPaymentProvider::new();
        provider.expect_name().return_const("card");
        provider.expect_charge().returning(|_, _| Ok(PaymentOutcome::Declined("insufficient funds".into())));
        let mut repo = MockCreditRepository::new();
        repo.expect_record_purchase().never();
        let s = service(repo, Some(Arc::new(provider)));
        assert!(matches!(s.purchase(&caller(Role::Owner), 5).await, Err(BillingError::Declined(_))));
    }

    #[test]
    fn every_day_of_the_window_is_there_with_what_it_spent() {
        let first = NaiveDate::from_ymd_opt(2026, 10, 31).unwrap();
        let day = |n: u64| first + chrono::Days::new(n);
        let rows = [(day(0), 5), (day(2), 7), (first - chrono::Days::new(1), 100), (day(3), 100)];
        let spent = daily(first, 3, &rows);
        assert_eq!(
            spent.iter().map(|d| (d.day, d.credits)).collect::<Vec<_>>(),
            [(day(0), 5), (day(1), 0), (day(2), 7)]
        );
    }

    #[tokio::test]
    async fn spending_covers_the_last_30_days_ending_today() {
        // The clock is at 2026-11-01 00:00: the window starts on 2026-10-03.
        let first = NaiveDate::from_ymd_opt(2026, 10, 3).unwrap();
        let mut repo = MockCreditRepository::new();
        repo.expect_spent_per_day()
            .withf(move |t, since| {
                t.as_str() == "ten_1" && *since == first.and_hms_opt(0, 0, 0).unwrap().and_utc()
            })
            .times(1)
            .returning(|_, _| Ok(vec![(NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(), 12)]));
        let spent = service(repo, None).spending_per_day(&caller(Role::Viewer)).await.unwrap();
        assert_eq!(spent.len(), 30);
        assert_eq!((spent[0].day, spent[0].credits), (first, 0));
        assert_eq!((spent[29].day, spent[29].credits), (NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(), 12));
    }

    #[tokio::test]
    async fn the_overview_reports_the_plan_limits() {
        let mut repo = MockCreditRepository::new();
        repo.expect_account().returning(|_| Ok(Some((42, Plan::Pro))));
        let o = service(repo, None).overview(&caller(Role::Viewer)).await.unwrap();
        assert_eq!(o.credits, 42);
        assert_eq!(o.rate_limits.per_minute, Some(600));
    }
}
