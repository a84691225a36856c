//! Ingestion, a kind of durable work ([`crate::work`]): a worker claims a queued file (the
//! file's row is the queue item), reads its parts, parses it off the async runtime, cuts it
//! into chunks, embeds them in batches and indexes them with the file's `indexed` status in
//! one transaction. A file is searchable whole or not at all; a worker killed part-way leaves
//! nothing behind but its lease, and the file is claimed again (by another instance within
//! seconds, or after a restart) and ingested from the start.
//!
//! A file that cannot be read ends `failed` with its reason at once (a parse error is the
//! file's, never transient). A failure of the embedding model or of storage leaves the lease
//! to run out, so the file is tried again, up to the kind's claims.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Duration;

use super::chunking::chunk_document;
use super::model::KnowledgeFile;
use super::ports::{IndexedChunk, IngestionItem};
use super::service::KnowledgeDeps;
use crate::events::{Event, EventPayload};
use crate::ids::ChunkId;
use crate::tokens::TokenCounter;
use crate::work::{Claimed, LeaseQueue, Outcome, Ran, WorkKind};

/// How ingestion is run.
#[derive(Debug, Clone)]
pub struct IngestionSettings {
    /// How long a claim holds a file: longer than the longest ingestion (a dead instance's
    /// files are free as soon as its heartbeat is silent, whatever the lease).
    pub lease: Duration,
    /// Files one instance ingests at once.
    pub concurrency: u32,
    /// Claims after which a file that never finished is failed.
    pub max_claims: u32,
    /// Texts embedded per call.
    pub embed_batch: usize,
}

impl Default for IngestionSettings {
    fn default() -> Self {
        Self { lease: Duration::minutes(15), concurrency: 2, max_claims: 3, embed_batch: 32 }
    }
}

/// Share of the progress reached once the file is parsed and cut; embedding makes the rest.
const PARSED: f64 = 0.1;

/// The ingestion of knowledge files, as a [`WorkKind`].
pub struct Ingestion {
    deps: KnowledgeDeps,
    queue: Arc<dyn LeaseQueue<IngestionItem>>,
    tokens: Arc<dyn TokenCounter>,
    settings: IngestionSettings,
}

impl std::fmt::Debug for Ingestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingestion").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Ingestion {
    /// Ingestion with the knowledge service's `deps`, claiming from `queue`.
    pub fn new(
        deps: KnowledgeDeps,
        queue: Arc<dyn LeaseQueue<IngestionItem>>,
        tokens: Arc<dyn TokenCounter>,
        settings: IngestionSettings,
    ) -> Self {
        Self { deps, queue, tokens, settings }
    }

    /// The file's original bytes, read part by part.
    async fn content(&self, file: &KnowledgeFile) -> anyhow::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(usize::try_from(file.bytes).unwrap_or(0));
        let mut index = 0;
        while let Some(part) = self.deps.files.get_part(&file.tenant_id, &file.id, index).await? {
            bytes.extend_from_slice(&part);
            index += 1;
        }
        Ok(bytes)
    }

    /// Records that the file cannot be read.
    async fn fail(&self, claimed: &Claimed<IngestionItem>, error: String) -> anyhow::Result<Ran> {
        let file = &claimed.file;
        tracing::info!(file = %file.id, %error, "a knowledge file cannot be read");
        let now = self.deps.clock.now();
        let event = failed_event(self, file, &error);
        let held = self.deps.index.fail_file(file, Some(claimed.lease.clone()), &error, &event, now).await?;
        Ok(Ran::ended(if held { Outcome::Failed } else { Outcome::LostLease }))
    }
}

/// The time of each stage of one file's ingestion, recorded as [`KNOWLEDGE_STAGE_DURATION`]
/// (`make bench-knowledge` compares the stages with the embedding model's own throughput).
///
/// [`KNOWLEDGE_STAGE_DURATION`]: crate::metrics::KNOWLEDGE_STAGE_DURATION
struct Stages(std::time::Instant);

impl Stages {
    fn start() -> Self {
        Self(std::time::Instant::now())
    }

    /// Records the stage that ends now; the next starts.
    fn done(&mut self, stage: &'static str) {
        metrics::histogram!(crate::metrics::KNOWLEDGE_STAGE_DURATION, "stage" => stage)
            .record(self.0.elapsed().as_secs_f64());
        self.restart();
    }

    fn restart(&mut self) {
        self.0 = std::time::Instant::now();
    }
}

