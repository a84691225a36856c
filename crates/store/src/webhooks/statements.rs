//! The raw statements of webhook deliveries: the two lease queues they are claimed from (due
//! deliveries, one for a manual attempt; both through the one claim statement of
//! [`crate::leases`]) and the read of undispatched events.

use super::*;
use crate::leases::{QueueTable, param};
use agentry_domain::tenancy::AutomationKind;

/// A delivery as a claim returns it.
#[derive(QueryableByName)]
pub(super) struct ClaimedRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) subscription_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) payload: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(super) claims: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) is_test: bool,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(super) earlier_attempts: i64,
}

const CLAIMED_COLUMNS: &str =
    "id, subscription_id, event_id, payload, attempts AS claims, is_test, earlier_attempts";

/// Deliveries as a lease queue: pending ones whose next attempt is due, of `active`
/// subscriptions whose maker may still keep them (the tenant's own, or made by a member whose
/// role now allows `webhooks:write`: a subscription follows its maker's membership); each
/// claim counts an attempt.
pub(super) fn due_deliveries(backend: Backend) -> QueueTable {
    let entitled: Vec<String> = Role::ALL
        .iter()
        .filter(|role| AutomationKind::WebhookSubscription.acts_for(Some(**role)))
        .map(|role| format!("'{}'", role.as_str()))
        .collect();
    QueueTable {
        table: "webhook_deliveries",
        due: format!(
            "status = '{PENDING}' AND next_attempt_at <= {now} \
             AND subscription_id IN (SELECT s.id FROM webhook_subscriptions s WHERE s.status = '{ACTIVE}' \
             AND (s.created_by IS NULL OR s.created_by IN (SELECT m.user_id FROM memberships m \
             WHERE m.tenant_id = s.tenant_id AND m.role IN ({entitled}))))",
            now = param(backend, 3),
            entitled = entitled.join(", "),
        ),
        order_by: "next_attempt_at",
        counter: "attempts",
        also_set: String::new(),
        returning: CLAIMED_COLUMNS,
        share: None,
    }
}

/// One delivery of a tenant's subscription (parameters 7, 8 and 9), for a manual attempt now:
/// any status, unless held.
pub(super) fn one_delivery(backend: Backend) -> QueueTable {
    let p = |n: u8| param(backend, n);
    QueueTable {
        table: "webhook_deliveries",
        due: format!("id = {} AND tenant_id = {} AND subscription_id = {}", p(7), p(8), p(9)),
        order_by: "id",
        counter: "attempts",
        also_set: format!("status = '{PENDING}', next_attempt_at = {}", p(3)),
        returning: CLAIMED_COLUMNS,
        share: None,
    }
}

/// A count of [`per_hour_sql`].
#[derive(QueryableByName)]
pub(super) struct HourRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) hour: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(super) status: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(super) n: i64,
}

/// A tenant's subscription's deliveries (parameters 1 and 2) created since parameter 3, counted
/// per UTC hour of creation and status: a range of the (subscription, created_at) index, grouped
/// by the database, so the answer is a few rows an hour however many deliveries there were.
pub(super) fn per_hour_sql(backend: Backend) -> String {
    let p = |n: u8| param(backend, n);
    format!(
        "SELECT {hour} AS hour, status, COUNT(*) AS n FROM webhook_deliveries \
         WHERE tenant_id = {} AND subscription_id = {} AND created_at >= {} GROUP BY 1, 2",
        p(1),
        p(2),
        p(3),
        hour = crate::types::bucket_sql(backend, "created_at", crate::types::Bucket::Hour),
    )
}
