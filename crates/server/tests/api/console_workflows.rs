//! The console's workflows over HTTP as a browser speaks it: the JSON editor and its refusals
//! at their paths, running a workflow and its execution's timeline, trigger URLs with their
//! secret shown once, schedules, integrations, and the rules every console page keeps (404 for
//! another tenant's objects, 403 for a form without its token).

use std::time::Duration;

use serde_json::{Value, json};

use super::console::{Browser, location};
use super::executions::{create_workflow, execute, loopback, receiver};
use super::helpers::*;

/// Two steps that need nothing outside the service: the second reads the first's output.
const GREETER: &str = r#"{
  "name": "Greeter",
  "description": "Says hello",
  "steps": [
    {"id": "shape", "type": "transform", "output": {"greeting": "Hello {{ input.name }}"}},
    {"id": "shout", "type": "transform", "output": "{{ steps.shape.output.greeting | upper }}"}
  ]
}"#;

/// The page's text with MiniJinja's HTML escapes undone, to compare with what a reader sees.
fn text(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

async fn page_text(browser: &mut Browser, path: &str) -> String {
    let response = browser.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    text(&response.text().await.unwrap())
}

/// The content of the element with `id` (up to the next tag).
fn element(html: &str, id: &str) -> String {
    let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in {html}"));
    let open = start + html[start..].find('>').unwrap() + 1;
    let close = open + html[open..].find('<').unwrap();
    html[open..close].to_owned()
}

async fn api(app: &TestApp, token: &str, path: &str) -> Value {
    json_with_status(app.get_with_token(path, token).await, 200).await
}

/// Someone else's workflow with a trigger, an integration and an execution.
struct Theirs {
    token: String,
    tenant: String,
    workflow: String,
    trigger: String,
    integration: String,
    execution: String,
}

async fn theirs(app: &TestApp) -> Theirs {
    let token = app.access_token("mallory@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let workflow = create_workflow(app, &token, &serde_json::from_str(GREETER).unwrap()).await;
    let r = app
        .post_json_with_token(
            &format!("/api/v1/workflows/{workflow}/webhooks"),
            &token,
            &json!({"name": "x"}),
        )
        .await;
    let trigger = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
    let body =
        json!({"kind": "wiki", "name": "x", "signing_secret": "a-long-secret", "workflow_id": workflow});
    let r = app.post_json_with_token("/api/v1/integrations", &token, &body).await;
    let integration = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
    let execution = execute(app, &token, &workflow, json!({"name": "M"})).await["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    Theirs { token, tenant, workflow, trigger, integration, execution }
}

#[tokio::test]
async fn a_workflow_is_written_in_the_editor_refused_at_its_paths_run_and_followed_step_by_step() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            let workflows = format!("/console/{tenant}/workflows");

            // The list offers an editor that starts with a workflow to change.
            let list = page_text(&mut browser, &workflows).await;
            assert!(list.contains("No workflows yet") && list.contains("\"type\": \"transform\""), "{list}");

            // Without the form's token nothing is made.
            let forged = browser.post(&workflows, &[("definition", GREETER)], false).await;
            assert_eq!(forged.status(), 403);
            assert_eq!(api(&app, &token, "/api/v1/workflows").await["total"], 0);

            // A definition the API refuses comes back in the editor, each refusal at its path.
            let broken = r#"{"name": "Broken", "steps": [
                {"id": "a", "type": "transform", "output": 1},
                {"id": "b", "type": "http_request", "method": "GET"}
            ]}"#;
            let refused = browser.post(&workflows, &[("definition", broken)], true).await;
            assert_eq!(refused.status(), 422);
            let html = text(&refused.text().await.unwrap());
            assert!(html.contains("<code>steps[1].url</code>"), "{html}");
            assert!(html.contains(broken), "the editor keeps what was sent: {html}");
            // Text that is not JSON is refused naming the editor, with serde's position.
            let refused = browser.post(&workflows, &[("definition", "{\"name\": ")], true).await;
            assert_eq!(refused.status(), 422);
            let html = text(&refused.text().await.unwrap());
            assert!(html.contains("<code>definition</code>") && html.contains("line 1"), "{html}");
            // A blank editor is an empty body: the API's required fields are named.
            let refused = browser.post(&workflows, &[("definition", " ")], true).await;
            assert_eq!(refused.status(), 422);
            let html = refused.text().await.unwrap();
            assert!(html.contains("<code>name</code>") && html.contains("<code>steps</code>"), "{html}");
            assert_eq!(api(&app, &token, "/api/v1/workflows").await["total"], 0);

            // Saved, it is the API's workflow.
            let created = browser.post(&workflows, &[("definition", GREETER)], true).await;
            assert_eq!(created.status(), 303);
            let workflow_page = location(&created);
            let id = workflow_page.rsplit('/').next().unwrap().to_owned();
            assert_eq!(workflow_page, format!("{workflows}/{id}"));
            let saved = api(&app, &token, &format!("/api/v1/workflows/{id}")).await;
            assert_eq!(saved["name"], "Greeter");
            assert_eq!(saved["steps"].as_array().unwrap().len(), 2);
            let html = page_text(&mut browser, &workflow_page).await;
            assert!(
                html.contains("\"name\": \"Greeter\"")
                    && html.contains("{{ steps.shape.output.greeting | upper }}")
            );
            assert!(
                page_text(&mut browser, &workflows).await.contains(&format!("{workflow_page}\">Greeter</a>"))
            );

            // The editor takes the update's body: what it leaves out is kept.
            let edited = browser
                .post(
                    &workflow_page,
                    &[("definition", r#"{"name": "Greeter 2", "description": null}"#)],
                    true,
                )
                .await;
            assert_eq!(edited.status(), 303);
            let saved = api(&app, &token, &format!("/api/v1/workflows/{id}")).await;
            assert_eq!((saved["name"].as_str(), saved["description"].as_str()), (Some("Greeter 2"), None));
            assert_eq!(saved["steps"].as_array().unwrap().len(), 2);
            let refused = browser
                .post(&workflow_page, &[("definition", r#"{"steps": [{"id": "a", "type": "nope"}]}"#)], true)
                .await;
            assert_eq!(refused.status(), 422);
            let html = text(&refused.text().await.unwrap());
            assert!(html.contains("<code>steps[0].type</code>") && html.contains("\"nope\""), "{html}");
            assert_eq!(
                api(&app, &token, &format!("/api/v1/workflows/{id}")).await["steps"][0]["id"],
                "shape"
            );

            // Run: the answer is the execution's page.
            let run = format!("{workflow_page}/run");
            let forged = browser.post(&run, &[("input", "{}")], false).await;
            assert_eq!(forged.status(), 403);
            let executions = format!("/api/v1/workflows/{id}/executions");
            assert_eq!(api(&app, &token, &executions).await["total"], 0);
            let not_an_object = browser.post(&run, &[("input", "[1]")], true).await;
            assert_eq!(not_an_object.status(), 422);
            assert!(not_an_object.text().await.unwrap().contains("<code>input</code>"));
            let started = browser.post(&run, &[("input", r#"{"name": "Ada"}"#)], true).await;
            assert_eq!(started.status(), 303);
            let execution_page = location(&started);
            let execution = execution_page.rsplit('/').next().unwrap().to_owned();
            assert_eq!(execution_page, format!("/console/{tenant}/executions/{execution}"));

            app.drain().await;
            let html = page_text(&mut browser, &execution_page).await;
            assert!(!html.contains("data-live"), "a finished execution is not refreshed: {html}");
            assert!(html.contains("<ol class=\"timeline\" id=\"timeline\">"), "{html}");
            assert_eq!(html.matches("<li class=\"completed\"").count(), 2, "{html}");
            assert!(html.contains("<strong>shape</strong>") && html.contains("<strong>shout</strong>"));
            assert!(html.contains("\"greeting\": \"Hello Ada\""), "each step's output: {html}");
            assert!(
                html.contains("<pre class=\"code\" id=\"execution-output\">\"HELLO ADA\"</pre>"),
                "{html}"
            );
            assert!(!html.contains("cancel-execution"), "nothing to cancel: {html}");
            let shown = api(&app, &token, &format!("/api/v1/executions/{execution}")).await;
            assert_eq!(shown["status"], "completed");

            // The workflow's page and its executions page list it.
            let html = page_text(&mut browser, &workflow_page).await;
            assert!(html.contains(&format!("/executions/{execution}\"")), "{html}");
            let listed =
                page_text(&mut browser, &format!("{workflow_page}/executions?status=completed")).await;
            assert!(listed.contains("<span class=\"badge completed\">completed</span>"), "{listed}");
            let none = page_text(&mut browser, &format!("{workflow_page}/executions?status=failed")).await;
            assert!(none.contains("No executions failed."), "{none}");

            // Deleting asks first, then takes it away.
            let confirm = page_text(&mut browser, &format!("{workflow_page}/delete")).await;
            assert!(confirm.contains("Greeter 2") && confirm.contains("confirm-delete"));
            let deleted = browser.post(&format!("{workflow_page}/delete"), &[], true).await;
            assert_eq!((deleted.status().as_u16(), location(&deleted)), (303, workflows.clone()));
            assert_eq!(app.get_with_token(&format!("/api/v1/workflows/{id}"), &token).await.status(), 404);
            assert_eq!(browser.get(&execution_page).await.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn a_running_execution_is_live_and_can_be_cancelled_from_its_page() {
    // The first step waits on a loopback receiver that answers after a while, so the execution
    // is still running when its page is read: no timing is assumed beyond that.
    on_both_databases(loopback, |app| async move {
        let receiver = receiver(Duration::from_secs(3)).await;
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let workflow = create_workflow(
            &app,
            &token,
            &json!({
                "name": "Slow",
                "steps": [
                    {"id": "slow", "type": "http_request", "method": "POST", "url": format!("{}/in", receiver.uri()), "body": "x"},
                    {"id": "next", "type": "transform", "output": "never"}
                ]
            }),
        )
        .await;
        let mut browser = Browser::new(&app);
        browser.sign_in("ada@example.com").await;
        let started = browser.post(&format!("/console/{tenant}/workflows/{workflow}/run"), &[], true).await;
        assert_eq!(started.status(), 303);
        let page = location(&started);
        let execution = page.rsplit('/').next().unwrap().to_owned();

        let html = page_text(&mut browser, &page).await;
        assert!(html.contains("<ol class=\"timeline\" id=\"timeline\" data-live>"), "{html}");
        assert!(html.contains("<div id=\"outcome\" data-live>") && html.contains("id=\"cancel-execution\""), "{html}");
        assert!(html.contains("<li class=\"pending\" id=\"step-next\">"), "{html}");

        let cancel = format!("/console/{tenant}/executions/{execution}/cancel");
        assert_eq!(browser.post(&cancel, &[], false).await.status(), 403);
        assert_eq!(api(&app, &token, &format!("/api/v1/executions/{execution}")).await["status"], "running");
        let cancelled = browser.post(&cancel, &[], true).await;
        assert_eq!((cancelled.status().as_u16(), location(&cancelled)), (303, page.clone()));
        let html = page_text(&mut browser, &page).await;
        assert!(!html.contains("data-live") && !html.contains("cancel-execution"), "{html}");
        assert!(html.contains("<span class=\"badge cancelled\" id=\"execution-status\">cancelled</span>"), "{html}");
        assert!(html.contains("<li class=\"skipped\" id=\"step-next\">"), "{html}");
        // Once it has ended, a cancel is the API's conflict.
        assert_eq!(browser.post(&cancel, &[], true).await.status(), 409);
    })
    .await;
}

#[tokio::test]
async fn triggers_schedules_and_integrations_are_managed_on_the_workflow_page() {
    on_both_databases(
        |_| {},
        |app| async move {
            let Theirs {
                token: their_token,
                tenant: their_tenant,
                workflow: their_workflow,
                trigger: their_trigger,
                integration: their_integration,
                execution: their_execution,
            } = theirs(&app).await;
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let id = create_workflow(&app, &token, &serde_json::from_str(GREETER).unwrap()).await;
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            let workflow_page = format!("/console/{tenant}/workflows/{id}");

            // A trigger: its URL and secret on the POST's answer, ready to copy, and only there.
            let triggers = format!("{workflow_page}/triggers");
            let forged = browser.post(&triggers, &[("name", "CRM")], false).await;
            assert_eq!(forged.status(), 403);
            let made = browser
                .post(
                    &triggers,
                    &[("name", "CRM"), ("allowed_methods", "POST"), ("allowed_methods", "PUT")],
                    true,
                )
                .await;
            assert_eq!(made.status(), 200);
            let html = text(&made.text().await.unwrap());
            let listed = api(&app, &token, &format!("/api/v1/workflows/{id}/webhooks")).await;
            let trigger = listed["items"][0].clone();
            assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
            assert_eq!(trigger["allowed_methods"], json!(["POST", "PUT"]));
            let url = element(&html, "trigger-url");
            assert_eq!(url, app.url(trigger["url"].as_str().unwrap()));
            assert!(
                html.contains("id=\"trigger-url\" data-copy=")
                    && html.contains("id=\"trigger-secret\" data-copy=")
            );
            let secret = element(&html, "trigger-secret");
            assert!(secret.len() >= 32, "{secret}");
            // The secret shown is the trigger's: a call presenting it runs the workflow.
            let call = app
                .client
                .post(&url)
                .header("X-Webhook-Secret", &secret)
                .json(&json!({"name": "Hook"}))
                .send()
                .await
                .unwrap();
            assert_eq!(call.status(), 202);
            app.drain().await;
            let html = page_text(&mut browser, &workflow_page).await;
            assert!(html.contains(&url) && !html.contains(&secret), "the URL stays, the secret does not");
            assert!(html.contains("<td>trigger</td>"), "the call's execution is listed: {html}");
            let trigger_page = format!("{triggers}/{}", trigger["id"].as_str().unwrap());
            let html = page_text(&mut browser, &trigger_page).await;
            assert!(html.contains(&url) && !html.contains(&secret), "{html}");
            let deleted = browser.post(&format!("{trigger_page}/delete"), &[], true).await;
            assert_eq!(deleted.status(), 303);
            let listed = api(&app, &token, &format!("/api/v1/workflows/{id}/webhooks")).await;
            assert_eq!(listed["items"], json!([]));
            assert_eq!(browser.get(&trigger_page).await.status(), 404);

            // A schedule: its next run shown, paused and resumed, deleted.
            let schedules = format!("{workflow_page}/schedules");
            let refused = browser.post(&schedules, &[("cron", "every day")], true).await;
            assert_eq!(refused.status(), 422);
            assert!(refused.text().await.unwrap().contains("<code>cron</code>"));
            let made = browser
                .post(
                    &schedules,
                    &[("cron", "0 9 * * MON-FRI"), ("timezone", "Europe/Berlin"), ("input", "")],
                    true,
                )
                .await;
            assert_eq!(made.status(), 303);
            let listed = api(&app, &token, &format!("/api/v1/workflows/{id}/schedules")).await;
            let schedule = listed["items"][0].clone();
            assert_eq!(
                (schedule["timezone"].as_str(), schedule["is_active"].as_bool()),
                (Some("Europe/Berlin"), Some(true))
            );
            let html = page_text(&mut browser, &workflow_page).await;
            let next = schedule["next_run_at"].as_str().unwrap();
            assert!(html.contains(&format!("<time datetime=\"{next}\">")), "the next run: {html}");
            assert!(html.contains("<td>0</td>"), "no missed ticks: {html}");
            let one = format!("{schedules}/{}", schedule["id"].as_str().unwrap());
            assert_eq!(browser.post(&one, &[("is_active", "false")], true).await.status(), 303);
            let paused =
                api(&app, &token, &format!("/api/v1/workflows/{id}/schedules")).await["items"][0].clone();
            assert_eq!((paused["is_active"].as_bool(), paused["next_run_at"].as_str()), (Some(false), None));
            assert!(
                page_text(&mut browser, &workflow_page)
                    .await
                    .contains("<span class=\"badge paused\">paused</span>")
            );
            assert_eq!(browser.post(&one, &[("is_active", "true")], true).await.status(), 303);
            let resumed =
                api(&app, &token, &format!("/api/v1/workflows/{id}/schedules")).await["items"][0].clone();
            assert_eq!(resumed["is_active"], true);
            assert_eq!(browser.post(&format!("{one}/delete"), &[], true).await.status(), 303);
            assert_eq!(
                api(&app, &token, &format!("/api/v1/workflows/{id}/schedules")).await["items"],
                json!([])
            );

            // An integration bound to this workflow: its receiver URL shown, then deleted.
            let integrations = format!("{workflow_page}/integrations");
            let made = browser
                .post(
                    &integrations,
                    &[("kind", "code-host"), ("name", "Repo events"), ("signing_secret", "a-signing-secret")],
                    true,
                )
                .await;
            assert_eq!(made.status(), 303);
            let listed = api(&app, &token, "/api/v1/integrations").await;
            let integration = listed["items"][0].clone();
            assert_eq!(
                (integration["workflow_id"].as_str(), integration["kind"].as_str()),
                (Some(id.as_str()), Some("code-host"))
            );
            let html = page_text(&mut browser, &workflow_page).await;
            assert!(html.contains(&app.url(integration["receiver_url"].as_str().unwrap())), "{html}");
            assert!(!html.contains("a-signing-secret"));
            let delete = format!("{integrations}/{}/delete", integration["id"].as_str().unwrap());
            assert_eq!(browser.post(&delete, &[], false).await.status(), 403);
            assert_eq!(browser.post(&delete, &[], true).await.status(), 303);
            assert_eq!(api(&app, &token, "/api/v1/integrations").await["items"], json!([]));

            // Another tenant's workflow, execution, trigger and integration are not there, by
            // their own paths or through one of ours; their forms change nothing.
            let mine = workflow_page.clone();
            for path in [
                format!("/console/{their_tenant}/workflows"),
                format!("/console/{tenant}/workflows/{their_workflow}"),
                format!("/console/{tenant}/workflows/{their_workflow}/delete"),
                format!("/console/{tenant}/workflows/{their_workflow}/executions"),
                format!("/console/{tenant}/workflows/{their_workflow}/triggers/{their_trigger}"),
                format!("{mine}/triggers/{their_trigger}"),
                format!("/console/{tenant}/executions/{their_execution}"),
            ] {
                assert_eq!(browser.get(&path).await.status(), 404, "{path}");
            }
            for (path, fields) in [
                (
                    format!("/console/{tenant}/workflows/{their_workflow}"),
                    vec![("definition", "{\"name\": \"Mine\"}")],
                ),
                (format!("/console/{tenant}/workflows/{their_workflow}/delete"), vec![]),
                (format!("/console/{tenant}/workflows/{their_workflow}/run"), vec![("input", "{}")]),
                (
                    format!("/console/{tenant}/workflows/{their_workflow}/triggers"),
                    vec![("name", "Mine"), ("allowed_methods", "POST")],
                ),
                (
                    format!("/console/{tenant}/workflows/{their_workflow}/triggers/{their_trigger}/delete"),
                    vec![],
                ),
                (format!("{mine}/triggers/{their_trigger}/delete"), vec![]),
                (format!("/console/{tenant}/workflows/{their_workflow}/schedules"), vec![("cron", "@daily")]),
                (format!("{mine}/integrations/{their_integration}/delete"), vec![]),
                (format!("/console/{tenant}/executions/{their_execution}/cancel"), vec![]),
            ] {
                assert_eq!(browser.post(&path, &fields, true).await.status(), 404, "{path}");
            }
            let theirs = api(&app, &their_token, &format!("/api/v1/workflows/{their_workflow}")).await;
            assert_eq!(theirs["name"], "Greeter");
            let their_triggers =
                api(&app, &their_token, &format!("/api/v1/workflows/{their_workflow}/webhooks")).await;
            assert_eq!(their_triggers["items"].as_array().unwrap().len(), 1);
            assert_eq!(
                api(&app, &their_token, "/api/v1/integrations").await["items"].as_array().unwrap().len(),
                1
            );
            let their_executions =
                api(&app, &their_token, &format!("/api/v1/workflows/{their_workflow}/executions")).await;
            assert_eq!(their_executions["total"], 1);
        },
    )
    .await;
}