fn failed_event(ingestion: &Ingestion, file: &KnowledgeFile, error: &str) -> Event {
    Event::new(
        ingestion.deps.ids.as_ref(),
        &file.tenant_id,
        EventPayload::KnowledgeFileFailed {
            knowledge_base_id: file.knowledge_base_id.clone(),
            file_id: file.id.clone(),
            name: file.name.clone(),
            error: error.to_owned(),
        },
        ingestion.deps.clock.now(),
    )
}

#[async_trait]
impl WorkKind for Ingestion {
    type Item = IngestionItem;

    fn name(&self) -> &'static str {
        "knowledge_ingestion"
    }

    fn queue(&self) -> &dyn LeaseQueue<IngestionItem> {
        self.queue.as_ref()
    }

    fn lease(&self) -> Duration {
        self.settings.lease
    }

    fn concurrency(&self) -> u32 {
        self.settings.concurrency
    }

    fn max_claims(&self) -> u32 {
        self.settings.max_claims
    }

    async fn run(
        &self,
        claimed: Claimed<IngestionItem>,
        keep_going: &(dyn Fn() -> bool + Send + Sync),
    ) -> anyhow::Result<Ran> {
        let d = &self.deps;
        let file = &claimed.file;
        let mut stage = Stages::start();
        let bytes = self.content(file).await?;
        stage.done("read");
        let parsed = d.parser.parse(file.media_type, Arc::from(bytes)).await;
        stage.done("parse");
        let document = match parsed {
            Ok(document) if document.has_text() => document,
            Ok(_) => return self.fail(&claimed, super::ParseError::NoText.to_string()).await,
            Err(e) => return self.fail(&claimed, e.to_string()).await,
        };
        let chunks = chunk_document(&document, claimed.chunking, self.tokens.as_ref());
        drop(document.sections);
        stage.done("chunk");
        let mut embedding = std::time::Duration::ZERO;
        if !d.index.set_progress(&file.id, &claimed.lease, PARSED, d.clock.now()).await? {
            return Ok(Ran::ended(Outcome::LostLease));
        }
        let total = chunks.len().max(1);
        let mut indexed = Vec::with_capacity(chunks.len());
        let batch = self.settings.embed_batch.max(1);
        for group in chunks.chunks(batch) {
            if !keep_going() {
                // Stopping: the instance leaves its heartbeat behind, so the file is free for
                // any worker at once, and is ingested again from the start.
                return Ok(Ran::ended(Outcome::Released));
            }
            let texts: Vec<String> = group.iter().map(|c| c.text.clone()).collect();
            let began = std::time::Instant::now();
            let vectors = d.embedder.embed(&texts).await?;
            embedding += began.elapsed();
            anyhow::ensure!(
                vectors.len() == group.len(),
                "the embedding model answered {} vectors for {} texts",
                vectors.len(),
                group.len()
            );
            for (chunk, vector) in group.iter().zip(vectors) {
                indexed.push(IndexedChunk {
                    id: ChunkId::generate(d.ids.as_ref()),
                    chunk: chunk.clone(),
                    vector,
                });
            }
            let progress = PARSED + (1.0 - PARSED) * (indexed.len() as f64 / total as f64) * 0.99;
            if !d.index.set_progress(&file.id, &claimed.lease, progress, d.clock.now()).await? {
                return Ok(Ran::ended(Outcome::LostLease));
            }
        }
        metrics::histogram!(crate::metrics::KNOWLEDGE_STAGE_DURATION, "stage" => "embed")
            .record(embedding.as_secs_f64());
        stage.restart();
        let event = Event::new(
            d.ids.as_ref(),
            &file.tenant_id,
            EventPayload::KnowledgeFileIndexed {
                knowledge_base_id: file.knowledge_base_id.clone(),
                file_id: file.id.clone(),
                name: file.name.clone(),
                pages: document.pages,
                chunks: u32::try_from(indexed.len()).unwrap_or(u32::MAX),
            },
            d.clock.now(),
        );
        let model = d.embedder.model().id.clone();
        let held = d
            .index
            .index_file(file, &claimed.lease, &model, document.pages, &indexed, &event, d.clock.now())
            .await?;
        stage.done("index");
        Ok(Ran::ended(if held { Outcome::Done } else { Outcome::LostLease }))
    }

    async fn give_up(&self, claimed: Claimed<IngestionItem>, reason: String) -> anyhow::Result<Ran> {
        let event = failed_event(self, &claimed.file, &reason);
        self.deps.index.fail_file(&claimed.file, None, &reason, &event, self.deps.clock.now()).await?;
        Ok(Ran::ended(Outcome::Failed))
    }
}
