//! The rows of subscriptions, deliveries and attempts as both databases store them, and their
//! conversions to and from the domain's values.

use super::*;

pub(super) const PENDING: &str = "pending";
pub(super) const ACTIVE: &str = "active";

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = webhook_subscriptions, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
#[diesel(treat_none_as_null = true)]
pub(super) struct SubscriptionRow {
    pub(super) id: String,
    pub(super) tenant_id: String,
    pub(super) url: String,
    pub(super) events: DbJsonAs<Vec<String>>,
    pub(super) description: Option<String>,
    pub(super) metadata: DbJsonAs<Map<String, Value>>,
    pub(super) status: String,
    pub(super) secret_sealed: String,
    pub(super) previous_secret_sealed: Option<String>,
    pub(super) previous_secret_until: Option<DbTime>,
    pub(super) created_at: DbTime,
    pub(super) updated_at: DbTime,
    pub(super) created_by: Option<String>,
}

impl SubscriptionRow {
    pub(super) fn from_domain(s: &Subscription) -> Self {
        let d = s.details();
        Self {
            id: s.id().to_string(),
            tenant_id: s.tenant_id().to_string(),
            url: d.url.clone(),
            events: DbJsonAs(d.events.names()),
            description: d.description.clone(),
            metadata: DbJsonAs(d.metadata.clone()),
            status: s.status().as_str().to_owned(),
            secret_sealed: s.secret().0.clone(),
            previous_secret_sealed: s.previous_secret().map(|p| p.secret.0.clone()),
            previous_secret_until: s.previous_secret().map(|p| DbTime(p.until)),
            created_at: DbTime(s.created_at()),
            updated_at: DbTime(s.updated_at()),
            created_by: s.created_by().map(ToString::to_string),
        }
    }

    pub(super) fn into_domain(self) -> anyhow::Result<Subscription> {
        Ok(Subscription::restore(StoredSubscription {
            id: WebhookId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            url: self.url,
            events: self.events.0,
            description: self.description,
            metadata: self.metadata.0,
            status: self.status,
            secret: SealedSecret(self.secret_sealed),
            previous_secret: self.previous_secret_sealed.map(SealedSecret),
            previous_secret_until: self.previous_secret_until.map(|t| t.0),
            created_at: self.created_at.0,
            updated_at: self.updated_at.0,
            created_by: self.created_by.map(UserId::from_string),
        })?)
    }
}

/// A subscription as the fan-out reads it: tenant, id, events, status, creation, maker, and the
/// maker's role now (`None` when they are no longer a member).
pub(super) type TargetRow =
    (String, String, DbJsonAs<Vec<String>>, String, DbTime, Option<String>, Option<String>);

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_deliveries, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct DeliveryRow {
    pub(super) id: String,
    pub(super) tenant_id: String,
    pub(super) subscription_id: String,
    pub(super) event_id: String,
    pub(super) event_type: String,
    pub(super) is_test: bool,
    pub(super) status: String,
    pub(super) attempts: i64,
    pub(super) next_attempt_at: Option<DbTime>,
    pub(super) response_status: Option<i64>,
    pub(super) response_time_ms: Option<i64>,
    pub(super) error: Option<String>,
    pub(super) delivered_at: Option<DbTime>,
    pub(super) created_at: DbTime,
    pub(super) earlier_attempts: i64,
}

impl DeliveryRow {
    pub(super) fn into_domain(self) -> anyhow::Result<Delivery> {
        Ok(Delivery::restore(StoredDelivery {
            id: DeliveryId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            subscription_id: WebhookId::from_string(self.subscription_id),
            event_id: EventId::from_string(self.event_id),
            event_type: self.event_type,
            status: self.status,
            // Every attempt in the log: those before it was last queued again, and since.
            attempts: u32::try_from(self.earlier_attempts.saturating_add(self.attempts)).unwrap_or(0),
            next_attempt_at: self.next_attempt_at.map(|t| t.0),
            response_status: self.response_status.and_then(|s| u16::try_from(s).ok()),
            response_time_ms: self.response_time_ms.and_then(|ms| u64::try_from(ms).ok()),
            error: self.error,
            delivered_at: self.delivered_at.map(|t| t.0),
            test: self.is_test,
            created_at: self.created_at.0,
        })?)
    }
}

#[derive(Insertable)]
#[diesel(table_name = webhook_deliveries, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct NewDeliveryRow {
    pub(super) id: String,
    pub(super) tenant_id: String,
    pub(super) subscription_id: String,
    pub(super) event_id: String,
    pub(super) event_type: String,
    pub(super) payload: String,
    pub(super) is_test: bool,
    pub(super) status: &'static str,
    pub(super) attempts: i64,
    pub(super) next_attempt_at: Option<DbTime>,
    pub(super) lease_token: Option<String>,
    pub(super) lease_until: Option<DbTime>,
    pub(super) lease_owner: Option<String>,
    pub(super) created_at: DbTime,
    pub(super) updated_at: DbTime,
}

