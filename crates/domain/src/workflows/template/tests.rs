#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

fn ctx() -> TemplateContext {
    let mut ctx = TemplateContext::new(json!({
        "name": "ada",
        "count": 3,
        "ratio": 0.5,
        "flag": true,
        "nothing": null,
        "tags": ["x", "y"],
        "user": {"email": "ada@example.com", "langs": ["en", "fr"]},
    }));
    ctx.add_output("a", json!({"id": 7, "items": [1, 2, 3], "text": "hello"}));
    ctx.add_output("fetch-user", json!({"status": 200}));
    ctx
}

fn r(s: &str) -> Result<Value, RenderError> {
    render_str(s, &ctx())
}

#[test]
fn plain_strings_are_kept_as_they_are() {
    for s in ["", "hello", "  spaced  ", "braces { } and %", "line\n", "{ {x} }"] {
        assert_eq!(r(s).unwrap(), json!(s), "{s:?}");
    }
}

#[test]
fn a_single_expression_keeps_its_json_type() {
    assert_eq!(r("{{ input.count }}").unwrap(), json!(3));
    assert_eq!(r("{{ input.ratio }}").unwrap(), json!(0.5));
    assert_eq!(r("  {{input.flag}} ").unwrap(), json!(true));
    assert_eq!(r("{{ input.nothing }}").unwrap(), Value::Null);
    assert_eq!(r("{{ input.tags }}").unwrap(), json!(["x", "y"]));
    assert_eq!(r("{{ steps.a.output }}").unwrap(), json!({"id": 7, "items": [1, 2, 3], "text": "hello"}));
    assert_eq!(r("{{ steps['fetch-user'].output.status }}").unwrap(), json!(200));
    assert_eq!(r("{{- input.count + 1 -}}").unwrap(), json!(4));
    assert_eq!(r("{{ input.name }}").unwrap(), json!("ada"));
    assert_eq!(r("{{ {'n': input.count, 'l': [input.flag]} }}").unwrap(), json!({"n": 3, "l": [true]}));
    assert_eq!(r("{{ \"}}{{\" }}").unwrap(), json!("}}{{"));
    assert_eq!(r("{{ {'a': {'b': [1, {'c': 2}]}} }}").unwrap(), json!({"a": {"b": [1, {"c": 2}]}}));
}

#[test]
fn anything_else_renders_to_a_string() {
    assert_eq!(r("n={{ input.count }}").unwrap(), json!("n=3"));
    assert_eq!(r("{{ input.count }}{{ input.count }}").unwrap(), json!("33"));
    assert_eq!(r("{{ input.name }} and {{ input.count }}").unwrap(), json!("ada and 3"));
    assert_eq!(
        r("{% for t in input.tags %}{{ t }}{% if not loop.last %},{% endif %}{% endfor %}").unwrap(),
        json!("x,y")
    );
    assert_eq!(r("{# note #}{{ input.name }}").unwrap(), json!("ada"));
    assert_eq!(r("hi {{ input.name }}\n").unwrap(), json!("hi ada\n"));
    // JSON's spelling of booleans; null prints as nothing.
    assert_eq!(
        r("{{ input.flag }}/{{ not input.flag }}/{{ input.nothing }}.").unwrap(),
        json!("true/false/.")
    );
}

#[test]
fn odd_strings_render_or_fail_without_panicking() {
    for s in [
        "{{ 1 }}}}",
        "{{ 1 }} }}{{ 2",
        "{{ ) }}{{ 2 }}",
        "{{ '}}' }}{{ 1 }}",
        "{{ '\\'' }}",
        "{{ [ }}{{ ] }}",
        "{{ } }}{{ 1 }}",
        "{{}}",
        "{{ -}}",
        "{% raw %}{{ x }}{% endraw %}",
        "{{ 1 }}{# }} #}",
    ] {
        let _ = r(s);
    }
    assert_eq!(r("{% raw %}{{ x }}{% endraw %}").unwrap(), json!("{{ x }}"));
}

#[test]
fn filters_work() {
    assert_eq!(r("{{ input.name | upper }}").unwrap(), json!("ADA"));
    assert_eq!(r("{{ steps.a.output.items | length }}").unwrap(), json!(3));
    assert_eq!(r("{{ input.user.langs | join('/') }}").unwrap(), json!("en/fr"));
    let encoded = r("{{ input.user | tojson }}").unwrap();
    assert_eq!(serde_json::from_str::<Value>(encoded.as_str().unwrap()).unwrap(), ctx().input()["user"]);
    assert_eq!(r("body: {{ input.tags | tojson }}").unwrap(), json!("body: [\"x\",\"y\"]"));
}

