//! A lexical embedder without a model: feature hashing of words, adjacent word pairs and the
//! character trigrams of words.

use std::collections::BTreeMap;

use agentry_domain::memory::ranking::SimilarityScale;
use agentry_domain::memory::{EmbedError, Embedder, EmbeddingModel, normalize};
use async_trait::async_trait;

/// Dimension of [`HashingEmbedder::default`]: the same as MiniLM's, which costs little and keeps
/// collisions rare for texts of a few hundred words.
const DEFAULT_DIMENSION: usize = 384;

/// Weight of a word pair relative to a word: pairs reward the same phrase, but two texts that
/// share words in another order are still close.
const BIGRAM_WEIGHT: f32 = 0.5;

/// Weight of one character trigram relative to a word. They make inflections ("colour" and
/// "colours" score about 0.4) and compounds count as somewhat alike; a word of n letters gives
/// n trigrams, so each weighs less than the word, lest shared spellings of unrelated words
/// dominate.
const TRIGRAM_WEIGHT: f32 = 0.4;

/// Words shorter than this have no trigrams: their few trigrams would mostly be noise.
const TRIGRAM_MIN_CHARS: usize = 3;

/// Weight of a stop word (and of a pair of two), relative to another word: "the" and "is" are
/// in every text, and at full weight they made unrelated sentences look alike. Kept rather than
/// dropped, so that a text of only such words still has a vector.
const STOP_WEIGHT: f32 = 0.2;

/// Common English function words, the ones [`STOP_WEIGHT`] applies to. Sorted, for the binary
/// search. Part of the scheme: changing it changes the vectors (and must change the model id).
const STOP_WORDS: [&str; 51] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "his", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she",
    "so", "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you",
];

/// A deterministic bag-of-features embedder: every text's words, adjacent word pairs and
/// character trigrams are hashed (FNV-1a, 64 bits) into `dimension` buckets, each with a sign
/// from the hash so that collisions cancel out on average, weighted by `1 + ln(tf)` (common
/// English function words weigh less), and the vector is L2-normalised.
///
/// It knows nothing of meaning ("client" and "customer" are unrelated to it) but it is free,
/// instant and the same on every machine forever: the fallback when no model is available. Any
/// change to the features must change the `v1` in the model id, or stored vectors would be
/// compared with vectors of another scheme.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    model: EmbeddingModel,
}

/// The kinds of feature, hashed with distinct prefixes so that a word and a trigram with the
/// same letters ("cat" the word, "cat" in "concatenate") are different features.
#[derive(Clone, Copy)]
enum Kind {
    Word,
    Pair,
    Trigram,
}

impl Kind {
    fn prefix(self) -> u8 {
        match self {
            Self::Word => b'w',
            Self::Pair => b'p',
            Self::Trigram => b't',
        }
    }
}

impl HashingEmbedder {
    /// How search reads its similarities: texts sharing no word score under 0.2 (the best
    /// unrelated entry of the labelled set's unanswerable questions: median 0.19, p90 0.25);
    /// sharing most words, over 0.6.
    pub const SIMILARITY: SimilarityScale = SimilarityScale { floor: 0.2, ceiling: 0.6 };

    /// An embedder making vectors of `dimension` values (at least 1; 0 is taken as 1).
    pub fn new(dimension: usize) -> Self {
        let dimension = dimension.max(1);
        Self {
            model: EmbeddingModel {
                provider: "hashing".into(),
                id: format!("hashing:v1-{dimension}"),
                dimension,
            },
        }
    }

