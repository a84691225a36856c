//! Hybrid ranking: the nearest vectors and the lexical matches merged into candidates, each
//! scored from calibrated parts into one `score` in [0, 1] that means the same from one query
//! to the next, so that a threshold (`min_score`) can drop what is unrelated. Pure and exact,
//! so every score can be explained from its parts; generic over the id, so memory entries and
//! knowledge chunks are ranked by this one function.
//!
//! - **semantic**: the cosine similarity mapped linearly from the embedder's calibration
//!   (`similarity_floor` → 0, `similarity_ceiling` → 1, clamped). Each embedder has its own
//!   scale: all-MiniLM-L6-v2 gives unrelated texts 0.1–0.25 and paraphrases 0.3–0.6.
//! - **lexical**: the share of the query's terms the text contains, counted only when the
//!   match covers enough of the query ([`enough_terms`](crate::memory::enough_terms)).
//! - **relevance** = semantic + (1 − semantic) · `lexical_weight` · lexical: the words can
//!   only add what the meaning left open, so one shared word never overrules a close meaning,
//!   and an exact match of every term (an invoice number) counts even where the model sees
//!   no meaning.
//! - **score** = relevance · (1 − wᵢ − wᵣ + wᵢ · importance + wᵣ · recency): importance and
//!   recency weigh between 0.8 and 1 times the relevance (with weights 0.1), ordering near
//!   ties without lifting an unrelated entry.
//!
//! The constants were fitted on the labelled set of `scripts/data/memory_quality.json`
//! (docs/memory.md, Ranking).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::Hash;

use chrono::{DateTime, Utc};

/// Which retrievers a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// Vectors and full text, combined (the default).
    #[default]
    Hybrid,
    /// Vector similarity alone.
    Vector,
    /// Full text alone (bm25 / `ts_rank_cd`, every matching entry).
    Lexical,
}

/// The score under which a search leaves results out unless it asks otherwise: fitted so that
/// three in four answers stay and four in five unrelated questions find nothing with
/// all-MiniLM-L6-v2 (docs/memory.md, Ranking).
pub const DEFAULT_MIN_SCORE: f64 = 0.34;

/// How cosine similarities of one embedder map onto 0–1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarityScale {
    /// The similarity at and under which a text counts as unrelated (semantic 0).
    pub floor: f64,
    /// The similarity at and over which it counts as the same meaning (semantic 1).
    pub ceiling: f64,
}

impl SimilarityScale {
    /// all-MiniLM-L6-v2's, the default: the best unrelated entry of a question nothing answers
    /// has a median similarity of 0.23, the answer of a paraphrased question 0.40 (p10 0.27).
    pub const MINILM: Self = Self { floor: 0.15, ceiling: 0.65 };

    /// The semantic part of a similarity: 0 at the floor, 1 at the ceiling.
    pub fn semantic(&self, similarity: f32) -> f64 {
        let span = (self.ceiling - self.floor).max(f64::EPSILON);
        ((f64::from(similarity) - self.floor) / span).clamp(0.0, 1.0)
    }
}

impl Default for SimilarityScale {
    fn default() -> Self {
        Self::MINILM
    }
}

/// How the parts of a score are weighed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankingSettings {
    /// The embedder's calibration.
    pub similarity: SimilarityScale,
    /// How much of what the meaning leaves open a full lexical match fills (0.4).
    pub lexical_weight: f64,
    /// Weight of the entry's importance (0.1).
    pub importance_weight: f64,
    /// Weight of its recency (0.1).
    pub recency_weight: f64,
    /// Age, in seconds since the last change, at which recency has halved.
    pub half_life_secs: f64,
}

impl Default for RankingSettings {
    fn default() -> Self {
        Self {
            similarity: SimilarityScale::default(),
            lexical_weight: 0.4,
            importance_weight: 0.1,
            recency_weight: 0.1,
            half_life_secs: 30.0 * 86_400.0,
        }
    }
}

/// A candidate found by at least one of the two retrievers.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<I> {
    /// The entry (or chunk).
    pub id: I,
    /// Position (from 1) among the nearest vectors, if the vector search found it.
    pub vector_rank: Option<usize>,
    /// Its cosine similarity to the query, if the vector search found it.
    pub similarity: Option<f32>,
    /// Position (from 1) in the lexical ranking, if the text search found it.
    pub lexical_rank: Option<usize>,
    /// The share of the query's terms it contains, 0–1, when its lexical match counts.
    pub coverage: Option<f64>,
    /// Its importance, 0–1.
    pub importance: f64,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
}

