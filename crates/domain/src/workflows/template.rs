//! The templates inside step parameters: rendering them with MiniJinja (Jinja2 syntax), and the
//! static look at what they refer to when a workflow is saved.
//!
//! Every string anywhere in a step's parameters is a template; object keys are not. A template
//! sees two variables: `input`, the execution's input, and `steps`, where `steps.<id>.output` is
//! the output of a step that already ran (`steps['<id>'].output` for ids that are not plain
//! names, such as `fetch-user`). A string is rendered by these rules:
//!
//! - with no template syntax (`{{`, `{%`, `{#`) it is kept as it is;
//! - when it is exactly one `{{ … }}` expression (white space around it allowed) the expression's
//!   value keeps its JSON type: `"{{ steps.a.output }}"` yields an object, `"{{ input.count }}"`
//!   a number;
//! - any other template renders to a string.
//!
//! Undefined values are semi-strict: printing one, iterating it, looking up an attribute of it or
//! passing it to a filter that needs a value is an error naming the variable (`input.nmae is
//! undefined`), so a typo fails its step clearly instead of sending an empty string; testing it
//! (`{% if input.flag %}`, `is defined`) and `| default(…)` still work, so optional inputs can be
//! handled.
//!
//! Printed values follow JSON rather than Python where they differ: `true`/`false`, and null
//! prints as nothing (`?cursor={{ steps.a.output.next }}` with no next cursor gives `?cursor=`).
//! No template is loaded from elsewhere: `include`, `extends`, `import` and macros do not exist.
//!
//! Rendering is bounded, so that no tenant's template can take the process down or occupy a
//! worker: a render may run [`TEMPLATE_FUEL`] instructions and must end by its deadline (the
//! step's); no value it builds (a string, a list, the rendered text) may exceed
//! [`MAX_RENDERED_BYTES`], checked as the value grows rather than once it is built; and all the
//! values it builds may add up to at most [`MAX_BUILT_BYTES`]. The limits are enforced inside
//! the engine (our MiniJinja carries them, see `vendor/minijinja/PATCHES.md`).

use std::collections::{BTreeSet, HashSet};
use std::io;
use std::sync::LazyLock;
use std::time::Instant;

use minijinja::limits::{Limits, with_limits};
use minijinja::value::ValueKind;
use minijinja::{AutoEscape, Environment, ErrorKind, Output, State, UndefinedBehavior, Value as JinjaValue};
use serde::Serialize;
use serde_json::{Map, Value};

use super::outputs::MAX_STEP_OUTPUT_BYTES;

/// The variables a template may name at its top level (besides MiniJinja's global functions
/// `range`, `dict` and `namespace`).
pub const TEMPLATE_ROOTS: [&str; 3] = ["input", "steps", "trigger"];

/// The attribute of `steps.<id>` that a template may read.
pub const STEP_OUTPUT_FIELD: &str = "output";

/// Instructions one render may execute before it is stopped.
pub const TEMPLATE_FUEL: u64 = 100_000;

/// Most bytes one string template may render to, and the largest value (a string's bytes, a
/// list's items) a render may build: as much as a step may output.
pub const MAX_RENDERED_BYTES: usize = MAX_STEP_OUTPUT_BYTES;

/// Most bytes all the values one render builds may add up to (a loop that keeps appending to a
/// list of large strings is stopped here, long before memory runs out).
pub const MAX_BUILT_BYTES: usize = 64 * 1024 * 1024;

/// How many keys an "is undefined" message lists as a hint.
const HINT_KEYS: usize = 10;

/// The one environment every render and check uses: built once, since it registers every
/// built-in filter and test.
static ENGINE: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    // A template is a JSON string, not a file: a final line break is part of the value.
    env.set_keep_trailing_newline(true);
    // Step parameters are not HTML: never escape.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_formatter(json_formatter);
    env
});

/// Prints booleans as JSON does (`true`, not Jinja's `True`) and null as nothing (not `none`),
/// since templates build URLs, headers and messages from JSON values; everything else as
/// MiniJinja prints it.
fn json_formatter(out: &mut Output, state: &State, value: &JinjaValue) -> Result<(), minijinja::Error> {
    match value.kind() {
        ValueKind::Bool => {
            out.write_str(if value.is_true() { "true" } else { "false" }).map_err(minijinja::Error::from)
        }
        ValueKind::None => Ok(()),
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// The engine, for templates borrowed for any lifetime: an environment is covariant in the
/// lifetime of its sources, so the one built for `'static` serves shorter ones.
fn engine<'s>() -> &'static Environment<'s> {
    &ENGINE
}

/// What templates see while an execution runs: its input and the outputs of the steps done.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateContext {
    input: Value,
    steps: Map<String, Value>,
    trigger: Value,
}

