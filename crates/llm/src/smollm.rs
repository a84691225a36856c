//! SmolLM2-135M-Instruct, a real (small) language model run in process from its Q4_1 GGUF
//! file with candle's quantized Llama.
//!
//! Everything the model needs is in the one file: the weights, and the tokenizer as metadata
//! (`tokenizer.ggml.tokens` and `merges`, a byte-level BPE). The ChatML markers that frame the
//! turns (`<|im_start|>`, `<|im_end|>`) are single tokens of the vocabulary that the BPE would
//! never produce from text, so the prompt is assembled as token ids, not as a string.
//!
//! Generation is CPU work measured in seconds: it runs on the blocking pool, at most
//! `concurrency` at once with `queue` more waiting; beyond that a caller is told to come back
//! ([`ModelError::Busy`]) rather than queued without bound.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentry_domain::agents::{
    ChatModel, ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, ModelError,
    NoDeltas,
};
use anyhow::Context as _;
use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};
use tokenizers::Tokenizer;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokio::sync::Semaphore;

/// How the in-process model is run.
#[derive(Debug, Clone)]
pub struct SmolLmSettings {
    /// Generations running at once.
    pub concurrency: usize,
    /// Generations waiting for a turn; one more is refused with [`ModelError::Busy`].
    pub queue: usize,
    /// Longest a request may take, waiting included; generation stops there with what it has.
    pub timeout: Duration,
}

/// Tokens of the recent context a repeated token is penalised over, and by how much: the small
/// model otherwise loops on a phrase under greedy decoding (the values of candle's examples).
const REPEAT_WINDOW: usize = 64;
const REPEAT_PENALTY: f32 = 1.1;

/// The language model, loaded once and shared: each generation clones the weights' handles
/// (the tensors are reference-counted) with an empty key-value cache of its own.
#[derive(Clone)]
pub struct SmolLmModel {
    inner: Arc<Loaded>,
    gate: Arc<Gate>,
    timeout: Duration,
}

struct Loaded {
    weights: ModelWeights,
    tokenizer: Tokenizer,
    im_start: u32,
    im_end: u32,
    eos: u32,
    /// Bytes of the weights as held in memory (f32), all read once per generated token.
    weight_bytes: u64,
}

impl std::fmt::Debug for SmolLmModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmolLmModel").finish_non_exhaustive()
    }
}

impl SmolLmModel {
    /// Loads the GGUF file at `path`.
    ///
    /// # Errors
    /// When the file is missing, is not a GGUF Llama, or lacks its tokenizer.
    pub fn load(path: &Path, settings: &SmolLmSettings) -> anyhow::Result<Self> {
        let mut file = std::fs::File::open(path)
            .with_context(|| format!("opening the language model {}", path.display()))?;
        let content = gguf_file::Content::read(&mut file)
            .with_context(|| format!("{} is not a GGUF file", path.display()))?;
        let tokenizer = gguf_tokenizer(&content.metadata)?;
        let token = |name: &str| {
            tokenizer.token_to_id(name).with_context(|| format!("the model's vocabulary has no {name}"))
        };
        let (im_start, im_end) = (token("<|im_start|>")?, token("<|im_end|>")?);
        let eos = match content.metadata.get("tokenizer.ggml.eos_token_id") {
            Some(v) => v.to_u32()?,
            None => im_end,
        };
        let weight_bytes = content.tensor_infos.values().map(|t| t.shape.elem_count() as u64 * 4).sum();
        let mut unpacked = std::io::Cursor::new(
            dequantized(&content, &mut file)
                .with_context(|| format!("unpacking the weights of {}", path.display()))?,
        );
        let content = gguf_file::Content::read(&mut unpacked)?;
        let weights = ModelWeights::from_gguf(content, &mut unpacked, &Device::Cpu)
            .with_context(|| format!("loading the weights of {}", path.display()))?;
        Ok(Self {
            inner: Arc::new(Loaded { weights, tokenizer, im_start, im_end, eos, weight_bytes }),
            gate: Arc::new(Gate {
                running: Semaphore::new(settings.concurrency.max(1)),
                waiting: AtomicUsize::new(0),
                queue: settings.queue,
            }),
            timeout: settings.timeout,
        })
    }

    /// Bytes of the weights as held in memory (unpacked to f32): what generating one token
    /// reads.
    pub fn weight_bytes(&self) -> u64 {
        self.inner.weight_bytes
    }

    /// The token ids of a ChatML prompt ending with the opening of the assistant's turn.
    ///
    /// # Errors
    /// When the tokenizer fails (it does not on text).
    pub fn prompt_tokens(&self, turns: &[ChatTurn]) -> anyhow::Result<Vec<u32>> {
        let m = &self.inner;
        let mut ids = Vec::new();
        for turn in turns {
            ids.push(m.im_start);
            ids.extend(m.encode(&format!("{}\n{}", turn.role.as_str(), turn.content))?);
            ids.push(m.im_end);
            ids.extend(m.encode("\n")?);
        }
        ids.push(m.im_start);
        ids.extend(m.encode(&format!("{}\n", ChatRole::Assistant.as_str()))?);
        Ok(ids)
    }
}

