//! The rules the server enforces, stated in the OpenAPI document: patterns for text fields,
//! and enum schemas made from the domain's own lists, so the document cannot drift from the
//! validation.
//!
//! The patterns are ECMA-262 (JSON Schema); they match the domain's checks: no control
//! characters (C0, DEL, C1) in one-line text, none but tab and line breaks in long text, and
//! at least one character that is not white space where a value is trimmed.

use agentry_domain::agents::{AgentStatus, AgentType, ExtractionMode};
use agentry_domain::memory::MemoryType;
use agentry_domain::tenancy::Scope;
use agentry_domain::webhooks::EventSelector;
use agentry_domain::workflows::{
    IntegrationKind, MAX_STEP_TIMEOUT_SECONDS, MAX_STEPS, StepType, TRIGGER_METHODS,
};
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type,
};
use utoipa::openapi::{RefOr, Schema};

/// One line without control characters.
pub const ONE_LINE: &str = r"^[^\x00-\x1F\x7F-\x9F]*$";
/// One line without control characters, not blank (the value is trimmed).
pub const NAME: &str = r"^[^\x00-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x1F\x7F-\x9F]*$";
/// Long text: tab, line feed and carriage return are the only control characters allowed.
pub const LONG_TEXT: &str = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$";
/// Long text that is not blank.
pub const MESSAGE: &str = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*[^\s\x00-\x1F\x7F-\x9F][^\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]*$";
/// Text without U+0000 (free-form JSON the service stores: PostgreSQL cannot hold it).
pub const NO_NUL: &str = r"^[^\x00]*$";
/// A chat session id: letters, digits and `. _ : -`.
pub const SESSION_ID: &str = r"^[A-Za-z0-9_.:-]{1,128}$";

fn string_enum(values: impl IntoIterator<Item = &'static str>, nullable: bool) -> ObjectBuilder {
    let ty = if nullable { SchemaType::from_iter([Type::String, Type::Null]) } else { Type::String.into() };
    let mut values: Vec<serde_json::Value> = values.into_iter().map(Into::into).collect();
    if nullable {
        values.push(serde_json::Value::Null);
    }
    ObjectBuilder::new().schema_type(ty).enum_values(Some(values))
}

/// `type` of an agent, optional.
pub fn agent_type_optional() -> impl Into<RefOr<Schema>> {
    string_enum(AgentType::ALL.iter().map(|t| t.as_str()), true)
        .description(Some("`assistant` (default), `support` or `custom`."))
}

/// `type` of an agent in a PATCH: a value, never null.
pub fn agent_type() -> impl Into<RefOr<Schema>> {
    string_enum(AgentType::ALL.iter().map(|t| t.as_str()), false)
        .description(Some("`assistant`, `support` or `custom`."))
}

/// `status` of an agent, optional.
pub fn agent_status_optional() -> impl Into<RefOr<Schema>> {
    string_enum(AgentStatus::ALL.iter().map(|s| s.as_str()), true)
        .description(Some("`active` (default) or `paused`."))
}

/// `config.memory_extraction` in a request: null (the default, `auto`) or a mode.
pub fn memory_extraction_optional() -> impl Into<RefOr<Schema>> {
    string_enum(ExtractionMode::ALL.iter().map(|m| m.as_str()), true).description(Some(
        "How the agent's memory learns from its conversations: `auto` (default: the model when the \
         service's is OpenAI-compatible, else the rules), `rules`, `model` or `off`.",
    ))
}

/// `config.memory_extraction` of an agent.
pub fn memory_extraction() -> impl Into<RefOr<Schema>> {
    string_enum(ExtractionMode::ALL.iter().map(|m| m.as_str()), false)
        .description(Some("`auto`, `rules`, `model` or `off`."))
}

/// `status` of an agent in a PATCH: a value, never null.
pub fn agent_status() -> impl Into<RefOr<Schema>> {
    string_enum(AgentStatus::ALL.iter().map(|s| s.as_str()), false).description(Some("`active` or `paused`."))
}

fn memory_type_items() -> ObjectBuilder {
    string_enum(MemoryType::ALL.iter().map(|m| m.as_str()), false)
}

/// `memory_types` of an agent: null or a list (duplicates are dropped).
pub fn memory_types_optional() -> impl Into<RefOr<Schema>> {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(memory_type_items())
        .description(Some("Any of `semantic`, `episodic`, `procedural`; duplicates are dropped."))
}

