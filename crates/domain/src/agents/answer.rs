//! Answering a prepared chat: the model calls, the agent's tools between them, and storing the
//! exchange with its charge in one transaction.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::chat::{
    ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, Message, ToolCall,
    ToolResult, count_request,
};
use super::chat_api::{ChatError, ChatReply, ChatService, affordable_completion};
use super::knowledge_config::KNOWLEDGE_TOOL;
use super::model::Agent;
use super::ports::{Exchange, ExchangeOutcome};
use super::registry::Toolbox;
use super::sources::{Sources, citations};
use super::tools::DEFAULT_TOOL_ROUNDS;
use super::turn::{Next, Turn};
use crate::billing::{CreditHold, LedgerEntry, LedgerReason, Settlement, chat_cost};
use crate::events::{Event, EventPayload, MessageCompletedData, MessageCreatedData, ToolCalledData};
use crate::ids::{CreditHoldId, EventId, LedgerEntryId, MessageId, SessionId};
use crate::tenancy::Principal;

/// A chat that passed its checks and holds its credits: what remains is the model's answer
/// and storing it ([`PreparedChat::answer`]). Dropped unanswered, its hold is returned by the
/// stale-hold sweeper.
pub struct PreparedChat {
    pub(super) service: ChatService,
    pub(super) caller: Principal,
    pub(super) agent: Agent,
    pub(super) session_id: SessionId,
    pub(super) message: String,
    pub(super) request: CompletionRequest,
    /// The longest reply of one model call, before what the balance pays.
    pub(super) max_tokens: u32,
    pub(super) hold: CreditHold,
    /// The agent's own tools offered to the model.
    pub(super) toolbox: Toolbox,
    /// Whether the session and messages are stored (see [`Exchange::keep_conversation`]).
    pub(super) keep_conversation: bool,
    /// The sources put into the prompt, numbered (`auto` knowledge).
    pub(super) sources: Sources,
}

impl std::fmt::Debug for PreparedChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedChat")
            .field("agent", &self.agent.id)
            .field("session_id", &self.session_id)
            .field("hold", &self.hold.id)
            .finish_non_exhaustive()
    }
}

impl PreparedChat {
    /// The conversation this chat continues or starts.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The id of its credit hold: unique to this call (OpenAI's completion id is made of it).
    pub fn hold_id(&self) -> &CreditHoldId {
        &self.hold.id
    }

    /// Asks the model, runs the tools it calls and asks again with their results (up to the
    /// agent's `max_tool_rounds`), then stores the messages, the charge and the events in one
    /// transaction. With a `sink`, the reply, the tool calls and their results are streamed
    /// into it as they happen; a sink that stops listening (its client left) ends the
    /// generation, and what was generated is stored, marked incomplete, and charged. Each
    /// model call is held before it is made; all are charged as one ledger entry. A model
    /// failure releases the hold and stores nothing.
    ///
    /// # Errors
    /// [`ChatError::Upstream`], [`ChatError::AgentNotFound`] (deleted meanwhile),
    /// [`ChatError::Unexpected`].
    pub async fn answer(self, sink: Option<Arc<dyn DeltaSink>>) -> Result<ChatReply, ChatError> {
        let service = self.service.clone();
        let hold_at_start = self.hold.clone();
        match self.run(sink).await {
            Ok(reply) => Ok(reply),
            Err((e, hold)) => {
                service.release(hold.as_ref().unwrap_or(&hold_at_start)).await;
                Err(e)
            }
        }
    }

