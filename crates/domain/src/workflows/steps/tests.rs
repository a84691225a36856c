#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::ids::AgentId;
use crate::validation::FieldErrorKind;
use crate::workflows::template::TemplateContext;

fn errors(steps: Value) -> Vec<FieldError> {
    validate_steps(&steps).unwrap_err()
}

/// The single error of `steps`, as (field, kind).
fn only_error(steps: Value) -> (String, FieldErrorKind, String) {
    let errors = errors(steps);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let e = errors.into_iter().next().unwrap();
    (e.field, e.kind, e.message)
}

#[test]
fn a_workflow_of_every_step_type_is_accepted() {
    let raw = json!([
        {"id": "start", "type": "transform", "output": {"who": "{{ input.name | upper }}", "n": 1}},
        {"id": "ask", "type": "agent_chat", "agent_id": "{{ input.agent }}",
         "message": "Hello {{ steps.start.output.who }}", "timeout_seconds": 120},
        {"id": "post-it", "type": "http_request", "method": "post", "url": "https://example.com/x",
         "headers": {"Authorization": "Bearer {{ input.token }}"}, "body": {"answer": "{{ steps.ask.output.content }}"}},
        {"id": "find", "type": "memory_search", "query": "{{ steps['post-it'].output.body }}", "top_k": 5,
         "memory_type": "semantic"},
        {"id": "keep", "type": "memory_add", "content": "{{ steps.find.output.results | tojson }}",
         "memory_type": "{{ input.kind }}", "metadata": {"from": "workflow"}, "agent_id": null},
    ]);
    let steps = validate_steps(&raw).unwrap();
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[1].timeout(), Duration::from_secs(120));
    assert_eq!(steps[0].timeout(), Duration::from_secs(u64::from(DEFAULT_STEP_TIMEOUT_SECONDS)));
    assert_eq!(steps[2].step_type(), StepType::HttpRequest);
    // An optional parameter given as null is left out; everything else round-trips.
    assert!(matches!(steps[4].kind(), StepKind::MemoryAdd(MemoryAddStep { agent_id: None, .. })));
    let mut expected = raw.clone();
    expected[4].as_object_mut().unwrap().remove("agent_id");
    assert_eq!(steps_to_json(&steps), expected);
    assert_eq!(validate_steps(&steps_to_json(&steps)).unwrap(), steps);
}

#[test]
fn the_list_itself_is_checked() {
    assert_eq!(only_error(json!([])).1, FieldErrorKind::TooShort);
    assert_eq!(only_error(json!({"id": "a"})).1, FieldErrorKind::InvalidType);
    assert_eq!(only_error(Value::Null).1, FieldErrorKind::MissingRequiredField);
    let many: Vec<Value> =
        (0..=MAX_STEPS).map(|i| json!({"id": format!("s{i}"), "type": "transform", "output": i})).collect();
    assert_eq!(only_error(Value::Array(many)).1, FieldErrorKind::TooLong);
    let (field, kind, _) = only_error(json!([{"id": "a", "type": "transform", "output": 1}, "x"]));
    assert_eq!((field.as_str(), kind), ("steps[1]", FieldErrorKind::InvalidType));
}

#[test]
fn ids_are_required_well_formed_and_unique() {
    let step = |id: Value| json!({"id": id, "type": "transform", "output": 1});
    let cases = [
        (json!([{"type": "transform", "output": 1}]), "steps[0].id", FieldErrorKind::MissingRequiredField),
        (json!([step(json!(7))]), "steps[0].id", FieldErrorKind::InvalidType),
        (json!([step(json!(""))]), "steps[0].id", FieldErrorKind::TooShort),
        (json!([step(json!("x".repeat(65)))]), "steps[0].id", FieldErrorKind::TooLong),
        (json!([step(json!("a b"))]), "steps[0].id", FieldErrorKind::InvalidFormat),
        (json!([step(json!("a.b"))]), "steps[0].id", FieldErrorKind::InvalidFormat),
        (
            json!([step(json!("a")), step(json!("b")), step(json!("a"))]),
            "steps[2].id",
            FieldErrorKind::InvalidValue,
        ),
    ];
    for (raw, field, kind) in cases {
        let (f, k, _) = only_error(raw.clone());
        assert_eq!((f.as_str(), k), (field, kind), "{raw}");
    }
    assert!(validate_steps(&json!([step(json!("A-z_09"))])).is_ok());
    assert!(validate_steps(&json!([step(json!("x".repeat(64)))])).is_ok());
}

