//! OpenAI-compatible routes, so that OpenAI's own client libraries talk to Agentry's agents:
//! `POST /chat/completions` and `GET /models` (under `/api/v1` and `/v1`). An agent is a model
//! (its id, or `agent:<name>`), an API key (or access token) the bearer; credits, plans and
//! scopes apply as to chat. Errors on these routes have OpenAI's shape
//! (`{"error": {"message", "type", "param", "code"}}`) with Agentry's statuses.
//!
//! A call is stateless, as OpenAI's are: the agent's system prompt, then the client's
//! messages. The header `X-Session-Id` names a session in which the exchange is then stored, as
//! chat stores it.

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::agents::{
    AgentConfig, ChatReply, ChatRole, ChatTurn, ClientConversation, DeltaSink, FinishReason,
    MAX_MESSAGE_CHARS, ToolCall, ToolSpec,
};
use agentry_domain::ids::SessionId;
use agentry_domain::validation::{FieldError, FieldErrorKind, Validator, check_long_text};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::ApiError;
use crate::extract::{JsonBody, JsonInt};
use crate::sse::{self, SseEvent, SseSender};

mod answer;
pub use answer::{
    Annotation, AssistantMessage, ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice, ChunkDelta,
    ChunkToolCall, CompletionUsage, FileCitation, OutputFunction, OutputToolCall,
};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/chat/completions").route(web::post().to(completions)))
        .service(web::resource("/models").route(web::get().to(models)));
}

/// Whether `path` is one of these routes, whose errors take OpenAI's shape.
pub fn is_openai_path(path: &str) -> bool {
    let rest = path.strip_prefix("/api/v1").or_else(|| path.strip_prefix("/v1"));
    matches!(rest, Some("/chat/completions" | "/models"))
}

/// Most messages of one call.
const MAX_MESSAGES: usize = 500;

/// A message of the conversation the client sends.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InputMessage {
    /// `system` (or `developer`), `user`, `assistant` or `tool`.
    #[schema(required = true, value_type = String, pattern = "^(system|developer|user|assistant|tool)$", example = "user")]
    pub role: Option<String>,
    /// The text (up to 32,000 characters; tabs and line breaks allowed, other control
    /// characters not). A list of `{"type": "text", "text": …}` parts is read as their texts
    /// joined. May be null on an assistant message that calls tools.
    #[schema(required = true, value_type = String, max_length = 32000,
        extensions(("x-text" = json!("long-text"))), example = "Hello!")]
    pub content: Option<Value>,
    /// On an assistant message: the tools it called.
    #[schema(value_type = Option<Vec<OutputToolCall>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// On a `tool` message: the call it answers.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub tool_call_id: Option<String>,
}

/// A tool the client offers: `{"type": "function", "function": {name, description, parameters}}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InputTool {
    /// Always `function`.
    #[schema(required = true, value_type = String, pattern = "^function$")]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The function.
    #[schema(required = true, value_type = InputFunction)]
    pub function: Option<InputFunction>,
}

/// A function the model may call.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InputFunction {
    /// `[A-Za-z0-9_-]{1,64}`.
    #[schema(required = true, value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: Option<String>,
    /// What it does.
    #[schema(max_length = 1000, extensions(("x-text" = json!("long-text"))))]
    pub description: Option<String>,
    /// Its arguments, a JSON Schema object.
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<serde_json::Map<String, Value>>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Adds a last chunk with the call's usage (and no choices) before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// OpenAI's chat completion request; fields not listed are accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CompletionRequest {
    /// An agent's id, or `agent:<name>`.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 200,
        extensions(("x-text" = json!("line"))), example = "agent:Support bot")]
    pub model: Option<String>,
    /// The conversation, oldest first; at least one message of role `user`.
    #[schema(required = true, value_type = Vec<InputMessage>, min_items = 1, max_items = 500)]
    pub messages: Option<Vec<InputMessage>>,
    /// Stream `chat.completion.chunk` events, then `data: [DONE]`.
    pub stream: Option<bool>,
    /// Options of a streamed answer.
    pub stream_options: Option<StreamOptions>,
    /// Longest reply in tokens (never above the agent's own `max_tokens`).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 32000)]
    pub max_tokens: Option<JsonInt>,
    /// The newer name of `max_tokens`; wins when both are sent.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 32000)]
    pub max_completion_tokens: Option<JsonInt>,
    /// Sampling temperature, 0–2, in place of the agent's.
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    /// Tools the client runs: a call of one ends the completion with `tool_calls` (and
    /// `finish_reason: "tool_calls"`) for the client to answer in its next request. The
    /// agent's own tools run inside the call.
    #[schema(value_type = Option<Vec<InputTool>>, max_items = 32)]
    pub tools: Option<Vec<InputTool>>,
    /// `none` offers the client's tools to nobody; `auto`, `required` or a named function
    /// (`{"type": "function", "function": {"name": …}}`) let the model choose.
    #[schema(schema_with = crate::schemas::tool_choice)]
    pub tool_choice: Option<Value>,
}

