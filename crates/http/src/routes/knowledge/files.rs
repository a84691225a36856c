//! A knowledge base's files: uploaded as `multipart/form-data` (each part streamed to storage
//! as it arrives), listed with their ingestion's status and progress, downloaded as they were
//! uploaded, their chunks listed, deleted.
//!
//! An upload request is all or nothing: when one of its files is refused (too large, of an
//! unsupported type, past the plan's quota, a broken form), the files it already stored are
//! removed and the answer names the refused one.

use actix_multipart::Multipart;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use agentry_domain::ids::KnowledgeBaseId;
use agentry_domain::knowledge::{KnowledgeChunk, KnowledgeFile, UploadedFile};
use agentry_domain::tenancy::Principal;
use agentry_domain::validation::{FieldError, FieldErrorKind};
use chrono::{DateTime, Utc};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{base_id, file_id};
use crate::AppState;
use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::extract::QueryParams;
use crate::reply::{Reply, timestamp};

/// Registers the routes of this module under the current scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/knowledge-bases/{knowledge_base_id}/files")
            .route(web::get().to(list))
            .route(web::post().to(upload)),
    )
    .service(
        web::resource("/knowledge-bases/{knowledge_base_id}/files/{file_id}")
            .route(web::get().to(get))
            .route(web::delete().to(delete)),
    )
    .service(
        web::resource("/knowledge-bases/{knowledge_base_id}/files/{file_id}/content")
            .route(web::get().to(content)),
    )
    .service(
        web::resource("/knowledge-bases/{knowledge_base_id}/files/{file_id}/chunks")
            .route(web::get().to(chunks)),
    );
}

/// Most bytes of a form's fields other than `file`, together.
const MAX_OTHER_FIELD_BYTES: usize = 64 * 1024;

/// Most files one upload request carries.
pub const MAX_FILES_PER_UPLOAD: usize = 20;

/// How much of a refused upload is still read (and thrown away) before the answer, so that a
/// client writing its whole body first reads the answer rather than a closed connection.
const REFUSED_UPLOAD_DRAIN_BYTES: usize = 8 * 1024 * 1024;

/// The form of an upload: one or more parts named `file`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Describes the multipart body in the OpenAPI document only.
pub struct UploadForm {
    /// The files, each a part named `file` with its file name: PDF, DOCX, HTML, Markdown,
    /// plain text or CSV, recognised by content; up to 20 per request.
    #[schema(value_type = Vec<String>, format = Binary, required = true, min_items = 1, max_items = 20)]
    pub file: Vec<Vec<u8>>,
}

/// A knowledge file.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeFileResponse {
    /// Its id (`kbf_…`).
    pub id: String,
    /// Its base.
    pub knowledge_base_id: String,
    /// The name it was uploaded with, without any directory.
    pub name: String,
    /// Its type, recognised from its content.
    pub media_type: String,
    /// Size of the original.
    pub bytes: u64,
    /// SHA-256 of the original, hex.
    pub sha256: String,
    /// `queued`, `processing`, `indexed` or `failed`.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Pages, for paged formats, once parsed.
    pub pages: Option<u32>,
    /// Chunks, once indexed.
    pub chunks: u32,
    /// 0–1: how much of its ingestion is done.
    pub progress: f64,
    /// Upload time.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    /// Last change of its status.
    #[serde(serialize_with = "timestamp::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
}

impl From<KnowledgeFile> for KnowledgeFileResponse {
    fn from(f: KnowledgeFile) -> Self {
        Self {
            id: f.id.into_string(),
            knowledge_base_id: f.knowledge_base_id.into_string(),
            name: f.name,
            media_type: f.media_type.as_str().to_owned(),
            bytes: f.bytes,
            sha256: f.sha256,
            status: f.status.as_str().to_owned(),
            error: f.error,
            pages: f.pages,
            chunks: f.chunks,
            progress: f.progress,
            created_at: f.created_at,
            updated_at: f.updated_at,
        }
    }
}

/// A file an upload stored (or found stored already).
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadedFileResponse {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its type.
    pub media_type: String,
    /// Its size.
    pub bytes: u64,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// `queued` for a new file; a duplicate's own status.
    pub status: String,
    /// The base held these bytes already: this is that file, nothing new was stored.
    pub duplicate: bool,
}

