//! The OpenAPI 3.1 document, generated from the handlers' annotations and completed from what
//! the code does everywhere alike, so it tells the truth about every route:
//!
//! - every authenticated route (its annotation names the `bearer` scheme) answers 401, 403 and
//!   429, takes `tenant_id`, and carries the rate-limit headers; so does every route whose
//!   annotation says `x-rate-limit` (the unauthenticated auth routes, limited per address);
//! - a route with a body answers 413, 415 and the validation status; one with parameters
//!   answers the validation status; one with path parameters answers 404; every route may
//!   answer 500;
//! - every error has the error body of the configured envelope, every success is wrapped when
//!   the envelope is `wrapped`, and validation errors use the configured status (422 or 400);
//! - text fields carry the pattern of the rule the domain enforces (see [`crate::schemas`]);
//! - bearer tokens and an OAuth2 password flow at the login route, so the docs page's
//!   "Authorize" works; links between operations for stateful clients and testers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::{HttpResponse, web};
use serde_json::{Map, Value, json};
use utoipa::OpenApi;

use crate::routes::{
    agents, api_keys, auth, automations, billing, chat, executions, health, integrations, knowledge,
    mcp_servers, memory, openai, recovery, schedules, team, triggers, webhooks, workflows,
};
use crate::schemas;
use crate::settings::{Envelope, HttpSettings};

/// The API description. Every route joins it through its `#[utoipa::path]`.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Agentry API",
        description = "Multi-tenant platform for AI agents. Every route under `/api/v1` is also \
                       served under `/v1`. Authenticate with `Authorization: Bearer <token>` (an \
                       access token from login, or an API key).",
    ),
    paths(
        auth::register, auth::login, auth::me, auth::refresh, auth::logout,
        recovery::forgot_password, recovery::reset_password, recovery::request_magic_link,
        recovery::exchange_magic_link,
        api_keys::create, api_keys::list, api_keys::revoke,
        team::invite, team::list_invitations, team::revoke, team::list_members, team::change_role,
        team::remove, team::accept, automations::list, automations::take_over,
        agents::list, agents::create, agents::get, agents::update, agents::delete, agents::blocks::list,
        agents::blocks::put, agents::blocks::delete, agents::blocks::history, chat::chat,
        chat::messages, openai::completions, openai::models,
        memory::add, memory::list, memory::get, memory::history, memory::delete, memory::search, memory::add_documents,
        memory::delete_document, memory::consolidate, memory::store_upsert, memory::store_search,
        memory::store_get, memory::store_delete,
        knowledge::list, knowledge::create, knowledge::get, knowledge::update, knowledge::delete,
        knowledge::search_base, knowledge::search, knowledge::files::upload, knowledge::files::list,
        knowledge::files::get, knowledge::files::content, knowledge::files::chunks, knowledge::files::delete,
        billing::overview, billing::ledger, billing::purchase,
        webhooks::list, webhooks::create, webhooks::get, webhooks::update, webhooks::delete,
        webhooks::secret, webhooks::rotate_secret, webhooks::test, webhooks::deliveries, webhooks::attempts, webhooks::retry,
        webhooks::recover, webhooks::retry_all, webhooks::stats,
        workflows::list, workflows::create, workflows::get, workflows::update, workflows::delete,
        executions::execute, executions::list, executions::get, executions::cancel, executions::retry,
        triggers::list, triggers::create, triggers::delete,
        schedules::list, schedules::create, schedules::update, schedules::delete,
        mcp_servers::list, mcp_servers::create, mcp_servers::get, mcp_servers::update, mcp_servers::delete,
        mcp_servers::refresh,
        triggers::call_post, triggers::call_get, triggers::call_put, triggers::call_patch, triggers::call_delete,
        integrations::list, integrations::create, integrations::get, integrations::delete,
        integrations::receive,
        health::healthz, health::readyz, health::metrics,
    ),
    tags(
        (name = "auth", description = "Accounts and sessions"),
        (name = "api-keys", description = "Self-service API keys"),
        (name = "members", description = "Team members: invitations by e-mail, roles, removal"),
        (name = "agents", description = "Agents and chat"),
        (name = "mcp", description = "Remote MCP servers whose tools agents use"),
        (name = "memory", description = "Memory: Variant A (`/memory`) and Variant B (`/memory-stores/entries`)"),
        (name = "knowledge", description = "Knowledge bases: uploaded files, ingested into searchable chunks that agents cite"),
        (name = "billing", description = "Plan, credits, ledger and purchases"),
        (name = "webhooks", description = "Outbound webhook subscriptions, signed deliveries, the delivery log"),
        (name = "workflows", description = "Workflows: steps run in order, with templates; their trigger URLs"),
        (name = "integrations", description = "Inbound integrations: receivers of six kinds of services' signed events, each bound to a workflow"),
        (name = "operations", description = "Health and readiness"),
    )
)]
#[derive(Debug)]
pub struct ApiDoc;

