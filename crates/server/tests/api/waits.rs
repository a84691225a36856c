//! The `wait` step over HTTP, on both databases, on a clock the test moves: the execution shows
//! `waiting` with the step's time, holds no worker, is listed by `?status=waiting`, goes on when
//! the time comes, and a cancel while it waits fails the step that waited.

use serde_json::{Value, json};

use crate::executions::{create_workflow, execute, finished, loopback, wait_until};
use crate::helpers::{TestApp, json_with_status, on_both_databases_with_clock};

async fn shown(app: &TestApp, token: &str, id: &str) -> Value {
    json_with_status(app.get_with_token(&format!("/api/v1/executions/{id}"), token).await, 200).await
}

/// A workflow that says hello, waits `seconds`, then says goodbye; the id of its execution.
async fn waiting_execution(app: &TestApp, token: &str, seconds: u32) -> (String, String) {
    let workflow = create_workflow(
        app,
        token,
        &json!({
            "name": "Waits",
            "steps": [
                {"id": "hello", "type": "transform", "output": "hello {{ input.name }}"},
                {"id": "pause", "type": "wait", "seconds": seconds},
                {"id": "bye", "type": "transform", "output": "{{ steps.hello.output }}, then bye"}
            ]
        }),
    )
    .await;
    let id = execute(app, token, &workflow, json!({"name": "Ada"})).await["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.drain().await;
    let tenant = app.tenant_of(token).await;
    wait_until(app, &tenant, &id, |e| e.status().as_str() == "waiting").await;
    (workflow, id)
}

fn now(app: &TestApp) -> chrono::DateTime<chrono::Utc> {
    agentry_domain::time::Clock::now(app.clock())
}

#[tokio::test]
async fn a_wait_holds_the_execution_waiting_until_its_time_then_it_goes_on() {
    on_both_databases_with_clock(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let (workflow, id) = waiting_execution(&app, &token, 60).await;
        let waiting = shown(&app, &token, &id).await;
        assert_eq!(waiting["status"], "waiting", "{waiting}");
        assert_eq!(waiting["finished_at"], Value::Null);
        let pause = &waiting["steps"][1];
        assert_eq!(
            (pause["status"].as_str(), pause["attempts"].as_u64()),
            (Some("waiting"), Some(1)),
            "{pause}"
        );
        let until = chrono::DateTime::parse_from_rfc3339(pause["next_run_at"].as_str().unwrap()).unwrap();
        assert_eq!(until.timestamp() - now(&app).timestamp(), 60, "{pause}");
        assert_eq!(waiting["steps"][2]["status"], "pending");

        let listed = json_with_status(
            app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions?status=waiting"), &token)
                .await,
            200,
        )
        .await;
        assert_eq!(listed["executions"][0]["execution_id"], id.as_str(), "{listed}");

        // A second early, nothing moves.
        app.clock().advance(chrono::Duration::seconds(59));
        app.drain().await;
        assert_eq!(shown(&app, &token, &id).await["status"], "waiting");
        app.clock().advance(chrono::Duration::seconds(1));
        app.drain().await;
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["output"], "hello Ada, then bye");
        let pause = &done["steps"][1];
        assert_eq!(
            (pause["status"].as_str(), pause["attempts"].as_u64()),
            (Some("completed"), Some(1)),
            "{pause}"
        );
        assert_eq!(pause["next_run_at"], Value::Null);
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(pause["output"]["waited_until"].as_str().unwrap()).unwrap(),
            until
        );
    })
    .await;
}

#[tokio::test]
async fn cancelling_a_waiting_execution_fails_the_step_that_waited_and_nothing_runs_after() {
    on_both_databases_with_clock(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        // Within the access token's life, which the clock moves through too.
        let (_, id) = waiting_execution(&app, &token, 600).await;
        let cancelled = json_with_status(
            app.post_json_with_token(&format!("/api/v1/executions/{id}/cancel"), &token, &json!({})).await,
            202,
        )
        .await;
        assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
        let statuses: Vec<&str> =
            cancelled["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["completed", "failed", "skipped"]);
        assert_eq!(cancelled["steps"][1]["error"], "the execution was cancelled while this step waited");

        app.clock().advance(chrono::Duration::seconds(600));
        app.drain().await;
        let after = shown(&app, &token, &id).await;
        assert_eq!(after, cancelled, "its time came and went: nothing ran");
        // Cancelled once: a second cancel is a conflict.
        let again =
            app.post_json_with_token(&format!("/api/v1/executions/{id}/cancel"), &token, &json!({})).await;
        assert_eq!(again.status(), 409);
    })
    .await;
}

#[tokio::test]
async fn a_wait_step_that_says_not_how_long_is_refused_with_its_path() {
    on_both_databases_with_clock(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let refused = json_with_status(
            app.post_json_with_token(
                "/api/v1/workflows",
                &token,
                &json!({
                    "name": "Bad waits",
                    "steps": [
                        {"id": "a", "type": "wait"},
                        {"id": "b", "type": "wait", "seconds": 0},
                        {"id": "c", "type": "wait", "until": "soon"}
                    ]
                }),
            )
            .await,
            422,
        )
        .await;
        let fields: Vec<&str> =
            refused["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
        assert_eq!(fields, ["steps[0].seconds", "steps[1].seconds", "steps[2].until"], "{refused}");
    })
    .await;
}
