//! The model extractor (`config.memory_extraction`: `model`, or `auto` with a remote model):
//! the agent's model shown one stored exchange and the agent's nearest current facts, asked for mem0's decisions as JSON, its answer validated before anything is stored,
//! and its calls charged like a chat's (ledger reason `memory_extraction`).

use std::sync::Arc;

use super::chat::{ChatRole, ChatTurn, CompletionRequest, count_request};
use super::model::Agent;
use super::ports::ChatModel;
use crate::billing::{
    CreditHold, CreditRepository, HoldRequest, LedgerEntry, LedgerReason, Settlement, chat_cost,
};
use crate::ids::{CreditHoldId, EventId, IdGenerator, LedgerEntryId};
use crate::memory::learning::decision;
use crate::memory::{ExchangeText, MemoryEntry, MemoryService};
use crate::time::Clock;
use crate::tokens::TokenCounter;

/// Known facts the model is shown (the only ones its answer may change).
pub const SHOWN_FACTS: usize = 10;
/// Longest answer the model may give, in tokens.
pub const ANSWER_TOKENS: u32 = 512;
/// Calls per exchange: a malformed answer is asked for once more.
const CALLS: u32 = 2;

const INSTRUCTIONS: &str = "You keep the long-term memory of an assistant. From the exchange \
below, take the facts about the user worth remembering in later conversations (who they are, \
what they prefer, where they live or work, their plans), and compare each with the known facts \
listed with their ids. Answer with JSON only, of this shape: {\"facts\": [{\"event\": \"ADD\", \
\"text\": \"...\"}, {\"event\": \"UPDATE\", \"id\": \"...\", \"text\": \"...\"}, {\"event\": \
\"INVALIDATE\", \"id\": \"...\", \"reason\": \"...\"}]}. ADD a new fact; UPDATE a known fact the \
exchange adds to, with the merged wording; INVALIDATE a known fact the exchange contradicts, \
then ADD what replaces it; nothing (an empty list) when nothing is worth keeping. Write each \
fact as one short sentence in the third person (\"The user lives in Porto.\"). Use only the \
ids listed.";

/// What the model extractor needs.
#[derive(Clone)]
pub struct ModelExtractorDeps {
    /// The model.
    pub model: Arc<dyn ChatModel>,
    /// Credits: the calls are held for and charged.
    pub credits: Arc<dyn CreditRepository>,
    /// Token counting, for the hold.
    pub tokens: Arc<dyn TokenCounter>,
    /// Where the facts are.
    pub memory: MemoryService,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The model when an agent names none.
    pub default_model: String,
    /// Balance below which `billing.credits.low` is emitted.
    pub credits_low_threshold: i64,
}

impl std::fmt::Debug for ModelExtractorDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelExtractorDeps { .. }")
    }
}

/// The model extractor.
#[derive(Clone, Debug)]
pub struct ModelExtractor {
    deps: ModelExtractorDeps,
}

/// What one extraction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted {
    /// Applied: how many facts changed.
    Learned(usize),
    /// This exchange was learned from already: nothing changed, nothing was charged.
    AlreadyLearned,
    /// Nothing was asked: the reason, as logged.
    Skipped(String),
}

impl ModelExtractor {
    /// The extractor over `deps`.
    pub fn new(deps: ModelExtractorDeps) -> Self {
        Self { deps }
    }

    /// Learns from `exchange` of `agent` with its model. A tenant without the credits for a
    /// call skips (logged); a malformed answer is asked for once more and then given up on,
    /// logged, storing nothing but the exchange's receipt and the calls' charge.
    ///
    /// # Errors
    /// When the model or storage fails: the credits are released and the exchange is tried
    /// again later.
    pub async fn learn(&self, agent: &Agent, exchange: &ExchangeText) -> anyhow::Result<Extracted> {
        let d = &self.deps;
        let shown = d.memory.facts_near(&agent.tenant_id, &agent.id, &exchange.message, SHOWN_FACTS).await?;
        let request = CompletionRequest {
            model: agent.config.model.clone().unwrap_or_else(|| d.default_model.clone()),
            temperature: Some(0.0),
            max_tokens: ANSWER_TOKENS,
            messages: prompt(&shown, exchange),
            tools: Vec::new(),
            response_schema: Some(decision::answer_schema()),
        };
        let per_call = count_request(d.tokens.as_ref(), &request.messages, &[]) + u64::from(ANSWER_TOKENS);
        let hold = HoldRequest {
            id: CreditHoldId::generate(d.ids.as_ref()),
            tenant_id: agent.tenant_id.clone(),
            wanted: chat_cost(per_call) * i64::from(CALLS),
            minimum: chat_cost(per_call),
            created_at: d.clock.now(),
        };
        let Some(hold) = d.credits.hold(&hold).await? else {
            let reason = "the tenant has no credits for the model call".to_owned();
            tracing::info!(agent_id = %agent.id, message_id = %exchange.message_id, %reason, "memory extraction skipped");
            return Ok(Extracted::Skipped(reason));
        };
        let result = self.decide_and_apply(agent, exchange, &request, &shown, &hold, per_call).await;
        match result {
            Ok(Some(changed)) => Ok(Extracted::Learned(changed)),
            Ok(None) => {
                self.release(&hold).await;
                Ok(Extracted::AlreadyLearned)
            }
            Err(e) => {
                self.release(&hold).await;
                Err(e)
            }
        }
    }

