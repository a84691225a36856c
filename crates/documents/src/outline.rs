//! What every parser builds with: a document's sections under their heading path, its blocks
//! cleaned of layout whitespace, and the limits (characters, time) checked as each block is added,
//! so a parse stops at the limit rather than after reading the whole file.

use std::time::{Duration, Instant};

use agentry_domain::knowledge::{ParseError, ParseLimits, ParsedDocument, Section};

/// How often (in blocks, pages or input chunks) the parsers look at the clock: often enough to
/// stop soon after the deadline, rarely enough to cost nothing.
const CLOCK_EVERY: u32 = 64;

/// The limits of one parse and its deadline, which the parsers check inside their loops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) limits: ParseLimits,
    deadline: Option<Instant>,
}

impl Budget {
    /// The budget of a parse that starts now.
    pub(crate) fn new(limits: ParseLimits) -> Self {
        Self { limits, deadline: Instant::now().checked_add(limits.timeout) }
    }

    /// [`ParseError::Timeout`] once the deadline has passed.
    pub(crate) fn check_time(&self) -> Result<(), ParseError> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => {
                Err(ParseError::Timeout(seconds(self.limits.timeout)))
            }
            _ => Ok(()),
        }
    }

    /// The most bytes a compressed part may inflate to, as a `usize` for the libraries' limits.
    pub(crate) fn max_inflated(&self) -> usize {
        usize::try_from(self.limits.max_inflated_bytes).unwrap_or(usize::MAX)
    }
}

/// A timeout in whole seconds, rounded up, as [`ParseError::Timeout`] reports it.
pub(crate) fn seconds(timeout: Duration) -> u64 {
    timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0)
}

/// The error of a file whose text passes `max` characters.
pub(crate) fn too_many_chars(max: usize) -> ParseError {
    ParseError::TooLarge(format!("more than {max} characters of text"))
}

/// A document being built: its finished sections, the heading path, the section being filled.
#[derive(Debug)]
pub(crate) struct Outline<'b> {
    budget: &'b Budget,
    sections: Vec<Section>,
    /// The open headings, outermost first, with their levels (1 for `h1`, Heading 1, `#`).
    path: Vec<(u8, String)>,
    current: Section,
    chars: usize,
    ticks: u32,
}

impl<'b> Outline<'b> {
    /// An empty document under `budget`.
    pub(crate) fn new(budget: &'b Budget) -> Self {
        Self {
            budget,
            sections: Vec::new(),
            path: Vec::new(),
            current: Section { page: None, headings: Vec::new(), blocks: Vec::new() },
            chars: 0,
            ticks: 0,
        }
    }

    /// A heading of `level` (1 outermost): it closes the headings at its level and below and
    /// starts a section under the new path. An empty heading (an anchor, an image) is ignored.
    pub(crate) fn heading(&mut self, level: u8, raw: &str) -> Result<(), ParseError> {
        let text = one_line(raw);
        if text.is_empty() {
            return Ok(());
        }
        self.count(&text)?;
        self.path.retain(|(open, _)| *open < level);
        self.path.push((level, text));
        let headings = self.path.iter().map(|(_, text)| text.clone()).collect();
        self.start(Section { page: self.current.page, headings, blocks: Vec::new() });
        Ok(())
    }

    /// Starts the section of page `page` (from 1): pages have no heading path.
    pub(crate) fn page(&mut self, page: u32) {
        self.path.clear();
        self.start(Section { page: Some(page), headings: Vec::new(), blocks: Vec::new() });
    }

    /// A block of flowing text (a paragraph, a list item, a table row): whitespace runs become
    /// one space, line breaks it holds are kept, blank lines dropped. Nothing is added if it is
    /// empty.
    pub(crate) fn block(&mut self, raw: &str) -> Result<(), ParseError> {
        let text = flowing(raw);
        self.push(text)
    }

    /// A block whose layout is its meaning (a code block, `<pre>`): lines and indentation kept,
    /// only trailing spaces and surrounding blank lines dropped.
    pub(crate) fn preformatted(&mut self, raw: &str) -> Result<(), ParseError> {
        let text = preformatted(raw);
        self.push(text)
    }

    /// Plain text cut into one block per paragraph (paragraphs are separated by blank lines).
    pub(crate) fn paragraphs(&mut self, raw: &str) -> Result<(), ParseError> {
        let mut paragraph = String::new();
        for line in raw.lines() {
            if line.trim().is_empty() {
                self.block(&paragraph)?;
                paragraph.clear();
            } else {
                paragraph.push_str(line);
                paragraph.push('\n');
            }
        }
        self.block(&paragraph)
    }

