//! PDF, through lopdf: the text layer page by page, one section per page.
//!
//! Loading caps every stream's decompression at
//! [`ParseLimits::max_inflated_bytes`](agentry_domain::knowledge::ParseLimits) (lopdf's
//! `LoadOptions::max_decompressed_size`), and text extraction caps each page's content the same
//! way. The page count is checked before any text is read: first the count the page tree
//! declares (refused early without walking it), then the pages actually found.
//!
//! A file that needs a password is refused as [`ParseError::Encrypted`]. One encrypted with an
//! empty user password (permissions only, which every viewer opens without asking) is read:
//! lopdf decrypts it, and asking the user for a password they do not have would help no one.
//!
//! lopdf repairs a damaged cross-reference table by scanning the file. A repaired file whose
//! pages fail, or that yields no text at all, is [`ParseError::Malformed`] (a truncated file,
//! not a scan); one that yields text is read, as a viewer would show it.
//!
//! PDF text has lines but no paragraphs: a page's lines are joined into one block while a line
//! reads as continuing onto the next (it does not end a sentence, and the next starts in lower
//! case or the line ends with a comma or a hyphen); otherwise, and at blank lines, a block ends.

use agentry_domain::knowledge::{ParseError, ParsedDocument};
use lopdf::xref::XrefRecovery;
use lopdf::{DecompressError, Document, Error, LoadOptions, Object};

use crate::outline::{Budget, Outline};

/// See the module's documentation.
pub(crate) fn parse(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    let max_inflated = budget.max_inflated();
    let options = LoadOptions { max_decompressed_size: Some(max_inflated), ..LoadOptions::default() };
    let document =
        Document::load_mem_with_options(bytes, options).map_err(|e| load_error(&e, max_inflated))?;
    if document.is_encrypted() {
        // lopdf removes `/Encrypt` from the trailer once it has decrypted with the empty
        // password; still there means the file needs one.
        return Err(ParseError::Encrypted);
    }
    budget.check_time()?;

    let max_pages = budget.limits.max_pages;
    if let Some(declared) = declared_pages(&document)
        && declared > i64::from(max_pages)
    {
        return Err(ParseError::TooLarge(format!("{declared} pages, at most {max_pages}")));
    }
    let pages = document.get_pages();
    let count = u32::try_from(pages.len()).unwrap_or(u32::MAX);
    if count > max_pages {
        return Err(ParseError::TooLarge(format!("{count} pages, at most {max_pages}")));
    }
    let repaired = matches!(document.xref_recovery, Some(XrefRecovery::Reconstructed));

    let mut outline = Outline::new(budget);
    let mut failed: Option<(u32, String)> = None;
    for &number in pages.keys() {
        budget.check_time()?;
        outline.page(number);
        let mut text = String::new();
        let mut error = None;
        for chunk in document.extract_text_chunks_with_limit(&[number], max_inflated) {
            match chunk {
                Ok(chunk) => text.push_str(&chunk),
                Err(Error::Decompress(DecompressError::MemoryLimitExceeded { limit })) => {
                    return Err(ParseError::TooLarge(format!(
                        "page {number} inflates past {limit} bytes (a decompression bomb?)"
                    )));
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        if let Some(error) = error
            && text.trim().is_empty()
        {
            failed.get_or_insert((number, error));
            continue;
        }
        if !readable(&text) {
            continue;
        }
        for block in blocks(&text) {
            outline.block(&block)?;
        }
    }
    let document = outline.finish(Some(count));
    match failed {
        Some((page, error)) if repaired || !document.has_text() => {
            Err(ParseError::Malformed(format!("the PDF is damaged or truncated (page {page}: {error})")))
        }
        None if repaired && !document.has_text() => {
            Err(ParseError::Malformed("the PDF is damaged or truncated: no page could be read".to_owned()))
        }
        Some((page, error)) => {
            tracing::debug!(page, %error, "a PDF page without readable text");
            Ok(document)
        }
        None => Ok(document),
    }
}

/// The error of a file lopdf could not load.
fn load_error(error: &Error, max_inflated: usize) -> ParseError {
    match error {
        Error::InvalidPassword | Error::Decryption(_) => ParseError::Encrypted,
        Error::Decompress(DecompressError::MemoryLimitExceeded { .. }) => ParseError::TooLarge(format!(
            "a stream inflates past {max_inflated} bytes (a decompression bomb?)"
        )),
        other => ParseError::Malformed(format!("the PDF cannot be read: {other}")),
    }
}

/// The page count the root of the page tree declares, without walking the tree.
fn declared_pages(document: &Document) -> Option<i64> {
    let root = document.catalog().ok()?.get(b"Pages").ok()?;
    let root = match root {
        Object::Reference(id) => document.get_dictionary(*id).ok()?,
        Object::Dictionary(root) => root,
        _ => return None,
    };
    root.get(b"Count").ok()?.as_i64().ok()
}

/// Whether extracted text reads as text: a font without a usable encoding yields replacement
/// characters, control codes and private-use glyph codes, which are no better than no text.
fn readable(text: &str) -> bool {
    let (mut good, mut bad) = (0usize, 0usize);
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        if c == char::REPLACEMENT_CHARACTER || c.is_control() || ('\u{e000}'..='\u{f8ff}').contains(&c) {
            bad += 1;
        } else {
            good += 1;
        }
    }
    good > bad
}

/// A page's text as blocks: see the module's documentation.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut block = String::new();
    let mut previous: Option<&str> = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            blocks.push(std::mem::take(&mut block));
            previous = None;
            continue;
        }
        if let Some(previous) = previous
            && !continues(previous, line)
        {
            blocks.push(std::mem::take(&mut block));
        }
        if !block.is_empty() {
            block.push('\n');
        }
        block.push_str(line);
        previous = Some(line);
    }
    blocks.push(block);
    blocks.retain(|block| !block.trim().is_empty());
    blocks
}

/// Whether `next` reads as the continuation of the paragraph `line` is in.
fn continues(line: &str, next: &str) -> bool {
    if line.ends_with(['.', '!', '?', ':']) {
        return false;
    }
    line.ends_with([',', ';', '-', '\u{2010}', '\u{2013}'])
        || next.chars().next().is_some_and(|c| c.is_lowercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_join_and_sentences_end_blocks() {
        let text = "Office hours\nThe office opens at 08:30 and\ncloses at 18:00.\nOn holidays, the\nline keeps its hours.\n\nLast";
        assert_eq!(
            blocks(text),
            [
                "Office hours",
                "The office opens at 08:30 and\ncloses at 18:00.",
                "On holidays, the\nline keeps its hours.",
                "Last"
            ]
        );
    }

    #[test]
    fn replacement_characters_are_not_text() {
        assert!(readable("Hello world \u{fffd}"));
        assert!(!readable("\u{fffd}\u{fffd}\u{e001} a"));
        assert!(!readable("   "));
    }
}
