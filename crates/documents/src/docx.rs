//! Word (Office Open XML): `word/document.xml` of the zip, read as a stream of XML events.
//!
//! The archive's members are inflated through a counter that stops at
//! [`ParseLimits::max_inflated_bytes`](agentry_domain::knowledge::ParseLimits) (both parts read
//! count against it together), so a member that declares a small size and inflates to gigabytes
//! fails early; nothing is sized from what the archive declares. An archive with more than
//! [`MAX_ARCHIVE_ENTRIES`] members is refused before any is read.
//!
//! Paragraphs (`w:p`) are the text of their runs' `w:t` (`w:tab` a tab, `w:br` a line break).
//! A paragraph is a heading when its style is one (`word/styles.xml`: a style named "heading N" or
//! "Title", or with an outline level, or based on such a style; without the styles part, the ids
//! `HeadingN` and `Title`), or when it has an outline level of its own: headings keep the
//! heading path and start sections. A table row (`w:tr`) is one block of its cells joined by
//! ` | `. Deleted text of tracked changes, field codes and the fallback copies of
//! `mc:AlternateContent` are not text.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufReader, Cursor, Read};

use agentry_domain::knowledge::{ParseError, ParsedDocument};
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::{Namespace, ResolveResult};
use quick_xml::reader::NsReader;
use zip::ZipArchive;
use zip::result::ZipError;

use crate::outline::{Budget, Clock, Outline, one_line};

/// The most members a Word archive may have. Word writes a few dozen; the central directory of
/// an archive with millions is itself a way to spend memory.
pub const MAX_ARCHIVE_ENTRIES: usize = 10_000;

/// WordprocessingML, transitional (what Word writes) and strict.
const W: [&str; 2] = [
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
];
/// Markup compatibility: `mc:Fallback` repeats the content of `mc:Choice` for older readers.
const MC: &str = "http://schemas.openxmlformats.org/markup-compatibility/2006";

/// See the module's documentation.
pub(crate) fn parse(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
        ParseError::Malformed(format!("not a Word document: the zip archive cannot be read ({e})"))
    })?;
    if archive.len() > MAX_ARCHIVE_ENTRIES {
        return Err(ParseError::TooLarge(format!(
            "{} archive members, at most {MAX_ARCHIVE_ENTRIES}",
            archive.len()
        )));
    }
    let mut left = budget.limits.max_inflated_bytes;
    let styles = match archive.by_name("word/styles.xml") {
        Ok(member) => read_styles(Counted::new(member, left), budget, &mut left)?,
        Err(_) => Styles::default(),
    };
    let member = match archive.by_name("word/document.xml") {
        Ok(member) => member,
        Err(ZipError::FileNotFound) => {
            return Err(ParseError::Malformed(
                "not a Word document (it has no word/document.xml)".to_owned(),
            ));
        }
        Err(e) => return Err(ParseError::Malformed(format!("word/document.xml cannot be read: {e}"))),
    };
    let mut reader = xml_reader(Counted::new(member, left));
    let mut body = Body {
        outline: Outline::new(budget),
        styles,
        paragraphs: Vec::new(),
        rows: Vec::new(),
        run: 0,
        text: false,
        skip: 0,
    };
    let mut clock = Clock::default();
    let mut buf = Vec::new();
    loop {
        clock.tick(budget)?;
        buf.clear();
        let (resolved, event) = match reader.read_resolved_event_into(&mut buf) {
            Ok(read) => read,
            Err(e) => return Err(xml_error(reader.get_mut().get_mut(), "word/document.xml", &e)),
        };
        let space = space(&resolved);
        match event {
            Event::Start(element) => body.start(space, &element, false)?,
            Event::Empty(element) => body.start(space, &element, true)?,
            Event::End(element) => body.end(space, element.local_name().as_ref())?,
            Event::Text(text) => body.text(&text.xml10_content()),
            Event::CData(text) => body.text(&text.xml10_content()),
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(c)) => Some(Cow::Owned(c.to_string())),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&reference).map(Cow::Borrowed),
                    Err(_) => None,
                };
                if let Some(text) = resolved {
                    body.text(&text);
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    Ok(body.outline.finish(None))
}

