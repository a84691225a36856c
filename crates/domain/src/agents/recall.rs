//! Chat's memory: the memory service behind the [`MemoryRecall`] port, and [`NoRecall`] for
//! chat without memory.

use async_trait::async_trait;

use super::model::Agent;
use super::ports::{MemoryRecall, StoredExchange};
use crate::ids::MemoryId;
use crate::memory::{MemoryService, MemoryType};

/// Recalls nothing: the behaviour until a memory store is wired in.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRecall;

#[async_trait]
impl MemoryRecall for NoRecall {
    async fn recall(&self, _agent: &Agent, _message: &str) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn record_episode(&self, _agent: &Agent, _exchange: &StoredExchange) -> anyhow::Result<bool> {
        Ok(false)
    }
}

/// The id of the episodic memory of the exchange whose reply is `reply`: made of the reply's,
/// so that the same exchange handed over twice is remembered once.
pub fn episode_id(reply: &crate::ids::MessageId) -> MemoryId {
    let reply = reply.as_str();
    MemoryId::from_string(format!("mem_{}", reply.strip_prefix("msg_").unwrap_or(reply)))
}

#[async_trait]
impl MemoryRecall for MemoryService {
    async fn recall(&self, agent: &Agent, message: &str) -> anyhow::Result<Vec<String>> {
        Ok(self.recall_for(&agent.tenant_id, &agent.id, message).await?)
    }

    async fn record_episode(&self, agent: &Agent, exchange: &StoredExchange) -> anyhow::Result<bool> {
        // Only an agent that keeps episodic memory remembers its exchanges.
        if !agent.memory_types.contains(&MemoryType::Episodic) {
            return Ok(false);
        }
        let StoredExchange { message, reply } = exchange;
        Ok(self
            .record_episode(
                episode_id(&reply.id),
                &agent.tenant_id,
                &agent.id,
                &reply.session_id,
                &message.content,
                &reply.content,
                reply.created_at,
            )
            .await?)
    }
}

#[cfg(test)]
mod tests;
