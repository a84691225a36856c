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

/// Collects field errors while a command is assembled, so a client hears about every bad field
/// at once rather than one per round trip.
#[derive(Debug, Default)]
pub struct Validator {
    errors: Vec<FieldError>,
}

impl Validator {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the value of `result`, or records its error under `field` and returns `None`.
    pub fn check<T>(&mut self, field: &str, result: Result<T, FieldError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.errors.push(error.for_field(field));
                None
            }
        }
    }

    /// Like [`Validator::check`] for a required field that may be absent.
    pub fn required<T, U>(
        &mut self,
        field: &str,
        value: Option<T>,
        parse: impl FnOnce(T) -> Result<U, FieldError>,
    ) -> Option<U> {
        match value {
            Some(value) => self.check(field, parse(value)),
            None => {
                self.errors.push(FieldError::missing(field));
                None
            }
        }
    }

    /// Like [`Validator::check`] for an optional field: absent stays `Some(None)`.
    pub fn optional<T, U>(
        &mut self,
        field: &str,
        value: Option<T>,
        parse: impl FnOnce(T) -> Result<U, FieldError>,
    ) -> Option<Option<U>> {
        match value {
            Some(value) => self.check(field, parse(value)).map(Some),
            None => Some(None),
        }
    }

    /// Records an error directly.
    pub fn push(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    /// `Ok(())` when nothing was refused.
    pub fn finish(self) -> Result<(), ValidationErrors> {
        if self.errors.is_empty() { Ok(()) } else { Err(ValidationErrors(self.errors)) }
    }
}

/// Declares a name-like value object: text trimmed of surrounding white space and bounded in
/// characters, reported under `field` when refused.
#[macro_export]
macro_rules! bounded_text {
    ($(#[$meta:meta])* $name:ident, $field:literal, $min:literal..=$max:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            /// Validates and trims the value.
            ///
            /// # Errors
            /// A [`FieldError`](crate::validation::FieldError) when the trimmed value is outside
            #[doc = concat!(stringify!($min), "–", stringify!($max), " characters.")]
            pub fn new(raw: &str) -> Result<Self, $crate::validation::FieldError> {
                let value = raw.trim();
                $crate::validation::check_length(value, $min, $max, $field)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validator_collects_every_error() {
        let mut v = Validator::new();
        let a: Option<u8> = v.required("a", None::<u8>, Ok);
        let b = v.check("b", Err::<u8, _>(FieldError::new("x", FieldErrorKind::TooLong, "long")));
        let c = v.optional("c", None::<u8>, Ok);
        assert_eq!((a, b, c), (None, None, Some(None)));
        let errors = v.finish().unwrap_err().0;
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
