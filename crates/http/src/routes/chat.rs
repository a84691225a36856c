//! `/agents/{id}/chat` and the conversations' history: an agent's replies, whole or streamed as
//! server-sent events, and the messages of a session.

use std::sync::Arc;

use actix_web::{Either, HttpRequest, HttpResponse, web};
use agentry_domain::agents::{
    ChatInput, ChatReply, Citation, DeltaSink, Message, ToolCall, ToolResult, chat_message,
};
use agentry_domain::ids::SessionId;
use agentry_domain::validation::{ValidationErrors, Validator};
use agentry_domain::workflows::outputs::ChatOutput;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::agents::{PageQuery, agent_id, first_error};
use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, QueryParams};
use crate::reply::{Reply, timestamp};
use crate::sse::{self, SseEvent, SseSender};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/agents/{agent_id}/chat").route(web::post().to(chat))).service(
        web::resource("/agents/{agent_id}/sessions/{session_id}/messages").route(web::get().to(messages)),
    );
}

/// A chat message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatRequest {
    /// 1–32,000 characters, not blank; tabs and line breaks allowed.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 32000,
        extensions(("x-text" = json!("message"))), example = "How do I reset my password?")]
    pub message: Option<String>,
    /// The conversation: your own id (1–128 characters of letters, digits and `. _ : -`),
    /// created on first use and continued after; or a `ses_…` id the service returned. Omit to
    /// start a new conversation with a new id.
    #[schema(extensions(("x-text" = json!("session-id"))), example = "user-42:support")]
    pub session_id: Option<String>,
    /// `true` streams the reply as server-sent events (as does `Accept: text/event-stream`).
    #[serde(default, deserialize_with = "not_null_bool")]
    #[schema(value_type = bool)]
    pub stream: Option<bool>,
}

fn not_null_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(Some(bool::deserialize(d)?))
}

impl ChatRequest {
    pub(crate) fn try_into_domain(self) -> Result<ChatInput, ValidationErrors> {
        let mut v = Validator::new();
        let message = v.required("message", self.message, chat_message);
        let session_id = v.optional("session_id", self.session_id, |s| SessionId::parse(&s));
        let (message, session_id) = v.finish((message, session_id))?;
        Ok(ChatInput { message, session_id })
    }
}

/// Token usage of an exchange.
#[derive(Debug, Serialize, ToSchema)]
pub struct Usage {
    /// Tokens of the prompt (system prompt, memories, history, message).
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

/// Credits of an exchange.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCredits {
    /// Charged for this exchange: one per started 1,000 tokens, at least one.
    pub charged: i64,
    /// The tenant's balance after it.
    pub remaining: i64,
}

/// An agent's reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatResponse {
    /// Message id of the reply.
    pub id: String,
    /// The reply.
    pub content: String,
    /// Always `assistant`.
    pub role: &'static str,
    /// Token usage.
    pub usage: Usage,
    /// When the reply was made.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// The conversation; send it back to continue.
    pub session_id: String,
    /// Credits charged and left.
    pub credits: ChatCredits,
    /// The sources of the agent's knowledge bases the reply refers to as `[1]`; empty when it
    /// cites none.
    pub citations: Vec<CitationResponse>,
    /// Why the model stopped: `stop` (it ended its answer), `length` (cut off at the token
    /// limit: the agent's `config.max_tokens`, or what the credits cover), `tool_calls` (the
    /// round limit of tool calls was reached) or `cancelled` (a streaming client left).
    #[schema(example = "stop")]
    pub finish_reason: &'static str,
}

/// A source a reply cites: a chunk of a file of the agent's knowledge bases. Also the data of a
/// streamed reply's `citation` event.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CitationResponse {
    /// The number the reply refers to it by (`[1]`).
    pub index: u32,
    /// The cited chunk (`GET /knowledge-bases/{id}/files/{file_id}/chunks` lists it).
    pub chunk_id: String,
    /// Its file.
    pub file_id: String,
    /// The file's name.
    pub file_name: String,
    /// Its page, for PDF; null otherwise.
    pub page: Option<u32>,
    /// The chunk's beginning, up to 240 characters.
    pub snippet: String,
}

impl From<Citation> for CitationResponse {
    fn from(c: Citation) -> Self {
        Self {
            index: c.index,
            chunk_id: c.chunk_id.into_string(),
            file_id: c.file_id.into_string(),
            file_name: c.file_name,
            page: c.page,
            snippet: c.snippet,
        }
    }
}

/// The answer is made from the domain's view of a reply (what an `agent_chat` step outputs
/// too), so the two cannot tell it differently; this type documents it.
impl From<ChatReply> for ChatResponse {
    fn from(r: ChatReply) -> Self {
        let o = ChatOutput::from(r);
        let (u, c) = (o.usage, o.credits);
        Self {
            id: o.id,
            role: o.role,
            usage: Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                total_tokens: u.total_tokens,
            },
            content: o.content,
            created_at: o.created_at,
            session_id: o.session_id,
            credits: ChatCredits { charged: c.charged, remaining: c.remaining },
            finish_reason: o.finish_reason,
            citations: o.citations.into_iter().map(CitationResponse::from).collect(),
        }
    }
}

