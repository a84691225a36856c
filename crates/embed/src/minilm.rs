//! all-MiniLM-L6-v2, the sentence-transformers model, run in process on the CPU with candle.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agentry_domain::memory::{EmbedError, Embedder, EmbeddingModel, normalize};
use anyhow::Context as _;
use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The files the model directory must hold.
const FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// How the model runs.
#[derive(Debug, Clone)]
pub struct MiniLmSettings {
    /// Batches computed at the same time, each on a blocking thread (at least 1). Each batch's
    /// matrix products already use every core, so more than the number of cores only queues.
    pub max_concurrency: usize,
    /// Texts per forward pass (at least 1). Within a batch every text is padded to the longest,
    /// so large batches of uneven texts waste work; 32 is sentence-transformers' default.
    pub batch_size: usize,
    /// Tokens per text, counting `[CLS]` and `[SEP]`; the rest of a longer text is ignored.
    /// MiniLM was trained on 256-token inputs: it accepts up to 512 but does not get better.
    pub max_tokens: usize,
}

impl Default for MiniLmSettings {
    /// The number of CPUs capped at 2, batches of 32, 256 tokens.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self { max_concurrency: cpus.min(2), batch_size: 32, max_tokens: 256 }
    }
}

/// all-MiniLM-L6-v2: 384-dimensional sentence vectors, the mean of the last hidden states over
/// the text's tokens, L2-normalised (exactly what sentence-transformers computes).
///
/// The work runs on tokio's blocking threads, never on the async executor, at most
/// [`MiniLmSettings::max_concurrency`] batches at a time across all callers.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    runner: Arc<Runner>,
    permits: Arc<Semaphore>,
    max_concurrency: usize,
    batch_size: usize,
    model: EmbeddingModel,
    dir: PathBuf,
}

/// What a forward pass needs, shared by every blocking thread: candle's tensors are immutable
/// and reference-counted, and tokenizing takes `&self`, so no lock is needed.
struct Runner {
    bert: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

// The blocking threads share one model; this fails to compile if candle or tokenizers ever
// stopped allowing it.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Runner>();
};

impl fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("model", &self.model)
            .field("dir", &self.dir)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Whether `dir` holds the model's files (`config.json`, `model.safetensors`,
    /// `tokenizer.json`), as `scripts/fetch-model.sh` leaves them.
    pub fn files_present(dir: &Path) -> bool {
        FILES.iter().all(|f| dir.join(f).is_file())
    }

    /// Loads the model from `dir`. Blocking: it reads ~90 MB (a fraction of a second); call it at
    /// startup or on a blocking thread.
    ///
    /// # Errors
    /// When a file is missing or unreadable, or is not what a BERT model and its tokenizer need.
    pub fn load(dir: &Path, settings: MiniLmSettings) -> anyhow::Result<Self> {
        let started = Instant::now();
        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .with_context(|| format!("reading {}", config_path.display()))?;
        let config: Config = serde_json::from_str(&config_text)
            .with_context(|| format!("{} is not a BERT configuration", config_path.display()))?;

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| anyhow::anyhow!("loading {}: {e}", tokenizer_path.display()))?;
        // The shipped tokenizer pads every input to 128 tokens and truncates there. Pad instead
        // to the longest text of each batch (the attention mask keeps the padding out of the
        // mean), and truncate where the model was trained.
        let padding = PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..tokenizer.get_padding().cloned().unwrap_or_default()
        };
        tokenizer.with_padding(Some(padding));
        let max_tokens = settings.max_tokens.clamp(2, config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_tokens, ..TruncationParams::default() }))
            .map_err(|e| anyhow::anyhow!("setting the tokenizer's truncation: {e}"))?;

        let weights_path = dir.join("model.safetensors");
        let device = Device::Cpu;
        // Read into memory rather than memory-mapped: candle's mmap loader is `unsafe` (the file
        // could change under it) and this workspace forbids unsafe code. The buffer is freed
        // once the weights are copied into the model's tensors.
        let weights =
            std::fs::read(&weights_path).with_context(|| format!("reading {}", weights_path.display()))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DTYPE, &device)
            .with_context(|| format!("{} is not a safetensors file", weights_path.display()))?;
        let bert = BertModel::load(vb, &config)
            .with_context(|| format!("{} does not hold a BERT model's weights", weights_path.display()))?;

        let model = EmbeddingModel {
            provider: "minilm".into(),
            id: "minilm:all-MiniLM-L6-v2".into(),
            dimension: config.hidden_size,
        };
        tracing::info!(
            dir = %dir.display(),
            dimension = model.dimension,
            millis = started.elapsed().as_millis() as u64,
            "loaded the MiniLM embedding model"
        );
        let max_concurrency = settings.max_concurrency.max(1);
        Ok(Self {
            runner: Arc::new(Runner { bert, tokenizer, device }),
            permits: Arc::new(Semaphore::new(max_concurrency)),
            max_concurrency,
            batch_size: settings.batch_size.max(1),
            model,
            dir: dir.to_path_buf(),
        })
    }
}