    /// [`PreparedChat::answer`]; an error comes with the hold to release. A small driver over
    /// the turn's state machine ([`Turn`]): it makes the model calls, runs the tools the turn
    /// asks for and holds the credits of each next call.
    async fn run(
        self,
        sink: Option<Arc<dyn DeltaSink>>,
    ) -> Result<ChatReply, (ChatError, Option<CreditHold>)> {
        let Self {
            service,
            caller,
            agent,
            session_id,
            message,
            mut request,
            max_tokens,
            mut hold,
            toolbox,
            keep_conversation,
            sources,
        } = self;
        let d = &service.deps;
        let asked_at = d.clock.now();
        let user_message = service.message(&caller, &agent, &session_id, ChatRole::User, message, asked_at);
        // The client's own tools (OpenAI's protocol): every offered tool that is not the agent's.
        let client_tools =
            request.tools.iter().filter(|t| !toolbox.offers(&t.name)).map(|t| t.name.clone()).collect();
        let mut turn = Turn::new(agent.config.max_tool_rounds.unwrap_or(DEFAULT_TOOL_ROUNDS), client_tools);
        let mut rounds = Rounds { sources, ..Rounds::default() };
        let (last, note) = loop {
            let answered = match &sink {
                Some(sink) => d.model.stream(&request, sink.clone()).await,
                None => d.model.complete(&request).await,
            };
            // A model's answer is remote text: stored alike on both databases.
            let answered = answered.map(|c| Completion { content: crate::storable::text(c.content), ..c });
            let (content, calls) = match turn.next(answered) {
                Err(e) => return Err((e.into(), Some(hold))),
                Ok(Next::Finish { last, note }) => break (last, note),
                Ok(Next::CallTools { content, calls }) => (content, calls),
            };
            let mut step =
                service.message(&caller, &agent, &session_id, ChatRole::Assistant, content, d.clock.now());
            step.tool_calls = calls.clone();
            request.messages.push(ChatTurn::of_message(&step));
            rounds.steps.push(step);
            for (ran, call) in calls.iter().enumerate() {
                if let Some(sink) = &sink
                    && !sink.tool_call(call)
                {
                    // The client left: nothing more runs. The calls kept are those that ran,
                    // each followed by its result, as providers require of a history.
                    rounds.keep_calls_that_ran(ran);
                    let finished = Finished { caller, agent, keep_conversation, user_message, rounds, turn };
                    return service
                        .finish(finished, Completion::nothing(FinishReason::Cancelled), None, hold)
                        .await;
                }
                // A hold still working is no stale hold: the sweeper must not return it while a
                // tool (a workflow may take minutes) runs.
                if let Err(e) = d.credits.extend_hold(&hold, 0, 0, d.clock.now()).await {
                    tracing::warn!(error = ?e, hold_id = %hold.id, "refreshing a chat's credit hold failed");
                }
                let result =
                    service.call_tool(&toolbox, &caller, &agent, &session_id, call, &mut rounds).await;
                if let Some(sink) = &sink {
                    sink.tool_result(&result);
                }
            }
            request
                .messages
                .extend(rounds.steps.iter().rev().take(calls.len()).rev().map(ChatTurn::of_message));
            match service.hold_next(&mut hold, &mut request, max_tokens, turn.cost).await {
                Ok(true) => {}
                Ok(false) => break turn.out_of_credits(),
                Err(e) => return Err((e.into(), Some(hold))),
            }
        };
        let finished = Finished { caller, agent, keep_conversation, user_message, rounds, turn };
        service.finish(finished, last, note, hold).await
    }
}

/// The messages and events of a chat's tool rounds so far.
#[derive(Default)]
struct Rounds {
    /// The assistant messages that called tools and the tools' results, in order.
    steps: Vec<Message>,
    /// An `agent.tool.called` per call.
    tool_events: Vec<Event>,
    /// The chat's sources: the prompt's, then those `knowledge_search` calls found.
    sources: Sources,
}

impl Rounds {
    /// After a client left before the call at `ran` of the last round ran: that round's
    /// assistant message keeps only the calls that ran (it goes when none did and it said
    /// nothing).
    fn keep_calls_that_ran(&mut self, ran: usize) {
        let Some(at) = self.steps.iter().rposition(|m| m.role == ChatRole::Assistant) else { return };
        self.steps[at].tool_calls.truncate(ran);
        if ran == 0 && self.steps[at].content.is_empty() {
            self.steps.remove(at);
        }
    }
}

/// A chat whose model calls are done, to be stored.
struct Finished {
    caller: Principal,
    agent: Agent,
    keep_conversation: bool,
    user_message: Message,
    rounds: Rounds,
    turn: Turn,
}

/// A finished chat's messages and charge, for [`ChatService::exchange`].
struct Answer {
    session_id: SessionId,
    user_message: Message,
    steps: Vec<Message>,
    reply: Message,
    cost: i64,
    tool_events: Vec<Event>,
    asked_at: DateTime<Utc>,
}
impl ChatService {
    /// A message of the conversation, its id taken now (ids sort in the order they are taken,
    /// which is the order the history lists).
    fn message(
        &self,
        caller: &Principal,
        agent: &Agent,
        session_id: &SessionId,
        role: ChatRole,
        content: String,
        created_at: DateTime<Utc>,
    ) -> Message {
        Message::plain(
            MessageId::generate(self.deps.ids.as_ref()),
            (caller.tenant_id.clone(), agent.id.clone(), session_id.clone()),
            role,
            content,
            created_at,
        )
    }

