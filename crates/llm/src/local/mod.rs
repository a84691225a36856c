//! A GGUF chat model run in process on llama.cpp's CPU kernels (SmolLM2-135M-Instruct by
//! default; any instruct model whose architecture llama.cpp knows: Llama 3.x, Qwen2.5, Phi-3…).
//!
//! What is ours: the prompt in the model's chat format ([`template`]), the choice of each token
//! ([`sampler`], the loop guard, end-of-turn stops, the token limit), constrained output
//! ([`tools`]) and the scheduling of concurrent chats ([`engine`]). llama.cpp reads the file
//! (mapped, not copied: the weights stay quantized) and computes the logits. Why llama.cpp and
//! not candle: `docs/dependencies.md`.
//!
//! Generation runs on one thread of its own that decodes up to `concurrency` chats together;
//! `queue` more wait, and beyond that a caller is told to come back ([`ModelError::Busy`]).

mod engine;
mod gate;
mod loop_guard;
mod sampler;
mod template;
mod tools;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use agentry_domain::agents::{
    ChatModel, ChatRole, ChatTurn, Completion, CompletionRequest, DeltaSink, FinishReason, ModelError,
    NoDeltas,
};
use anyhow::Context as _;
use async_trait::async_trait;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

use engine::{EngineSize, Event, Job};
use gate::Gate;
use sampler::SamplingSettings;
use template::{ChatFormat, Piece};
use tools::Reply;

/// How the in-process model is run.
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// Generations decoded together.
    pub concurrency: usize,
    /// Generations waiting for a turn; one more is refused with [`ModelError::Busy`].
    pub queue: usize,
    /// Longest a request may take, waiting included; generation stops there with what it has.
    pub timeout: Duration,
    /// Tokens of prompt and reply per generation.
    pub context: u32,
    /// The repetition penalty (`1.0`: none); see `docs/llm.md`.
    pub repeat_penalty: f32,
}

impl Default for LocalSettings {
    fn default() -> Self {
        Self {
            concurrency: 1,
            queue: 16,
            timeout: Duration::from_secs(300),
            context: DEFAULT_CONTEXT,
            repeat_penalty: sampler::DEFAULT_REPEAT_PENALTY,
        }
    }
}

/// The default context per generation: room for instructions, memories, knowledge sources and
/// a conversation's recent turns.
pub const DEFAULT_CONTEXT: u32 = 4096;

/// What is known of the loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// Its name ([`gguf_model_name`]).
    pub name: String,
    /// Its architecture (`general.architecture`: `llama`, `qwen2`, `phi3`…).
    pub architecture: String,
    /// Size of the file.
    pub file_bytes: u64,
    /// Whether its prompt follows its own chat template (`false`: ChatML).
    pub own_template: bool,
}

/// The model, loaded once and shared.
#[derive(Clone)]
pub struct LocalModel {
    inner: Arc<Loaded>,
    gate: Arc<Gate>,
    timeout: Duration,
}

struct Loaded {
    model: Arc<LlamaModel>,
    format: ChatFormat,
    info: ModelInfo,
    context: u32,
    repeat_penalty: f32,
    jobs: Mutex<std::sync::mpsc::Sender<Job>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("info", &self.inner.info).finish_non_exhaustive()
    }
}

/// llama.cpp's process-wide state, started once.
fn backend() -> anyhow::Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("starting llama.cpp: {e}"))
}

