//! Sources and citations: passages of an agent's knowledge bases put before its model, numbered,
//! and the citations of a reply, the sources its text refers to as `[1]`.
//!
//! A chat numbers its sources once, from 1, whether they came before the first model call
//! (`auto` retrieval) or from a `knowledge_search` tool call on the way (each call's results
//! are renumbered after those before them), so `[n]` names one passage in the whole reply.

use serde_json::Value;

use super::chat::{ChatRole, ChatTurn};
pub use super::citation::{Citation, SNIPPET_CHARS, Source};
use crate::tokens::TokenCounter;

/// The first line of the turn that gives a model its sources. The built-in responder finds its
/// sources by it.
pub const SOURCES_HEADER: &str = "Sources from your knowledge bases. Answer from them when they bear on the question, and cite \
     each source you use by its number in brackets, as [1]:";

/// How one source is written in the prompt.
fn entry(source: &Source) -> String {
    format!("[{}] {}:\n{}", source.index, source.place(), source.text.trim())
}

/// The best of `found` (in rank order) that fit in `max_tokens` tokens of the prompt, numbered
/// from `first`. A source that does not fit is left out and smaller ones after it may still go
/// in; the first one is cut to the budget rather than leaving the model with nothing.
pub fn fit_sources(
    found: Vec<Source>,
    counter: &dyn TokenCounter,
    max_tokens: u64,
    first: u32,
) -> Vec<Source> {
    let mut used = counter.count(SOURCES_HEADER);
    let mut kept: Vec<Source> = Vec::new();
    for mut source in found {
        source.index = first + u32::try_from(kept.len()).unwrap_or(u32::MAX - first);
        let cost = counter.count(&entry(&source)) + 1;
        if used + cost <= max_tokens {
            used += cost;
            kept.push(source);
        } else if kept.is_empty() {
            // Cut by characters in proportion to what is left (tokens are ~4 characters).
            let room = max_tokens.saturating_sub(used + counter.count(&source.place()) + 8);
            let chars = usize::try_from(room.saturating_mul(3)).unwrap_or(usize::MAX);
            if chars < 40 {
                continue;
            }
            source.text = source.text.chars().take(chars).collect();
            used += counter.count(&entry(&source)) + 1;
            kept.push(source);
        }
    }
    kept
}

/// The turn that gives the model `sources`; none without sources.
pub fn sources_turn(sources: &[Source]) -> Option<ChatTurn> {
    if sources.is_empty() {
        return None;
    }
    let listed: Vec<String> = sources.iter().map(entry).collect();
    Some(ChatTurn::new(ChatRole::System, format!("{SOURCES_HEADER}\n\n{}", listed.join("\n\n"))))
}

/// `turns` with the sources' turn after the leading system turns (the instructions and what the
/// agent remembers), before the conversation.
pub fn with_sources(mut turns: Vec<ChatTurn>, sources: &[Source]) -> Vec<ChatTurn> {
    if let Some(turn) = sources_turn(sources) {
        let at = turns.iter().position(|t| t.role != ChatRole::System).unwrap_or(turns.len());
        turns.insert(at, turn);
    }
    turns
}

/// The numbers `text` refers to in brackets: `[2]`, `[1, 3]`, `[1][2]`, in the order first
/// written, each once.
fn markers(text: &str) -> Vec<u32> {
    let mut found: Vec<u32> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find(']') else { break };
        let inside = &rest[..close];
        let numbers: Option<Vec<u32>> = inside
            .split(',')
            .map(|n| {
                let n = n.trim();
                if n.is_empty() || n.len() > 4 { None } else { n.parse::<u32>().ok() }
            })
            .collect();
        if let Some(numbers) = numbers {
            for n in numbers {
                if !found.contains(&n) {
                    found.push(n);
                }
            }
            rest = &rest[close + 1..];
        }
    }
    found
}

/// The citations of `reply`: the sources it refers to by number, in the order it first does.
/// A number no source has is not a citation.
pub fn citations(reply: &str, sources: &[Source]) -> Vec<Citation> {
    markers(reply)
        .into_iter()
        .filter_map(|n| sources.iter().find(|s| s.index == n))
        .map(Citation::of)
        .collect()
}

/// The sources of one chat so far; a `knowledge_search` tool's results join them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sources(pub Vec<Source>);

impl Sources {
    /// Renumbers the results of a `knowledge_search` call after the sources before them, in
    /// `output` itself (the model reads the numbers it is to cite), and keeps them.
    pub fn adopt(&mut self, output: &mut Value) {
        let Some(results) = output.get_mut("results").and_then(Value::as_array_mut) else { return };
        for result in results {
            let next = self.0.iter().map(|s| s.index).max().unwrap_or(0) + 1;
            if let Some(object) = result.as_object_mut() {
                object.insert("index".into(), Value::from(next));
            }
            match serde_json::from_value::<Source>(result.clone()) {
                Ok(source) => self.0.push(source),
                Err(e) => tracing::warn!(error = %e, "a knowledge_search result is not a source"),
            }
        }
    }
}

#[cfg(test)]
mod tests;
