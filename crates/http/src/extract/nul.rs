//! The one rule every JSON body passes before a route reads it: no string or object key the
//! route reads may hold U+0000. PostgreSQL cannot store it and SQLite can
//! (`agentry_domain::storable`), so a value that reached one store but not the other would
//! differ between them, or fail as a 500 on PostgreSQL. What a route does not read (an unknown
//! field, which every route ignores) is not judged: it is never stored.

use agentry_domain::storable::NUL_REFUSED;
use agentry_domain::validation::FieldErrorKind;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `a.b[0].c`, as validation errors name fields.
fn field(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The paths of every string and object key of `value` that holds U+0000, in document order.
fn nul_paths(value: &Value, at: &mut Vec<Step>, found: &mut Vec<Vec<Step>>) {
    match value {
        Value::String(s) if s.contains('\0') => found.push(at.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Step::Index(i));
                nul_paths(item, at, found);
                at.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                at.push(Step::Key(key.clone()));
                if key.contains('\0') {
                    found.push(at.clone());
                } else {
                    nul_paths(item, at, found);
                }
                at.pop();
            }
        }
        _ => {}
    }
}

/// The steps of a path `serde_ignored` reports.
fn steps(path: &serde_ignored::Path<'_>) -> Vec<Step> {
    use serde_ignored::Path;
    let mut out = match path {
        Path::Root => return Vec::new(),
        Path::Seq { parent, .. }
        | Path::Map { parent, .. }
        | Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => steps(parent),
    };
    match path {
        Path::Seq { index, .. } => out.push(Step::Index(*index)),
        Path::Map { key, .. } => out.push(Step::Key(key.clone())),
        _ => {}
    }
    out
}

/// Refuses `value`, read as a `T`, when a string or key that `T` reads holds U+0000, naming
/// the first one's field (`body` for the value itself).
pub(super) fn refuse_in<T: DeserializeOwned>(value: &Value) -> Result<(), ApiError> {
    let mut found = Vec::new();
    nul_paths(value, &mut Vec::new(), &mut found);
    if found.is_empty() {
        return Ok(());
    }
    // What `T` ignores (unknown fields, at any depth), found by reading it; a value `T` cannot
    // read is refused by the typed read itself, which names the fault.
    let mut ignored: Vec<Vec<Step>> = Vec::new();
    let _ = serde_ignored::deserialize::<_, _, T>(value, |path| ignored.push(steps(&path)));
    match found.into_iter().find(|path| !ignored.iter().any(|skip| path.starts_with(skip))) {
        None => Ok(()),
        Some(path) => {
            let name = if path.is_empty() { "body".to_owned() } else { field(&path) };
            let message = format!("{name}: {NUL_REFUSED}");
            Err(ApiError::field(name, FieldErrorKind::InvalidFormat, message))
        }
    }
}

/// Whether JSON text may hold U+0000: it has a `\u0000` escape (the only way JSON writes one)
/// whose backslash is not itself escaped. A scan of the bytes, so that only such bodies are
/// parsed a second time.
fn may_hold_nul(body: &[u8]) -> bool {
    const ESCAPE: &[u8] = b"\\u0000";
    body.windows(ESCAPE.len()).enumerate().any(|(at, window)| {
        window == ESCAPE && body[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0
    })
}

/// [`refuse_in`] for a JSON body as it arrived.
pub(super) fn refuse<T: DeserializeOwned>(body: &[u8]) -> Result<(), ApiError> {
    if !may_hold_nul(body) {
        return Ok(());
    }
    // A body that does not parse is refused by the typed read, which names the fault.
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => refuse_in::<T>(&value),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Request {
        name: Option<String>,
        input: Option<Value>,
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        name: Option<String>,
    }

    fn refused(body: &Value) -> Option<String> {
        refuse_in::<Request>(body).err().map(|e| format!("{e:?}"))
    }

    #[test]
    fn a_nul_escape_is_found_unless_its_backslash_is_escaped() {
        for (body, holds) in [
            (r#"{"a": "x\u0000y"}"#, true),
            (r#"{"a\u0000": 1}"#, true),
            (r#"{"a": "\\\u0000"}"#, true),
            (r#"{"a": "\\u0000"}"#, false),
            (r#"{"a": "u0000"}"#, false),
            (r#"{"a": "\u00001"}"#, true),
            (r#"{"a": "\u0001"}"#, false),
        ] {
            assert_eq!(may_hold_nul(body.as_bytes()), holds, "{body}");
        }
    }

    #[test]
    fn a_nul_the_route_reads_is_refused_naming_its_field() {
        let e = refused(&json!({"items": [{"name": "a\u{0}"}]})).unwrap();
        assert!(e.contains("items[0].name"), "{e}");
        let e = refused(&json!({"input": {"a\u{0}": 1}})).unwrap();
        assert!(e.contains("input.a\\0"), "{e}");
        let e = refused(&json!({"input": {"deep": ["x", "a\u{0}"]}})).unwrap();
        assert!(e.contains("input.deep[1]"), "{e}");
    }

    #[test]
    fn a_nul_in_what_the_route_ignores_is_not_judged() {
        assert!(refused(&json!({"name": "ok", "extra\u{0}": "x"})).is_none());
        assert!(refused(&json!({"name": "ok", "extra": {"deep": "a\u{0}"}})).is_none());
        assert!(refused(&json!({"items": [{"name": "ok", "other": "a\u{0}"}]})).is_none());
        // What it reads is still judged beside what it ignores.
        assert!(refused(&json!({"extra": "a\u{0}", "name": "b\u{0}"})).unwrap().contains("\"name"));
        assert!(refuse::<Request>(br#"{"not json"#).is_ok(), "left to the typed read");
    }
}