const ERROR_SCHEMA: &str = "#/components/schemas/Error";

/// The response headers the document names: (name, description, JSON type).
const HEADERS: &[(&str, &str, &str)] = &[
    ("X-Request-Id", "The request's id: the client's, when it sent a sane one.", "string"),
    (
        "X-RateLimit-Limit",
        "Requests allowed in the current window (the minute's; the day's when the day's budget is spent).",
        "integer",
    ),
    ("X-RateLimit-Remaining", "Requests left in that window.", "integer"),
    ("X-RateLimit-Reset", "When that window ends, in Unix seconds.", "integer"),
    ("Retry-After", "Seconds to wait before trying again.", "integer"),
    ("WWW-Authenticate", "`Bearer`.", "string"),
];

/// A link from a response of one operation to another operation: `parameters` name where each
/// of its parameters comes from, `{data}` standing for the body's root (`/data` under the
/// wrapped envelope).
type Link = (&'static str, &'static str, &'static str, &'static str, &'static [(&'static str, &'static str)]);

/// Links between operations: (from, status, name, to, parameters).
const LINKS: &[Link] = &[
    ("createAgent", "201", "GetAgent", "getAgent", &[("agent_id", "$response.body#{data}/id")]),
    ("createAgent", "201", "UpdateAgent", "updateAgent", &[("agent_id", "$response.body#{data}/id")]),
    ("createAgent", "201", "DeleteAgent", "deleteAgent", &[("agent_id", "$response.body#{data}/id")]),
    ("createAgent", "201", "ChatWithAgent", "chatWithAgent", &[("agent_id", "$response.body#{data}/id")]),
    (
        "chatWithAgent",
        "200",
        "ListSessionMessages",
        "listSessionMessages",
        &[("agent_id", "$request.path.agent_id"), ("session_id", "$response.body#{data}/session_id")],
    ),
    ("addMemory", "201", "GetMemory", "getMemory", &[("memory_id", "$response.body#{data}/id")]),
    ("addMemory", "201", "DeleteMemory", "deleteMemory", &[("memory_id", "$response.body#{data}/id")]),
    (
        "upsertMemoryEntry",
        "201",
        "GetMemoryEntry",
        "getMemoryEntry",
        &[("entry_id", "$response.body#{data}/id")],
    ),
    (
        "upsertMemoryEntry",
        "201",
        "DeleteMemoryEntry",
        "deleteMemoryEntry",
        &[("entry_id", "$response.body#{data}/id")],
    ),
    (
        "addMemoryDocuments",
        "201",
        "DeleteMemoryDocument",
        "deleteMemoryDocument",
        &[("document_id", "$response.body#{data}/documents/0/id")],
    ),
    (
        "createKnowledgeBase",
        "201",
        "GetKnowledgeBase",
        "getKnowledgeBase",
        &[("knowledge_base_id", "$response.body#{data}/id")],
    ),
    ("createWebhook", "201", "GetWebhook", "getWebhook", &[("webhook_id", "$response.body#{data}/id")]),
    ("createWebhook", "201", "UpdateWebhook", "updateWebhook", &[("webhook_id", "$response.body#{data}/id")]),
    ("createWebhook", "201", "TestWebhook", "testWebhook", &[("webhook_id", "$response.body#{data}/id")]),
    (
        "createWebhook",
        "201",
        "ListWebhookDeliveries",
        "listWebhookDeliveries",
        &[("webhook_id", "$response.body#{data}/id")],
    ),
    ("createWebhook", "201", "DeleteWebhook", "deleteWebhook", &[("webhook_id", "$response.body#{data}/id")]),
    ("createApiKey", "201", "RevokeApiKey", "revokeApiKey", &[("key_id", "$response.body#{data}/id")]),
    (
        "createWorkflow",
        "201",
        "CreateWorkflowTrigger",
        "createWorkflowTrigger",
        &[("workflow_id", "$response.body#{data}/id")],
    ),
    (
        "createWorkflow",
        "201",
        "ListWorkflowTriggers",
        "listWorkflowTriggers",
        &[("workflow_id", "$response.body#{data}/id")],
    ),
    (
        "createWorkflowTrigger",
        "201",
        "DeleteWorkflowTrigger",
        "deleteWorkflowTrigger",
        &[("workflow_id", "$request.path.workflow_id"), ("webhook_id", "$response.body#{data}/id")],
    ),
    (
        "createWorkflowTrigger",
        "201",
        "CallTrigger",
        "callTriggerPost",
        &[("path", "$response.body#{data}/path")],
    ),
    (
        "createIntegration",
        "201",
        "GetIntegration",
        "getIntegration",
        &[("integration_id", "$response.body#{data}/id")],
    ),
    (
        "createIntegration",
        "201",
        "ReceiveIntegrationEvent",
        "receiveIntegrationEvent",
        &[("kind", "$response.body#{data}/kind"), ("integration_id", "$response.body#{data}/id")],
    ),
    (
        "createIntegration",
        "201",
        "DeleteIntegration",
        "deleteIntegration",
        &[("integration_id", "$response.body#{data}/id")],
    ),
];

/// Successes answered outside the envelope, as their callers need them: (operation, status).
/// Slack reads its URL-verification challenge at the top level of the body.
const UNWRAPPED: &[(&str, &str)] =
    &[("receiveIntegrationEvent", "200"), ("createChatCompletion", "200"), ("listModels", "200")];

/// The OpenAI-compatible operations: their errors have OpenAI's shape, under either envelope.
const OPENAI_OPERATIONS: &[&str] = &["createChatCompletion", "listModels"];
const OPENAI_ERROR_SCHEMA: &str = "#/components/schemas/OpenAiError";

/// The document for `settings`, as served.
pub fn document(settings: &HttpSettings) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
    complete(&mut doc, settings);
    doc
}

