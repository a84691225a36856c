//! Embedding in batches across callers: the texts of concurrent calls (searches' queries,
//! single memory writes) go to the model together.
//!
//! A model embeds a batch of texts far faster than the same texts one at a time:
//! all-MiniLM-L6-v2 spends most of a single short sentence's time in fixed costs (a forward
//! pass's set-up, a hand-off to a blocking thread) and takes about five times as long for 32
//! sentences as for one; an OpenAI-compatible server costs one round trip per call. So under
//! load one call for many callers' texts serves them all, where calls one by one would queue
//! behind each other.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentry_domain::memory::{EmbedError, Embedder, EmbeddingModel};
use async_trait::async_trait;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How batches are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Texts per batch at most (at least 1). A call with more texts than this is a batch of its
    /// own and goes to the model straight away, not through the queue.
    pub max_texts: usize,
    /// How long a batch waits for more texts after its first text arrived, unless it fills up
    /// first. Texts that arrive while the batches in flight are being embedded wait for them in
    /// any case and go together in the next one.
    pub max_wait: Duration,
    /// Batches being embedded at once (at least 1). The next batch forms only when one of them
    /// is done, so under load it is full.
    pub max_in_flight: usize,
}

impl Default for BatchSettings {
    /// 32 texts (sentence-transformers' batch size, and [`crate::MiniLmSettings`]'), no
    /// waiting (a text that finds the model idle goes at once: under load the queue fills the
    /// next batch while the current ones run), two batches at once (`MiniLmSettings`'
    /// concurrency on two or more cores: one batch's forward pass keeps one core busy).
    fn default() -> Self {
        Self { max_texts: 32, max_wait: Duration::ZERO, max_in_flight: 2 }
    }
}

/// One caller's texts, waiting for a batch.
struct Request {
    texts: Vec<String>,
    arrived: Instant,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

/// An [`Embedder`] that gathers the texts of concurrent calls into batches for the one it
/// wraps: at most [`BatchSettings::max_in_flight`] batches at a time, each of at most
/// [`BatchSettings::max_texts`] texts, closed [`BatchSettings::max_wait`] after its first
/// text arrived or when full. Every caller gets
/// its own vectors, in order, exactly as the wrapped embedder makes them (whose vectors must not
/// depend on the other texts of a batch: see `MiniLmEmbedder`'s masked pooling).
///
/// The batches are formed by a task on the tokio runtime that made this embedder; it ends when
/// the last clone of the embedder is dropped.
pub struct BatchingEmbedder<E: ?Sized> {
    inner: Arc<E>,
    queue: mpsc::UnboundedSender<Request>,
    max_texts: usize,
}

impl<E: ?Sized> Clone for BatchingEmbedder<E> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner), queue: self.queue.clone(), max_texts: self.max_texts }
    }
}

impl<E: Embedder + ?Sized> fmt::Debug for BatchingEmbedder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchingEmbedder")
            .field("model", &self.inner.model().id)
            .field("max_texts", &self.max_texts)
            .finish_non_exhaustive()
    }
}

impl<E: Embedder + ?Sized + 'static> BatchingEmbedder<E> {
    /// Batches the calls to `inner`.
    ///
    /// # Panics
    /// Outside a tokio runtime, where the task that forms the batches cannot be started.
    pub fn new(inner: Arc<E>, settings: BatchSettings) -> Self {
        let settings = BatchSettings {
            max_texts: settings.max_texts.max(1),
            max_in_flight: settings.max_in_flight.max(1),
            ..settings
        };
        // Unbounded: every request in it is a caller awaiting its answer, so the callers bound
        // it (and HTTP's own limits bound them).
        let (queue, requests) = mpsc::unbounded_channel();
        tokio::spawn(form_batches(Arc::clone(&inner), requests, settings));
        Self { inner, queue, max_texts: settings.max_texts }
    }
}

fn shut_down() -> EmbedError {
    EmbedError::Model("the embedding batcher was shut down".into())
}

#[async_trait]
impl<E: Embedder + ?Sized + 'static> Embedder for BatchingEmbedder<E> {
    fn model(&self) -> &EmbeddingModel {
        self.inner.model()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if texts.len() > self.max_texts {
            // A document's chunks or a reindex: batches enough by itself, and would only hold
            // up the short calls queued behind it.
            return self.inner.embed(texts).await;
        }
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Request { texts: texts.to_vec(), arrived: Instant::now(), reply })
            .map_err(|_| shut_down())?;
        // Dropping this future (the caller went away) closes `answer`: a request not yet in a
        // batch is then left out of it.
        answer.await.map_err(|_| shut_down())?
    }
}

