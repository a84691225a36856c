//! The console's webhooks, API keys, team and billing pages over HTTP as a browser speaks them:
//! each action is the API's (what the console does, the API then reports), secrets are shown
//! once, the charts carry their figures, another tenant's objects answer 404 and a form without
//! its token 403. Receivers are wiremock servers on 127.0.0.1; nothing else is contacted.

use agentry_domain::time::Clock as _;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::console::{Browser, location};
use super::helpers::*;

/// Webhooks to loopback receivers, retried after 1 s of the application's clock.
fn loopback(config: &mut agentry_server::Config) {
    config.webhook_allow_insecure = true;
    config.webhook_allow_private = true;
    config.webhook_retry_schedule = "0,1,1,1,1".into();
    config.webhook_poll_interval_ms = 50;
}

async fn receiver(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(status))
        .mount(&server)
        .await;
    server
}

/// The HTML of the element that starts with `open`, up to its closing `</code>`.
fn code_after(html: &str, open: &str) -> String {
    let start = html.find(open).unwrap_or_else(|| panic!("no {open} in:\n{html}")) + open.len();
    html[start..].split("</code>").next().unwrap().to_owned()
}

/// Text as a browser reads it from HTML: the templates escape `/` (base64 has it) and the like.
fn unescape(html: &str) -> String {
    [("&#x2f;", "/"), ("&#x27;", "'"), ("&quot;", "\""), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")]
        .iter()
        .fold(html.to_owned(), |text, (entity, c)| text.replace(entity, c))
}

/// The signing secret an answer shows: as the page has it, and as its reader copies it.
fn signing_secret(html: &str) -> (String, String) {
    let shown = code_after(html, "<code id=\"signing-secret\" data-copy=\"the signing secret\">");
    let secret = unescape(&shown);
    (shown, secret)
}

async fn text(response: reqwest::Response, status: u16) -> String {
    let actual = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(actual, status, "{body}");
    body
}

async fn api(app: &TestApp, token: &str, path: &str) -> Value {
    json_with_status(app.get_with_token(path, token).await, 200).await
}

/// The title of the chart's bar `label` with its figures.
fn bar(label: &str, figures: &str) -> String {
    format!("<title>{label}: {figures}</title>")
}

#[tokio::test]
async fn webhooks_are_subscribed_tested_retried_recovered_and_charted_in_the_console() {
    on_both_databases_with_clock(loopback, |app| async move {
        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let ok = receiver(200).await;
        let down = MockServer::start().await;
        let failing = Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string("receiver is down"))
            .mount_as_scoped(&down)
            .await;
        let mut browser = Browser::new(&app);
        browser.sign_in("ada@example.com").await;
        let hooks = format!("/console/{tenant}/webhooks");
        assert!(text(browser.get(&hooks).await, 200).await.contains("No subscriptions yet"));

        // Subscribed: the answer shows the signing secret, with a copy button's marker.
        let url = format!("{}/hook", ok.uri());
        let fields = [("url", url.as_str()), ("events", "agent.created"), ("description", "orders")];
        let created = text(browser.post(&hooks, &fields, true).await, 200).await;
        let (shown_secret, secret) = signing_secret(&created);
        assert!(secret.starts_with("whsec_"), "{created}");
        let listed = api(&app, &token, "/api/v1/webhooks").await;
        let hook = &listed["items"][0];
        assert_eq!(
            (hook["url"].as_str(), hook["events"].clone()),
            (Some(url.as_str()), json!(["agent.created"]))
        );
        assert_eq!(hook["description"], "orders");
        let id = hook["id"].as_str().unwrap().to_owned();
        let shown = api(&app, &token, &format!("/api/v1/webhooks/{id}/secret")).await;
        assert_eq!(shown["signing_secret"], secret.as_str());
        // Once: neither the list nor the subscription's page shows it.
        let page = format!("{hooks}/{id}");
        assert!(!text(browser.get(&hooks).await, 200).await.contains(&shown_secret));
        assert!(!text(browser.get(&page).await, 200).await.contains(&shown_secret));

        // A test event: sent now, in the log with the receiver's answer.
        let sent = browser.post(&format!("{page}/test"), &[("event_type", "agent.created")], true).await;
        assert_eq!(sent.status(), 303);
        let test_delivery = location(&sent);
        assert!(test_delivery.starts_with(&format!("{page}/deliveries/dlv_")), "{test_delivery}");
        app.drain().await;
        let received = ok.received_requests().await.unwrap();
        assert_eq!(received.len(), 1);
        let body: Value = serde_json::from_slice(&received[0].body).unwrap();
        assert_eq!(
            (body["type"].as_str(), body["data"]["test"].as_bool()),
            (Some("agent.created"), Some(true))
        );
        let delivery = text(browser.get(&test_delivery).await, 200).await;
        assert!(delivery.contains("id=\"delivery-status\">delivered<"), "{delivery}");
        assert!(delivery.contains("<td class=\"response-code\">200</td>"), "{delivery}");
        let dlv = test_delivery.rsplit('/').next().unwrap().to_owned();
        let log = text(browser.get(&page).await, 200).await;
        let row = log.split(&format!("<tr id=\"delivery-{dlv}\">")).nth(1).expect("the delivery in the log");
        let row = row.split("</tr>").next().unwrap();
        assert!(
            row.contains("<span class=\"badge delivered\">delivered</span>") && row.contains("<td>200</td>"),
            "{row}"
        );
        assert!(row.contains(" ms</td>"), "{row}");

        // A failing receiver: its test fails, and an event's delivery waits for its retry.
        let down_url = format!("{}/hook", down.uri());
        let second =
            browser.post(&hooks, &[("url", down_url.as_str()), ("events", "agent.created")], true).await;
        assert_eq!(second.status(), 200);
        let id2 = api(&app, &token, "/api/v1/webhooks").await["items"][1]["id"].as_str().unwrap().to_owned();
        let page2 = format!("{hooks}/{id2}");
        let sent = browser.post(&format!("{page2}/test"), &[("event_type", "agent.created")], true).await;
        let failed = text(browser.get(&location(&sent)).await, 200).await;
        assert!(failed.contains("id=\"delivery-status\">failed<"), "{failed}");
        assert!(
            failed.contains("<td class=\"response-code\">500</td>") && failed.contains("receiver is down")
        );
        app.create_agent(&token, json!({"name": "Helper", "memory_types": []})).await;
        app.drain().await;
        let items = api(&app, &token, &format!("/api/v1/webhooks/{id2}/deliveries")).await["items"].clone();
        let waiting = &items[0];
        assert_eq!(
            (waiting["status"].as_str(), waiting["attempts"].as_u64(), waiting["response_status"].as_u64()),
            (Some("pending"), Some(1), Some(500)),
            "{items}"
        );
        // The receiver is back; the console retries the delivery now.
        drop(failing);
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).mount(&down).await;
        let d2 = waiting["id"].as_str().unwrap();
        let retried = browser.post(&format!("{page2}/deliveries/{d2}/retry"), &[], true).await;
        assert_eq!(location(&retried), format!("{page2}/deliveries/{d2}"));
        let after = text(browser.get(&location(&retried)).await, 200).await;
        assert!(after.contains("id=\"delivery-status\">delivered<"), "{after}");
        let codes: Vec<&str> = after
            .split("<td class=\"response-code\">")
            .skip(1)
            .map(|s| s.split('<').next().unwrap())
            .collect();
        assert_eq!(codes, ["500", "200"], "each attempt with its response code");
        let one = api(&app, &token, &format!("/api/v1/webhooks/{id2}/deliveries/{d2}/attempts")).await;
        assert_eq!(
            (one["delivery"]["status"].as_str(), one["delivery"]["attempts"].as_u64()),
            (Some("delivered"), Some(2))
        );

        // The chart: this hour's bar carries its figures, the hour before is empty.
        let now = app.clock().now();
        let (this_hour, hour_before) =
            (now.format("%H:00").to_string(), (now - chrono::Duration::hours(1)).format("%H:00").to_string());
        let chart2 = text(browser.get(&page2).await, 200).await;
        assert!(chart2.contains("<svg class=\"chart\""), "{chart2}");
        assert!(chart2.contains(&bar(&this_hour, "1 delivered, 1 failed, 0 pending, 0 skipped")), "{chart2}");
        assert!(chart2.contains(&bar(&hour_before, "0 delivered, 0 failed, 0 pending, 0 skipped")));
        let chart1 = text(browser.get(&page).await, 200).await;
        assert!(chart1.contains(&bar(&this_hour, "2 delivered, 0 failed, 0 pending, 0 skipped")), "{chart1}");

        // A new secret, shown once, signs from now on.
        let rotated = text(browser.post(&format!("{page}/rotate-secret"), &[], true).await, 200).await;
        let (_, new_secret) = signing_secret(&rotated);
        assert!(new_secret.starts_with("whsec_") && new_secret != secret);
        let shown = api(&app, &token, &format!("/api/v1/webhooks/{id}/secret")).await;
        assert_eq!(shown["signing_secret"], new_secret.as_str());

        // Paused, an event is kept as skipped; recovered since a time (UTC), it is sent.
        let paused = browser.post(&format!("{page}/status"), &[("status", "disabled")], true).await;
        assert_eq!(location(&paused), page);
        assert_eq!(api(&app, &token, &format!("/api/v1/webhooks/{id}")).await["status"], "disabled");
        assert!(text(browser.get(&page).await, 200).await.contains("id=\"resume\""));
        app.create_agent(&token, json!({"name": "Second", "memory_types": []})).await;
        app.drain().await;
        assert_eq!(ok.received_requests().await.unwrap().len(), 2, "the test and the first agent only");
        let skipped = text(browser.get(&page).await, 200).await;
        assert!(
            skipped.contains(&bar(&this_hour, "2 delivered, 0 failed, 0 pending, 1 skipped")),
            "{skipped}"
        );
        let refused = browser.post(&format!("{page}/recover"), &[("since", "yesterday")], true).await;
        assert!(text(refused, 422).await.contains("<code>since</code>"));
        let since = (now - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M").to_string();
        let recovered = browser.post(&format!("{page}/recover"), &[("since", since.as_str())], true).await;
        assert_eq!(location(&recovered), format!("{page}?queued=1"));
        assert_eq!(api(&app, &token, &format!("/api/v1/webhooks/{id}")).await["status"], "active");
        app.drain().await;
        let all = ok.received_requests().await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(serde_json::from_slice::<Value>(&all[2].body).unwrap()["data"]["name"], "Second");
        let notice = text(browser.get(&location(&recovered)).await, 200).await;
        assert!(notice.contains("id=\"queued\">1 delivery queued again"), "{notice}");
        assert!(notice.contains(&bar(&this_hour, "3 delivered, 0 failed, 0 pending, 0 skipped")), "{notice}");
    })
    .await;
}

