//! Hybrid ranking: the vector and lexical rankings fused with reciprocal rank fusion, then
//! weighed with importance and recency into one `score` in [0, 1]. Pure and exact, so every
//! score can be explained from its parts.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::ids::MemoryId;

/// How the parts of a score are weighed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankingSettings {
    /// Reciprocal rank fusion's constant: a candidate at rank `r` (from 1) of a ranking adds
    /// `1 / (k + r)`. 60, as in Cormack et al. and most hybrid search engines.
    pub rrf_k: f64,
    /// Weight of the fused relevance.
    pub relevance_weight: f64,
    /// Weight of the entry's importance.
    pub importance_weight: f64,
    /// Weight of its recency.
    pub recency_weight: f64,
    /// Age, in seconds since the last change, at which recency has halved.
    pub half_life_secs: f64,
}

impl Default for RankingSettings {
    fn default() -> Self {
        Self {
            rrf_k: 60.0,
            relevance_weight: 0.8,
            importance_weight: 0.1,
            recency_weight: 0.1,
            half_life_secs: 30.0 * 86_400.0,
        }
    }
}

/// A candidate found by at least one of the two retrievers.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The entry.
    pub id: MemoryId,
    /// Position (from 1) among the nearest vectors, if the vector search found it.
    pub vector_rank: Option<usize>,
    /// Its cosine similarity to the query, if known.
    pub similarity: Option<f32>,
    /// Position (from 1) in the lexical ranking, if the text search found it.
    pub lexical_rank: Option<usize>,
    /// Its importance, 0–1.
    pub importance: f64,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
}

/// A candidate's score and the parts it is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The candidate.
    pub candidate: Candidate,
    /// The final score, 0–1; higher is better.
    pub score: f64,
    /// The fused relevance, 0–1: 1 for first place in both rankings.
    pub relevance: f64,
    /// The recency factor, 0–1: 1 for an entry changed now, ½ after one half-life.
    pub recency: f64,
}

/// Merges the two rankings (ids in order, best first) into candidates, each id once.
pub fn fuse(
    vector: &[(MemoryId, f32)],
    lexical: &[MemoryId],
    facts: impl Fn(&MemoryId) -> Option<(f64, DateTime<Utc>)>,
) -> Vec<Candidate> {
    let mut by_id: HashMap<&MemoryId, Candidate> = HashMap::new();
    let mut order: Vec<&MemoryId> = Vec::new();
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
                importance,
                updated_at,
            },
        );
    }
    for (i, id) in lexical.iter().enumerate() {
        if let Some(c) = by_id.get_mut(id) {
            c.lexical_rank.get_or_insert(i + 1);
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
                importance,
                updated_at,
            },
        );
    }
    order.into_iter().filter_map(|id| by_id.remove(id)).collect()
}