#[test]
fn types_and_timeouts_are_checked() {
    let (f, k, m) = only_error(json!([{"id": "a", "type": "shell", "command": "ls"}]));
    assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::InvalidValue));
    assert!(m.contains("http_request"), "{m}");
    let (f, k, _) = only_error(json!([{"id": "a", "output": 1}]));
    assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::MissingRequiredField));
    let (f, k, _) = only_error(json!([{"id": "a", "type": 3}]));
    assert_eq!((f.as_str(), k), ("steps[0].type", FieldErrorKind::InvalidType));
    for (timeout, kind) in [
        (json!(0), FieldErrorKind::OutOfRange),
        (json!(301), FieldErrorKind::OutOfRange),
        (json!(1.5), FieldErrorKind::OutOfRange),
        (json!(-1), FieldErrorKind::OutOfRange),
        (json!("30"), FieldErrorKind::InvalidType),
    ] {
        let (f, k, _) =
            only_error(json!([{"id": "a", "type": "transform", "output": 1, "timeout_seconds": timeout}]));
        assert_eq!((f.as_str(), k), ("steps[0].timeout_seconds", kind), "{timeout}");
    }
    let ok = validate_steps(&json!([{"id": "a", "type": "transform", "output": 1, "timeout_seconds": 300}]));
    assert_eq!(ok.unwrap()[0].timeout_seconds(), Some(300));
}

#[test]
fn parameters_are_required_typed_and_known() {
    let cases = [
        (json!({"type": "transform"}), "steps[0].output", FieldErrorKind::MissingRequiredField),
        (
            json!({"type": "agent_chat", "message": "hi"}),
            "steps[0].agent_id",
            FieldErrorKind::MissingRequiredField,
        ),
        (
            json!({"type": "agent_chat", "agent_id": "agt_1", "message": null}),
            "steps[0].message",
            FieldErrorKind::MissingRequiredField,
        ),
        (
            json!({"type": "agent_chat", "agent_id": 5, "message": "hi"}),
            "steps[0].agent_id",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "agent_chat", "agent_id": "agt_1", "message": "  "}),
            "steps[0].message",
            FieldErrorKind::TooShort,
        ),
        (
            json!({"type": "agent_chat", "agent_id": "a", "message": "m", "session_id": 3}),
            "steps[0].session_id",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "agent_chat", "agent_id": "a", "message": "m", "temperature": 1}),
            "steps[0].temperature",
            FieldErrorKind::InvalidValue,
        ),
        (
            json!({"type": "http_request", "method": "GET"}),
            "steps[0].url",
            FieldErrorKind::MissingRequiredField,
        ),
        (
            json!({"type": "http_request", "method": "FETCH", "url": "https://x.test"}),
            "steps[0].method",
            FieldErrorKind::InvalidValue,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "not a url"}),
            "steps[0].url",
            FieldErrorKind::InvalidFormat,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "ftp://x.test/"}),
            "steps[0].url",
            FieldErrorKind::InvalidFormat,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": ["a"]}),
            "steps[0].headers",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": "plain"}),
            "steps[0].headers",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"X-N": 1}}),
            "steps[0].headers.X-N",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"Bad Name": "v"}}),
            "steps[0].headers.Bad Name",
            FieldErrorKind::InvalidFormat,
        ),
        (
            json!({"type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"X": "a\r\nInjected: 1"}}),
            "steps[0].headers.X",
            FieldErrorKind::InvalidFormat,
        ),
        (
            json!({"type": "memory_search", "query": "q", "memory_type": "short-term"}),
            "steps[0].memory_type",
            FieldErrorKind::InvalidValue,
        ),
        (
            json!({"type": "memory_search", "query": "q", "top_k": 0}),
            "steps[0].top_k",
            FieldErrorKind::OutOfRange,
        ),
        (
            json!({"type": "memory_search", "query": "q", "top_k": 101}),
            "steps[0].top_k",
            FieldErrorKind::OutOfRange,
        ),
        (
            json!({"type": "memory_search", "query": "q", "top_k": "many"}),
            "steps[0].top_k",
            FieldErrorKind::OutOfRange,
        ),
        (
            json!({"type": "memory_search", "query": "q", "top_k": true}),
            "steps[0].top_k",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "memory_add", "content": "c"}),
            "steps[0].memory_type",
            FieldErrorKind::MissingRequiredField,
        ),
        (
            json!({"type": "memory_add", "content": "c", "memory_type": "episodic", "metadata": 1}),
            "steps[0].metadata",
            FieldErrorKind::InvalidType,
        ),
        (
            json!({"type": "memory_add", "content": "nul\u{0}", "memory_type": "episodic"}),
            "steps[0].content",
            FieldErrorKind::InvalidFormat,
        ),
        (
            json!({"type": "transform", "output": {"a": ["x", "nul\u{0}"]}}),
            "steps[0].output.a[1]",
            FieldErrorKind::InvalidFormat,
        ),
    ];
    for (mut raw, field, kind) in cases {
        raw.as_object_mut().unwrap().insert("id".into(), json!("s"));
        let (f, k, m) = only_error(json!([raw.clone()]));
        assert_eq!((f.as_str(), k), (field, kind), "{raw}: {m}");
    }
    let (_, _, m) = only_error(json!([{"id": "s", "type": "transform", "output": 1, "outptu": 2}]));
    assert!(m.contains("unknown parameter \"outptu\"") && m.contains("output"), "{m}");
    // Templates stand in for values that can only be checked once rendered.
    let templated = json!([{"id": "s", "type": "http_request", "method": "{{ input.method }}",
        "url": "{{ input.url }}", "headers": "{{ input.headers }}"},
        {"id": "t", "type": "memory_search", "query": "q", "top_k": "{{ input.k }}",
         "memory_type": "{{ input.type }}"},
        {"id": "u", "type": "transform", "output": null},
        {"id": "v", "type": "memory_search", "query": "q", "top_k": "7"}]);
    assert!(validate_steps(&templated).is_ok(), "{:?}", validate_steps(&templated));
}

