//! The event outbox: rows written inside other repositories' transactions, read by [`EventLog`].

use agentry_domain::events::{Event, EventLog, EventPayload};
use agentry_domain::ids::{EventId, TenantId};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::Database;
use crate::schema::events;
use crate::types::{DbJson, DbJsonAs, DbTime};

/// An event as stored: its type beside its data, so the outbox can be queried by type.
#[derive(Clone, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = events, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct EventRow {
    pub(crate) id: String,
    pub(crate) tenant_id: String,
    pub(crate) event_type: String,
    pub(crate) data: DbJson,
    pub(crate) created_at: DbTime,
}

impl EventRow {
    /// The row of `e`.
    ///
    /// # Errors
    /// Only if its payload does not serialise, which the typed payloads always do.
    pub(crate) fn from_domain(e: &Event) -> anyhow::Result<Self> {
        Ok(Self {
            id: e.id.to_string(),
            tenant_id: e.tenant_id.to_string(),
            event_type: e.event_type().as_str().to_owned(),
            data: DbJsonAs(e.payload.data()?),
            created_at: e.created_at.into(),
        })
    }

    /// The rows of `events`.
    ///
    /// # Errors
    /// As [`EventRow::from_domain`].
    pub(crate) fn all(events: &[Event]) -> anyhow::Result<Vec<Self>> {
        events.iter().map(Self::from_domain).collect()
    }

    pub(crate) fn into_domain(self) -> anyhow::Result<Event> {
        Ok(Event {
            id: EventId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            payload: EventPayload::from_stored(&self.event_type, self.data.0)?,
            created_at: self.created_at.0,
        })
    }
}

/// Reads the outbox.
#[derive(Debug, Clone)]
pub struct EventStore {
    db: Database,
}

impl EventStore {
    /// A reader over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[async_trait]
impl EventLog for EventStore {
    async fn recent(&self, tenant: &TenantId, limit: u32) -> anyhow::Result<Vec<Event>> {
        let rows: Vec<EventRow> = with_conn!(self.db, conn => events::table
            .filter(events::tenant_id.eq(tenant.as_str()))
            .order(events::id.desc())
            .limit(i64::from(limit))
            .select(EventRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(EventRow::into_domain).collect()
    }
}