/// Scores and sorts candidates, best first (ties by id, so the order is total and stable).
pub fn rank(candidates: Vec<Candidate>, settings: &RankingSettings, now: DateTime<Utc>) -> Vec<Scored> {
    let k = settings.rrf_k;
    let best = 2.0 / (k + 1.0);
    let rrf = |rank: Option<usize>| rank.map_or(0.0, |r| 1.0 / (k + r as f64));
    let total_weight =
        (settings.relevance_weight + settings.importance_weight + settings.recency_weight).max(f64::EPSILON);
    let mut scored: Vec<Scored> = candidates
        .into_iter()
        .map(|c| {
            let relevance = ((rrf(c.vector_rank) + rrf(c.lexical_rank)) / best).clamp(0.0, 1.0);
            let age = (now - c.updated_at).num_milliseconds().max(0) as f64 / 1000.0;
            let recency =
                if settings.half_life_secs > 0.0 { 0.5_f64.powf(age / settings.half_life_secs) } else { 1.0 };
            let score = (settings.relevance_weight * relevance
                + settings.importance_weight * c.importance.clamp(0.0, 1.0)
                + settings.recency_weight * recency)
                / total_weight;
            Scored { candidate: c, score: score.clamp(0.0, 1.0), relevance, recency }
        })
        .collect();
    scored.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.candidate.id.as_str().cmp(b.candidate.id.as_str()))
    });
    scored
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone};

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    }

    fn id(s: &str) -> MemoryId {
        MemoryId::from_string(s)
    }

    fn cand(name: &str, v: Option<usize>, l: Option<usize>) -> Candidate {
        Candidate {
            id: id(name),
            vector_rank: v,
            similarity: None,
            lexical_rank: l,
            importance: 0.5,
            updated_at: now(),
        }
    }

    #[test]
    fn first_in_both_rankings_is_full_relevance() {
        let s = RankingSettings::default();
        let r = rank(vec![cand("a", Some(1), Some(1))], &s, now());
        assert!((r[0].relevance - 1.0).abs() < 1e-12);
        // 0.8·1 + 0.1·0.5 + 0.1·1 = 0.95
        assert!((r[0].score - 0.95).abs() < 1e-12);
    }

    #[test]
    fn reciprocal_rank_fusion_prefers_agreement() {
        let s = RankingSettings::default();
        let r = rank(
            vec![
                cand("only_vector_1", Some(1), None),
                cand("both_2", Some(2), Some(2)),
                cand("only_lex_1", None, Some(1)),
            ],
            &s,
            now(),
        );
        let names: Vec<&str> = r.iter().map(|x| x.candidate.id.as_str()).collect();
        assert_eq!(names[0], "both_2");
        // 1/61 for first place in one ranking only: half of the best relevance.
        let single = r.iter().find(|x| x.candidate.id.as_str() == "only_vector_1").unwrap();
        assert!((single.relevance - 0.5).abs() < 1e-12);
        // Ties in score break by id, so the order is total.
        assert_eq!(names[1], "only_lex_1");
        assert_eq!(names[2], "only_vector_1");
    }

    #[test]
    fn importance_and_recency_break_near_ties() {
        let s = RankingSettings::default();
        let mut old = cand("old", Some(1), None);
        old.updated_at = now() - Duration::days(30);
        let fresh = cand("fresh", Some(1), None);
        let r = rank(vec![old, fresh], &s, now());
        assert_eq!(r[0].candidate.id.as_str(), "fresh");
        let old = r.iter().find(|x| x.candidate.id.as_str() == "old").unwrap();
        assert!((old.recency - 0.5).abs() < 1e-9, "one half-life halves recency");

        let mut important = cand("important", Some(2), None);
        important.importance = 1.0;
        let mut trivial = cand("trivial", Some(2), None);
        trivial.importance = 0.0;
        let r = rank(vec![trivial, important], &s, now());
        assert_eq!(r[0].candidate.id.as_str(), "important");
    }

    #[test]
    fn scores_stay_within_zero_and_one() {
        let s = RankingSettings::default();
        let mut future = cand("future", Some(1), Some(1));
        future.updated_at = now() + Duration::days(1);
        future.importance = 7.0;
        let mut nothing = cand("nothing", None, None);
        nothing.importance = -1.0;
        nothing.updated_at = now() - Duration::days(10_000);
        for x in rank(vec![future, nothing], &s, now()) {
            assert!((0.0..=1.0).contains(&x.score), "{x:?}");
        }
    }

    #[test]
    fn fuse_merges_both_rankings_once_per_id() {
        let facts = |_: &MemoryId| Some((0.5, now()));
        let c = fuse(&[(id("a"), 0.9), (id("b"), 0.8)], &[id("b"), id("c")], facts);
        assert_eq!(c.len(), 3);
        let b = c.iter().find(|x| x.id.as_str() == "b").unwrap();
        assert_eq!((b.vector_rank, b.lexical_rank), (Some(2), Some(1)));
        let c_ = c.iter().find(|x| x.id.as_str() == "c").unwrap();
        assert_eq!((c_.vector_rank, c_.lexical_rank), (None, Some(2)));
        // Unknown ids (deleted meanwhile, or filtered out) are dropped.
        let only_a = |i: &MemoryId| (i.as_str() == "a").then_some((0.5, now()));
        assert_eq!(fuse(&[(id("a"), 0.9), (id("b"), 0.8)], &[id("c")], only_a).len(), 1);
    }
}