/// The context as templates see it: `{input, steps: {<id>: {output}}, trigger}`.
#[derive(Serialize)]
struct ContextView<'a> {
    input: &'a Value,
    steps: &'a Map<String, Value>,
    trigger: &'a Value,
}

impl TemplateContext {
    /// A context with the execution's input and no step done yet.
    pub fn new(input: Value) -> Self {
        Self { input, steps: Map::new(), trigger: Value::Null }
    }

    /// The context with the details of what started the execution, read as `trigger.*`.
    #[must_use]
    pub fn with_trigger(mut self, trigger: Value) -> Self {
        self.trigger = trigger;
        self
    }

    /// Records the output of a finished step, visible to later templates as
    /// `steps.<step_id>.output`.
    pub fn add_output(&mut self, step_id: &str, output: Value) {
        let mut entry = Map::new();
        entry.insert(STEP_OUTPUT_FIELD.to_owned(), output);
        self.steps.insert(step_id.to_owned(), Value::Object(entry));
    }

    /// The execution's input.
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// The output recorded for a step.
    pub fn output(&self, step_id: &str) -> Option<&Value> {
        self.steps.get(step_id).and_then(|s| s.get(STEP_OUTPUT_FIELD))
    }

    /// The context as one JSON object, `{input, steps, trigger}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "input": self.input, "steps": self.steps, "trigger": self.trigger })
    }

    fn view(&self) -> ContextView<'_> {
        ContextView { input: &self.input, steps: &self.steps, trigger: &self.trigger }
    }

    /// The first part of `var` (a dotted path such as `input.user.name`) that names nothing, and
    /// the keys available where it was looked up; `None` when the whole path resolves or
    /// starts with a global.
    fn first_undefined(&self, var: &str) -> Option<(String, Vec<String>)> {
        let segments: Vec<&str> = var.split('.').collect();
        let (mut current, start) = match segments.as_slice() {
            ["input", ..] => (&self.input, 1),
            ["trigger", ..] => (&self.trigger, 1),
            ["steps"] => return None,
            ["steps", id, ..] => match self.steps.get(*id) {
                Some(step) => (step, 2),
                None => return Some((format!("steps.{id}"), self.steps.keys().cloned().collect())),
            },
            [root, ..] if is_global(root) => return None,
            [root, ..] => {
                return Some(((*root).to_owned(), TEMPLATE_ROOTS.iter().map(|r| (*r).to_owned()).collect()));
            }
            [] => return None,
        };
        for (i, segment) in segments.iter().enumerate().skip(start) {
            let next = match current {
                Value::Object(map) => map.get(*segment),
                _ => None,
            };
            match next {
                Some(value) => current = value,
                None => {
                    let keys = match current {
                        Value::Object(map) => map.keys().cloned().collect(),
                        _ => Vec::new(),
                    };
                    return Some((segments[..=i].join("."), keys));
                }
            }
        }
        None
    }
}

/// A template that could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", if path.is_empty() { message.clone() } else { format!("{path}: {message}") })]
pub struct RenderError {
    /// Where the template is within the rendered value (`url`, `headers.Authorization`,
    /// `body.items[0]`); empty for the value itself.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

impl RenderError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

/// Whether `s` holds template syntax; a string without is kept as it is.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// The expression of a string that is exactly one `{{ … }}` (white space around it and
/// whitespace-control marks `{{-`/`-}}` allowed), before it is known to compile.
fn single_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner);
    let inner = inner.strip_suffix(['-', '+']).unwrap_or(inner);
    // `{{ a }} and {{ b }}` closes its first tag early: a template of several parts. (MiniJinja's
    // expression lexer must not see such a `}}`: it panics on what follows.)
    (!inner.trim().is_empty() && !closes_tag(inner)).then_some(inner)
}

/// Whether `code` holds a `}}` that would close a `{{ … }}` tag: outside string literals and
/// brackets, as MiniJinja's lexer reads it.
fn closes_tag(code: &str) -> bool {
    let bytes = code.as_bytes();
    let mut depth: isize = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => {
                i = skip_string(bytes, i);
                continue;
            }
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' => depth += 1,
            b'}' if depth == 0 && bytes.get(i + 1) == Some(&b'}') => return true,
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    false
}