impl Runner {
    /// The normalised vectors of one batch of non-empty texts, in order. CPU-bound.
    fn embed_batch(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let rows = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let flat = |pick: fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            encodings.iter().flat_map(|e| pick(e).iter().copied()).collect()
        };
        let (ids, type_ids, mask) =
            (flat(|e| e.get_ids()), flat(|e| e.get_type_ids()), flat(|e| e.get_attention_mask()));
        self.forward(rows, len, ids, type_ids, mask).map_err(|e| EmbedError::Model(e.to_string()))
    }

    /// The forward pass and the masked mean pooling.
    fn forward(
        &self,
        rows: usize,
        len: usize,
        ids: Vec<u32>,
        type_ids: Vec<u32>,
        mask: Vec<u32>,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let ids = Tensor::from_vec(ids, (rows, len), &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, (rows, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, len), &self.device)?;
        // (rows, len, hidden)
        let hidden = self.bert.forward(&ids, &type_ids, Some(&mask))?;
        // The mean over real tokens only: padding positions have mask 0, so they add nothing to
        // the sum and are not counted; a text's vector is the same alone or in any batch.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        // At least 2 per text: `[CLS]` and `[SEP]` are always there.
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let mut vectors = mean.to_vec2::<f32>()?;
        vectors.iter_mut().for_each(|v| normalize(v));
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn model(&self) -> &EmbeddingModel {
        &self.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Empty (or blank) texts are not run: the port wants a zero vector for them, and the
        // model would make a meaningless one of `[CLS] [SEP]`.
        let mut out = vec![vec![0.0f32; self.model.dimension]; texts.len()];
        let wanted: Vec<usize> = (0..texts.len()).filter(|&i| !texts[i].trim().is_empty()).collect();
        // One task per batch, each waiting for a permit, then computing on a blocking thread.
        // A call keeps at most `max_concurrency` batches queued or running: a long list (a
        // reindex) then uses every permit, yet a query arriving meanwhile waits for a few
        // batches only, not for the whole list, since the semaphore serves waiters in turn.
        // Dropping this future (the caller gave up) aborts the batches not yet started.
        let mut batches = wanted.chunks(self.batch_size).enumerate();
        let mut tasks = JoinSet::new();
        loop {
            while tasks.len() < self.max_concurrency {
                let Some((n, chunk)) = batches.next() else { break };
                let batch: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
                let permits = Arc::clone(&self.permits);
                let runner = Arc::clone(&self.runner);
                tasks.spawn(async move {
                    let _permit = permits
                        .acquire_owned()
                        .await
                        .map_err(|_| EmbedError::Model("the embedder was shut down".into()))?;
                    let vectors = tokio::task::spawn_blocking(move || runner.embed_batch(batch))
                        .await
                        .map_err(|e| EmbedError::Model(format!("the embedding thread failed: {e}")))??;
                    Ok::<_, EmbedError>((n, vectors))
                });
            }
            let Some(joined) = tasks.join_next().await else { break };
            let (n, vectors) =
                joined.map_err(|e| EmbedError::Model(format!("the embedding task failed: {e}")))??;
            for (&i, v) in wanted[n * self.batch_size..].iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
