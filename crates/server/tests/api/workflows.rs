//! Workflows over HTTP: saving, validation of steps when saved, paging, scopes and tenant
//! isolation, on both databases.

use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, on_both_databases};

fn greeter() -> Value {
    json!({
        "name": "Greeter",
        "description": "says hello",
        "steps": [
            {"id": "greet", "type": "transform", "output": "Hello {{ input.name }}"},
            {"id": "call", "type": "http_request", "method": "POST", "url": "https://hooks.example.com/in",
             "headers": {"X-Run": "{{ input.run }}"}, "body": {"text": "{{ steps.greet.output }}"}}
        ]
    })
}

async fn create(app: &TestApp, token: &str, body: &Value) -> Value {
    json_with_status(app.post_json_with_token("/api/v1/workflows", token, body).await, 201).await
}

#[tokio::test]
async fn a_workflow_is_created_read_listed_changed_and_deleted() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let created = create(&app, &token, &greeter()).await;
            let id = created["id"].as_str().unwrap().to_owned();
            assert!(id.starts_with("wf_"), "{created}");
            assert_eq!(created["is_active"], true);
            assert_eq!(created["steps"][1]["body"]["text"], "{{ steps.greet.output }}");
            assert_eq!(created["tenant_id"], app.tenant_of(&token).await);
            let path = format!("/api/v1/workflows/{id}");
            assert_eq!(json_with_status(app.get_with_token(&path, &token).await, 200).await, created);

            create(
                &app,
                &token,
                &json!({"name": "Second", "steps": [{"id": "a", "type": "transform", "output": 1}]}),
            )
            .await;
            let listed =
                json_with_status(app.get_with_token("/api/v1/workflows?per_page=1", &token).await, 200).await;
            assert_eq!(listed["total"], 2);
            assert_eq!(listed["page"], 1);
            assert_eq!(listed["per_page"], 1);
            assert_eq!(listed["workflows"].as_array().unwrap().len(), 1);

            let r = app
                .patch_json_with_token(&path, &token, &json!({"is_active": false, "description": null}))
                .await;
            let changed = json_with_status(r, 200).await;
            assert_eq!(changed["is_active"], false);
            assert_eq!(changed["description"], Value::Null);
            assert_eq!(changed["name"], "Greeter", "absent fields keep their value");

            for field in ["name", "steps", "is_active"] {
                let r = app.patch_json_with_token(&path, &token, &json!({ field: null })).await;
                assert_eq!(
                    json_with_status(r, 422).await["details"][0]["field"],
                    field,
                    "{field}: null is refused"
                );
            }

            assert_eq!(app.delete_with_token(&path, &token).await.status(), 204);
            assert_eq!(app.get_with_token(&path, &token).await.status(), 404);
            assert_eq!(app.delete_with_token(&path, &token).await.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn steps_are_checked_when_saved_with_each_problem_named() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let cases = [
            (json!({"steps": [{"id": "a", "type": "transform", "output": 1}]}), "name"),
            (json!({"name": "x"}), "steps"),
            (json!({"name": "x", "steps": []}), "steps"),
            (json!({"name": "x", "steps": [{"id": "a", "type": "teleport"}]}), "steps[0].type"),
            (json!({"name": "x", "steps": [{"type": "transform", "output": 1}]}), "steps[0].id"),
            (
                json!({"name": "x", "steps": [{"id": "a", "type": "transform", "output": 1},
                                              {"id": "a", "type": "transform", "output": 2}]}),
                "steps[1].id",
            ),
            (json!({"name": "x", "steps": [{"id": "a", "type": "transform", "output": "{{ input.name "}]}), "steps[0].output"),
            (
                json!({"name": "x", "steps": [{"id": "a", "type": "transform", "output": "{{ steps.b.output }}"},
                                              {"id": "b", "type": "transform", "output": 1}]}),
                "steps[0].output",
            ),
            (json!({"name": "x", "steps": [{"id": "a", "type": "http_request", "method": "GET"}]}), "steps[0].url"),
        ];
        for (body, field) in cases {
            let r = app.post_json_with_token("/api/v1/workflows", &token, &body).await;
            let err = json_with_status(r, 422).await;
            let fields: Vec<&str> = err["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
            assert!(fields.contains(&field), "{body} → {err}");
        }
        let listed = json_with_status(app.get_with_token("/api/v1/workflows", &token).await, 200).await;
        assert_eq!(listed["total"], 0, "nothing invalid was saved");
    })
    .await;
}

