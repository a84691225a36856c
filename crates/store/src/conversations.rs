//! [`ConversationRepository`]: chat sessions and messages, and the one transaction that stores
//! a finished exchange together with its charge and events.

use agentry_domain::agents::{
    ChatRole, ConversationRepository, Exchange, ExchangeOutcome, Message, StoredExchange,
};
use agentry_domain::billing::LedgerEntry;
use agentry_domain::events::Event;
use agentry_domain::ids::{AgentId, MessageId, SessionId, TenantId};
use agentry_domain::pagination::Page;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text};
use diesel_async::AsyncPgConnection;
use diesel_async::RunQueryDsl;

use crate::database::{Database, DbPool, StoreError, split_page};
use crate::events::EventRow;
use crate::postgres::PgConn;
use crate::schema::{chat_messages, chat_sessions, credit_holds, events};
use crate::signals::WorkQueue;
use crate::types::{DbJson, DbTime, Json, UtcTime, parse_named};

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
    incomplete: bool,
    /// An assistant message's tool calls, as JSON text; null when it called none.
    tool_calls: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    /// A reply's citations, as JSON text; null when it cites nothing.
    citations: Option<String>,
    /// Why a reply ended; null for other messages.
    finish_reason: Option<String>,
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
            incomplete: m.incomplete,
            tool_calls: (!m.tool_calls.is_empty())
                .then(|| serde_json::to_string(&m.tool_calls).unwrap_or_else(|_| "[]".to_owned())),
            tool_call_id: m.tool_call_id.clone(),
            tool_name: m.tool_name.clone(),
            citations: (!m.citations.is_empty())
                .then(|| serde_json::to_string(&m.citations).unwrap_or_else(|_| "[]".to_owned())),
            finish_reason: m.finish_reason.map(|f| f.as_str().to_owned()),
        }
    }

    fn into_domain(self) -> anyhow::Result<Message> {
        use anyhow::Context as _;
        Ok(Message {
            id: MessageId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            agent_id: AgentId::from_string(self.agent_id),
            session_id: SessionId::from_string(self.session_id),
            role: parse_named(&self.role, "chat role")?,
            content: self.content,
            prompt_tokens: u64::try_from(self.prompt_tokens).unwrap_or(0),
            completion_tokens: u64::try_from(self.completion_tokens).unwrap_or(0),
            created_at: self.created_at.0,
            incomplete: self.incomplete,
            tool_calls: match self.tool_calls {
                Some(json) => serde_json::from_str(&json).context("a message's stored tool calls")?,
                None => Vec::new(),
            },
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            citations: match self.citations {
                Some(json) => serde_json::from_str(&json).context("a message's stored citations")?,
                None => Vec::new(),
            },
            finish_reason: self
                .finish_reason
                .as_deref()
                .map(|f| parse_named(f, "finish reason"))
                .transpose()?,
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

    async fn exchange_of(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        reply: &MessageId,
    ) -> anyhow::Result<Option<StoredExchange>> {
        let found: Option<(MessageRow, MessageRow)> = with_conn!(self.db, conn => async {
            let Some(reply) = chat_messages::table
                .filter(chat_messages::tenant_id.eq(tenant.as_str()))
                .filter(chat_messages::agent_id.eq(agent.as_str()))
                .filter(chat_messages::id.eq(reply.as_str()))
                .select(MessageRow::as_select())
                .first(conn)
                .await
                .optional()?
            else {
                return Ok::<_, diesel::result::Error>(None);
            };
            // The user's message it answers: the last one before it (tool steps come between).
            let message = chat_messages::table
                .filter(chat_messages::tenant_id.eq(tenant.as_str()))
                .filter(chat_messages::agent_id.eq(agent.as_str()))
                .filter(chat_messages::session_id.eq(&reply.session_id))
                .filter(chat_messages::role.eq(ChatRole::User.as_str()))
                .filter(chat_messages::id.lt(&reply.id))
                .order(chat_messages::id.desc())
                .select(MessageRow::as_select())
                .first(conn)
                .await
                .optional()?;
            Ok(message.map(|m| (m, reply)))
        }.await)?;
        let Some((message, reply)) = found else { return Ok(None) };
        Ok(Some(StoredExchange { message: message.into_domain()?, reply: reply.into_domain()? }))
    }

    async fn record_exchange(&self, x: &Exchange) -> anyhow::Result<ExchangeOutcome> {
        let outcome = match &self.db.pool {
            DbPool::Pg(pools) => {
                let statement = ExchangeStatement::new(x)?;
                // The exchange is the one statement, atomic by itself, and a second one only
                // when it crossed the low-credit threshold (see `insert_low_credit_event`).
                with_pg_conn!(pools, conn => async {
                    let settled = statement.run(conn).await?;
                    if let Some(low) = statement.low_credit_event(&settled) {
                        insert_low_credit_event(conn, &low).await;
                    }
                    Ok::<_, StoreError>(settled.available)
                }.await)
            }
            DbPool::Sqlite(_) => self.record_in_the_writer(x).await,
        };
        match outcome {
            Ok(remaining) => {
                self.db.stored(WorkQueue::Outbox);
                Ok(ExchangeOutcome::Recorded { remaining })
            }
            Err(e) if e.is_foreign_key_violation() => Ok(ExchangeOutcome::AgentGone),
            Err(e) => Err(e.into()),
        }
    }
}

impl ConversationStore {
    /// SQLite: the exchange as one unit of the single writer, statement by statement.
    async fn record_in_the_writer(&self, x: &Exchange) -> Result<i64, StoreError> {
        let messages = stored_messages(x);
        let event_rows = EventRow::all(&x.events).map_err(|e| StoreError::Encode(e.to_string()))?;
        let x = x.clone();
        transaction!(self.db, conn => {
            let s = &x.settlement;
            let tenant = s.hold.tenant_id.as_str();
            let cost = -s.entry.delta;
            // Released already (by the stale-hold sweeper): store nothing, so the exchange is
            // neither charged twice nor free.
            let Some(held) = diesel::delete(credit_holds::table.filter(credit_holds::id.eq(s.hold.id.as_str())))
                .returning(credit_holds::amount)
                .get_result::<i64>(conn)
                .await
                .optional()?
            else {
                return Err(StoreError::Precondition(HOLD_GONE));
            };
            // Created on first use; the same id again continues the conversation. The agent's
            // foreign key fails here when it was deleted while the model answered.
            if x.keep_conversation {
            diesel::insert_into(chat_sessions::table)
                .values((
                    chat_sessions::id.eq(x.session_id.as_str()),
                    chat_sessions::tenant_id.eq(tenant),
                    chat_sessions::agent_id.eq(x.user_message.agent_id.as_str()),
                    chat_sessions::created_at.eq(DbTime(x.user_message.created_at)),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            }
            // Row by row: the SQLite connection has no multi-row INSERT.
            for row in &messages {
                diesel::insert_into(chat_messages::table).values(row).execute(conn).await?;
            }
            for row in &event_rows {
                diesel::insert_into(events::table).values(row).execute(conn).await?;
            }
            // What was held beyond the actual cost goes back to the balance.
            let (available, settled) = append_ledger!(conn, &s.entry, credits: held - cost, held: -held)?;
            if let Some(low) = s.low_credit_event(settled, x.reply.created_at) {
                let row = EventRow::from_domain(&low).map_err(|e| StoreError::Encode(e.to_string()))?;
                diesel::insert_into(events::table).values(&row).execute(conn).await?;
            }
            Ok(available)
        })
    }
}

/// The rows of the exchange's messages, in order: none for a stateless call.
fn stored_messages(x: &Exchange) -> Vec<MessageRow> {
    if x.keep_conversation {
        std::iter::once(&x.user_message)
            .chain(&x.steps)
            .chain(std::iter::once(&x.reply))
            .map(MessageRow::from_domain)
            .collect()
    } else {
        Vec::new()
    }
}

const HOLD_GONE: &str = "the credit hold of this chat no longer exists";

/// PostgreSQL: a finished exchange as one statement, one round trip with no transaction
/// around it (see [`EXCHANGE_SQL`]): the hold's release, the session, both messages, the
/// events, the settlement of the tenant's balance and its ledger entry. Every step reads the
/// released hold, so a hold already released (by the stale-hold sweeper) writes nothing: the
/// exchange is neither charged twice nor free. The statement answers the settled balance it
/// left, from which the domain decides whether the charge crossed the low-credit threshold
/// ([`Settlement::low_credit_event`](agentry_domain::billing::Settlement::low_credit_event)).
struct ExchangeStatement {
    hold: String,
    tenant: String,
    agent: String,
    session: String,
    session_created_at: DbTime,
    /// The two messages, one array per column.
    message_ids: Vec<String>,
    message_roles: Vec<String>,
    message_contents: Vec<String>,
    message_prompt_tokens: Vec<i64>,
    message_completion_tokens: Vec<i64>,
    message_created_at: Vec<DbTime>,
    message_incomplete: Vec<bool>,
    message_tool_calls: Vec<Option<String>>,
    message_tool_call_ids: Vec<Option<String>>,
    message_tool_names: Vec<Option<String>>,
    message_citations: Vec<Option<String>>,
    message_finish_reasons: Vec<Option<String>>,
    /// The events, one array per column.
    event_ids: Vec<String>,
    event_types: Vec<String>,
    event_data: Vec<DbJson>,
    event_created_at: Vec<DbTime>,
    cost: i64,
    entry: LedgerEntry,
    /// The settlement, for the low-credit decision.
    settlement: agentry_domain::billing::Settlement,
    /// When the low-credit event happens, if it does: with the reply.
    answered_at: chrono::DateTime<chrono::Utc>,
}

impl ExchangeStatement {
    fn new(x: &Exchange) -> anyhow::Result<Self> {
        let s = &x.settlement;
        let messages = stored_messages(x);
        let events = EventRow::all(&x.events)?;
        Ok(Self {
            hold: s.hold.id.to_string(),
            tenant: s.hold.tenant_id.to_string(),
            agent: x.user_message.agent_id.to_string(),
            session: x.session_id.to_string(),
            session_created_at: DbTime(x.user_message.created_at),
            message_ids: messages.iter().map(|m| m.id.clone()).collect(),
            message_roles: messages.iter().map(|m| m.role.clone()).collect(),
            message_contents: messages.iter().map(|m| m.content.clone()).collect(),
            message_prompt_tokens: messages.iter().map(|m| m.prompt_tokens).collect(),
            message_completion_tokens: messages.iter().map(|m| m.completion_tokens).collect(),
            message_created_at: messages.iter().map(|m| m.created_at).collect(),
            message_incomplete: messages.iter().map(|m| m.incomplete).collect(),
            message_tool_calls: messages.iter().map(|m| m.tool_calls.clone()).collect(),
            message_tool_call_ids: messages.iter().map(|m| m.tool_call_id.clone()).collect(),
            message_tool_names: messages.iter().map(|m| m.tool_name.clone()).collect(),
            message_citations: messages.iter().map(|m| m.citations.clone()).collect(),
            message_finish_reasons: messages.iter().map(|m| m.finish_reason.clone()).collect(),
            event_ids: events.iter().map(|e| e.id.clone()).collect(),
            event_types: events.iter().map(|e| e.event_type.clone()).collect(),
            event_data: events.iter().map(|e| e.data.clone()).collect(),
            event_created_at: events.iter().map(|e| e.created_at).collect(),
            cost: -s.entry.delta,
            entry: s.entry.clone(),
            settlement: s.clone(),
            answered_at: x.reply.created_at,
        })
    }

    /// Runs the statement; the balances it left.
    async fn run(&self, conn: &mut PgConn<&mut AsyncPgConnection>) -> Result<SettledRow, StoreError> {
        let e = &self.entry;
        let settled: Option<SettledRow> = diesel::sql_query(EXCHANGE_SQL)
            .bind::<Text, _>(&self.hold)
            .bind::<Text, _>(&self.tenant)
            .bind::<Text, _>(&self.agent)
            .bind::<Text, _>(&self.session)
            .bind::<UtcTime, _>(self.session_created_at)
            .bind::<Array<Text>, _>(&self.message_ids)
            .bind::<Array<Text>, _>(&self.message_roles)
            .bind::<Array<Text>, _>(&self.message_contents)
            .bind::<Array<BigInt>, _>(&self.message_prompt_tokens)
            .bind::<Array<BigInt>, _>(&self.message_completion_tokens)
            .bind::<Array<UtcTime>, _>(&self.message_created_at)
            .bind::<Array<Bool>, _>(&self.message_incomplete)
            .bind::<Array<Text>, _>(&self.event_ids)
            .bind::<Array<Text>, _>(&self.event_types)
            .bind::<Array<Json>, _>(&self.event_data)
            .bind::<Array<UtcTime>, _>(&self.event_created_at)
            .bind::<BigInt, _>(self.cost)
            .bind::<Text, _>(e.id.as_str())
            .bind::<BigInt, _>(e.delta)
            .bind::<Text, _>(e.reason.as_str())
            .bind::<UtcTime, _>(DbTime(e.created_at))
            .bind::<Nullable<Text>, _>(e.reference.as_deref())
            .bind::<Array<Nullable<Text>>, _>(&self.message_tool_calls)
            .bind::<Array<Nullable<Text>>, _>(&self.message_tool_call_ids)
            .bind::<Array<Nullable<Text>>, _>(&self.message_tool_names)
            .bind::<Array<Nullable<Text>>, _>(&self.message_citations)
            .bind::<Array<Nullable<Text>>, _>(&self.message_finish_reasons)
            .get_result(conn)
            .await
            .optional()?;
        settled.ok_or(StoreError::Precondition(HOLD_GONE))
    }

    /// The low-credit event's row, when the domain says the settlement crossed the threshold.
    fn low_credit_event(&self, settled: &SettledRow) -> Option<EventRow> {
        let low: Event = self.settlement.low_credit_event(settled.settled, self.answered_at)?;
        match EventRow::from_domain(&low) {
            Ok(row) => Some(row),
            Err(e) => {
                tracing::error!(tenant_id = %self.tenant, error = %e, "the low-credit event could not be encoded");
                None
            }
        }
    }
}

/// PostgreSQL, after [`EXCHANGE_SQL`] committed on its own: the low-credit event, as a second
/// statement that only a chat crossing the threshold runs (the common chat stays one round
/// trip). The exchange is already recorded and charged, so a failure here is logged, never
/// returned: an error would tell the client its chat failed, and a retry would charge it
/// again. If the process dies (or the connection drops) between the two statements, the
/// exchange stands, charged once, and that crossing's `billing.credits.low` is lost: the event
/// is written at most once, never twice (its id is the settlement's, and only this exchange,
/// which ran once, writes it). The next crossing (after a purchase lifts the balance above the
/// threshold) emits again. A chat that also stores a memory entry runs in a transaction, and
/// its event is written in it.
async fn insert_low_credit_event(conn: &mut PgConn<&mut AsyncPgConnection>, low: &EventRow) {
    if let Err(e) = diesel::insert_into(events::table).values(low).execute(conn).await {
        tracing::error!(event_id = %low.id, tenant_id = %low.tenant_id, error = %e, "storing a billing.credits.low event failed");
    }
}

/// The statement of [`ExchangeStatement`]. Each step is a data-modifying CTE reading the
/// released hold (`FROM released`), so none writes without it; the ledger entry reads the
/// settled tenant row. The session's foreign key to its agent fails the whole statement when
/// the agent was deleted while the model answered.
const EXCHANGE_SQL: &str = "\
WITH released AS (
    DELETE FROM credit_holds WHERE id = $1 RETURNING amount
), session AS (
    INSERT INTO chat_sessions (id, tenant_id, agent_id, created_at)
    SELECT $4, $2, $3, $5 FROM released WHERE cardinality($6::text[]) > 0
    ON CONFLICT DO NOTHING
), messages AS (
    INSERT INTO chat_messages
        (id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at, incomplete,
         tool_calls, tool_call_id, tool_name, citations, finish_reason)
    SELECT m.id, $2, $3, $4, m.role, m.content, m.prompt_tokens, m.completion_tokens, m.created_at, m.incomplete,
        m.tool_calls, m.tool_call_id, m.tool_name, m.citations, m.finish_reason
    FROM released, unnest($6, $7, $8, $9, $10, $11, $12, $23::text[], $24::text[], $25::text[], $26::text[], $27::text[])
        AS m (id, role, content, prompt_tokens, completion_tokens, created_at, incomplete, tool_calls, tool_call_id, tool_name,
              citations, finish_reason)
), outbox AS (
    INSERT INTO events (id, tenant_id, event_type, data, created_at)
    SELECT e.id, $2, e.event_type, e.data, e.created_at
    FROM released, unnest($13, $14, $15, $16) AS e (id, event_type, data, created_at)
), settled AS (
    UPDATE tenants SET
        credits = tenants.credits + released.amount - $17,
        held = tenants.held - released.amount,
        ledger_seq = tenants.ledger_seq + 1
    FROM released
    WHERE tenants.id = $2
    RETURNING tenants.credits AS available, tenants.credits + tenants.held AS settled, tenants.ledger_seq AS seq
), ledger AS (
    INSERT INTO credit_ledger (id, tenant_id, delta, balance_after, reason, created_at, reference, seq)
    SELECT $18, $2, $19, settled.settled, $20, $21, $22, settled.seq FROM settled
)
SELECT available, settled FROM settled";

/// What [`EXCHANGE_SQL`] answers: the tenant's available balance and its settled balance
/// (available plus held) after the settlement.
#[derive(QueryableByName)]
struct SettledRow {
    #[diesel(sql_type = BigInt)]
    available: i64,
    #[diesel(sql_type = BigInt)]
    settled: i64,
}
