//! Schedules over HTTP: managed per workflow, validated, invisible to other tenants; each due
//! tick starts one execution (origin `schedule`, `trigger.tick` in its templates), and after
//! downtime the latest missed tick runs once while the others are counted. Time is the test's
//! manual clock; background work is drained, not waited for.

use agentry_domain::time::Clock as _;
use chrono::Duration;
use serde_json::{Value, json};

use crate::executions::create_workflow;
use crate::helpers::{TestApp, json_with_status, on_both_databases_with_clock};

/// A workflow whose output shows what the schedule gave it.
fn reporter() -> Value {
    json!({
        "name": "Reporter",
        "steps": [{"id": "report", "type": "transform",
                   "output": {"report": "{{ input.report }}", "tick": "{{ trigger.tick }}", "schedule": "{{ trigger.schedule_id }}"}}]
    })
}

async fn schedule(app: &TestApp, token: &str, workflow: &str, body: &Value) -> Value {
    let r = app.post_json_with_token(&format!("/api/v1/workflows/{workflow}/schedules"), token, body).await;
    json_with_status(r, 201).await
}

async fn executions(app: &TestApp, token: &str, workflow: &str) -> Vec<Value> {
    let r = app.get_with_token(&format!("/api/v1/workflows/{workflow}/executions?per_page=100"), token).await;
    json_with_status(r, 200).await["executions"].as_array().unwrap().clone()
}

async fn listed(app: &TestApp, token: &str, workflow: &str) -> Value {
    let r = app.get_with_token(&format!("/api/v1/workflows/{workflow}/schedules"), token).await;
    json_with_status(r, 200).await["items"][0].clone()
}

#[tokio::test]
async fn each_due_tick_starts_one_execution_and_downtime_runs_only_the_latest() {
    on_both_databases_with_clock(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let workflow = create_workflow(&app, &token, &reporter()).await;
            let made = schedule(
                &app,
                &token,
                &workflow,
                &json!({"cron": "* * * * *", "input": {"report": "daily"}}),
            )
            .await;
            let id = made["id"].as_str().unwrap().to_owned();
            assert!(id.starts_with("sch_"), "{made}");
            assert_eq!((made["timezone"].as_str(), made["is_active"].as_bool()), (Some("UTC"), Some(true)));
            assert_eq!((made["last_run_at"].clone(), made["missed_count"].as_u64()), (Value::Null, Some(0)));
            let now = app.clock().now();
            let next = (now + Duration::minutes(1)).format("%Y-%m-%dT%H:%M:00.000Z").to_string();
            assert_eq!(made["next_run_at"], next, "the clock stands at the first second of a minute");

            // Not yet due: nothing starts.
            app.drain().await;
            assert!(executions(&app, &token, &workflow).await.is_empty());

            // The tick comes: one execution, which completes with what the schedule gave it.
            app.clock().advance(Duration::minutes(1));
            app.drain().await;
            app.drain().await;
            let ran = executions(&app, &token, &workflow).await;
            assert_eq!(ran.len(), 1, "{ran:?}");
            let e = json_with_status(
                app.get_with_token(
                    &format!("/api/v1/executions/{}", ran[0]["execution_id"].as_str().unwrap()),
                    &token,
                )
                .await,
                200,
            )
            .await;
            assert_eq!(
                (e["origin"].as_str(), e["status"].as_str()),
                (Some("schedule"), Some("completed")),
                "{e}"
            );
            assert_eq!(e["output"], json!({"report": "daily", "tick": next, "schedule": id}));
            let after = listed(&app, &token, &workflow).await;
            assert_eq!(after["last_run_at"], next);
            assert_eq!(after["missed_count"], 0);

            // Down for five minutes: the latest tick runs once, four are counted as missed.
            app.clock().advance(Duration::minutes(5));
            app.drain().await;
            app.drain().await;
            assert_eq!(executions(&app, &token, &workflow).await.len(), 2);
            let after = listed(&app, &token, &workflow).await;
            assert_eq!(after["missed_count"], 4, "{after}");
            let latest = (now + Duration::minutes(6)).format("%Y-%m-%dT%H:%M:00.000Z").to_string();
            assert_eq!(after["last_run_at"], latest);
            // Draining again starts nothing: each tick ran once.
            app.drain().await;
            assert_eq!(executions(&app, &token, &workflow).await.len(), 2);

            // Paused, it starts nothing; resumed, it starts from now (the paused ticks are not run).
            let path = format!("/api/v1/workflows/{workflow}/schedules/{id}");
            let paused = json_with_status(
                app.patch_json_with_token(&path, &token, &json!({"is_active": false})).await,
                200,
            )
            .await;
            assert_eq!(
                (paused["is_active"].as_bool(), paused["next_run_at"].clone()),
                (Some(false), Value::Null)
            );
            app.clock().advance(Duration::minutes(3));
            app.drain().await;
            assert_eq!(executions(&app, &token, &workflow).await.len(), 2);
            let resumed = json_with_status(
                app.patch_json_with_token(&path, &token, &json!({"is_active": true})).await,
                200,
            )
            .await;
            assert!(resumed["next_run_at"].as_str().unwrap() > latest.as_str());
            assert_eq!(app.delete_with_token(&path, &token).await.status(), 204);
            assert_eq!(
                app.get_with_token(&format!("/api/v1/workflows/{workflow}/schedules"), &token).await.status(),
                200
            );
        },
    )
    .await;
}