impl Loaded {
    fn encode(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        Ok(self.tokenizer.encode(text, false).map_err(anyhow::Error::msg)?.get_ids().to_vec())
    }

    fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.tokenizer
            .decode(ids, false)
            .map_err(|e| ModelError::Upstream(format!("decoding the reply: {e}")))
    }

    /// Generates a reply to `prompt` on the calling thread, handing it to `sink` as it grows.
    fn generate(&self, job: &Generation, sink: &dyn DeltaSink) -> Result<Completion, ModelError> {
        let failed = |e: candle_core::Error| ModelError::Upstream(format!("the language model failed: {e}"));
        let mut model = self.weights.clone();
        let prompt = &job.prompt;
        let mut logits = model
            .forward(
                &Tensor::new(prompt.as_slice(), &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(failed)?,
                0,
            )
            .and_then(|l| l.squeeze(0))
            .map_err(failed)?;
        let mut sampler = LogitsProcessor::new(job.seed, job.temperature, None);
        let mut context: Vec<u32> = prompt.clone();
        let mut generated: Vec<u32> = Vec::new();
        let mut sent = 0; // bytes of the decoded reply handed to the sink
        let mut text = String::new();
        let finish = loop {
            let start = context.len().saturating_sub(REPEAT_WINDOW);
            let penalised =
                candle_transformers::utils::apply_repeat_penalty(&logits, REPEAT_PENALTY, &context[start..])
                    .map_err(failed)?;
            let next = sampler.sample(&penalised).map_err(failed)?;
            if next == self.im_end || next == self.eos {
                break FinishReason::Stop;
            }
            generated.push(next);
            context.push(next);
            text = self.decode(&generated)?;
            // A token can end inside a character: hand over only what decodes whole.
            if !text.ends_with('\u{FFFD}') && text.len() > sent {
                if !sink.delta(&text[sent..]) {
                    sent = text.len();
                    break FinishReason::Cancelled;
                }
                sent = text.len();
            }
            if job.cancelled.load(Ordering::Relaxed) {
                break FinishReason::Cancelled;
            }
            if generated.len() >= job.max_tokens
                || context.len() >= MAX_SEQ_LEN
                || Instant::now() >= job.deadline
            {
                break FinishReason::Length;
            }
            let input = Tensor::new(&[next], &Device::Cpu).and_then(|t| t.unsqueeze(0)).map_err(failed)?;
            logits = model.forward(&input, context.len() - 1).and_then(|l| l.squeeze(0)).map_err(failed)?;
        };
        // A cancelled reply is what its listener received; a finished one is handed over to
        // its end (a last partial character, which no further token completes, is dropped).
        if finish != FinishReason::Cancelled {
            text.truncate(text.trim_end_matches('\u{FFFD}').len());
            if text.len() > sent {
                sink.delta(&text[sent..]);
                sent = text.len();
            }
        }
        text.truncate(sent);
        Ok(Completion {
            content: text,
            prompt_tokens: prompt.len() as u64,
            completion_tokens: generated.len() as u64,
            finish,
            tool_calls: Vec::new(),
        })
    }
}

/// One generation's inputs, moved to the blocking thread.
struct Generation {
    prompt: Vec<u32>,
    max_tokens: usize,
    temperature: Option<f64>,
    seed: u64,
    deadline: Instant,
    /// Set when the request is dropped (an unstreamed client that left): stop generating.
    cancelled: Arc<AtomicBool>,
}

/// Sets the flag when the request's future is dropped, so the blocking generation stops.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// At most `running` generations at once and `queue` waiting.
struct Gate {
    running: Semaphore,
    waiting: AtomicUsize,
    queue: usize,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    async fn enter(&self, deadline: Instant) -> Result<tokio::sync::SemaphorePermit<'_>, ModelError> {
        if let Ok(permit) = self.running.try_acquire() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(ModelError::Busy { retry_after_secs: 2 });
        }
        let _waiting = Waiting(&self.waiting);
        match tokio::time::timeout_at(deadline.into(), self.running.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ModelError::Upstream("the language model is shut down".into())),
            Err(_elapsed) => Err(ModelError::Timeout),
        }
    }
}

/// A seed for sampling at a temperature: varies per call, as a sampled answer should.
fn seed() -> u64 {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ (CALLS.fetch_add(1, Ordering::Relaxed) as u64).rotate_left(32)
}

