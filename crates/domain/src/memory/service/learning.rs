//! Learning from conversations: the facts a stored exchange states, compared with what the
//! agent knows and applied with their history, decided by rules (`rule_learning`) or by a
//! model shown the agent's nearest facts ([`MemoryService::facts_near`],
//! [`MemoryService::learn_decided`]); and an entry's history ([`MemoryService::history`]).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{MemoryError, MemoryService, NewMemory};
use crate::billing::Settlement;
use crate::events::{Event, EventPayload, MemoryChangedData};
use crate::ids::{AgentId, MemoryId, MessageId, TenantId};
use crate::memory::EmbedError;
use crate::memory::learning::decision::Decision;
use crate::memory::learning::{Candidate, Invalidation, Learned, MemoryChange, MemoryVersion, Reworded};
use crate::memory::model::{EmbeddedEntry, Embedding, MemoryEntry, MemoryFilter, MemoryOrigin, MemoryType};
use crate::tenancy::{Permission, Principal};

/// A stored exchange, as learning reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeText {
    /// The user's message.
    pub message_id: MessageId,
    /// The agent's reply.
    pub reply_id: MessageId,
    /// The user's text: what facts are taken from.
    pub message: String,
    /// The agent's reply: what a model extractor reads the message with.
    pub reply: String,
    /// When the reply was stored.
    pub at: DateTime<Utc>,
}