#[test]
fn every_error_of_every_step_is_reported() {
    let errors = errors(json!([
        {"id": "a", "type": "http_request", "method": "FETCH", "url": 3, "extra": 1},
        {"id": "a", "type": "nope"},
        {"type": "transform", "output": "{{ steps.zzz.output }}"},
    ]));
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "steps[0].method",
            "steps[0].url",
            "steps[0].extra",
            "steps[1].id",
            "steps[1].type",
            "steps[2].id",
            "steps[2].output"
        ]
    );
}

#[test]
fn templates_must_parse() {
    let (f, k, m) =
        only_error(json!([{"id": "a", "type": "transform", "output": {"x": ["ok", "{{ input.x "]}}]));
    assert_eq!((f.as_str(), k), ("steps[0].output.x[1]", FieldErrorKind::InvalidFormat));
    assert!(m.contains("syntax error"), "{m}");
    let (f, _, _) = only_error(json!([{"id": "a", "type": "agent_chat", "agent_id": "x",
        "message": "line\n{% if input.x %}unclosed"}]));
    assert_eq!(f, "steps[0].message");
    for source in ["{% include 'other' %}", "{% macro m() %}x{% endmacro %}", "{% extends 'base' %}"] {
        let (f, k, m) = only_error(json!([{"id": "a", "type": "transform", "output": source}]));
        assert_eq!((f.as_str(), k), ("steps[0].output", FieldErrorKind::InvalidFormat), "{source}: {m}");
    }
}

