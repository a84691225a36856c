//! Documents: cut into chunks, embedded, and stored with their chunks in one transaction;
//! deleted with them.

use serde_json::{Map, Value};

use super::{MemoryError, MemoryService, NewMemory};
use crate::ids::{AgentId, DocumentId, MemoryId};
use crate::memory::chunking::chunk;
use crate::memory::model::{EmbeddedEntry, MemoryDocument, MemoryType};
use crate::tenancy::{Permission, Principal};

/// A validated document to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDocument {
    /// Its title.
    pub title: String,
    /// Its text.
    pub content: String,
    /// Free-form object, copied onto each chunk.
    pub metadata: Map<String, Value>,
}

/// What adding a document stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSummary {
    /// The document.
    pub document: MemoryDocument,
    /// The ids of its chunks, in order.
    pub chunk_ids: Vec<MemoryId>,
}

impl MemoryService {
    /// Adds documents to an agent's memory: each is cut into chunks of about 256 tokens on
    /// sentence boundaries (identical chunks of a document stored once), embedded, and stored
    /// with the documents in one transaction.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`], [`MemoryError::Embedding`].
    pub async fn add_documents(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        documents: Vec<NewDocument>,
    ) -> Result<Vec<DocumentSummary>, MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
        let d = &self.deps;
        let now = d.clock.now();
        let mut entries = Vec::new();
        let mut summaries = Vec::new();
        for doc in documents {
            let id = DocumentId::generate(d.ids.as_ref());
            let chunks = chunk(&doc.content, self.settings.chunks, d.tokens.as_ref());
            let mut metadata = doc.metadata.clone();
            metadata.insert("title".into(), Value::String(doc.title.clone()));
            metadata.insert("document_id".into(), Value::String(id.to_string()));
            let mut chunk_ids = Vec::with_capacity(chunks.len());
            for (i, content) in chunks.into_iter().enumerate() {
                let mut metadata = metadata.clone();
                metadata.insert("chunk".into(), Value::from(i));
                let mut entry = self.entry(
                    &caller.tenant_id,
                    NewMemory {
                        agent_id: Some(agent_id.clone()),
                        memory_type: MemoryType::Semantic,
                        key: None,
                        content,
                        source: Some("document".into()),
                        metadata,
                        tags: Vec::new(),
                        importance: None,
                        expiry: None,
                        origin: crate::memory::model::MemoryOrigin::Document,
                    },
                    now,
                );
                entry.document_id = Some(id.clone());
                chunk_ids.push(entry.id.clone());
                entries.push(entry);
            }
            summaries.push(DocumentSummary {
                document: MemoryDocument {
                    id,
                    tenant_id: caller.tenant_id.clone(),
                    agent_id: agent_id.clone(),
                    title: doc.title,
                    metadata: doc.metadata,
                    chunk_count: chunk_ids.len() as u64,
                    created_at: now,
                },
                chunk_ids,
            });
        }
        let embeddings = self.embed(entries.iter().map(|e| e.content.clone()).collect()).await?;
        let embedded: Vec<EmbeddedEntry> = entries
            .into_iter()
            .zip(embeddings)
            .map(|(entry, embedding)| EmbeddedEntry { entry, embedding })
            .collect();
        let documents: Vec<MemoryDocument> = summaries.iter().map(|s| s.document.clone()).collect();
        if let Err(e) = d.memories.insert(&embedded, &documents).await {
            self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
            return Err(e.into());
        }
        Ok(summaries)
    }

    /// Deletes a document and its chunks.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Forbidden`].
    pub async fn delete_document(&self, caller: &Principal, id: &DocumentId) -> Result<(), MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        if self.deps.memories.delete_document(&caller.tenant_id, id).await? {
            Ok(())
        } else {
            Err(MemoryError::NotFound)
        }
    }
}
