//! Any server speaking OpenAI's `POST /v1/embeddings`.

use std::time::Duration;

use agentry_domain::memory::ranking::SimilarityScale;
use agentry_domain::memory::{EmbedError, Embedder, EmbeddingModel, normalize};
use async_trait::async_trait;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

/// The dimension of OpenAI's `text-embedding-3-small` and `text-embedding-ada-002`, the usual
/// default of a configuration that names no dimension.
pub const DEFAULT_OPENAI_DIMENSION: usize = 1536;

/// Texts per request: OpenAI takes up to 2048 inputs, but smaller requests keep each answer
/// small, fail (and time out) independently, and suit servers with lower limits.
const BATCH: usize = 96;

/// Where the server is, how to reach it and which model to ask for.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedderSettings {
    /// Base URL, e.g. `https://api.openai.com` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// Bearer key, if the server wants one.
    pub api_key: Option<SecretString>,
    /// The model's name on the server, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Length of the model's vectors (see [`DEFAULT_OPENAI_DIMENSION`]). It must be known
    /// up front, since the store keys vectors by model and dimension; an answer of another length
    /// is an error, not a silent change of model.
    pub dimension: usize,
    /// Longest wait for one request (of up to 96 texts).
    pub timeout: Duration,
}

/// An embedder backed by an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    endpoint: String,
    api_key: Option<SecretString>,
    model_name: String,
    model: EmbeddingModel,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    embedding: Vec<f32>,
    index: usize,
}

impl OpenAiEmbedder {
    /// How search reads the similarities of OpenAI's `text-embedding-3` models, whose unrelated
    /// texts mostly score 0.05–0.2 and paraphrases 0.45–0.7. Another model behind the same API
    /// sets its own with `AGENTRY_EMBEDDING_SIMILARITY_FLOOR` and `_CEILING`.
    pub const SIMILARITY: SimilarityScale = SimilarityScale { floor: 0.2, ceiling: 0.65 };

    /// An embedder for `settings`. Needs the process's rustls crypto provider for https.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: OpenAiEmbedderSettings) -> anyhow::Result<Self> {
        let base = settings.base_url.trim_end_matches('/');
        let endpoint = if base.ends_with("/v1") {
            format!("{base}/embeddings")
        } else {
            format!("{base}/v1/embeddings")
        };
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .build()?;
        let model = EmbeddingModel {
            provider: "openai".into(),
            id: format!("openai:{}", settings.model),
            dimension: settings.dimension,
        };
        Ok(Self { client, endpoint, api_key: settings.api_key, model_name: settings.model, model })
    }

    /// One request: the vectors of `texts` (none empty), in order, normalised.
    async fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({"model": self.model_name, "input": texts});
        let mut call = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key.expose_secret());
        }
        let response = call.send().await.map_err(|e| {
            if e.is_timeout() {
                EmbedError::Timeout
            } else {
                EmbedError::Upstream(format!("request failed: {e}"))
            }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            if e.is_timeout() {
                EmbedError::Timeout
            } else {
                EmbedError::Upstream(format!("reading the answer: {e}"))
            }
        })?;
        if !status.is_success() {
            let excerpt: String = text.chars().take(300).collect();
            return Err(EmbedError::Upstream(format!("the provider answered {status}: {excerpt}")));
        }
        let parsed: Response = serde_json::from_str(&text)
            .map_err(|e| EmbedError::Upstream(format!("unreadable answer from the provider: {e}")))?;
        if parsed.data.len() != texts.len() {
            return Err(EmbedError::Upstream(format!(
                "the provider answered {} embeddings for {} texts",
                parsed.data.len(),
                texts.len()
            )));
        }
        // The answer's order is not promised: each vector says which input it belongs to.
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for datum in parsed.data {
            if datum.embedding.len() != self.model.dimension {
                return Err(EmbedError::Upstream(format!(
                    "the provider answered a vector of {} values; {} expects {}",
                    datum.embedding.len(),
                    self.model.id,
                    self.model.dimension
                )));
            }
            let slot = out.get_mut(datum.index).ok_or_else(|| {
                EmbedError::Upstream(format!("the provider answered an embedding for input {}", datum.index))
            })?;
            if slot.is_some() {
                return Err(EmbedError::Upstream(format!(
                    "the provider answered input {} twice",
                    datum.index
                )));
            }
            let mut v = datum.embedding;
            // OpenAI's vectors are already unit length, but other servers' need not be.
            normalize(&mut v);
            *slot = Some(v);
        }
        // Every slot is filled: as many distinct in-range indices as slots.
        Ok(out.into_iter().flatten().collect())
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &EmbeddingModel {
        &self.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Empty texts are not sent (OpenAI refuses an empty input): they get zero vectors, as the
        // port asks.
        let mut out = vec![vec![0.0f32; self.model.dimension]; texts.len()];
        let wanted: Vec<usize> = (0..texts.len()).filter(|&i| !texts[i].trim().is_empty()).collect();
        for chunk in wanted.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.embed_batch(&batch).await?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
