//! [`ConversationRepository`]: chat sessions and messages, and the one transaction that stores
//! a finished exchange together with its charge and events.

use agentry_domain::agents::{ChatRole, ConversationRepository, Exchange, Message};
use agentry_domain::billing::{credits_low_data, crosses_low_threshold};
use agentry_domain::events::{Event, EventType};
use agentry_domain::ids::{AgentId, MessageId, SessionId, TenantId};
use agentry_domain::pagination::Page;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::events::EventRow;
use crate::schema::{chat_messages, chat_sessions, credit_holds, credit_ledger, events, tenants};
use crate::types::DbTime;

/// Conversations in the database.
#[derive(Debug, Clone)]
pub struct ConversationStore {
    db: Database,
}

impl ConversationStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = chat_messages, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct MessageRow {
    id: String,
    tenant_id: String,
    agent_id: String,
    session_id: String,
    role: String,
    content: String,
    prompt_tokens: i64,
    completion_tokens: i64,
    created_at: DbTime,
}

impl MessageRow {
    fn from_domain(m: &Message) -> Self {
        Self {
            id: m.id.to_string(),
            tenant_id: m.tenant_id.to_string(),
            agent_id: m.agent_id.to_string(),
            session_id: m.session_id.to_string(),
            role: m.role.as_str().to_owned(),
            content: m.content.clone(),
            prompt_tokens: i64::try_from(m.prompt_tokens).unwrap_or(i64::MAX),
            completion_tokens: i64::try_from(m.completion_tokens).unwrap_or(i64::MAX),
            created_at: m.created_at.into(),
        }
    }

    fn into_domain(self) -> anyhow::Result<Message> {
        Ok(Message {
            id: MessageId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            agent_id: AgentId::from_string(self.agent_id),
            session_id: SessionId::from_string(self.session_id),
            role: ChatRole::parse(&self.role)
                .ok_or_else(|| anyhow::anyhow!("stored role {:?} is invalid", self.role))?,
            content: self.content,
            prompt_tokens: u64::try_from(self.prompt_tokens).unwrap_or(0),
            completion_tokens: u64::try_from(self.completion_tokens).unwrap_or(0),
            created_at: self.created_at.0,
        })
    }
}

#[async_trait]
impl ConversationRepository for ConversationStore {
    async fn session_agent(&self, tenant: &TenantId, session: &SessionId) -> anyhow::Result<Option<AgentId>> {
        let agent: Option<String> = with_conn!(self.db, conn => chat_sessions::table
            .filter(chat_sessions::tenant_id.eq(tenant.as_str()))
            .filter(chat_sessions::id.eq(session.as_str()))
            .select(chat_sessions::agent_id)
            .first(conn)
            .await
            .optional())?;
        Ok(agent.map(AgentId::from_string))
    }

