use serde_json::json;

use crate::helpers::{json_with_status, spawn, start, test_config};

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let app = spawn().await;
    let body = json_with_status(app.client.get(app.url("/healthz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ok");
    let body = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ready");
}

#[tokio::test]
async fn every_response_carries_a_request_id_and_echoes_a_given_one() {
    let app = spawn().await;
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    let generated = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(generated.len(), 26);
    let r = app.client.get(app.url("/no/such/route")).header("x-request-id", "abc-123").send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    // A header that could smuggle text into logs is replaced, not echoed.
    let r = app.client.get(app.url("/healthz")).header("x-request-id", "a b\tc").send().await.unwrap();
    assert_ne!(r.headers()["x-request-id"], "a b\tc");
}

#[tokio::test]
async fn openapi_document_lists_the_routes_and_the_docs_page_is_served() {
    let app = spawn().await;
    let doc =
        json_with_status(app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap(), 200).await;
    assert_eq!(doc["openapi"], "3.1.0");
    for path in
        ["/api/v1/auth/register", "/api/v1/auth/login", "/api/v1/auth/me", "/api/v1/auth/refresh", "/healthz"]
    {
        assert!(doc["paths"].get(path).is_some(), "{path} missing from the OpenAPI document");
    }
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    assert!(docs.text().await.unwrap().contains("swagger"));
    let config =
        app.client.get(app.url("/docs/swagger-initializer.js")).send().await.unwrap().text().await.unwrap();
    assert!(config.contains("/api/v1/openapi.json"), "the docs page reads the served document");
}

#[tokio::test]
async fn a_workflow_steps_schema_takes_each_types_parameters_and_nothing_else() {
    let app = spawn().await;
    let doc =
        json_with_status(app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap(), 200).await;
    for request in ["CreateWorkflowRequest", "UpdateWorkflowRequest"] {
        let kinds = doc["components"]["schemas"][request]["properties"]["steps"]["items"]["oneOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{request}: one schema per step type"));
        let mut seen = Vec::new();
        for kind in kinds {
            let step_type = kind["properties"]["type"]["enum"][0].as_str().unwrap();
            seen.push(step_type.to_owned());
            assert_eq!(kind["additionalProperties"], false, "{request}: {step_type} refuses unknown fields");
            let mut names: Vec<&str> =
                kind["properties"].as_object().unwrap().keys().map(String::as_str).collect();
            names.sort_unstable();
            let mut wanted = vec!["id", "type", "timeout_seconds", "retry", "on_error", "next"];
            wanted.extend(agentry_domain::workflows::StepType::parse(step_type).unwrap().parameters());
            wanted.sort_unstable();
            assert_eq!(names, wanted, "{request}: {step_type}");
        }
        assert_eq!(
            seen,
            [
                "transform",
                "agent_chat",
                "http_request",
                "memory_search",
                "memory_add",
                "knowledge_search",
                "condition",
                "wait"
            ]
        );
    }
}

fn operations(doc: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            ops.push((format!("{} {path}", method.to_uppercase()), op.clone()));
        }
    }
    ops
}

#[tokio::test]
async fn the_openapi_document_tells_every_status_and_reflects_the_envelope() {
    let app = spawn().await;
    let doc =
        json_with_status(app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap(), 200).await;
    let ops = operations(&doc);
    let mut ids: Vec<&str> = ops.iter().map(|(_, op)| op["operationId"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let count = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids are unique");
    for (name, op) in &ops {
        let responses = op["responses"].as_object().unwrap();
        let secured = op.get("security").is_some();
        for (status, response) in responses {
            assert!(response["description"].as_str().is_some_and(|d| !d.is_empty()), "{name} {status}");
            if status.as_str() >= "400" {
                // The OpenAI-compatible routes answer errors in OpenAI's shape.
                let openai = name.ends_with("/chat/completions") || name.ends_with("/models");
                let schema = if openai { "OpenAiError" } else { "Error" };
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    format!("#/components/schemas/{schema}"),
                    "{name} {status}"
                );
            }
        }
        let has = |s: &str| responses.contains_key(s);
        assert!(has("500"), "{name}");
        if secured {
            for status in ["401", "403", "429"] {
                assert!(has(status), "{name} lacks {status}");
            }
            for response in responses.values() {
                assert!(response["headers"]["X-RateLimit-Limit"].is_object(), "{name}: rate-limit headers");
                assert!(response["headers"]["X-Request-Id"].is_object(), "{name}: X-Request-Id");
            }
            let params = op["parameters"].as_array().unwrap();
            let tenant = params.iter().find(|p| p["name"] == "tenant_id").expect("tenant_id");
            // The team routes name their tenant in the path; every other route takes the query.
            let expected =
                if name.contains("/tenants/{tenant_id}") { ("path", true) } else { ("query", false) };
            assert_eq!(
                (tenant["in"].as_str(), tenant["required"].as_bool()),
                (Some(expected.0), Some(expected.1)),
                "{name}"
            );
        }
        if op.get("requestBody").is_some() {
            for status in ["413", "415", "422"] {
                assert!(has(status), "{name} lacks {status}");
            }
        }
        for p in op["parameters"].as_array().into_iter().flatten() {
            if p["name"] == "page" || p["name"] == "per_page" {
                assert_eq!(
                    (p["in"].as_str(), p["required"].as_bool()),
                    (Some("query"), Some(false)),
                    "{name}"
                );
            }
        }
    }
    let chat = &doc["paths"]["/api/v1/agents/{agent_id}/chat"]["post"]["responses"];
    for status in ["402", "404", "409", "502"] {
        assert!(chat.get(status).is_some(), "chat lacks {status}");
    }
    assert!(chat["429"]["headers"]["Retry-After"].is_object());
    assert!(chat["200"]["headers"]["X-RateLimit-Limit"].is_object());
    let agent = &doc["components"]["schemas"]["CreateAgentRequest"];
    assert_eq!(agent["required"], json!(["name"]), "name required, config optional");
    assert_eq!(agent["properties"]["name"]["maxLength"], 100);
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["oauth2"]["flows"]["password"]["tokenUrl"], "/api/v1/auth/login");

    // Under the wrapped envelope: wrapped bodies, and 400 for validation errors.
    let app = crate::helpers::spawn_with(|c| c.api_envelope = agentry_server::ApiEnvelope::Wrapped).await;
    let doc =
        json_with_status(app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap(), 200).await;
    let create = &doc["paths"]["/api/v1/agents"]["post"]["responses"];
    assert!(create.get("400").is_some() && create.get("422").is_none());
    assert_eq!(
        create["201"]["content"]["application/json"]["schema"]["properties"]["success"]["const"],
        true
    );
    assert!(doc["components"]["schemas"]["Error"]["properties"]["success"].is_object());
}

