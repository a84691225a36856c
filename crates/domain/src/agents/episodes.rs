//! What follows a stored chat exchange, as consumers of its `agent.message.completed` event:
//! the episodic memory of the exchange ([`EpisodicMemory`]) and the facts memory learns from it
//! ([`MemoryExtraction`]). They run after the exchange committed, from the outbox, so the chat's
//! own write is the exchange alone and a failing embedder costs the memory a retry, never the
//! answer.

use std::sync::Arc;

use async_trait::async_trait;

use super::extraction::ModelExtractor;
use super::extraction_config::Extractor;
use super::model::Agent;
use super::ports::{AgentRepository, ConversationRepository, MemoryRecall, StoredExchange};
use crate::events::consumers::EventConsumer;
use crate::events::{Event, EventPayload, EventType};
use crate::memory::{ExchangeText, MemoryService, MemoryType, RuleExchange};

/// Reads back the exchange an `agent.message.completed` event tells of, with its agent.
#[derive(Clone)]
pub struct ExchangeReader {
    /// The agents.
    pub agents: Arc<dyn AgentRepository>,
    /// Their conversations.
    pub conversations: Arc<dyn ConversationRepository>,
}

impl std::fmt::Debug for ExchangeReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExchangeReader { .. }")
    }
}

impl ExchangeReader {
    /// The agent of the exchange `event` completed, if `event` completed one and the agent
    /// still exists and `keeps` it.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn agent_of(
        &self,
        event: &Event,
        keeps: impl Fn(&Agent) -> bool,
    ) -> anyhow::Result<Option<Agent>> {
        let EventPayload::AgentMessageCompleted(data) = &event.payload else { return Ok(None) };
        Ok(self.agents.get(&event.tenant_id, &data.agent_id).await?.filter(|a| keeps(a)))
    }

    /// The exchange `event` completed, read back; `None` when it was not stored (a stateless
    /// call) or is gone.
    ///
    /// # Errors
    /// When storage fails.
    pub async fn exchange_of(&self, event: &Event) -> anyhow::Result<Option<StoredExchange>> {
        let EventPayload::AgentMessageCompleted(data) = &event.payload else { return Ok(None) };
        self.conversations.exchange_of(&event.tenant_id, &data.agent_id, &data.message_id).await
    }
}

/// The consumer that keeps the episodic memory of every stored exchange of an agent that keeps
/// episodic memory. Idempotent: the memory's id is made from the reply's.
pub struct EpisodicMemory {
    reader: ExchangeReader,
    memory: Arc<dyn MemoryRecall>,
}

impl std::fmt::Debug for EpisodicMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EpisodicMemory { .. }")
    }
}

impl EpisodicMemory {
    /// The consumer over `reader`, writing through `memory`.
    pub fn new(reader: ExchangeReader, memory: Arc<dyn MemoryRecall>) -> Self {
        Self { reader, memory }
    }
}

#[async_trait]
impl EventConsumer for EpisodicMemory {
    fn name(&self) -> &'static str {
        "episodic_memory"
    }

    fn wants(&self, event_type: EventType) -> bool {
        event_type == EventType::AgentMessageCompleted
    }

    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        let keeps = |a: &Agent| a.memory_types.contains(&MemoryType::Episodic);
        let Some(agent) = self.reader.agent_of(event, keeps).await? else { return Ok(()) };
        let Some(exchange) = self.reader.exchange_of(event).await? else { return Ok(()) };
        self.memory.record_episode(&agent, &exchange).await?;
        Ok(())
    }
}

/// The consumer that learns facts from every stored exchange of an agent that keeps semantic
/// memory, with the extractor its `config.memory_extraction` names (`docs/memory.md`, Memory
/// that learns). Idempotent: the store applies an exchange once.
pub struct MemoryExtraction {
    reader: ExchangeReader,
    memory: MemoryService,
    model: Option<ModelExtractor>,
    model_by_default: bool,
}

impl std::fmt::Debug for MemoryExtraction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryExtraction { .. }")
    }
}

impl MemoryExtraction {
    /// The consumer over `reader`, learning into `memory` with the rule extractor only.
    pub fn new(reader: ExchangeReader, memory: MemoryService) -> Self {
        Self { reader, memory, model: None, model_by_default: false }
    }

    /// This consumer with the model extractor too, which `auto` picks when `model_by_default`
    /// (the service's model is a remote OpenAI-compatible one).
    #[must_use]
    pub fn with_model(self, model: ModelExtractor, model_by_default: bool) -> Self {
        Self { model: Some(model), model_by_default, ..self }
    }
}

