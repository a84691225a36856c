//! Splits documents into chunks of about a target number of tokens, on sentence boundaries,
//! with a few sentences of overlap so that a fact spanning a boundary is whole in one chunk.

use crate::tokens::TokenCounter;

/// How documents are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSettings {
    /// Most tokens of one chunk (a single longer sentence is cut between words).
    pub max_tokens: u64,
    /// Tokens of trailing sentences repeated at the start of the next chunk.
    pub overlap_tokens: u64,
}

impl Default for ChunkSettings {
    fn default() -> Self {
        // MiniLM was trained on inputs of up to 256 word pieces; longer text is cut off.
        Self { max_tokens: 256, overlap_tokens: 32 }
    }
}

/// Sentences of `text`: cut after `.`, `!` or `?` followed by white space, and at blank lines.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let end_of_sentence =
            matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_some_and(|n| n.is_ascii_whitespace());
        let blank_line = b == b'\n' && bytes.get(i + 1) == Some(&b'\n');
        if end_of_sentence || blank_line {
            let piece = text[start..=i].trim();
            if !piece.is_empty() {
                out.push(piece);
            }
            start = i + 1;
        }
        i += 1;
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The chunks of `text`, in order, none empty; identical chunks appear once.
pub fn chunk(text: &str, settings: ChunkSettings, tokens: &dyn TokenCounter) -> Vec<String> {
    let max = settings.max_tokens.max(1);
    // Sentences longer than a chunk are cut between words first.
    let mut pieces: Vec<(String, u64)> = Vec::new();
    for s in sentences(text) {
        let n = tokens.count(s);
        if n <= max {
            pieces.push((s.to_owned(), n));
            continue;
        }
        let mut current = String::new();
        let mut current_tokens = 0;
        for word in s.split_whitespace() {
            let w = tokens.count(word).max(1);
            if current_tokens + w > max && !current.is_empty() {
                pieces.push((std::mem::take(&mut current), current_tokens));
                current_tokens = 0;
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
            current_tokens += w;
        }
        if !current.is_empty() {
            pieces.push((current, current_tokens));
        }
    }

    let mut chunks: Vec<String> = Vec::new();
    let mut window: Vec<(String, u64)> = Vec::new();
    let mut window_tokens = 0;
    let mut fresh = false; // whether the window holds a piece not yet in any chunk
    for (piece, n) in pieces {
        if window_tokens + n > max && fresh {
            push_unique(&mut chunks, join(&window));
            // Keep trailing sentences up to the overlap, as long as the next piece still fits.
            let mut kept: Vec<(String, u64)> = Vec::new();
            let mut kept_tokens = 0;
            for (p, t) in window.iter().rev() {
                if kept_tokens + t > settings.overlap_tokens || kept_tokens + t + n > max {
                    break;
                }
                kept_tokens += t;
                kept.push((p.clone(), *t));
            }
            kept.reverse();
            window = kept;
            window_tokens = kept_tokens;
        }
        window_tokens += n;
        window.push((piece, n));
        fresh = true;
    }
    if fresh {
        push_unique(&mut chunks, join(&window));
    }
    chunks
}

fn join(window: &[(String, u64)]) -> String {
    window.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(" ")
}

fn push_unique(chunks: &mut Vec<String>, chunk: String) {
    if !chunk.is_empty() && !chunks.contains(&chunk) {
        chunks.push(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per word: easy to reason about.
    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> u64 {
            text.split_whitespace().count() as u64
        }
    }

    #[test]
    fn sentences_split_on_terminators_and_blank_lines() {
        assert_eq!(sentences("One. Two!  Three? Four"), vec!["One.", "Two!", "Three?", "Four"]);
        assert_eq!(sentences("Title\n\nBody text 3.5 units."), vec!["Title", "Body text 3.5 units."]);
        assert!(sentences("   ").is_empty());
    }

    #[test]
    fn chunks_respect_the_budget_and_overlap() {
        let text = "a b c. d e f. g h i. j k l. m n o.";
        let s = ChunkSettings { max_tokens: 6, overlap_tokens: 3 };
        let chunks = chunk(text, s, &Words);
        assert_eq!(chunks, vec!["a b c. d e f.", "d e f. g h i.", "g h i. j k l.", "j k l. m n o."]);
        for c in &chunks {
            assert!(Words.count(c) <= 6);
        }
    }

    #[test]
    fn a_short_text_is_one_chunk_and_long_sentences_are_cut() {
        let s = ChunkSettings { max_tokens: 4, overlap_tokens: 0 };
        assert_eq!(chunk("Just this.", s, &Words), vec!["Just this."]);
        let chunks = chunk("one two three four five six seven eight nine", s, &Words);
        assert!(chunks.len() >= 3);
        assert!(chunks.iter().all(|c| Words.count(c) <= 4));
        assert_eq!(chunks.join(" "), "one two three four five six seven eight nine");
    }

    #[test]
    fn identical_chunks_are_stored_once() {
        let s = ChunkSettings { max_tokens: 3, overlap_tokens: 0 };
        assert_eq!(chunk("x y z. x y z. x y z.", s, &Words), vec!["x y z."]);
    }
}
