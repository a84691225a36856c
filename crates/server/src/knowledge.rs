//! Knowledge bases as the service runs them: the service over the database's stores, the
//! parsers of `agentry-documents`, ring's SHA-256 and memory's embedder, and the ingestion
//! worker that claims from the same store.

use std::sync::Arc;

use agentry_crypto::RingDigests;
use agentry_documents::Parsers;
use agentry_domain::ids::IdGenerator;
use agentry_domain::knowledge::{
    Ingestion, IngestionSettings, KnowledgeDeps, KnowledgeService, KnowledgeSettings, ParseLimits,
};
use agentry_domain::memory::Embedder;
use agentry_domain::memory::ranking::RankingSettings;
use agentry_domain::time::Clock;
use agentry_domain::work::Worker;
use agentry_llm::Cl100kTokens;
use agentry_store::{Database, DbFileStore, KnowledgeStore};

use crate::adapters::similarity_scale;
use crate::config::Config;

/// The knowledge service over `db`, and the worker of its ingestion.
pub fn knowledge_services(
    config: &Config,
    db: &Database,
    embedder: Arc<dyn Embedder>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
) -> (KnowledgeService, Worker<Ingestion>) {
    let store = Arc::new(KnowledgeStore::new(db.clone()));
    let limits = ParseLimits::default();
    let provider = embedder.model().provider.clone();
    let settings = KnowledgeSettings {
        max_file_bytes: config.knowledge_max_file_bytes,
        ranking: RankingSettings {
            similarity: similarity_scale(config, &provider),
            ..KnowledgeSettings::default().ranking
        },
        ..KnowledgeSettings::default()
    };
    let deps = KnowledgeDeps {
        repository: store.clone(),
        index: store.clone(),
        files: Arc::new(DbFileStore::new(db.clone())),
        parser: Arc::new(Parsers::new(limits)),
        digests: Arc::new(RingDigests),
        embedder,
        ids: ids.clone(),
        clock: clock.clone(),
    };
    let ingestion = Ingestion::new(
        deps.clone(),
        store,
        Arc::new(Cl100kTokens::default()),
        IngestionSettings {
            concurrency: config.knowledge_ingestion_concurrency,
            ..IngestionSettings::default()
        },
    );
    (KnowledgeService::new(deps, settings), Worker::new(Arc::new(ingestion), ids, clock))
}