/// The loop of the batching task: waits for a free slot among `max_in_flight`, takes the first
/// waiting request, gathers more until the batch is full or `max_wait` after that request
/// arrived, starts embedding the batch (answering its callers when done), and again. Requests
/// arriving while every slot is busy wait in the queue, so under load the next batch is full
/// at once.
async fn form_batches<E: Embedder + ?Sized + 'static>(
    inner: Arc<E>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    settings: BatchSettings,
) {
    let slots = Arc::new(Semaphore::new(settings.max_in_flight));
    // The batches being embedded, owned by this task: when it ends (the embedder was dropped),
    // they are aborted with it rather than left running.
    let mut running = JoinSet::new();
    // A request that did not fit into the previous batch opens the next one.
    let mut carried: Option<Request> = None;
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { return };
        // Batches that ended since: nothing to read from them (each answered its callers).
        while running.try_join_next().is_some() {}
        let first = match carried.take() {
            Some(request) => request,
            None => match requests.recv().await {
                Some(request) => request,
                None => return,
            },
        };
        if first.reply.is_closed() {
            continue;
        }
        let deadline = first.arrived + settings.max_wait;
        let mut count = first.texts.len();
        let mut batch = vec![first];
        while count < settings.max_texts {
            let request = tokio::select! {
                // Those already waiting first, even past the deadline: they came while the
                // previous batch ran, and this batch is their turn.
                biased;
                request = requests.recv() => match request {
                    Some(request) => request,
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
            };
            if request.reply.is_closed() {
                continue;
            }
            if count + request.texts.len() > settings.max_texts {
                carried = Some(request);
                break;
            }
            count += request.texts.len();
            batch.push(request);
        }
        let inner = Arc::clone(&inner);
        running.spawn(async move {
            embed_batch(&inner, batch).await;
            drop(slot);
        });
    }
}