/// A memory type, optional.
pub fn memory_type_optional() -> impl Into<RefOr<Schema>> {
    string_enum(MemoryType::ALL.iter().map(|m| m.as_str()), true)
        .description(Some("`semantic` (default), `episodic` or `procedural`."))
}

/// A memory type in a query string (absent rather than null when not wanted).
pub fn memory_type_param() -> impl Into<RefOr<Schema>> {
    string_enum(MemoryType::ALL.iter().map(|m| m.as_str()), false)
        .description(Some("`semantic`, `episodic` or `procedural`."))
}

/// Free-form metadata of a request (the `Metadata` component the document adds).
pub fn metadata_optional() -> impl Into<RefOr<Schema>> {
    utoipa::openapi::Ref::from_schema_name("Metadata")
}

/// An execution's input (the `ExecutionInput` component the document adds): any JSON object
/// whose strings and keys hold no U+0000, which the service refuses (`agentry_domain::storable`).
pub fn execution_input() -> impl Into<RefOr<Schema>> {
    utoipa::openapi::Ref::from_schema_name("ExecutionInput")
}

/// A search mode, optional.
pub fn search_mode_optional() -> impl Into<RefOr<Schema>> {
    string_enum(["hybrid", "vector", "lexical"], true)
        .description(Some("`hybrid` (default: vectors and full text fused), `vector` or `lexical` alone."))
}

/// Tags of a memory: up to 50 labels of 1–64 characters on one line.
pub fn tags_optional() -> impl Into<RefOr<Schema>> {
    optional_lines(50, 64).description(Some("Up to 50 labels of 1–64 characters; duplicates are dropped."))
}

/// An optional list of at most `items` strings of 1–`chars` characters on one line.
fn optional_lines(items: usize, chars: usize) -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(chars))
                .pattern(Some(ONE_LINE)),
        )
        .max_items(Some(items))
}

/// The tools of an MCP server agents may use: up to 64 names of 1–128 characters on one line.
pub fn mcp_allowed_tools_optional() -> impl Into<RefOr<Schema>> {
    optional_lines(64, 128)
        .description(Some("The tools agents may use; absent or null: every tool the server lists."))
}

/// The headers sent to an MCP server: up to 20, names of letters, digits, `-` and `_`, values
/// of one line (sealed, never shown again).
pub fn mcp_headers_optional() -> impl Into<RefOr<Schema>> {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .property_names(Some(
            ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^[A-Za-z0-9_-]{1,100}$")),
        ))
        .additional_properties(Some(
            ObjectBuilder::new().schema_type(Type::String).max_length(Some(4096)).pattern(Some(ONE_LINE)),
        ))
        .max_properties(Some(20))
        .description(Some("Headers sent with every request (values sealed, never shown again)."))
}

/// The scopes of a new API key: at least one.
pub fn scopes() -> impl Into<RefOr<Schema>> {
    ArrayBuilder::new()
        .items(string_enum(Scope::all().map(Scope::as_str), false))
        .min_items(Some(1))
        .description(Some("At least one scope; a key's rights are its scopes intersected with your role."))
}

/// Event names a webhook subscription lists: 1–32 of the catalogue's types, the aliases
/// `agent.message` and `workflow.completed`, or `*`.
pub fn webhook_events() -> impl Into<RefOr<Schema>> {
    ArrayBuilder::new()
        .items(string_enum(EventSelector::names(), false))
        .min_items(Some(1))
        .max_items(Some(32))
        .description(Some("Event types, the aliases `agent.message` and `workflow.completed`, or `*`."))
}

/// [`webhook_events`], optional.
pub fn webhook_events_optional() -> impl Into<RefOr<Schema>> {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(string_enum(EventSelector::names(), false))
        .min_items(Some(1))
        .max_items(Some(32))
        .description(Some("Event types, the aliases `agent.message` and `workflow.completed`, or `*`."))
}

/// A trigger's `allowed_methods`: at least one of the methods a trigger may accept, in any
/// case; null or absent means `["POST"]`.
pub fn trigger_methods() -> impl Into<RefOr<Schema>> {
    // Any case: each letter as a class of its two cases (ECMA-262 has no inline `(?i)`).
    let any_case =
        |m: &str| m.chars().map(|c| format!("[{}{}]", c, c.to_ascii_lowercase())).collect::<String>();
    let names: Vec<String> = TRIGGER_METHODS.iter().map(|m| any_case(m.as_str())).collect();
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            ObjectBuilder::new().schema_type(Type::String).pattern(Some(format!("^({})$", names.join("|")))),
        )
        .min_items(Some(1))
        .description(Some(
            "Any of `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, in any case; default `[\"POST\"]`.",
        ))
        .examples([serde_json::json!(["POST"])])
}

