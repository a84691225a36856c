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
        assert_eq!(caller.await.unwrap(), texts(prefix, 2).iter().map(|t| vector_of(t)).collect::<Vec<_>>());
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

#[tokio::test]
async fn background_texts_take_a_free_slot_but_never_a_callers_turn() {
    let gate = Arc::new(Semaphore::new(0));
    let (model, mut started) = Counting::new(Some(gate.clone()));
    let one_slot = BatchSettings { max_texts: 1, max_wait: Duration::ZERO, max_in_flight: 1 };
    let batcher = BatchingEmbedder::new(model.clone(), one_slot);
    let ask = |text: &'static str, background: bool| {
        let batcher = batcher.clone();
        tokio::spawn(async move {
            let texts = [text.to_owned()];
            if background { batcher.embed_background(&texts).await } else { batcher.embed(&texts).await }
        })
    };
    let a = ask("a", false);
    assert_eq!(started.recv().await, Some(1), "a caller's text finds the model idle");
    // Queued while `a` holds the one slot: the background text first, then a caller's.
    let learned = ask("learned", true);
    tokio::task::yield_now().await;
    let c = ask("c", false);
    tokio::task::yield_now().await;
    gate.add_permits(3);
    assert_eq!(a.await.unwrap().unwrap(), vec![vector_of("a")]);
    assert_eq!(c.await.unwrap().unwrap(), vec![vector_of("c")]);
    assert_eq!(learned.await.unwrap().unwrap(), vec![vector_of("learned")]);
    let order: Vec<String> = model.calls().into_iter().flatten().collect();
    assert_eq!(order, ["a", "c", "learned"], "the caller's text went first");

    // With a slot free and no caller waiting, a background text goes at once, beside a batch.
    let two_slots = BatchSettings { max_in_flight: 2, ..one_slot };
    let (model, mut started) = Counting::new(Some(gate.clone()));
    let batcher = BatchingEmbedder::new(model.clone(), two_slots);
    let held = {
        let batcher = batcher.clone();
        tokio::spawn(async move { batcher.embed(&["held".to_owned()]).await })
    };
    assert_eq!(started.recv().await, Some(1));
    let beside = {
        let batcher = batcher.clone();
        tokio::spawn(async move { batcher.embed_background(&["beside".to_owned()]).await })
    };
    assert_eq!(started.recv().await, Some(1), "the background text took the free slot");
    gate.add_permits(2);
    assert_eq!(beside.await.unwrap().unwrap(), vec![vector_of("beside")]);
    assert_eq!(held.await.unwrap().unwrap(), vec![vector_of("held")]);
    assert!(batcher.embed_background(&[]).await.unwrap().is_empty());
}
