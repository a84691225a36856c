//! The [`KnowledgeRetrieval`] port through which the knowledge module takes part in chat
//! (implemented here for [`KnowledgeService`]; knowledge does not know agents). What an agent
//! sets about it is in `knowledge_config`. The `knowledge_search` tool of an agent in `tool`
//! mode is served by the composition root, over this port.

use async_trait::async_trait;

use super::citation::Source;
use super::model::Agent;
use crate::ids::{KnowledgeBaseId, TenantId};
use crate::knowledge::{KnowledgeHit, KnowledgeQuery, KnowledgeService};

/// The passages of an agent's knowledge bases, for chat.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait KnowledgeRetrieval: Send + Sync {
    /// The passages of the agent's bases that best match `query`, best first, numbered from 1,
    /// at most `top_k`; those under the search's `min_score` are left out. Bases deleted since
    /// they were attached are skipped.
    async fn sources(&self, agent: &Agent, query: &str, top_k: usize) -> anyhow::Result<Vec<Source>>;

    /// Those of `bases` that are not knowledge bases of `tenant`.
    async fn unknown_bases(
        &self,
        tenant: &TenantId,
        bases: &[KnowledgeBaseId],
    ) -> anyhow::Result<Vec<KnowledgeBaseId>>;
}

/// Knows no knowledge base: chat without the knowledge module.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoKnowledge;

#[async_trait]
impl KnowledgeRetrieval for NoKnowledge {
    async fn sources(&self, _agent: &Agent, _query: &str, _top_k: usize) -> anyhow::Result<Vec<Source>> {
        Ok(Vec::new())
    }

    async fn unknown_bases(
        &self,
        _tenant: &TenantId,
        bases: &[KnowledgeBaseId],
    ) -> anyhow::Result<Vec<KnowledgeBaseId>> {
        Ok(bases.to_vec())
    }
}

fn source(index: usize, hit: KnowledgeHit) -> Source {
    Source {
        index: u32::try_from(index + 1).unwrap_or(u32::MAX),
        chunk_id: hit.chunk.id,
        file_id: hit.chunk.file_id,
        file_name: hit.file_name,
        page: hit.chunk.page,
        headings: hit.chunk.headings,
        text: hit.chunk.text,
    }
}

#[async_trait]
impl KnowledgeRetrieval for KnowledgeService {
    async fn sources(&self, agent: &Agent, query: &str, top_k: usize) -> anyhow::Result<Vec<Source>> {
        let unknown = self.unknown_bases(&agent.tenant_id, &agent.config.knowledge_bases).await?;
        let bases: Vec<KnowledgeBaseId> =
            agent.config.knowledge_bases.iter().filter(|b| !unknown.contains(b)).cloned().collect();
        if bases.is_empty() || query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let query =
            KnowledgeQuery { text: query.to_owned(), bases, files: Vec::new(), top_k, min_score: None };
        let hits = self.search_in(&agent.tenant_id, query).await.map_err(|e| anyhow::anyhow!(e))?;
        Ok(hits.into_iter().enumerate().map(|(i, hit)| source(i, hit)).collect())
    }

    async fn unknown_bases(
        &self,
        tenant: &TenantId,
        bases: &[KnowledgeBaseId],
    ) -> anyhow::Result<Vec<KnowledgeBaseId>> {
        if bases.is_empty() {
            return Ok(Vec::new());
        }
        let known = self.bases_of(tenant).await?;
        Ok(bases.iter().filter(|b| !known.iter().any(|k| &k.id == *b)).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_the_knowledge_module_no_base_is_known() {
        let bases = vec![KnowledgeBaseId::from_string("kb_1")];
        let unknown = NoKnowledge.unknown_bases(&TenantId::from_string("ten_1"), &bases).await.unwrap();
        assert_eq!(unknown, bases);
    }
}
