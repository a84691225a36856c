//! [`ConversationRepository`]: chat sessions and messages, and the one transaction that stores
//! a finished exchange together with its charge and events.

use agentry_domain::agents::{ChatRole, ConversationRepository, Exchange, ExchangeOutcome, Message};
use agentry_domain::billing::{credits_low_event, crosses_low_threshold};
use agentry_domain::ids::{AgentId, MessageId, SessionId, TenantId};
use agentry_domain::pagination::Page;
use async_trait::async_trait;
use diesel::QueryResult;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError, split_page};
use crate::events::EventRow;
use crate::memory::NewEntryRow;
use crate::postgres::Pipelining as _;
use crate::schema::{chat_messages, chat_sessions, credit_holds, events, memory_entries};
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

type ColumnIs<'a, C> = diesel::dsl::Eq<C, &'a str>;
type InConversation<'a> = diesel::dsl::And<
    diesel::dsl::And<ColumnIs<'a, chat_messages::tenant_id>, ColumnIs<'a, chat_messages::agent_id>>,
    ColumnIs<'a, chat_messages::session_id>,
>;

/// The messages of one conversation: a session id means something only with its tenant and
/// agent.
fn conversation<'a>(tenant: &'a TenantId, agent: &'a AgentId, session: &'a SessionId) -> InConversation<'a> {
    chat_messages::tenant_id
        .eq(tenant.as_str())
        .and(chat_messages::agent_id.eq(agent.as_str()))
        .and(chat_messages::session_id.eq(session.as_str()))
}

