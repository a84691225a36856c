use chrono::{Duration, TimeZone};
use proptest::prelude::*;

use super::*;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
}

fn cand(name: &str, similarity: Option<f32>, coverage: Option<f64>) -> Candidate<String> {
    Candidate {
        id: name.to_owned(),
        vector_rank: similarity.map(|_| 1),
        similarity,
        lexical_rank: coverage.map(|_| 1),
        coverage,
        importance: 0.5,
        updated_at: now(),
    }
}

fn hybrid(c: Vec<Candidate<String>>) -> Vec<Scored<String>> {
    rank(c, SearchMode::Hybrid, &RankingSettings::default(), now())
}

#[test]
fn similarity_maps_from_floor_to_ceiling() {
    let s = SimilarityScale::MINILM;
    assert_eq!(s.semantic(0.10), 0.0);
    assert!(s.semantic(0.15) < 1e-6, "f32 0.15 is a hair over f64 0.15");
    assert!((s.semantic(0.40) - 0.5).abs() < 1e-6);
    assert!((s.semantic(0.65) - 1.0).abs() < 1e-6);
    assert_eq!(s.semantic(0.99), 1.0);
}

#[test]
fn a_close_meaning_scores_high_and_an_unrelated_one_under_the_default_threshold() {
    let r = hybrid(vec![cand("answer", Some(0.55), None), cand("unrelated", Some(0.22), None)]);
    assert_eq!(r[0].candidate.id, "answer");
    // semantic 0.8, weight 0.8 + 0.1·0.5 + 0.1·1 = 0.95.
    assert!((r[0].score - 0.76).abs() < 1e-6, "{:?}", r[0]);
    assert!(r[0].score >= DEFAULT_MIN_SCORE);
    assert!(r[1].score < DEFAULT_MIN_SCORE, "{:?}", r[1]);
}

#[test]
fn shared_words_never_overrule_a_close_meaning() {
    // Every term of the query in a text the model finds unrelated, against a paraphrase
    // sharing no word: the meaning wins.
    let r = hybrid(vec![cand("words", Some(0.15), Some(1.0)), cand("meaning", Some(0.45), None)]);
    assert_eq!(r[0].candidate.id, "meaning");
    // Words add to meaning: the same similarity with the terms ranks above it without.
    let r = hybrid(vec![cand("plain", Some(0.45), None), cand("both", Some(0.45), Some(0.5))]);
    assert_eq!(r[0].candidate.id, "both");
}

#[test]
fn an_exact_match_of_every_term_passes_the_default_threshold_alone() {
    // An invoice number: no meaning for the model, every term in the text.
    let r = hybrid(vec![cand("INV-2291", None, Some(1.0))]);
    assert!((r[0].relevance - 0.4).abs() < 1e-9);
    assert!(r[0].score >= DEFAULT_MIN_SCORE, "{:?}", r[0]);
}

#[test]
fn each_mode_uses_its_own_part() {
    let s = RankingSettings::default();
    let c = || vec![cand("x", Some(0.40), Some(0.5))];
    assert!((rank(c(), SearchMode::Vector, &s, now())[0].relevance - 0.5).abs() < 1e-6);
    assert!((rank(c(), SearchMode::Lexical, &s, now())[0].relevance - 0.5).abs() < 1e-9);
    // 0.5 + 0.5 · 0.4 · 0.5
    assert!((rank(c(), SearchMode::Hybrid, &s, now())[0].relevance - 0.6).abs() < 1e-6);
}

#[test]
fn importance_and_recency_break_near_ties_within_a_fifth() {
    let s = RankingSettings::default();
    let mut old = cand("old", Some(0.5), None);
    old.updated_at = now() - Duration::days(30);
    let fresh = cand("fresh", Some(0.5), None);
    let r = rank(vec![old, fresh], SearchMode::Hybrid, &s, now());
    assert_eq!(r[0].candidate.id, "fresh");
    let old = r.iter().find(|x| x.candidate.id == "old").unwrap();
    assert!((old.recency - 0.5).abs() < 1e-9, "one half-life halves recency");

    let mut important = cand("important", Some(0.5), None);
    important.importance = 1.0;
    let mut trivial = cand("trivial", Some(0.5), None);
    trivial.importance = 0.0;
    trivial.updated_at = now() - Duration::days(10_000);
    let r = rank(vec![trivial, important], SearchMode::Hybrid, &s, now());
    assert_eq!(r[0].candidate.id, "important");
    // Old and unimportant keeps four fifths of its relevance.
    assert!((r[1].score / r[1].relevance - 0.8).abs() < 1e-6, "{:?}", r[1]);
}

#[test]
fn ties_break_by_id() {
    let r = hybrid(vec![cand("b", Some(0.5), None), cand("a", Some(0.5), None)]);
    assert_eq!(r[0].candidate.id, "a");
}

#[test]
fn fuse_merges_both_rankings_once_per_id() {
    let facts = |_: &String| Some((0.5, now()));
    let s = |x: &str| x.to_owned();
    let c = fuse(&[(s("a"), 0.9), (s("b"), 0.8)], &[(s("b"), 1.0), (s("c"), 0.5)], facts);
    assert_eq!(c.len(), 3);
    let b = c.iter().find(|x| x.id == "b").unwrap();
    assert_eq!((b.vector_rank, b.lexical_rank, b.coverage), (Some(2), Some(1), Some(1.0)));
    let c_ = c.iter().find(|x| x.id == "c").unwrap();
    assert_eq!((c_.vector_rank, c_.lexical_rank, c_.similarity), (None, Some(2), None));
    // Unknown ids (deleted meanwhile, or filtered out) are dropped.
    let only_a = |i: &String| (i == "a").then_some((0.5, now()));
    assert_eq!(fuse(&[(s("a"), 0.9), (s("b"), 0.8)], &[(s("c"), 1.0)], only_a).len(), 1);
}

proptest! {
    #[test]
    fn scores_stay_within_zero_and_one_and_follow_relevance(
        sim in proptest::option::of(-1.0f32..=1.0),
        coverage in proptest::option::of(-0.5f64..=1.5),
        importance in -2.0f64..=3.0,
        age_days in -10i64..=10_000,
    ) {
        let mut c = cand("x", sim, coverage);
        c.importance = importance;
        c.updated_at = now() - Duration::days(age_days);
        for mode in [SearchMode::Hybrid, SearchMode::Vector, SearchMode::Lexical] {
            let r = &rank(vec![c.clone()], mode, &RankingSettings::default(), now())[0];
            prop_assert!((0.0..=1.0).contains(&r.score), "{r:?}");
            prop_assert!((0.0..=1.0).contains(&r.relevance), "{r:?}");
            prop_assert!(r.score <= r.relevance + 1e-12 && r.score >= 0.8 * r.relevance - 1e-12, "{r:?}");
        }
    }

    #[test]
    fn more_meaning_never_ranks_lower(a in 0.0f32..=1.0, b in 0.0f32..=1.0, coverage in 0.0f64..=1.0) {
        // Equal words, different meanings: the closer meaning is never behind.
        let r = hybrid(vec![cand("a", Some(a), Some(coverage)), cand("b", Some(b), Some(coverage))]);
        let first = r[0].candidate.similarity.unwrap();
        prop_assert!(first >= a.min(b));
        prop_assert!(r[0].score >= r[1].score);
    }
}
