//! Learning by the rules ([`MemoryService::learn_by_rules_all`]): the exchanges of one pass of
//! the extraction consumer are decided in order, each on what its agent knew before it (what is
//! stored, changed by the pass's earlier exchanges), then embedded together and stored in one
//! transaction. A pass costs one embedding call for the facts compared by vector, one for the
//! facts it stores and one transaction, however many exchanges it holds: what lets extraction
//! keep up with chat.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::learning::{ExchangeText, Plan};
use super::{MemoryError, MemoryService};
use crate::ids::{AgentId, MemoryId, MessageId, TenantId};
use crate::memory::dot;
use crate::memory::learning::decision;
use crate::memory::learning::{Candidate, Learned, rules};
use crate::memory::model::{Embedding, MemoryEntry};

/// Stored facts a candidate without a topic is compared with.
const SIMILAR_FACTS: usize = 5;
/// Most facts on one topic read back (there is one while they replace each other).
const TOPIC_FACTS: usize = 20;

/// One stored exchange to learn from by the rules, with the agent that learns.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleExchange {
    /// The agent's tenant.
    pub tenant: TenantId,
    /// The agent.
    pub agent: AgentId,
    /// The exchange.
    pub exchange: ExchangeText,
}

impl MemoryService {
    /// Learns from one stored exchange of `agent` with the rule extractor: each fact its user
    /// message states is compared with the agent's current facts and added, or replaces what
    /// was known on its topic (which is invalidated, never deleted), or changes nothing. How
    /// many facts changed; `None` when this exchange was learned from already.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], or storage failing.
    pub async fn learn_by_rules(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        exchange: &ExchangeText,
    ) -> Result<Option<usize>, MemoryError> {
        let one = RuleExchange { tenant: tenant.clone(), agent: agent.clone(), exchange: exchange.clone() };
        Ok(self.learn_by_rules_all(std::slice::from_ref(&one)).await?.pop().flatten())
    }

    /// [`MemoryService::learn_by_rules`] for several exchanges, in their order: each is decided
    /// as if the ones before it were stored already, and all are stored in one transaction. One
    /// result per exchange.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], or storage failing: then nothing of any exchange is stored.
    pub async fn learn_by_rules_all(
        &self,
        exchanges: &[RuleExchange],
    ) -> Result<Vec<Option<usize>>, MemoryError> {
        let mut results: Vec<Option<usize>> = vec![Some(0); exchanges.len()];
        let mut candidates: Vec<Vec<Candidate>> =
            exchanges.iter().map(|x| candidates_of(&x.exchange.message)).collect();
        let stating: Vec<(TenantId, MessageId)> = exchanges
            .iter()
            .zip(&candidates)
            .filter(|(_, c)| !c.is_empty())
            .map(|(x, _)| (x.tenant.clone(), x.exchange.message_id.clone()))
            .collect();
        if stating.is_empty() {
            return Ok(results);
        }
        // An exchange learned from already (a pass done again after a crash) is left out
        // before anything is decided, so the ones after it are decided on what is stored.
        let done = self.deps.memories.learned_already(&stating).await?;
        let mut learning = Vec::new();
        for (i, x) in exchanges.iter().enumerate() {
            if done.contains(&x.exchange.message_id) {
                results[i] = None;
            } else if !candidates[i].is_empty() {
                learning.push(i);
            }
        }
        // A fact without a topic is compared with the nearest known facts, so its vector comes
        // first; a fact on a topic is compared with the current fact on it, found by its topic,
        // and embedded only when it is stored (a fact stated again costs no embedding).
        let untopical: Vec<String> = learning
            .iter()
            .flat_map(|&i| candidates[i].iter().filter(|c| c.topic.is_none()).map(|c| c.text.clone()))
            .collect();
        let mut vectors = self.embed_in_background(untopical).await?.into_iter();
        let now = self.deps.clock.now();
        let mut known = Known::default();
        let mut learned: Vec<(usize, Learned)> = Vec::new();
        // Where the facts planned without a vector are: (position in `learned`, in its `added`).
        let mut unembedded: Vec<(usize, usize)> = Vec::new();
        for &i in &learning {
            let RuleExchange { tenant, agent, exchange } = &exchanges[i];
            let mut plan = Plan::default();
            for candidate in std::mem::take(&mut candidates[i]) {
                let (on_topic, similar, vector) = match &candidate.topic {
                    Some(topic) => (known.on_topic(self, tenant, agent, topic, now).await?, Vec::new(), None),
                    None => {
                        // As many vectors as texts: `embed` checks it.
                        let Some(vector) = vectors.next() else { continue };
                        let similar = known.similar(self, tenant, agent, &vector).await?;
                        (Vec::new(), similar, Some(vector))
                    }
                };
                for d in decision::by_rules(&candidate, &on_topic, &similar) {
                    plan.push(d, candidate.topic.as_ref(), &on_topic, vector.clone());
                }
            }
            let (exchange_learned, pending) = self.learned(tenant, agent, exchange, plan);
            known.record(&exchange_learned);
            unembedded.extend(pending.into_iter().map(|added| (learned.len(), added)));
            learned.push((i, exchange_learned));
        }
        // What is stored on a topic is embedded now, in one call.
        let texts = unembedded.iter().map(|&(l, a)| learned[l].1.added[a].entry.content.clone()).collect();
        for ((l, a), embedding) in unembedded.into_iter().zip(self.embed_in_background(texts).await?) {
            learned[l].1.added[a].embedding = embedding;
        }
        if learned.is_empty() {
            return Ok(results);
        }
        let (positions, all): (Vec<usize>, Vec<Learned>) = learned.into_iter().unzip();
        let applied = self.deps.memories.learn_all(&all).await?;
        for ((i, one), applied) in positions.into_iter().zip(&all).zip(applied) {
            results[i] = applied.then(|| one.changes());
        }
        Ok(results)
    }
}