    /// The exchange to store: the messages (the user's, the tool rounds', the reply), the
    /// charge of every model call as one ledger entry, and the events.
    fn exchange(&self, caller: &Principal, agent: &Agent, answer: Answer, hold: CreditHold) -> Exchange {
        let Answer { session_id, user_message, steps, reply, cost, tool_events, asked_at } = answer;
        let ids = self.deps.ids.as_ref();
        // A model may overrun `max_tokens` slightly; the hold is what the tenant agreed to.
        let cost = cost.min(hold.amount);
        let answered_at = reply.created_at;
        let latency_ms = u64::try_from((answered_at - asked_at).num_milliseconds()).unwrap_or(0);
        let mut events = vec![Event::new(
            ids,
            &caller.tenant_id,
            EventPayload::AgentMessageCreated(MessageCreatedData {
                agent_id: agent.id.clone(),
                conversation_id: session_id.clone(),
                message_id: user_message.id.clone(),
                content: user_message.content.clone(),
                role: ChatRole::User.as_str().to_owned(),
            }),
            asked_at,
        )];
        events.extend(tool_events);
        events.push(Event::new(
            ids,
            &caller.tenant_id,
            EventPayload::AgentMessageCompleted(MessageCompletedData {
                agent_id: agent.id.clone(),
                conversation_id: session_id.clone(),
                message_id: reply.id.clone(),
                content: reply.content.clone(),
                tokens_used: reply.prompt_tokens + reply.completion_tokens,
                latency_ms,
            }),
            answered_at,
        ));
        let entry = LedgerEntry {
            id: LedgerEntryId::generate(ids),
            tenant_id: caller.tenant_id.clone(),
            delta: -cost,
            balance_after: 0,
            reason: LedgerReason::ChatUsage,
            reference: Some(reply.id.to_string()),
            created_at: answered_at,
        };
        let settlement = Settlement {
            hold,
            entry,
            low_threshold: self.settings.credits_low_threshold,
            low_event: EventId::generate(ids),
        };
        Exchange { session_id, user_message, steps, reply, settlement, events, keep_conversation: true }
    }

    async fn release(&self, hold: &CreditHold) {
        if let Err(e) = self.deps.credits.release(&hold.id).await {
            // The stale-hold sweeper returns it later.
            tracing::error!(error = ?e, hold_id = %hold.id, "releasing a credit hold failed");
        }
    }

    /// Grows the hold to pay for the next model call (its prompt now has the tools' results)
    /// and caps that call's reply at what the hold pays, `spent` being the turn's charge so
    /// far; `false` when the balance does not pay for it.
    async fn hold_next(
        &self,
        hold: &mut CreditHold,
        request: &mut CompletionRequest,
        max_tokens: u32,
        spent: i64,
    ) -> anyhow::Result<bool> {
        let d = &self.deps;
        let prompt = count_request(d.tokens.as_ref(), &request.messages, &request.tools);
        let (most, least) =
            (spent + chat_cost(prompt + u64::from(max_tokens)), spent + chat_cost(prompt + 1));
        if hold.amount < most {
            match d.credits.extend_hold(hold, most - hold.amount, least - hold.amount, d.clock.now()).await? {
                Some(added) => hold.amount += added,
                None => return Ok(false),
            }
        }
        let affordable = affordable_completion(hold.amount - spent, prompt);
        request.max_tokens = u32::try_from(affordable).unwrap_or(u32::MAX).min(max_tokens);
        Ok(true)
    }