impl MemoryService {
    /// The agent's current semantic facts nearest to `text`, best first: what a model deciding
    /// on an exchange is shown (and the only facts its answer may name).
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], or storage failing.
    pub async fn facts_near(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        text: &str,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, MemoryError> {
        let vector = self
            .embed_in_background(vec![text.to_owned()])
            .await?
            .pop()
            .ok_or(MemoryError::Embedding(EmbedError::Model("no vector".into())))?;
        let near = self.nearest_facts(tenant, agent, &vector.vector, Map::new(), limit).await?;
        Ok(near.into_iter().map(|(e, _)| e).collect())
    }

    /// Applies what a model decided about one exchange (`decisions`, validated against
    /// `shown`, the facts it was shown), with `charge` settling its calls in the same
    /// transaction. An `INVALIDATE` followed by an `ADD` is a fact replaced: the new one
    /// supersedes it. How many facts changed; `None` when this exchange was learned from
    /// already (nothing is changed or charged then: the caller releases its hold).
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], or storage failing.
    pub async fn learn_decided(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        exchange: &ExchangeText,
        decisions: Vec<Decision>,
        shown: &[MemoryEntry],
        charge: Option<Settlement>,
    ) -> Result<Option<usize>, MemoryError> {
        let texts: Vec<String> = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Add { text, .. } | Decision::Update { text, .. } => Some(text.clone()),
                Decision::Invalidate { .. } => None,
            })
            .collect();
        let mut vectors = self.embed_in_background(texts).await?.into_iter();
        let mut plan = Plan::default();
        for d in decisions {
            let embedding = match d {
                Decision::Invalidate { .. } => None,
                _ => vectors.next(),
            };
            plan.push(d, None, shown, embedding);
        }
        self.apply(tenant, agent, exchange, plan, charge).await
    }

    /// Stores `plan` (with `charge`), once per exchange.
    async fn apply(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        exchange: &ExchangeText,
        plan: Plan,
        charge: Option<Settlement>,
    ) -> Result<Option<usize>, MemoryError> {
        let (mut learned, unembedded) = self.learned(tenant, agent, exchange, plan);
        if !unembedded.is_empty() {
            // Every fact a model decided on was embedded above.
            return Err(EmbedError::Model("a decided fact has no vector".into()).into());
        }
        learned.charge = charge;
        let changes = learned.changes();
        Ok(self.deps.memories.learn(&learned).await?.then_some(changes))
    }

    /// The agent's current semantic facts nearest to `vector` (passing `metadata`), best first,
    /// with their similarity.
    pub(super) async fn nearest_facts(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        vector: &[f32],
        metadata: Map<String, Value>,
        limit: usize,
    ) -> Result<Vec<(MemoryEntry, f32)>, MemoryError> {
        let filter = MemoryFilter {
            agent_id: Some(agent.clone()),
            memory_types: vec![MemoryType::Semantic],
            metadata,
            ..MemoryFilter::default()
        };
        let d = &self.deps;
        let now = d.clock.now();
        let model = d.embedder.model().id.clone();
        let hits = d.memories.nearest(tenant, &model, vector, &filter, now, limit).await?;
        let ids: Vec<MemoryId> = hits.iter().map(|(id, _)| id.clone()).collect();
        let mut entries = d.memories.get_many(tenant, &ids).await?;
        entries.retain(|e| filter.matches(&e.facets(), now));
        Ok(hits
            .into_iter()
            .filter_map(|(id, score)| entries.iter().find(|e| e.id == id).map(|e| (e.clone(), score)))
            .collect())
    }

    /// The changes of `plan`, as entries, history and events; with the positions in
    /// `added` of the facts planned without a vector (theirs is empty until it is filled in).
    pub(super) fn learned(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        exchange: &ExchangeText,
        plan: Plan,
    ) -> (Learned, Vec<usize>) {
        let mut unembedded = Vec::new();
        let sources = vec![exchange.message_id.clone(), exchange.reply_id.clone()];
        let at = exchange.at;
        let mut learned = Learned {
            tenant_id: tenant.clone(),
            agent_id: agent.clone(),
            exchange: exchange.message_id.clone(),
            source_message_ids: sources.clone(),
            added: Vec::new(),
            updated: Vec::new(),
            invalidated: Vec::new(),
            events: Vec::new(),
            at,
            charge: None,
        };
        let mut replaced: Vec<(MemoryEntry, String, Option<MemoryId>)> = Vec::new();
        for step in plan.0 {
            match step {
                Step::Add { candidate, embedding, replaces } => {
                    let mut metadata = Map::new();
                    if let Some(topic) = &candidate.topic {
                        metadata.insert("topic".into(), Value::String(topic.clone()));
                    }
                    let new = NewMemory {
                        agent_id: Some(agent.clone()),
                        memory_type: MemoryType::Semantic,
                        key: None,
                        content: candidate.text,
                        source: Some("chat".into()),
                        metadata,
                        tags: Vec::new(),
                        importance: None,
                        expiry: None,
                        origin: MemoryOrigin::Extraction,
                    };
                    let mut entry = self.entry(tenant, new, at);
                    entry.source_message_ids = sources.clone();
                    for (old, reason) in replaces {
                        replaced.push((old, reason, Some(entry.id.clone())));
                    }
                    let data = changed(&entry, None, None, &sources);
                    learned.events.push(self.memory_event(tenant, EventPayload::MemoryCreated(data)));
                    let embedding = embedding.unwrap_or_else(|| {
                        unembedded.push(learned.added.len());
                        Embedding { model_id: self.deps.embedder.model().id.clone(), vector: Vec::new() }
                    });
                    learned.added.push(EmbeddedEntry { entry, embedding });
                }
                Step::Update { old, text, embedding } => {
                    let mut source_message_ids = old.source_message_ids.clone();
                    source_message_ids
                        .extend(sources.iter().filter(|s| !old.source_message_ids.contains(s)).cloned());
                    let now = MemoryEntry { content: text.clone(), ..*old };
                    let data = changed(&now, None, None, &sources);
                    learned.events.push(self.memory_event(tenant, EventPayload::MemoryUpdated(data)));
                    learned.updated.push(Reworded {
                        id: now.id,
                        content: text,
                        embedding,
                        source_message_ids,
                    });
                }
                Step::Invalidate { old, reason } => replaced.push((*old, reason, None)),
            }
        }
        for (old, reason, superseded_by) in replaced {
            let data = changed(&old, Some(reason.clone()), superseded_by.clone(), &sources);
            learned.events.push(self.memory_event(tenant, EventPayload::MemoryInvalidated(data)));
            learned.invalidated.push(Invalidation { id: old.id, superseded_by, reason });
        }
        (learned, unembedded)
    }

    fn memory_event(&self, tenant: &TenantId, payload: EventPayload) -> Event {
        Event::new(self.deps.ids.as_ref(), tenant, payload, self.deps.clock.now())
    }

    /// An entry's history, oldest first: its recorded versions, or, when none was recorded,
    /// its one version as written.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] (also for another tenant's entry), [`MemoryError::Forbidden`].
    pub async fn history(
        &self,
        caller: &Principal,
        id: &MemoryId,
    ) -> Result<Vec<MemoryVersion>, MemoryError> {
        caller.require(Permission::MemoryRead)?;
        let entry = self.deps.memories.get(&caller.tenant_id, id).await?.ok_or(MemoryError::NotFound)?;
        let versions = self.deps.memories.history(&caller.tenant_id, id).await?;
        if !versions.is_empty() {
            return Ok(versions);
        }
        Ok(vec![MemoryVersion {
            version: 1,
            content: entry.content,
            change: MemoryChange::Added,
            reason: None,
            source_message_ids: entry.source_message_ids,
            at: entry.created_at,
        }])
    }
}

