//! Constrained output on the real SmolLM2 file: replies held to a JSON Schema, and tool calls
//! whose arguments match the tool's schema. Skipped (with a note) without the model file,
//! failed without it under `AGENTRY_REQUIRE_MODEL=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentry_domain::agents::{ChatModel, ChatRole, ChatTurn, CompletionRequest, FinishReason, ToolSpec};
use agentry_llm::{LocalModel, LocalSettings};
use serde_json::{Value, json};

mod common;

fn load() -> Option<LocalModel> {
    let path = common::smollm2()?;
    let settings = LocalSettings {
        concurrency: 4,
        queue: 256,
        timeout: Duration::from_secs(600),
        context: 2048,
        ..LocalSettings::default()
    };
    Some(LocalModel::load(&path, &settings).unwrap())
}

/// Whether `value` is an instance of `schema`, for the keywords these tests' schemas use.
fn valid(value: &Value, schema: &Value) -> Result<(), String> {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return if options.contains(value) { Ok(()) } else { Err(format!("{value} not in {options:?}")) };
    }
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    match (kind, value) {
        ("object", Value::Object(map)) => {
            let properties = schema["properties"].as_object().unwrap();
            for required in schema["required"].as_array().into_iter().flatten() {
                if !map.contains_key(required.as_str().unwrap()) {
                    return Err(format!("{required} is missing from {value}"));
                }
            }
            for (key, item) in map {
                let Some(sub) = properties.get(key) else { return Err(format!("{key} is not allowed")) };
                valid(item, sub)?;
            }
            Ok(())
        }
        ("array", Value::Array(items)) => {
            let max = schema.get("maxItems").and_then(Value::as_u64).unwrap_or(u64::MAX);
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            if (items.len() as u64) < min || items.len() as u64 > max {
                return Err(format!("{} items", items.len()));
            }
            items.iter().try_for_each(|item| valid(item, &schema["items"]))
        }
        ("string", Value::String(s)) => {
            let max = schema.get("maxLength").and_then(Value::as_u64).unwrap_or(u64::MAX);
            if s.chars().count() as u64 > max { Err(format!("{s:?} is too long")) } else { Ok(()) }
        }
        // JSON Schema's integers are numbers without a fraction (`-0` is one).
        ("integer", Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => Ok(()),
        ("boolean", Value::Bool(_)) => Ok(()),
        _ => Err(format!("{value} is not a {kind}")),
    }
}

fn schemas() -> Vec<Value> {
    vec![
        // What memory extraction asks for.
        json!({
            "type": "object",
            "properties": {
                "facts": {
                    "type": "array", "maxItems": 3,
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "maxLength": 60},
                            "decision": {"enum": ["ADD", "UPDATE", "INVALIDATE", "NONE"]}
                        },
                        "required": ["text", "decision"]
                    }
                }
            },
            "required": ["facts"]
        }),
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "population": {"type": "integer"},
                "capital": {"type": "boolean"}
            },
            "required": ["city", "population", "capital"]
        }),
    ]
}

const PROMPTS: [&str; 5] = [
    "I live in Lyon and my name is Ada.",
    "Tell me about Paris.",
    "My favourite colour is green, and I moved to Porto last year.",
    "What do you know about Tokyo?",
    "I work as a nurse.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_constrained_replies_all_parse_and_validate() {
    let Some(m) = load() else { return };
    let schemas = schemas();
    let mut failures = Vec::new();
    let mut runs = Vec::new();
    for i in 0..100 {
        let schema = schemas[i % schemas.len()].clone();
        let request = CompletionRequest {
            model: "local".into(),
            // Sampled, so that the hundred replies differ.
            temperature: Some(0.9),
            max_tokens: 400,
            messages: vec![
                ChatTurn::new(ChatRole::System, format!("Answer with JSON of this schema: {schema}")),
                ChatTurn::new(ChatRole::User, PROMPTS[i % PROMPTS.len()]),
            ],
            tools: Vec::new(),
            response_schema: Some(schema.clone()),
        };
        let m = m.clone();
        runs.push(async move { (m.complete(&request).await, schema) });
    }
    let results = futures_util::future::join_all(runs).await;
    let mut distinct = std::collections::HashSet::new();
    for (answer, schema) in results {
        let answer = answer.unwrap();
        distinct.insert(answer.content.clone());
        match serde_json::from_str::<Value>(&answer.content) {
            Ok(value) => {
                if let Err(e) = valid(&value, &schema) {
                    failures.push(format!("{e}: {}", answer.content));
                }
            }
            Err(e) => failures.push(format!("{e} ({:?}): {}", answer.finish, answer.content)),
        }
    }
    assert!(failures.is_empty(), "{} of 100 invalid: {failures:#?}", failures.len());
    assert!(distinct.len() > 20, "the replies are sampled, not one answer repeated: {}", distinct.len());
}

#[tokio::test]
async fn offered_a_tool_the_model_calls_it_with_arguments_of_its_schema() {
    let Some(m) = load() else { return };
    let tool = ToolSpec {
        name: "memory_search".into(),
        description: "Searches what the user told you before. Use it for questions about the user.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"query": {"type": "string", "maxLength": 80}},
            "required": ["query"]
        }),
    };
    let request = CompletionRequest {
        model: "local".into(),
        temperature: None,
        max_tokens: 128,
        messages: vec![ChatTurn::new(ChatRole::User, "Search your memory: what is my favourite colour?")],
        tools: vec![tool.clone()],
        response_schema: None,
    };
    let answer = m.complete(&request).await.unwrap();
    assert_eq!(answer.finish, FinishReason::ToolCalls, "{answer:?}");
    let call = &answer.tool_calls[0];
    assert_eq!(call.name, "memory_search");
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
    valid(&arguments, &tool.parameters).unwrap();
}
