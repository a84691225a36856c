//! An agent's memory in the console: browse and filter its entries (type, tag; expiry and
//! origin shown; invalidated facts struck through, or what held "as of" a time), open one with
//! its history and the exchange it was learned from, add and delete one, add a document (a text
//! or Markdown file, shown as its chunks), and a search whose hits show their explanation:
//! vector and word ranks, similarity, importance, recency.

use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::{AgentId, MemoryId};
use minijinja::{Value, context};
use serde::Deserialize;
use serde_json::json;

use super::render::{page, redirect};
use super::{Console, Form, encode};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::agents::{AgentResponse, agent_id};
use crate::routes::memory::{
    AddDocumentsRequest, AddMemoryRequest, ListMemoryQuery, MemoryEntryResponse, MemorySearchHit,
    MemoryVersionResponse, SearchMemoryRequest,
};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/agents/{agent_id}/memory", web::get().to(browse))
        .route("/agents/{agent_id}/memory", web::post().to(add))
        .route("/agents/{agent_id}/memory/documents", web::post().to(add_document))
        .route("/agents/{agent_id}/memory/{memory_id}", web::get().to(entry))
        .route("/agents/{agent_id}/memory/{memory_id}/delete", web::post().to(delete));
}

/// Entries per page of the browser.
const PER_PAGE: i64 = 25;

#[derive(Debug, Default, Deserialize)]
struct BrowseQuery {
    memory_type: Option<String>,
    tag: Option<String>,
    page: Option<i64>,
    q: Option<String>,
    mode: Option<String>,
    /// `on`: invalidated entries too.
    invalid: Option<String>,
    /// A `datetime-local` value (UTC) or an RFC 3339 time.
    as_of: Option<String>,
}

/// An "as of" field's value as RFC 3339: a `datetime-local` value (`2026-11-28T17:41`, seconds
/// optional) is read as UTC; anything else goes to the list's own check as it came.
fn as_of_time(raw: Option<String>) -> Option<String> {
    let raw = blank_to_none(raw)?;
    let local = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(raw.trim(), f).ok());
    Some(match local {
        Some(t) => t.and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        None => raw,
    })
}