#[async_trait]
impl ConversationRepository for ConversationStore {
    async fn recent(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        limit: u32,
    ) -> anyhow::Result<Vec<Message>> {
        let rows: Vec<MessageRow> = with_conn!(self.db, conn => chat_messages::table
            .filter(conversation(tenant, agent, session))
            .order(chat_messages::id.desc())
            .limit(i64::from(limit))
            .select(MessageRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().rev().map(MessageRow::into_domain).collect()
    }

    async fn page(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        session: &SessionId,
        page: Page,
    ) -> anyhow::Result<Option<(Vec<Message>, u64)>> {
        // The total rides along as an uncorrelated subquery: see `AgentStore::list`.
        let counted = diesel::alias!(chat_messages as counted);
        let in_conversation = counted
            .filter(counted.field(chat_messages::tenant_id).eq(tenant.as_str()))
            .filter(counted.field(chat_messages::agent_id).eq(agent.as_str()))
            .filter(counted.field(chat_messages::session_id).eq(session.as_str()));
        let found: Option<(Vec<MessageRow>, i64)> = with_conn!(self.db, conn => async {
            let exists: bool = diesel::select(diesel::dsl::exists(
                chat_sessions::table
                    .filter(chat_sessions::tenant_id.eq(tenant.as_str()))
                    .filter(chat_sessions::agent_id.eq(agent.as_str()))
                    .filter(chat_sessions::id.eq(session.as_str())),
            ))
            .get_result(conn)
            .await?;
            if !exists {
                return Ok::<_, diesel::result::Error>(None);
            }
            let rows = chat_messages::table
                .filter(conversation(tenant, agent, session))
                .order(chat_messages::id.asc())
                .limit(page.limit())
                .offset(page.offset())
                .select((MessageRow::as_select(), in_conversation.count().single_value().assume_not_null()))
                .load(conn)
                .await?;
            let (rows, total) = split_page(rows, page);
            let total = match total {
                Some(total) => total,
                None => chat_messages::table.filter(conversation(tenant, agent, session)).count().get_result(conn).await?,
            };
            Ok(Some((rows, total)))
        }.await)?;
        let Some((rows, total)) = found else { return Ok(None) };
        let messages = rows.into_iter().map(MessageRow::into_domain).collect::<anyhow::Result<_>>()?;
        Ok(Some((messages, u64::try_from(total).unwrap_or(0))))
    }

    async fn record_exchange(&self, x: &Exchange) -> anyhow::Result<ExchangeOutcome> {
        let messages = [MessageRow::from_domain(&x.user_message), MessageRow::from_domain(&x.reply)];
        let event_rows = EventRow::all(&x.events)?;
        let mut memory = x.memory.as_ref().map(NewEntryRow::from_domain);
        let x = x.clone();
        let outcome = transaction!(self.db, conn => {
            let s = &x.settlement;
            let tenant = s.hold.tenant_id.as_str();
            let agent = x.user_message.agent_id.as_str();
            let cost = -s.entry.delta;
            // Created on first use; the same id again continues the conversation. The agent's
            // foreign key fails here when it was deleted while the model answered.
            let session = diesel::insert_into(chat_sessions::table)
                .values((
                    chat_sessions::id.eq(x.session_id.as_str()),
                    chat_sessions::tenant_id.eq(tenant),
                    chat_sessions::agent_id.eq(agent),
                    chat_sessions::created_at.eq(DbTime(x.user_message.created_at)),
                ))
                .on_conflict_do_nothing();
            let release_hold = diesel::delete(credit_holds::table.filter(credit_holds::id.eq(s.hold.id.as_str())))
                .returning(credit_holds::amount);
            let held: Option<i64> = match conn.pipeline() {
                // PostgreSQL: the session first (its agent's foreign key is what a deleted
                // agent fails, and the messages refer to it); then both messages, the events and
                // the hold's release, which need none of each other's answers, as one pipeline:
                // two round trips instead of six. A failure aborts the transaction.
                Some(mut pipe) => {
                    session.execute(&mut pipe).await?;
                    let mut inserts: Vec<futures_util::future::BoxFuture<'_, QueryResult<usize>>> = Vec::new();
                    for row in &messages {
                        let mut c = pipe;
                        inserts.push(Box::pin(async move {
                            diesel::insert_into(chat_messages::table).values(row).execute(&mut c).await
                        }));
                    }
                    for row in &event_rows {
                        let mut c = pipe;
                        inserts.push(Box::pin(async move {
                            diesel::insert_into(events::table).values(row).execute(&mut c).await
                        }));
                    }
                    let mut c = pipe;
                    let release = async move { release_hold.get_result(&mut c).await.optional() };
                    let (_, held) = futures_util::try_join!(futures_util::future::try_join_all(inserts), release)?;
                    held
                }
                None => {
                    session.execute(conn).await?;
                    // Row by row: the SQLite connection has no multi-row INSERT.
                    for row in &messages {
                        diesel::insert_into(chat_messages::table).values(row).execute(conn).await?;
                    }
                    for row in &event_rows {
                        diesel::insert_into(events::table).values(row).execute(conn).await?;
                    }
                    release_hold.get_result(conn).await.optional()?
                }
            };
            // Released already (by the stale-hold sweeper): store nothing, so the exchange is
            // neither charged twice nor free.
            let Some(held) = held else {
                return Err(StoreError::Precondition("the credit hold of this chat no longer exists"));
            };
            // The tenant row is locked from here to the commit, and every chat of the tenant
            // needs it: only what needs the new balance comes after this point. What was held
            // beyond the actual cost goes back to the balance.
            let (available, settled) = append_ledger!(conn, &s.entry, credits: held - cost, held: -held)?;
            // The exchange as an episodic memory, after the ledger: the same lock order (the
            // tenant row, then its memory version) as every other transaction.
            if let Some(row) = &mut memory {
                row.seq = bump_memory_version!(conn, tenant)?;
                diesel::insert_into(memory_entries::table).values(&*row).execute(conn).await?;
            }
            if crosses_low_threshold(settled + cost, settled, s.low_threshold) {
                let low = credits_low_event(s.low_event.clone(), &s.hold.tenant_id, settled, s.low_threshold, x.reply.created_at);
                let row = EventRow::from_domain(&low).map_err(|e| StoreError::Encode(e.to_string()))?;
                diesel::insert_into(events::table).values(&row).execute(conn).await?;
            }
            Ok(available)
        });
        match outcome {
            Ok(remaining) => Ok(ExchangeOutcome::Recorded { remaining }),
            Err(e) if e.is_foreign_key_violation() => Ok(ExchangeOutcome::AgentGone),
            Err(e) => Err(e.into()),
        }
    }
}
