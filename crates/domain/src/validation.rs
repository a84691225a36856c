//! Field-level validation errors, reported by every value object's constructor.
//!
//! The HTTP adapter renders these as `details` in either error envelope; the domain only says
//! which field is wrong and why.

use std::fmt;

/// Why a field was refused. The snake_case name is part of the API (`reason` in the wrapped
/// envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The field is required and was absent or null.
    MissingRequiredField,
    /// The value has the wrong JSON type.
    InvalidType,
    /// The value does not have the required form (an e-mail without `@`).
    InvalidFormat,
    /// The value is shorter than allowed.
    TooShort,
    /// The value is longer than allowed.
    TooLong,
    /// A number outside its allowed range.
    OutOfRange,
    /// A value outside the allowed set (an unknown enum member).
    InvalidValue,
}

impl FieldErrorKind {
    /// The stable, snake_case code of this kind.
    pub fn code(self) -> &'static str {
        match self {
            Self::MissingRequiredField => "missing_required_field",
            Self::InvalidType => "invalid_type",
            Self::InvalidFormat => "invalid_format",
            Self::TooShort => "too_short",
            Self::TooLong => "too_long",
            Self::OutOfRange => "out_of_range",
            Self::InvalidValue => "invalid_value",
        }
    }
}

/// One refused field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name as the client sent it (`email`, `config.temperature`).
    pub field: String,
    /// Why it was refused.
    pub kind: FieldErrorKind,
    /// A human-readable sentence.
    pub message: String,
}

impl FieldError {
    /// A refusal of `field` for `kind`, explained by `message`.
    pub fn new(field: impl Into<String>, kind: FieldErrorKind, message: impl Into<String>) -> Self {
        Self { field: field.into(), kind, message: message.into() }
    }

    /// The field was required but absent.
    pub fn missing(field: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field} is required");
        Self::new(field, FieldErrorKind::MissingRequiredField, message)
    }

    /// The same error reported under another field name (a value object does not know the
    /// name of the field it was read from).
    pub fn for_field(mut self, field: impl Into<String>) -> Self {
        self.field = field.into();
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// A request that failed validation, with every refused field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid request: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// A single refused field.
    pub fn one(error: FieldError) -> Self {
        Self(vec![error])
    }
}

/// A value the [`Validator`] checked: present exactly when its check passed. Only
/// [`Validator::finish`] opens it, so a value that failed cannot be used by mistake.
#[derive(Debug)]
#[must_use = "hand checked values to Validator::finish"]
pub struct Checked<T>(Option<T>);

/// A tuple of [`Checked`] values, opened together by [`Validator::finish`].
pub trait CheckedValues {
    /// The values, when every one passed.
    type Values;
    /// `Some` with every value when each one is present.
    fn open(self) -> Option<Self::Values>;
}

impl<T> Checked<T> {
    /// The value changed by `f`, if it passed.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Checked<U> {
        Checked(self.0.map(f))
    }
}

impl<T> CheckedValues for Checked<T> {
    type Values = T;
    fn open(self) -> Option<T> {
        self.0
    }
}

macro_rules! checked_tuple {
    ($($name:ident),+) => {
        impl<$($name),+> CheckedValues for ($(Checked<$name>,)+) {
            type Values = ($($name,)+);
            #[allow(non_snake_case)]
            fn open(self) -> Option<Self::Values> {
                let ($($name,)+) = self;
                Some(($($name.0?,)+))
            }
        }
    };
}
checked_tuple!(A);
checked_tuple!(A, B);
checked_tuple!(A, B, C);
checked_tuple!(A, B, C, D);
checked_tuple!(A, B, C, D, E);
checked_tuple!(A, B, C, D, E, F);
checked_tuple!(A, B, C, D, E, F, G);
checked_tuple!(A, B, C, D, E, F, G, H);
checked_tuple!(A, B, C, D, E, F, G, H, I);
checked_tuple!(A, B, C, D, E, F, G, H, I, J);
checked_tuple!(A, B, C, D, E, F, G, H, I, J, K);
checked_tuple!(A, B, C, D, E, F, G, H, I, J, K, L);
checked_tuple!(A, B, C, D, E, F, G, H, I, J, K, L, M);
checked_tuple!(A, B, C, D, E, F, G, H, I, J, K, L, M, N);