impl LocalModel {
    /// Loads the GGUF file at `path` and starts its decoding thread.
    ///
    /// # Errors
    /// When the file is missing or not a GGUF model llama.cpp can run, or the context does not
    /// fit in memory.
    pub fn load(path: &Path, settings: &LocalSettings) -> anyhow::Result<Self> {
        let file_bytes = std::fs::metadata(path)
            .with_context(|| format!("opening the language model {}", path.display()))?
            .len();
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .with_context(|| format!("{} is not a GGUF model llama.cpp can load", path.display()))?;
        let meta = |key: &str| model.meta_val_str(key).ok().filter(|v| !v.is_empty());
        let info = ModelInfo {
            name: gguf_model_name(path),
            architecture: meta("general.architecture").unwrap_or_else(|| "unknown".into()),
            file_bytes,
            own_template: false,
        };
        let vocab = model.vocab();
        let text_of =
            |t: LlamaToken| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
        let format = ChatFormat::new(
            meta("tokenizer.chat_template").as_deref(),
            &text_of(vocab.bos()),
            &text_of(vocab.eos()),
        );
        let info = ModelInfo { own_template: format.own, ..info };
        let model = Arc::new(model);
        let size = EngineSize {
            slots: u32::try_from(settings.concurrency.clamp(1, 64)).unwrap_or(1),
            context: settings.context.max(256),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get() as i32),
        };
        let (jobs, received) = std::sync::mpsc::channel::<Job>();
        let (started, ready) = std::sync::mpsc::channel::<Result<(), String>>();
        let shared = model.clone();
        std::thread::Builder::new().name("agentry-llm".into()).spawn(move || {
            engine::run(backend, &shared, size, &received, |r| {
                let _ = started.send(r);
            });
        })?;
        ready
            .recv()
            .context("the language model's thread ended while starting")?
            .map_err(anyhow::Error::msg)?;
        Ok(Self {
            inner: Arc::new(Loaded {
                model,
                format,
                info,
                context: size.context,
                repeat_penalty: settings.repeat_penalty,
                jobs: Mutex::new(jobs),
            }),
            gate: Arc::new(Gate::new(settings.concurrency.max(1), settings.queue)),
            timeout: settings.timeout,
        })
    }

    /// What is known of the model.
    pub fn info(&self) -> &ModelInfo {
        &self.inner.info
    }

    /// `text`'s token ids as the model's tokenizer reads it (control tokens' names included).
    pub fn tokenize(&self, text: &str) -> Vec<i32> {
        self.inner.model.vocab().tokenize(text.as_bytes(), false, true).into_iter().map(|t| t.0).collect()
    }

    /// The token ids of the prompt for `turns`, ending with the opening of the assistant's
    /// turn.
    ///
    /// # Errors
    /// When the model's chat template fails on these turns.
    pub fn prompt_tokens(&self, turns: &[ChatTurn]) -> anyhow::Result<Vec<i32>> {
        self.prompt(&tools::template_turns(turns))
    }

    fn prompt(&self, turns: &[template::TemplateTurn]) -> anyhow::Result<Vec<i32>> {
        let pieces = self.inner.format.render(turns).context("rendering the chat template")?;
        let vocab = self.inner.model.vocab();
        let mut ids: Vec<i32> = Vec::new();
        let bos = vocab.bos();
        let starts_with_bos = matches!(pieces.first(), Some(Piece::Format(f))
            if !f.is_empty() && vocab.tokenize(f.as_bytes(), false, true).first() == Some(&bos));
        if vocab.should_add_bos() && !starts_with_bos {
            ids.push(bos.0);
        }
        for piece in &pieces {
            let (text, special) = match piece {
                Piece::Format(text) => (text, true),
                Piece::Text(text) => (text, false),
            };
            ids.extend(vocab.tokenize(text.as_bytes(), false, special).into_iter().map(|t| t.0));
        }
        Ok(ids)
    }

    /// The prompt of `turns` fitted to the context with a reply of `max_tokens`: the oldest
    /// turns give way, but not the first (the instructions) when it is short.
    fn fitted(&self, turns: &[template::TemplateTurn], max_tokens: usize) -> anyhow::Result<Vec<i32>> {
        let prompt = self.prompt(turns)?;
        let head = self.prompt(&turns[..turns.len().min(1)]).map_or(0, |p| p.len());
        Ok(self.fit(prompt, max_tokens, head))
    }

    /// Runs one generation to its end, its text going to `reply`.
    async fn generate(&self, run: Generation, reply: &mut Reply) -> Result<(FinishReason, u64), ModelError> {
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let cancelled = run.cancelled.clone();
        let job = Job {
            prompt: run.prompt,
            sampling: run.sampling,
            grammar: run.grammar,
            max_tokens: run.max_tokens,
            deadline: run.deadline,
            cancelled: run.cancelled,
            events,
        };
        self.inner
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(job)
            .map_err(|_| ModelError::Upstream("the language model's thread has stopped".into()))?;
        loop {
            match received.recv().await {
                Some(Event::Piece(piece)) => {
                    if !reply.push(&piece) {
                        cancelled.store(true, Ordering::Relaxed);
                    }
                }
                Some(Event::Ended { finish, generated, looped }) => {
                    if looped {
                        tracing::info!(generated, "the reply repeated itself; stopped");
                    }
                    return Ok((finish, generated as u64));
                }
                Some(Event::Failed(message)) => return Err(ModelError::Upstream(message)),
                None => return Err(ModelError::Upstream("the language model's thread failed".into())),
            }
        }
    }

    /// Cuts the oldest turns of a prompt too long for the context with a reply of
    /// `max_tokens`, keeping its beginning (the instructions) when that is short.
    fn fit(&self, mut prompt: Vec<i32>, max_tokens: usize, head: usize) -> Vec<i32> {
        let room = self.inner.context as usize - max_tokens;
        if prompt.len() > room {
            let keep_head = if head < room / 2 { head } else { 0 };
            let cut = prompt.len() - room;
            prompt.drain(keep_head..keep_head + cut);
        }
        prompt
    }
}