#[tokio::test]
async fn schedules_are_validated_and_scoped_to_their_tenant() {
    on_both_databases_with_clock(
        |_| {},
        |app| async move {
            let ada = app.access_token("ada@example.com").await;
            let workflow = create_workflow(&app, &ada, &reporter()).await;
            let path = format!("/api/v1/workflows/{workflow}/schedules");
            for (body, fields) in [
                (json!({}), vec!["cron"]),
                (json!({"cron": "* * * *"}), vec!["cron"]),
                (json!({"cron": "* * * * *", "timezone": "Mars/Olympus"}), vec!["timezone"]),
                (json!({"cron": 5, "input": [1], "is_active": "yes"}), vec!["cron", "input", "is_active"]),
                // Parses, but names no date: it would never run.
                (json!({"cron": "0 0 31 2 *"}), vec!["cron"]),
                // A field schedules do not have (a misspelt `is_active`).
                (json!({"cron": "* * * * *", "is_actve": false}), vec!["is_actve"]),
                // U+0000, in the input as anywhere in a body.
                (json!({"cron": "* * * * *", "input": {"note": "a\u{0}b"}}), vec!["input.note"]),
            ] {
                let error = json_with_status(app.post_json_with_token(&path, &ada, &body).await, 422).await;
                let named: Vec<&str> = error["details"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d["field"].as_str().unwrap())
                    .collect();
                assert_eq!(named, fields, "{body} → {error}");
            }
            let made = schedule(
                &app,
                &ada,
                &workflow,
                &json!({"cron": "30 2 * * *", "timezone": "Europe/Berlin", "is_active": false}),
            )
            .await;
            assert_eq!(made["next_run_at"], Value::Null, "paused from the start");
            let one = format!("{path}/{}", made["id"].as_str().unwrap());
            // An update is read by the same rules.
            for (body, field) in [
                (json!({"cron": "0 0 30 2 *"}), "cron"),
                (json!({"paused": true}), "paused"),
                (json!({"input": {"note": "a\u{0}b"}}), "input.note"),
            ] {
                let error = json_with_status(app.patch_json_with_token(&one, &ada, &body).await, 422).await;
                assert_eq!(error["details"][0]["field"], field, "{body} → {error}");
            }

            // Another tenant finds neither the workflow's schedules nor the schedule.
            let eve = app.access_token("eve@example.com").await;
            assert_eq!(app.get_with_token(&path, &eve).await.status(), 404);
            assert_eq!(
                app.post_json_with_token(&path, &eve, &json!({"cron": "* * * * *"})).await.status(),
                404
            );
            assert_eq!(
                app.patch_json_with_token(&one, &eve, &json!({"is_active": true})).await.status(),
                404
            );
            assert_eq!(app.delete_with_token(&one, &eve).await.status(), 404);
            assert_eq!(listed(&app, &ada, &workflow).await["id"], made["id"]);

            // Deleting the workflow deletes its schedules.
            assert_eq!(
                app.delete_with_token(&format!("/api/v1/workflows/{workflow}"), &ada).await.status(),
                204
            );
            assert_eq!(app.patch_json_with_token(&one, &ada, &json!({"cron": "@daily"})).await.status(), 404);
        },
    )
    .await;
}