impl CompletionRequest {
    fn try_into_domain(
        self,
        session_id: Option<SessionId>,
    ) -> Result<(String, ClientConversation), ApiError> {
        let mut v = Validator::new();
        let model = v.required("model", self.model, |m| {
            if m.trim().is_empty() {
                Err(FieldError::new("model", FieldErrorKind::TooShort, "model must name an agent"))
            } else {
                Ok(m)
            }
        });
        // Nested: an error names the message and its field (`messages[2].role`).
        let turns = v.check_nested(self.messages.ok_or_else(|| FieldError::missing("messages")).and_then(
            |messages| {
                if messages.is_empty() || messages.len() > MAX_MESSAGES {
                    return Err(FieldError::new(
                        "messages",
                        FieldErrorKind::InvalidValue,
                        format!("messages must hold 1 to {MAX_MESSAGES} messages"),
                    ));
                }
                messages.into_iter().enumerate().map(|(i, m)| turn(i, m)).collect::<Result<Vec<_>, _>>()
            },
        ));
        let max_tokens = self.max_completion_tokens.or(self.max_tokens);
        let field = if self.max_completion_tokens.is_some() { "max_completion_tokens" } else { "max_tokens" };
        let max_tokens = v.optional(field, max_tokens, |n| AgentConfig::max_tokens(n.0));
        let temperature = v.optional("temperature", self.temperature, AgentConfig::temperature);
        // A tool message names only its call: its tool is the call's.
        let turns = turns.map(|mut turns: Vec<ChatTurn>| {
            let calls: Vec<ToolCall> = turns.iter().flat_map(|t| t.tool_calls.clone()).collect();
            for t in turns.iter_mut().filter(|t| t.role == ChatRole::Tool) {
                t.name =
                    calls.iter().find(|c| Some(&c.id) == t.tool_call_id.as_ref()).map(|c| c.name.clone());
            }
            turns
        });
        let tools = v.check_nested(client_tools(self.tools.unwrap_or_default()));
        let offer = match self.tool_choice {
            None | Some(Value::Null) | Some(Value::Object(_)) => true,
            Some(Value::String(c)) if matches!(c.as_str(), "auto" | "required") => true,
            Some(Value::String(c)) if c == "none" => false,
            Some(_) => {
                v.push(FieldError::new(
                    "tool_choice",
                    FieldErrorKind::InvalidValue,
                    "tool_choice is none, auto, required or a function object",
                ));
                true
            }
        };
        let (model, turns, max_tokens, temperature, tools) =
            v.finish((model, turns, max_tokens, temperature, tools))?;
        let tools = if offer { tools } else { Vec::new() };
        Ok((model, ClientConversation { turns, session_id, max_tokens, temperature, tools }))
    }
}

/// Most tools a client offers.
const MAX_CLIENT_TOOLS: usize = 32;

