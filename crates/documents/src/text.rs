//! Plain text and CSV.
//!
//! Both must be UTF-8: a byte sequence that is not is a damaged (or mis-typed) file, and decoding
//! it lossily would index replacement characters. A UTF-8 byte order mark is dropped.
//!
//! CSV: the first row names the columns, and each record becomes one block
//! `"name: value; other: value"` (empty values left out), so a chunk cut on records keeps every
//! value next to its column's name. Rows may be ragged (extra values are named `column N`). The
//! delimiter is the comma unless the header line holds more semicolons or tabs than commas, as
//! spreadsheets in some locales export.

use agentry_domain::knowledge::{ParseError, ParsedDocument};

use crate::outline::{Budget, Clock, Outline, one_line};

/// Plain text: one section, one block per paragraph.
pub(crate) fn parse_text(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    let text = utf8(bytes)?;
    let mut outline = Outline::new(budget);
    outline.paragraphs(text)?;
    Ok(outline.finish(None))
}

/// CSV: one section, one block per record.
pub(crate) fn parse_csv(bytes: &[u8], budget: &Budget) -> Result<ParsedDocument, ParseError> {
    let text = utf8(bytes)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .delimiter(delimiter(text))
        .from_reader(text.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| ParseError::Malformed(format!("the CSV header row cannot be read: {e}")))?
        .iter()
        .map(one_line)
        .collect();
    let mut outline = Outline::new(budget);
    let mut clock = Clock::default();
    let mut record = csv::StringRecord::new();
    let mut block = String::new();
    loop {
        clock.tick(budget)?;
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(ParseError::Malformed(format!("the CSV cannot be read: {e}"))),
        }
        block.clear();
        for (index, value) in record.iter().enumerate() {
            let value = one_line(value);
            if value.is_empty() {
                continue;
            }
            if !block.is_empty() {
                block.push_str("; ");
            }
            match headers.get(index).filter(|name| !name.is_empty()) {
                Some(name) => block.push_str(name),
                None => block.push_str(&format!("column {}", index + 1)),
            }
            block.push_str(": ");
            block.push_str(&value);
        }
        outline.block(&block)?;
    }
    // A header row without records holds no data: `NoText`.
    Ok(outline.finish(None))
}

/// `bytes` as UTF-8 without a byte order mark, or [`ParseError::Malformed`].
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, ParseError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        ParseError::Malformed(format!(
            "the text is not UTF-8 (an invalid byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// The delimiter of a CSV file, from its first line: `;` or tab when there are more of those
/// than commas (outside quotes), else `,`.
fn delimiter(text: &str) -> u8 {
    let first = text.lines().next().unwrap_or_default();
    let (mut commas, mut semicolons, mut tabs, mut quoted) = (0usize, 0usize, 0usize, false);
    for c in first.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => commas += 1,
            ';' if !quoted => semicolons += 1,
            '\t' if !quoted => tabs += 1,
            _ => {}
        }
    }
    if semicolons > commas && semicolons >= tabs {
        b';'
    } else if tabs > commas && tabs > semicolons {
        b'\t'
    } else {
        b','
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delimiter_is_sniffed_from_the_header() {
        assert_eq!(delimiter("a,b,c\n1;2;3;4"), b',');
        assert_eq!(delimiter("a;b;c\n"), b';');
        assert_eq!(delimiter("a\tb\tc"), b'\t');
        assert_eq!(delimiter("\"x;y;z\",b"), b',');
        assert_eq!(delimiter(""), b',');
    }
}
