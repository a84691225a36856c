//! Markdown, through pulldown-cmark's events (CommonMark with tables, footnotes, task lists).
//!
//! Headings (`#`…`######`, setext) keep the heading path and start sections; paragraphs, list
//! items, code blocks (layout kept) and table rows (cells joined by ` | `) become blocks. Raw HTML
//! inside Markdown is left out, as the HTML parser would leave out its scripts, and a YAML front
//! matter block is metadata, not text.

use agentry_domain::knowledge::{ParseError, ParsedDocument};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::html::MAX_MARKUP_BYTES;
use crate::outline::{Budget, Clock, Outline, one_line};
use crate::text::utf8;

/// Where the text of the event being read goes.
#[derive(Debug, Default)]
struct State {
    /// The paragraph or list item being read.
    block: String,
    /// The heading being read, with its level.
    heading: Option<(u8, String)>,
    /// The code block being read.
    code: Option<String>,
    /// The table row being read: its finished cells and the cell being read.
    row: Option<(Vec<String>, String)>,
    /// Inside a front matter block, whose text is skipped.
    metadata: bool,
}

impl State {
    fn text(&mut self, text: &str) {
        if self.metadata {
            return;
        }
        if let Some(code) = &mut self.code {
            code.push_str(text);
        } else if let Some((_, heading)) = &mut self.heading {
            heading.push_str(text);
        } else if let Some((_, cell)) = &mut self.row {
            cell.push_str(text);
        } else {
            self.block.push_str(text);
        }
    }

    fn flush(&mut self, outline: &mut Outline<'_>) -> Result<(), ParseError> {
        outline.block(&self.block)?;
        self.block.clear();
        Ok(())
    }
}

/// See the module's documentation.
pub(crate) fn parse(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    if bytes.len() > MAX_MARKUP_BYTES {
        return Err(ParseError::TooLarge(format!(
            "{} bytes of Markdown, at most {MAX_MARKUP_BYTES}",
            bytes.len()
        )));
    }
    let text = utf8(bytes)?;
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut outline = Outline::new(budget);
    let mut state = State::default();
    let mut clock = Clock::default();
    for event in Parser::new_ext(text, options) {
        clock.tick(budget)?;
        match event {
            Event::Start(tag) => start(tag, &mut state, &mut outline)?,
            Event::End(tag) => end(tag, &mut state, &mut outline)?,
            Event::Text(text) | Event::Code(text) | Event::InlineMath(text) | Event::DisplayMath(text) => {
                state.text(&text);
            }
            Event::SoftBreak => state.text(" "),
            Event::HardBreak => state.text("\n"),
            Event::TaskListMarker(done) => state.text(if done { "[x] " } else { "[ ] " }),
            Event::Rule => state.flush(&mut outline)?,
            Event::Html(_) | Event::InlineHtml(_) | Event::FootnoteReference(_) => {}
        }
    }
    state.flush(&mut outline)?;
    Ok(outline.finish(None))
}

fn start(tag: Tag<'_>, state: &mut State, outline: &mut Outline<'_>) -> Result<(), ParseError> {
    match tag {
        Tag::Heading { level, .. } => {
            state.flush(outline)?;
            state.heading = Some((level as u8, String::new()));
        }
        Tag::CodeBlock(_) => {
            state.flush(outline)?;
            state.code = Some(String::new());
        }
        Tag::TableHead | Tag::TableRow => state.row = Some((Vec::new(), String::new())),
        Tag::TableCell => {
            if let Some((_, cell)) = &mut state.row {
                cell.clear();
            }
        }
        Tag::MetadataBlock(_) => state.metadata = true,
        Tag::Paragraph
        | Tag::Item
        | Tag::List(_)
        | Tag::BlockQuote(_)
        | Tag::Table(_)
        | Tag::FootnoteDefinition(_)
        | Tag::DefinitionList
        | Tag::DefinitionListTitle
        | Tag::DefinitionListDefinition
        | Tag::HtmlBlock => state.flush(outline)?,
        Tag::Emphasis
        | Tag::Strong
        | Tag::Strikethrough
        | Tag::Superscript
        | Tag::Subscript
        | Tag::Link { .. }
        | Tag::Image { .. } => {}
    }
    Ok(())
}

fn end(tag: TagEnd, state: &mut State, outline: &mut Outline<'_>) -> Result<(), ParseError> {
    match tag {
        TagEnd::Heading(_) => {
            if let Some((level, text)) = state.heading.take() {
                outline.heading(level, &text)?;
            }
        }
        TagEnd::CodeBlock => {
            if let Some(code) = state.code.take() {
                outline.preformatted(&code)?;
            }
        }
        TagEnd::TableCell => {
            if let Some((cells, cell)) = &mut state.row {
                cells.push(one_line(cell));
                cell.clear();
            }
        }
        TagEnd::TableHead | TagEnd::TableRow => {
            if let Some((cells, _)) = state.row.take() {
                let cells: Vec<String> = cells.into_iter().filter(|c| !c.is_empty()).collect();
                outline.block(&cells.join(" | "))?;
            }
        }
        TagEnd::MetadataBlock(_) => state.metadata = false,
        TagEnd::Paragraph
        | TagEnd::Item
        | TagEnd::List(_)
        | TagEnd::BlockQuote(_)
        | TagEnd::Table
        | TagEnd::FootnoteDefinition
        | TagEnd::DefinitionList
        | TagEnd::DefinitionListTitle
        | TagEnd::DefinitionListDefinition
        | TagEnd::HtmlBlock => state.flush(outline)?,
        TagEnd::Emphasis
        | TagEnd::Strong
        | TagEnd::Strikethrough
        | TagEnd::Superscript
        | TagEnd::Subscript
        | TagEnd::Link
        | TagEnd::Image => {}
    }
    Ok(())
}