impl From<UploadedFile> for UploadedFileResponse {
    fn from(u: UploadedFile) -> Self {
        Self {
            id: u.file.id.into_string(),
            name: u.file.name,
            media_type: u.file.media_type.as_str().to_owned(),
            bytes: u.file.bytes,
            sha256: u.file.sha256,
            status: u.file.status.as_str().to_owned(),
            duplicate: u.duplicate,
        }
    }
}

/// What an upload stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct UploadResponse {
    /// In the order of the form's parts.
    pub files: Vec<UploadedFileResponse>,
}

fn form_error(message: impl Into<String>) -> ApiError {
    ApiError::from(FieldError::new("file", FieldErrorKind::InvalidFormat, message))
}

/// Reads and throws away what is left of a refused form, up to a bound.
async fn drain(form: &mut Multipart) {
    let mut read = 0;
    while let Some(Ok(mut field)) = form.next().await {
        while let Some(Ok(chunk)) = field.next().await {
            read += chunk.len();
            if read > REFUSED_UPLOAD_DRAIN_BYTES {
                return;
            }
        }
    }
}

/// Upload files into a knowledge base: `multipart/form-data` with one or more parts named
/// `file` (parts of other names are read past). Each is stored as it streams in, recognised by its content, and queued for
/// ingestion (`status` then moves to `processing` and `indexed`, or `failed` with its reason).
/// The same bytes uploaded again answer the existing file with `duplicate: true`. Needs
/// `knowledge:write`.
#[utoipa::path(
    post, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files", tag = "knowledge", operation_id = "uploadKnowledgeFiles",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 202, description = "Stored and queued for ingestion (or found stored already)", body = UploadResponse),
        (status = 402, description = "`quota_exceeded`: the plan keeps no more files or bytes"),
        (status = 404, description = "`not_found`: no such base in your tenant"),
        (status = 413, description = "`payload_too_large`: a file is larger than `AGENTRY_KNOWLEDGE_MAX_FILE_BYTES` (20 MiB)"),
        (status = 415, description = "`unsupported_media_type`: a file is not PDF, DOCX, HTML, Markdown, text or CSV, or not what its name says; or the body is not multipart/form-data"),
        (status = 422, description = "`validation_error`: a `file` part without a file name, more than 20 files, a broken form, or no `file` part at all"),
    )
)]
pub async fn upload(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<Reply<UploadResponse>, ApiError> {
    let base = base_id(path.into_inner(), "knowledge_base_id")?;
    // A form with its boundary, or nothing is read.
    let form_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<actix_web::mime::Mime>().ok())
        .filter(|m| m.type_() == actix_web::mime::MULTIPART && m.subtype() == actix_web::mime::FORM_DATA);
    if form_type.is_none_or(|m| m.get_param(actix_web::mime::BOUNDARY).is_none_or(|b| b.as_str().is_empty()))
    {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "upload files as multipart/form-data (with its boundary), one part named `file` per file",
        ));
    }
    let stored = store_form(&state, &caller, &base, Multipart::new(req.headers(), payload)).await?;
    Ok(Reply::with_status(
        actix_web::http::StatusCode::ACCEPTED,
        UploadResponse { files: stored.into_iter().map(Into::into).collect() },
    ))
}

/// Stores the files of a multipart form into `base`, all or nothing (the API's upload, and the
/// console's once it has read its CSRF field).
pub(crate) async fn store_form(
    state: &AppState,
    caller: &Principal,
    base: &KnowledgeBaseId,
    mut form: Multipart,
) -> Result<Vec<UploadedFile>, ApiError> {
    let mut stored: Vec<UploadedFile> = Vec::new();
    let result = receive(state, caller, base, &mut form, &mut stored).await;
    match result {
        Ok(()) => Ok(stored),
        Err(e) => {
            // All or nothing: the files this request added go again.
            for uploaded in stored.iter().filter(|u| !u.duplicate) {
                if let Err(e) = state.knowledge.delete_file(caller, base, &uploaded.file.id).await {
                    tracing::warn!(file = %uploaded.file.id, error = %e, "removing a file of a refused upload failed");
                }
            }
            drain(&mut form).await;
            Err(e)
        }
    }
}

