//! A parsed document cut into chunks: structure first (a chunk never spans two sections, so
//! it has one page and one heading path, and blocks stay whole where they fit), then size
//! (a block longer than a chunk is cut between sentences, a sentence between words, a word
//! between characters), with overlap (the last pieces of a chunk, up to the overlap, begin
//! the next) so that a fact spanning a cut is whole in one chunk.
//!
//! A chunk's text is always a slice of the document's text (its blocks joined by blank lines,
//! [`document_text`]), and `start`/`end` are that slice's character offsets: a citation can
//! point into the document exactly.

use crate::memory::chunking::sentences;
use crate::tokens::TokenCounter;

use super::document::ParsedDocument;

/// Fewest tokens a knowledge base's chunks may be set to hold.
pub const MIN_CHUNK_TOKENS: u32 = 64;
/// Most tokens a knowledge base's chunks may be set to hold.
pub const MAX_CHUNK_TOKENS: u32 = 2048;

/// How a knowledge base cuts its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLimits {
    /// Most tokens of one chunk, 64–2048.
    pub max_tokens: u32,
    /// Tokens of a chunk's last pieces repeated at the start of the next, 0–max/2.
    pub overlap_tokens: u32,
}

impl Default for ChunkLimits {
    fn default() -> Self {
        Self { max_tokens: 400, overlap_tokens: 50 }
    }
}

/// One chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its place in the document, from 0.
    pub index: u32,
    /// Its text: `document_text(doc)[start..end]` (in characters).
    pub text: String,
    /// The page it is on, for paged formats.
    pub page: Option<u32>,
    /// The headings it sits under, outermost first.
    pub headings: Vec<String>,
    /// Offset of its first character in the document's text.
    pub start: usize,
    /// Offset just past its last character.
    pub end: usize,
}

/// Separator between two blocks (and two sections) of a document's text.
const BLOCK_SEPARATOR: &str = "\n\n";

/// The document's text: every block of every section, in order, joined by blank lines.
pub fn document_text(doc: &ParsedDocument) -> String {
    let blocks: Vec<&str> = doc.sections.iter().flat_map(|s| s.blocks.iter().map(String::as_str)).collect();
    blocks.join(BLOCK_SEPARATOR)
}

/// A piece of the text that chunking never cuts: byte range in the document's text, tokens.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    tokens: u64,
}

/// The chunks of `doc`, in order; none holds more than `limits.max_tokens` tokens as `tokens`
/// counts them.
pub fn chunk_document(doc: &ParsedDocument, limits: ChunkLimits, tokens: &dyn TokenCounter) -> Vec<Chunk> {
    let text = document_text(doc);
    let max = u64::from(limits.max_tokens.max(1));
    let overlap = u64::from(limits.overlap_tokens).min(max / 2);
    let mut chunks = Vec::new();
    let mut offset = 0;
    let mut chars = CharOffsets::new(&text);
    for section in &doc.sections {
        let mut pieces = Vec::new();
        for block in &section.blocks {
            let block_start = offset;
            offset += block.len() + BLOCK_SEPARATOR.len();
            split(&text, block_start, block_start + block.len(), max, tokens, &mut pieces);
        }
        for (start, end) in windows(&text, &pieces, max, overlap, tokens) {
            chunks.push(Chunk {
                index: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
                text: text[start..end].to_owned(),
                page: section.page,
                headings: section.headings.clone(),
                start: chars.at(start),
                end: chars.at(end),
            });
        }
    }
    chunks
}

/// Cuts `text[start..end]` (one block) into pieces of at most `max` tokens: whole when it
/// fits, else its sentences, a longer sentence's words, a longer word's characters.
fn split(text: &str, start: usize, end: usize, max: u64, tokens: &dyn TokenCounter, out: &mut Vec<Piece>) {
    let block = &text[start..end];
    if block.trim().is_empty() {
        return;
    }
    let n = tokens.count(block);
    if n <= max {
        out.push(Piece { start, end, tokens: n });
        return;
    }
    let base = block.as_ptr() as usize;
    let at = |s: &str| start + (s.as_ptr() as usize - base);
    let parts = sentences(block);
    if parts.len() > 1 {
        for s in parts {
            split(text, at(s), at(s) + s.len(), max, tokens, out);
        }
        return;
    }
    let words: Vec<&str> = block.split_whitespace().collect();
    if words.len() > 1 {
        // Words gathered greedily into pieces that fit.
        let mut first: Option<&str> = None;
        let mut last: &str = "";
        for w in words {
            if let Some(f) = first {
                let candidate = &text[at(f)..at(w) + w.len()];
                let count = tokens.count(candidate);
                if count <= max {
                    last = w;
                    continue;
                }
                split(text, at(f), at(last) + last.len(), max, tokens, out);
            }
            first = Some(w);
            last = w;
        }
        if let Some(f) = first {
            split(text, at(f), at(last) + last.len(), max, tokens, out);
        }
        return;
    }
    // One word longer than a chunk (a hash, a run of symbols): cut between characters, halving
    // until each half fits.
    let mid = block.char_indices().map(|(i, _)| i).find(|&i| i >= block.len() / 2).unwrap_or(0);
    if mid == 0 {
        // A single character over the budget: kept, the one piece that may exceed it.
        out.push(Piece { start, end, tokens: n });
        return;
    }
    split(text, start, start + mid, max, tokens, out);
    split(text, start + mid, end, max, tokens, out);
}

/// Groups consecutive pieces into chunks (byte ranges of `text`) of at most `max` tokens, each
/// after the first beginning with the previous one's last pieces up to `overlap` tokens (never
/// its first piece, so every chunk moves on).
fn windows(
    text: &str,
    pieces: &[Piece],
    max: u64,
    overlap: u64,
    tokens: &dyn TokenCounter,
) -> Vec<(usize, usize)> {
    let fits = |first: usize, last: usize| {
        // The pieces' own counts add up to about the slice's (separators aside): a slice they
        // already put over the budget is not counted. Only an exact count admits one.
        let least: u64 = pieces[first..=last].iter().map(|p| p.tokens).sum();
        least <= max && tokens.count(&text[pieces[first].start..pieces[last].end]) <= max
    };
    let mut out = Vec::new();
    let mut first = 0; // the current window's first piece
    let mut next = 0; // the first piece in no chunk yet
    while next < pieces.len() {
        let mut end = next;
        while end < pieces.len() && fits(first, end) {
            end += 1;
        }
        if end == next {
            if first < next {
                // The overlap leaves no room for the next piece: begin afresh with it.
                first = next;
                continue;
            }
            end = next + 1; // a piece over the budget alone (see `split`)
        }
        out.push((pieces[first].start, pieces[end - 1].end));
        next = end;
        let window_first = first;
        first = end;
        // Counted as the slice it will be, separators included.
        while first > window_first + 1
            && overlap > 0
            && tokens.count(&text[pieces[first - 1].start..pieces[end - 1].end]) <= overlap
        {
            first -= 1;
        }
    }
    out
}

/// Byte offsets of a text turned into character offsets, walking forward only.
struct CharOffsets<'a> {
    text: &'a str,
    byte: usize,
    chars: usize,
}

impl<'a> CharOffsets<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, byte: 0, chars: 0 }
    }

    /// The character offset of byte offset `byte` (at a character boundary).
    fn at(&mut self, byte: usize) -> usize {
        if byte < self.byte {
            return self.text[..byte].chars().count();
        }
        self.chars += self.text[self.byte..byte].chars().count();
        self.byte = byte;
        self.chars
    }
}

#[cfg(test)]
mod tests;