/// The data of a memory event about `entry`, changed by the exchange of `sources`.
fn changed(
    entry: &MemoryEntry,
    reason: Option<String>,
    superseded_by: Option<MemoryId>,
    sources: &[MessageId],
) -> MemoryChangedData {
    MemoryChangedData {
        memory_id: entry.id.clone(),
        agent_id: entry.agent_id.clone(),
        content: entry.content.clone(),
        origin: entry.origin.as_str().to_owned(),
        reason,
        superseded_by,
        source_message_ids: sources.to_vec(),
    }
}

/// One change learning decided, in order.
pub(super) enum Step {
    /// A new fact, replacing these (with the reason each is invalidated); its vector, unless
    /// it is embedded later with the others of its pass.
    Add { candidate: Candidate, embedding: Option<Embedding>, replaces: Vec<(MemoryEntry, String)> },
    /// A known fact, reworded.
    Update { old: Box<MemoryEntry>, text: String, embedding: Embedding },
    /// A fact that no longer holds, replaced by nothing.
    Invalidate { old: Box<MemoryEntry>, reason: String },
}

/// The steps of one exchange.
#[derive(Default)]
pub(super) struct Plan(Vec<Step>);

impl Plan {
    /// Adds `decision` (on `topic`, if its candidate has one; `known`: the facts it was decided
    /// on, the only ones it may change; `embedding`: its text's, for an update, and for an add
    /// unless it is embedded later).
    pub(super) fn push(
        &mut self,
        decision: Decision,
        topic: Option<&String>,
        known: &[MemoryEntry],
        embedding: Option<Embedding>,
    ) {
        let known_entry = |id| known.iter().find(|e| &e.id == id).map(|e| Box::new(e.clone()));
        match decision {
            Decision::Add { text, topic: own } => {
                // The invalidations decided just before it are replaced by this fact.
                let mut replaces = Vec::new();
                while let Some(Step::Invalidate { .. }) = self.0.last() {
                    if let Some(Step::Invalidate { old, reason }) = self.0.pop() {
                        replaces.push((*old, reason));
                    }
                }
                let candidate = Candidate { text, topic: own.or_else(|| topic.cloned()) };
                self.0.push(Step::Add { candidate, embedding, replaces });
            }
            Decision::Update { id, text } => {
                // The same words again change nothing.
                let old = known_entry(&id).filter(|old| old.content.trim() != text.trim());
                if let (Some(old), Some(embedding)) = (old, embedding) {
                    self.0.push(Step::Update { old, text, embedding });
                }
            }
            Decision::Invalidate { id, reason } => {
                if let Some(old) = known_entry(&id) {
                    self.0.push(Step::Invalidate { old, reason });
                }
            }
        }
    }
}
