//! Knowledge search: the chunks of one or more bases nearest in meaning and best matching in
//! words, fused and scored by memory's ranking ([`crate::memory::ranking`]), the same scale
//! and the same `min_score` as memory search.

use std::collections::{HashMap, HashSet};

use super::{KnowledgeError, KnowledgeService};
use crate::ids::{ChunkId, KnowledgeBaseId, KnowledgeFileId, TenantId};
use crate::knowledge::model::KnowledgeChunk;
use crate::knowledge::ports::{ChunkScope, FoundChunk};
use crate::memory::ranking::{Scored, SearchMode, fuse, rank};
use crate::memory::{identifiers, lexical_coverage, lexical_terms};
use crate::tenancy::{Permission, Principal};

/// A validated knowledge search.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeQuery {
    /// What is looked for.
    pub text: String,
    /// The bases searched (at least one).
    pub bases: Vec<KnowledgeBaseId>,
    /// Only these files of them, when not empty.
    pub files: Vec<KnowledgeFileId>,
    /// Most hits.
    pub top_k: usize,
    /// Score under which a chunk is left out; the settings' default when absent.
    pub min_score: Option<f64>,
}

/// A chunk a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeHit {
    /// The chunk.
    pub chunk: KnowledgeChunk,
    /// Its file's name.
    pub file_name: String,
    /// Its score and the parts it is made of.
    pub ranking: Scored<ChunkId>,
}

impl KnowledgeService {
    /// Searches the caller's bases.
    ///
    /// # Errors
    /// [`KnowledgeError::BaseNotFound`] (a base not of the caller's tenant),
    /// [`KnowledgeError::Embedding`], `Forbidden`, storage errors.
    pub async fn search(
        &self,
        caller: &Principal,
        query: KnowledgeQuery,
    ) -> Result<Vec<KnowledgeHit>, KnowledgeError> {
        caller.require(Permission::KnowledgeRead)?;
        self.search_in(&caller.tenant_id, query).await
    }

    /// Searches a tenant's bases on its behalf (an agent's retrieval, a workflow step): the
    /// bases must be the tenant's.
    ///
    /// # Errors
    /// As [`KnowledgeService::search`].
    pub async fn search_in(
        &self,
        tenant: &TenantId,
        query: KnowledgeQuery,
    ) -> Result<Vec<KnowledgeHit>, KnowledgeError> {
        for base in &query.bases {
            self.base_of(tenant, base).await?;
        }
        let scope = ChunkScope { tenant: tenant.clone(), bases: query.bases, files: query.files };
        let d = &self.deps;
        let n = self.settings.candidates.max(query.top_k);
        let terms = lexical_terms(&query.text);
        let vector = d.embedder.embed_query(&query.text).await?;
        let model = d.embedder.model().id.clone();
        let nearest = d.index.nearest(&scope, &model, &vector, n).await?;
        let lexical = if terms.is_empty() { Vec::new() } else { d.index.lexical(&scope, &terms, n).await? };
        let mut ids: Vec<ChunkId> = nearest.iter().map(|(id, _)| id.clone()).collect();
        let known: HashSet<&ChunkId> = ids.iter().collect();
        let extra: Vec<ChunkId> = lexical.iter().filter(|id| !known.contains(id)).cloned().collect();
        ids.extend(extra);
        let mut found: HashMap<ChunkId, FoundChunk> =
            d.index.get_chunks(tenant, &ids).await?.into_iter().map(|f| (f.chunk.id.clone(), f)).collect();
        let named = identifiers(&query.text);
        let lexical: Vec<(ChunkId, f64)> = lexical
            .into_iter()
            .filter_map(|id| {
                Some((id.clone(), lexical_coverage(&found.get(&id)?.chunk.text, &terms, &named, false)?))
            })
            .collect();
        // Chunks have no importance or age of their own: the settings give both no weight.
        let now = d.clock.now();
        let candidates = fuse(&nearest, &lexical, |id| found.contains_key(id).then_some((0.5, now)));
        let min_score = query.min_score.unwrap_or(self.settings.min_score);
        Ok(rank(candidates, SearchMode::Hybrid, &self.settings.ranking, now)
            .into_iter()
            .filter(|scored| scored.score >= min_score)
            .take(query.top_k)
            .filter_map(|ranking| {
                let FoundChunk { chunk, file_name } = found.remove(&ranking.candidate.id)?;
                Some(KnowledgeHit { chunk, file_name, ranking })
            })
            .collect())
    }
}