/// Send a message to an agent and get its reply, whole or streamed. When the balance covers
/// the prompt but not the agent's whole `max_tokens`, the reply is shortened to what the balance
/// pays.
///
/// Streamed (`"stream": true` or `Accept: text/event-stream`), the answer is a stream of
/// server-sent events: `message.delta` with each piece of the reply as it is generated,
/// `tool.call` and `tool.result` around each tool the agent runs, `citation` for each source
/// of its knowledge bases the reply cites, then `message.completed`
/// with the body the unstreamed answer has, or `error`; a `: keep-alive`
/// comment every 15 s of silence. Refusals found before the reply starts (401, 402, 404, 409,
/// 422, 429) are ordinary JSON answers. A client that leaves mid-stream ends the generation:
/// what was generated is stored, marked `incomplete`, and charged.
#[utoipa::path(
    post, path = "/api/v1/agents/{agent_id}/chat", tag = "agents", operation_id = "chatWithAgent",
    security(("bearer" = [])),
    params(("agent_id" = String, Path, description = "Agent id")),
    request_body = ChatRequest,
    responses(
        (status = 200, description = "The reply; streamed, its events", content(
            (ChatResponse = "application/json"),
            (ChatStreamEvent = "text/event-stream"),
        )),
        (status = 402, description = "`insufficient_credits`: not even the prompt is covered; the model was not called"),
        (status = 404, description = "`not_found`: no such agent in your tenant (also when it was deleted meanwhile)"),
        (status = 409, description = "`conflict`: the agent is paused"),
        (status = 502, description = "`upstream_error`: the model provider failed or timed out; nothing was charged"),
        (status = 503, description = "`model_busy`: the in-process model has as many replies running and queued as it takes; retry after `Retry-After`"),
    )
)]
pub async fn chat(
    state: web::Data<AppState>,
    caller: Caller,
    request: HttpRequest,
    path: web::Path<String>,
    body: JsonBody<ChatRequest>,
) -> Result<Either<Reply<ChatResponse>, HttpResponse>, ApiError> {
    let id = agent_id(path.into_inner())?;
    let streamed = body.0.stream.unwrap_or(false) || sse::accepts_event_stream(&request);
    let input = body.0.try_into_domain()?;
    if !streamed {
        let reply = state.chat.chat(&caller, &id, input).await?;
        return Ok(Either::Left(Reply::ok(reply.into())));
    }
    let prepared = state.chat.prepare(&caller, &id, input).await?;
    Ok(Either::Right(stream_reply(prepared)))
}

/// Answers a prepared chat as a stream of server-sent events (see [`chat`]); the console's
/// playground streams through here too.
pub(crate) fn stream_reply(prepared: agentry_domain::agents::PreparedChat) -> HttpResponse {
    let (events, response) = sse::channel(sse::KEEP_ALIVE);
    // The reply runs to its end apart from the response: a client that leaves stops the
    // generation (its deltas find nobody), and what was generated is still stored and charged.
    actix_web::rt::spawn(async move {
        let deltas = Arc::new(DeltaEvents(events.clone()));
        let last = match prepared.answer(Some(deltas)).await {
            Ok(reply) => {
                // The sources the reply cites, once it is whole (a `[1]` may come in any delta).
                for citation in &reply.message.citations {
                    events.send(SseEvent::named("citation", &CitationResponse::from(citation.clone())));
                }
                SseEvent::named("message.completed", &ChatResponse::from(reply))
            }
            Err(e) => SseEvent::named("error", &ApiError::from(e).event_data()),
        };
        events.send(last);
    });
    response
}

/// A reply's pieces as `message.delta` events.
struct DeltaEvents(SseSender);

impl DeltaSink for DeltaEvents {
    fn delta(&self, text: &str) -> bool {
        self.0.send(SseEvent::named("message.delta", &MessageDelta { content: text.to_owned() }))
    }

    fn tool_call(&self, call: &ToolCall) -> bool {
        self.0.send(SseEvent::named("tool.call", &ToolCallEvent::from(call)))
    }