fn complete(doc: &mut Value, settings: &HttpSettings) {
    apply_text_rules(doc);
    add_components(doc, settings.envelope);
    let validation = settings.validation_status.to_string();
    let data = match settings.envelope {
        Envelope::Bare => "",
        Envelope::Wrapped => "/data",
    };
    let ids = operation_ids(doc);
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else { continue };
            for (method, op) in item.iter_mut() {
                if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                    complete_operation(op, path, &validation, settings.envelope);
                    add_links(op, data, &ids);
                }
            }
        }
    }
}

/// Operation id → (path, method), for links.
fn operation_ids(doc: &Value) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for item in paths.values() {
            for op in item.as_object().into_iter().flat_map(|m| m.values()) {
                if let Some(id) = op.get("operationId").and_then(Value::as_str) {
                    ids.insert(id.to_owned(), id.to_owned());
                }
            }
        }
    }
    ids
}

/// Replaces each `x-text` marker of a schema with the pattern of that rule.
fn apply_text_rules(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(rule) = map.remove("x-text") {
                let pattern = match rule.as_str() {
                    Some("name") => schemas::NAME,
                    Some("long-text") => schemas::LONG_TEXT,
                    Some("message") => schemas::MESSAGE,
                    Some("session-id") => schemas::SESSION_ID,
                    _ => schemas::ONE_LINE,
                };
                map.insert("pattern".into(), json!(pattern));
            }
            map.values_mut().for_each(apply_text_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(apply_text_rules),
        _ => {}
    }
}

