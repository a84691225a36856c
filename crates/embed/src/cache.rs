//! Recent search queries' vectors, kept in process so that a repeated query skips the model.
//!
//! Agents and users ask the same things again and again (a chat's recall embeds each message,
//! a dashboard re-runs its searches), and a lookup costs a hash of the text where the model
//! costs milliseconds of CPU or a round trip. Only queries are kept: a stored text is embedded
//! once, and would push out the queries that do come back.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use agentry_domain::memory::{EmbedError, Embedder, EmbeddingModel};
use async_trait::async_trait;

/// Queries longer than this many bytes are not kept. A search query is a question, far shorter;
/// the bound keeps the cache's memory within about `capacity × (2 KiB + one vector)` whatever
/// callers send (a query may be up to 32,000 characters), and a long text is seldom repeated
/// word for word anyway.
pub const MAX_CACHED_QUERY_BYTES: usize = 2048;

/// A least-recently-used map of at most `capacity` entries: a lookup that finds its key makes
/// it the most recent; an insertion into a full map drops the least recent.
///
/// Recency is a counter stamped on each use, with the keys in stamp order beside the map, so
/// every operation is a hash lookup and a few steps of a B-tree. (The `lru` crate does the same
/// in O(1) with a linked list, in unsafe code; for a cache consulted once per search that
/// difference is not worth a dependency.)
pub(crate) struct Lru<K, V> {
    capacity: usize,
    entries: HashMap<Arc<K>, Slot<V>>,
    by_recency: BTreeMap<u64, Arc<K>>,
    clock: u64,
}

struct Slot<V> {
    value: V,
    stamp: u64,
}

impl<K: Hash + Eq, V: Clone> Lru<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity, entries: HashMap::new(), by_recency: BTreeMap::new(), clock: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The value of `key`, which becomes the most recently used.
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        let slot = self.entries.get_mut(key)?;
        self.clock += 1;
        if let Some(key) = self.by_recency.remove(&slot.stamp) {
            self.by_recency.insert(self.clock, key);
        }
        slot.stamp = self.clock;
        Some(slot.value.clone())
    }

    /// Keeps `value` under `key` as the most recently used, dropping the least recently used
    /// entry when the map is full. With a capacity of 0 nothing is kept.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        self.clock += 1;
        if let Some(slot) = self.entries.get_mut(&key) {
            if let Some(key) = self.by_recency.remove(&slot.stamp) {
                self.by_recency.insert(self.clock, key);
            }
            *slot = Slot { value, stamp: self.clock };
            return;
        }
        if self.entries.len() >= self.capacity
            && let Some((_, oldest)) = self.by_recency.pop_first()
        {
            self.entries.remove(&oldest);
        }
        let key = Arc::new(key);
        self.by_recency.insert(self.clock, Arc::clone(&key));
        self.entries.insert(key, Slot { value, stamp: self.clock });
    }
}

/// What a vector is kept under: the model that made it and the query's text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct QueryKey {
    model: Arc<str>,
    text: String,
}

/// An [`Embedder`] that keeps the vectors of the last `capacity` distinct search queries
/// ([`Embedder::embed_query`]) of the one it wraps, keyed by the model and the text; stored
/// texts ([`Embedder::embed`]) pass through untouched. A capacity of 0 keeps nothing.
///
/// Sound because a model's vector of a text never changes: the model's id names its weights
/// (a change of model is a new id, and its vectors are looked up under it).
pub struct CachedEmbedder<E: ?Sized> {
    inner: Arc<E>,
    model: Arc<str>,
    cache: Option<Mutex<Lru<QueryKey, Vec<f32>>>>,
}

impl<E: Embedder + ?Sized> fmt::Debug for CachedEmbedder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("model", &self.model)
            .field("cached", &self.cached())
            .finish_non_exhaustive()
    }
}

impl<E: Embedder + ?Sized> CachedEmbedder<E> {
    /// Keeps up to `capacity` query vectors of `inner` (0: none).
    pub fn new(inner: Arc<E>, capacity: usize) -> Self {
        let model = Arc::from(inner.model().id.as_str());
        let cache = (capacity > 0).then(|| Mutex::new(Lru::new(capacity)));
        Self { inner, model, cache }
    }

    /// How many query vectors are kept now.
    pub fn cached(&self) -> usize {
        self.cache.as_ref().map_or(0, |cache| lock(cache).len())
    }
}