/// A seed for sampling at a temperature: varies per call, as a sampled answer should.
fn seed() -> u64 {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ (CALLS.fetch_add(1, Ordering::Relaxed) as u64).rotate_left(32)
}

/// Sets the flag when the request's future is dropped, so the generation stops.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[async_trait]
impl ChatModel for LocalModel {
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ModelError> {
        self.stream(request, Arc::new(NoDeltas)).await
    }

    async fn stream(
        &self,
        request: &CompletionRequest,
        sink: Arc<dyn DeltaSink>,
    ) -> Result<Completion, ModelError> {
        let deadline = Instant::now() + self.timeout;
        let failed = |e: anyhow::Error| ModelError::Upstream(format!("{e:#}"));
        let max_tokens = (request.max_tokens as usize).clamp(1, self.inner.context as usize / 2);
        let _permit = self.gate.enter(deadline).await?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancelled.clone());
        let mut sampling = SamplingSettings::new(request.temperature, seed());
        sampling.repeat_penalty = self.inner.repeat_penalty;
        let mut done = Completion {
            content: String::new(),
            prompt_tokens: 0,
            completion_tokens: 0,
            finish: FinishReason::Stop,
            tool_calls: Vec::new(),
        };
        // With tools, the model decides first; after a tool's result it answers (a small model
        // asked again calls the same tool again).
        let answered_tool = request.messages.last().is_some_and(|t| t.role == ChatRole::Tool);
        if !request.tools.is_empty() && !answered_tool {
            let turns = tools::decision_turns(&request.messages, &request.tools);
            let prompt = self.fitted(&turns, DECISION_TOKENS).map_err(failed)?;
            done.prompt_tokens += prompt.len() as u64;
            let mut decision = Reply::new(Arc::new(NoDeltas));
            let run = Generation {
                prompt,
                sampling: SamplingSettings::new(None, 0),
                grammar: Some(tools::decision_grammar(&request.tools).map_err(failed)?),
                max_tokens: DECISION_TOKENS,
                deadline,
                cancelled: cancelled.clone(),
            };
            let (finish, generated) = self.generate(run, &mut decision).await?;
            done.completion_tokens += generated;
            if finish == FinishReason::Cancelled {
                done.finish = finish;
                return Ok(done);
            }
            done.tool_calls = tools::parse_decision(&decision.text);
            if !done.tool_calls.is_empty() {
                done.finish = FinishReason::ToolCalls;
                return Ok(done);
            }
        }
        let grammar =
            request.response_schema.as_ref().map(tools::schema_grammar).transpose().map_err(failed)?;
        let prompt = self.fitted(&tools::template_turns(&request.messages), max_tokens).map_err(failed)?;
        done.prompt_tokens += prompt.len() as u64;
        let mut reply = Reply::new(sink);
        let run = Generation { prompt, sampling, grammar, max_tokens, deadline, cancelled };
        let (finish, generated) = self.generate(run, &mut reply).await?;
        done.completion_tokens += generated;
        done.finish = finish;
        done.content = reply.into_text(finish);
        Ok(done)
    }
}

/// The most tokens of a decision to call tools: a few calls with short arguments.
const DECISION_TOKENS: usize = 256;

/// One generation's inputs.
struct Generation {
    prompt: Vec<i32>,
    sampling: SamplingSettings,
    grammar: Option<String>,
    max_tokens: usize,
    deadline: Instant,
    cancelled: Arc<AtomicBool>,
}

/// The name agents and `/readyz` give the model in the GGUF file at `path`: the file's name
/// without its quantisation suffix, lowercase (`SmolLM2-135M-Instruct.Q4_1.gguf` is
/// `smollm2-135m-instruct`, `qwen2.5-0.5b-instruct-q4_k_m.gguf` is `qwen2.5-0.5b-instruct`).
/// The file's `general.name` is often a training run's name, so it is not used.
pub fn gguf_model_name(path: &Path) -> String {
    let stem = path.file_stem().map_or_else(|| "local".into(), |s| s.to_string_lossy().to_lowercase());
    let is_quantisation = |part: &str| {
        let mut chars = part.chars();
        matches!(chars.next(), Some('q' | 'f' | 'i' | 'b'))
            && chars.next().is_some_and(|c| c.is_ascii_digit())
    };
    let name = match stem.rfind(['.', '-']) {
        Some(at) if at > 0 && is_quantisation(&stem[at + 1..]) => &stem[..at],
        _ => stem.as_str(),
    };
    name.to_owned()
}