fn add_components(doc: &mut Value, envelope: Envelope) {
    let root = doc.as_object_mut().expect("the document is an object");
    let components = root.entry("components").or_insert_with(|| json!({}));
    let error = match envelope {
        Envelope::Bare => json!({
            "type": "object",
            "description": "An error. `error` is a stable code: validation_error, unauthorized, \
                forbidden, not_found, method_not_allowed, conflict, payload_too_large, \
                unsupported_media_type, invalid_credentials, invalid_token, rate_limit_exceeded, \
                insufficient_credits, payment_declined, upstream_error, unavailable, internal_error.",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "description": "On validation errors: every refused field.",
                    "items": {
                        "type": "object",
                        "required": ["field", "message"],
                        "properties": {"field": {"type": "string"}, "message": {"type": "string"}}
                    }
                },
                "retry_after": {"type": "integer", "minimum": 0, "description": "On 429 and 503: seconds to wait."}
            }
        }),
        Envelope::Wrapped => json!({
            "type": "object",
            "description": "An error. `error.code` is a stable code (`invalid_request` for validation errors).",
            "required": ["success", "error"],
            "properties": {
                "success": {"type": "boolean", "const": false},
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "details": {
                            "type": "object",
                            "description": "On validation errors: the first refused field.",
                            "required": ["field", "reason"],
                            "properties": {"field": {"type": "string"}, "reason": {"type": "string"}}
                        },
                        "retry_after": {"type": "integer", "minimum": 0}
                    }
                }
            }
        }),
    };
    if let Some(c) = components.as_object_mut() {
        let schemas = c.entry("schemas").or_insert_with(|| json!({}));
        if let Some(s) = schemas.as_object_mut() {
            s.insert("Error".into(), error);
            // A streamed answer's schema is that of one server-sent event, `{event, data}`, as
            // clients (and schemathesis) read it; `data` is JSON text.
            s.insert(
                "ChatStreamEvent".into(),
                json!({
                    "type": "object",
                    "description": "One event of a streamed reply: `message.delta` (the next piece), \
                        `tool.call` and `tool.result` (around each tool the agent runs), `citation` (a source \
                        of its knowledge bases the reply cites, after the last delta), `message.completed` \
                        (the unstreamed answer's body) or `error` (then the stream ends).",
                    "required": ["event", "data"],
                    "properties": {
                        "event": {"type": "string", "enum": [
                            "message.delta", "tool.call", "tool.result", "citation", "message.completed", "error"
                        ]},
                        "data": {
                            "type": "string",
                            "contentMediaType": "application/json",
                            "contentSchema": {"anyOf": [
                                {"$ref": "#/components/schemas/MessageDelta"},
                                {"$ref": "#/components/schemas/ToolCallEvent"},
                                {"$ref": "#/components/schemas/ToolResultEvent"},
                                {"$ref": "#/components/schemas/CitationResponse"},
                                {"$ref": "#/components/schemas/ChatResponse"},
                                {"$ref": "#/components/schemas/StreamError"},
                            ]}
                        }
                    }
                }),
            );
            s.insert(
                "ChatCompletionChunk".into(),
                json!({
                    "type": "object",
                    "description": "One event of a streamed completion, unnamed as OpenAI's are: its `data` \
                        is a `chat.completion.chunk` (see ChatCompletionChunkData), an error in OpenAI's \
                        shape, or the closing `[DONE]`.",
                    "required": ["data"],
                    "properties": {"data": {"type": "string"}}
                }),
            );
            s.insert(
                "OpenAiError".into(),
                json!({
                    "type": "object",
                    "description": "An error of the OpenAI-compatible routes, in OpenAI's shape.",
                    "required": ["error"],
                    "properties": {"error": {
                        "type": "object",
                        "required": ["message", "type", "param", "code"],
                        "properties": {
                            "message": {"type": "string"},
                            "type": {"type": "string", "description": "invalid_request_error, insufficient_quota, rate_limit_error, api_error or server_error"},
                            "param": {"type": ["string", "null"], "description": "The refused field, on validation errors"},
                            "code": {"type": ["string", "null"], "description": "invalid_api_key, model_not_found, insufficient_quota, rate_limit_exceeded, ..."}
                        }
                    }}
                }),
            );
            // Free-form metadata as the service checks it: any JSON, but no control characters
            // in keys (one line) or strings (tab and line breaks allowed).
            s.insert(
                "MetadataValue".into(),
                json!({"anyOf": [
                    {"type": "string", "pattern": schemas::LONG_TEXT},
                    {"type": ["number", "boolean", "null"]},
                    {"type": "array", "items": {"$ref": "#/components/schemas/MetadataValue"}},
                    {"type": "object", "propertyNames": {"pattern": schemas::ONE_LINE},
                        "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"}},
                ]}),
            );
            // An execution's input: any JSON, but no U+0000 in keys or strings.
            s.insert(
                "StorableValue".into(),
                json!({"anyOf": [
                    {"type": "string", "pattern": schemas::NO_NUL},
                    {"type": ["number", "boolean", "null"]},
                    {"type": "array", "items": {"$ref": "#/components/schemas/StorableValue"}},
                    {"type": "object", "propertyNames": {"pattern": schemas::NO_NUL},
                        "additionalProperties": {"$ref": "#/components/schemas/StorableValue"}},
                ]}),
            );
            s.insert(
                "ExecutionInput".into(),
                json!({
                    "type": ["object", "null"],
                    "description": "A free-form object the steps' templates read as `input.*` (default `{}`); no key or string may hold U+0000.",
                    "example": {"message": "Hello", "data": {"name": "Ada"}},
                    "propertyNames": {"pattern": schemas::NO_NUL},
                    "additionalProperties": {"$ref": "#/components/schemas/StorableValue"},
                }),
            );
            s.insert(
                "Metadata".into(),
                json!({
                    "type": ["object", "null"],
                    "description": "A free-form object; keys are one line, strings hold no control characters but tab and line breaks.",
                    "propertyNames": {"pattern": schemas::ONE_LINE},
                    "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"},
                }),
            );
        }
        let headers: Map<String, Value> = HEADERS
            .iter()
            .map(|(name, description, ty)| {
                ((*name).to_owned(), json!({"description": description, "schema": {"type": ty}}))
            })
            .collect();
        c.insert("headers".into(), Value::Object(headers));
        c.insert(
            "securitySchemes".into(),
            json!({
                "bearer": {
                    "type": "http", "scheme": "bearer", "bearerFormat": "JWT or agk_ API key",
                    "description": "An access token from login, refresh or a magic link, or an API key (`agk_…`)."
                },
                "oauth2": {
                    "type": "oauth2",
                    "description": "Sign in with e-mail and password (the login route); the access token is then sent as a bearer token.",
                    "flows": {"password": {"tokenUrl": "/api/v1/auth/login", "scopes": {}}}
                }
            }),
        );
    }
}

