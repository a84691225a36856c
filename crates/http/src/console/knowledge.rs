//! Knowledge in the console: the tenant's knowledge bases (create, delete), a base's files with
//! their ingestion's live status (uploaded several at once), a file's chunks, and search with
//! the parts of each result's score; a citation of the playground opens its chunk here.

use actix_multipart::Multipart;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::{KnowledgeBaseId, KnowledgeFileId};
use agentry_domain::knowledge::{FileStatus, KnowledgeQuery};
use futures_util::StreamExt as _;
use minijinja::context;
use serde::Deserialize;
use serde_json::json;

use super::render::{page, redirect};
use super::session::{CSRF_FIELD, constant_time_eq, csrf_refused};
use super::{Console, Form};
use crate::AppState;
use crate::error::ApiError;
use crate::extract::from_json_value;
use crate::routes::knowledge::files::{ChunkResponse, KnowledgeFileResponse, store_form};
use crate::routes::knowledge::{
    CreateKnowledgeBaseRequest, KnowledgeBaseResponse, KnowledgeSearchHit, base_id, file_id,
};

/// Routes under `/console/{tenant_id}`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/knowledge", web::get().to(list))
        .route("/knowledge", web::post().to(create))
        .route("/knowledge/cited/{file_id}", web::get().to(cited))
        .route("/knowledge/{kb}", web::get().to(show))
        .route("/knowledge/{kb}/delete", web::post().to(delete))
        .route("/knowledge/{kb}/files", web::post().to(upload))
        .route("/knowledge/{kb}/files/{file_id}", web::get().to(file))
        .route("/knowledge/{kb}/files/{file_id}/delete", web::post().to(delete_file));
}

/// Chunks shown on a file's page.
const CHUNKS_PER_PAGE: u64 = 50;

fn base(raw: String) -> Result<KnowledgeBaseId, ApiError> {
    Ok(base_id(raw, "knowledge_base_id")?)
}

fn file_of(raw: String) -> Result<KnowledgeFileId, ApiError> {
    Ok(file_id(raw, "file_id")?)
}

async fn list(state: web::Data<AppState>, c: Console) -> Result<HttpResponse, ApiError> {
    let bases: Vec<KnowledgeBaseResponse> =
        state.knowledge.list_bases(&c).await?.into_iter().map(Into::into).collect();
    page(&c, "knowledge", "Knowledge", "knowledge_bases.html", context! { bases })
}

/// Creates a base from the form, as `POST /knowledge-bases` does.
async fn create(state: web::Data<AppState>, c: Console, form: Form) -> Result<HttpResponse, ApiError> {
    let chunking = match (form.number("max_tokens"), form.number("overlap_tokens")) {
        (serde_json::Value::Null, serde_json::Value::Null) => serde_json::Value::Null,
        (max, overlap) => json!({"max_tokens": max, "overlap_tokens": overlap}),
    };
    let request: CreateKnowledgeBaseRequest = from_json_value(json!({
        "name": form.get("name"),
        "description": form.text("description"),
        "chunking": chunking,
    }))?;
    let created = state.knowledge.create_base(&c, request.try_into_domain()?).await?;
    Ok(redirect(format!("{}/knowledge/{}", c.base(), created.id)))
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    q: Option<String>,
}

/// A base: its files (refreshed while any is being ingested), the upload form and search.
async fn show(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = base(path.into_inner().1)?;
    let kb = KnowledgeBaseResponse::from(state.knowledge.get_base(&c, &id).await?);
    let files = state.knowledge.list_files(&c, &id).await?;
    let working = files.iter().any(|f| matches!(f.status, FileStatus::Queued | FileStatus::Processing));
    let files: Vec<KnowledgeFileResponse> = files.into_iter().map(Into::into).collect();
    let query =
        serde_urlencoded::from_str::<SearchQuery>(req.query_string()).unwrap_or(SearchQuery { q: None });
    let q = query.q.filter(|q| !q.trim().is_empty());
    let results: Vec<KnowledgeSearchHit> = match &q {
        Some(text) => {
            let search = KnowledgeQuery {
                text: text.clone(),
                bases: vec![id.clone()],
                files: Vec::new(),
                top_k: 10,
                min_score: None,
            };
            state.knowledge.search(&c, search).await?.into_iter().map(Into::into).collect()
        }
        None => Vec::new(),
    };
    let title = kb.name.clone();
    page(&c, "knowledge", &title, "knowledge_base.html", context! { kb, files, working, q, results })
}