#[tokio::test]
async fn an_unknown_parameter_of_any_step_type_is_refused_naming_its_path() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let steps = [
            json!({"id": "b", "type": "transform", "output": 1}),
            json!({"id": "b", "type": "agent_chat", "agent_id": "agt_1", "message": "hi"}),
            json!({"id": "b", "type": "http_request", "method": "GET", "url": "https://hooks.example.com/in"}),
            json!({"id": "b", "type": "memory_search", "query": "q"}),
            json!({"id": "b", "type": "memory_add", "content": "c", "memory_type": "semantic"}),
        ];
        for mut step in steps {
            let step_type = step["type"].clone();
            step["bogus"] = json!(true);
            let body = json!({"name": "x", "steps": [{"id": "a", "type": "transform", "output": 1}, step]});
            let err = json_with_status(app.post_json_with_token("/api/v1/workflows", &token, &body).await, 422).await;
            let details = err["details"].as_array().unwrap();
            assert_eq!(details.len(), 1, "{step_type}: {err}");
            assert_eq!(details[0]["field"], "steps[1].bogus", "{step_type}: {err}");
            let message = details[0]["message"].as_str().unwrap();
            assert!(message.contains("unknown parameter \"bogus\""), "{step_type}: {message}");
        }
        // A change of steps is read the same way, and nothing was saved.
        let created = create(&app, &token, &greeter()).await;
        let path = format!("/api/v1/workflows/{}", created["id"].as_str().unwrap());
        let patch = json!({"steps": [{"id": "a", "type": "transform", "output": 1, "outptu": 2}]});
        let err = json_with_status(app.patch_json_with_token(&path, &token, &patch).await, 422).await;
        assert_eq!(err["details"][0]["field"], "steps[0].outptu", "{err}");
        assert_eq!(json_with_status(app.get_with_token(&path, &token).await, 200).await, created);
    })
    .await;
}

#[tokio::test]
async fn another_tenants_workflow_answers_404_and_keys_need_their_scopes() {
    on_both_databases(
        |_| {},
        |app| async move {
            let ada = app.access_token("ada@example.com").await;
            let eve = app.access_token("eve@example.com").await;
            let created = create(&app, &ada, &greeter()).await;
            let path = format!("/api/v1/workflows/{}", created["id"].as_str().unwrap());
            assert_eq!(app.get_with_token(&path, &eve).await.status(), 404);
            assert_eq!(app.patch_json_with_token(&path, &eve, &json!({"name": "mine"})).await.status(), 404);
            assert_eq!(app.delete_with_token(&path, &eve).await.status(), 404);
            let listed = json_with_status(app.get_with_token("/api/v1/workflows", &eve).await, 200).await;
            assert_eq!(listed["total"], 0);

            let key = json_with_status(
                app.post_json_with_token(
                    "/api/v1/auth/api-keys",
                    &ada,
                    &json!({"name": "r", "scopes": ["workflows:read"]}),
                )
                .await,
                201,
            )
            .await;
            let key = key["key"].as_str().unwrap();
            assert_eq!(app.get_with_token(&path, key).await.status(), 200);
            let r = app.post_json_with_token("/api/v1/workflows", key, &greeter()).await;
            assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
            assert_eq!(app.delete_with_token(&path, key).await.status(), 403);
            assert_eq!(app.get_with_token(&path, &ada).await.status(), 200, "still there");
        },
    )
    .await;
}