/// An integration's `kind`.
pub fn integration_kind() -> impl Into<RefOr<Schema>> {
    string_enum(IntegrationKind::ALL.iter().map(|k| k.as_str()), false).description(Some(
        "`chat` (Slack), `code-host` (GitHub), `issue-tracker` (Linear), `issue-tracker-2` (Jira), \
         `incident` (PagerDuty) or `wiki` (Confluence).",
    ))
}

/// The status a subscription may be set to.
pub fn webhook_status_patch() -> impl Into<RefOr<Schema>> {
    string_enum(["active", "disabled"], true)
        .description(Some("`active` resumes a failed or disabled subscription; `disabled` pauses it."))
}

/// The status of the deliveries a bulk retry takes, optional.
pub fn delivery_retry_status() -> impl Into<RefOr<Schema>> {
    string_enum(["failed", "skipped"], true).description(Some("`failed` or `skipped`; absent: both."))
}

/// One name a subscription may list: an event type, an alias or `*`.
pub fn event_selector() -> impl Into<RefOr<Schema>> {
    string_enum(EventSelector::names(), false)
}

/// One step of a workflow of type `step_type`: `id`, `type`, `timeout_seconds`, how it leads on
/// (`retry`, `on_error`, `next`) and the parameters that type takes (their names from the domain's step kinds, so the document cannot
/// drift from what the service reads), nothing else. A parameter takes a template or a value
/// (docs/workflows.md says which; the service checks each when the workflow is saved).
fn workflow_step(step_type: StepType) -> ObjectBuilder {
    let step = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "id",
            ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^[A-Za-z0-9_-]{1,64}$")),
        )
        .property("type", string_enum([step_type.as_str()], false))
        .property(
            "timeout_seconds",
            // null, as absent, is the default.
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .minimum(Some(1))
                .maximum(Some(MAX_STEP_TIMEOUT_SECONDS)),
        )
        .property("retry", retry_policy())
        .property(
            "on_error",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .pattern(Some(r"^[A-Za-z0-9_-]{1,64}$"))
                .description(Some("`fail` (default), `continue`, or the id of the step to go on at")),
        )
        .property(
            "next",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .pattern(Some(r"^[A-Za-z0-9_-]{1,64}$"))
                .description(Some("The id of the step a completed step leads to (default: the next listed)")),
        )
        .required("id")
        .required("type")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    step_type
        .parameters()
        .iter()
        .fold(step, |step, name| step.property(*name, ObjectBuilder::new().schema_type(SchemaType::AnyValue)))
}

/// A step's `retry`: every field optional (docs/workflows.md gives the defaults), none other.
fn retry_policy() -> ObjectBuilder {
    use agentry_domain::workflows::steps::flow::{MAX_ATTEMPTS, MAX_BACKOFF_SECONDS};
    let whole = |min: u32, max: u32| {
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
            .minimum(Some(min))
            .maximum(Some(max))
    };
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .property("max_attempts", whole(1, MAX_ATTEMPTS))
        .property("backoff_seconds", whole(0, MAX_BACKOFF_SECONDS))
        .property(
            "factor",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Number, Type::Null]))
                .minimum(Some(1))
                .maximum(Some(10)),
        )
        .property("max_backoff_seconds", whole(0, MAX_BACKOFF_SECONDS))
        .property(
            "on",
            ArrayBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
                .items(string_enum(["timeout", "server_error", "network", "any"], false)),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

/// A workflow's steps in a request: 1–100 steps.
pub fn workflow_steps() -> impl Into<RefOr<Schema>> {
    let one_of_the_types =
        StepType::ALL.into_iter().fold(OneOfBuilder::new(), |any, t| any.item(workflow_step(t)));
    ArrayBuilder::new()
        .items(one_of_the_types)
        .min_items(Some(1))
        .max_items(Some(MAX_STEPS))
        .description(Some("The steps, run in order: `{id, type, …parameters}` each, ids unique."))
}

/// Any JSON value, `null` included: a step's or an execution's output (a transform may output a
/// string, a number, an object, …).
pub fn any_json() -> impl Into<RefOr<Schema>> {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some("Any JSON value: what the step produced (null until it has)."))
}