/// The client's tools as the model is told about them; fields named `tools[i].function.name`.
fn client_tools(tools: Vec<InputTool>) -> Result<Vec<ToolSpec>, FieldError> {
    if tools.len() > MAX_CLIENT_TOOLS {
        return Err(FieldError::new(
            "tools",
            FieldErrorKind::InvalidValue,
            format!("tools holds at most {MAX_CLIENT_TOOLS} tools"),
        ));
    }
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    for (i, tool) in tools.into_iter().enumerate() {
        let at = |f: &str| format!("tools[{i}].{f}");
        if tool.kind.as_deref() != Some("function") {
            return Err(FieldError::new(
                at("type"),
                FieldErrorKind::InvalidValue,
                "only tools of type function are understood",
            ));
        }
        let function = tool.function.ok_or_else(|| FieldError::missing(at("function")))?;
        let name = function.name.ok_or_else(|| FieldError::missing(at("function.name")))?;
        let name = agentry_domain::agents::tools::tool_name(&name, &at("function.name"))?;
        if specs.iter().any(|s| s.name == name) {
            return Err(FieldError::new(
                at("function.name"),
                FieldErrorKind::InvalidValue,
                format!("two tools are named {name:?}"),
            ));
        }
        let description = function.description.unwrap_or_default();
        check_long_text(
            &description,
            0,
            agentry_domain::agents::tools::MAX_TOOL_DESCRIPTION_CHARS,
            &at("function.description"),
        )?;
        let parameters = function
            .parameters
            .map_or_else(|| serde_json::json!({"type": "object", "properties": {}}), Value::Object);
        agentry_domain::validation::check_json_text(&parameters, &at("function.parameters"))?;
        specs.push(ToolSpec { name, description, parameters });
    }
    Ok(specs)
}

/// A tool call in a client's assistant message: `{id, type: "function", function: {name, arguments}}`.
fn client_call(raw: &Value, at: &str) -> Result<ToolCall, FieldError> {
    let text = |v: Option<&Value>, f: &str| {
        v.and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
            FieldError::new(
                format!("{at}.{f}"),
                FieldErrorKind::InvalidValue,
                format!("{at}.{f} must be a string"),
            )
        })
    };
    let function = raw.get("function");
    let call = ToolCall {
        id: text(raw.get("id"), "id")?,
        name: text(function.and_then(|f| f.get("name")), "function.name")?,
        arguments: text(function.and_then(|f| f.get("arguments")), "function.arguments")?,
    };
    check_long_text(&call.arguments, 0, MAX_MESSAGE_CHARS, &format!("{at}.function.arguments"))?;
    check_long_text(&call.id, 1, 200, &format!("{at}.id"))?;
    Ok(call)
}

/// One message as a turn of the domain's conversation; its field is `messages[i]`.
fn turn(i: usize, message: InputMessage) -> Result<ChatTurn, FieldError> {
    let field = format!("messages[{i}]");
    let invalid = |what: &str, message: String| {
        FieldError::new(format!("{field}.{what}"), FieldErrorKind::InvalidValue, message)
    };
    let role = match message.role.as_deref() {
        Some("system" | "developer") => ChatRole::System,
        Some("user") => ChatRole::User,
        Some("assistant") => ChatRole::Assistant,
        Some("tool") => ChatRole::Tool,
        Some(other) => {
            return Err(invalid(
                "role",
                format!("role {other:?} is not one of system, developer, user, assistant, tool"),
            ));
        }
        None => return Err(FieldError::missing(format!("{field}.role"))),
    };
    let content = match message.content {
        Some(Value::String(text)) => text,
        // Parts: their texts, joined; other kinds (images, audio) are not understood.
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    _ => return Err(invalid("content", "only parts of type text are understood".into())),
                }
            }
            text
        }
        Some(Value::Null) | None if role == ChatRole::Assistant => String::new(),
        _ => return Err(invalid("content", "content must be a string or a list of text parts".into())),
    };
    check_long_text(&content, 0, MAX_MESSAGE_CHARS, &format!("{field}.content"))?;
    let mut turn = ChatTurn::new(role, content);
    if let Some(calls) = message.tool_calls {
        if role != ChatRole::Assistant {
            return Err(invalid("tool_calls", "only an assistant message calls tools".into()));
        }
        turn.tool_calls = calls
            .iter()
            .enumerate()
            .map(|(j, c)| client_call(c, &format!("{field}.tool_calls[{j}]")))
            .collect::<Result<_, _>>()?;
    }
    if let Some(id) = &message.tool_call_id {
        check_long_text(id, 1, 200, &format!("{field}.tool_call_id"))?;
    }
    if role == ChatRole::Tool {
        let id = message.tool_call_id.ok_or_else(|| FieldError::missing(format!("{field}.tool_call_id")))?;
        turn.tool_call_id = Some(id);
    }
    Ok(turn)
}