    async fn recent(&self, session: &SessionId, limit: u32) -> anyhow::Result<Vec<Message>> {
        let rows: Vec<MessageRow> = with_conn!(self.db, conn => chat_messages::table
            .filter(chat_messages::session_id.eq(session.as_str()))
            .order(chat_messages::id.desc())
            .limit(i64::from(limit))
            .select(MessageRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().rev().map(MessageRow::into_domain).collect()
    }

    async fn page(&self, session: &SessionId, page: Page) -> anyhow::Result<(Vec<Message>, u64)> {
        let (rows, total): (Vec<MessageRow>, i64) = with_conn!(self.db, conn => {
            let rows = chat_messages::table
                .filter(chat_messages::session_id.eq(session.as_str()))
                .order(chat_messages::id.asc())
                .limit(page.limit())
                .offset(page.offset())
                .select(MessageRow::as_select())
                .load(conn)
                .await?;
            let total =
                chat_messages::table.filter(chat_messages::session_id.eq(session.as_str())).count().get_result(conn).await?;
            Ok::<_, diesel::result::Error>((rows, total))
        })?;
        let messages = rows.into_iter().map(MessageRow::into_domain).collect::<anyhow::Result<_>>()?;
        Ok((messages, u64::try_from(total).unwrap_or(0)))
    }

    async fn record_exchange(&self, x: &Exchange) -> anyhow::Result<i64> {
        let (session_id, is_new) = (&x.session.0, x.session.1);
        let messages = vec![MessageRow::from_domain(&x.user_message), MessageRow::from_domain(&x.reply)];
        let s = &x.settlement;
        let tenant = s.hold.tenant_id.as_str();
        let cost = -s.entry.delta;
        let event_rows: Vec<EventRow> = x.events.iter().map(EventRow::from_domain).collect();
        let now = DbTime(x.reply.created_at);
        let outcome = transaction!(self.db, conn => {
            if is_new {
                diesel::insert_into(chat_sessions::table)
                    .values((
                        chat_sessions::id.eq(session_id.as_str()),
                        chat_sessions::tenant_id.eq(tenant),
                        chat_sessions::agent_id.eq(x.user_message.agent_id.as_str()),
                        chat_sessions::created_at.eq(DbTime(x.user_message.created_at)),
                    ))
                    .execute(conn)
                    .await?;
            }
            // Row by row: diesel-async has no multi-row INSERT for SQLite.
            for row in &messages {
                diesel::insert_into(chat_messages::table).values(row).execute(conn).await?;
            }
            let held: Option<i64> = diesel::delete(credit_holds::table.filter(credit_holds::id.eq(s.hold.id.as_str())))
                .returning(credit_holds::amount)
                .get_result(conn)
                .await
                .optional()?;
            // Released already (by the stale-hold sweeper): store nothing, so the exchange is
            // neither charged twice nor free.
            let Some(held) = held else {
                return Err(StoreError::Precondition("the credit hold of this chat no longer exists"));
            };
            for row in &event_rows {
                diesel::insert_into(events::table).values(row).execute(conn).await?;
            }
            // The tenant row is locked from here to the commit, and every chat of the tenant
            // needs it: only what needs the new balance comes after this point.
            // What was held beyond the actual cost goes back to the balance. The same statement
            // gives what other chats still hold (the ledger runs on the settled balance) and this
            // entry's number in the tenant's ledger.
            let (balance, still_held, seq): (i64, i64, i64) = diesel::update(tenants::table.filter(tenants::id.eq(tenant)))
                .set((
                    tenants::credits.eq(tenants::credits + (held - cost)),
                    tenants::held.eq(tenants::held - held),
                    tenants::ledger_seq.eq(tenants::ledger_seq + 1),
                ))
                .returning((tenants::credits, tenants::held, tenants::ledger_seq))
                .get_result(conn)
                .await?;
            let settled = balance + still_held;
            diesel::insert_into(credit_ledger::table)
                .values((
                    credit_ledger::id.eq(s.entry.id.as_str()),
                    credit_ledger::tenant_id.eq(tenant),
                    credit_ledger::delta.eq(s.entry.delta),
                    credit_ledger::balance_after.eq(settled),
                    credit_ledger::reason.eq(s.entry.reason.as_str()),
                    credit_ledger::created_at.eq(DbTime(s.entry.created_at)),
                    credit_ledger::reference.eq(s.entry.reference.as_deref()),
                    credit_ledger::seq.eq(seq),
                ))
                .execute(conn)
                .await?;
            if crosses_low_threshold(settled + cost, settled, s.low_threshold) {
                let low = Event {
                    id: s.low_event.clone(),
                    tenant_id: s.hold.tenant_id.clone(),
                    event_type: EventType::BillingCreditsLow,
                    data: credits_low_data(settled, s.low_threshold),
                    created_at: now.0,
                };
                diesel::insert_into(events::table).values(&EventRow::from_domain(&low)).execute(conn).await?;
            }
            Ok(balance)
        })?;
        Ok(outcome)
    }
}
