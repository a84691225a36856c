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
    background: mpsc::UnboundedSender<Request>,
    max_texts: usize,
}

impl<E: ?Sized> Clone for BatchingEmbedder<E> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            queue: self.queue.clone(),
            background: self.background.clone(),
            max_texts: self.max_texts,
        }
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
        let (background, background_requests) = mpsc::unbounded_channel();
        let queues = Queues { foreground: requests, background: background_requests };
        tokio::spawn(form_batches(Arc::clone(&inner), queues, settings));
        Self { inner, queue, background, max_texts: settings.max_texts }
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
        ask(&self.queue, texts).await
    }

    /// Queued apart: a batch of these forms only while a slot is free and no caller's text
    /// waits, one at a time, so that under load work nobody waits on takes the model's spare
    /// time and never a caller's turn.
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        ask(&self.background, texts).await
    }
}

/// Queues `texts` on `queue` and waits for their vectors.
async fn ask(queue: &mpsc::UnboundedSender<Request>, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let (reply, answer) = oneshot::channel();
    queue.send(Request { texts: texts.to_vec(), arrived: Instant::now(), reply }).map_err(|_| shut_down())?;
    // Dropping this future (the caller went away) closes `answer`: a request not yet in a
    // batch is then left out of it.
    answer.await.map_err(|_| shut_down())?
}

/// The two queues the batching task reads.
struct Queues {
    /// Calls somebody waits on.
    foreground: mpsc::UnboundedReceiver<Request>,
    /// Work nobody waits on ([`Embedder::embed_background`]).
    background: mpsc::UnboundedReceiver<Request>,
}

/// The loop of the batching task: takes the first waiting request (a background one only
/// while a slot is free and no caller's request waits, one background batch at a time), waits
/// for a free slot among `max_in_flight`, gathers more requests of the same queue until
/// the batch is full or `max_wait` after that request arrived, starts embedding the batch
/// (answering its callers when done), and again. Requests arriving while every slot is busy
/// wait in the queue, so under load the next batch is full at once.
async fn form_batches<E: Embedder + ?Sized + 'static>(
    inner: Arc<E>,
    mut queues: Queues,
    settings: BatchSettings,
) {
    let slots = Arc::new(Semaphore::new(settings.max_in_flight));
    let background_slot = Arc::new(Semaphore::new(1));
    // Told when a batch ends: a slot is free, which a background request waits for.
    let ended = Arc::new(tokio::sync::Notify::new());
    // The batches being embedded, owned by this task: when it ends (the embedder was dropped),
    // they are aborted with it rather than left running.
    let mut running = JoinSet::new();
    // A request that did not fit into the previous batch opens the next one (with its queue).
    let mut carried: Option<(Request, bool)> = None;
    loop {
        // Batches that ended since: nothing to read from them (each answered its callers).
        while running.try_join_next().is_some() {}
        let (first, background) = match carried.take() {
            Some(carried) => carried,
            None => {
                // A background batch takes a free slot only when no caller's text waits (the
                // biased select serves those first), and one at a time.
                let spare = slots.available_permits() > 0 && background_slot.available_permits() == 1;
                tokio::select! {
                    biased;
                    request = queues.foreground.recv() => match request {
                        Some(request) => (request, false),
                        None => return,
                    },
                    Some(request) = queues.background.recv(), if spare => (request, true),
                    () = ended.notified() => continue,
                }
            }
        };
        // A background batch holds a slot of the callers' too: it never adds to what runs at once.
        let own = if background {
            let Ok(own) = Arc::clone(&background_slot).acquire_owned().await else { return };
            Some(own)
        } else {
            None
        };
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { return };
        if first.reply.is_closed() {
            continue;
        }
        let requests = if background { &mut queues.background } else { &mut queues.foreground };
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
                carried = Some((request, background));
                break;
            }
            count += request.texts.len();
            batch.push(request);
        }
        let (inner, ended) = (Arc::clone(&inner), Arc::clone(&ended));
        running.spawn(async move {
            embed_batch(&inner, batch).await;
            drop((slot, own));
            ended.notify_one();
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
mod tests;