/// A text that may be absent or null.
fn optional_text(pattern: &str, min: usize, max: usize) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .pattern(Some(pattern))
        .min_length(Some(min))
        .max_length(Some(max))
}

fn text(pattern: &str, min: usize, max: usize) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .min_length(Some(min))
        .max_length(Some(max))
}

/// An agent's tools (`config.tools`): the four kinds, each with its own fields and no other.
/// Names must also differ across the list (the built-ins default to their type), which a
/// schema cannot say.
pub fn agent_tools_optional() -> impl Into<RefOr<Schema>> {
    use agentry_domain::agents::tools::{
        MAX_ALLOWED_HOSTS, MAX_TOOL_DESCRIPTION_CHARS, MAX_TOOL_TIMEOUT_SECONDS, MAX_TOOLS,
    };
    const TOOL_NAME: &str = r"^[A-Za-z0-9_-]{1,64}$";
    let closed = |o: ObjectBuilder| o.additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let memory = |kind: &'static str| {
        closed(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("type", string_enum([kind], false))
                .property("name", optional_text(TOOL_NAME, 1, 64))
                .property("description", optional_text(LONG_TEXT, 1, MAX_TOOL_DESCRIPTION_CHARS))
                .required("type"),
        )
    };
    let run_workflow = closed(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("type", string_enum(["run_workflow"], false))
            .property("name", text(TOOL_NAME, 1, 64))
            .property("description", optional_text(LONG_TEXT, 1, MAX_TOOL_DESCRIPTION_CHARS))
            .property("workflow_id", text(ONE_LINE, 1, 100))
            .property(
                "input_schema",
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("type", string_enum(["object"], false))
                    .description(Some("A JSON Schema of the workflow's input (an object)")),
            )
            .property(
                "timeout_seconds",
                ObjectBuilder::new()
                    .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                    .minimum(Some(1))
                    .maximum(Some(MAX_TOOL_TIMEOUT_SECONDS)),
            )
            .required("type")
            .required("name")
            .required("workflow_id")
            .required("input_schema"),
    );
    let http_request = closed(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("type", string_enum(["http_request"], false))
            .property("name", text(TOOL_NAME, 1, 64))
            .property("description", text(LONG_TEXT, 1, MAX_TOOL_DESCRIPTION_CHARS))
            .property(
                "allowed_hosts",
                ArrayBuilder::new()
                    .items(text(r"^[A-Za-z0-9.-]{1,253}$", 1, 253))
                    .min_items(Some(1))
                    .max_items(Some(MAX_ALLOWED_HOSTS)),
            )
            .property("method", string_enum(["GET", "POST"], true))
            .required("type")
            .required("name")
            .required("description")
            .required("allowed_hosts"),
    );
    let mcp = closed(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("type", string_enum(["mcp"], false))
            .property("server_id", text(ONE_LINE, 1, 100))
            .property(
                "tools",
                ArrayBuilder::new()
                    .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
                    .items(text(LONG_TEXT, 1, MAX_TOOL_DESCRIPTION_CHARS))
                    .min_items(Some(1))
                    .max_items(Some(64)),
            )
            .required("type")
            .required("server_id"),
    );
    let core_memory = closed(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("type", string_enum(["core_memory"], false))
            .required("type"),
    );
    let one_of = OneOfBuilder::new()
        .item(memory("memory_search"))
        .item(memory("memory_add"))
        .item(run_workflow)
        .item(http_request)
        .item(mcp)
        .item(core_memory);
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(one_of)
        .max_items(Some(MAX_TOOLS))
        .description(Some(
            "The tools the agent may call (docs/agents.md): `memory_search`, `memory_add`, `run_workflow`, \
             `http_request`, `mcp` (a registered MCP server's tools, docs/mcp.md), `core_memory` \
             (`core_memory_append` and `core_memory_replace` over the agent's memory blocks); names unique, \
             one entry per MCP server.",
        ))
}

/// OpenAI's `tool_choice`: `none`, `auto`, `required`, or an object naming a function.
pub fn tool_choice() -> impl Into<RefOr<Schema>> {
    OneOfBuilder::new()
        .item(string_enum(["none", "auto", "required"], false))
        .item(ObjectBuilder::new().schema_type(Type::Object))
        .item(ObjectBuilder::new().schema_type(Type::Null))
}