#[test]
fn templates_read_only_input_and_earlier_steps() {
    let with = |second: Value| {
        json!([
            {"id": "first", "type": "transform", "output": "{{ input.x }}"},
            second,
            {"id": "last", "type": "transform", "output": 1},
        ])
    };
    let ok = [
        "{{ steps.first.output }}",
        "{{ steps.first.output.deep.er | default('x') }}",
        "{{ steps['first'].output }}",
        "{{ input.a }}{% for i in range(2) %}{{ loop.index }}{{ i }}{% endfor %}",
        "{% set local = input.a %}{{ local }}",
        "{{ steps | length }}",
    ];
    for template in ok {
        let raw = with(json!({"id": "mid", "type": "transform", "output": template}));
        assert!(validate_steps(&raw).is_ok(), "{template}: {:?}", validate_steps(&raw));
    }
    let refused = [
        ("{{ steps.last.output }}", "runs after this one"),
        ("{{ steps['last'].output }}", "runs after this one"),
        ("{{ steps.mid.output }}", "its own step"),
        ("{{ steps.nope.output }}", "unknown step \"nope\""),
        ("{{ steps.first.outputs }}", "offers only steps.first.output"),
        ("{{ inputs.x }}", "unknown variable \"inputs\""),
        ("{{ env }}", "unknown variable \"env\""),
    ];
    for (template, wanted) in refused {
        let raw = with(json!({"id": "mid", "type": "transform", "output": {"v": template}}));
        let (f, k, m) = only_error(raw);
        assert_eq!((f.as_str(), k), ("steps[1].output.v", FieldErrorKind::InvalidValue), "{template}");
        assert!(m.contains(wanted), "{template}: {m}");
    }
    // A hyphenated id read with a dot parses as a subtraction: both halves are refused, with a hint.
    let raw = json!([
        {"id": "get-user", "type": "transform", "output": 1},
        {"id": "b", "type": "transform", "output": "{{ steps.get-user.output }}"},
    ]);
    let errors = errors(raw);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors.iter().any(|e| e.message.contains("steps['<id>']")), "{errors:#?}");
}

#[test]
fn steps_render_into_typed_actions() {
    let steps = validate_steps(&json!([
        {"id": "t", "type": "transform", "output": {"n": "{{ input.n }}", "s": "n={{ input.n }}"}},
        {"id": "c", "type": "agent_chat", "agent_id": "{{ input.agent }}", "message": "{{ input.n }}",
         "session_id": "{{ input.session | default(none) }}"},
        {"id": "h", "type": "http_request", "method": "{{ input.method }}", "url": "https://x.test/{{ input.n }}",
         "headers": {"X-N": "{{ input.n }}", "X-Skip": "{{ none }}"}, "body": "{{ steps.t.output }}"},
        {"id": "s", "type": "memory_search", "query": "q", "top_k": "{{ input.n }}", "memory_type": "episodic"},
        {"id": "a", "type": "memory_add", "content": "c", "memory_type": "procedural",
         "metadata": "{{ {'k': input.n} }}", "agent_id": "agt_9"},
    ]))
    .unwrap();
    let mut ctx = TemplateContext::new(json!({"n": 4, "agent": "agt_1", "method": "patch"}));
    ctx.add_output("t", json!({"n": 4}));
    let actions: Vec<StepAction> = steps.iter().map(|s| s.render(&ctx, None).unwrap()).collect();
    assert_eq!(actions[0], StepAction::Transform { output: json!({"n": 4, "s": "n=4"}) });
    assert_eq!(
        actions[1],
        StepAction::AgentChat {
            agent_id: AgentId::from_string("agt_1"),
            message: "4".into(),
            session_id: None
        }
    );
    assert_eq!(
        actions[2],
        StepAction::HttpRequest {
            method: HttpMethod::Patch,
            url: "https://x.test/4".into(),
            headers: BTreeMap::from([("X-N".to_owned(), "4".to_owned())]),
            body: Some(json!({"n": 4})),
        }
    );
    assert_eq!(
        actions[3],
        StepAction::MemorySearch {
            query: "q".into(),
            agent_id: None,
            memory_type: Some(MemoryType::Episodic),
            top_k: Some(4)
        }
    );
    assert_eq!(
        actions[4],
        StepAction::MemoryAdd {
            content: "c".into(),
            memory_type: MemoryType::Procedural,
            agent_id: Some(AgentId::from_string("agt_9")),
            metadata: json!({"k": 4}).as_object().unwrap().clone(),
        }
    );
}