    /// Runs one of the agent's tools as the caller, records its message and event, and
    /// returns its result.
    async fn call_tool(
        &self,
        toolbox: &Toolbox,
        caller: &Principal,
        agent: &Agent,
        session_id: &SessionId,
        call: &ToolCall,
        rounds: &mut Rounds,
    ) -> ToolResult {
        let d = &self.deps;
        let started = std::time::Instant::now();
        let mut output =
            d.tools.call(toolbox, caller, agent, session_id, call).await.map_err(|e| e.to_string());
        if toolbox.kind_of(&call.name) == KNOWLEDGE_TOOL
            && let Ok(found) = &mut output
        {
            rounds.sources.adopt(found);
        }
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let result = ToolResult { call_id: call.id.clone(), name: call.name.clone(), output };
        let now = d.clock.now();
        let content = crate::storable::text(result.to_json().to_string());
        let mut message = self.message(caller, agent, session_id, ChatRole::Tool, content, now);
        message.tool_call_id = Some(call.id.clone());
        message.tool_name = Some(call.name.clone());
        rounds.steps.push(message);
        rounds.tool_events.push(Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::AgentToolCalled(ToolCalledData {
                agent_id: agent.id.clone(),
                session_id: session_id.clone(),
                tool: call.name.clone(),
                call_id: call.id.clone(),
                ok: result.output.is_ok(),
                duration_ms,
            }),
            now,
        ));
        metrics::counter!(crate::metrics::TOOL_CALLS, "tool" => toolbox.kind_of(&call.name), "ok" => if result.output.is_ok() { "true" } else { "false" }).increment(1);
        result
    }

    /// Stores a finished chat: its reply is the last model call's text (with `note` when the
    /// chat stopped early), its usage and charge those of every call.
    async fn finish(
        &self,
        f: Finished,
        last: Completion,
        note: Option<String>,
        hold: CreditHold,
    ) -> Result<ChatReply, (ChatError, Option<CreditHold>)> {
        let d = &self.deps;
        let Finished { caller, agent, keep_conversation, user_message, rounds, turn } = f;
        let answered_at = d.clock.now();
        let content = match note {
            Some(note) if last.content.trim().is_empty() => note,
            Some(note) => format!("{}\n\n{note}", last.content),
            None => last.content,
        };
        let session_id = user_message.session_id.clone();
        let mut reply = self.message(&caller, &agent, &session_id, ChatRole::Assistant, content, answered_at);
        reply.prompt_tokens = turn.prompt_tokens;
        reply.completion_tokens = turn.completion_tokens;
        reply.incomplete = last.finish == FinishReason::Cancelled;
        reply.tool_calls = last.tool_calls;
        reply.citations = citations(&reply.content, &rounds.sources.0);
        reply.finish_reason = Some(last.finish);
        let asked_at = user_message.created_at;
        let answer = Answer {
            session_id,
            user_message,
            steps: rounds.steps,
            reply,
            cost: turn.cost,
            tool_events: rounds.tool_events,
            asked_at,
        };
        let mut exchange = self.exchange(&caller, &agent, answer, hold.clone());
        exchange.keep_conversation = keep_conversation;
        match d.conversations.record_exchange(&exchange).await {
            Ok(ExchangeOutcome::Recorded { remaining }) => {
                let charged = exchange.settlement.entry.delta.abs();
                metrics::counter!(crate::metrics::CREDITS_CHARGED).increment(charged.unsigned_abs());
                Ok(ChatReply {
                    charged,
                    session_id: exchange.session_id,
                    message: exchange.reply,
                    remaining,
                    finish: last.finish,
                })
            }
            Ok(ExchangeOutcome::AgentGone) => Err((ChatError::AgentNotFound, Some(hold))),
            Err(e) => Err((e.into(), Some(hold))),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::ids::{AgentId, TenantId};

    #[test]
    fn a_client_that_left_keeps_only_the_calls_that_ran() {
        let message = |role, content: &str, calls: &[&str]| Message {
            id: MessageId::from_string("msg_1"),
            tenant_id: TenantId::from_string("ten_1"),
            agent_id: AgentId::from_string("agt_1"),
            session_id: SessionId::from_string("s"),
            role,
            content: content.into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            created_at: chrono::Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap(),
            incomplete: false,
            tool_calls: calls
                .iter()
                .map(|id| ToolCall { id: (*id).into(), name: "memory_search".into(), arguments: "{}".into() })
                .collect(),
            tool_call_id: None,
            tool_name: None,
            citations: Vec::new(),
            finish_reason: None,
        };
        let mut rounds = Rounds {
            steps: vec![message(ChatRole::Assistant, "", &["a", "b"]), message(ChatRole::Tool, "{}", &[])],
            tool_events: Vec::new(),
            sources: Sources::default(),
        };
        rounds.keep_calls_that_ran(1);
        assert_eq!(rounds.steps[0].tool_calls.len(), 1);
        rounds.steps = vec![message(ChatRole::Assistant, "", &["a"])];
        rounds.keep_calls_that_ran(0);
        assert!(rounds.steps.is_empty(), "a message that said nothing and called nothing goes");
    }
}
