//! The `condition` step (PRODUCT.md §18): the first case whose `when` holds names the step the
//! execution goes on at; none holding, `default` does (or the next step listed).
//!
//! ```json
//! {"id": "route", "type": "condition",
//!  "cases": [{"when": "input.total > 1000", "next": "approve"},
//!            {"when": "steps.check.output.body.flagged", "next": "review"}],
//!  "default": "ship"}
//! ```
//!
//! Its output is `{case, next}`: the index of the case taken (null for the default) and the
//! step it leads to (null for the next listed).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, de};

use super::StepId;
use crate::decode::{self, Object};
use crate::validation::FieldErrorKind;
use crate::workflows::template::{self, RenderError, Renderer};

/// Most cases a `condition` may list.
pub const MAX_CASES: usize = 20;

/// A MiniJinja expression over `input`, `steps.<id>.output` and `trigger`, checked to parse
/// when the workflow is saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Expression(String);

impl Expression {
    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it holds, rendered with `r` (its failure named `path`).
    fn holds(&self, r: &Renderer<'_>, path: &str) -> Result<bool, RenderError> {
        let rendered = r.string(&template::expression_template(&self.0), path)?;
        Ok(rendered.as_str() == Some("1"))
    }
}

impl<'de> Deserialize<'de> for Expression {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Source;
        impl de::Visitor<'_> for Source {
            type Value = Expression;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, source: &str) -> Result<Expression, E> {
                if source.trim().is_empty() {
                    return Err(decode::fault(FieldErrorKind::TooShort, "must not be empty"));
                }
                template::check_expression(source).map_err(|e| {
                    decode::fault(FieldErrorKind::InvalidFormat, format!("not a valid expression: {e}"))
                })?;
                Ok(Expression(source.to_owned()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Expression, E> {
                Err(decode::missing())
            }
        }
        deserializer.deserialize_any(Source)
    }
}

/// One case of a `condition`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionCase {
    /// When it holds.
    pub when: Expression,
    /// The step the execution goes on at then.
    pub next: StepId,
}

/// A `condition` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionStep {
    /// The cases, tried in order: 1–[`MAX_CASES`].
    #[serde(deserialize_with = "cases")]
    pub cases: Vec<ConditionCase>,
    /// The step the execution goes on at when no case holds; absent: the next listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<StepId>,
}

fn cases<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ConditionCase>, D::Error> {
    let cases: Vec<ConditionCase> =
        Vec::<Object<ConditionCase>>::deserialize(deserializer)?.into_iter().map(|c| c.0).collect();
    if cases.is_empty() || cases.len() > MAX_CASES {
        return Err(decode::fault(FieldErrorKind::OutOfRange, format!("must list 1 to {MAX_CASES} cases")));
    }
    Ok(cases)
}

impl ConditionStep {
    /// The case that holds first (its index), and the step it leads to: that case's, or the
    /// default (`None`: the next step listed).
    ///
    /// # Errors
    /// [`RenderError`] naming the case (`cases[1].when`) whose expression failed.
    pub fn decide(&self, r: &Renderer<'_>) -> Result<(Option<usize>, Option<String>), RenderError> {
        for (i, case) in self.cases.iter().enumerate() {
            if case.when.holds(r, &format!("cases[{i}].when"))? {
                return Ok((Some(i), Some(case.next.as_str().to_owned())));
            }
        }
        Ok((None, self.default.as_ref().map(|d| d.as_str().to_owned())))
    }

    /// Every step it may lead to, with the path that names it.
    pub fn targets(&self) -> impl Iterator<Item = (String, &StepId)> {
        let cases = self.cases.iter().enumerate().map(|(i, c)| (format!("cases[{i}].next"), &c.next));
        cases.chain(self.default.iter().map(|d| ("default".to_owned(), d)))
    }
}
