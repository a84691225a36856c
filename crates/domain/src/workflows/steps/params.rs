//! The typed parameters of steps, each checked when it is deserialised and serialised back as it
//! was written (a literal `"post"` stays `"post"`), so that a stored step reads back unchanged.
//!
//! - [`Template`]: a string: plain text, or a template (see [`template`](super::super::template))
//!   that parses;
//! - [`Text`]: a required string that must read as a `T` once rendered (its text, an HTTP
//!   method, a memory type, a URL); literal text is checked as a `T` when saved;
//! - [`Headers`], [`Metadata`], [`TopK`]: an object or a number, or a template rendering to one;
//! - [`JsonTemplate`]: any JSON value whose strings are templates.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde_json::{Map, Value};

use super::{HttpMethod, MAX_TOP_K};
use crate::decode::{Fault, fault, missing};
use crate::memory::MemoryType;
use crate::validation::{FieldErrorKind, TextKind, check_text};
use crate::workflows::template;

/// A string parameter: plain text, or a template a run renders. Read only if it holds no
/// control character but tab and line breaks (so no U+0000 either) and, when it has template
/// syntax, if it parses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Template(String);

impl Template {
    fn parse(source: &str) -> Result<Self, Fault> {
        if check_text(source, "text", TextKind::MultiLine).is_err() {
            return Err(Fault::new(
                FieldErrorKind::InvalidFormat,
                "must not contain control characters other than tab and line breaks",
            ));
        }
        if template::is_template(source)
            && let Err(e) = template::analyze(source)
        {
            return Err(Fault::new(FieldErrorKind::InvalidFormat, format!("not a valid template: {e}")));
        }
        Ok(Self(source.to_owned()))
    }

    /// The string as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it has template syntax (a string without is kept as it is).
    pub fn is_template(&self) -> bool {
        template::is_template(&self.0)
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Source;
        impl Visitor<'_> for Source {
            type Value = Template;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<Template, E> {
                Template::parse(source).map_err(Fault::raise)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Template, E> {
                Err(missing())
            }
        }
        deserializer.deserialize_any(Source)
    }
}

/// What a [`Text`] parameter reads as once rendered.
pub trait TextValue: Sized {
    /// The kind of refusal of a literal that does not read.
    const REFUSAL: FieldErrorKind = FieldErrorKind::InvalidValue;

    /// Reads rendered text.
    ///
    /// # Errors
    /// What is wrong with it, as a sentence.
    fn read(text: String) -> Result<Self, String>;

    /// Checks literal (untemplated) text when the step is saved: by default, as [`Self::read`]
    /// reads it.
    ///
    /// # Errors
    /// As [`Self::read`].
    fn check_literal(text: &str) -> Result<(), String> {
        Self::read(text.to_owned()).map(drop)
    }
}

impl TextValue for String {
    fn read(text: String) -> Result<Self, String> {
        Ok(text)
    }
}

impl TextValue for HttpMethod {
    fn read(text: String) -> Result<Self, String> {
        HttpMethod::parse_any_case(text.trim()).ok_or_else(|| {
            let names: Vec<&str> = HttpMethod::ALL.iter().map(|m| m.as_str()).collect();
            format!("{text:?} is not an HTTP method; expected one of: {}", names.join(", "))
        })
    }
}

impl TextValue for MemoryType {
    fn read(text: String) -> Result<Self, String> {
        text.trim().parse::<MemoryType>().map_err(|e| e.message)
    }
}

/// The URL of an `http_request` step: read as it renders, since where it may point (and
/// whether `http` is allowed) is checked when the request is sent; a literal one must be an
/// absolute `http` or `https` URL with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestUrl(pub String);

impl TextValue for RequestUrl {
    const REFUSAL: FieldErrorKind = FieldErrorKind::InvalidFormat;

    fn read(text: String) -> Result<Self, String> {
        Ok(Self(text))
    }

    fn check_literal(text: &str) -> Result<(), String> {
        let ok = url::Url::parse(text.trim())
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if ok { Ok(()) } else { Err("must be an absolute http or https URL (or a template)".to_owned()) }
    }
}

/// A required string parameter that must read as a `T` once rendered: not blank, and when it
/// is literal text, a `T` already.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Text<T = String> {
    template: Template,
    #[serde(skip)]
    reads_as: PhantomData<fn() -> T>,
}

impl<T> Text<T> {
    /// The string as written.
    pub fn template(&self) -> &Template {
        &self.template
    }
}

impl<'de, T: TextValue> Deserialize<'de> for Text<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Source<T>(PhantomData<fn() -> T>);
        impl<T: TextValue> Visitor<'_> for Source<T> {
            type Value = Text<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<Text<T>, E> {
                if source.trim().is_empty() {
                    return Err(fault(FieldErrorKind::TooShort, "must not be empty"));
                }
                let template = Template::parse(source).map_err(Fault::raise)?;
                if !template.is_template() {
                    T::check_literal(source).map_err(|message| fault(T::REFUSAL, message))?;
                }
                Ok(Text { template, reads_as: PhantomData })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Text<T>, E> {
                Err(missing())
            }
        }
        deserializer.deserialize_any(Source(PhantomData))
    }
}

/// The `headers` of an `http_request` step: an object of header names and templates, or a
/// template rendering to one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Headers {
    /// Each header's value, a template.
    Map(BTreeMap<String, Template>),
    /// A template rendering to the whole object.
    Template(Template),
}

