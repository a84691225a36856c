#![allow(clippy::unwrap_used)]

use chrono::TimeZone;
use serde_json::{Value, json};

use super::*;
use crate::validation::FieldError;
use crate::workflows::steps::{StepAction, StepKind, validate_steps};
use crate::workflows::template::TemplateContext;

fn refused(wait: Value) -> Vec<(String, FieldErrorKind)> {
    let mut step = json!({"id": "w", "type": "wait"});
    step.as_object_mut().unwrap().extend(wait.as_object().unwrap().clone());
    validate_steps(&json!([step])).unwrap_err().into_iter().map(|e: FieldError| (e.field, e.kind)).collect()
}

#[test]
fn a_wait_takes_seconds_or_until_and_not_both() {
    for (wait, field, kind) in [
        (json!({}), "steps[0].seconds", FieldErrorKind::InvalidValue),
        (
            json!({"seconds": 5, "until": "2026-12-01T09:00:00Z"}),
            "steps[0].seconds",
            FieldErrorKind::InvalidValue,
        ),
        (json!({"seconds": 0}), "steps[0].seconds", FieldErrorKind::OutOfRange),
        (json!({"seconds": MAX_WAIT_SECONDS + 1}), "steps[0].seconds", FieldErrorKind::OutOfRange),
        (json!({"seconds": 1.5}), "steps[0].seconds", FieldErrorKind::OutOfRange),
        (json!({"seconds": "5"}), "steps[0].seconds", FieldErrorKind::InvalidType),
        (json!({"until": "next tuesday"}), "steps[0].until", FieldErrorKind::InvalidFormat),
        (json!({"until": ""}), "steps[0].until", FieldErrorKind::TooShort),
    ] {
        assert_eq!(refused(wait.clone()), [(field.to_owned(), kind)], "{wait}");
    }
    let message = validate_steps(&json!([{"id": "w", "type": "wait"}])).unwrap_err().remove(0).message;
    assert_eq!(message, "steps[0].seconds: a wait step takes seconds or until");
}

#[test]
fn a_wait_renders_to_what_it_waits_for() {
    let steps = validate_steps(&json!([
        {"id": "a", "type": "wait", "seconds": 90},
        {"id": "b", "type": "wait", "until": "2026-12-01T10:00:00+01:00"},
        {"id": "c", "type": "wait", "until": "{{ input.at }}"},
    ]))
    .unwrap();
    assert!(matches!(steps[0].kind(), StepKind::Wait(WaitStep { seconds: Some(_), until: None })));
    let ctx = TemplateContext::new(json!({"at": "2026-12-24T18:00:00Z"}));
    let rendered: Vec<StepAction> = steps.iter().map(|s| s.render(&ctx, None).unwrap()).collect();
    let nine = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
    assert_eq!(
        rendered,
        [
            StepAction::Wait(WaitFor::Seconds(90)),
            StepAction::Wait(WaitFor::Until(nine)),
            StepAction::Wait(WaitFor::Until(Utc.with_ymd_and_hms(2026, 12, 24, 18, 0, 0).unwrap())),
        ]
    );
    assert_eq!(WaitFor::Seconds(90).ends(nine), nine + chrono::Duration::seconds(90));
    assert_eq!(WaitFor::Until(nine).ends(nine - chrono::Duration::days(3)), nine);
    let wrong = steps[2].render(&TemplateContext::new(json!({"at": 5})), None).unwrap_err();
    assert!(wrong.to_string().contains("RFC 3339"), "{wrong}");
}
