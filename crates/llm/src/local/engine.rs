//! The decoding thread: one llama.cpp context whose key-value cache holds a sequence per
//! running generation, so that concurrent chats decode together, one token each per pass over
//! the weights (batched decoding), instead of one after the other.
//!
//! A generation joins when a slot is free: its prompt is read in batches of up to
//! [`PROMPT_BATCH`] tokens, then it takes part in every following pass until it stops. Every
//! choice of a token is ours ([`Sampler`], [`ends_in_loop`], the grammar's mask); llama.cpp
//! computes the logits.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;

use agentry_domain::agents::FinishReason;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use super::loop_guard::ends_in_loop;
use super::sampler::{Sampler, SamplingSettings};

/// The most prompt tokens read in one pass.
pub const PROMPT_BATCH: usize = 512;

/// One generation, as the async side hands it over.
pub struct Job {
    /// The prompt's token ids.
    pub prompt: Vec<i32>,
    /// How tokens are chosen.
    pub sampling: SamplingSettings,
    /// A GBNF grammar the reply must follow (constrained output), if any.
    pub grammar: Option<String>,
    /// Most tokens generated.
    pub max_tokens: usize,
    /// When it stops with what it has.
    pub deadline: Instant,
    /// Set when nobody waits for the reply any more.
    pub cancelled: Arc<AtomicBool>,
    /// Where its text goes as it grows, then how it ended.
    pub events: tokio::sync::mpsc::UnboundedSender<Event>,
}

/// What a generation reports.
#[derive(Debug)]
pub enum Event {
    /// The next piece of the reply's text (whole characters only).
    Piece(String),
    /// It stopped: why, and how many tokens it generated.
    Ended { finish: FinishReason, generated: usize, looped: bool },
    /// The engine failed it.
    Failed(String),
}

/// How the context is sized.
#[derive(Debug, Clone, Copy)]
pub struct EngineSize {
    /// Sequences decoded together.
    pub slots: u32,
    /// Tokens of prompt and reply per sequence.
    pub context: u32,
    /// CPU threads.
    pub threads: i32,
}

/// Runs generations from `jobs` until the sender is dropped.
///
/// # Errors
/// When the context cannot be created (too little memory for the cache).
pub fn run(
    backend: &LlamaBackend,
    model: &LlamaModel,
    size: EngineSize,
    jobs: &Receiver<Job>,
    ready: impl FnOnce(Result<(), String>),
) {
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(size.context * size.slots))
        .with_n_seq_max(size.slots)
        .with_n_batch(PROMPT_BATCH as u32)
        .with_n_ubatch(PROMPT_BATCH as u32)
        .with_n_threads(size.threads)
        .with_n_threads_batch(size.threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => return ready(Err(format!("creating the model's context: {e}"))),
    };
    ready(Ok(()));
    let mut engine = Engine { model, size, free: (0..size.slots as i32).rev().collect(), active: Vec::new() };
    loop {
        if !engine.admit(&mut ctx, jobs) {
            return;
        }
        engine.pass(&mut ctx);
    }
}

struct Engine<'m> {
    model: &'m LlamaModel,
    size: EngineSize,
    free: Vec<i32>,
    active: Vec<Running>,
}

/// A generation in the cache.
struct Running {
    seq: i32,
    job: Job,
    sampler: Sampler,
    grammar: Option<LlamaSampler>,
    /// The position of the next token in its sequence.
    pos: i32,
    /// Prompt and reply: what the repetition penalty looks at.
    context: Vec<i32>,
    generated: Vec<i32>,
    /// The reply's bytes; those up to `sent` have been handed over.
    bytes: Vec<u8>,
    sent: usize,
    /// The token to feed in the next pass.
    next: i32,
}