impl NewDeliveryRow {
    pub(super) fn new(d: &NewDelivery, lease: Option<&Lease>) -> Self {
        Self {
            id: d.id.to_string(),
            tenant_id: d.tenant_id.to_string(),
            subscription_id: d.subscription_id.to_string(),
            event_id: d.event_id.to_string(),
            event_type: d.event_type.clone(),
            payload: d.payload.clone(),
            is_test: d.test,
            status: if d.skipped { DeliveryStatus::Skipped.as_str() } else { PENDING },
            attempts: i64::from(lease.is_some()),
            next_attempt_at: (!d.skipped).then_some(DbTime(d.due_at)),
            lease_token: lease.map(|l| l.token.clone()),
            lease_until: lease.map(|l| DbTime(l.until)),
            lease_owner: None,
            created_at: DbTime(d.created_at),
            updated_at: DbTime(d.created_at),
        }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = webhook_attempts, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(super) struct AttemptRow {
    pub(super) delivery_id: String,
    pub(super) attempt: i64,
    pub(super) tenant_id: String,
    pub(super) started_at: DbTime,
    pub(super) succeeded: bool,
    pub(super) response_status: Option<i64>,
    pub(super) response_time_ms: i64,
    pub(super) error_kind: Option<String>,
    pub(super) error: Option<String>,
    pub(super) response_body: Option<String>,
}

impl AttemptRow {
    pub(super) fn into_domain(self) -> Attempt {
        Attempt {
            number: u32::try_from(self.attempt).unwrap_or(0),
            started_at: self.started_at.0,
            response_status: self.response_status.and_then(|s| u16::try_from(s).ok()),
            response_time_ms: u64::try_from(self.response_time_ms).unwrap_or(0),
            succeeded: self.succeeded,
            error_kind: self.error_kind.as_deref().and_then(AttemptErrorKind::parse),
            error: self.error,
            response_body: self.response_body,
        }
    }
}

/// Inside a transaction (`$conn` a connection of either backend): the claimed rows with
/// their subscriptions (each read once), as [`ClaimedDelivery`]s held under `$lease`; a row
/// whose subscription cannot be read is failed in place at `$now`, with the reason.
/// Evaluates to `Result<Vec<ClaimedDelivery>, StoreError>`.
macro_rules! pair_with_subscriptions {
    ($conn:expr, $rows:expr, $lease:expr, $now:expr) => {{
        let rows: Vec<ClaimedRow> = $rows;
        let lease: &Lease = &$lease;
        // Each subscription read once; one that cannot be read (or is gone) is its error.
        let mut subscriptions: std::collections::HashMap<String, Result<Subscription, String>> =
            std::collections::HashMap::new();
        let mut claimed = Vec::with_capacity(rows.len());
        let mut failed = None;
        for r in rows {
            if !subscriptions.contains_key(&r.subscription_id) {
                let row: Result<Option<SubscriptionRow>, diesel::result::Error> = webhook_subscriptions::table
                    .filter(webhook_subscriptions::id.eq(r.subscription_id.as_str()))
                    .select(SubscriptionRow::as_select())
                    .first($conn)
                    .await
                    .optional();
                let subscription = match row {
                    Ok(Some(row)) => row.into_domain().map_err(|e| format!("its subscription cannot be read: {e:#}")),
                    Ok(None) => Err("its subscription is gone".to_owned()),
                    Err(e) => {
                        failed = Some(StoreError::from(e));
                        break;
                    }
                };
                subscriptions.insert(r.subscription_id.clone(), subscription);
            }
            match subscriptions.get(&r.subscription_id) {
                Some(Ok(subscription)) => claimed.push($crate::leases::claimed(
                    DueDelivery {
                        id: DeliveryId::from_string(r.id),
                        event_id: EventId::from_string(r.event_id),
                        payload: r.payload,
                        test: r.is_test,
                        earlier_attempts: u32::try_from(r.earlier_attempts).unwrap_or(0),
                        subscription: subscription.clone(),
                    },
                    r.claims,
                    lease,
                )),
                Some(Err(error)) => {
                    // It can never be sent: failed at once, in this claim, so it neither blocks
                    // the queue nor comes back.
                    tracing::error!(delivery = %r.id, %error, "failing a delivery that cannot be sent");
                    let changed = diesel::update(webhook_deliveries::table.filter(webhook_deliveries::id.eq(r.id.as_str())))
                        .set((
                            webhook_deliveries::status.eq(DeliveryStatus::Failed.as_str()),
                            webhook_deliveries::next_attempt_at.eq(None::<DbTime>),
                            webhook_deliveries::lease_token.eq(None::<String>),
                            webhook_deliveries::lease_until.eq(None::<DbTime>),
                            webhook_deliveries::error.eq(Some(error.clone())),
                            webhook_deliveries::updated_at.eq($now),
                        ))
                        .execute($conn)
                        .await;
                    if let Err(e) = changed {
                        failed = Some(StoreError::from(e));
                        break;
                    }
                }
                None => {}
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(claimed),
        }
    }};
}