/// Stores the form's files one by one into `stored`.
async fn receive(
    state: &AppState,
    caller: &Principal,
    base: &agentry_domain::ids::KnowledgeBaseId,
    form: &mut Multipart,
    stored: &mut Vec<UploadedFile>,
) -> Result<(), ApiError> {
    let mut other_bytes = 0;
    while let Some(field) = form.next().await {
        let mut field = field.map_err(|e| form_error(format!("the form cannot be read: {e}")))?;
        if field.name() != Some("file") {
            // A form may carry other fields (a browser's, a client's): they are read past, up
            // to a bound, so that no body streams on for ever outside the files' limits.
            while let Some(chunk) = field.next().await {
                other_bytes += chunk.map_err(|e| form_error(format!("the form cannot be read: {e}")))?.len();
                if other_bytes > MAX_OTHER_FIELD_BYTES {
                    return Err(ApiError::new(
                        ErrorCode::PayloadTooLarge,
                        format!(
                            "the form's fields other than `file` hold more than {MAX_OTHER_FIELD_BYTES} bytes"
                        ),
                    ));
                }
            }
            continue;
        }
        if stored.len() == MAX_FILES_PER_UPLOAD {
            return Err(form_error(format!("at most {MAX_FILES_PER_UPLOAD} files per upload")));
        }
        let name = field.content_disposition().and_then(|d| d.get_filename()).unwrap_or_default().to_owned();
        let mut upload = state.knowledge.begin_upload(caller, base, &name).await?;
        while let Some(chunk) = field.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    upload.abort().await;
                    return Err(form_error(format!("the form cannot be read: {e}")));
                }
            };
            upload.push(&chunk).await?;
        }
        stored.push(upload.finish().await?);
    }
    if stored.is_empty() {
        return Err(ApiError::from(FieldError::new(
            "file",
            FieldErrorKind::MissingRequiredField,
            "the form holds no file: send one or more parts named `file`",
        )));
    }
    Ok(())
}

/// The files of a base.
#[derive(Debug, Serialize, ToSchema)]
pub struct KnowledgeFileList {
    /// Oldest first.
    pub items: Vec<KnowledgeFileResponse>,
}

/// The files of a knowledge base, with their status and progress.
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files", tag = "knowledge", operation_id = "listKnowledgeFiles",
    security(("bearer" = [])),
    params(("knowledge_base_id" = String, Path, description = "Knowledge base id")),
    responses(
        (status = 200, description = "The files, oldest first", body = KnowledgeFileList),
        (status = 404, description = "`not_found`: no such base in your tenant"),
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<Reply<KnowledgeFileList>, ApiError> {
    let base = base_id(path.into_inner(), "knowledge_base_id")?;
    let files = state.knowledge.list_files(&caller, &base).await?;
    Ok(Reply::ok(KnowledgeFileList { items: files.into_iter().map(Into::into).collect() }))
}

fn ids(
    path: (String, String),
) -> Result<(agentry_domain::ids::KnowledgeBaseId, agentry_domain::ids::KnowledgeFileId), ApiError> {
    Ok((base_id(path.0, "knowledge_base_id")?, file_id(path.1, "file_id")?))
}

/// One file, with its ingestion's status and progress.
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files/{file_id}", tag = "knowledge", operation_id = "getKnowledgeFile",
    security(("bearer" = [])),
    params(
        ("knowledge_base_id" = String, Path, description = "Knowledge base id"),
        ("file_id" = String, Path, description = "File id"),
    ),
    responses(
        (status = 200, description = "The file", body = KnowledgeFileResponse),
        (status = 404, description = "`not_found`: no such file in the base"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<Reply<KnowledgeFileResponse>, ApiError> {
    let (base, file) = ids(path.into_inner())?;
    Ok(Reply::ok(state.knowledge.get_file(&caller, &base, &file).await?.into()))
}

/// The `Content-Disposition` of a download: the name as a quoted ASCII fallback and as
/// RFC 5987 UTF-8.
fn disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// Download a file's original bytes: always as an attachment, never shown as a page of ours
/// (an HTML file included).
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files/{file_id}/content", tag = "knowledge", operation_id = "downloadKnowledgeFile",
    security(("bearer" = [])),
    params(
        ("knowledge_base_id" = String, Path, description = "Knowledge base id"),
        ("file_id" = String, Path, description = "File id"),
    ),
    responses(
        (status = 200, description = "The bytes as uploaded, with the file's media type", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "`not_found`: no such file in the base"),
    )
)]
pub async fn content(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (base, id) = ids(path.into_inner())?;
    let file = state.knowledge.get_file(&caller, &base, &id).await?;
    let knowledge = state.knowledge.clone();
    let (name, media_type, length) = (file.name.clone(), file.media_type.as_str(), file.bytes);
    // One part at a time: a download never holds the whole file.
    let parts =
        futures_util::stream::unfold((knowledge, file, 0_u32), |(knowledge, file, index)| async move {
            match knowledge.content_part(&file, index).await {
                Ok(Some(part)) => Some((Ok(web::Bytes::from(part)), (knowledge, file, index + 1))),
                Ok(None) => None,
                Err(e) => {
                    tracing::error!(file = %file.id, error = %e, "reading a file's content failed");
                    Some((
                        Err(actix_web::error::ErrorInternalServerError("the file could not be read")),
                        (knowledge, file, u32::MAX),
                    ))
                }
            }
        })
        .take_while(|r| std::future::ready(r.is_ok()));
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, media_type))
        .insert_header((header::CONTENT_DISPOSITION, disposition(&name)))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CONTENT_SECURITY_POLICY, "sandbox; default-src 'none'"))
        .insert_header((header::CONTENT_LENGTH, length))
        .streaming(parts))
}

