//! The check only a step's place in the list allows: every template of a step reads only
//! `input` and the outputs of steps before it (run after its parameters are read, since their
//! syntax is checked then).

use serde_json::{Map, Value};

use crate::validation::{FieldError, FieldErrorKind};
use crate::workflows::template::{self, STEP_OUTPUT_FIELD, TEMPLATE_ROOTS};

/// The refusals of the templates in `params` (parameters of step `index`, at `at`, that were
/// read without refusal) of a list whose ids, as written, are `ids`.
pub(super) fn check(
    at: &str,
    params: &Map<String, Value>,
    index: usize,
    ids: &[Option<&str>],
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let step = Place { index, ids };
    for (name, value) in params {
        step.templates(&format!("{at}.{name}"), value, &mut errors);
    }
    errors
}

/// A step's place: its index in a list whose ids are `ids`.
struct Place<'a> {
    index: usize,
    ids: &'a [Option<&'a str>],
}

impl Place<'_> {
    fn templates(&self, path: &str, value: &Value, errors: &mut Vec<FieldError>) {
        match value {
            Value::String(source) if template::is_template(source) => self.template(path, source, errors),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.templates(&format!("{path}[{i}]"), item, errors);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    self.templates(&format!("{path}.{key}"), item, errors);
                }
            }
            _ => {}
        }
    }

    fn template(&self, path: &str, source: &str, errors: &mut Vec<FieldError>) {
        // Its syntax was checked when the step was read.
        let Ok(refs) = template::analyze(source) else { return };
        let refuse = |message: String| FieldError::new(path, FieldErrorKind::InvalidValue, message);
        for variable in &refs.variables {
            if !TEMPLATE_ROOTS.contains(&variable.as_str()) {
                errors.push(refuse(format!(
                    "{path} reads unknown variable {variable:?}; templates read input, steps and trigger"
                )));
            }
        }
        let earlier = &self.ids[..self.index];
        for step in &refs.steps {
            let id = step.step_id.as_str();
            let problem = if earlier.contains(&Some(id)) {
                step.field.as_deref().filter(|f| *f != STEP_OUTPUT_FIELD).map(|f| {
                    format!("{path} reads steps.{id}.{f}; a step offers only steps.{id}.{STEP_OUTPUT_FIELD}")
                })
            } else if self.ids[self.index] == Some(id) {
                Some(format!("{path} reads the output of its own step {id:?}"))
            } else if self.ids[self.index + 1..].contains(&Some(id)) {
                Some(format!("{path} reads step {id:?}, which runs after this one"))
            } else {
                let hint = if self.ids.iter().flatten().any(|i| i.contains('-')) {
                    " (write steps['<id>'] for an id with a hyphen)"
                } else {
                    ""
                };
                Some(format!("{path} reads unknown step {id:?}{hint}"))
            };
            errors.extend(problem.map(refuse));
        }
    }
}