#[test]
fn undefined_values_fail_naming_the_variable() {
    let e = r("{{ input.nmae }}").unwrap_err();
    assert!(e.message.contains("input.nmae is undefined"), "{e}");
    assert!(e.message.contains("name"), "the hint lists the keys: {e}");
    let e = r("Hello {{ input.nmae }}").unwrap_err();
    assert!(e.message.contains("input.nmae is undefined"), "{e}");
    let e = r("{{ input.user.phone.number }}").unwrap_err();
    assert!(e.message.contains("input.user.phone is undefined"), "{e}");
    let e = r("{{ steps.b.output }}").unwrap_err();
    assert!(e.message.contains("steps.b is undefined"), "{e}");
    let e = r("{{ input.missing | upper }}").unwrap_err();
    assert!(e.message.contains("input.missing is undefined"), "{e}");
    let e = r("{% for x in input.missing %}{% endfor %}").unwrap_err();
    assert!(e.message.contains("input.missing is undefined"), "{e}");
}

#[test]
fn default_and_tests_handle_optional_values() {
    assert_eq!(r("{{ input.missing | default('anon') }}").unwrap(), json!("anon"));
    assert_eq!(r("{{ input.missing | default(5) }}").unwrap(), json!(5));
    assert_eq!(r("{{ input.name | default('anon') }}").unwrap(), json!("ada"));
    assert_eq!(r("{% if input.missing %}yes{% else %}no{% endif %}").unwrap(), json!("no"));
    assert_eq!(r("{{ input.missing is defined }}").unwrap(), json!(false));
}

#[test]
fn values_are_rendered_through_objects_and_arrays_keeping_keys() {
    let value = json!({
        "{{ key }}": "{{ input.name }}",
        "list": ["{{ input.count }}", 1, null, {"deep": "x{{ input.flag }}"}],
        "n": 2,
    });
    assert_eq!(
        render(&value, &ctx(), None).unwrap(),
        json!({"{{ key }}": "ada", "list": [3, 1, null, {"deep": "xtrue"}], "n": 2})
    );
    let e = render(&json!({"list": [1, {"deep": "{{ nope }}"}]}), &ctx(), None).unwrap_err();
    assert_eq!(e.path, "list[1].deep");
    assert!(e.message.contains("nope is undefined"), "{e}");
}

#[test]
fn runaway_templates_are_stopped() {
    let e =
        r("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").unwrap_err();
    assert!(e.message.contains("too many steps"), "{e}");
    let e = r("{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}").unwrap_err();
    assert!(e.message.contains("more than"), "{e}");
    let e = r("{{ 'x' * 300000 }}").unwrap_err();
    assert!(e.message.contains("more than"), "{e}");
}

#[test]
fn values_are_bounded_as_they_grow() {
    // Each of these would allocate gigabytes before any check on the result could run.
    for (template, why) in [
        (
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
            "doubling with ~",
        ),
        (
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
            "doubling with +",
        ),
        ("{% for i in range(1500) %}{% set y = ('x' ~ (i % 10)) * 40000000 %}{% endfor %}done", "repeating"),
        (
            "{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('x', 'xx') %}{% endfor %}",
            "replace",
        ),
        (
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}{% endfor %}",
            "a capture block",
        ),
        ("{{ ([1] * 100000000)|list|length }}", "a repeated list"),
        ("{{ (['x' * 1000] * 100000)|join(',') }}", "join over a repeated list"),
        ("{{ ['x' * 1000] * 100000 }}", "the value of an expression"),
        ("{{ (['x' * 1000] * 100000)|tojson }}", "tojson"),
        ("{{ (['x' * 1000] * 100000)|string|length }}", "string"),
        ("{{ 'a\nb'|indent(100000000) }}", "indent"),
        ("{{ '%100000000s'|format('x') }}", "format's width"),
        ("{{ [1]|batch(100000000, 0)|list|length }}", "batch's filler"),
    ] {
        let e = r(template).unwrap_err();
        assert!(e.message.contains("more than"), "{why}: {e}");
    }
}