/// Uploads the form's files. The form's first part is its CSRF field (browsers send fields in
/// the form's order), read before any file is stored.
async fn upload(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = base(path.into_inner().1)?;
    let mut form = Multipart::new(req.headers(), payload);
    let Some(Ok(mut field)) = form.next().await else { return Err(csrf_refused()) };
    if field.name() != Some(CSRF_FIELD) {
        return Err(csrf_refused());
    }
    let mut token = Vec::new();
    while let Some(Ok(chunk)) = field.next().await {
        token.extend_from_slice(&chunk);
        if token.len() > 256 {
            return Err(csrf_refused());
        }
    }
    if c.csrf.is_empty() || !constant_time_eq(&token, c.csrf.as_bytes()) {
        return Err(csrf_refused());
    }
    drop(field);
    store_form(&state, &c, &id, form).await?;
    Ok(redirect(format!("{}/knowledge/{}#files", c.base(), id)))
}

#[derive(Debug, Deserialize)]
struct FileQuery {
    skip: Option<u64>,
}

/// A file and a page of its chunks, each with an anchor a citation links to.
async fn file(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, kb, raw) = path.into_inner();
    let (kb, id) = (base(kb)?, file_of(raw)?);
    let base_name = state.knowledge.get_base(&c, &kb).await?.name;
    let file = KnowledgeFileResponse::from(state.knowledge.get_file(&c, &kb, &id).await?);
    let skip =
        serde_urlencoded::from_str::<FileQuery>(req.query_string()).ok().and_then(|q| q.skip).unwrap_or(0);
    let (chunks, total) = state.knowledge.list_chunks(&c, &kb, &id, skip, CHUNKS_PER_PAGE).await?;
    let chunks: Vec<ChunkResponse> = chunks.into_iter().map(Into::into).collect();
    let next = (skip + CHUNKS_PER_PAGE < total).then_some(skip + CHUNKS_PER_PAGE);
    let previous = (skip > 0).then(|| skip.saturating_sub(CHUNKS_PER_PAGE));
    let title = file.name.clone();
    page(
        &c,
        "knowledge",
        &title,
        "knowledge_file.html",
        context! { kb => kb.as_str(), base_name, file, chunks, total, skip, next, previous },
    )
}

#[derive(Debug, Deserialize)]
struct CitedQuery {
    chunk: Option<String>,
}

/// A cited file's page, its chunk in view: the citation names the file, whose base is found
/// among the tenant's.
async fn cited(
    state: web::Data<AppState>,
    c: Console,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = file_of(path.into_inner().1)?;
    let chunk = serde_urlencoded::from_str::<CitedQuery>(req.query_string()).ok().and_then(|q| q.chunk);
    for kb in state.knowledge.list_bases(&c).await? {
        if state.knowledge.get_file(&c, &kb.id, &id).await.is_ok() {
            let (mut skip, anchor) =
                (0, chunk.as_deref().map(|ch| format!("#chunk-{ch}")).unwrap_or_default());
            if let Some(chunk) = &chunk {
                skip = chunk_page(&state, &c, &kb.id, &id, chunk).await?;
            }
            return Ok(redirect(format!("{}/knowledge/{}/files/{id}?skip={skip}{anchor}", c.base(), kb.id)));
        }
    }
    Err(ApiError::from(agentry_domain::knowledge::KnowledgeError::FileNotFound))
}

/// The `skip` of the page of a file's chunks that holds `chunk`.
async fn chunk_page(
    state: &AppState,
    c: &Console,
    kb: &KnowledgeBaseId,
    file: &KnowledgeFileId,
    chunk: &str,
) -> Result<u64, ApiError> {
    let mut skip = 0;
    loop {
        let (chunks, total) = state.knowledge.list_chunks(c, kb, file, skip, CHUNKS_PER_PAGE).await?;
        if chunks.iter().any(|ch| ch.id.as_str() == chunk) {
            return Ok(skip);
        }
        skip += CHUNKS_PER_PAGE;
        if skip >= total {
            return Ok(0);
        }
    }
}

async fn delete(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    state.knowledge.delete_base(&c, &base(path.into_inner().1)?).await?;
    Ok(redirect(format!("{}/knowledge", c.base())))
}

async fn delete_file(
    state: web::Data<AppState>,
    c: Console,
    path: web::Path<(String, String, String)>,
    _form: Form,
) -> Result<HttpResponse, ApiError> {
    let (_, kb, raw) = path.into_inner();
    let (kb, id) = (base(kb)?, file_of(raw)?);
    state.knowledge.delete_file(&c, &kb, &id).await?;
    Ok(redirect(format!("{}/knowledge/{kb}#files", c.base())))
}