    /// The vector of one text, synchronously (the work is a few microseconds per word).
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let dimension = self.model.dimension;
        // Counted per feature hash in a BTreeMap, not a HashMap: the sums below then always run
        // in the same order, so the same text gives bit-identical vectors on every run.
        let mut counts: BTreeMap<u64, (u32, f32)> = BTreeMap::new();
        let mut add = |kind: Kind, weight: f32, parts: &[&str]| {
            let hash = fnv1a(kind.prefix(), parts);
            counts.entry(hash).or_insert((0, weight)).0 += 1;
        };
        let lower = text.to_lowercase();
        let words: Vec<&str> =
            lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        let is_stop = |word: &str| STOP_WORDS.binary_search(&word).is_ok();
        for (i, word) in words.iter().enumerate() {
            let stop = is_stop(word);
            add(Kind::Word, if stop { STOP_WEIGHT } else { 1.0 }, &[word]);
            if let Some(next) = words.get(i + 1) {
                let weight = if stop && is_stop(next) { BIGRAM_WEIGHT * STOP_WEIGHT } else { BIGRAM_WEIGHT };
                add(Kind::Pair, weight, &[word, next]);
            }
            let chars: Vec<char> = word.chars().collect();
            if !stop && chars.len() >= TRIGRAM_MIN_CHARS {
                // Padded with word boundaries, so that prefixes and suffixes are features too.
                let padded: Vec<char> =
                    std::iter::once('<').chain(chars).chain(std::iter::once('>')).collect();
                for window in padded.windows(3) {
                    let trigram: String = window.iter().collect();
                    add(Kind::Trigram, TRIGRAM_WEIGHT, &[&trigram]);
                }
            }
        }
        let mut vector = vec![0.0f32; dimension];
        for (hash, (tf, weight)) in counts {
            // The low bits choose the bucket, the top bit the sign: independent parts of a good
            // 64-bit hash. `as` is exact: the remainder is below `dimension`, a usize.
            let bucket = (hash % dimension as u64) as usize;
            let sign = if hash >> 63 == 1 { -1.0 } else { 1.0 };
            vector[bucket] += sign * weight * (1.0 + (tf as f32).ln());
        }
        normalize(&mut vector);
        vector
    }
}