#[test]
fn the_bytes_built_in_all_are_bounded() {
    // Each string is within the value limit; together they would fill the memory.
    let e = r("{% set ns = namespace(l=[]) %}{% for i in range(50000) %}{% set ns.l = ns.l + [('x' ~ (i % 10)) * 100000] %}{% endfor %}{{ ns.l|length }}")
        .unwrap_err();
    assert!(e.message.contains("in all"), "{e}");
}

#[test]
fn a_render_stops_at_its_deadline() {
    let deadline = Some(Instant::now());
    let e = render(&json!("{% for i in range(100000) %}{{ i }}{% endfor %}"), &ctx(), deadline).unwrap_err();
    assert!(e.message.contains("within the step's timeout"), "{e}");
    // The same template renders without a deadline.
    let long = render(&json!("{% for i in range(3) %}{{ i }}{% endfor %}"), &ctx(), None).unwrap();
    assert_eq!(long, json!("012"));
}

#[test]
fn values_within_the_limits_render() {
    assert_eq!(r("{{ ('ab' * 1000)|length }}").unwrap(), json!(2000));
    assert_eq!(r("{{ ([1, 2] * 3)|list }}").unwrap(), json!([1, 2, 1, 2, 1, 2]));
    assert_eq!(r("{{ 'a-b'|replace('-', '--') }}").unwrap(), json!("a--b"));
    assert_eq!(r("{% set x %}{{ input.name }}!{% endset %}{{ x }}").unwrap(), json!("ada!"));
    assert_eq!(r("{{ input.tags|join(', ') }}").unwrap(), json!("x, y"));
    assert_eq!(r("{{ '%5s|'|format('x') }}").unwrap(), json!("    x|"));
}

#[test]
fn runtime_errors_are_described() {
    let e = r("{{ input.name | nosuchfilter }}").unwrap_err();
    assert!(e.message.contains("unknown filter"), "{e}");
    let e = r("line one\n{{ input.name + 1 }}").unwrap_err();
    assert!(e.message.contains("invalid operation") && e.message.contains("(line 2)"), "{e}");
    let e = r("{{ input.name }").unwrap_err();
    assert!(e.message.contains("syntax error"), "{e}");
}

#[test]
fn analysis_finds_variables_and_steps() {
    let refs =
        analyze("{{ input.x }} {{ steps.a.output.y }} {{ range(3) | list }} {{ steps['b-2'].output }}")
            .unwrap();
    assert_eq!(refs.variables, BTreeSet::from(["input".to_owned(), "steps".to_owned()]));
    assert_eq!(
        refs.steps,
        BTreeSet::from([
            StepRef { step_id: "a".into(), field: Some("output".into()) },
            StepRef { step_id: "b-2".into(), field: None },
        ])
    );
    let refs = analyze("{% for s in [1] %}{{ loop.index }}{{ s }}{% endfor %}{{ other }}").unwrap();
    assert_eq!(refs.variables, BTreeSet::from(["other".to_owned()]));
    let refs = analyze("{{ steps.c }}{{ steps[\"d\"] }}{{ input.steps['e'] }}{{ 'steps[\"f\"]' }}").unwrap();
    let ids: Vec<&str> = refs.steps.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(ids, ["c", "d"]);
    let refs = analyze("{# steps['g'] #}{% raw %}{{ steps['h'] }}{% endraw %}steps['i']").unwrap();
    assert!(refs.steps.is_empty(), "{refs:?}");
    assert!(analyze("{{ input.x ").is_err());
    assert!(analyze("{% if %}").is_err());
    assert!(analyze("{% for x in y %}").is_err());
}

#[test]
fn the_trigger_root_reads_what_started_the_execution() {
    let ctx = TemplateContext::new(json!({"message": "hi"}))
        .with_trigger(json!({"method": "POST", "query": {"source": "crm"}, "headers": {"x-id": "7"}}));
    assert_eq!(render_str("{{ trigger.method }} {{ input.message }}", &ctx).unwrap(), json!("POST hi"));
    assert_eq!(render_str("{{ trigger.query.source }}", &ctx).unwrap(), json!("crm"));
    let e = render_str("{{ trigger.body.x }}", &ctx).unwrap_err();
    assert!(e.message.contains("trigger.body is undefined"), "{e}");
    // Started by the API: there is no trigger, and reading one says so.
    let e = render_str("{{ trigger.method }}", &TemplateContext::new(json!({}))).unwrap_err();
    assert!(e.message.contains("trigger.method is undefined"), "{e}");
    assert_eq!(TemplateContext::new(json!({})).to_json()["trigger"], Value::Null);
}