#[tokio::test]
async fn a_key_made_in_the_console_is_shown_once_works_on_the_api_and_stops_when_revoked() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            let keys = format!("/console/{tenant}/keys");
            let empty = text(browser.get(&keys).await, 200).await;
            assert!(empty.contains("No keys yet") && empty.contains("value=\"billing:read\""), "{empty}");

            // The form's fields are the API's: no scope is refused, and so is an expiry past.
            let refused = browser.post(&keys, &[("name", "ci")], true).await;
            assert!(text(refused, 422).await.contains("<code>scopes</code>"));
            let past = [("name", "ci"), ("scopes", "agents:read"), ("expires_at", "2001-01-01T00:00")];
            assert!(
                text(browser.post(&keys, &past, true).await, 422).await.contains("<code>expires_at</code>")
            );

            let fields =
                [("name", "ci"), ("scopes", "agents:read"), ("scopes", "webhooks:read"), ("expires_at", "")];
            let created = text(browser.post(&keys, &fields, true).await, 200).await;
            let key = unescape(&code_after(&created, "<code id=\"api-key\" data-copy=\"the API key\">"));
            assert!(key.starts_with("agk_"), "{created}");
            assert_eq!(app.get_with_token("/api/v1/agents", &key).await.status(), 200);
            assert_eq!(app.get_with_token("/api/v1/webhooks", &key).await.status(), 200);
            let r = app.post_json_with_token("/api/v1/agents", &key, &json!({"name": "x"})).await;
            assert_eq!(r.status(), 403, "only the scopes it was given");
            let dated =
                [("name", "until 2099"), ("scopes", "agents:read"), ("expires_at", "2099-01-01T12:30")];
            assert_eq!(browser.post(&keys, &dated, true).await.status(), 200);

            let listed = api(&app, &token, "/api/v1/auth/api-keys").await["items"].clone();
            let items = listed.as_array().unwrap();
            assert_eq!(items.len(), 2);
            let dated = items.iter().find(|k| k["name"] == "until 2099").unwrap();
            assert!(dated["expires_at"].as_str().unwrap().starts_with("2099-01-01T12:30:00"), "{dated}");
            let ci = items.iter().find(|k| k["name"] == "ci").unwrap();
            assert_eq!(ci["scopes"], json!(["agents:read", "webhooks:read"]));
            assert!(ci["last_used_at"].is_string(), "it was used: {ci}");
            let page = text(browser.get(&keys).await, 200).await;
            assert!(
                page.contains("agents:read, webhooks:read") && !page.contains(&key),
                "shown once: {page}"
            );
            assert!(page.contains(ci["key_prefix"].as_str().unwrap()));

            let id = ci["id"].as_str().unwrap();
            let revoked = browser.post(&format!("{keys}/{id}/revoke"), &[], true).await;
            assert_eq!(location(&revoked), keys);
            assert_eq!(app.get_with_token("/api/v1/agents", &key).await.status(), 401);
            assert!(!text(browser.get(&keys).await, 200).await.contains(&format!("id=\"key-{id}\"")));
        },
    )
    .await;
}