/// Renders every string of `value` (recursively through arrays and objects; keys are kept) with
/// `ctx`, ending by `deadline` when one is given.
///
/// # Errors
/// [`RenderError`] for the first string that fails or runs past the deadline, naming its path
/// within `value`.
pub fn render(value: &Value, ctx: &TemplateContext, deadline: Option<Instant>) -> Result<Value, RenderError> {
    Renderer::new(ctx, deadline).value(value, "")
}

/// Renders one string with `ctx` (the rules in the [module documentation](self)).
///
/// # Errors
/// [`RenderError`] with an empty path.
pub fn render_str(template: &str, ctx: &TemplateContext) -> Result<Value, RenderError> {
    Renderer::new(ctx, None).string(template, "")
}

/// One render: the context converted once, shared by every template rendered with it (a step's
/// parameters are rendered with one).
#[derive(Debug)]
pub struct Renderer<'a> {
    root: JinjaValue,
    ctx: &'a TemplateContext,
    deadline: Option<Instant>,
}

impl<'a> Renderer<'a> {
    /// A render of templates with `ctx`, each ending by `deadline` when one is given.
    pub fn new(ctx: &'a TemplateContext, deadline: Option<Instant>) -> Self {
        Self { root: JinjaValue::from_serialize(ctx.view()), ctx, deadline }
    }

