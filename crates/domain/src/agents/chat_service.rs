//! Chat's requests: a message to an agent (with its history and memory) or a conversation the
//! client sends whole, checked, its prompt built and its credits held, ready to be answered
//! (`answer`); and a conversation's history.

use std::sync::Arc;

use super::answer::PreparedChat;
use super::chat::{ChatRole, ChatTurn, CompletionRequest, Message, ToolSpec, count_request};
use super::chat_api::{
    ChatError, ChatInput, ChatReply, ChatService, ChatServiceDeps, ChatSettings, ClientConversation,
    affordable_completion,
};
use super::knowledge_config::KnowledgeMode;
use super::model::{Agent, AgentStatus};
use super::ports::StoredExchange;
use super::prompt::{build_prompt, memory_turn, system_turn};
use super::providers::ToolProvider;
use super::registry::Toolbox;
use super::sources::{Source, Sources, fit_sources, sources_turn, with_sources};
use crate::billing::{HoldRequest, chat_cost};
use crate::ids::{AgentId, CreditHoldId, MessageId, SessionId};
use crate::pagination::Page;
use crate::tenancy::{Permission, Principal};
use crate::validation::{FieldError, FieldErrorKind, ValidationErrors};

/// The tools a model is offered: the agent's own, and those the client runs itself.
struct Offered {
    toolbox: Toolbox,
    clients: Vec<ToolSpec>,
}

/// How long and how freely a reply may be.
struct ReplyLimits {
    max_tokens: Option<u32>,
    temperature: Option<f64>,
}

impl ChatService {
    /// A service over `deps` with `settings`.
    pub fn new(deps: ChatServiceDeps, settings: ChatSettings) -> Self {
        Self { deps, settings }
    }

    /// This service with one more kind of tool. A provider that needs what is built after
    /// chat (the executions, whose steps chat) is added where both exist, so that nothing
    /// holds chat through its own tools.
    #[must_use]
    pub fn with_tools(&self, provider: Arc<dyn ToolProvider>) -> Self {
        let mut deps = self.deps.clone();
        deps.tools = deps.tools.with(provider);
        Self { deps, settings: self.settings.clone() }
    }

    /// The tools `agent` offers its model in a chat with `caller`: none when it may run no
    /// round of them.
    async fn toolbox(&self, agent: &Agent, caller: &Principal) -> Toolbox {
        if agent.config.max_tool_rounds == Some(0) {
            return Toolbox::default();
        }
        self.deps.tools.toolbox(agent, caller).await
    }

    /// Sends `input` to an agent: holds the most the exchange can cost, asks the model, then
    /// stores both messages, the charge and the events in one transaction. When the balance
    /// covers the prompt but not the agent's whole `max_tokens`, the reply is capped at what the
    /// balance pays, so the last credits can be spent; 402 comes, before the model is called,
    /// only when not even the prompt and one token of reply are covered. A model failure
    /// releases the hold and stores nothing.
    ///
    /// # Errors
    /// See [`ChatError`].
    pub async fn chat(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: ChatInput,
    ) -> Result<ChatReply, ChatError> {
        self.prepare(caller, agent_id, input).await?.answer(None).await
    }

    /// The first half of [`ChatService::chat`]: every check, the prompt and the credit hold,
    /// so that a streamed reply can refuse with an ordinary answer (401, 402, 404, 409, 422)
    /// before its stream begins. The prepared chat holds credits until it is answered.
    ///
    /// # Errors
    /// See [`ChatError`].
    pub async fn prepare(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        input: ChatInput,
    ) -> Result<PreparedChat, ChatError> {
        let agent = self.active_agent(caller, agent_id).await?;
        let d = &self.deps;
        // A client's own id continues its conversation, or starts it on first use.
        let (session_id, history) = match input.session_id {
            Some(session) => {
                let history = d
                    .conversations
                    .recent(&caller.tenant_id, &agent.id, &session, self.settings.history_messages)
                    .await?;
                (session, history)
            }
            None => (SessionId::generate(d.ids.as_ref()), Vec::new()),
        };
        let memories = d.memory.recall(&agent, &input.message).await?;
        let sources = self.sources(&agent, &input.message).await?;
        let blocks = d.blocks.list(&agent.tenant_id, &agent.id).await?;
        let turns = build_prompt(
            system_turn(&agent, &blocks),
            &memories,
            &history,
            &input.message,
            d.tokens.as_ref(),
            self.settings.history_token_budget,
        );
        let turns = with_sources(turns, &sources);
        let limits =
            ReplyLimits { max_tokens: agent.config.max_tokens, temperature: agent.config.temperature };
        let toolbox = self.toolbox(&agent, caller).await;
        let offered = Offered { toolbox, clients: Vec::new() };
        let mut prepared =
            self.hold(caller, agent, session_id, input.message, turns, offered, limits).await?;
        prepared.sources = Sources(sources);
        Ok(prepared)
    }