    fn tool_result(&self, result: &ToolResult) {
        let (output, error) = match &result.output {
            Ok(output) => (Some(output.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        self.0.send(SseEvent::named(
            "tool.result",
            &ToolResultEvent { id: result.call_id.clone(), name: result.name.clone(), output, error },
        ));
    }
}

/// `tool.call`: the agent calls one of its tools (the call runs next). Also a stored
/// assistant message's `tool_calls`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ToolCallEvent {
    /// The call's id; its result names it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments, as the model wrote them (JSON text).
    pub arguments: String,
}

impl From<&ToolCall> for ToolCallEvent {
    fn from(c: &ToolCall) -> Self {
        Self { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() }
    }
}

/// `tool.result`: what a tool call gave, `output` or `error`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolResultEvent {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its output, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output: Option<serde_json::Value>,
    /// Why it failed, when it did (the model reads this too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `message.delta`: the next piece of the reply.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageDelta {
    /// Text to append to what came before.
    pub content: String,
}

/// `error`: the reply failed after the stream began (then the stream ends).
#[derive(Debug, Serialize, ToSchema)]
pub struct StreamError {
    /// The error code, as in JSON answers (`upstream_error`, `model_busy`, ...).
    pub error: String,
    /// What happened.
    pub message: String,
}

/// The data of one event of a streamed reply, by its `event:` name: `message.delta`
/// ([`MessageDelta`]), `tool.call`, `tool.result`, `citation` (one per source the reply cites,
/// after its last delta), `message.completed` (the unstreamed answer's body) or `error`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ChatStreamEvent {
    /// `message.delta`.
    Delta(MessageDelta),
    /// `tool.call`.
    ToolCall(ToolCallEvent),
    /// `tool.result`.
    ToolResult(ToolResultEvent),
    /// `citation`: a source the reply cites, after its last delta.
    Citation(CitationResponse),
    /// `message.completed`.
    Completed(ChatResponse),
    /// `error`.
    Error(StreamError),
}

/// A stored message.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageResponse {
    /// Message id.
    pub id: String,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The text; for a `tool` message, the tool's result as JSON text.
    pub content: String,
    /// For replies: the exchange's usage (every model call of it, on its final message);
    /// null for user and tool messages.
    pub usage: Option<Usage>,
    /// On an assistant message that called tools: the calls (their results follow).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallEvent>,
    /// On a `tool` message: the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// On a `tool` message: the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Present (`true`) on a streamed reply whose client left before its end: it holds what
    /// was generated until then, which was charged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
    /// On a reply that answered from the agent's knowledge bases: the sources it cites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub citations: Vec<CitationResponse>,
    /// On a reply: why the model stopped (`stop`, `length`, `tool_calls`, `cancelled`); absent
    /// on other messages and on replies stored before it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<&'static str>,
    /// When it was written.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<Message> for MessageResponse {
    fn from(m: Message) -> Self {
        // A message that only called tools on the way to the reply carries no usage: the
        // reply carries that of every model call.
        let replied = m.tool_calls.is_empty() || m.prompt_tokens + m.completion_tokens > 0;
        let usage = (m.role == agentry_domain::agents::ChatRole::Assistant && replied).then_some(Usage {
            prompt_tokens: m.prompt_tokens,
            completion_tokens: m.completion_tokens,
            total_tokens: m.prompt_tokens + m.completion_tokens,
        });
        Self {
            id: m.id.into_string(),
            role: m.role.as_str(),
            content: m.content,
            usage,
            tool_calls: m.tool_calls.iter().map(ToolCallEvent::from).collect(),
            tool_call_id: m.tool_call_id,
            name: m.tool_name,
            incomplete: m.incomplete,
            citations: m.citations.into_iter().map(CitationResponse::from).collect(),
            finish_reason: m.finish_reason.map(|f| f.as_str()),
            created_at: m.created_at,
        }
    }
}

/// A page of a conversation.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageList {
    /// Oldest first.
    pub messages: Vec<MessageResponse>,
    /// Messages in the conversation.
    pub total: u64,
    /// This page.
    pub page: u32,
    /// Page size.
    pub per_page: u32,
}

/// Read a conversation with an agent: by your own session id or a `ses_…` one.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/sessions/{session_id}/messages", tag = "agents",
    operation_id = "listSessionMessages",
    security(("bearer" = [])),
    params(
        ("agent_id" = String, Path, description = "Agent id"),
        ("session_id" = String, Path, description = "Session id", pattern = r"^[A-Za-z0-9_.:-]{1,128}$"),
        PageQuery,
    ),
    responses(
        (status = 200, description = "A page of the conversation", body = MessageList),
        (status = 404, description = "`not_found`: no such agent, or no such conversation with it"),
    )
)]
pub async fn messages(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    query: QueryParams<PageQuery>,
) -> Result<Reply<MessageList>, ApiError> {
    let (agent, session) = path.into_inner();
    let agent = agent_id(agent)?;
    let mut v = Validator::new();
    let session = v.check("session_id", SessionId::parse(&session));
    let page = v.check_nested(query.0.try_into_domain().map_err(first_error));
    let (session, page) = v.finish((session, page))?;
    let (messages, total) = state.chat.history(&caller, &agent, &session, page).await?;
    Ok(Reply::ok(MessageList {
        messages: messages.into_iter().map(MessageResponse::from).collect(),
        total,
        page: page.page,
        per_page: page.per_page,
    }))
}
