//! Variant A's documents (chunked into entries) and consolidation.

use super::*;

/// A document to add.
#[derive(Debug, Deserialize, ToSchema)]
pub struct DocumentRequest {
    /// Title, 1–500 characters.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 500, extensions(("x-text" = json!("name"))))]
    pub title: Option<String>,
    /// The text; cut into chunks of about 256 tokens.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 100000,
        extensions(("x-text" = json!("message"))))]
    pub content: Option<String>,
    /// Free-form object, copied onto each chunk.
    #[schema(schema_with = crate::schemas::metadata_optional)]
    pub metadata: Option<Value>,
}

/// Documents to add to an agent's memory.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AddDocumentsRequest {
    /// The agent.
    #[schema(required = true, value_type = String, extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// 1–100 documents.
    #[schema(required = true, min_items = 1, max_items = 100)]
    pub documents: Option<Vec<DocumentRequest>>,
}

/// A stored document.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentResponse {
    /// Document id (`doc_…`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// How many chunks it was stored as.
    pub chunks: u64,
    /// The chunks' memory ids, in order.
    pub chunk_ids: Vec<String>,
}

/// What adding documents stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct AddDocumentsResponse {
    /// The agent.
    pub agent_id: String,
    /// The documents, in request order.
    pub documents: Vec<DocumentResponse>,
}

impl From<DocumentSummary> for DocumentResponse {
    fn from(s: DocumentSummary) -> Self {
        Self {
            id: s.document.id.into_string(),
            title: s.document.title,
            chunks: s.document.chunk_count,
            chunk_ids: s.chunk_ids.into_iter().map(MemoryId::into_string).collect(),
        }
    }
}

fn document(i: usize, d: DocumentRequest, v: &mut Validator) -> Checked<NewDocument> {
    let field = |f: &str| format!("documents[{i}].{f}");
    let title = v.required(&field("title"), d.title, |t| {
        agentry_domain::validation::check_text(
            &t,
            &field("title"),
            agentry_domain::validation::TextKind::SingleLine,
        )?;
        agentry_domain::validation::check_length(t.trim(), 1, MAX_TITLE_CHARS, &field("title"))?;
        Ok(t.trim().to_owned())
    });
    let content = v.required(&field("content"), d.content, |c| {
        agentry_domain::validation::check_long_text(&c, 1, MAX_DOCUMENT_CHARS, &field("content"))?;
        if c.trim().is_empty() {
            return Err(FieldError::new(
                field("content"),
                FieldErrorKind::TooShort,
                "content must not be empty",
            ));
        }
        Ok(c)
    });
    let metadata = v.optional(&field("metadata"), d.metadata, |m| memory::metadata(m, &field("metadata")));
    v.combine((title, content, metadata), |(title, content, metadata)| NewDocument {
        title,
        content,
        metadata: metadata.unwrap_or_default(),
    })
}

/// Add documents to an agent's memory: each is cut into chunks of about 256 tokens on
/// sentence boundaries (with overlap; identical chunks stored once), embedded and stored, all
/// documents at once or none.
#[utoipa::path(
    post, path = "/api/v1/memory/documents", tag = "memory", operation_id = "addMemoryDocuments",
    security(("bearer" = [])),
    request_body = AddDocumentsRequest,
    responses(
        (status = 201, description = "Stored", body = AddDocumentsResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
        (status = 502, description = "`upstream_error`: the embedding provider failed"),
    )
)]
pub async fn add_documents(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<AddDocumentsRequest>,
) -> Result<Reply<AddDocumentsResponse>, ApiError> {
    let (agent, docs) = body.0.try_into_domain()?;
    let stored = state.memory.add_documents(&caller, &agent, docs).await?;
    Ok(Reply::created(AddDocumentsResponse {
        agent_id: agent.into_string(),
        documents: stored.into_iter().map(DocumentResponse::from).collect(),
    }))
}