#[test]
fn rendered_values_that_do_not_fit_fail_naming_the_parameter() {
    let step = |raw: Value| validate_steps(&json!([raw])).unwrap().remove(0);
    let ctx = TemplateContext::new(json!({"obj": {"a": 1}, "k": 500, "m": "FETCH", "t": "other"}));
    let cases = [
        (json!({"id": "x", "type": "agent_chat", "agent_id": "a", "message": "{{ input.obj }}"}), "message"),
        (json!({"id": "x", "type": "agent_chat", "agent_id": "a", "message": "{{ input.nope }}"}), "message"),
        (
            json!({"id": "x", "type": "http_request", "method": "{{ input.m }}", "url": "https://x.test"}),
            "method",
        ),
        (
            json!({"id": "x", "type": "http_request", "method": "GET", "url": "https://x.test", "headers": "{{ input.k }}"}),
            "headers",
        ),
        (
            json!({"id": "x", "type": "http_request", "method": "GET", "url": "https://x.test", "headers": {"A": "{{ input.obj }}"}}),
            "headers.A",
        ),
        (json!({"id": "x", "type": "memory_search", "query": "q", "top_k": "{{ input.k }}"}), "top_k"),
        (
            json!({"id": "x", "type": "memory_search", "query": "q", "memory_type": "{{ input.t }}"}),
            "memory_type",
        ),
        (
            json!({"id": "x", "type": "memory_add", "content": "c", "memory_type": "semantic", "metadata": "{{ input.k }}"}),
            "metadata",
        ),
    ];
    for (raw, path) in cases {
        let e = step(raw.clone()).render(&ctx, None).unwrap_err();
        assert_eq!(e.path, path, "{raw}: {e}");
    }
}

#[test]
fn names_round_trip() {
    for t in StepType::ALL {
        assert_eq!(StepType::parse(t.as_str()), Some(t));
    }
    for m in HttpMethod::ALL {
        assert_eq!(HttpMethod::parse(m.as_str()), Some(m));
        assert_eq!(HttpMethod::parse_any_case(&m.as_str().to_lowercase()), Some(m));
    }
    assert_eq!(StepType::HttpRequest.parameters(), ["method", "url", "headers", "body"]);
    assert_eq!(StepType::Transform.parameters(), ["output"]);
}

/// One valid step of each type, with every parameter it takes.
fn one_of_each() -> Vec<Value> {
    vec![
        json!({"id": "t", "type": "transform", "output": {"a": "{{ input.a }}"}}),
        json!({"id": "c", "type": "agent_chat", "agent_id": "agt_1", "message": "hi", "session_id": "s-1"}),
        json!({"id": "h", "type": "http_request", "method": "GET", "url": "https://x.test/",
               "headers": {"Accept": "text/plain"}, "body": {"q": 1}}),
        json!({"id": "s", "type": "memory_search", "query": "q", "agent_id": "agt_1", "memory_type": "semantic",
               "top_k": 3}),
        json!({"id": "a", "type": "memory_add", "content": "c", "memory_type": "episodic", "agent_id": "agt_1",
               "metadata": {"k": "v"}}),
        json!({"id": "k", "type": "knowledge_search", "knowledge_base_ids": ["kb_1"], "query": "q", "top_k": 2}),
        json!({"id": "r", "type": "condition", "cases": [{"when": "input.a > 0", "next": "t"}], "default": "t"}),
        json!({"id": "w", "type": "wait", "seconds": 5}),
    ]
}

#[test]
fn an_unknown_parameter_of_any_step_type_is_refused_naming_its_path() {
    for mut step in one_of_each() {
        let step_type = step["type"].as_str().unwrap().to_owned();
        step["bogus"] = json!(1);
        let (f, k, m) = only_error(json!([{"id": "first", "type": "transform", "output": 1}, step]));
        assert_eq!((f.as_str(), k), ("steps[1].bogus", FieldErrorKind::InvalidValue), "{step_type}");
        assert!(m.contains("unknown parameter \"bogus\"") && m.contains(&step_type), "{m}");
        let takes = StepType::parse(&step_type).unwrap().parameters().join(", ");
        assert!(m.contains(&takes), "{m} lists {takes}");
    }
    // `type` picks the parameters: another type's are unknown.
    let (f, _, _) =
        only_error(json!([{"id": "a", "type": "transform", "output": 1, "url": "https://x.test"}]));
    assert_eq!(f, "steps[0].url");
}

#[test]
fn every_step_type_round_trips_and_renders() {
    let raw = Value::Array(one_of_each());
    let steps = validate_steps(&raw).unwrap();
    assert_eq!(steps_to_json(&steps), raw);
    let kinds: Vec<StepType> = steps.iter().map(Step::step_type).collect();
    assert_eq!(kinds, StepType::ALL);
    let ctx = TemplateContext::new(json!({"a": 1}));
    for step in &steps {
        step.render(&ctx, None).unwrap_or_else(|e| panic!("{}: {e}", step.id()));
    }
}

