//! The event outbox: rows written inside other repositories' transactions, read by [`EventLog`].

use agentry_domain::events::{Event, EventLog, EventType};
use agentry_domain::ids::{EventId, TenantId};
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::Database;
use crate::schema::events;
use crate::types::{DbJson, DbTime};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = events, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub(crate) struct EventRow {
    id: String,
    tenant_id: String,
    event_type: String,
    data: DbJson,
    created_at: DbTime,
}

impl EventRow {
    pub(crate) fn from_domain(e: &Event) -> Self {
        Self {
            id: e.id.to_string(),
            tenant_id: e.tenant_id.to_string(),
            event_type: e.event_type.as_str().to_owned(),
            data: DbJson(e.data.clone()),
            created_at: e.created_at.into(),
        }
    }

    fn into_domain(self) -> anyhow::Result<Event> {
        Ok(Event {
            id: EventId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            event_type: EventType::parse(&self.event_type)
                .ok_or_else(|| anyhow::anyhow!("stored event type {:?} is unknown", self.event_type))?,
            data: self.data.0,
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
