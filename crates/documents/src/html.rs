//! HTML, through html5ever's tokenizer: the browsers' own tokenizing rules (character
//! references, comments, `<script>` and `<style>` content, unquoted attributes, broken markup all
//! read as a browser reads them), walked as a stream of tags and text.
//!
//! No tree is built. A page's text and outline need only to know which heading, row, block or
//! skipped element is open, so a page nested 100,000 elements deep costs what a flat page of the
//! same size costs: no recursion to overflow the stack and no tree builder whose "in scope"
//! checks grow with the depth of the open elements (html5ever's tree builder is quadratic on such a
//! page). The price is the tree builder's error recovery, which matters for rendering, not for
//! text: block boundaries are taken from start and end tags alike, so an unclosed `<p>` still
//! ends where the next block starts.
//!
//! Never read: `script`, `style`, `noscript`, `template`, `iframe`, `noembed`, `noframes`,
//! `xmp`, `textarea`, `title` and everything in `<head>`. `h1`–`h6` keep the heading path and
//! start sections; `p`, `li`, `div`, `blockquote` and the other block elements end blocks; a
//! table row (`tr`) is one block of its cells joined by ` | `; `pre` keeps its layout; `br` is a
//! line break.

use std::cell::RefCell;

use agentry_domain::knowledge::{ParseError, ParsedDocument};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::{LocalName, TokenizerResult};

use crate::outline::{Budget, Clock, Outline, one_line};
use crate::text::utf8;

/// The most bytes of HTML (or Markdown) a file may have. Parsing is linear, so this bounds the
/// time and memory of one parse along with the timeout; a page larger than this is an export or
/// a dump rather than a document.
pub const MAX_MARKUP_BYTES: usize = 10 * 1024 * 1024;

/// How much input is handed to the tokenizer at a time, between looks at the clock.
const CHUNK_BYTES: usize = 64 * 1024;

/// Elements whose content is not the page's text.
fn raw_kind(name: &str) -> Option<RawKind> {
    match name {
        "script" => Some(RawKind::ScriptData),
        "style" | "noscript" | "iframe" | "noembed" | "noframes" | "xmp" => Some(RawKind::Rawtext),
        "title" | "textarea" => Some(RawKind::Rcdata),
        _ => None,
    }
}

/// Elements that end a block, whether they start or end.
fn is_block(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "body"
            | "caption"
            | "center"
            | "dd"
            | "details"
            | "dialog"
            | "dir"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "header"
            | "hgroup"
            | "hr"
            | "html"
            | "legend"
            | "li"
            | "main"
            | "menu"
            | "nav"
            | "ol"
            | "p"
            | "section"
            | "summary"
            | "ul"
    )
}

/// Elements `<head>` may hold; any other start tag ends an unclosed head.
fn is_head_content(name: &str) -> bool {
    matches!(
        name,
        "base"
            | "basefont"
            | "bgsound"
            | "link"
            | "meta"
            | "noscript"
            | "script"
            | "style"
            | "template"
            | "title"
    )
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// See the module's documentation.
pub(crate) fn parse(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    if bytes.len() > MAX_MARKUP_BYTES {
        return Err(ParseError::TooLarge(format!(
            "{} bytes of HTML, at most {MAX_MARKUP_BYTES}",
            bytes.len()
        )));
    }
    let mut rest = utf8(bytes)?;
    let tokenizer = Tokenizer::new(Sink(RefCell::new(Walker::new(budget))), TokenizerOpts::default());
    let queue = BufferQueue::default();
    while !rest.is_empty() {
        let mut cut = rest.len().min(CHUNK_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        queue.push_back(StrTendril::from_slice(chunk));
        // The sink never asks to stop for a script or an encoding, so one call reads the chunk.
        while !matches!(tokenizer.feed(&queue), TokenizerResult::Done) {}
        budget.check_time()?;
        if let Some(error) = tokenizer.sink.0.borrow_mut().error.take() {
            return Err(error);
        }
    }
    tokenizer.end();
    let Sink(walker) = tokenizer.sink;
    walker.into_inner().finish()
}

/// The tokenizer's sink: the walker, behind the `RefCell` the sink's `&self` interface needs.
#[derive(Debug)]
struct Sink<'b>(RefCell<Walker<'b>>);

impl TokenSink for Sink<'_> {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut walker = self.0.borrow_mut();
        if walker.error.is_some() {
            return TokenSinkResult::Continue;
        }
        match token {
            Token::TagToken(tag) => walker.tag(&tag),
            Token::CharacterTokens(text) => {
                walker.characters(&text);
                TokenSinkResult::Continue
            }
            Token::NullCharacterToken
            | Token::CommentToken(_)
            | Token::DoctypeToken(_)
            | Token::EOFToken
            | Token::ParseError(_) => TokenSinkResult::Continue,
        }
    }
}

/// What is open while the tokens go by.
#[derive(Debug)]
struct Walker<'b> {
    outline: Outline<'b>,
    budget: &'b Budget,
    clock: Clock,
    /// The first limit reached; the rest of the page is then ignored.
    error: Option<ParseError>,
    /// The block being read.
    block: String,
    /// The heading being read, with its level.
    heading: Option<(u8, String)>,
    /// The table row being read: its finished cells and the cell being read.
    row: Option<(Vec<String>, String)>,
    /// How many `pre` elements are open: inside one, whitespace is kept.
    pre: u32,
    /// The element whose raw content (script, style) is being skipped.
    raw: Option<LocalName>,
    /// How many `template` elements are open: their content is skipped.
    templates: u32,
    /// Inside `<head>`.
    head: bool,
}