#[test]
fn steps_stored_by_the_previous_version_load_and_are_written_back_byte_for_byte() {
    // The `steps` column as the version with the hand-written parameter table wrote it (for a
    // workflow and for the executions that keep its steps): keys sorted, optional parameters
    // given as null left out, literals kept as written (`post`, `"7"`, spaces).
    let stored = concat!(
        r#"[{"id":"start","output":{"n":1,"who":"{{ input.name | upper }}"},"type":"transform"},"#,
        r#"{"agent_id":"{{ input.agent }}","id":"ask","message":"Hello {{ steps.start.output.who }}","#,
        r#""timeout_seconds":120,"type":"agent_chat"},"#,
        r#"{"body":{"answer":"{{ steps.ask.output.content }}"},"headers":{"Authorization":"Bearer {{ input.token }}"},"#,
        r#""id":"post-it","method":"post","type":"http_request","url":" https://example.com/x "},"#,
        r#"{"id":"find","memory_type":"semantic","query":"{{ steps['post-it'].output.body }}","top_k":"7","type":"memory_search"},"#,
        r#"{"content":"{{ steps.find.output.results | tojson }}","id":"keep","memory_type":"{{ input.kind }}","#,
        r#""metadata":"{{ {'from': 'workflow'} }}","type":"memory_add"},"#,
        r#"{"id":"last","output":null,"type":"transform"}]"#,
    );
    let steps = validate_steps(&serde_json::from_str(stored).unwrap()).unwrap();
    assert_eq!(steps.len(), 6);
    assert_eq!(serde_json::to_string(&steps_to_json(&steps)).unwrap(), stored);
}

#[test]
fn optional_parameters_given_as_null_are_absent() {
    let raw = json!([
        {"id": "c", "type": "agent_chat", "agent_id": "a", "message": "m", "session_id": null, "timeout_seconds": null},
        {"id": "h", "type": "http_request", "method": "GET", "url": "https://x.test", "headers": null, "body": null},
        {"id": "s", "type": "memory_search", "query": "q", "agent_id": null, "memory_type": null, "top_k": null},
        {"id": "a", "type": "memory_add", "content": "c", "memory_type": "semantic", "agent_id": null, "metadata": null},
    ]);
    let steps = validate_steps(&raw).unwrap();
    let without_nulls: Vec<Value> = raw
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            Value::Object(
                s.as_object()
                    .unwrap()
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(steps_to_json(&steps), Value::Array(without_nulls));
    assert_eq!(steps[0].timeout_seconds(), None);
    let ctx = TemplateContext::new(json!({}));
    assert_eq!(
        steps[1].render(&ctx, None).unwrap(),
        StepAction::HttpRequest {
            method: HttpMethod::Get,
            url: "https://x.test".into(),
            headers: BTreeMap::new(),
            body: None
        }
    );
    assert_eq!(
        steps[2].render(&ctx, None).unwrap(),
        StepAction::MemorySearch { query: "q".into(), agent_id: None, memory_type: None, top_k: None }
    );
}

#[test]
fn the_refusals_of_one_step_are_bounded_and_name_no_internal_marker() {
    let mut step = json!({"id": "a", "type": "transform", "output": 1});
    for i in 0..30 {
        step[format!("extra{i:02}")] = json!(i);
    }
    let many = errors(json!([step]));
    assert_eq!(many.len(), 20);
    assert!(many.iter().all(|e| e.field.starts_with("steps[0].extra")));
    let several =
        errors(json!([{"id": "", "type": "memory_search", "query": "", "top_k": 0, "timeout_seconds": 0}]));
    let fields: Vec<&str> = several.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["steps[0].id", "steps[0].timeout_seconds", "steps[0].query", "steps[0].top_k"]);
    for e in several.iter().chain(&many) {
        assert!(e.message.starts_with(&e.field) && !e.message.contains('\u{1F}'), "{e:?}");
    }
}