/// A page of chunks.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChunkQuery {
    /// Chunks to skip (default 0).
    #[param(minimum = 0)]
    pub skip: Option<i64>,
    /// Chunks to return, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// One chunk of a file.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkResponse {
    /// Its id (`kbc_…`).
    pub id: String,
    /// Its file.
    pub file_id: String,
    /// Its place in the file, from 0.
    pub index: u32,
    /// Its text.
    pub text: String,
    /// The page, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub headings: Vec<String>,
    /// Offset (in characters) of its first character in the file's text.
    pub start: u64,
    /// Offset just past its last character.
    pub end: u64,
}

impl From<KnowledgeChunk> for ChunkResponse {
    fn from(c: KnowledgeChunk) -> Self {
        Self {
            id: c.id.into_string(),
            file_id: c.file_id.into_string(),
            index: c.index,
            text: c.text,
            page: c.page,
            headings: c.headings,
            start: c.start,
            end: c.end,
        }
    }
}

/// A page of a file's chunks.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkList {
    /// In order.
    pub items: Vec<ChunkResponse>,
    /// The file's chunks in all.
    pub total: u64,
    /// Skipped.
    pub skip: u64,
    /// Page size.
    pub limit: u64,
}

/// A file's chunks, in order (none until it is indexed).
#[utoipa::path(
    get, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files/{file_id}/chunks", tag = "knowledge", operation_id = "listKnowledgeChunks",
    security(("bearer" = [])),
    params(
        ("knowledge_base_id" = String, Path, description = "Knowledge base id"),
        ("file_id" = String, Path, description = "File id"),
        ChunkQuery,
    ),
    responses(
        (status = 200, description = "A page of chunks", body = ChunkList),
        (status = 404, description = "`not_found`: no such file in the base"),
    )
)]
pub async fn chunks(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
    query: QueryParams<ChunkQuery>,
) -> Result<Reply<ChunkList>, ApiError> {
    let (base, file) = ids(path.into_inner())?;
    let q = query.0;
    let skip = match q.skip {
        None => 0,
        Some(n) => u64::try_from(n)
            .map_err(|_| FieldError::new("skip", FieldErrorKind::OutOfRange, "skip must be 0 or more"))?,
    };
    let limit = match q.limit {
        None => 20,
        Some(n) if (1..=100).contains(&n) => n.unsigned_abs(),
        Some(_) => {
            return Err(
                FieldError::new("limit", FieldErrorKind::OutOfRange, "limit must be from 1 to 100").into()
            );
        }
    };
    let (items, total) = state.knowledge.list_chunks(&caller, &base, &file, skip, limit).await?;
    Ok(Reply::ok(ChunkList { items: items.into_iter().map(Into::into).collect(), total, skip, limit }))
}

/// Delete a file with its content, chunks and vectors.
#[utoipa::path(
    delete, path = "/api/v1/knowledge-bases/{knowledge_base_id}/files/{file_id}", tag = "knowledge", operation_id = "deleteKnowledgeFile",
    security(("bearer" = [])),
    params(
        ("knowledge_base_id" = String, Path, description = "Knowledge base id"),
        ("file_id" = String, Path, description = "File id"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such file in the base"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (base, file) = ids(path.into_inner())?;
    state.knowledge.delete_file(&caller, &base, &file).await?;
    Ok(HttpResponse::NoContent().finish())
}