/// The facts `message` states, a later statement on a topic winning over an earlier one.
fn candidates_of(message: &str) -> Vec<Candidate> {
    let mut candidates = rules::extract(message);
    let mut seen_topics = HashSet::new();
    candidates.reverse();
    candidates.retain(|c| c.topic.as_ref().is_none_or(|t| seen_topics.insert(t.clone())));
    candidates.reverse();
    candidates
}

/// What the agents of a pass know while its exchanges are decided: their facts on each topic,
/// read once from the store, then changed by the pass's own decisions; the facts the pass
/// added (with their vectors when known); the facts it invalidated.
#[derive(Default)]
struct Known {
    on_topic: HashMap<(TenantId, AgentId, String), Vec<MemoryEntry>>,
    added: Vec<(MemoryEntry, Option<Vec<f32>>)>,
    invalidated: HashSet<MemoryId>,
}

impl Known {
    /// The agent's current facts on `topic`.
    async fn on_topic(
        &mut self,
        memory: &MemoryService,
        tenant: &TenantId,
        agent: &AgentId,
        topic: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<MemoryEntry>, MemoryError> {
        let key = (tenant.clone(), agent.clone(), topic.to_owned());
        if !self.on_topic.contains_key(&key) {
            let stored = memory.deps.memories.on_topic(tenant, agent, topic, now, TOPIC_FACTS).await?;
            self.on_topic.insert(key.clone(), stored);
        }
        let facts = self.on_topic.get(&key).map(Vec::as_slice).unwrap_or_default();
        Ok(facts.iter().filter(|e| !self.invalidated.contains(&e.id)).cloned().collect())
    }

    /// The agent's facts a candidate with `vector` is compared with: the nearest stored ones
    /// still current, and the pass's new ones (by vector when known; a fact still to be
    /// embedded scores 0, so only the same text matches it).
    async fn similar(
        &self,
        memory: &MemoryService,
        tenant: &TenantId,
        agent: &AgentId,
        vector: &Embedding,
    ) -> Result<Vec<(MemoryEntry, f32)>, MemoryError> {
        let mut similar =
            memory.nearest_facts(tenant, agent, &vector.vector, Map::new(), SIMILAR_FACTS).await?;
        similar.retain(|(e, _)| !self.invalidated.contains(&e.id));
        for (entry, own) in &self.added {
            if &entry.tenant_id == tenant && entry.agent_id.as_ref() == Some(agent) {
                let score = own.as_ref().map_or(0.0, |own| dot(own, &vector.vector));
                similar.push((entry.clone(), score));
            }
        }
        Ok(similar)
    }

    /// Takes in what one exchange of the pass decided.
    fn record(&mut self, learned: &Learned) {
        self.invalidated.extend(learned.invalidated.iter().map(|i| i.id.clone()));
        for added in &learned.added {
            let entry = &added.entry;
            if let Some(topic) = entry.metadata.get("topic").and_then(Value::as_str) {
                // The topic was read before a fact on it was decided.
                let key = (learned.tenant_id.clone(), learned.agent_id.clone(), topic.to_owned());
                self.on_topic.entry(key).or_default().push(entry.clone());
            }
            let vector = (!added.embedding.vector.is_empty()).then(|| added.embedding.vector.clone());
            self.added.push((entry.clone(), vector));
        }
    }
}
