//! Text that both databases can store.
//!
//! PostgreSQL's `text` and `jsonb` cannot hold U+0000 (NUL); SQLite can. So that a value is
//! stored alike on both, NUL never reaches a store:
//!
//! - what a caller sends us to keep is refused with a 422 naming the field: text fields by
//!   [`crate::validation::check_text`], free-form JSON (an execution's input, a trigger call's
//!   or an integration event's body) by [`find_nul`];
//! - what a remote party answers (an `http_request` step's response, a webhook receiver's
//!   reply, a model's answer, an error message quoting either) is kept with each NUL replaced by
//!   U+FFFD, the replacement character ([`text`], [`json`]).

use serde_json::Value;

use crate::validation::{FieldError, FieldErrorKind};

/// What stands in for a NUL in text from a remote party.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// The message a field holding NUL is refused with.
pub const NUL_REFUSED: &str = "text may not contain U+0000 (the NUL character)";

/// `s` with every NUL replaced by U+FFFD.
pub fn text(s: String) -> String {
    if s.contains('\0') { s.replace('\0', "\u{FFFD}") } else { s }
}

/// `value` with every NUL in its strings and object keys replaced by U+FFFD.
pub fn json(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(text(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(json).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (text(k), json(v))).collect()),
        other => other,
    }
}

/// Refuses free-form JSON that holds U+0000, naming where: `root` (`input`, `body`) and the
/// path within it (`input.user.name`).
///
/// # Errors
/// The [`FieldError`] of the first string or key that holds it.
pub fn check(value: &Value, root: &str) -> Result<(), FieldError> {
    match find_nul(value) {
        None => Ok(()),
        Some(path) => {
            let field = if path.is_empty() { root.to_owned() } else { format!("{root}.{path}") };
            let message = format!("{field}: {NUL_REFUSED}");
            Err(FieldError::new(field, FieldErrorKind::InvalidFormat, message))
        }
    }
}

/// The path (`input.name`, `tags[2]`; empty for the value itself) of the first string or object
/// key of `value` that holds a NUL.
pub fn find_nul(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &str) -> Option<String> {
        match value {
            Value::String(s) => s.contains('\0').then(|| path.to_owned()),
            Value::Array(items) => {
                items.iter().enumerate().find_map(|(i, v)| walk(v, &format!("{path}[{i}]")))
            }
            Value::Object(map) => map.iter().find_map(|(k, v)| {
                let child = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if k.contains('\0') { Some(child) } else { walk(v, &child) }
            }),
            _ => None,
        }
    }
    walk(value, "")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nul_is_found_by_its_path() {
        assert_eq!(find_nul(&json!({"a": {"b": ["x", "y\u{0}"]}})), Some("a.b[1]".to_owned()));
        assert_eq!(find_nul(&json!({"k\u{0}": 1})), Some("k\u{0}".to_owned()));
        assert_eq!(find_nul(&json!("\u{0}")), Some(String::new()));
        assert_eq!(find_nul(&json!({"a": "fine", "n": 0})), None);
    }

    #[test]
    fn a_refusal_names_the_field_under_its_root() {
        assert_eq!(check(&json!({"a": [1, "x\u{0}"]}), "input").unwrap_err().field, "input.a[1]");
        assert_eq!(check(&json!("\u{0}"), "body").unwrap_err().field, "body");
        assert!(check(&json!({"a": "fine"}), "input").is_ok());
    }

    #[test]
    fn nul_is_replaced_everywhere() {
        let replaced = json(json!({"k\u{0}": ["a\u{0}b", 1, {"c": "\u{0}"}]}));
        assert_eq!(replaced, json!({"k\u{FFFD}": ["a\u{FFFD}b", 1, {"c": "\u{FFFD}"}]}));
        assert_eq!(find_nul(&replaced), None);
        assert_eq!(text("plain".to_owned()), "plain");
    }
}