impl Engine<'_> {
    /// Takes new jobs while slots are free (waiting for one when nothing runs). `false` when
    /// the engine is to stop.
    fn admit(&mut self, ctx: &mut LlamaContext<'_>, jobs: &Receiver<Job>) -> bool {
        while let Some(&seq) = self.free.last() {
            let job = if self.active.is_empty() {
                match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => return false,
                }
            } else {
                match jobs.try_recv() {
                    Ok(job) => job,
                    Err(TryRecvError::Empty) => return true,
                    Err(TryRecvError::Disconnected) => return true,
                }
            };
            self.free.pop();
            self.start(ctx, seq, job);
        }
        true
    }

    /// Reads a job's prompt into sequence `seq` and chooses its first token.
    fn start(&mut self, ctx: &mut LlamaContext<'_>, seq: i32, job: Job) {
        let grammar = match &job.grammar {
            Some(gbnf) => match LlamaSampler::grammar(self.model, gbnf, "root") {
                Ok(g) => Some(g),
                Err(e) => {
                    let _ = job.events.send(Event::Failed(format!("the output grammar is invalid: {e}")));
                    self.free.push(seq);
                    return;
                }
            },
            None => None,
        };
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        let last = job.prompt.len().saturating_sub(1);
        let mut index = 0;
        for (start, chunk) in job.prompt.chunks(PROMPT_BATCH).enumerate() {
            batch.clear();
            for (i, &token) in chunk.iter().enumerate() {
                let pos = start * PROMPT_BATCH + i;
                if batch.add(LlamaToken(token), pos as i32, &[seq], pos == last).is_err() {
                    unreachable!("a chunk fits its batch");
                }
            }
            index = chunk.len() as i32 - 1;
            if let Err(e) = ctx.decode(&mut batch) {
                let _ = job.events.send(Event::Failed(format!("reading the prompt: {e}")));
                self.release(ctx, seq);
                return;
            }
        }
        let mut running = Running {
            seq,
            sampler: Sampler::new(job.sampling.clone()),
            grammar,
            pos: job.prompt.len() as i32,
            context: job.prompt.clone(),
            generated: Vec::new(),
            bytes: Vec::new(),
            sent: 0,
            next: 0,
            job,
        };
        match self.step(ctx, &mut running, index) {
            Some(ended) => self.finish(ctx, running, ended),
            None => self.active.push(running),
        }
    }

    /// One pass: every running sequence's next token together, then each one's choice.
    fn pass(&mut self, ctx: &mut LlamaContext<'_>) {
        if self.active.is_empty() {
            return;
        }
        let mut batch = LlamaBatch::new(self.active.len(), 1);
        for r in &self.active {
            if batch.add(LlamaToken(r.next), r.pos - 1, &[r.seq], true).is_err() {
                unreachable!("the batch holds one token per sequence");
            }
        }
        if let Err(e) = ctx.decode(&mut batch) {
            for r in std::mem::take(&mut self.active) {
                let _ = r.job.events.send(Event::Failed(format!("decoding: {e}")));
                self.release(ctx, r.seq);
            }
            return;
        }
        let running = std::mem::take(&mut self.active);
        for (i, mut r) in running.into_iter().enumerate() {
            match self.step(ctx, &mut r, i as i32) {
                Some(ended) => self.finish(ctx, r, ended),
                None => self.active.push(r),
            }
        }
    }

    /// Chooses `r`'s next token from the logits at `index` of the last pass. `Some` when the
    /// generation ends (the token chosen is then not part of it).
    fn step(&self, ctx: &LlamaContext<'_>, r: &mut Running, index: i32) -> Option<Ended> {
        if r.job.cancelled.load(Ordering::Relaxed) {
            return Some(Ended::new(FinishReason::Cancelled));
        }
        if Instant::now() >= r.job.deadline {
            return Some(Ended::new(FinishReason::Length));
        }
        let mut logits = ctx.get_logits_ith(index).to_vec();
        r.sampler.penalise(&mut logits, &r.context);
        let token = match &mut r.grammar {
            None => {
                let candidates: Vec<(i32, f32)> =
                    logits.iter().enumerate().map(|(t, &l)| (t as i32, l)).collect();
                r.sampler.choose(&candidates)
            }
            Some(grammar) => choose_in_grammar(&mut r.sampler, grammar, &logits),
        };
        let Some(token) = token else {
            return Some(Ended::new(FinishReason::Stop));
        };
        if self.model.vocab().is_eog(LlamaToken(token)) {
            return Some(Ended::new(FinishReason::Stop));
        }
        if let Some(grammar) = &mut r.grammar {
            grammar.accept(LlamaToken(token));
        }
        r.generated.push(token);
        r.context.push(token);
        r.bytes.extend(self.model.vocab().token_to_piece(LlamaToken(token), false, None));
        let whole = complete_prefix(&r.bytes[r.sent..]);
        if whole > 0 {
            let piece = String::from_utf8_lossy(&r.bytes[r.sent..r.sent + whole]).into_owned();
            r.sent += whole;
            if r.job.events.send(Event::Piece(piece)).is_err() {
                return Some(Ended::new(FinishReason::Cancelled));
            }
        }
        if r.generated.len() >= r.job.max_tokens || r.pos as u32 + 1 >= self.size.context {
            return Some(Ended::new(FinishReason::Length));
        }
        if ends_in_loop(&r.generated) {
            return Some(Ended { finish: FinishReason::Stop, looped: true });
        }
        r.next = token;
        r.pos += 1;
        None
    }

    fn finish(&mut self, ctx: &mut LlamaContext<'_>, r: Running, ended: Ended) {
        // A last partial character that no further token completes is dropped.
        let _ = r.job.events.send(Event::Ended {
            finish: ended.finish,
            generated: r.generated.len(),
            looped: ended.looped,
        });
        self.release(ctx, r.seq);
    }

    fn release(&mut self, ctx: &mut LlamaContext<'_>, seq: i32) {
        let _ = ctx.clear_kv_cache_seq(u32::try_from(seq).ok(), None, None);
        self.free.push(seq);
    }
}

