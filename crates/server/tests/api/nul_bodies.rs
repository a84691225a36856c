//! U+0000 in every string field of every JSON body the API takes, on both databases: each is
//! refused with 422 naming the field, never a 500 (PostgreSQL cannot store it) and never stored
//! (SQLite could). The table is the service's own OpenAPI document: every POST, PATCH and PUT
//! with a JSON body, every string its schema reaches (nested objects, arrays, free-form
//! objects), so a route added later is covered without editing this file.

use agentry_domain::billing::CreditRepository as _;
use serde_json::{Map, Value, json};

use crate::helpers::{TestApp, on_both_databases};

/// The two inbound receivers, which prove their caller by a secret or a signature.
#[derive(Clone, Copy)]
enum Receiver {
    Trigger,
    Integration,
}

/// Where a string sits in a body: `name`, `config.tools[0].name`, `input.k`.
type FieldPath = String;

/// A JSON body built from a schema, with the path of every string it holds.
struct Sample {
    body: Value,
    strings: Vec<(FieldPath, Vec<Step>)>,
}

/// One step down into a JSON value.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            resolve(doc, &doc["components"]["schemas"][name])
        }
        None => schema,
    }
}

/// The schema's one non-null alternative (`Option<T>` is `oneOf: [{type: null}, T]`).
fn concrete<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let schema = resolve(doc, schema);
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let chosen = options.iter().map(|o| resolve(doc, o)).find(|o| o["type"] != "null");
            if let Some(option) = chosen {
                return concrete(doc, option);
            }
        }
    }
    schema
}

fn kind(schema: &Value) -> &str {
    match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(types) => {
            types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string")
        }
        _ if schema.get("properties").is_some() => "object",
        _ => "any",
    }
}

fn build(
    doc: &Value,
    schema: &Value,
    path: &str,
    steps: &[Step],
    strings: &mut Vec<(FieldPath, Vec<Step>)>,
    depth: usize,
) -> Value {
    let schema = concrete(doc, schema);
    if depth > 6 {
        return Value::Null;
    }
    let child = |key: &str| if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") };
    match kind(schema) {
        "object" => {
            let mut object = Map::new();
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, property) in properties.into_iter().flatten() {
                let mut inner = steps.to_vec();
                inner.push(Step::Key(key.clone()));
                object.insert(key.clone(), build(doc, property, &child(key), &inner, strings, depth + 1));
            }
            // A free-form object (an input, metadata, headers): one string entry of its own.
            if properties.is_none_or(|p| p.is_empty()) {
                let mut inner = steps.to_vec();
                inner.push(Step::Key("k".into()));
                strings.push((child("k"), inner));
                object.insert("k".into(), json!("x"));
            }
            Value::Object(object)
        }
        "array" => {
            let mut inner = steps.to_vec();
            inner.push(Step::Index(0));
            let item = build(doc, &schema["items"], &format!("{path}[0]"), &inner, strings, depth + 1);
            json!([item])
        }
        "integer" | "number" => json!(1),
        "boolean" => json!(true),
        _ => {
            strings.push((path.to_owned(), steps.to_vec()));
            schema["enum"].get(0).cloned().unwrap_or_else(|| json!("x"))
        }
    }
}

fn sample(doc: &Value, schema: &Value) -> Sample {
    let mut strings = Vec::new();
    let body = build(doc, schema, "", &[], &mut strings, 0);
    if body.is_object() {
        return Sample { body, strings };
    }
    // A body of any JSON (the inbound receivers'): an object, as senders send.
    Sample { body: json!({"k": "x"}), strings: vec![("k".into(), vec![Step::Key("k".into())])] }
}

/// `body` with the string at `steps` replaced by one holding U+0000.
fn with_nul(body: &Value, steps: &[Step]) -> Value {
    let mut body = body.clone();
    let mut at = &mut body;
    for step in steps {
        at = match step {
            Step::Key(k) => &mut at[k.as_str()],
            Step::Index(i) => &mut at[*i],
        };
    }
    *at = json!("bad\u{0}value");
    body
}