#[tokio::test]
async fn invitations_and_billing_in_the_console_are_the_apis() {
    on_both_databases_with_clock(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let me = api(&app, &token, "/api/v1/auth/me").await["id"].as_str().unwrap().to_owned();
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;

            // Team: the owner, an invitation made here and listed by the API, then revoked.
            let team = format!("/console/{tenant}/team");
            let page = text(browser.get(&team).await, 200).await;
            assert!(page.contains("ada@example.com") && page.contains("No pending invitations"), "{page}");
            let invited = browser
                .post(
                    &format!("{team}/invitations"),
                    &[("email", "grace@example.com"), ("role", "admin")],
                    true,
                )
                .await;
            assert_eq!(location(&invited), team);
            let invitations = format!("/api/v1/tenants/{tenant}/invitations");
            let listed = api(&app, &token, &invitations).await;
            assert_eq!(listed["total"], 1);
            let invitation = &listed["invitations"][0];
            assert_eq!(
                (invitation["email"].as_str(), invitation["role"].as_str()),
                (Some("grace@example.com"), Some("admin"))
            );
            assert!(text(browser.get(&team).await, 200).await.contains("grace@example.com"));
            let bad = browser
                .post(&format!("{team}/invitations"), &[("email", "not an address"), ("role", "admin")], true)
                .await;
            assert!(text(bad, 422).await.contains("<code>email</code>"));
            // The team's rules hold here as in the API: the last owner stays an owner, and stays.
            let demoted =
                browser.post(&format!("{team}/members/{me}/role"), &[("role", "viewer")], true).await;
            assert_eq!(demoted.status(), 409);
            assert_eq!(browser.post(&format!("{team}/members/{me}/remove"), &[], true).await.status(), 409);
            let id = invitation["id"].as_str().unwrap();
            let revoked = browser.post(&format!("{team}/invitations/{id}/revoke"), &[], true).await;
            assert_eq!(location(&revoked), team);
            assert_eq!(api(&app, &token, &invitations).await["total"], 0);

            // Billing: a chat spends credits; the page shows the API's balance, plan and limits,
            // today's spending in the chart, and the ledger.
            let agent = app.create_agent(&token, json!({"name": "Helper", "memory_types": []})).await;
            let chat = format!("/api/v1/agents/{}/chat", agent["id"].as_str().unwrap());
            json_with_status(
                app.post_json_with_token(&chat, &token, &json!({"message": "Hello"})).await,
                200,
            )
            .await;
            let account = api(&app, &token, "/api/v1/billing").await;
            let ledger = api(&app, &token, "/api/v1/billing/ledger").await;
            let spent: i64 = ledger["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["delta"].as_i64().unwrap())
                .filter(|d| *d < 0)
                .sum();
            assert!(spent < 0);
            let billing = text(browser.get(&format!("/console/{tenant}/billing")).await, 200).await;
            assert!(
                billing.contains(&format!("<strong id=\"balance\">{}</strong>", account["credits"])),
                "{billing}"
            );
            assert!(
                billing
                    .contains(&format!("<strong id=\"plan\">{}</strong>", account["plan"].as_str().unwrap()))
            );
            assert!(billing.contains(&format!(
                "<strong id=\"per-minute\">{}</strong>",
                account["rate_limits"]["per_minute"]
            )));
            let today = app.clock().now().date_naive();
            let yesterday = today - chrono::Days::new(1);
            assert!(
                billing.contains(&bar(
                    &today.format("%b %-d").to_string(),
                    &format!("{} credits spent", -spent)
                )),
                "{billing}"
            );
            assert!(billing.contains(&bar(&yesterday.format("%b %-d").to_string(), "0 credits spent")));
            assert!(billing.contains("chat usage") && billing.contains("welcome grant"), "{billing}");
        },
    )
    .await;
}