struct Ended {
    finish: FinishReason,
    looped: bool,
}

impl Ended {
    fn new(finish: FinishReason) -> Self {
        Self { finish, looped: false }
    }
}

/// The choice under a grammar: the sampler's choice if the grammar allows it (the common case,
/// one check), else its choice among the tokens the grammar allows (a pass over the vocabulary).
fn choose_in_grammar(sampler: &mut Sampler, grammar: &mut LlamaSampler, logits: &[f32]) -> Option<i32> {
    let candidates: Vec<(i32, f32)> = logits.iter().enumerate().map(|(t, &l)| (t as i32, l)).collect();
    let mut trial = sampler.clone();
    let first = trial.choose(&candidates)?;
    let mut one = LlamaTokenDataArray::new(
        vec![LlamaTokenData::new(LlamaToken(first), logits[first as usize], 0.0)],
        false,
    );
    grammar.apply(&mut one);
    if one.data.first().is_some_and(|d| d.logit().is_finite()) {
        *sampler = trial;
        return Some(first);
    }
    // The grammar's check costs per token checked: the likeliest tokens first (for greedy
    // decoding the result is the same; a draw is then from the allowed ones among them).
    let mut ranked = candidates;
    let top = GRAMMAR_TOP.min(ranked.len());
    if top > 0 && top < ranked.len() {
        ranked.select_nth_unstable_by(top - 1, |a, b| b.1.total_cmp(&a.1));
    }
    let allowed = allowed_by(grammar, &ranked[..top]);
    if !allowed.is_empty() {
        return sampler.choose(&allowed);
    }
    sampler.choose(&allowed_by(grammar, &ranked))
}

/// How many of the likeliest tokens the grammar checks before it checks the whole vocabulary.
const GRAMMAR_TOP: usize = 64;

/// Those of `candidates` that `grammar` allows next.
fn allowed_by(grammar: &mut LlamaSampler, candidates: &[(i32, f32)]) -> Vec<(i32, f32)> {
    let mut array = LlamaTokenDataArray::new(
        candidates.iter().map(|&(t, l)| LlamaTokenData::new(LlamaToken(t), l, 0.0)).collect(),
        false,
    );
    grammar.apply(&mut array);
    array.data.iter().filter(|d| d.logit().is_finite()).map(|d| (d.id().0, d.logit())).collect()
}

/// How many of `bytes` form whole UTF-8 characters (invalid bytes count: they are shown as
/// replacement characters rather than held back for ever).
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::complete_prefix;

    #[test]
    fn a_character_cut_by_a_token_waits_for_its_end() {
        let e_acute = "é".as_bytes();
        assert_eq!(complete_prefix(b"caf"), 3);
        assert_eq!(complete_prefix(&[b'c', e_acute[0]]), 1);
        assert_eq!(complete_prefix(&[0xFF, b'a']), 2);
    }
}