    /// Prepares a reply to a conversation the client sends whole, as OpenAI's chat completions
    /// do: the agent's system prompt first, then what it remembers that bears on the last user
    /// turn (as `/agents/{id}/chat` recalls it), then the client's turns; no stored history is
    /// added (the client sends the conversation). With a session id, the last user turn and the reply are stored in that session as
    /// chat stores them; without, only the charge and the events are (a stateless call).
    ///
    /// # Errors
    /// As [`ChatService::prepare`]; [`ChatError::Invalid`] when no turn is the user's.
    pub async fn prepare_conversation(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        conversation: ClientConversation,
    ) -> Result<PreparedChat, ChatError> {
        let agent = self.active_agent(caller, agent_id).await?;
        let d = &self.deps;
        let Some(last_user) = conversation.turns.iter().rev().find(|t| t.role == ChatRole::User) else {
            return Err(ValidationErrors(vec![FieldError::new(
                "messages",
                FieldErrorKind::InvalidValue,
                "messages must hold at least one message of role user",
            )])
            .into());
        };
        let message = last_user.content.clone();
        let toolbox = self.toolbox(&agent, caller).await;
        for (i, tool) in conversation.tools.iter().enumerate() {
            if toolbox.offers(&tool.name) {
                return Err(ValidationErrors(vec![FieldError::new(
                    format!("tools[{i}].function.name"),
                    FieldErrorKind::InvalidValue,
                    format!("the agent has a tool of its own named {:?}; name yours otherwise", tool.name),
                )])
                .into());
            }
        }
        // What the agent remembers, as on `/agents/{id}/chat`: the client sends the conversation,
        // the agent brings its memory.
        let memories = d.memory.recall(&agent, &message).await?;
        let sources = self.sources(&agent, &message).await?;
        let blocks = d.blocks.list(&agent.tenant_id, &agent.id).await?;
        let mut turns = vec![system_turn(&agent, &blocks)];
        turns.extend(memory_turn(&memories));
        turns.extend(sources_turn(&sources));
        turns.extend(conversation.turns);
        let keep_conversation = conversation.session_id.is_some();
        let session_id = conversation.session_id.unwrap_or_else(|| SessionId::generate(d.ids.as_ref()));
        // The client may ask for less than the agent allows, never more.
        let max_tokens = match (conversation.max_tokens, agent.config.max_tokens) {
            (Some(asked), Some(allowed)) => Some(asked.min(allowed)),
            (asked, allowed) => asked.or(allowed),
        };
        let limits =
            ReplyLimits { max_tokens, temperature: conversation.temperature.or(agent.config.temperature) };
        let offered = Offered { toolbox, clients: conversation.tools };
        let mut prepared = self.hold(caller, agent, session_id, message, turns, offered, limits).await?;
        prepared.keep_conversation = keep_conversation;
        prepared.sources = Sources(sources);
        Ok(prepared)
    }

