//! The raw statements of webhook deliveries: the claims (due deliveries, one for a manual
//! attempt) and the read of undispatched events, numbered for either backend's placeholders.

use super::*;

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
    pub(super) attempts: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) is_test: bool,
}

const CLAIMED_COLUMNS: &str = "id, subscription_id, event_id, payload, attempts, is_test";

/// The claim of due deliveries. Placeholders are numbered so both backends read them (`$n` on
/// PostgreSQL, `?n` on SQLite); `lock` is PostgreSQL's row locking. The due rows are chosen
/// once, in a materialised CTE: as a subquery of the `UPDATE`, PostgreSQL may run the choice
/// again for each row and, seeing the rows it has just leased as taken, choose more than the
/// limit. The outer `WHERE` repeats the condition, so a row another worker claimed between the
/// two is skipped.
pub(super) fn claim_due_sql(placeholder: char, lock: &str) -> String {
    let p = |n: u8| format!("{placeholder}{n}");
    let free = crate::leases::free_sql(&p(3), &p(6));
    format!(
        "WITH chosen AS MATERIALIZED (SELECT id FROM webhook_deliveries WHERE status = '{PENDING}' \
           AND next_attempt_at <= {now} AND {free} \
           AND subscription_id IN (SELECT id FROM webhook_subscriptions WHERE status = '{ACTIVE}') \
           ORDER BY next_attempt_at LIMIT {limit} {lock}) \
         UPDATE webhook_deliveries SET lease_token = {token}, lease_until = {until}, \
         lease_owner = {owner}, attempts = attempts + 1, updated_at = {now} \
         WHERE id IN (SELECT id FROM chosen) AND status = '{PENDING}' AND {free} \
         RETURNING {CLAIMED_COLUMNS}",
        token = p(1),
        until = p(2),
        now = p(3),
        limit = p(4),
        owner = p(5),
    )
}

/// The claim of one delivery for a manual attempt: any status, unless held.
pub(super) fn claim_one_sql(placeholder: char) -> String {
    let p = |n: u8| format!("{placeholder}{n}");
    format!(
        "UPDATE webhook_deliveries SET lease_token = {token}, lease_until = {until}, lease_owner = {owner}, \
         attempts = attempts + 1, updated_at = {now}, status = '{PENDING}', next_attempt_at = {now} \
         WHERE id = {id} AND tenant_id = {tenant} AND subscription_id = {sub} \
         AND {free} \
         RETURNING {CLAIMED_COLUMNS}",
        token = p(1),
        until = p(2),
        now = p(3),
        id = p(4),
        tenant = p(5),
        sub = p(6),
        owner = p(7),
        free = crate::leases::free_sql(&p(3), &p(8)),
    )
}

/// Undispatched outbox events, oldest first (a plain `SELECT … FOR UPDATE`: chosen once).
pub(super) fn pending_events_sql(placeholder: char, lock: &str) -> String {
    format!(
        "SELECT id, tenant_id, event_type, data, created_at FROM events \
         WHERE dispatched_at IS NULL ORDER BY id LIMIT {placeholder}1 {lock}"
    )
}