#[test]
fn literal_values_are_kept_as_written_and_read_when_rendered() {
    let steps = validate_steps(&json!([
        {"id": "h", "type": "http_request", "method": " patch ", "url": " https://x.test/a "},
        {"id": "s", "type": "memory_search", "query": "q", "memory_type": " episodic", "top_k": " 7 "},
    ]))
    .unwrap();
    assert_eq!(steps[0].to_json()["method"], " patch ");
    let ctx = TemplateContext::new(json!({}));
    match steps[0].render(&ctx, None).unwrap() {
        StepAction::HttpRequest { method, url, .. } => {
            assert_eq!((method, url.as_str()), (HttpMethod::Patch, " https://x.test/a "))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        steps[1].render(&ctx, None).unwrap(),
        StepAction::MemorySearch {
            query: "q".into(),
            agent_id: None,
            memory_type: Some(MemoryType::Episodic),
            top_k: Some(7)
        }
    );
}

#[test]
fn a_knowledge_search_names_its_bases_as_a_list_or_a_template() {
    use crate::ids::KnowledgeBaseId;
    let steps = validate_steps(&json!([
        {"id": "a", "type": "knowledge_search", "knowledge_base_ids": ["kb_1", "{{ input.other }}"], "query": "{{ input.q }}", "top_k": 3},
        {"id": "b", "type": "knowledge_search", "knowledge_base_ids": "{{ input.bases }}", "query": "q"},
        {"id": "c", "type": "knowledge_search", "knowledge_base_ids": [], "query": "q", "top_k": 51},
    ]))
    .unwrap();
    let ctx = TemplateContext::new(json!({"other": "kb_2", "q": "leave", "bases": ["kb_3"]}));
    let kb = |id: &str| KnowledgeBaseId::from_string(id);
    assert_eq!(
        steps[0].render(&ctx, None).unwrap(),
        StepAction::KnowledgeSearch {
            knowledge_base_ids: vec![kb("kb_1"), kb("kb_2")],
            query: "leave".into(),
            top_k: Some(3)
        }
    );
    assert_eq!(
        steps[1].render(&ctx, None).unwrap(),
        StepAction::KnowledgeSearch { knowledge_base_ids: vec![kb("kb_3")], query: "q".into(), top_k: None }
    );
    let refused = steps[2].render(&ctx, None).unwrap_err();
    assert!(refused.to_string().contains("knowledge_base_ids"), "{refused}");
    let missing = errors(json!([{"id": "d", "type": "knowledge_search", "query": "q"}]));
    assert_eq!(missing[0].field, "steps[0].knowledge_base_ids");
}

#[test]
fn routes_and_conditions_name_steps_of_the_workflow_and_parse() {
    let refused = |steps: Value| -> Vec<String> {
        validate_steps(&steps).unwrap_err().into_iter().map(|e| e.field).collect()
    };
    let condition = |cases: Value| json!([{"id": "c", "type": "condition", "cases": cases}, {"id": "x", "type": "transform", "output": 1}]);
    assert_eq!(
        refused(condition(json!([{"when": "input.a", "next": "nowhere"}]))),
        ["steps[0].cases[0].next"]
    );
    assert_eq!(refused(condition(json!([{"when": "input.a >", "next": "x"}]))), ["steps[0].cases[0].when"]);
    assert_eq!(
        refused(condition(json!([{"when": "true %}{{ input", "next": "x"}]))),
        ["steps[0].cases[0].when"]
    );
    assert_eq!(refused(condition(json!([]))), ["steps[0].cases"]);
    assert_eq!(refused(condition(json!([["input.a", "x"]]))), ["steps[0].cases[0]"], "a case is an object");
    assert_eq!(
        refused(json!([{"id": "a", "type": "transform", "output": 1, "retry": [3, 2]}])),
        ["steps[0].retry"],
        "a policy is an object, not its fields in order"
    );
    assert_eq!(
        refused(condition(json!([{"when": "1", "next": "x", "then": "y"}]))),
        ["steps[0].cases[0].then"]
    );
    let mut with_default = condition(json!([{"when": "input.a", "next": "x"}]));
    with_default[0]["default"] = json!("gone");
    assert_eq!(refused(with_default), ["steps[0].default"]);
    let steps = validate_steps(&condition(json!([{"when": "input.a == 'b'", "next": "x"}]))).unwrap();
    assert_eq!(steps[0].to_json()["cases"][0]["when"], "input.a == 'b'", "shown as written");
    assert_eq!(
        refused(json!([{"id": "a", "type": "transform", "output": 1, "next": "b", "on_error": "c"}])),
        ["steps[0].next", "steps[0].on_error"]
    );
}