    /// Renders every string of `value` (recursively through arrays and objects; keys are
    /// kept), naming a failure by its path under `path`.
    ///
    /// # Errors
    /// [`RenderError`] for the first string that fails or runs past the deadline.
    pub fn value(&self, value: &Value, path: &str) -> Result<Value, RenderError> {
        match value {
            Value::String(s) => self.string(s, path),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.value(item, &format!("{path}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| Ok((k.clone(), self.value(v, &child_path(path, k))?)))
                .collect::<Result<Map<_, _>, _>>()
                .map(Value::Object),
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(value.clone()),
        }
    }

    /// Renders one string (the rules in the [module documentation](self)), naming a failure
    /// `path`.
    ///
    /// # Errors
    /// [`RenderError`] when it fails or runs past the deadline.
    pub fn string(&self, source: &str, path: &str) -> Result<Value, RenderError> {
        if !is_template(source) {
            return Ok(Value::String(source.to_owned()));
        }
        let limits = Limits {
            max_value_bytes: MAX_RENDERED_BYTES,
            max_total_bytes: MAX_BUILT_BYTES,
            deadline: self.deadline,
        };
        with_limits(limits, || {
            self.limited_string(source, path).map_err(|e| {
                if minijinja::limits::value_limit_hit() { RenderError::new(path, too_large()) } else { e }
            })
        })
    }

    /// Renders one template string, with the render's limits in force.
    fn limited_string(&self, source: &str, path: &str) -> Result<Value, RenderError> {
        let env = engine();
        // Parsed as a template first, so that a string is an expression only when it is also a
        // valid template (and its syntax errors are reported as a template's).
        let template = env.template_from_str(source).map_err(|e| self.error(path, source, &e))?;
        if let Some(expression) = single_expression(source)
            && let Ok(compiled) = env.compile_expression(expression)
        {
            let value = compiled.eval(&self.root).map_err(|e| self.error(path, source, &e))?;
            if value.is_undefined() {
                return Err(RenderError::new(path, self.undefined_message(source)));
            }
            // Written out within the size limit first: a value may be a lazily repeated list
            // whose JSON would be far larger than the value itself.
            let mut text = BoundedWriter { buf: Vec::new(), overflowed: false };
            return match serde_json::to_writer(&mut text, &value) {
                Err(_) if text.overflowed => Err(RenderError::new(path, too_large())),
                Err(e) => Err(RenderError::new(path, format!("the value cannot be made JSON: {e}"))),
                Ok(()) => serde_json::from_slice(&text.buf)
                    .map_err(|e| RenderError::new(path, format!("the value cannot be made JSON: {e}"))),
            };
        }
        let mut out = BoundedWriter { buf: Vec::new(), overflowed: false };
        match template.render_captured_to(&self.root, &mut out) {
            Ok(_) => {}
            Err(_) if out.overflowed => return Err(RenderError::new(path, too_large())),
            Err(e) => return Err(self.error(path, source, &e)),
        }
        String::from_utf8(out.buf)
            .map(Value::String)
            .map_err(|_| RenderError::new(path, "the template rendered invalid UTF-8"))
    }

    fn error(&self, path: &str, source: &str, error: &minijinja::Error) -> RenderError {
        let message = if error.kind() == ErrorKind::UndefinedError {
            self.undefined_message(source)
        } else {
            describe(error, source)
        };
        RenderError::new(path, message)
    }

    /// Names the variable that is undefined, found by resolving what the template refers to
    /// against the context (MiniJinja's own error does not name it).
    fn undefined_message(&self, source: &str) -> String {
        let vars: BTreeSet<String> = nested_variables(source).into_iter().collect();
        for var in vars {
            if let Some((missing, keys)) = self.ctx.first_undefined(&var) {
                let hint = if keys.is_empty() {
                    String::new()
                } else {
                    let shown: Vec<&str> = keys.iter().take(HINT_KEYS).map(String::as_str).collect();
                    let more = if keys.len() > HINT_KEYS { ", …" } else { "" };
                    format!(" (available: {}{more})", shown.join(", "))
                };
                return format!("{missing} is undefined{hint}");
            }
        }
        "the template uses an undefined value".to_owned()
    }
}

fn too_large() -> String {
    format!("the template renders to more than {MAX_RENDERED_BYTES} bytes")
}

/// Collects rendered text up to [`MAX_RENDERED_BYTES`]; writing past it fails the render.
struct BoundedWriter {
    buf: Vec<u8>,
    overflowed: bool,
}

impl io::Write for BoundedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(io::Error::other("rendered text too large"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `path.key`, or `key` at the top.
fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// A MiniJinja error as one sentence, with its line when the template has several.
fn describe(error: &minijinja::Error, source: &str) -> String {
    let mut message = match (error.kind(), error.detail()) {
        (ErrorKind::OutOfFuel, _) => "the template takes too many steps to render".to_owned(),
        (_, Some(minijinja::limits::DEADLINE_PASSED)) => {
            "the template did not finish rendering within the step's timeout".to_owned()
        }
        (kind, Some(detail)) => format!("{kind}: {detail}"),
        (kind, None) => kind.to_string(),
    };
    if source.contains('\n')
        && let Some(line) = error.line()
    {
        message.push_str(&format!(" (line {line})"));
    }
    message
}

fn is_global(name: &str) -> bool {
    engine().globals().any(|(global, _)| global == name)
}

/// The variables and attribute chains a template reads without defining them (`input`,
/// `steps.a.output.x`); empty when it does not parse.
fn nested_variables(source: &str) -> HashSet<String> {
    engine().template_from_str(source).map(|t| t.undeclared_variables(true)).unwrap_or_default()
}

/// What a template refers to, found without running it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateRefs {
    /// Top-level variables it reads, MiniJinja's globals left out.
    pub variables: BTreeSet<String>,
    /// Steps it names, as `steps.<id>…` or `steps['<id>']…`.
    pub steps: BTreeSet<StepRef>,
}

/// One step a template names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StepRef {
    /// The step's id.
    pub step_id: String,
    /// The attribute read from it (`output`), when the template reads one with a dot.
    pub field: Option<String>,
}

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateSyntaxError(pub String);

/// Checks that `source` is one MiniJinja expression (a `condition` case's `when`), not a
/// template: `input.total > 100 and steps.check.output.ok`.
///
/// # Errors
/// What is wrong with it.
pub fn check_expression(source: &str) -> Result<(), TemplateSyntaxError> {
    engine().compile_expression(source).map(|_| ()).map_err(|e| TemplateSyntaxError(describe(&e, source)))?;
    // Parsed as the template it is rendered as, under a render's limits (a constant past the
    // largest value is refused now, as for templates).
    analyze(&expression_template(source)).map(|_| ())
}

/// The template a `when` expression is rendered as: `1` when it holds (Jinja's truth: not
/// false, none, zero or empty), nothing otherwise.
pub fn expression_template(source: &str) -> String {
    format!("{{% if {source} %}}1{{% endif %}}")
}

/// Parses a template and finds what it refers to. Steps named through a computed key
/// (`steps[input.which]`) cannot be found this way; at run time they only see the steps done.
///
/// # Errors
/// [`TemplateSyntaxError`] with MiniJinja's reason and, for a template of several lines, the line.
pub fn analyze(source: &str) -> Result<TemplateRefs, TemplateSyntaxError> {
    // Compiled under a render's limits: compiling folds constant expressions, and a constant
    // past the largest value (`'x' * 99999999`) is refused here, when it is saved, rather than
    // at every render. The engine never builds it to find out (`vendor/minijinja/PATCHES.md`).
    let limits =
        Limits { max_value_bytes: MAX_RENDERED_BYTES, max_total_bytes: MAX_BUILT_BYTES, deadline: None };
    let template = with_limits(limits, || {
        let compiled = engine().template_from_str(source);
        if minijinja::limits::value_limit_hit() {
            return Err(TemplateSyntaxError(format!(
                "a constant expression builds a value over {MAX_RENDERED_BYTES} bytes, so it can never render"
            )));
        }
        compiled.map_err(|e| TemplateSyntaxError(describe(&e, source)))
    })?;
    let mut refs = TemplateRefs::default();
    for var in template.undeclared_variables(true) {
        let mut segments = var.split('.');
        let Some(root) = segments.next() else { continue };
        if !is_global(root) {
            refs.variables.insert(root.to_owned());
        }
        if root == "steps"
            && let Some(step_id) = segments.next()
        {
            let field = segments.next().map(str::to_owned);
            refs.steps.insert(StepRef { step_id: step_id.to_owned(), field });
        }
    }
    for step_id in subscripted_steps(source) {
        refs.steps.insert(StepRef { step_id, field: None });
    }
    Ok(refs)
}

/// The literal keys of `steps['<id>']` and `steps["<id>"]` in the code parts of a template
/// (`{{ }}` and `{% %}`, outside string literals, comments and raw blocks): the lookups
/// MiniJinja's analysis reports only as `steps`.
fn subscripted_steps(source: &str) -> BTreeSet<String> {
    let bytes = source.as_bytes();
    let mut found = BTreeSet::new();
    let mut pos = 0;
    while let Some(offset) = find_tag(&source[pos..]) {
        let open = pos + offset;
        let close: &[u8] = match bytes[open + 1] {
            b'{' => b"}}",
            b'%' => b"%}",
            _ => {
                // A comment: skip to its end.
                pos = source[open + 2..].find("#}").map_or(bytes.len(), |p| open + 2 + p + 2);
                continue;
            }
        };
        let (end, tag_is_raw) = scan_code(bytes, open + 2, close, &mut found);
        pos = end;
        if tag_is_raw {
            // `{% raw %}…{% endraw %}` is text; its end tag is found by name.
            pos = source[pos..]
                .find("endraw")
                .and_then(|p| source[pos + p..].find("%}").map(|q| pos + p + q + 2))
                .unwrap_or(bytes.len());
        }
    }
    found
}

/// Where the next `{{`, `{%` or `{#` starts.
fn find_tag(s: &str) -> Option<usize> {
    s.as_bytes().windows(2).position(|w| w[0] == b'{' && matches!(w[1], b'{' | b'%' | b'#'))
}

/// Scans one tag's code from `start` to its `close` mark, collecting `steps['…']` keys; returns
/// where the tag ends and whether it is `{% raw %}`.
fn scan_code(bytes: &[u8], start: usize, close: &[u8], found: &mut BTreeSet<String>) -> (usize, bool) {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut first_word: Option<&[u8]> = None;
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        if bytes[i..].starts_with(close) {
            return (i + close.len(), close == b"%}" && first_word == Some(b"raw"));
        }
        if b == b'\'' || b == b'"' {
            i = skip_string(bytes, i);
            first_word.get_or_insert(b"");
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let word_start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let word = &bytes[word_start..i];
            first_word.get_or_insert(word);
            let after_dot = word_start > 0 && bytes[word_start - 1] == b'.';
            if word == b"steps"
                && !after_dot
                && let Some(key) = literal_subscript(bytes, i)
            {
                found.insert(key);
            }
            continue;
        }
        if !(b.is_ascii_whitespace() || b == b'-' || b == b'+') {
            first_word.get_or_insert(b"");
        }
        i += 1;
    }
    (bytes.len(), false)
}

/// The index just past the string literal starting at `start` (its quote).
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The key of a `['key']` or `["key"]` (white space allowed) starting at `i`.
fn literal_subscript(bytes: &[u8], mut i: usize) -> Option<String> {
    let skip_ws = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip_ws(i);
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    i = skip_ws(i + 1);
    let quote = *bytes.get(i).filter(|b| matches!(b, b'\'' | b'"'))?;
    let key_start = i + 1;
    let key_len = bytes[key_start..].iter().position(|&b| b == quote || b == b'\\')?;
    let key_end = key_start + key_len;
    if bytes[key_end] != quote {
        // An escape inside the key: no step id has one, so it names no step.
        return None;
    }
    i = skip_ws(key_end + 1);
    if bytes.get(i) != Some(&b']') {
        return None;
    }
    // The key lies between two ASCII quotes, so it is whole UTF-8.
    String::from_utf8(bytes[key_start..key_end].to_vec()).ok()
}

#[cfg(test)]
mod tests;