#[tokio::test]
async fn another_tenants_objects_answer_404_and_forms_without_their_token_403_changing_nothing() {
    on_both_databases(loopback, |app| async move {
        // Mallory's subscription, delivery, key and invitation.
        let theirs = app.access_token("mallory@example.com").await;
        let their_tenant = app.tenant_of(&theirs).await;
        let server = receiver(200).await;
        let body = json!({"url": format!("{}/hook", server.uri()), "events": ["agent.created"]});
        let their_hook =
            json_with_status(app.post_json_with_token("/api/v1/webhooks", &theirs, &body).await, 201).await;
        let their_hook = their_hook["id"].as_str().unwrap().to_owned();
        let r = app
            .post_json_with_token(
                &format!("/api/v1/webhooks/{their_hook}/test"),
                &theirs,
                &json!({"event_type": "agent.created"}),
            )
            .await;
        let their_delivery = json_with_status(r, 200).await["delivery_id"].as_str().unwrap().to_owned();
        let r = app
            .post_json_with_token(
                "/api/v1/auth/api-keys",
                &theirs,
                &json!({"name": "k", "scopes": ["agents:read"]}),
            )
            .await;
        let their_key = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
        let r = app
            .post_json_with_token(
                &format!("/api/v1/tenants/{their_tenant}/invitations"),
                &theirs,
                &json!({"email": "eve@example.com", "role": "member"}),
            )
            .await;
        let their_invitation = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
        let their_user = api(&app, &theirs, "/api/v1/auth/me").await["id"].as_str().unwrap().to_owned();

        let token = app.access_token("ada@example.com").await;
        let tenant = app.tenant_of(&token).await;
        let mut browser = Browser::new(&app);
        browser.sign_in("ada@example.com").await;
        let base = format!("/console/{tenant}");
        let hooks = format!("{base}/webhooks");
        for path in [
            format!("/console/{their_tenant}/webhooks"),
            format!("/console/{their_tenant}/keys"),
            format!("/console/{their_tenant}/team"),
            format!("/console/{their_tenant}/billing"),
            format!("{hooks}/{their_hook}"),
            format!("{hooks}/{their_hook}/deliveries/{their_delivery}"),
        ] {
            assert_eq!(browser.get(&path).await.status(), 404, "{path}");
        }
        for (path, fields) in [
            (format!("{hooks}/{their_hook}/test"), vec![("event_type", "agent.created")]),
            (format!("{hooks}/{their_hook}/rotate-secret"), vec![]),
            (format!("{hooks}/{their_hook}/status"), vec![("status", "disabled")]),
            (format!("{hooks}/{their_hook}/recover"), vec![("since", "2026-01-01T00:00")]),
            (format!("{hooks}/{their_hook}/deliveries/{their_delivery}/retry"), vec![]),
            (format!("{base}/keys/{their_key}/revoke"), vec![]),
            (format!("{base}/team/invitations/{their_invitation}/revoke"), vec![]),
            (format!("{base}/team/members/{their_user}/role"), vec![("role", "viewer")]),
            (format!("{base}/team/members/{their_user}/remove"), vec![]),
        ] {
            assert_eq!(browser.post(&path, &fields, true).await.status(), 404, "{path}");
        }
        // Nothing of theirs changed: one delivery, the same secret, their key and invitation.
        let deliveries = api(&app, &theirs, &format!("/api/v1/webhooks/{their_hook}/deliveries")).await;
        assert_eq!(deliveries["items"].as_array().unwrap().len(), 1);
        assert_eq!(deliveries["items"][0]["attempts"], 1);
        assert_eq!(api(&app, &theirs, &format!("/api/v1/webhooks/{their_hook}")).await["status"], "active");
        assert_eq!(api(&app, &theirs, "/api/v1/auth/api-keys").await["items"].as_array().unwrap().len(), 1);
        let invitations = api(&app, &theirs, &format!("/api/v1/tenants/{their_tenant}/invitations")).await;
        assert_eq!(invitations["total"], 1);
        assert_eq!(server.received_requests().await.unwrap().len(), 1);

        // Ada's own objects, and every form without its token: 403, and nothing changes.
        let url = format!("{}/hook", server.uri());
        let hook = json_with_status(
            app.post_json_with_token(
                "/api/v1/webhooks",
                &token,
                &json!({"url": &url, "events": ["agent.created"]}),
            )
            .await,
            201,
        )
        .await;
        let (hook, secret) = (hook["id"].as_str().unwrap().to_owned(), hook["signing_secret"].clone());
        let r = app
            .post_json_with_token(
                &format!("/api/v1/webhooks/{hook}/test"),
                &token,
                &json!({"event_type": "agent.created"}),
            )
            .await;
        let delivery = json_with_status(r, 200).await["delivery_id"].as_str().unwrap().to_owned();
        let r = app
            .post_json_with_token(
                "/api/v1/auth/api-keys",
                &token,
                &json!({"name": "k", "scopes": ["agents:read"]}),
            )
            .await;
        let key = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
        let r = app
            .post_json_with_token(
                &format!("/api/v1/tenants/{tenant}/invitations"),
                &token,
                &json!({"email": "bob@example.com", "role": "member"}),
            )
            .await;
        let invitation = json_with_status(r, 201).await["id"].as_str().unwrap().to_owned();
        let me = api(&app, &token, "/api/v1/auth/me").await["id"].as_str().unwrap().to_owned();
        let url = url.as_str();
        for (path, fields) in [
            (hooks.clone(), vec![("url", url), ("events", "agent.created")]),
            (format!("{hooks}/{hook}/test"), vec![("event_type", "agent.created")]),
            (format!("{hooks}/{hook}/rotate-secret"), vec![]),
            (format!("{hooks}/{hook}/status"), vec![("status", "disabled")]),
            (format!("{hooks}/{hook}/recover"), vec![("since", "2026-01-01T00:00")]),
            (format!("{hooks}/{hook}/deliveries/{delivery}/retry"), vec![]),
            (format!("{base}/keys"), vec![("name", "forged"), ("scopes", "agents:read")]),
            (format!("{base}/keys/{key}/revoke"), vec![]),
            (format!("{base}/team/invitations"), vec![("email", "forged@example.com"), ("role", "admin")]),
            (format!("{base}/team/invitations/{invitation}/revoke"), vec![]),
            (format!("{base}/team/members/{me}/role"), vec![("role", "admin")]),
            (format!("{base}/team/members/{me}/remove"), vec![]),
        ] {
            let refused = browser.post(&path, &fields, false).await;
            assert_eq!(refused.status(), 403, "{path}");
        }
        let hooks_now = api(&app, &token, "/api/v1/webhooks").await["items"].clone();
        assert_eq!(hooks_now.as_array().unwrap().len(), 1);
        assert_eq!(hooks_now[0]["status"], "active");
        assert_eq!(
            api(&app, &token, &format!("/api/v1/webhooks/{hook}/secret")).await["signing_secret"],
            secret
        );
        let deliveries =
            api(&app, &token, &format!("/api/v1/webhooks/{hook}/deliveries")).await["items"].clone();
        assert_eq!((deliveries.as_array().unwrap().len(), deliveries[0]["attempts"].as_u64()), (1, Some(1)));
        let keys = api(&app, &token, "/api/v1/auth/api-keys").await["items"].clone();
        assert_eq!(
            keys.as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect::<Vec<_>>(),
            ["k"]
        );
        let invitations = api(&app, &token, &format!("/api/v1/tenants/{tenant}/invitations")).await;
        assert_eq!(invitations["total"], 1);
        assert_eq!(invitations["invitations"][0]["email"], "bob@example.com");
        let members = api(&app, &token, &format!("/api/v1/tenants/{tenant}/members")).await;
        assert_eq!(
            (members["total"].as_u64(), members["members"][0]["role"].as_str()),
            (Some(1), Some("owner"))
        );
    })
    .await;
}