    /// The passages of the agent's knowledge bases that go into the prompt as numbered sources
    /// (`auto` mode), the best first, as many as fit its `max_context_tokens`.
    async fn sources(&self, agent: &Agent, message: &str) -> anyhow::Result<Vec<Source>> {
        let knowledge = &agent.config.knowledge;
        if knowledge.mode != KnowledgeMode::Auto || agent.config.knowledge_bases.is_empty() {
            return Ok(Vec::new());
        }
        let d = &self.deps;
        let found = d.knowledge.sources(agent, message, usize::from(knowledge.top_k)).await?;
        Ok(fit_sources(found, d.tokens.as_ref(), u64::from(knowledge.max_context_tokens), 1))
    }

    /// The caller's agent that may chat: 403 without `agents:write`, 404 when absent, 409 when
    /// paused.
    async fn active_agent(&self, caller: &Principal, agent_id: &AgentId) -> Result<Agent, ChatError> {
        caller.require(Permission::AgentsWrite)?;
        let agent =
            self.deps.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        if agent.status == AgentStatus::Paused {
            return Err(ChatError::AgentPaused);
        }
        Ok(agent)
    }

    /// Holds the most a reply to `turns` can cost, or refuses with 402 when not even the
    /// prompt and one token of reply are covered.
    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        caller: &Principal,
        agent: Agent,
        session_id: SessionId,
        message: String,
        turns: Vec<ChatTurn>,
        offered: Offered,
        limits: ReplyLimits,
    ) -> Result<PreparedChat, ChatError> {
        let d = &self.deps;
        let Offered { toolbox, clients } = offered;
        let mut tools = toolbox.specs();
        tools.extend(clients);
        let prompt_tokens = count_request(d.tokens.as_ref(), &turns, &tools);
        let max_tokens = limits.max_tokens.unwrap_or(self.settings.default_max_tokens);
        let request = HoldRequest {
            id: CreditHoldId::generate(d.ids.as_ref()),
            tenant_id: caller.tenant_id.clone(),
            wanted: chat_cost(prompt_tokens + u64::from(max_tokens)),
            minimum: chat_cost(prompt_tokens + 1),
            created_at: d.clock.now(),
        };
        let Some(hold) = d.credits.hold(&request).await? else {
            return Err(ChatError::InsufficientCredits { needed: request.minimum });
        };
        let affordable = affordable_completion(hold.amount, prompt_tokens);
        let request = CompletionRequest {
            model: agent.config.model.clone().unwrap_or_else(|| self.settings.default_model.clone()),
            temperature: limits.temperature,
            max_tokens: u32::try_from(affordable).unwrap_or(u32::MAX).min(max_tokens),
            messages: turns,
            tools,
            response_schema: None,
        };
        Ok(PreparedChat {
            service: self.clone(),
            caller: caller.clone(),
            agent,
            session_id,
            message,
            request,
            max_tokens,
            hold,
            toolbox,
            keep_conversation: true,
            sources: Sources::default(),
        })
    }

    /// The stored exchange that `reply` (the agent's message) ended: what memory learned a fact
    /// from; `None` when it is not stored.
    ///
    /// # Errors
    /// [`ChatError::AgentNotFound`], [`ChatError::Forbidden`].
    pub async fn learned_from(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        reply: &MessageId,
    ) -> Result<Option<StoredExchange>, ChatError> {
        caller.require(Permission::AgentsRead)?;
        let d = &self.deps;
        d.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        Ok(d.conversations.exchange_of(&caller.tenant_id, agent_id, reply).await?)
    }

    /// A page of a conversation with an agent.
    ///
    /// # Errors
    /// [`ChatError::AgentNotFound`], [`ChatError::SessionNotFound`], [`ChatError::Forbidden`].
    pub async fn history(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        session: &SessionId,
        page: Page,
    ) -> Result<(Vec<Message>, u64), ChatError> {
        caller.require(Permission::AgentsRead)?;
        let d = &self.deps;
        d.agents.get(&caller.tenant_id, agent_id).await?.ok_or(ChatError::AgentNotFound)?;
        d.conversations
            .page(&caller.tenant_id, agent_id, session, page)
            .await?
            .ok_or(ChatError::SessionNotFound)
    }
}

#[cfg(test)]
mod citation_tests;
#[cfg(test)]
mod tests;