    /// The document, with its page count for paged formats.
    pub(crate) fn finish(mut self, pages: Option<u32>) -> ParsedDocument {
        let last = std::mem::replace(
            &mut self.current,
            Section { page: None, headings: Vec::new(), blocks: Vec::new() },
        );
        self.sections.push(last);
        self.sections.retain(|section| !section.blocks.is_empty());
        ParsedDocument { pages, sections: self.sections }
    }

    fn start(&mut self, section: Section) {
        let done = std::mem::replace(&mut self.current, section);
        if !done.blocks.is_empty() {
            self.sections.push(done);
        }
    }

    fn push(&mut self, text: String) -> Result<(), ParseError> {
        if text.is_empty() {
            return Ok(());
        }
        self.count(&text)?;
        self.current.blocks.push(text);
        Ok(())
    }

    /// Counts `text` against the character limit, and looks at the clock now and then.
    fn count(&mut self, text: &str) -> Result<(), ParseError> {
        self.chars = self.chars.saturating_add(text.chars().count());
        if self.chars > self.budget.limits.max_chars {
            return Err(too_many_chars(self.budget.limits.max_chars));
        }
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(CLOCK_EVERY) {
            self.budget.check_time()?;
        }
        Ok(())
    }
}

/// A counter for the parsers' own loops (input chunks, XML events): the clock is read every
/// [`CLOCK_EVERY`] ticks.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    ticks: u32,
}

impl Clock {
    /// One step of work; [`ParseError::Timeout`] if it is one of the checked ones and the
    /// deadline has passed.
    pub(crate) fn tick(&mut self, budget: &Budget) -> Result<(), ParseError> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(CLOCK_EVERY) { budget.check_time() } else { Ok(()) }
    }
}

/// Whether `c` should read as a space: whitespace, and control characters that carry no text
/// (a NUL, a form feed, a bell) — except the line break, which the callers handle.
fn blank(c: char) -> bool {
    c != '\n' && (c.is_whitespace() || c.is_control())
}

/// All of `raw` on one line, whitespace runs as one space (a heading, a table cell).
pub(crate) fn one_line(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(4096));
    for word in raw.split(|c: char| c == '\n' || blank(c)).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Flowing text: each line's whitespace runs as one space, lines trimmed, blank lines dropped.
pub(crate) fn flowing(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(4096));
    for line in raw.lines() {
        let line = one_line(line);
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
    }
    out
}

/// Preformatted text: lines kept as they are (control characters but tabs made spaces), trailing
/// whitespace and the blank lines around it dropped, runs of blank lines made one.
pub(crate) fn preformatted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(4096));
    let mut blank_lines = 0usize;
    for line in raw.lines() {
        let line: String = line.chars().map(|c| if c != '\t' && c.is_control() { ' ' } else { c }).collect();
        let line = line.trim_end();
        if line.is_empty() {
            blank_lines += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_lines > 0 { "\n\n" } else { "\n" });
        }
        blank_lines = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_collapsed_but_line_breaks_kept() {
        assert_eq!(flowing("  a \t b\u{a0}c \r\n\n  d  \u{0}e "), "a b c\nd e");
        assert_eq!(one_line(" a\n b  "), "a b");
        assert_eq!(preformatted("\n\n  fn x() {\n\n\n      y \n  }\n\n"), "  fn x() {\n\n      y\n  }");
    }

    #[test]
    fn headings_make_a_path_and_a_section_each() {
        let budget = Budget::new(ParseLimits::default());
        let mut outline = Outline::new(&budget);
        outline.block("intro").unwrap();
        outline.heading(1, "A").unwrap();
        outline.heading(2, "B").unwrap();
        outline.block("under b").unwrap();
        outline.heading(3, "C").unwrap();
        outline.block("under c").unwrap();
        outline.heading(2, "D").unwrap();
        outline.block("under d").unwrap();
        outline.heading(1, " ").unwrap();
        outline.heading(1, "E").unwrap();
        outline.block("  ").unwrap();
        outline.block("under e").unwrap();
        let doc = outline.finish(None);
        let paths: Vec<_> = doc.sections.iter().map(|s| (s.headings.join("/"), s.blocks.join("|"))).collect();
        assert_eq!(
            paths,
            [
                (String::new(), "intro".to_owned()),
                ("A/B".to_owned(), "under b".to_owned()),
                ("A/B/C".to_owned(), "under c".to_owned()),
                ("A/D".to_owned(), "under d".to_owned()),
                ("E".to_owned(), "under e".to_owned()),
            ]
        );
    }

    #[test]
    fn the_character_limit_stops_the_outline() {
        let budget = Budget::new(ParseLimits { max_chars: 10, ..ParseLimits::default() });
        let mut outline = Outline::new(&budget);
        outline.block("12345").unwrap();
        outline.block("678910").unwrap_err();
    }
}