/// A candidate's score and the parts it is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored<I> {
    /// The candidate.
    pub candidate: Candidate<I>,
    /// The final score, 0–1; higher is better.
    pub score: f64,
    /// Meaning and words combined, 0–1.
    pub relevance: f64,
    /// The calibrated similarity, 0–1.
    pub semantic: f64,
    /// The lexical coverage that counted, 0–1.
    pub lexical: f64,
    /// The recency factor, 0–1: 1 for an entry changed now, ½ after one half-life.
    pub recency: f64,
}

/// Merges the two rankings into candidates, each id once: `vector` is the nearest first with
/// its similarity, `lexical` the best text match first with the coverage that counts. `facts`
/// gives an id's importance and last change; ids it knows nothing of are left out.
pub fn fuse<I: Clone + Eq + Hash>(
    vector: &[(I, f32)],
    lexical: &[(I, f64)],
    facts: impl Fn(&I) -> Option<(f64, DateTime<Utc>)>,
) -> Vec<Candidate<I>> {
    let mut by_id: HashMap<&I, Candidate<I>> = HashMap::new();
    let mut order: Vec<&I> = Vec::new();
    for (i, (id, sim)) in vector.iter().enumerate() {
        let Some((importance, updated_at)) = facts(id) else { continue };
        order.push(id);
        by_id.insert(
            id,
            Candidate {
                id: id.clone(),
                vector_rank: Some(i + 1),
                similarity: Some(*sim),
                lexical_rank: None,
                coverage: None,
                importance,
                updated_at,
            },
        );
    }
    for (i, (id, coverage)) in lexical.iter().enumerate() {
        if let Some(c) = by_id.get_mut(id) {
            if c.lexical_rank.is_none() {
                c.lexical_rank = Some(i + 1);
                c.coverage = Some(*coverage);
            }
            continue;
        }
        let Some((importance, updated_at)) = facts(id) else { continue };
        order.push(id);
        by_id.insert(
            id,
            Candidate {
                id: id.clone(),
                vector_rank: None,
                similarity: None,
                lexical_rank: Some(i + 1),
                coverage: Some(*coverage),
                importance,
                updated_at,
            },
        );
    }
    order.into_iter().filter_map(|id| by_id.remove(id)).collect()
}

/// Scores and sorts candidates, best first (ties by id, so the order is total and stable).
pub fn rank<I: Ord>(
    candidates: Vec<Candidate<I>>,
    mode: SearchMode,
    settings: &RankingSettings,
    now: DateTime<Utc>,
) -> Vec<Scored<I>> {
    let wi = settings.importance_weight.clamp(0.0, 1.0);
    let wr = settings.recency_weight.clamp(0.0, 1.0 - wi);
    let mut scored: Vec<Scored<I>> = candidates
        .into_iter()
        .map(|c| {
            let semantic = c.similarity.map_or(0.0, |s| settings.similarity.semantic(s));
            let lexical = c.coverage.unwrap_or(0.0).clamp(0.0, 1.0);
            let relevance = match mode {
                SearchMode::Vector => semantic,
                SearchMode::Lexical => lexical,
                SearchMode::Hybrid => {
                    semantic + (1.0 - semantic) * settings.lexical_weight.clamp(0.0, 1.0) * lexical
                }
            };
            let age = (now - c.updated_at).num_milliseconds().max(0) as f64 / 1000.0;
            let recency =
                if settings.half_life_secs > 0.0 { 0.5_f64.powf(age / settings.half_life_secs) } else { 1.0 };
            let weight = 1.0 - wi - wr + wi * c.importance.clamp(0.0, 1.0) + wr * recency;
            let score = (relevance * weight).clamp(0.0, 1.0);
            Scored { candidate: c, score, relevance, semantic, lexical, recency }
        })
        .collect();
    // Equal scores (a score saturates at 1 when the meaning alone is that close) are told
    // apart by the words covered, then by the closeness in meaning, before the id: the entry
    // naming the exact identifier asked for wins among near-identical ones.
    let closeness = |s: &Scored<I>| s.candidate.similarity.map_or(f64::NEG_INFINITY, f64::from);
    scored.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| b.lexical.partial_cmp(&a.lexical).unwrap_or(Ordering::Equal))
            .then_with(|| closeness(b).partial_cmp(&closeness(a)).unwrap_or(Ordering::Equal))
            .then_with(|| a.candidate.id.cmp(&b.candidate.id))
    });
    scored
}

#[cfg(test)]
mod tests;