#[async_trait]
impl ChatModel for SmolLmModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        self.stream(request, Arc::new(NoDeltas)).await
    }

    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let deadline = Instant::now() + self.timeout;
        let mut prompt =
            self.prompt_tokens(&request.messages).map_err(|e| ModelError::Upstream(format!("{e:#}")))?;
        // The model's context holds prompt and reply: the oldest of the prompt gives way, but
        // never the first turn's instructions... unless they alone overflow it.
        let max_tokens = (request.max_tokens as usize).clamp(1, MAX_SEQ_LEN / 2);
        let room = MAX_SEQ_LEN - max_tokens;
        if prompt.len() > room {
            let first_turn = prompt.iter().position(|&t| t == self.inner.im_end).map_or(0, |i| i + 1);
            let keep_head = if first_turn < room / 2 { first_turn } else { 0 };
            let cut = prompt.len() - room;
            prompt.drain(keep_head..keep_head + cut);
        }
        let _permit = self.gate.enter(deadline).await?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancelled.clone());
        let job = Generation {
            prompt,
            max_tokens,
            temperature: request.temperature.filter(|t| *t > 0.0),
            seed: seed(),
            deadline,
            cancelled,
        };
        // The sink lives on this task; the blocking thread hands pieces over a channel, so a
        // sink need not outlive the request (`spawn_blocking` wants 'static).
        let (pieces, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
        let listening = Arc::new(AtomicBool::new(true));
        // What the request's sink took: a cancelled reply is that, not what the generation
        // produced after the sink stopped listening (its tokens are still counted: they ran).
        let mut delivered = String::new();
        let mut hand_over = |piece: &str| {
            if listening.load(Ordering::Relaxed) {
                delivered.push_str(piece);
                if !sink.delta(piece) {
                    listening.store(false, Ordering::Relaxed);
                }
            }
        };
        let relay = Relay { pieces, listening: listening.clone() };
        let model = self.inner.clone();
        let mut running = tokio::task::spawn_blocking(move || model.generate(&job, &relay));
        let result = loop {
            tokio::select! {
                piece = received.recv() => match piece {
                    Some(piece) => hand_over(&piece),
                    // The relay is dropped when the generation ends: its result is next.
                    None => break (&mut running).await,
                },
                done = &mut running => {
                    // Pieces sent before the end are still in the channel.
                    while let Ok(piece) = received.try_recv() {
                        hand_over(&piece);
                    }
                    break done;
                }
            }
        };
        let mut completion = result
            .map_err(|e| ModelError::Upstream(format!("the language model's thread failed: {e}")))??;
        if completion.finish == FinishReason::Cancelled {
            completion.content = delivered;
        }
        Ok(completion)
    }
}

/// The blocking thread's sink: forwards pieces to the request's task and reports whether the
/// request's own sink still listens.
struct Relay {
    pieces: tokio::sync::mpsc::UnboundedSender<String>,
    listening: Arc<AtomicBool>,
}

impl DeltaSink for Relay {
    fn delta(&self, text: &str) -> bool {
        self.listening.load(Ordering::Relaxed) && self.pieces.send(text.to_owned()).is_ok()
    }
}

/// The model file with every weight unpacked from 4 bits to f32 (98 MB become 540 MB in
/// memory). candle's 4-bit matrix product takes a prompt's rows one at a time, so a 45-token
/// prompt cost as much as 45 generated tokens (2.6–3.0 s here); over f32 weights the prompt is
/// one matrix multiplication per layer (213 ms), and generation is no slower (14.6 against 13.5
/// tokens/s: on two cores the 4-bit dot products were compute-bound). See
/// docs/performance.md.
fn dequantized(content: &gguf_file::Content, file: &mut std::fs::File) -> anyhow::Result<Vec<u8>> {
    use candle_core::quantized::{GgmlDType, QTensor};
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(content.tensor_infos.len());
    for name in content.tensor_infos.keys() {
        let packed = content.tensor(file, name, &Device::Cpu)?;
        let unpacked = packed.dequantize(&Device::Cpu)?;
        tensors.push((name.as_str(), QTensor::quantize(&unpacked, GgmlDType::F32)?));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> =
        content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &tensors)?;
    Ok(out.into_inner())
}

/// The byte-level BPE tokenizer the GGUF file carries as metadata.
fn gguf_tokenizer(
    metadata: &std::collections::HashMap<String, gguf_file::Value>,
) -> anyhow::Result<Tokenizer> {
    let list = |key: &str| -> anyhow::Result<Vec<String>> {
        let values = metadata.get(key).with_context(|| format!("the model file has no {key}"))?.to_vec()?;
        values.iter().map(|v| Ok(v.to_string()?.clone())).collect()
    };
    let vocab: Vocab = list("tokenizer.ggml.tokens")?
        .into_iter()
        .enumerate()
        .map(|(id, token)| Ok((token, u32::try_from(id)?)))
        .collect::<anyhow::Result<_>>()?;
    let merges = list("tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).context("a merge without a space")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(anyhow::Error::msg)?;
    let mut tokenizer = Tokenizer::new(bpe);
    // As SmolLM2's own tokenizer: digits one by one, then GPT-2's byte-level split.
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::default().add_prefix_space(false)),
    ])));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    Ok(tokenizer)
}