impl<'b> Walker<'b> {
    fn new(budget: &'b Budget) -> Self {
        Self {
            outline: Outline::new(budget),
            budget,
            clock: Clock::default(),
            error: None,
            block: String::new(),
            heading: None,
            row: None,
            pre: 0,
            raw: None,
            templates: 0,
            head: false,
        }
    }

    fn tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        let start = tag.kind == TagKind::StartTag;
        let name: &str = &tag.name;
        if let Err(error) = self.clock.tick(self.budget) {
            self.error = Some(error);
            return TokenSinkResult::Continue;
        }
        if self.raw.is_some() {
            // In a raw-text state the tokenizer emits only the element's own end tag.
            if !start && self.raw.as_ref() == Some(&tag.name) {
                self.raw = None;
            }
            return TokenSinkResult::Continue;
        }
        if let Some(kind) = raw_kind(name) {
            if start {
                self.raw = Some(tag.name.clone());
                return TokenSinkResult::RawData(kind);
            }
            return TokenSinkResult::Continue;
        }
        if name == "template" {
            self.templates =
                if start { self.templates.saturating_add(1) } else { self.templates.saturating_sub(1) };
            return TokenSinkResult::Continue;
        }
        if self.templates > 0 {
            return TokenSinkResult::Continue;
        }
        match name {
            "head" => self.head = start,
            "body" => self.head = false,
            _ if start && self.head && !is_head_content(name) => self.head = false,
            _ => {}
        }
        if self.head {
            return TokenSinkResult::Continue;
        }
        if name == "plaintext" && start {
            // Everything after it is text, shown as it is.
            if let Err(error) = self.end_block() {
                self.error = Some(error);
            }
            self.pre = self.pre.saturating_add(1);
            return TokenSinkResult::Plaintext;
        }
        let result = self.structure(name, start);
        if let Err(error) = result {
            self.error = Some(error);
        }
        TokenSinkResult::Continue
    }

    /// What a tag outside the skipped elements does to the page's structure.
    fn structure(&mut self, name: &str, start: bool) -> Result<(), ParseError> {
        if let Some(level) = heading_level(name) {
            self.end_heading()?;
            if start {
                self.end_block()?;
                self.heading = Some((level, String::new()));
            }
            return Ok(());
        }
        match name {
            "tr" => {
                self.end_row()?;
                if start {
                    self.end_block()?;
                    self.row = Some((Vec::new(), String::new()));
                }
            }
            "td" | "th" => {
                let row = self.row.get_or_insert_with(|| (Vec::new(), String::new()));
                let cell = one_line(&row.1);
                row.0.push(cell);
                row.1.clear();
            }
            "table" | "thead" | "tbody" | "tfoot" => {
                self.end_row()?;
                self.end_block()?;
            }
            "br" => self.line_break(),
            "pre" | "listing" => {
                self.end_block()?;
                self.pre = if start { self.pre.saturating_add(1) } else { self.pre.saturating_sub(1) };
            }
            _ if is_block(name) => {
                if self.heading.is_some() || self.row.is_some() {
                    self.text(" ");
                } else {
                    self.end_block()?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn characters(&mut self, text: &str) {
        if self.raw.is_some() || self.templates > 0 {
            return;
        }
        if self.head {
            // Text in the head ends it, as in a browser: it is the body's.
            if text.chars().all(char::is_whitespace) {
                return;
            }
            self.head = false;
        }
        self.text(text);
    }

    /// Appends `text` where it belongs: the heading, the row's cell, or the block. Outside `pre`,
    /// whitespace runs become one space (only `br` makes a line break).
    fn text(&mut self, text: &str) {
        let keep_layout = self.pre > 0 && self.heading.is_none() && self.row.is_none();
        let target = if let Some((_, heading)) = &mut self.heading {
            heading
        } else if let Some((_, cell)) = &mut self.row {
            cell
        } else {
            &mut self.block
        };
        if keep_layout {
            target.push_str(text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                if !target.is_empty() && !target.ends_with([' ', '\n']) {
                    target.push(' ');
                }
            } else {
                target.push(c);
            }
        }
    }

    /// A `br`: a line break in a block, a space in a heading or a table cell.
    fn line_break(&mut self) {
        if let Some((_, text)) = &mut self.heading {
            text.push(' ');
        } else if let Some((_, cell)) = &mut self.row {
            cell.push(' ');
        } else {
            self.block.push('\n');
        }
    }

    fn end_block(&mut self) -> Result<(), ParseError> {
        let block = std::mem::take(&mut self.block);
        if self.pre > 0 { self.outline.preformatted(&block) } else { self.outline.block(&block) }
    }

    fn end_heading(&mut self) -> Result<(), ParseError> {
        match self.heading.take() {
            Some((level, text)) => self.outline.heading(level, &text),
            None => Ok(()),
        }
    }

    fn end_row(&mut self) -> Result<(), ParseError> {
        let Some((mut cells, cell)) = self.row.take() else { return Ok(()) };
        cells.push(one_line(&cell));
        let cells: Vec<String> = cells.into_iter().filter(|cell| !cell.is_empty()).collect();
        self.outline.block(&cells.join(" | "))
    }

    fn finish(mut self) -> Result<ParsedDocument, ParseError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.end_heading()?;
        self.end_row()?;
        self.end_block()?;
        Ok(self.outline.finish(None))
    }
}