/// The `metadata` of a `memory_add` step: an object (its strings templates), or a template
/// rendering to one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Metadata {
    /// The object.
    Object(Map<String, Value>),
    /// A template rendering to the object.
    Template(Template),
}

/// The `top_k` of a `memory_search` step: a whole number from 1 to [`MAX_TOP_K`], as a number,
/// as text (`"7"`), or a template rendering to one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TopK {
    /// A number.
    Number(u32),
    /// Text: a number written as text, or a template.
    Text(Template),
}

/// Any JSON value (`null` too) whose strings are templates: a transform's `output`, a request's
/// `body`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct JsonTemplate(pub(super) Value);

impl JsonTemplate {
    /// The value as written.
    pub fn as_value(&self) -> &Value {
        &self.0
    }
}

const OBJECT_OR_TEMPLATE: &str = "an object (or a template rendering to one)";

/// A string that must be a template, where a literal string is not what the parameter takes.
fn templated<E: de::Error>(source: &str, expected: &dyn de::Expected) -> Result<Template, E> {
    let template = Template::parse(source).map_err(Fault::raise)?;
    if template.is_template() {
        Ok(template)
    } else {
        Err(E::invalid_type(Unexpected::Str(source), expected))
    }
}

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> Visitor<'de> for Shape {
            type Value = Headers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(OBJECT_OR_TEMPLATE)
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<Headers, E> {
                templated(source, &self).map(Headers::Template)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Headers, A::Error> {
                let mut headers = BTreeMap::new();
                while let Some(HeaderName(name)) = map.next_key()? {
                    let HeaderValue(value) = map.next_value()?;
                    headers.insert(name, value);
                }
                Ok(Headers::Map(headers))
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

/// A header's name: a `token` of RFC 9110.
struct HeaderName(String);

impl<'de> Deserialize<'de> for HeaderName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        let is_token_byte = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(fault(FieldErrorKind::InvalidFormat, format!("{name:?} is not a valid header name")));
        }
        Ok(Self(name))
    }
}

/// A header's value: a template without line breaks.
struct HeaderValue(Template);

impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Source;
        impl Visitor<'_> for Source {
            type Value = HeaderValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<HeaderValue, E> {
                if source.contains(['\r', '\n']) {
                    return Err(fault(FieldErrorKind::InvalidFormat, "must not contain line breaks"));
                }
                Template::parse(source).map(HeaderValue).map_err(Fault::raise)
            }
        }
        deserializer.deserialize_any(Source)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> Visitor<'de> for Shape {
            type Value = Metadata;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(OBJECT_OR_TEMPLATE)
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<Metadata, E> {
                templated(source, &self).map(Metadata::Template)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Metadata, A::Error> {
                read_object(map).map(Metadata::Object)
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

impl<'de> Deserialize<'de> for TopK {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        fn in_range<E: de::Error>(n: Option<u64>) -> Result<u32, E> {
            match n.and_then(|n| u32::try_from(n).ok()) {
                Some(n) if (1..=MAX_TOP_K).contains(&n) => Ok(n),
                _ => Err(fault(
                    FieldErrorKind::OutOfRange,
                    format!("must be a whole number from 1 to {MAX_TOP_K}"),
                )),
            }
        }
        impl Visitor<'_> for Shape {
            type Value = TopK;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number (or a template rendering to one)")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<TopK, E> {
                in_range(Some(n)).map(TopK::Number)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<TopK, E> {
                in_range(u64::try_from(n).ok()).map(TopK::Number)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<TopK, E> {
                in_range(None).map(TopK::Number)
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<TopK, E> {
                let template = Template::parse(source).map_err(Fault::raise)?;
                if !template.is_template() {
                    in_range::<E>(source.trim().parse().ok())?;
                }
                Ok(TopK::Text(template))
            }
            fn visit_unit<E: de::Error>(self) -> Result<TopK, E> {
                Err(missing())
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

impl<'de> Deserialize<'de> for JsonTemplate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = JsonTemplate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<JsonTemplate, E> {
                Ok(JsonTemplate(Value::Bool(b)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<JsonTemplate, E> {
                Ok(JsonTemplate(Value::from(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<JsonTemplate, E> {
                Ok(JsonTemplate(Value::from(n)))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<JsonTemplate, E> {
                Ok(JsonTemplate(Value::from(n)))
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<JsonTemplate, E> {
                let Template(source) = Template::parse(source).map_err(Fault::raise)?;
                Ok(JsonTemplate(Value::String(source)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<JsonTemplate, E> {
                Ok(JsonTemplate(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonTemplate, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(JsonTemplate(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(JsonTemplate(Value::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<JsonTemplate, A::Error> {
                read_object(map).map(|object| JsonTemplate(Value::Object(object)))
            }
        }
        deserializer.deserialize_any(Any)
    }
}

/// An object whose keys hold no control character and whose values are [`JsonTemplate`]s.
fn read_object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Map<String, Value>, A::Error> {
    let mut object = Map::new();
    while let Some(Key(key)) = map.next_key()? {
        let JsonTemplate(value) = map.next_value()?;
        object.insert(key, value);
    }
    Ok(object)
}

/// A key of an object in a parameter: single-line text.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        if check_text(&key, "key", TextKind::SingleLine).is_err() {
            return Err(fault(FieldErrorKind::InvalidFormat, "must not contain control characters"));
        }
        Ok(Self(key))
    }
}
