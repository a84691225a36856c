//! Three-state fields of partial updates: a field can be absent (keep the value), `null` (clear
//! it) or a value (set it). `Option<T>` cannot tell the first two apart.

use serde::{Deserialize, Deserializer};

/// One field of a PATCH body.
///
/// Deserialises `null` as [`Patch::Null`] and a value as [`Patch::Value`]; a field missing from
/// the body stays [`Patch::Absent`] when the containing struct marks it `#[serde(default)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Patch<T> {
    /// Not in the request: keep the current value.
    #[default]
    Absent,
    /// `null`: clear the value (or refuse, where the field cannot be empty).
    Null,
    /// A new value.
    Value(T),
}

impl<T> Patch<T> {
    /// Whether the request names the field at all.
    pub fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// Maps the value, keeping absence and null.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Self::Absent => Patch::Absent,
            Self::Null => Patch::Null,
            Self::Value(v) => Patch::Value(f(v)),
        }
    }

    /// The new state of an optional value: `current` when absent, `None` for null.
    pub fn apply_to(self, current: Option<T>) -> Option<T> {
        match self {
            Self::Absent => current,
            Self::Null => None,
            Self::Value(v) => Some(v),
        }
    }
}

impl<T> From<Option<T>> for Patch<T> {
    /// `None` is null here: a field that is present.
    fn from(value: Option<T>) -> Self {
        value.map_or(Self::Null, Self::Value)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(default)]
        a: Patch<u8>,
        #[serde(default)]
        b: Patch<u8>,
        #[serde(default)]
        c: Patch<u8>,
    }

    #[test]
    fn absent_null_and_value_are_three_states() {
        let body: Body = serde_json::from_str(r#"{"b": null, "c": 3}"#).unwrap();
        assert_eq!((body.a, body.b, body.c), (Patch::Absent, Patch::Null, Patch::Value(3)));
        assert_eq!(Patch::Absent.apply_to(Some(1)), Some(1));
        assert_eq!(Patch::<u8>::Null.apply_to(Some(1)), None);
        assert_eq!(Patch::Value(2).apply_to(Some(1)), Some(2));
        assert!(!Patch::<u8>::Absent.is_present());
        assert!(Patch::<u8>::Null.is_present());
    }
}