/// Collects field errors while a command is assembled, so a client hears about every bad field
/// at once rather than one per round trip, and hands back the parsed values when all passed:
///
/// ```
/// use agentry_domain::validation::{FieldError, Validator};
///
/// let mut v = Validator::new();
/// let name = v.required("name", Some("Ada".to_owned()), |n| Ok::<_, FieldError>(n.len()));
/// let age = v.optional("age", None::<u8>, Ok);
/// let (name, age) = v.finish((name, age)).unwrap();
/// assert_eq!((name, age), (3, None));
/// ```
#[derive(Debug, Default)]
pub struct Validator {
    errors: Vec<FieldError>,
}

impl Validator {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the value of `result`, or records its error under `field`.
    pub fn check<T>(&mut self, field: &str, result: Result<T, FieldError>) -> Checked<T> {
        match result {
            Ok(value) => Checked(Some(value)),
            Err(error) => {
                self.errors.push(error.for_field(field));
                Checked(None)
            }
        }
    }

    /// Like [`Validator::check`], keeping the field name the error carries (for errors of
    /// nested fields such as `config.temperature`).
    pub fn check_nested<T>(&mut self, result: Result<T, FieldError>) -> Checked<T> {
        match result {
            Ok(value) => Checked(Some(value)),
            Err(error) => {
                self.errors.push(error);
                Checked(None)
            }
        }
    }

    /// Like [`Validator::check_nested`] for a check that reports several errors at once (a
    /// list whose items are checked together, such as a workflow's steps).
    pub fn check_all<T>(&mut self, result: Result<T, Vec<FieldError>>) -> Checked<T> {
        match result {
            Ok(value) => Checked(Some(value)),
            Err(errors) => {
                self.errors.extend(errors);
                Checked(None)
            }
        }
    }

    /// Like [`Validator::check`] for a required field that may be absent.
    pub fn required<T, U>(
        &mut self,
        field: &str,
        value: Option<T>,
        parse: impl FnOnce(T) -> Result<U, FieldError>,
    ) -> Checked<U> {
        match value {
            Some(value) => self.check(field, parse(value)),
            None => {
                self.errors.push(FieldError::missing(field));
                Checked(None)
            }
        }
    }

    /// Like [`Validator::check`] for an optional field: absent stays `None`.
    pub fn optional<T, U>(
        &mut self,
        field: &str,
        value: Option<T>,
        parse: impl FnOnce(T) -> Result<U, FieldError>,
    ) -> Checked<Option<U>> {
        match value {
            Some(value) => match parse(value) {
                Ok(v) => Checked(Some(Some(v))),
                Err(error) => {
                    self.errors.push(error.for_field(field));
                    Checked(None)
                }
            },
            None => Checked(Some(None)),
        }
    }

    /// Builds one value from several checked ones (a nested object from its fields): present
    /// when all of them are; their errors are already recorded.
    pub fn combine<C: CheckedValues, U>(
        &mut self,
        checked: C,
        build: impl FnOnce(C::Values) -> U,
    ) -> Checked<U> {
        Checked(checked.open().map(build))
    }

    /// The values of a list of checked items (the elements of an array field): present when
    /// every item is.
    pub fn all<T>(&mut self, items: Vec<Checked<T>>) -> Checked<Vec<T>> {
        Checked(items.into_iter().map(|c| c.0).collect())
    }