/// The lock of the cache, even after a panic elsewhere held it: every change to the map is
/// complete before anything that could panic, so the map is never half-changed.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl<E: Embedder + ?Sized> Embedder for CachedEmbedder<E> {
    fn model(&self) -> &EmbeddingModel {
        self.inner.model()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_background(texts).await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let Some(cache) = self.cache.as_ref().filter(|_| text.len() <= MAX_CACHED_QUERY_BYTES) else {
            return self.inner.embed_query(text).await;
        };
        let key = QueryKey { model: Arc::clone(&self.model), text: text.to_owned() };
        if let Some(vector) = lock(cache).get(&key) {
            return Ok(vector);
        }
        // Not held across the model's work: two callers missing the same text at once both
        // embed it (the batcher below makes that one text of one batch), and a failure is not
        // kept, so the next caller tries again.
        let vector = self.inner.embed_query(text).await?;
        lock(cache).insert(key, vector.clone());
        Ok(vector)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut lru = Lru::new(3);
        lru.insert("a", 1);
        lru.insert("b", 2);
        lru.insert("c", 3);
        // Using `a` makes `b` the least recent.
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("d", 4);
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.get(&"b"), None);
        // Now from least to most recent: c, a, d. Replacing `c` makes it the most recent.
        lru.insert("c", 30);
        lru.insert("e", 5);
        assert_eq!(lru.get(&"a"), None);
        assert_eq!((lru.get(&"c"), lru.get(&"d"), lru.get(&"e")), (Some(30), Some(4), Some(5)));
        lru.insert("f", 6);
        assert_eq!(lru.get(&"c"), None, "c was used before d and e");
        assert_eq!(lru.len(), 3);
    }

    #[test]
    fn the_bound_holds_over_many_insertions() {
        let mut lru = Lru::new(100);
        for i in 0..10_000 {
            lru.insert(i, i);
            assert!(lru.len() <= 100);
        }
        assert_eq!(lru.len(), 100);
        assert_eq!(lru.by_recency.len(), 100);
        assert!((9_900..10_000).all(|i| lru.get(&i) == Some(i)));
        assert_eq!(lru.get(&9_899), None);
    }

    #[test]
    fn a_capacity_of_zero_keeps_nothing() {
        let mut lru = Lru::new(0);
        lru.insert("a", 1);
        assert_eq!((lru.len(), lru.get(&"a")), (0, None));
    }

    /// A model that counts what it embeds: each query's vector is `[n]`, n the number of texts
    /// it had embedded before, so a vector tells which call made it.
    struct Counting {
        model: EmbeddingModel,
        texts: AtomicUsize,
    }

    impl Counting {
        fn new(id: &str) -> Arc<Self> {
            Arc::new(Self {
                model: EmbeddingModel { provider: "test".into(), id: id.into(), dimension: 1 },
                texts: AtomicUsize::new(0),
            })
        }

        fn embedded(&self) -> usize {
            self.texts.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl Embedder for Counting {
        fn model(&self) -> &EmbeddingModel {
            &self.model
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            if texts.iter().any(|t| t == "fail") {
                return Err(EmbedError::Timeout);
            }
            Ok(texts.iter().map(|_| vec![self.texts.fetch_add(1, Ordering::SeqCst) as f32]).collect())
        }
    }

    #[tokio::test]
    async fn a_repeated_query_skips_the_model_until_it_is_evicted() {
        let model = Counting::new("test:1");
        let cached = CachedEmbedder::new(model.clone(), 2);
        assert_eq!(cached.embed_query("a").await.unwrap(), vec![0.0]);
        assert_eq!(cached.embed_query("b").await.unwrap(), vec![1.0]);
        assert_eq!(cached.embed_query("a").await.unwrap(), vec![0.0], "a hit: the first call's vector");
        assert_eq!(model.embedded(), 2);
        // `b` is the least recently used now.
        assert_eq!(cached.embed_query("c").await.unwrap(), vec![2.0]);
        assert_eq!(cached.cached(), 2);
        assert_eq!(cached.embed_query("a").await.unwrap(), vec![0.0]);
        assert_eq!(model.embedded(), 3);
        assert_eq!(cached.embed_query("b").await.unwrap(), vec![3.0], "evicted: embedded again");
        assert_eq!(model.embedded(), 4);
    }

    #[tokio::test]
    async fn stored_texts_long_queries_and_failures_are_not_kept() {
        let model = Counting::new("test:1");
        let cached = CachedEmbedder::new(model.clone(), 10);
        let texts = vec!["stored".to_owned()];
        cached.embed(&texts).await.unwrap();
        cached.embed(&texts).await.unwrap();
        assert_eq!((model.embedded(), cached.cached()), (2, 0));
        let long = "x".repeat(MAX_CACHED_QUERY_BYTES + 1);
        cached.embed_query(&long).await.unwrap();
        cached.embed_query(&long).await.unwrap();
        assert_eq!((model.embedded(), cached.cached()), (4, 0));
        assert!(matches!(cached.embed_query("fail").await, Err(EmbedError::Timeout)));
        assert_eq!(cached.cached(), 0);
    }

    #[tokio::test]
    async fn a_capacity_of_zero_embeds_every_query() {
        let model = Counting::new("test:1");
        let cached = CachedEmbedder::new(model.clone(), 0);
        for _ in 0..3 {
            cached.embed_query("same").await.unwrap();
        }
        assert_eq!((model.embedded(), cached.cached()), (3, 0));
    }

    #[test]
    fn keys_of_two_models_differ() {
        let key = |model: &str| QueryKey { model: Arc::from(model), text: "same".into() };
        let mut lru = Lru::new(10);
        lru.insert(key("minilm:a"), vec![1.0]);
        assert_eq!(lru.get(&key("openai:b")), None);
        assert_eq!(lru.get(&key("minilm:a")), Some(vec![1.0]));
    }
}