/// The path with its parameters filled in: the caller's tenant (team routes check it before
/// anything else), any value for the rest (the body is read before the resource is looked up).
fn concrete_path(template: &str, tenant: &str) -> String {
    template
        .split('/')
        .map(|part| match part {
            "{tenant_id}" => tenant,
            p if p.starts_with('{') => "x1",
            p => p,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The inbound receivers are public, and verify their caller before reading the body: a real
/// trigger and a real integration, with what proves the call.
struct Inbound {
    trigger_path: String,
    trigger_secret: String,
    integration_path: String,
}

const INTEGRATION_SECRET: &str = "code-host-secret-01";

async fn inbound(app: &TestApp, token: &str) -> Inbound {
    let workflow = crate::executions::create_workflow(app, token, &crate::triggers::echo()).await;
    let r = app
        .post_json_with_token(
            &format!("/api/v1/workflows/{workflow}/webhooks"),
            token,
            &json!({"name": "in", "allowed_methods": ["POST", "PUT", "PATCH"]}),
        )
        .await;
    let trigger = crate::helpers::json_with_status(r, 201).await;
    let body = json!({"kind": "code-host", "name": "repo", "signing_secret": INTEGRATION_SECRET, "workflow_id": workflow});
    let integration = crate::helpers::json_with_status(
        app.post_json_with_token("/api/v1/integrations", token, &body).await,
        201,
    )
    .await;
    Inbound {
        trigger_path: trigger["url"].as_str().unwrap().to_owned(),
        trigger_secret: trigger["secret"].as_str().unwrap().to_owned(),
        integration_path: integration["receiver_url"].as_str().unwrap().to_owned(),
    }
}

async fn every_string_of_every_body(app: TestApp) {
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    // No plan limit: the table sends a few hundred requests.
    agentry_store::CreditStore::new(app.db.clone())
        .set_plan(
            &agentry_domain::ids::TenantId::from_string(tenant.clone()),
            agentry_domain::tenancy::Plan::Enterprise,
        )
        .await
        .unwrap();
    let inbound = inbound(&app, &token).await;
    let doc: Value =
        app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap().json().await.unwrap();
    let mut checked = 0;
    for (template, operations) in doc["paths"].as_object().unwrap() {
        for method in ["post", "patch", "put"] {
            let Some(schema) = operations
                .get(method)
                .and_then(|o| o["requestBody"]["content"]["application/json"].get("schema"))
            else {
                continue;
            };
            let Sample { body, strings } = sample(&doc, schema);
            let receiver = match template.as_str() {
                "/api/v1/webhooks/trigger/{path}" => Some(Receiver::Trigger),
                "/api/v1/webhooks/integrations/{kind}" => Some(Receiver::Integration),
                _ => None,
            };
            let path = match receiver {
                Some(Receiver::Trigger) => inbound.trigger_path.clone(),
                Some(Receiver::Integration) => inbound.integration_path.clone(),
                None => concrete_path(template, &tenant),
            };
            for (field, steps) in strings {
                let sent = with_nul(&body, &steps);
                let raw = sent.to_string();
                let mut request = app
                    .client
                    .request(method.to_uppercase().parse().unwrap(), app.url(&path))
                    .header("content-type", "application/json");
                request = match receiver {
                    Some(Receiver::Trigger) => request.header("x-webhook-secret", &inbound.trigger_secret),
                    Some(Receiver::Integration) => request
                        .header("x-github-event", "push")
                        .header("x-github-delivery", format!("d-{checked}"))
                        .header(
                            "x-hub-signature-256",
                            format!(
                                "sha256={}",
                                crate::triggers::hmac_hex(INTEGRATION_SECRET, raw.as_bytes())
                            ),
                        ),
                    None => request.bearer_auth(&token),
                };
                let r = request.body(raw).send().await.unwrap();
                // An inbound body is the execution's input, named as such.
                let field = if receiver.is_some() { format!("body.{field}") } else { field };
                let status = r.status().as_u16();
                let answer: Value = r.json().await.unwrap_or(Value::Null);
                assert_eq!(status, 422, "{method} {template} with U+0000 in {field}: {answer}");
                // The field as the route's error shape names it: `details` in the API's, `param`
                // in OpenAI's (the OpenAI-compatible endpoint).
                let named = if answer["details"].is_array() {
                    answer["details"][0]["field"].clone()
                } else {
                    answer["error"]["param"].clone()
                };
                assert_eq!(named, json!(field), "{method} {template}: {answer}");
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} fields were found in the document");
    // A field no route reads (unknown fields are ignored) is not judged: nothing of it is stored.
    let r = app
        .post_json_with_token("/api/v1/agents", &token, &json!({"name": "Kept", "note\u{0}": "a\u{0}b"}))
        .await;
    assert_eq!(r.status(), 201);
    // Nothing refused was stored anywhere.
    assert_eq!(app.db.count_rows("agents").await.unwrap(), 1, "only the agent whose fields hold no U+0000");
    for table in ["workflow_schedules", "webhook_subscriptions", "memory_entries", "workflow_executions"] {
        assert_eq!(app.db.count_rows(table).await.unwrap_or(0), 0, "{table}");
    }
}

#[tokio::test]
async fn u0000_in_any_string_of_any_body_is_a_422_naming_the_field_on_both_databases() {
    on_both_databases(|c| c.auth_rate_per_minute = 100_000, every_string_of_every_body).await;
}