impl AddDocumentsRequest {
    pub(crate) fn try_into_domain(self) -> Result<(AgentId, Vec<NewDocument>), ValidationErrors> {
        let b = self;
        let mut v = Validator::new();
        let agent = v.required("agent_id", b.agent_id, agent_id);
        let mut docs = Vec::new();
        match b.documents {
            None => v.push(FieldError::missing("documents")),
            Some(list) if list.is_empty() => {
                v.push(FieldError::new("documents", FieldErrorKind::TooShort, "give at least one document"));
            }
            Some(list) if list.len() > MAX_DOCUMENTS => v.push(FieldError::new(
                "documents",
                FieldErrorKind::TooLong,
                format!("at most {MAX_DOCUMENTS} documents per request"),
            )),
            Some(list) => {
                docs = list.into_iter().enumerate().map(|(i, d)| document(i, d, &mut v)).collect();
            }
        }
        let docs = v.all(docs);
        v.finish((agent, docs))
    }
}

/// Delete a document and all its chunks.
#[utoipa::path(
    delete, path = "/api/v1/memory/documents/{document_id}", tag = "memory", operation_id = "deleteMemoryDocument",
    security(("bearer" = [])),
    params(("document_id" = String, Path, description = "Document id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`not_found`: no such document in your tenant"),
    )
)]
pub async fn delete_document(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let raw = path.into_inner();
    check_path_id(&raw, "document_id")?;
    state.memory.delete_document(&caller, &DocumentId::from_string(raw)).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A consolidation request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ConsolidateRequest {
    /// The agent whose memories are consolidated.
    #[schema(required = true, value_type = String, extensions(("x-text" = json!("name"))))]
    pub agent_id: Option<String>,
    /// Cosine similarity at or above which two memories merge, 0.5–1 (default 0.92).
    #[schema(minimum = 0.5, maximum = 1.0)]
    pub threshold: Option<f64>,
}

/// What consolidation did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsolidateResponse {
    /// The agent.
    pub agent_id: String,
    /// Memories compared (document chunks are left alone).
    pub examined: u64,
    /// Memories merged into another and removed.
    pub merged: u64,
    /// Memories that absorbed at least one other.
    pub kept: u64,
    /// The threshold used.
    pub threshold: f32,
}

/// Merge an agent's near-duplicate memories: the most important of each group is kept, takes
/// the others' tags and access counts, and the others are removed; `memory.consolidated` is
/// emitted with the counts.
#[utoipa::path(
    post, path = "/api/v1/memory/consolidate", tag = "memory", operation_id = "consolidateMemory",
    security(("bearer" = [])),
    request_body = ConsolidateRequest,
    responses(
        (status = 200, description = "Done", body = ConsolidateResponse),
        (status = 404, description = "`not_found`: no such agent in your tenant"),
    )
)]
pub async fn consolidate(
    state: web::Data<AppState>,
    caller: Caller,
    body: JsonBody<ConsolidateRequest>,
) -> Result<Reply<ConsolidateResponse>, ApiError> {
    let b = body.0;
    let mut v = Validator::new();
    let agent = v.required("agent_id", b.agent_id, agent_id);
    let threshold = v.optional("threshold", b.threshold, |t| {
        if (0.5..=1.0).contains(&t) {
            #[allow(clippy::cast_possible_truncation)]
            Ok(t as f32)
        } else {
            Err(FieldError::new("threshold", FieldErrorKind::OutOfRange, "threshold must be from 0.5 to 1"))
        }
    });
    let (agent, threshold) = v.finish((agent, threshold))?;
    let report: ConsolidationReport = state.memory.consolidate(&caller, &agent, threshold).await?;
    Ok(Reply::ok(ConsolidateResponse {
        agent_id: agent.into_string(),
        examined: report.examined,
        merged: report.merged,
        kept: report.kept,
        threshold: report.threshold,
    }))
}