fn blank_to_none(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

async fn browse(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    let q: BrowseQuery = serde_urlencoded::from_str(req.query_string()).unwrap_or_default();
    let (memory_type, tag) = (blank_to_none(q.memory_type), blank_to_none(q.tag));
    let (invalid, as_of) = (q.invalid.as_deref() == Some("on"), as_of_time(q.as_of));
    let list = ListMemoryQuery {
        agent_id: Some(id.to_string()),
        memory_type: memory_type.clone(),
        tag: tag.clone(),
        page: q.page,
        per_page: Some(PER_PAGE),
        include_invalid: Some(invalid),
        as_of: as_of.clone(),
    };
    let (agent_filter, type_filter, tag_filter, validity, page_of) = list.try_into_domain()?;
    let (entries, total) =
        state.memory.list(&c, agent_filter, type_filter, tag_filter, validity, page_of).await?;
    let entries: Vec<MemoryEntryResponse> = entries.into_iter().map(MemoryEntryResponse::from).collect();
    let query = blank_to_none(q.q);
    let hits: Option<Vec<MemorySearchHit>> = match &query {
        Some(text) => {
            let request: SearchMemoryRequest = from_json_value(json!({
                "agent_id": id.as_str(),
                "query": text,
                "top_k": 10,
                "mode": blank_to_none(q.mode.clone()),
            }))?;
            let results = state.memory.search(&c, request.try_into_domain()?).await?;
            Some(results.hits.into_iter().map(MemorySearchHit::from).collect())
        }
        None => None,
    };
    let pages = total.div_ceil(u64::from(page_of.per_page)).max(1);
    // The filters as a query string, for the pager's links.
    let filters = format!(
        "memory_type={}&tag={}&invalid={}&as_of={}",
        encode(memory_type.as_deref().unwrap_or_default()),
        encode(tag.as_deref().unwrap_or_default()),
        if invalid { "on" } else { "" },
        encode(as_of.as_deref().unwrap_or_default())
    );
    page(
        &c,
        "agents",
        &format!("Memory of {}", agent.name),
        "memory.html",
        context! {
            agent => Value::from_serialize(&agent),
            entries, total, pages, filters,
            page => page_of.page,
            memory_type, tag, query, hits, invalid,
            as_of => as_of.map(|t| t.chars().take(16).collect::<String>()),
            mode => q.mode.unwrap_or_else(|| "hybrid".to_owned()),
        },
    )
}

/// Comma-separated tags of a form field.
fn tag_list(form: &Form) -> Vec<String> {
    form.get("tags")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

async fn add(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let request: AddMemoryRequest = from_json_value(json!({
        "agent_id": id.as_str(),
        "memory_type": form.text("memory_type"),
        "content": form.get("content"),
        "tags": tag_list(&form),
        "importance_score": form.number("importance_score"),
        "ttl_seconds": form.number("ttl_seconds"),
        "source": "console",
    }))?;
    state.memory.add(&c, request.try_into_domain(true)?).await?;
    Ok(redirect(memory_path(&c, &id)))
}

fn memory_path(c: &Console, agent: &AgentId) -> String {
    format!("{}/agents/{}/memory", c.base(), agent)
}

/// A document: its text (a chosen file's, read by the script, or pasted) cut into chunks and
/// stored; the answer shows the chunks.
async fn add_document(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    form: Form,
) -> Result<HttpResponse, ApiError> {
    let id = agent_id(path.into_inner().1)?;
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    let request: AddDocumentsRequest = from_json_value(json!({
        "agent_id": id.as_str(),
        "documents": [{ "title": form.get("title"), "content": form.get("content") }],
    }))?;
    let (agent_id, documents) = request.try_into_domain()?;
    let stored = state.memory.add_documents(&c, &agent_id, documents).await?;
    let mut shown = Vec::new();
    for summary in stored {
        let mut chunks = Vec::new();
        for chunk in &summary.chunk_ids {
            chunks.push(MemoryEntryResponse::from(state.memory.get(&c, chunk).await?));
        }
        shown.push(json!({
            "id": summary.document.id.as_str(),
            "title": summary.document.title,
            "chunks": chunks.iter().map(|e| json!({"id": e.id, "content": e.content})).collect::<Vec<_>>(),
        }));
    }
    page(
        &c,
        "agents",
        "Document stored",
        "memory_document.html",
        context! { agent => Value::from_serialize(&agent), documents => shown },
    )
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, agent, memory) = path.into_inner();
    let id = agent_id(agent)?;
    agentry_domain::validation::check_path_id(&memory, "memory_id")?;
    let memory = MemoryId::from_string(memory);
    // Another agent's entry is not this page's to delete: 404, as for another tenant's.
    let entry = state.memory.get(&c, &memory).await?;
    if entry.agent_id.as_ref() != Some(&id) {
        return Err(ApiError::not_found("no such memory for this agent"));
    }
    state.memory.delete(&c, &memory).await?;
    Ok(redirect(memory_path(&c, &id)))
}

/// One entry: what it says, where it came from (its origin, and the exchange it was learned
/// from), and its history.
async fn entry(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, agent, memory) = path.into_inner();
    let id = agent_id(agent)?;
    agentry_domain::validation::check_path_id(&memory, "memory_id")?;
    let memory = MemoryId::from_string(memory);
    let agent = AgentResponse::from(state.agents.get(&c, &id).await?);
    let found = state.memory.get(&c, &memory).await?;
    if found.agent_id.as_ref() != Some(&id) {
        return Err(ApiError::not_found("no such memory for this agent"));
    }
    let history: Vec<MemoryVersionResponse> =
        state.memory.history(&c, &memory).await?.into_iter().map(Into::into).collect();
    // Each version's exchange (its last source message is the agent's reply).
    let mut exchanges = Vec::new();
    for version in &history {
        let Some(reply) = version.source_message_ids.last() else { continue };
        if exchanges.iter().any(|x: &serde_json::Value| x["reply_id"] == reply.as_str()) {
            continue;
        }
        let reply_id = agentry_domain::ids::MessageId::from_string(reply.clone());
        if let Some(x) = state.chat.learned_from(&c, &id, &reply_id).await? {
            exchanges.push(json!({
                "reply_id": reply,
                "session_id": x.message.session_id.as_str(),
                "message": x.message.content,
                "reply": x.reply.content,
                "at": x.reply.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            }));
        }
    }
    let entry = MemoryEntryResponse::from(found);
    page(
        &c,
        "agents",
        &format!("Memory of {}", agent.name),
        "memory_entry.html",
        context! {
            agent => Value::from_serialize(&agent),
            entry => Value::from_serialize(&entry),
            history => Value::from_serialize(&history),
            exchanges,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::as_of_time;

    #[test]
    fn an_as_of_field_is_read_as_utc_and_anything_else_is_left_to_the_lists_check() {
        assert_eq!(as_of_time(Some("2026-11-28T17:41".into())).as_deref(), Some("2026-11-28T17:41:00Z"));
        assert_eq!(as_of_time(Some("2026-11-28T17:41:05".into())).as_deref(), Some("2026-11-28T17:41:05Z"));
        let zoned = "2026-11-28T17:41:05+01:00";
        assert_eq!(as_of_time(Some(zoned.into())).as_deref(), Some(zoned));
        assert_eq!(as_of_time(Some("  ".into())), None);
        // Text of several bytes a character is passed on, not cut inside a character.
        assert_eq!(as_of_time(Some("héhéhé".into())).as_deref(), Some("héhéhé"));
    }
}
