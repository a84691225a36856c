//! Chat's memory: the memory service behind the [`MemoryRecall`] port, and [`NoRecall`] for
//! chat without memory.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::model::Agent;
use super::ports::MemoryRecall;
use crate::ids::SessionId;
use crate::memory::{EmbeddedEntry, MemoryService, MemoryType};

/// Recalls nothing: the behaviour until a memory store is wired in.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRecall;

#[async_trait]
impl MemoryRecall for NoRecall {
    async fn recall(&self, _agent: &Agent, _message: &str) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn episode(
        &self,
        _agent: &Agent,
        _session: &SessionId,
        _message: &str,
        _reply: &str,
        _at: DateTime<Utc>,
    ) -> anyhow::Result<Option<EmbeddedEntry>> {
        Ok(None)
    }
}

#[async_trait]
impl MemoryRecall for MemoryService {
    async fn recall(&self, agent: &Agent, message: &str) -> anyhow::Result<Vec<String>> {
        Ok(self.recall_for(&agent.tenant_id, &agent.id, message).await?)
    }

    async fn episode(
        &self,
        agent: &Agent,
        session: &SessionId,
        message: &str,
        reply: &str,
        at: DateTime<Utc>,
    ) -> anyhow::Result<Option<EmbeddedEntry>> {
        // Only an agent that keeps episodic memory remembers its exchanges.
        if !agent.memory_types.contains(&MemoryType::Episodic) {
            return Ok(None);
        }
        Ok(Some(self.episode_of(&agent.tenant_id, &agent.id, session, message, reply, at).await?))
    }
}

#[cfg(test)]
mod tests;