fn finish_reason(finish: FinishReason) -> &'static str {
    match finish {
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Stop | FinishReason::Cancelled => "stop",
    }
}

fn usage(reply: &ChatReply) -> CompletionUsage {
    let m = &reply.message;
    CompletionUsage {
        prompt_tokens: m.prompt_tokens,
        completion_tokens: m.completion_tokens,
        total_tokens: m.prompt_tokens + m.completion_tokens,
    }
}

/// Create a chat completion with an agent, as OpenAI's API does (`model` = the agent).
#[utoipa::path(
    post, path = "/api/v1/chat/completions", tag = "openai", operation_id = "createChatCompletion",
    security(("bearer" = [])),
    params(("X-Session-Id" = Option<String>, Header, pattern = r"^[A-Za-z0-9_.:-]{1,128}$",
        description = "Store the exchange in this session (as chat does); absent, the call is stateless")),
    request_body = CompletionRequest,
    responses(
        (status = 200, description = "The completion; streamed, its chunks then `data: [DONE]`", content(
            (ChatCompletion = "application/json"),
            (ChatCompletionChunk = "text/event-stream"),
        )),
        (status = 401, description = "OpenAI's error shape, code `invalid_api_key`"),
        (status = 402, description = "OpenAI's error shape, type and code `insufficient_quota`"),
        (status = 404, description = "OpenAI's error shape, code `model_not_found`: no such agent"),
        (status = 422, description = "OpenAI's error shape, type `invalid_request_error`, `param` names the field"),
        (status = 429, description = "OpenAI's error shape, code `rate_limit_exceeded`, with `Retry-After`"),
    )
)]
pub async fn completions(
    state: web::Data<AppState>,
    caller: Caller,
    request: HttpRequest,
    body: JsonBody<CompletionRequest>,
) -> Result<HttpResponse, ApiError> {
    let session_id = match request.headers().get("x-session-id") {
        None => None,
        Some(raw) => Some(raw.to_str().ok().and_then(|s| SessionId::parse(s).ok()).ok_or_else(|| {
            ApiError::field(
                "X-Session-Id",
                FieldErrorKind::InvalidValue,
                "X-Session-Id must be 1–128 characters of letters, digits and . _ : -",
            )
        })?),
    };
    let body = body.0;
    let streamed = body.stream.unwrap_or(false);
    let include_usage = body.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let (model, conversation) = body.try_into_domain(session_id)?;
    let agent = state.agents.by_model(&caller, &model).await.map_err(|e| match e {
        agentry_domain::agents::AgentError::NotFound => {
            ApiError::not_found(format!("the model {model:?} is not an agent of your tenant"))
        }
        other => other.into(),
    })?;
    let prepared = state.chat.prepare_conversation(&caller, &agent.id, conversation).await?;
    let meta = ChunkMeta {
        id: format!("chatcmpl-{}", prepared.hold_id()),
        created: state.clock.now().timestamp(),
        model,
    };
    if !streamed {
        let reply = prepared.answer(None).await?;
        // OpenAI's clients read the completion bare, whatever envelope the rest of the API uses.
        return Ok(HttpResponse::Ok().json(ChatCompletion {
            id: meta.id,
            object: "chat.completion",
            created: meta.created,
            model: meta.model,
            usage: usage(&reply),
            choices: vec![Choice {
                index: 0,
                finish_reason: finish_reason(reply.finish),
                message: AssistantMessage {
                    role: "assistant",
                    tool_calls: reply.message.tool_calls.iter().map(OutputToolCall::from).collect(),
                    annotations: reply.message.citations.iter().map(Annotation::from).collect(),
                    content: Some(reply.message.content)
                        .filter(|c| !c.is_empty() || reply.message.tool_calls.is_empty()),
                },
            }],
        }));
    }
    let (events, response) = sse::channel(sse::KEEP_ALIVE);
    events.send(meta.chunk(
        ChunkDelta { role: Some("assistant"), content: Some(String::new()), ..ChunkDelta::default() },
        None,
    ));
    actix_web::rt::spawn(async move {
        let deltas = Arc::new(ChunkDeltas { events: events.clone(), meta: meta.clone() });
        match prepared.answer(Some(deltas)).await {
            Ok(reply) => {
                if !reply.message.tool_calls.is_empty() {
                    let tool_calls = (0..)
                        .zip(&reply.message.tool_calls)
                        .map(|(index, c)| ChunkToolCall { index, call: OutputToolCall::from(c) })
                        .collect();
                    events.send(meta.chunk(ChunkDelta { tool_calls, ..ChunkDelta::default() }, None));
                }
                // The citations come with the last chunk: the reply is whole then.
                let annotations = reply.message.citations.iter().map(Annotation::from).collect();
                events.send(meta.chunk(
                    ChunkDelta { annotations, ..ChunkDelta::default() },
                    Some(finish_reason(reply.finish)),
                ));
                if include_usage {
                    events.send(SseEvent::data(&ChatCompletionChunk {
                        choices: Vec::new(),
                        usage: Some(usage(&reply)),
                        ..meta.base()
                    }));
                }
            }
            Err(e) => {
                let e = ApiError::from(e);
                e.log();
                events.send(SseEvent::data(&e.openai_body()));
            }
        }
        events.send(SseEvent::raw("[DONE]"));
    });
    Ok(response)
}