/// What extraction does with one event.
enum Work {
    /// Nothing: no stored exchange of an agent that learns.
    Nothing,
    /// Ask the model extractor.
    Model(Box<Agent>, ExchangeText),
    /// Learn by the rules, with the pass's other such exchanges.
    Rules(RuleExchange),
}

/// Events whose agent and exchange a pass reads at once.
const READS_AT_ONCE: usize = 8;

impl MemoryExtraction {
    /// What `event` asks for: its agent and exchange read back, and the agent's extractor.
    async fn work_of(&self, event: &Event) -> anyhow::Result<Work> {
        let keeps = |a: &Agent| a.memory_types.contains(&MemoryType::Semantic);
        let Some(agent) = self.reader.agent_of(event, keeps).await? else { return Ok(Work::Nothing) };
        let Some(StoredExchange { message, reply }) = self.reader.exchange_of(event).await? else {
            return Ok(Work::Nothing);
        };
        let exchange = ExchangeText {
            message_id: message.id,
            reply_id: reply.id,
            message: message.content,
            reply: reply.content,
            at: reply.created_at,
        };
        Ok(match agent.config.memory_extraction.extractor(self.model_by_default) {
            None => Work::Nothing,
            Some(Extractor::Model) if self.model.is_some() => Work::Model(Box::new(agent), exchange),
            Some(_) => Work::Rules(RuleExchange { tenant: agent.tenant_id, agent: agent.id, exchange }),
        })
    }

    /// Learns by the rules from `exchanges` at once: one result each (all failing together).
    async fn by_rules(&self, exchanges: &[RuleExchange]) -> Vec<anyhow::Result<()>> {
        match self.memory.learn_by_rules_all(exchanges).await {
            Ok(outcomes) => exchanges
                .iter()
                .zip(outcomes)
                .map(|(x, outcome)| {
                    match outcome {
                        Some(changed) if changed > 0 => {
                            tracing::debug!(agent_id = %x.agent, changed, "memory learned from an exchange");
                        }
                        Some(_) => {}
                        None => tracing::debug!(agent_id = %x.agent, "exchange learned from already"),
                    }
                    Ok(())
                })
                .collect(),
            Err(e) => {
                let error = format!("{e:#}");
                exchanges.iter().map(|_| Err(anyhow::anyhow!(error.clone()))).collect()
            }
        }
    }

    /// Asks the model extractor about one exchange.
    async fn by_model(&self, agent: &Agent, exchange: &ExchangeText) -> anyhow::Result<()> {
        if let Some(model) = &self.model {
            let extracted = model.learn(agent, exchange).await?;
            tracing::debug!(agent_id = %agent.id, ?extracted, "memory extraction by the model");
        }
        Ok(())
    }
}

#[async_trait]
impl EventConsumer for MemoryExtraction {
    fn name(&self) -> &'static str {
        "memory_extraction"
    }

    fn wants(&self, event_type: EventType) -> bool {
        event_type == EventType::AgentMessageCompleted
    }

    fn batch(&self) -> u32 {
        20
    }

    /// Nobody waits on a fact being learned (the exchange is stored, its reply sent): its
    /// passes leave the cores to the requests while they queue.
    fn yields(&self) -> bool {
        true
    }

    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        match self.work_of(event).await? {
            Work::Nothing => Ok(()),
            Work::Model(agent, exchange) => self.by_model(&agent, &exchange).await,
            Work::Rules(exchange) => {
                self.by_rules(std::slice::from_ref(&exchange)).await.pop().unwrap_or(Ok(()))
            }
        }
    }

    /// A pass reads its events' agents and exchanges a few at a time, asks the model about
    /// each exchange that needs it, and learns from all the others by the rules at once: one
    /// embedding call for what they store and one transaction, not one of each per exchange.
    async fn handle_batch(&self, events: &[Event]) -> Vec<anyhow::Result<()>> {
        let mut works: Vec<anyhow::Result<Work>> = Vec::with_capacity(events.len());
        for some in events.chunks(READS_AT_ONCE) {
            works.extend(futures_util::future::join_all(some.iter().map(|e| self.work_of(e))).await);
        }
        let mut results: Vec<anyhow::Result<()>> = Vec::with_capacity(events.len());
        let (mut by_rules, mut rule_positions) = (Vec::new(), Vec::new());
        for work in works {
            results.push(match work {
                Err(e) => Err(e),
                Ok(Work::Nothing) => Ok(()),
                Ok(Work::Model(agent, exchange)) => self.by_model(&agent, &exchange).await,
                Ok(Work::Rules(exchange)) => {
                    rule_positions.push(results.len());
                    by_rules.push(exchange);
                    Ok(())
                }
            });
        }
        for (position, result) in rule_positions.into_iter().zip(self.by_rules(&by_rules).await) {
            results[position] = result;
        }
        results
    }
}

#[cfg(test)]
mod tests;
