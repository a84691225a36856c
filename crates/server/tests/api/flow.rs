//! Workflows that lead on (PRODUCT.md §18) over HTTP, on both databases: a step retried with
//! backoff and `Retry-After` on a clock the test moves, `on_error` and `next` routes, and the
//! refusals of routes and policies that cannot be. Receivers are wiremock servers on
//! 127.0.0.1; nothing else is contacted.

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::executions::{create_workflow, execute, finished, loopback, wait_until};
use crate::helpers::{TestApp, json_with_status, on_both_databases, on_both_databases_with_clock};

/// A receiver at `GET /flaky` that answers 503 asking for 30 s, then 503, then `{"ok": true}`.
async fn flaky() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(503).insert_header("Retry-After", "30").set_body_string("busy"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .with_priority(3)
        .mount(&server)
        .await;
    server
}

async fn shown(app: &TestApp, token: &str, id: &str) -> Value {
    json_with_status(app.get_with_token(&format!("/api/v1/executions/{id}"), token).await, 200).await
}

#[tokio::test]
async fn a_step_answered_503_twice_completes_on_its_third_attempt_after_its_backoff_and_retry_after() {
    on_both_databases_with_clock(loopback, |app| async move {
        let server = flaky().await;
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Flaky",
            "steps": [
                {"id": "call", "type": "http_request", "method": "GET", "url": format!("{}/flaky", server.uri()),
                 "retry": {"max_attempts": 3, "backoff_seconds": 2, "on": ["server_error"]}},
                {"id": "after", "type": "transform", "output": "{{ steps.call.output.body.ok }}"}
            ]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        let attempted = |n: u32| move |e: &agentry_domain::workflows::Execution| e.steps()[0].attempts() == n && e.steps()[0].status().as_str() != "running";
        app.drain().await;
        wait_until(&app, &tenant, &id, attempted(1)).await;

        // The first answer asked for 30 s, longer than the 2 s backoff: the execution waits as a
        // row, due then.
        let waiting = shown(&app, &token, &id).await;
        assert_eq!(waiting["status"], "running", "{waiting}");
        let call = &waiting["steps"][0];
        assert_eq!((call["status"].as_str(), call["attempts"].as_u64()), (Some("pending"), Some(1)), "{call}");
        let due = chrono::DateTime::parse_from_rfc3339(call["next_run_at"].as_str().unwrap()).unwrap();
        assert_eq!(due.timestamp() - agentry_domain::time::Clock::now(app.clock()).timestamp(), 30, "{call}");
        assert_eq!(call["attempt_errors"][0]["attempt"], 1);
        assert_eq!(call["attempt_errors"][0]["error"], "the server answered 503: busy");

        // Not due a second early.
        app.clock().advance(chrono::Duration::seconds(29));
        app.drain().await;
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
        app.clock().advance(chrono::Duration::seconds(1));
        app.drain().await;
        wait_until(&app, &tenant, &id, attempted(2)).await;
        let second = shown(&app, &token, &id).await;
        let due = chrono::DateTime::parse_from_rfc3339(second["steps"][0]["next_run_at"].as_str().unwrap()).unwrap();
        assert_eq!(due.timestamp() - agentry_domain::time::Clock::now(app.clock()).timestamp(), 4, "2 s doubled: {second}");

        app.clock().advance(chrono::Duration::seconds(4));
        app.drain().await;
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        let call = &done["steps"][0];
        assert_eq!((call["attempts"].as_u64(), call["next_run_at"].clone()), (Some(3), Value::Null), "{call}");
        assert_eq!(call["attempt_errors"].as_array().unwrap().len(), 2);
        assert_eq!(call["output"]["status"], 200);
        assert_eq!(done["output"], true, "the output read from the third answer");
        assert_eq!(server.received_requests().await.unwrap().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn on_error_and_next_route_the_execution_and_the_steps_jumped_over_are_skipped() {
    on_both_databases(loopback, |app| async move {
        let server = MockServer::start().await;
        Mock::given(method("GET")).respond_with(ResponseTemplate::new(500)).mount(&server).await;
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Routes",
            "steps": [
                {"id": "call", "type": "http_request", "method": "GET", "url": format!("{}/down", server.uri()),
                 "on_error": "fallback"},
                {"id": "never", "type": "transform", "output": "not run"},
                {"id": "fallback", "type": "transform", "output": "fell back", "next": "end"},
                {"id": "also_never", "type": "transform", "output": "not run"},
                {"id": "end", "type": "transform", "output": "{{ steps.fallback.output }}!", "on_error": "continue"}
            ]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["output"], "fell back!");
        let steps: Vec<(&str, &str, Option<&str>)> = done["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap(), s["branch"].as_str()))
            .collect();
        assert_eq!(
            steps,
            [
                ("call", "failed", Some("fallback")),
                ("never", "skipped", None),
                ("fallback", "completed", Some("end")),
                ("also_never", "skipped", None),
                ("end", "completed", None),
            ]
        );
        assert_eq!(done["steps"][0]["error"], "the server answered 500");

        // A step failing with `on_error: continue` at the end completes the execution.
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Carry on",
            "steps": [{"id": "call", "type": "http_request", "method": "GET", "url": format!("{}/down", server.uri()),
                       "on_error": "continue"}]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        let done = finished(&app, &token, &id).await;
        assert_eq!((done["status"].as_str(), done["steps"][0]["status"].as_str()), (Some("completed"), Some("failed")), "{done}");
    })
    .await;
}

#[tokio::test]
async fn a_condition_takes_each_branch_and_records_it() {
    on_both_databases(|_| {}, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Route",
            "steps": [
                {"id": "route", "type": "condition",
                 "cases": [{"when": "input.total > 1000", "next": "big"}, {"when": "input.flagged", "next": "review"}],
                 "default": "ship"},
                {"id": "big", "type": "transform", "output": "approve {{ input.total }}", "next": "done"},
                {"id": "review", "type": "transform", "output": "review", "next": "done"},
                {"id": "ship", "type": "transform", "output": "ship"},
                {"id": "done", "type": "transform", "output": "{{ input.total }} handled"}
            ]
        })).await;
        for (input, case, taken) in [
            (json!({"total": 5000, "flagged": false}), json!(0), "big"),
            (json!({"total": 10, "flagged": true}), json!(1), "review"),
            (json!({"total": 10, "flagged": false}), Value::Null, "ship"),
        ] {
            let id = execute(&app, &token, &workflow, input.clone()).await["execution_id"].as_str().unwrap().to_owned();
            let done = finished(&app, &token, &id).await;
            assert_eq!(done["status"], "completed", "{input}: {done}");
            let route = &done["steps"][0];
            assert_eq!(route["output"], json!({"case": case, "next": taken}), "{input}");
            assert_eq!(route["branch"], taken, "{input}");
            let ran: Vec<&str> = done["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["status"] == "completed")
                .map(|s| s["id"].as_str().unwrap())
                .collect();
            let expected: Vec<&str> = if taken == "ship" { vec!["route", "ship", "done"] } else { vec!["route", taken, "done"] };
            assert_eq!(ran, expected, "{input}");
            assert_eq!(done["output"], format!("{} handled", input["total"]));
        }
    })
    .await;
}

#[tokio::test]
async fn routes_to_no_step_and_policies_out_of_range_are_refused_with_their_paths() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            for (step, field) in [
                (json!({"next": "nowhere"}), "steps[0].next"),
                (json!({"on_error": "nowhere"}), "steps[0].on_error"),
                (json!({"on_error": "not an id"}), "steps[0].on_error"),
                (json!({"retry": {"max_attempts": 11}}), "steps[0].retry.max_attempts"),
                (json!({"retry": {"factor": 0.5}}), "steps[0].retry.factor"),
                (json!({"retry": {"on": ["sometimes"]}}), "steps[0].retry.on[0]"),
                (json!({"retry": {"tries": 2}}), "steps[0].retry.tries"),
                (json!({"retry": [null, null]}), "steps[0].retry"),
                (
                    json!({"type": "condition", "cases": [{"when": "input.a >", "next": "a"}]}),
                    "steps[0].cases[0].when",
                ),
                (
                    json!({"type": "condition", "cases": [{"when": "input.a", "next": "b"}]}),
                    "steps[0].cases[0].next",
                ),
            ] {
                // A step of another type brings its own parameters.
                let mut first = if step.get("type").is_some() {
                    json!({"id": "a"})
                } else {
                    json!({"id": "a", "type": "transform", "output": 1})
                };
                first.as_object_mut().unwrap().extend(step.as_object().unwrap().clone());
                let r = app
                    .post_json_with_token(
                        "/api/v1/workflows",
                        &token,
                        &json!({"name": "Bad", "steps": [first]}),
                    )
                    .await;
                let body = json_with_status(r, 422).await;
                let fields: Vec<&str> =
                    body["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
                assert!(fields.contains(&field), "{step}: {body}");
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_failed_execution_is_retried_from_its_failed_step_keeping_what_ran_before() {
    on_both_databases(loopback, |app| async move {
        let server = MockServer::start().await;
        // Down once, then up.
        Mock::given(method("POST"))
            .and(path("/first"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"n": 1})))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/flaky"))
            .respond_with(ResponseTemplate::new(500))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/flaky"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"n": 2})))
            .with_priority(2)
            .mount(&server)
            .await;
        let token = app.access_token("ada@example.com").await;
        let workflow = create_workflow(&app, &token, &json!({
            "name": "Retried",
            "steps": [
                {"id": "first", "type": "http_request", "method": "POST", "url": format!("{}/first", server.uri()), "body": "x"},
                {"id": "flaky", "type": "http_request", "method": "POST", "url": format!("{}/flaky", server.uri()), "body": "x"},
                {"id": "sum", "type": "transform", "output": "{{ steps.first.output.body.n + steps.flaky.output.body.n }}"}
            ]
        })).await;
        let id = execute(&app, &token, &workflow, json!({})).await["execution_id"].as_str().unwrap().to_owned();
        let failed = finished(&app, &token, &id).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        let retry = |body: Value| {
            let (app, token, id) = (&app, &token, &id);
            async move { app.post_json_with_token(&format!("/api/v1/executions/{id}/retry"), token, &body).await }
        };
        // A step it does not have is refused.
        let refused = json_with_status(retry(json!({"from_step": "nope"})).await, 422).await;
        assert_eq!(refused["details"][0]["field"], "from_step", "{refused}");

        // Nor is an execution of an inactive workflow.
        let active = |on: bool| {
            let (app, token, workflow) = (&app, &token, &workflow);
            async move {
                let r = app
                    .patch_json_with_token(&format!("/api/v1/workflows/{workflow}"), token, &json!({"is_active": on}))
                    .await;
                assert_eq!(r.status(), 200);
            }
        };
        active(false).await;
        assert_eq!(retry(json!({})).await.status(), 409);
        active(true).await;

        let running = json_with_status(retry(json!({})).await, 202).await;
        assert_eq!(running["status"], "running", "{running}");
        let statuses: Vec<&str> =
            running["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["completed", "pending", "pending"], "from the step it failed at");
        let done = finished(&app, &token, &id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["output"], 3, "the first step's output kept, the retried step's new one");
        let hits = |p: &'static str| {
            let requests = &server;
            async move { requests.received_requests().await.unwrap().iter().filter(|r| r.url.path() == p).count() }
        };
        assert_eq!((hits("/first").await, hits("/flaky").await), (1, 2), "what completed before ran once");

        // Only a failed execution is retried; from a named step, that step and the later run again.
        assert_eq!(retry(json!({})).await.status(), 409);
        let other = app.access_token("bob@example.com").await;
        let r = app.post_json_with_token(&format!("/api/v1/executions/{id}/retry"), &other, &json!({})).await;
        assert_eq!(r.status(), 404, "another tenant's execution");
    })
    .await;
}