impl Default for HashingEmbedder {
    /// 384 dimensions.
    fn default() -> Self {
        Self::new(DEFAULT_DIMENSION)
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn model(&self) -> &EmbeddingModel {
        &self.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

/// FNV-1a, 64 bits, of a prefix byte and the parts separated by a 0 byte (which no word holds).
/// Written out rather than std's hasher: std's is seeded at random per process, and these hashes
/// must be the same everywhere and forever, since stored vectors depend on them.
fn fnv1a(prefix: u8, parts: &[&str]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut eat = |byte: u8| {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    };
    eat(prefix);
    for part in parts {
        eat(0);
        part.bytes().for_each(&mut eat);
    }
    hash
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use agentry_domain::memory::dot;

    use super::*;

    fn cos(e: &HashingEmbedder, a: &str, b: &str) -> f32 {
        dot(&e.embed_one(a), &e.embed_one(b))
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        // The published FNV-1a 64 test vectors, computed without our prefix and separators.
        fn plain(s: &str) -> u64 {
            s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
        }
        assert_eq!(plain(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(plain("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(plain("foobar"), 0x8594_4171_f739_67e8);
        // And ours is that function over the prefix, a 0 byte and the word.
        assert_eq!(fnv1a(b'w', &["cat"]), plain("w\0cat"));
    }

    #[test]
    fn vectors_are_deterministic_and_pinned() {
        let e = HashingEmbedder::default();
        let a = e.embed_one("The customer's favourite colour is teal.");
        assert_eq!(a, e.embed_one("The customer's favourite colour is teal."));
        assert_eq!(a, HashingEmbedder::new(384).embed_one("The customer's favourite colour is teal."));
        // Pinned: a change of the scheme must change the model id, not silently the vectors.
        let v = e.embed_one("cat");
        let nonzero: Vec<(usize, f32)> =
            v.iter().enumerate().filter(|(_, x)| **x != 0.0).map(|(i, x)| (i, *x)).collect();
        assert_eq!(nonzero.len(), 4, "the word and three trigrams: {nonzero:?}");
        let expected_word_bucket = (fnv1a(b'w', &["cat"]) % 384) as usize;
        assert!(nonzero.iter().any(|(i, _)| *i == expected_word_bucket));
    }

    #[test]
    fn the_model_is_named_after_its_scheme_and_dimension() {
        let e = HashingEmbedder::new(256);
        assert_eq!(e.model().provider, "hashing");
        assert_eq!(e.model().id, "hashing:v1-256");
        assert_eq!(e.model().dimension, 256);
        assert_eq!(e.embed_one("hello world").len(), 256);
        assert_eq!(HashingEmbedder::new(0).model().dimension, 1);
    }

    #[test]
    fn identical_texts_score_one_and_case_or_punctuation_do_not_matter() {
        let e = HashingEmbedder::default();
        assert!((cos(&e, "Order 66 shipped", "Order 66 shipped") - 1.0).abs() < 1e-5);
        assert!((cos(&e, "Order 66 shipped!", "order, 66 SHIPPED") - 1.0).abs() < 1e-5);
        let v = e.embed_one("some words here");
        assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn unrelated_texts_score_near_zero() {
        let e = HashingEmbedder::default();
        let pairs = [
            ("Quarterly revenue grew by ten percent", "My dog likes swimming"),
            ("The invoice is overdue", "Paris hosts a marathon in April"),
            ("kubernetes deployment failed", "grandmother bakes bread"),
        ];
        for (a, b) in pairs {
            let c = cos(&e, a, b);
            assert!(c.abs() < 0.2, "{a:?} vs {b:?}: {c}");
        }
    }

    #[test]
    fn shared_words_and_inflections_score_positive() {
        let e = HashingEmbedder::default();
        let base = "The customer's favourite colour is teal";
        let related = cos(&e, base, "what colour does the customer like?");
        let unrelated = cos(&e, base, "The deployment pipeline runs nightly");
        assert!(related > 0.35, "{related}");
        assert!(related > unrelated + 0.1, "{related} vs {unrelated}");
        let inflected = cos(&e, "favourite colours", "favourite colour");
        assert!(inflected > 0.6, "{inflected}");
        let plural_only = cos(&e, "colours", "colour");
        assert!(plural_only > 0.3, "{plural_only}");
    }

    #[test]
    fn the_stop_words_are_sorted_and_lower_case() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(STOP_WORDS.iter().all(|w| w.chars().all(|c| c.is_ascii_lowercase())));
    }

    #[test]
    fn stop_words_weigh_little() {
        let e = HashingEmbedder::default();
        let shared_stop_words = cos(&e, "The office is closed on the weekend", "The invoice is on the desk");
        assert!(shared_stop_words < 0.2, "{shared_stop_words}");
        // But a text of only stop words still has a vector, equal for equal texts.
        let v = e.embed_one("to be or not to be");
        assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn word_order_counts_through_pairs() {
        let e = HashingEmbedder::default();
        let same_order = cos(&e, "dog bites man", "the dog bites a man");
        let swapped = cos(&e, "dog bites man", "man bites dog");
        assert!(swapped < 1.0 - 1e-3 && swapped > 0.5, "{swapped}");
        assert!(same_order > 0.5, "{same_order}");
    }

    #[test]
    fn empty_texts_get_zero_vectors() {
        let e = HashingEmbedder::default();
        assert_eq!(e.embed_one(""), vec![0.0; 384]);
        assert_eq!(e.embed_one("  ,.;  "), vec![0.0; 384]);
    }

    #[tokio::test]
    async fn the_port_embeds_every_text_in_order() {
        let e = HashingEmbedder::default();
        let texts = vec!["alpha".to_string(), String::new(), "beta gamma".to_string()];
        let out = e.embed(&texts).await.unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], e.embed_one("alpha"));
        assert_eq!(out[1], vec![0.0; 384]);
        assert_eq!(out[2], e.embed_one("beta gamma"));
    }
}