/// What every chunk of a call repeats.
#[derive(Debug, Clone)]
struct ChunkMeta {
    id: String,
    created: i64,
    model: String,
}

impl ChunkMeta {
    fn base(&self) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices: Vec::new(),
            usage: None,
        }
    }

    fn chunk(&self, delta: ChunkDelta, finish_reason: Option<&'static str>) -> SseEvent {
        SseEvent::data(&ChatCompletionChunk {
            choices: vec![ChunkChoice { index: 0, delta, finish_reason }],
            ..self.base()
        })
    }
}

/// A reply's pieces as chunks.
struct ChunkDeltas {
    events: SseSender,
    meta: ChunkMeta,
}

impl DeltaSink for ChunkDeltas {
    /// The agent's own tools are not shown to the client; a client that left stops them.
    fn tool_call(&self, _call: &agentry_domain::agents::ToolCall) -> bool {
        self.events.is_open()
    }

    fn delta(&self, text: &str) -> bool {
        self.events.send(
            self.meta.chunk(ChunkDelta { content: Some(text.to_owned()), ..ChunkDelta::default() }, None),
        )
    }
}

/// One model: an agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct Model {
    /// The agent's id (`agent:<name>` names it too).
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// Unix seconds of the agent's creation.
    pub created: i64,
    /// The tenant.
    pub owned_by: String,
}

/// The models: the tenant's active agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// Oldest first.
    pub data: Vec<Model>,
}

/// List the models, as OpenAI's API does: the tenant's active agents.
#[utoipa::path(
    get, path = "/api/v1/models", tag = "openai", operation_id = "listModels",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The tenant's active agents", body = ModelList),
        (status = 401, description = "OpenAI's error shape, code `invalid_api_key`"),
    )
)]
pub async fn models(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse, ApiError> {
    let agents = state.agents.all(&caller).await?;
    let data = agents
        .into_iter()
        .filter(|a| a.status == agentry_domain::agents::AgentStatus::Active)
        .map(|a| Model {
            id: a.id.into_string(),
            object: "model",
            created: a.created_at.timestamp(),
            owned_by: a.tenant_id.into_string(),
        })
        .collect();
    Ok(HttpResponse::Ok().json(ModelList { object: "list", data }))
}