    /// Records an error directly.
    pub fn push(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    /// The checked values when nothing was refused; every refused field otherwise.
    ///
    /// # Errors
    /// [`ValidationErrors`] with each refused field, in the order they were checked.
    pub fn finish<C: CheckedValues>(self, checked: C) -> Result<C::Values, ValidationErrors> {
        if !self.errors.is_empty() {
            return Err(ValidationErrors(self.errors));
        }
        // Every `Checked` without a value recorded an error, so with none recorded all are
        // present; a `Checked` from another validator is the only way to get here.
        checked.open().ok_or_else(|| {
            ValidationErrors::one(FieldError::new(
                "body",
                FieldErrorKind::InvalidValue,
                "the request could not be validated",
            ))
        })
    }

    /// `Ok(())` when nothing was refused.
    ///
    /// # Errors
    /// [`ValidationErrors`] with each refused field.
    pub fn finish_empty(self) -> Result<(), ValidationErrors> {
        if self.errors.is_empty() { Ok(()) } else { Err(ValidationErrors(self.errors)) }
    }
}

/// Declares a name-like value object: single-line text of at most `max` characters, trimmed of
/// surrounding white space to at least `min`, reported under `field` when refused.
#[macro_export]
macro_rules! bounded_text {
    ($(#[$meta:meta])* $name:ident, $field:literal, $min:literal..=$max:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            /// Shortest accepted value, in characters after trimming.
            pub const MIN_CHARS: usize = $min;
            /// Longest accepted value, in characters after trimming.
            pub const MAX_CHARS: usize = $max;

            /// Validates and trims the value.
            ///
            /// # Errors
            /// A [`FieldError`](crate::validation::FieldError) when the value holds a control
            /// character or the trimmed value is outside
            #[doc = concat!(stringify!($min), "–", stringify!($max), " characters.")]
            pub fn new(raw: &str) -> Result<Self, $crate::validation::FieldError> {
                $crate::validation::check_text(raw, $field, $crate::validation::TextKind::SingleLine)?;
                // The bound applies to the text as sent, the minimum to what is left after
                // trimming: what the published schema says (`maxLength`, and a pattern that
                // asks for one character that is not white space).
                $crate::validation::check_length(raw, 0, $max, $field)?;
                let value = raw.trim();
                $crate::validation::check_length(value, $min, usize::MAX, $field)?;
                Ok(Self(value.to_owned()))
            }

            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
    };
}

/// Checks the length of `value` in characters (not bytes) against `min..=max`.
///
/// # Errors
/// [`FieldErrorKind::TooShort`] or [`FieldErrorKind::TooLong`] naming `what`.
pub fn check_length(value: &str, min: usize, max: usize, what: &str) -> Result<(), FieldError> {
    let len = value.chars().count();
    if len < min {
        let message = if min == 1 {
            format!("{what} must not be empty")
        } else {
            format!("{what} must be at least {min} characters")
        };
        return Err(FieldError::new(what, FieldErrorKind::TooShort, message));
    }
    if len > max {
        return Err(FieldError::new(
            what,
            FieldErrorKind::TooLong,
            format!("{what} must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// What control characters a text field may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// Names, identifiers, tokens: no control character at all.
    SingleLine,
    /// Long text (messages, descriptions, prompts): tab, line feed and carriage return only.
    MultiLine,
}

/// Refuses U+0000 and every other control character (C0, DEL, C1), except tab, line feed and
/// carriage return in [`TextKind::MultiLine`] text. Both databases then store exactly the same
/// strings: PostgreSQL cannot store U+0000 in text at all.
///
/// # Errors
/// [`FieldErrorKind::InvalidFormat`] naming `what`.
pub fn check_text(value: &str, what: &str, kind: TextKind) -> Result<(), FieldError> {
    let allowed = |c: char| kind == TextKind::MultiLine && matches!(c, '\t' | '\n' | '\r');
    if value.chars().any(|c| c.is_control() && !allowed(c)) {
        let message = match kind {
            TextKind::SingleLine => format!("{what} must not contain control characters"),
            TextKind::MultiLine => {
                format!("{what} must not contain control characters other than tab and line breaks")
            }
        };
        return Err(FieldError::new(what, FieldErrorKind::InvalidFormat, message));
    }
    Ok(())
}

/// Checks every string of a free-form JSON value (keys included) with [`check_text`] as
/// multi-line text, naming the first offending path (`metadata.note`).
///
/// # Errors
/// [`FieldErrorKind::InvalidFormat`] naming the path of the offending string.
pub fn check_json_text(value: &serde_json::Value, path: &str) -> Result<(), FieldError> {
    use serde_json::Value;
    match value {
        Value::String(s) => check_text(s, path, TextKind::MultiLine),
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check_json_text(v, &format!("{path}[{i}]")))
        }
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            let child = format!("{path}.{k}");
            check_text(k, &child, TextKind::SingleLine)?;
            check_json_text(v, &child)
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

/// Checks a long, free text field: control characters ([`TextKind::MultiLine`]) and its length
/// in characters.
///
/// # Errors
/// As [`check_text`] and [`check_length`].
pub fn check_long_text(value: &str, min: usize, max: usize, what: &str) -> Result<(), FieldError> {
    check_text(value, what, TextKind::MultiLine)?;
    check_length(value, min, max, what)
}

/// An identifier taken from a request path: refused (as a validation error naming `what`) only
/// when it holds a control character; anything else is looked up and simply matches nothing
/// when it is not an identifier of ours.
///
/// # Errors
/// [`FieldErrorKind::InvalidFormat`].
pub fn check_path_id(value: &str, what: &str) -> Result<(), FieldError> {
    check_text(value, what, TextKind::SingleLine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validator_collects_every_error() {
        let mut v = Validator::new();
        let a: Checked<u8> = v.required("a", None::<u8>, Ok);
        let b = v.check("b", Err::<u8, _>(FieldError::new("x", FieldErrorKind::TooLong, "long")));
        let c = v.optional("c", None::<u8>, Ok);
        let errors = v.finish((a, b, c)).unwrap_err().0;
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].kind, FieldErrorKind::MissingRequiredField);
        assert_eq!(errors[1].field, "b");
    }

    #[test]
    fn length_is_counted_in_characters() {
        assert!(check_length("ééé", 3, 3, "name").is_ok());
        assert_eq!(check_length("", 1, 3, "name").unwrap_err().kind, FieldErrorKind::TooShort);
        assert_eq!(check_length("abcd", 1, 3, "name").unwrap_err().kind, FieldErrorKind::TooLong);
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn a_validator_hands_back_every_value_when_all_pass() {
        let mut v = Validator::new();
        let a = v.required("a", Some(1u8), Ok);
        let b = v.optional("b", Some("x"), |s| Ok(s.len()));
        let c = v.check("c", Ok::<_, FieldError>(true));
        assert_eq!(v.finish((a, b, c)).unwrap(), (1, Some(1), true));
    }

    #[test]
    fn control_characters_are_refused_but_tabs_and_newlines_in_long_text() {
        for bad in ["a\u{0}b", "\u{1b}[31m", "x\u{7f}", "\u{85}", "a\tb", "a\nb"] {
            let e = check_text(bad, "name", TextKind::SingleLine).unwrap_err();
            assert_eq!((e.field.as_str(), e.kind), ("name", FieldErrorKind::InvalidFormat), "{bad:?}");
        }
        for ok in ["a\tb", "line\nline", "crlf\r\n", "émoji 🎉"] {
            assert!(check_text(ok, "message", TextKind::MultiLine).is_ok(), "{ok:?}");
        }
        assert!(check_text("a\u{0}", "message", TextKind::MultiLine).is_err());
        assert!(check_text("Ada Lovelace", "name", TextKind::SingleLine).is_ok());
    }

    #[test]
    fn free_form_json_is_checked_everywhere_and_names_the_path() {
        let ok = serde_json::json!({"a": ["x", {"b": "line\nbreak"}], "n": 1});
        assert!(check_json_text(&ok, "metadata").is_ok());
        let bad = serde_json::json!({"a": ["x", {"b": "nul\u{0}"}]});
        assert_eq!(check_json_text(&bad, "metadata").unwrap_err().field, "metadata.a[1].b");
        let bad_key = serde_json::json!({"k\u{0}": 1});
        assert!(check_json_text(&bad_key, "metadata").is_err());
    }
}
