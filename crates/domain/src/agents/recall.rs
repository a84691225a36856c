//! Chat's memory: the memory service behind the [`MemoryRecall`] port.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::chat::MemoryRecall;
use super::model::Agent;
use crate::ids::SessionId;
use crate::memory::{EmbeddedEntry, MemoryService, MemoryType};

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