fn header_ref(name: &str, required: bool) -> Value {
    if required {
        // A required header needs its own object: a reference cannot say it.
        json!({"$ref": format!("#/components/headers/{name}"), "x-required": true})
    } else {
        json!({"$ref": format!("#/components/headers/{name}")})
    }
}

fn complete_operation(op: &mut Value, path: &str, validation: &str, envelope: Envelope) {
    let Some(op) = op.as_object_mut() else { return };
    let operation = op.get("operationId").and_then(Value::as_str).unwrap_or_default().to_owned();
    let secured = op.get("security").and_then(Value::as_array).is_some_and(|s| !s.is_empty());
    let limited_by_address = op.get("x-rate-limit").is_some();
    if secured {
        op.insert("security".into(), json!([{"bearer": []}, {"oauth2": []}]));
        op.insert("x-rate-limit".into(), json!("tenant"));
        let params = op.entry("parameters").or_insert_with(|| json!([]));
        if let Some(params) = params.as_array_mut()
            && !params.iter().any(|p| p["name"] == "tenant_id")
        {
            params.push(json!({
                "name": "tenant_id", "in": "query", "required": false,
                "description": "The tenant to act in; default: the credential's own. 403 when you are not a member.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": schemas::ONE_LINE}
            }));
        }
    }
    // Path ids are refused with control characters in them, as every text is.
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for p in params.iter_mut().filter(|p| p["in"] == "path") {
            if let Some(schema) = p.get_mut("schema").and_then(Value::as_object_mut) {
                schema.entry("pattern").or_insert_with(|| json!(schemas::ONE_LINE));
                schema.entry("minLength").or_insert_with(|| json!(1));
            }
        }
    }
    let limited = secured || limited_by_address;
    let params: Vec<Value> = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
    let has_path_params = params.iter().any(|p| p["in"] == "path") || path.contains('{');
    let has_body = op.contains_key("requestBody");
    let responses = op.entry("responses").or_insert_with(|| json!({})).as_object_mut().expect("responses");

    let mut add = |status: &str, description: &str| {
        let entry = responses.entry(status.to_owned()).or_insert_with(|| json!({"description": description}));
        if entry.get("description").and_then(Value::as_str).is_none_or(str::is_empty) {
            entry["description"] = json!(description);
        } else if !entry["description"].as_str().unwrap_or_default().contains(description)
            && status == validation
        {
            // A status the route uses for something else too (400 `invalid_token` and 400
            // validation errors under `AGENTRY_VALIDATION_STATUS=400`).
            let both = format!("{}; or {description}", entry["description"].as_str().unwrap_or_default());
            entry["description"] = json!(both);
        }
    };
    if has_body || !params.is_empty() {
        add(
            validation,
            "`validation_error` (`invalid_request` in the wrapped envelope): a field, parameter or the body is missing or invalid; every refused field is named",
        );
    }
    if has_body {
        add("413", "`payload_too_large`: the body is larger than the limit (1 MiB by default)");
        add("415", "`unsupported_media_type`: the body is not of the content type this route takes");
    }
    if secured {
        add(
            "401",
            "`unauthorized`: the bearer token or API key is missing, invalid, expired or revoked, or its session ended",
        );
        add(
            "403",
            "`forbidden`: the credential lacks the right for this action, or the caller is not a member of `tenant_id`",
        );
    }
    // Path ids of authenticated routes name a tenant's resources; the one public path
    // parameter (a magic-link token) answers `invalid_token` instead.
    if has_path_params && secured {
        add("404", "`not_found`: no such resource in your tenant");
    }
    if limited {
        add(
            "429",
            if secured {
                "`rate_limit_exceeded`: the tenant's plan limit is spent, or this address failed to authenticate too often"
            } else {
                "`rate_limit_exceeded`: too many requests from this address"
            },
        );
    }
    add("500", "`internal_error`: an unexpected failure; the details are in the log under the request id");

    for (status, response) in responses.iter_mut() {
        // A stream's schema is one event of it (see `ChatCompletionChunk` in the components).
        if operation == "createChatCompletion"
            && let Some(stream) = response.pointer_mut("/content/text~1event-stream")
        {
            stream["schema"] = json!({"$ref": "#/components/schemas/ChatCompletionChunk"});
        }
        let code: u16 = status.parse().unwrap_or(500);
        let response = response.as_object_mut().expect("a response object");
        let headers =
            response.entry("headers").or_insert_with(|| json!({})).as_object_mut().expect("headers");
        headers.insert("X-Request-Id".into(), header_ref("X-Request-Id", true));
        if limited {
            // Sent once a limit was counted against the request: not for unlimited plans
            // (Enterprise), nor for requests refused before the count (a bad credential).
            for name in ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"] {
                headers.insert(name.into(), header_ref(name, false));
            }
        }
        if code == 429 || code == 503 {
            headers.insert("Retry-After".into(), header_ref("Retry-After", code == 429));
        }
        if code == 401 && secured {
            headers.insert("WWW-Authenticate".into(), header_ref("WWW-Authenticate", true));
        }
        if code >= 400 {
            let schema = if OPENAI_OPERATIONS.contains(&operation.as_str()) {
                OPENAI_ERROR_SCHEMA
            } else {
                ERROR_SCHEMA
            };
            response.insert("content".into(), json!({"application/json": {"schema": {"$ref": schema}}}));
        } else if envelope == Envelope::Wrapped
            && !UNWRAPPED.contains(&(operation.as_str(), status.as_str()))
            && let Some(content) = response.get_mut("content").and_then(|c| c.get_mut("application/json"))
            && let Some(schema) = content.get("schema").cloned()
        {
            content["schema"] = json!({
                "type": "object",
                "required": ["success", "data"],
                "properties": {"success": {"type": "boolean", "const": true}, "data": schema}
            });
        }
    }
    // References cannot carry `required`: turn the marked ones into header objects.
    for response in responses.values_mut() {
        if let Some(headers) = response.get_mut("headers").and_then(Value::as_object_mut) {
            for header in headers.values_mut() {
                if header.get("x-required").is_some() {
                    let name = header["$ref"]
                        .as_str()
                        .unwrap_or_default()
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    *header = required_header(&name);
                }
            }
        }
    }
}

