//! Consolidation: an agent's near-duplicate entries merged into the most important of them.

use chrono::{DateTime, Utc};

use super::{MemoryError, MemoryService};
use crate::events::{Event, EventPayload};
use crate::ids::AgentId;
use crate::memory::embedding::dot;
use crate::memory::model::MemoryEntry;
use crate::memory::ports::Merge;
use crate::tenancy::{Permission, Principal};

/// What consolidation did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConsolidationReport {
    /// Entries compared.
    pub examined: u64,
    /// Entries merged into another and removed.
    pub merged: u64,
    /// Entries that absorbed at least one other.
    pub kept: u64,
    /// The similarity threshold used.
    pub threshold: f32,
}

impl MemoryService {
    /// Merges an agent's near-duplicate entries (document chunks aside): the most important
    /// of a group is kept (then the most accessed, then the oldest), absorbs the others' tags
    /// and access counts, and the others are deleted; all in one transaction with the
    /// `memory.consolidated` event.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`].
    pub async fn consolidate(
        &self,
        caller: &Principal,
        agent_id: &AgentId,
        threshold: Option<f32>,
    ) -> Result<ConsolidationReport, MemoryError> {
        caller.require(Permission::MemoryWrite)?;
        self.require_agent(&caller.tenant_id, Some(agent_id)).await?;
        let d = &self.deps;
        let now = d.clock.now();
        let threshold = threshold.unwrap_or(self.settings.consolidation_threshold);
        let model = d.embedder.model().id.clone();
        let rows = d.memories.agent_vectors(&caller.tenant_id, agent_id, &model, now).await?;
        let merges = plan_merges(rows.clone(), threshold, now);
        let merged: u64 = merges.iter().map(|m| m.absorbed.len() as u64).sum();
        let report =
            ConsolidationReport { examined: rows.len() as u64, merged, kept: merges.len() as u64, threshold };
        let event = Event::new(
            d.ids.as_ref(),
            &caller.tenant_id,
            EventPayload::MemoryConsolidated {
                agent_id: agent_id.clone(),
                examined: report.examined,
                merged: report.merged,
                kept: report.kept,
                threshold,
            },
            now,
        );
        d.memories.consolidate(&caller.tenant_id, &merges, &event).await?;
        Ok(report)
    }
}

/// Greedy grouping for consolidation: entries in order of importance, access count, age;
/// each not yet absorbed absorbs every later one at least `threshold` similar to it.
pub(super) fn plan_merges(
    mut rows: Vec<(MemoryEntry, Vec<f32>)>,
    threshold: f32,
    now: DateTime<Utc>,
) -> Vec<Merge> {
    rows.sort_by(|(a, _), (b, _)| {
        b.importance
            .partial_cmp(&a.importance)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(b.access_count.cmp(&a.access_count))
            .then(a.created_at.cmp(&b.created_at))
            .then(a.id.as_str().cmp(b.id.as_str()))
    });
    let mut absorbed = vec![false; rows.len()];
    let mut merges = Vec::new();
    for i in 0..rows.len() {
        if absorbed[i] {
            continue;
        }
        let mut group = Vec::new();
        for j in i + 1..rows.len() {
            if !absorbed[j] && dot(&rows[i].1, &rows[j].1) >= threshold {
                absorbed[j] = true;
                group.push(j);
            }
        }
        if group.is_empty() {
            continue;
        }
        let mut kept = rows[i].0.clone();
        for &j in &group {
            let other = &rows[j].0;
            for t in &other.tags {
                if !kept.tags.contains(t) {
                    kept.tags.push(t.clone());
                }
            }
            kept.access_count += other.access_count;
        }
        kept.updated_at = now;
        kept.origin = crate::memory::model::MemoryOrigin::Consolidation;
        merges.push(Merge { kept, absorbed: group.iter().map(|&j| rows[j].0.id.clone()).collect() });
    }
    merges
}