    /// Asks the model (twice at most, while the hold pays for it), validates its answer, and
    /// applies it with the calls' charge.
    async fn decide_and_apply(
        &self,
        agent: &Agent,
        exchange: &ExchangeText,
        request: &CompletionRequest,
        shown: &[MemoryEntry],
        hold: &CreditHold,
        per_call: u64,
    ) -> anyhow::Result<Option<usize>> {
        let d = &self.deps;
        let mut tokens = 0_u64;
        let mut decisions = Vec::new();
        let mut request = request.clone();
        for call in 1..=CALLS {
            // Every call is paid for; one more is asked only while the hold covers it.
            if call > 1 && chat_cost(tokens + per_call) > hold.amount {
                tracing::warn!(agent_id = %agent.id, "memory extraction: no credits held for a second call");
                break;
            }
            let completion = d.model.complete(&request).await?;
            tokens += completion.prompt_tokens + completion.completion_tokens;
            match decision::from_model(&completion.content, shown) {
                Ok(valid) => {
                    decisions = valid;
                    break;
                }
                Err(reason) => {
                    tracing::warn!(
                        agent_id = %agent.id,
                        message_id = %exchange.message_id,
                        call,
                        %reason,
                        "memory extraction: the model's answer is rejected; nothing of it is stored"
                    );
                    // Asked again with what was wrong.
                    request.messages.push(ChatTurn::new(ChatRole::Assistant, completion.content));
                    request.messages.push(ChatTurn::new(
                        ChatRole::User,
                        format!(
                            "That answer was rejected ({reason}). Answer again with JSON of the shape given."
                        ),
                    ));
                }
            }
        }
        let charge = self.settlement(hold, tokens, exchange);
        let applied = d
            .memory
            .learn_decided(&agent.tenant_id, &agent.id, exchange, decisions, shown, Some(charge))
            .await?;
        Ok(applied)
    }

    /// The charge of `tokens` against `hold`.
    fn settlement(&self, hold: &CreditHold, tokens: u64, exchange: &ExchangeText) -> Settlement {
        let d = &self.deps;
        Settlement {
            hold: hold.clone(),
            entry: LedgerEntry {
                id: LedgerEntryId::generate(d.ids.as_ref()),
                tenant_id: hold.tenant_id.clone(),
                delta: -chat_cost(tokens),
                balance_after: 0,
                reason: LedgerReason::MemoryExtraction,
                reference: Some(exchange.message_id.to_string()),
                created_at: d.clock.now(),
            },
            low_threshold: d.credits_low_threshold,
            low_event: EventId::generate(d.ids.as_ref()),
        }
    }

    async fn release(&self, hold: &CreditHold) {
        if let Err(e) = self.deps.credits.release(&hold.id).await {
            // The stale-hold sweeper returns it later.
            tracing::error!(error = ?e, hold_id = %hold.id, "releasing a memory extraction's hold failed");
        }
    }
}

/// The model's prompt: the instructions, then the known facts with their ids and the exchange.
pub fn prompt(shown: &[MemoryEntry], exchange: &ExchangeText) -> Vec<ChatTurn> {
    let known = if shown.is_empty() {
        "(none)".to_owned()
    } else {
        shown.iter().map(|e| format!("- [{}] {}", e.id, e.content)).collect::<Vec<_>>().join("\n")
    };
    let asked = format!(
        "Known facts:\n{known}\n\nExchange:\nUser: {}\nAssistant: {}",
        exchange.message, exchange.reply
    );
    vec![ChatTurn::new(ChatRole::System, INSTRUCTIONS), ChatTurn::new(ChatRole::User, asked)]
}

#[cfg(test)]
mod tests;