#[tokio::test]
async fn data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(&dir);
    let db_url = config.database_url.clone();
    let first = start(config, tempfile::tempdir().unwrap()).await;
    assert_eq!(first.register("keep@example.com", None).await.status(), 201);
    first.handle.stop(true).await;

    let mut config = test_config(&dir);
    config.database_url = db_url;
    let second = start(config, dir).await;
    assert_eq!(second.login("keep@example.com", "correct horse battery").await.status(), 200);
    assert_eq!(second.register("keep@example.com", None).await.status(), 409);
}

#[tokio::test]
async fn a_graceful_stop_lets_in_flight_requests_finish() {
    let app = spawn().await;
    assert_eq!(app.register("drain@example.com", None).await.status(), 201);
    // A login spends a full argon2id verification: long enough to be in flight during the stop.
    let in_flight = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/api/v1/auth/login");
        async move {
            client
                .post(url)
                .form(&[("username", "drain@example.com"), ("password", "correct horse battery")])
                .send()
                .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    app.handle.stop(true).await;
    let response = in_flight.await.unwrap().expect("the in-flight request was answered");
    assert_eq!(response.status(), 200);
    assert!(app.client.get(app.url("/healthz")).send().await.is_err(), "no new connections after the stop");
}

/// The whole account flow on PostgreSQL, when a test database is configured (always in CI).
#[tokio::test]
async fn the_account_flow_runs_on_postgresql() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir);
    config.database_url = url;
    config.auto_migrate = Some(true);
    let app = start(config, dir).await;

    let body = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ready");
    let token = app.signed_in("pg@example.com").await;
    assert_eq!(app.register("PG@example.com", None).await.status(), 409);
    let access = token["access_token"].as_str().unwrap();
    let me = json_with_status(app.get_with_token("/api/v1/auth/me", access).await, 200).await;
    assert_eq!(me["tenants"][0]["role"], "owner");
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": token["refresh_token"]})).await;
    assert_eq!(r.status(), 200);
    let r = app.post_json("/api/v1/auth/refresh", &json!({"refresh_token": token["refresh_token"]})).await;
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn instances_with_different_jwt_keys_fail_readiness_naming_the_setting() {
    let Some(url) = agentry_store::test_support::postgres_url().await.unwrap() else {
        eprintln!("skipping: AGENTRY_TEST_DATABASE_URL is not set");
        return;
    };
    // Every setting is read as written: a secret key of digits only is still a key.
    let digits = "0123456789".repeat(7)[..64].to_owned();
    let instance = |jwt: &'static str| {
        let (url, digits) = (url.clone(), digits.clone());
        async move {
            let dir = tempfile::tempdir().unwrap();
            let mut config = test_config(&dir);
            config.database_url = url;
            config.auto_migrate = Some(true);
            config.secret_key = Some(secrecy::SecretString::from(digits));
            config.jwt_secret = Some(secrecy::SecretString::from(jwt));
            start(config, dir).await
        }
    };
    let first = instance(crate::helpers::JWT_SECRET).await;
    let body = json_with_status(first.client.get(first.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(body["status"], "ready", "alone, an instance agrees with itself");
    let second = instance("another-key-another-key-another-key-0123").await;
    for app in [&first, &second] {
        let r = app.client.get(app.url("/readyz")).send().await.unwrap();
        assert!(r.headers().contains_key("retry-after"));
        let error = json_with_status(r, 503).await;
        assert_eq!(error["error"], "unavailable");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("AGENTRY_JWT_SECRET"), "{message}");
        assert!(
            !message.contains("AGENTRY_SECRET_KEY") && !message.contains("AGENTRY_PUBLIC_URL"),
            "{message}"
        );
    }
}