/// Embeds the texts of `batch` in one call and answers each request with its vectors.
async fn embed_batch<E: Embedder + ?Sized + 'static>(inner: &Arc<E>, batch: Vec<Request>) {
    // The same text asked by several callers at once (a popular question) is embedded once.
    let mut unique: Vec<String> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let positions: Vec<Vec<usize>> = batch
        .iter()
        .map(|request| {
            request
                .texts
                .iter()
                .map(|text| {
                    *seen.entry(text.as_str()).or_insert_with(|| {
                        unique.push(text.clone());
                        unique.len() - 1
                    })
                })
                .collect()
        })
        .collect();
    let wanted = unique.len();
    let model = Arc::clone(inner);
    // On a task of its own, so that a panic in the model answers this batch's callers with an
    // error that says so (rather than dropping their answers unsent).
    let result = match tokio::spawn(async move { model.embed(&unique).await }).await {
        Ok(Ok(vectors)) if vectors.len() == wanted => Ok(vectors),
        Ok(Ok(vectors)) => Err(EmbedError::Model(format!("{} vectors for {wanted} texts", vectors.len()))),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(EmbedError::Model(format!("the embedding task failed: {e}"))),
    };
    for (request, positions) in batch.into_iter().zip(positions) {
        let answer = match &result {
            Ok(vectors) => Ok(positions.iter().map(|&i| vectors[i].clone()).collect()),
            Err(e) => Err(e.clone()),
        };
        // A caller that went away meanwhile no longer listens; nothing to do for it.
        let _ = request.reply.send(answer);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use super::*;

    /// A model that records every call's texts and answers each text with `[its length, its
    /// first byte]`, so a caller can tell its vector from another's. With a gate, each call
    /// first waits for a permit, so a test decides when a batch finishes.
    struct Counting {
        model: EmbeddingModel,
        calls: Mutex<Vec<Vec<String>>>,
        gate: Option<Arc<Semaphore>>,
        started: mpsc::UnboundedSender<usize>,
    }

    impl Counting {
        fn new(gate: Option<Arc<Semaphore>>) -> (Arc<Self>, mpsc::UnboundedReceiver<usize>) {
            let (started, calls_started) = mpsc::unbounded_channel();
            let model = EmbeddingModel { provider: "test".into(), id: "test:2".into(), dimension: 2 };
            (Arc::new(Self { model, calls: Mutex::default(), gate, started }), calls_started)
        }

        fn calls(&self) -> Vec<Vec<String>> {
            self.calls.lock().unwrap().clone()
        }
    }

    fn vector_of(text: &str) -> Vec<f32> {
        vec![text.len() as f32, f32::from(text.bytes().next().unwrap_or(0))]
    }

    #[async_trait]
    impl Embedder for Counting {
        fn model(&self) -> &EmbeddingModel {
            &self.model
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.lock().unwrap().push(texts.to_vec());
            let _ = self.started.send(texts.len());
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("the gate stays open").forget();
            }
            if texts.iter().any(|t| t == "fail") {
                return Err(EmbedError::Upstream("refused".into()));
            }
            Ok(texts.iter().map(|t| vector_of(t)).collect())
        }
    }

    fn texts(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}{}", "x".repeat(i))).collect()
    }

    /// Settings where only a full batch closes (the wait is an hour), so what goes into which
    /// batch does not depend on timing.
    fn by_count(max_texts: usize) -> BatchSettings {
        BatchSettings { max_texts, max_wait: Duration::from_secs(3600), max_in_flight: 1 }
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_call_and_each_gets_its_own_vector() {
        let (model, _) = Counting::new(None);
        let batcher = BatchingEmbedder::new(model.clone(), by_count(10));
        let callers: Vec<_> = texts("q", 10)
            .into_iter()
            .map(|text| {
                let batcher = batcher.clone();
                tokio::spawn(async move { (batcher.embed_query(&text).await.unwrap(), text) })
            })
            .collect();
        for caller in callers {
            let (vector, text) = caller.await.unwrap();
            assert_eq!(vector, vector_of(&text));
        }
        let calls = model.calls();
        assert_eq!(calls.len(), 1, "ten callers, one call: {calls:?}");
        assert_eq!(calls[0].len(), 10);
    }

    #[tokio::test]
    async fn callers_arriving_while_a_batch_runs_join_the_next_one_of_at_most_max_texts() {
        let gate = Arc::new(Semaphore::new(0));
        let (model, mut started) = Counting::new(Some(gate.clone()));
        // Batches close when full; the wait only ends the last, partial one.
        let settings = BatchSettings { max_texts: 4, max_wait: Duration::from_millis(50), max_in_flight: 1 };
        let batcher = BatchingEmbedder::new(model.clone(), settings);
        // A first batch, full at once, is held in the model.
        let first = {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed(&texts("a", 4)).await.unwrap() })
        };
        assert_eq!(started.recv().await, Some(4));
        // Meanwhile 8 callers of one text, then one of three.
        let mut asked: Vec<Vec<String>> = texts("b", 8).into_iter().map(|t| vec![t]).collect();
        asked.push(texts("c", 3));
        let callers: Vec<_> = asked
            .iter()
            .cloned()
            .map(|texts| {
                let batcher = batcher.clone();
                tokio::spawn(async move { batcher.embed(&texts).await.unwrap() })
            })
            .collect();
        // On this single-threaded runtime, every caller runs up to its wait for an answer
        // (its request queued) before this task goes on.
        tokio::task::yield_now().await;
        assert_eq!(model.calls().len(), 1, "the queued callers wait for the running batch");
        gate.add_permits(100);
        assert_eq!(first.await.unwrap(), texts("a", 4).iter().map(|t| vector_of(t)).collect::<Vec<_>>());
        for (caller, asked) in callers.into_iter().zip(&asked) {
            assert_eq!(caller.await.unwrap(), asked.iter().map(|t| vector_of(t)).collect::<Vec<_>>());
        }
        let calls = model.calls();
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        // Nine callers in three calls, in the order they came: the three texts did not fit with
        // the last four single ones, and a caller's texts stay together.
        assert_eq!(sizes, vec![4, 4, 4, 3], "{calls:?}");
        assert_eq!(calls[3], asked[8]);
    }

    #[tokio::test]
    async fn a_lone_text_waits_for_company_at_most_max_wait() {
        let (model, _) = Counting::new(None);
        let wait = Duration::from_millis(30);
        let batcher = BatchingEmbedder::new(
            model.clone(),
            BatchSettings { max_texts: 32, max_wait: wait, max_in_flight: 1 },
        );
        let started = Instant::now();
        assert_eq!(batcher.embed_query("alone").await.unwrap(), vector_of("alone"));
        assert!(started.elapsed() >= wait, "answered after {:?}", started.elapsed());
        assert_eq!(model.calls(), vec![vec!["alone".to_owned()]]);
    }

    #[tokio::test]
    async fn by_default_a_text_that_finds_the_model_idle_goes_at_once() {
        let gate = Arc::new(Semaphore::new(0));
        let (model, mut started) = Counting::new(Some(gate.clone()));
        let batcher = BatchingEmbedder::new(model.clone(), BatchSettings::default());
        let alone = {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query("alone").await.unwrap() })
        };
        // With any wait for company it would not have started: nobody else comes.
        let first = tokio::time::timeout(Duration::from_secs(60), started.recv()).await;
        assert_eq!(first.expect("the lone text was sent to the model"), Some(1));
        gate.add_permits(1);
        assert_eq!(alone.await.unwrap(), vector_of("alone"));
    }

    #[tokio::test]
    async fn up_to_max_in_flight_batches_run_at_once_and_the_next_waits_for_one_to_end() {
        let gate = Arc::new(Semaphore::new(0));
        let (model, mut started) = Counting::new(Some(gate.clone()));
        let batcher = BatchingEmbedder::new(model.clone(), BatchSettings { max_in_flight: 2, ..by_count(2) });
        let ask = |prefix: &'static str| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed(&texts(prefix, 2)).await.unwrap() })
        };
        let callers = [(ask("a"), "a"), (ask("b"), "b"), (ask("c"), "c")];
        // Two full batches are in the model at once, both held there.
        assert_eq!(started.recv().await, Some(2));
        assert_eq!(started.recv().await, Some(2));
        tokio::task::yield_now().await;
        assert_eq!(model.calls().len(), 2, "the third batch waits for a free slot");
        gate.add_permits(100);
        for (caller, prefix) in callers {
            assert_eq!(
                caller.await.unwrap(),
                texts(prefix, 2).iter().map(|t| vector_of(t)).collect::<Vec<_>>()
            );
        }
        assert_eq!(model.calls().len(), 3);
    }

    #[tokio::test]
    async fn a_call_larger_than_a_batch_goes_straight_to_the_model() {
        let (model, _) = Counting::new(None);
        // Were it queued, it would wait an hour for company.
        let batcher = BatchingEmbedder::new(model.clone(), by_count(4));
        let many = texts("d", 9);
        let got = batcher.embed(&many).await.unwrap();
        assert_eq!(got, many.iter().map(|t| vector_of(t)).collect::<Vec<_>>());
        assert_eq!(model.calls(), vec![many]);
        assert!(batcher.embed(&[]).await.unwrap().is_empty());
        assert_eq!(model.calls().len(), 1, "nothing to embed, no call");
    }

    #[tokio::test]
    async fn the_same_text_asked_at_once_is_embedded_once() {
        let (model, _) = Counting::new(None);
        let batcher = BatchingEmbedder::new(model.clone(), by_count(3));
        let ask = |text: &'static str| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query(text).await.unwrap() })
        };
        let (a, b, c) = (ask("same"), ask("same"), ask("other"));
        assert_eq!(a.await.unwrap(), vector_of("same"));
        assert_eq!(b.await.unwrap(), vector_of("same"));
        assert_eq!(c.await.unwrap(), vector_of("other"));
        assert_eq!(model.calls(), vec![vec!["same".to_owned(), "other".to_owned()]]);
    }

    #[tokio::test]
    async fn a_failed_batch_fails_each_of_its_callers_and_the_next_batch_runs() {
        let (model, _) = Counting::new(None);
        let batcher = BatchingEmbedder::new(model.clone(), by_count(2));
        let ask = |text: &'static str| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query(text).await })
        };
        let (a, b) = (ask("fail"), ask("fine"));
        assert!(matches!(a.await.unwrap(), Err(EmbedError::Upstream(m)) if m == "refused"));
        assert!(matches!(b.await.unwrap(), Err(EmbedError::Upstream(m)) if m == "refused"));
        let (c, d) = (ask("later"), ask("fine"));
        assert_eq!(c.await.unwrap().unwrap(), vector_of("later"));
        assert_eq!(d.await.unwrap().unwrap(), vector_of("fine"));
    }

    #[tokio::test]
    async fn callers_that_went_away_are_left_out_of_the_batch() {
        let gate = Arc::new(Semaphore::new(0));
        let (model, mut started) = Counting::new(Some(gate.clone()));
        let settings = BatchSettings { max_texts: 2, max_wait: Duration::from_millis(50), max_in_flight: 1 };
        let batcher = BatchingEmbedder::new(model.clone(), settings);
        let first = {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed(&texts("a", 2)).await })
        };
        assert_eq!(started.recv().await, Some(2));
        // Queued behind the running batch (a call's first poll queues it), then given up: one
        // that would open the next batch, one that would join it.
        let give_up = async |text: &str| {
            let gone = tokio::time::timeout(Duration::from_millis(1), batcher.embed_query(text)).await;
            assert!(gone.is_err(), "answered while the model was held: {gone:?}");
        };
        give_up("gone first").await;
        let x = {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query("x").await })
        };
        tokio::task::yield_now().await;
        give_up("gone second").await;
        let y = {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.embed_query("y").await })
        };
        tokio::task::yield_now().await;
        gate.add_permits(100);
        first.await.unwrap().unwrap();
        assert_eq!(x.await.unwrap().unwrap(), vector_of("x"));
        assert_eq!(y.await.unwrap().unwrap(), vector_of("y"));
        assert_eq!(model.calls(), vec![texts("a", 2), vec!["x".to_owned(), "y".to_owned()]]);
    }
}
