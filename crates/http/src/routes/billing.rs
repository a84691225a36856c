//! `/billing`: plan, balance, ledger and purchases.

use actix_web::web;
use agentry_domain::billing::{BillingOverview, LedgerEntry, purchase_credits};
use agentry_domain::validation::{ValidationErrors, Validator};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt, QueryParams};
use crate::reply::{Reply, timestamp};
use crate::routes::agents::PageQuery;

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/billing").route(web::get().to(overview)))
        .service(web::resource("/billing/ledger").route(web::get().to(ledger)))
        .service(web::resource("/billing/purchases").route(web::post().to(purchase)));
}

/// Rate limits of the plan; null is unlimited.
#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimitsResponse {
    /// Requests per minute.
    pub per_minute: Option<u64>,
    /// Requests per day.
    pub per_day: Option<u64>,
}

/// The tenant's account.
#[derive(Debug, Serialize, ToSchema)]
pub struct BillingResponse {
    /// `starter`, `pro` or `enterprise`.
    pub plan: &'static str,
    /// Available credits.
    pub credits: i64,
    /// The plan's limits.
    pub rate_limits: RateLimitsResponse,
}

impl From<BillingOverview> for BillingResponse {
    fn from(o: BillingOverview) -> Self {
        Self {
            plan: o.plan.as_str(),
            credits: o.credits,
            rate_limits: RateLimitsResponse {
                per_minute: o.rate_limits.per_minute,
                per_day: o.rate_limits.per_day,
            },
        }
    }
}

/// Plan, credits and limits of the tenant.
#[utoipa::path(
    get, path = "/api/v1/billing", tag = "billing", operation_id = "getBilling", security(("bearer" = [])),
    responses((status = 200, description = "Plan, credits and limits", body = BillingResponse))
)]
pub async fn overview(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<Reply<BillingResponse>, ApiError> {
    Ok(Reply::ok(state.billing.overview(&caller).await?.into()))
}

/// One ledger entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerEntryResponse {
    /// Entry id.
    pub id: String,
    /// The change.
    pub delta: i64,
    /// The available balance right after it.
    pub balance_after: i64,
    /// `welcome_grant`, `chat_usage`, `purchase` or `memory_extraction`.
    pub reason: &'static str,
    /// The message or purchase that caused it.
    pub reference: Option<String>,
    /// When.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<LedgerEntry> for LedgerEntryResponse {
    fn from(e: LedgerEntry) -> Self {
        Self {
            id: e.id.into_string(),
            delta: e.delta,
            balance_after: e.balance_after,
            reason: e.reason.as_str(),
            reference: e.reference,
            created_at: e.created_at,
        }
    }
}

/// A page of the ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerResponse {
    /// Newest first.
    pub entries: Vec<LedgerEntryResponse>,
    /// Entries in all.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// The credit ledger, newest first.
#[utoipa::path(
    get, path = "/api/v1/billing/ledger", tag = "billing", operation_id = "listLedger",
    security(("bearer" = [])), params(PageQuery),
    responses((status = 200, description = "A page of the ledger", body = LedgerResponse))
)]
pub async fn ledger(
    state: web::Data<AppState>,
    caller: Caller,
    query: QueryParams<PageQuery>,
) -> Result<Reply<LedgerResponse>, ApiError> {
    let page = query.0.try_into_domain()?;
    let (entries, total) = state.billing.ledger(&caller, page).await?;
    Ok(Reply::ok(LedgerResponse {
        entries: entries.into_iter().map(LedgerEntryResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}

/// A purchase request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseRequest {
    /// Credits to buy, 1–1,000,000.
    #[schema(required = true, value_type = i64, minimum = 1, maximum = 1_000_000, example = 5000)]
    pub credits: Option<JsonInt>,
}

impl PurchaseRequest {
    fn try_into_domain(self) -> Result<i64, ValidationErrors> {
        let mut v = Validator::new();
        let credits = v.required("credits", self.credits, |c| purchase_credits(c.0));
        v.finish(credits)
    }
}

/// A completed purchase.
#[derive(Debug, Serialize, ToSchema)]
pub struct PurchaseResponse {
    /// Purchase id.
    pub id: String,
    /// Credits bought.
    pub credits: i64,
    /// Always `completed` (a declined payment is an error).
    pub status: &'static str,
    /// The payment provider.
    pub provider: String,
    /// The balance after the purchase.
    pub balance: i64,
    /// When.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

/// Buy credits (owners only).
#[utoipa::path(
    post, path = "/api/v1/billing/purchases", tag = "billing", operation_id = "purchaseCredits",
    security(("bearer" = [])),
    request_body = PurchaseRequest,
    responses(
        (status = 201, description = "The completed purchase", body = PurchaseResponse),
        (status = 402, description = "`payment_declined`: the payment provider refused the payment"),
        (status = 403, description = "`forbidden`: only owners change billing; API keys never do"),
        (status = 503, description = "`unavailable`: no payment provider is enabled on this service"),
    )
)]
pub async fn purchase(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<PurchaseRequest>,
) -> Result<Reply<PurchaseResponse>, ApiError> {
    let credits = body.0.try_into_domain()?;
    let (purchase, balance) = state.billing.purchase(&caller, credits).await?;
    Ok(Reply::created(PurchaseResponse {
        id: purchase.id.into_string(),
        credits: purchase.credits,
        status: "completed",
        provider: purchase.provider,
        balance,
        created_at: purchase.created_at,
    }))
}
