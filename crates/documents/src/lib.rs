//! Agentry's knowledge-file parsers, implementing the domain's [`DocumentParser`] port: a
//! file's type recognised by its content (and checked against its name), then its text read into
//! [`Section`]s that keep what chunking cuts on first: PDF pages, Word, HTML and Markdown heading
//! paths, paragraphs, list items, table rows and CSV records.
//!
//! Every file is treated as hostile. Each parse runs on a blocking thread (never the async
//! runtime's), inside `catch_unwind` (a parser that panics on a crafted file fails that file, not
//! the service), under the [`ParseLimits`] timeout, and within the limits on pages, inflated bytes
//! and characters, checked as the parse goes rather than after it. Nothing is allocated from a
//! size the file declares.
//!
//! - [`recognise`](Parsers::recognise): magic bytes for PDF and Word (zip), UTF-8 without NUL
//!   bytes for the text formats, which the name's extension then tells apart;
//! - `pdf`: lopdf, page by page, encrypted files refused;
//! - `docx`: `word/document.xml` through a counted inflater and a streaming XML reader, with the
//!   heading levels of `word/styles.xml`;
//! - `html`: html5ever's tokenizer (the browsers' algorithm) walked as a stream, without building
//!   a tree, so nesting depth costs nothing; scripts, styles and `<head>` are never read;
//! - `markdown`: pulldown-cmark's events; `text`: plain text and CSV.
//!
//! [`DocumentParser`]: agentry_domain::knowledge::DocumentParser
//! [`Section`]: agentry_domain::knowledge::Section

mod docx;
mod html;
mod markdown;
mod outline;
mod pdf;
mod recognise;
mod text;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use agentry_domain::knowledge::{DocumentParser, MediaType, ParseError, ParseLimits, ParsedDocument};
use async_trait::async_trait;

use crate::outline::Budget;

pub use crate::docx::MAX_ARCHIVE_ENTRIES;
pub use crate::html::MAX_MARKUP_BYTES;

/// The parsers of every [`MediaType`], within one set of limits. Cheap to share (`Arc<dyn
/// DocumentParser>`): it holds no state but its limits, so concurrent parses never wait on each
/// other.
#[derive(Debug, Clone, Copy)]
pub struct Parsers {
    limits: ParseLimits,
}

impl Parsers {
    /// Parsers that hold every file to `limits`: the composition root passes the configured
    /// ones, tests pass small ones to reach a limit with a small file.
    pub fn new(limits: ParseLimits) -> Self {
        Self { limits }
    }

    /// The limits every parse is held to.
    pub fn limits(&self) -> ParseLimits {
        self.limits
    }
}

impl Default for Parsers {
    /// The domain's default limits ([`ParseLimits::default`]).
    fn default() -> Self {
        Self::new(ParseLimits::default())
    }
}

#[async_trait]
impl DocumentParser for Parsers {
    fn recognise(&self, name: &str, head: &[u8]) -> Result<MediaType, ParseError> {
        recognise::recognise(name, head)
    }

    async fn parse(&self, media_type: MediaType, bytes: Arc<[u8]>) -> Result<ParsedDocument, ParseError> {
        let limits = self.limits;
        let seconds = outline::seconds(limits.timeout);
        let task = tokio::task::spawn_blocking(move || parse_blocking(media_type, &bytes, limits));
        // On a timeout the blocking thread is left to finish on its own: the parsers check the
        // same deadline as they go (per page, per chunk of input, per block), so it stops soon.
        match tokio::time::timeout(limits.timeout, task).await {
            Err(_) => Err(ParseError::Timeout(seconds)),
            Ok(Err(joined)) => {
                tracing::warn!(media_type = media_type.as_str(), error = %joined, "parser thread failed");
                Err(ParseError::Malformed("the parser failed on this file".to_owned()))
            }
            Ok(Ok(result)) => result,
        }
    }
}

/// Parses `bytes` on the calling thread: a panic inside a parser library becomes
/// [`ParseError::Malformed`], and the result is checked for text and size.
fn parse_blocking(
    media_type: MediaType,
    bytes: &[u8],
    limits: ParseLimits,
) -> Result<ParsedDocument, ParseError> {
    let budget = Budget::new(limits);
    let document = guarded(media_type, || match media_type {
        MediaType::Pdf => pdf::parse(bytes, &budget),
        MediaType::Docx => docx::parse(bytes, &budget),
        MediaType::Html => html::parse(bytes, &budget),
        MediaType::Markdown => markdown::parse(bytes, &budget),
        MediaType::Text => text::parse_text(bytes, &budget),
        MediaType::Csv => text::parse_csv(bytes, &budget),
    })?;
    finish(document, limits)
}

/// Runs `parse`, a panic in it becoming [`ParseError::Malformed`]: the libraries are not
/// expected to panic, but a crafted file is exactly where one would.
fn guarded<T>(media_type: MediaType, parse: impl FnOnce() -> Result<T, ParseError>) -> Result<T, ParseError> {
    catch_unwind(AssertUnwindSafe(parse)).unwrap_or_else(|_| {
        tracing::warn!(media_type = media_type.as_str(), "a parser panicked on a file");
        Err(ParseError::Malformed("the file's structure could not be read".to_owned()))
    })
}

/// The checks every parse ends with, whatever the format: no empty blocks or sections, some text,
/// and no more characters than the limit (the parsers stop early on it too; this is the guarantee).
fn finish(mut document: ParsedDocument, limits: ParseLimits) -> Result<ParsedDocument, ParseError> {
    for section in &mut document.sections {
        section.blocks.retain(|block| !block.trim().is_empty());
    }
    document.sections.retain(|section| !section.blocks.is_empty());
    if !document.has_text() {
        return Err(ParseError::NoText);
    }
    let chars: usize = document.sections.iter().flat_map(|s| &s.blocks).map(|b| b.chars().count()).sum();
    if chars > limits.max_chars {
        return Err(outline::too_many_chars(limits.max_chars));
    }
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_parser_fails_its_file_only() {
        let result: Result<(), ParseError> = guarded(MediaType::Pdf, || panic!("a crafted file"));
        assert!(matches!(result, Err(ParseError::Malformed(_))), "{result:?}");
    }

    #[test]
    fn empty_blocks_and_sections_are_dropped_and_the_character_limit_holds() {
        use agentry_domain::knowledge::Section;
        let section = |blocks: &[&str]| Section {
            page: None,
            headings: Vec::new(),
            blocks: blocks.iter().map(|b| (*b).to_owned()).collect(),
        };
        let document =
            ParsedDocument { pages: None, sections: vec![section(&[" ", "abc"]), section(&["\n"])] };
        let done = finish(document.clone(), ParseLimits::default()).unwrap();
        assert_eq!(done.sections, [section(&["abc"])]);
        let tight = ParseLimits { max_chars: 2, ..ParseLimits::default() };
        assert!(matches!(finish(document, tight), Err(ParseError::TooLarge(_))));
        let empty = ParsedDocument { pages: Some(1), sections: vec![section(&[" "])] };
        assert_eq!(finish(empty, ParseLimits::default()), Err(ParseError::NoText));
    }
}