/// The namespace an element is in, as far as Word's text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Word,
    Compatibility,
    Other,
}

fn space(resolved: &ResolveResult<'_>) -> Space {
    match resolved {
        ResolveResult::Bound(Namespace(uri)) if W.contains(uri) => Space::Word,
        ResolveResult::Bound(Namespace(uri)) if *uri == MC => Space::Compatibility,
        _ => Space::Other,
    }
}

/// A paragraph being read.
#[derive(Debug, Default)]
struct Paragraph {
    text: String,
    level: Option<u8>,
}

/// The walk through `word/document.xml`.
#[derive(Debug)]
struct Body<'b> {
    outline: Outline<'b>,
    styles: Styles,
    /// Open paragraphs: more than one inside a text box, whose paragraphs sit in a run.
    paragraphs: Vec<Paragraph>,
    /// Open table rows (nested tables nest them), each with its cells so far.
    rows: Vec<Vec<String>>,
    /// Open runs (`w:r`): tabs and breaks count only inside one (`w:tabs` defines tab stops).
    run: u32,
    /// Inside `w:t`.
    text: bool,
    /// Depth inside an `mc:Fallback`, whose content is skipped.
    skip: u32,
}

impl Body<'_> {
    fn start(&mut self, space: Space, element: &BytesStart<'_>, empty: bool) -> Result<(), ParseError> {
        if self.skip > 0 {
            if !empty {
                self.skip += 1;
            }
            return Ok(());
        }
        let name = element.local_name();
        let name: &str = name.as_ref();
        if space == Space::Compatibility && name == "Fallback" {
            if !empty {
                self.skip = 1;
            }
            return Ok(());
        }
        if space != Space::Word {
            return Ok(());
        }
        match name {
            "p" if !empty => self.paragraphs.push(Paragraph::default()),
            "pStyle" => {
                let level = attribute(element, "val").and_then(|id| self.styles.level(&id));
                if let Some(paragraph) = self.paragraphs.last_mut() {
                    paragraph.level = level.or(paragraph.level);
                }
            }
            "outlineLvl" => {
                if let Some(paragraph) = self.paragraphs.last_mut() {
                    paragraph.level = outline_level(element).or(paragraph.level);
                }
            }
            "r" if !empty => self.run += 1,
            "t" if !empty => self.text = true,
            "tab" if self.run > 0 => self.text_anyway("\t"),
            "br" | "cr" if self.run > 0 => self.text_anyway("\n"),
            "noBreakHyphen" if self.run > 0 => self.text_anyway("-"),
            "tr" if !empty => self.rows.push(Vec::new()),
            "tc" => {
                if let Some(row) = self.rows.last_mut() {
                    row.push(String::new());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, space: Space, name: &str) -> Result<(), ParseError> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(());
        }
        if space != Space::Word {
            return Ok(());
        }
        match name {
            "r" => self.run = self.run.saturating_sub(1),
            "t" => self.text = false,
            "p" => {
                let Some(paragraph) = self.paragraphs.pop() else { return Ok(()) };
                if let Some(cell) = self.rows.last_mut().and_then(|row| row.last_mut()) {
                    let text = one_line(&paragraph.text);
                    if !text.is_empty() {
                        if !cell.is_empty() {
                            cell.push(' ');
                        }
                        cell.push_str(&text);
                    }
                } else if let (Some(level), true) = (paragraph.level, self.paragraphs.is_empty()) {
                    self.outline.heading(level, &paragraph.text)?;
                } else {
                    self.outline.block(&paragraph.text)?;
                }
            }
            "tr" => {
                if let Some(row) = self.rows.pop() {
                    let cells: Vec<&str> = row.iter().map(String::as_str).filter(|c| !c.is_empty()).collect();
                    self.outline.block(&cells.join(" | "))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Text inside `w:t`.
    fn text(&mut self, text: &str) {
        if self.text && self.skip == 0 {
            self.text_anyway(text);
        }
    }

    fn text_anyway(&mut self, text: &str) {
        if let Some(paragraph) = self.paragraphs.last_mut() {
            paragraph.text.push_str(text);
        }
    }
}

/// The heading level of each paragraph style, by style id.
#[derive(Debug, Default)]
struct Styles {
    levels: HashMap<String, u8>,
}

impl Styles {
    /// The heading level of the style `id`: from the styles part, else from the built-in ids.
    fn level(&self, id: &str) -> Option<u8> {
        if self.levels.is_empty() {
            return builtin_level(id);
        }
        self.levels.get(id).copied()
    }
}

/// A style as `word/styles.xml` declares it.
#[derive(Debug, Default)]
struct Style {
    id: String,
    name: Option<String>,
    based_on: Option<String>,
    outline: Option<u8>,
}

/// Reads the paragraph styles' heading levels from `word/styles.xml`. A styles part that cannot
/// be read is ignored (the built-in ids are used), unless it is past a limit.
fn read_styles<R: Read>(member: Counted<R>, budget: &Budget, left: &mut u64) -> Result<Styles, ParseError> {
    let mut reader = xml_reader(member);
    let mut styles: Vec<Style> = Vec::new();
    let mut current: Option<Style> = None;
    let mut clock = Clock::default();
    let mut buf = Vec::new();
    loop {
        clock.tick(budget)?;
        buf.clear();
        let (resolved, event) = match reader.read_resolved_event_into(&mut buf) {
            Ok(read) => read,
            Err(e) => {
                let error = xml_error(reader.get_mut().get_mut(), "word/styles.xml", &e);
                if matches!(error, ParseError::TooLarge(_)) {
                    return Err(error);
                }
                tracing::debug!(%error, "ignoring the styles of a Word document");
                return Ok(Styles::default());
            }
        };
        let word = space(&resolved) == Space::Word;
        match event {
            Event::Start(element) | Event::Empty(element) if word => match element.local_name().as_ref() {
                "style" if attribute(&element, "type").as_deref() == Some("paragraph") => {
                    current = Some(Style {
                        id: attribute(&element, "styleId").unwrap_or_default(),
                        ..Style::default()
                    });
                }
                "name" => {
                    if let Some(style) = &mut current {
                        style.name = attribute(&element, "val");
                    }
                }
                "basedOn" => {
                    if let Some(style) = &mut current {
                        style.based_on = attribute(&element, "val");
                    }
                }
                "outlineLvl" => {
                    if let Some(style) = &mut current {
                        style.outline = outline_level(&element);
                    }
                }
                _ => {}
            },
            Event::End(element) if word && element.local_name().as_ref() == "style" => {
                styles.extend(current.take());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    *left = left.saturating_sub(reader.get_mut().get_mut().used);
    Ok(Styles { levels: resolve_levels(&styles) })
}

/// Each style's heading level: its name's ("heading 2", "Title"), else its outline level, else
/// the level of the style it is based on (followed a few steps, never around a loop).
fn resolve_levels(styles: &[Style]) -> HashMap<String, u8> {
    let by_id: HashMap<&str, &Style> = styles.iter().map(|s| (s.id.as_str(), s)).collect();
    let own = |style: &Style| style.name.as_deref().and_then(named_level).or(style.outline);
    let mut levels = HashMap::new();
    for style in styles {
        let mut at = Some(style);
        for _ in 0..8 {
            let Some(here) = at else { break };
            if let Some(level) = own(here) {
                levels.insert(style.id.clone(), level);
                break;
            }
            at = here.based_on.as_deref().and_then(|id| by_id.get(id).copied());
        }
    }
    levels
}

/// The level of a built-in heading style's name: "heading 1" … "heading 9", "Title".
fn named_level(name: &str) -> Option<u8> {
    let name = name.trim().to_ascii_lowercase();
    if name == "title" {
        return Some(1);
    }
    let digits = name.strip_prefix("heading")?.trim();
    digits.parse::<u8>().ok().filter(|level| (1..=9).contains(level))
}

/// The level of a built-in heading style's id, when the document has no styles part.
fn builtin_level(id: &str) -> Option<u8> {
    let lower = id.to_ascii_lowercase();
    if lower == "title" {
        return Some(1);
    }
    lower.strip_prefix("heading")?.parse::<u8>().ok().filter(|level| (1..=9).contains(level))
}

/// `w:outlineLvl w:val="N"`: N from 0 (a level-1 heading) to 8; 9 is body text.
fn outline_level(element: &BytesStart<'_>) -> Option<u8> {
    let level = attribute(element, "val")?.parse::<u8>().ok()?;
    (level < 9).then_some(level + 1)
}

/// The value of the attribute whose local name is `local` (`w:val` → `val`).
fn attribute(element: &BytesStart<'_>, local: &str) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|attribute| attribute.key.local_name().as_ref() == local)
        .and_then(|attribute| attribute.normalized_value(XmlVersion::Implicit1_0).ok().map(Cow::into_owned))
}

fn xml_reader<R: Read>(member: Counted<R>) -> NsReader<BufReader<Counted<R>>> {
    let mut reader = NsReader::from_reader(BufReader::new(member));
    reader.config_mut().trim_text(false);
    // Word declares a few dozen namespaces on the root; the default bound (128) is close.
    reader.resolver_mut().set_max_namespace_bindings(1024);
    reader
}

/// The error of an XML part that failed to read: past the inflate limit, or malformed.
fn xml_error<R>(member: &Counted<R>, part: &str, error: &quick_xml::Error) -> ParseError {
    if member.exceeded {
        ParseError::TooLarge(format!("{part} inflates past {} bytes (a decompression bomb?)", member.limit))
    } else {
        ParseError::Malformed(format!("{part} cannot be read: {error}"))
    }
}

/// A reader that lets through at most `limit` bytes of an inflating member, and remembers
/// whether the member had more.
#[derive(Debug)]
struct Counted<R> {
    inner: R,
    limit: u64,
    used: u64,
    exceeded: bool,
}

impl<R> Counted<R> {
    fn new(inner: R, limit: u64) -> Self {
        Self { inner, limit, used: 0, exceeded: false }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.limit.saturating_sub(self.used);
        if left == 0 {
            // One byte more tells a member that ends at the limit from one that goes past it.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => {
                    self.exceeded = true;
                    Err(std::io::Error::other("the inflate limit was reached"))
                }
            };
        }
        let room = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..room])?;
        self.used += read as u64;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_styles_are_found_by_name_outline_level_and_base() {
        let style = |id: &str, name: Option<&str>, based_on: Option<&str>, outline: Option<u8>| Style {
            id: id.to_owned(),
            name: name.map(str::to_owned),
            based_on: based_on.map(str::to_owned),
            outline,
        };
        let levels = resolve_levels(&[
            style("berschrift1", Some("heading 1"), None, None),
            style("Title", Some("Title"), None, None),
            style("Mine", Some("My heading"), Some("berschrift1"), None),
            style("Outlined", Some("Custom"), None, Some(3)),
            style("Normal", Some("Normal"), None, None),
            style("Loop", None, Some("Loop"), None),
        ]);
        assert_eq!(levels.get("berschrift1"), Some(&1));
        assert_eq!(levels.get("Title"), Some(&1));
        assert_eq!(levels.get("Mine"), Some(&1));
        assert_eq!(levels.get("Outlined"), Some(&3));
        assert_eq!(levels.get("Normal"), None);
        assert_eq!(levels.get("Loop"), None);
        assert_eq!(builtin_level("Heading2"), Some(2));
        assert_eq!(builtin_level("Heading10"), None);
    }

    #[test]
    fn the_counter_stops_past_its_limit() {
        let mut counted = Counted::new(&[1u8; 10][..], 4);
        let mut out = Vec::new();
        counted.read_to_end(&mut out).unwrap_err();
        assert!(counted.exceeded);
        let mut exact = Counted::new(&[1u8; 4][..], 4);
        exact.read_to_end(&mut out).unwrap();
        assert!(!exact.exceeded);
    }
}
