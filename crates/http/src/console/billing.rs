//! Billing in the console: the plan and its rate limits, the credit balance, a chart of the
//! credits spent per day over 30 days, and the ledger, a page at a time.

use actix_web::{HttpRequest, HttpResponse, web};
use minijinja::{Value, context};
use serde::Deserialize;

use super::Console;
use super::charts::{self, Series};
use super::render::page;
use crate::AppState;
use crate::error::ApiError;
use crate::routes::agents::PageQuery;
use crate::routes::billing::{BillingResponse, LedgerEntryResponse};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/billing", web::get().to(show));
}

/// Ledger entries per page.
const PER_PAGE: i64 = 25;

#[derive(Debug, Default, Deserialize)]
struct BillingQuery {
    page: Option<i64>,
}

async fn show(state: web::Data<AppState>, c: Console, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let account = BillingResponse::from(state.billing.overview(&c).await?);
    let query: BillingQuery = serde_urlencoded::from_str(req.query_string()).unwrap_or_default();
    let page_of = PageQuery { page: query.page, per_page: Some(PER_PAGE) }.try_into_domain()?;
    let (entries, total) = state.billing.ledger(&c, page_of).await?;
    let entries: Vec<LedgerEntryResponse> = entries.into_iter().map(Into::into).collect();
    let pages = total.div_ceil(u64::from(page_of.per_page)).max(1);
    let days = state.billing.spending_per_day(&c).await?;
    let labels: Vec<String> = days.iter().map(|d| d.day.format("%b %-d").to_string()).collect();
    let series = [Series {
        label: "credits spent".into(),
        color: "#2457c5",
        values: days.iter().map(|d| u64::try_from(d.credits).unwrap_or(0)).collect(),
    }];
    let chart =
        charts::stacked_bars("Credits spent per day over the last 30 days (UTC)", &labels, &series, 5);
    let spent: i64 = days.iter().map(|d| d.credits).sum();
    page(
        &c,
        "billing",
        "Billing",
        "billing.html",
        context! {
            account => Value::from_serialize(&account),
            entries, total, pages, spent,
            page => page_of.page,
            chart => Value::from_safe_string(chart),
        },
    )
}