fn required_header(name: &str) -> Value {
    let (_, description, ty) =
        HEADERS.iter().find(|(n, _, _)| *n == name).copied().unwrap_or((name, "", "string"));
    json!({"description": description, "required": true, "schema": {"type": ty}})
}

fn add_links(op: &mut Value, data: &str, ids: &HashMap<String, String>) {
    let Some(id) = op.get("operationId").and_then(Value::as_str).map(str::to_owned) else { return };
    for (from, status, name, to, params) in LINKS {
        if *from != id || !ids.contains_key(*to) {
            continue;
        }
        let parameters: Map<String, Value> = params
            .iter()
            .map(|(p, source)| ((*p).to_owned(), json!(source.replace("{data}", data))))
            .collect();
        if let Some(response) = op.get_mut("responses").and_then(|r| r.get_mut(*status)) {
            let links =
                response.as_object_mut().expect("a response").entry("links").or_insert_with(|| json!({}));
            links[*name] = json!({"operationId": to, "parameters": parameters});
        }
    }
}

/// `GET /api/v1/openapi.json`: the document for this service's settings, made once.
pub async fn openapi_json(settings: Option<web::Data<HttpSettings>>) -> HttpResponse {
    type Documents = Mutex<HashMap<(Envelope, u16), Arc<String>>>;
    static DOCS: OnceLock<Documents> = OnceLock::new();
    let settings = settings.map(|s| s.get_ref().clone()).unwrap_or_default();
    let key = (settings.envelope, settings.validation_status);
    let body = {
        let mut docs =
            DOCS.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        docs.entry(key)
            .or_insert_with(|| {
                Arc::new(serde_json::to_string_pretty(&document(&settings)).unwrap_or_default())
            })
            .clone()
    };
    HttpResponse::Ok().content_type("application/json").body(body.as_str().to_owned())
}
