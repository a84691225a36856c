//! The console over HTTP as a browser speaks it: cookies, forms with their CSRF token,
//! redirects. The pages themselves are walked in a real browser by `scripts/console_browser.py`;
//! these tests pin the rules: the session's cookies, CSRF refusals, 404 for another tenant's
//! objects, sign-out ending the session.

use std::collections::HashMap;

use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Client, Response, redirect};
use serde_json::json;

use super::helpers::*;

/// A browser's part that matters here: a cookie jar for `/console`, and no automatic redirects
/// (the tests read them).
pub struct Browser {
    client: Client,
    base: String,
    pub cookies: HashMap<String, String>,
}

impl Browser {
    pub fn new(app: &TestApp) -> Self {
        let client = Client::builder().redirect(redirect::Policy::none()).build().expect("client");
        Self { client, base: app.base.clone(), cookies: HashMap::new() }
    }

    pub fn keep_cookies(&mut self, response: &Response) {
        for value in response.headers().get_all(SET_COOKIE) {
            let value = value.to_str().expect("cookie header");
            let (pair, attributes) = value.split_once(';').unwrap_or((value, ""));
            let (name, cookie) = pair.split_once('=').expect("name=value");
            assert!(attributes.contains("HttpOnly"), "{value}");
            assert!(attributes.contains("SameSite=Lax"), "{value}");
            assert!(attributes.contains("Path=/console"), "{value}");
            if cookie.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), cookie.to_owned());
            }
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    pub async fn get(&mut self, path: &str) -> Response {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header(COOKIE, self.cookie_header())
            .send()
            .await
            .expect("request sent");
        self.keep_cookies(&response);
        response
    }

    /// Posts a form; `with_csrf` adds the session's token as the pages do.
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)], with_csrf: bool) -> Response {
        let mut form: Vec<(String, String)> =
            fields.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        if with_csrf {
            form.push(("csrf".to_owned(), self.cookies.get("agentry_csrf").cloned().unwrap_or_default()));
        }
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header(COOKIE, self.cookie_header())
            .form(&form)
            .send()
            .await
            .expect("request sent");
        self.keep_cookies(&response);
        response
    }

    /// Posts files as a `multipart/form-data` form, its CSRF field first as a page's form sends
    /// it (`with_csrf`).
    pub async fn post_files(&mut self, path: &str, files: &[(&str, Vec<u8>)], with_csrf: bool) -> Response {
        let mut form = reqwest::multipart::Form::new();
        if with_csrf {
            form = form.text("csrf", self.cookies.get("agentry_csrf").cloned().unwrap_or_default());
        }
        for (name, bytes) in files {
            form = form
                .part("file", reqwest::multipart::Part::bytes(bytes.clone()).file_name((*name).to_owned()));
        }
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header(COOKIE, self.cookie_header())
            .multipart(form)
            .send()
            .await
            .expect("request sent");
        self.keep_cookies(&response);
        response
    }

    /// Signs in with the sign-in page's form.
    pub async fn sign_in(&mut self, email: &str) {
        let page = self.get("/console/sign-in").await;
        assert_eq!(page.status(), 200);
        let response = self
            .post("/console/sign-in", &[("email", email), ("password", "correct horse battery")], true)
            .await;
        assert_eq!(response.status(), 303, "{}", response.text().await.unwrap_or_default());
        assert!(self.cookies.contains_key("agentry_access"));
    }

    /// The page's path after following one redirect.
    pub async fn landing(&mut self, path: &str) -> String {
        let response = self.get(path).await;
        assert_eq!(response.status(), 303, "{path}");
        location(&response)
    }
}

pub fn location(response: &Response) -> String {
    response.headers().get(LOCATION).expect("a Location").to_str().expect("text").to_owned()
}

#[tokio::test]
async fn the_console_signs_in_acts_as_the_api_and_refuses_forms_without_their_token_and_other_tenants() {
    on_both_databases(
        |_| {},
        |app| async move {
            let theirs = app.access_token("mallory@example.com").await;
            let their_tenant = app.tenant_of(&theirs).await;
            let their_agent = app.create_agent(&theirs, json!({"name": "Theirs"})).await;
            let their_agent = their_agent["id"].as_str().unwrap();
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;

            let mut browser = Browser::new(&app);
            // Without a session every page leads to the sign-in page, and back after it.
            let agents = format!("/console/{tenant}/agents");
            assert_eq!(
                browser.landing(&agents).await,
                format!("/console/sign-in?next=%2Fconsole%2F{tenant}%2Fagents")
            );
            // A wrong password is the form again, with a 401.
            browser.get("/console/sign-in").await;
            let refused = browser
                .post("/console/sign-in", &[("email", "ada@example.com"), ("password", "nope")], true)
                .await;
            assert_eq!(refused.status(), 401);
            // Signing in without the sign-in form's token is refused: no login CSRF.
            let forged = browser
                .post(
                    "/console/sign-in",
                    &[("email", "ada@example.com"), ("password", "correct horse battery")],
                    false,
                )
                .await;
            assert_eq!(forged.status(), 403);
            browser.sign_in("ada@example.com").await;
            assert_eq!(browser.landing("/console").await, agents);

            let page = browser.get(&agents).await;
            assert_eq!(page.status(), 200);
            let csp =
                page.headers().get(CONTENT_SECURITY_POLICY).expect("a CSP").to_str().unwrap().to_owned();
            assert!(csp.contains("script-src 'self'"), "{csp}");
            let html = page.text().await.unwrap();
            assert!(
                html.contains("<main id=\"main\">") && html.contains("aria-label=\"Sections\""),
                "{html}"
            );

            // A form without the session's token changes nothing.
            let forged = browser.post(&agents, &[("name", "Forged")], false).await;
            assert_eq!(forged.status(), 403);
            let (_, total) = list_agents(&app, &token).await;
            assert_eq!(total, 0, "nothing was created");
            // With it, the agent is made as the API makes it, and its page shows it.
            let created = browser.post(&agents, &[("name", "Helper"), ("type", "support")], true).await;
            assert_eq!(created.status(), 303);
            let agent_page = location(&created);
            let (listed, total) = list_agents(&app, &token).await;
            assert_eq!(total, 1);
            assert_eq!(listed[0]["type"], "support");
            let id = listed[0]["id"].as_str().unwrap().to_owned();
            assert_eq!(agent_page, format!("{agents}/{id}"));
            assert!(browser.get(&agent_page).await.text().await.unwrap().contains("Helper"));
            // The API's validation speaks through the form: the field is named.
            let invalid = browser.post(&agents, &[("name", " ")], true).await;
            assert_eq!(invalid.status(), 422);
            assert!(invalid.text().await.unwrap().contains("<code>name</code>"));

            // Another tenant, and another tenant's objects, are not there.
            for path in [
                format!("/console/{their_tenant}/agents"),
                format!("{agents}/{their_agent}"),
                format!("{agents}/{their_agent}/memory"),
                format!("{agents}/{their_agent}/delete"),
            ] {
                assert_eq!(browser.get(&path).await.status(), 404, "{path}");
            }
            let deleted = browser.post(&format!("{agents}/{their_agent}/delete"), &[], true).await;
            assert_eq!(deleted.status(), 404);
            let (_, their_total) = list_agents(&app, &theirs).await;
            assert_eq!(their_total, 1, "their agent is still there");

            // Signing out ends the session itself, not only the cookies.
            let access = browser.cookies["agentry_access"].clone();
            let out = browser.post("/console/sign-out", &[], true).await;
            assert_eq!(out.status(), 303);
            assert!(!browser.cookies.contains_key("agentry_access"));
            assert_eq!(app.get_with_token("/api/v1/auth/me", &access).await.status(), 401);
        },
    )
    .await;
}

async fn list_agents(app: &TestApp, token: &str) -> (Vec<serde_json::Value>, u64) {
    let body = json_with_status(app.get_with_token("/api/v1/agents", token).await, 200).await;
    (body["agents"].as_array().unwrap().clone(), body["total"].as_u64().unwrap())
}

#[tokio::test]
async fn the_memory_pages_add_filter_search_and_delete_as_the_api_does() {
    on_both_databases(
        |_| {},
        |app| async move {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let agent = app.create_agent(&token, json!({"name": "Librarian"})).await;
            let other = app.create_agent(&token, json!({"name": "Other"})).await;
            let (agent, other) = (agent["id"].as_str().unwrap(), other["id"].as_str().unwrap());
            let mut browser = Browser::new(&app);
            browser.sign_in("ada@example.com").await;
            let memory = format!("/console/{tenant}/agents/{agent}/memory");

            for (content, tags) in
                [("Teal is the favourite colour.", "colours, likes"), ("Invoices go out monthly.", "billing")]
            {
                let added = browser
                    .post(&memory, &[("content", content), ("memory_type", "semantic"), ("tags", tags)], true)
                    .await;
                assert_eq!(added.status(), 303);
            }
            let forged = browser.post(&memory, &[("content", "forged")], false).await;
            assert_eq!(forged.status(), 403);
            let listed = json_with_status(
                app.get_with_token(&format!("/api/v1/memory?agent_id={agent}"), &token).await,
                200,
            )
            .await;
            assert_eq!(listed["total"], 2, "{listed}");
            assert_eq!(listed["memories"][0]["tags"], json!(["colours", "likes"]));

            // The tag filter, as the API's own list filters.
            let page = browser.get(&format!("{memory}?tag=billing")).await.text().await.unwrap();
            assert!(page.contains("Invoices go out monthly.") && !page.contains("Teal is"), "{page}");
            let api = json_with_status(
                app.get_with_token(&format!("/api/v1/memory?agent_id={agent}&tag=billing"), &token).await,
                200,
            )
            .await;
            assert_eq!(api["total"], 1);
            // A search shows each hit's explanation.
            let found =
                browser.get(&format!("{memory}?q=monthly+invoices&mode=lexical")).await.text().await.unwrap();
            assert!(found.contains("Invoices go out monthly.") && found.contains("word rank 1"), "{found}");
            // A document is stored as chunks and shown.
            let stored = browser
                .post(
                    &format!("{memory}/documents"),
                    &[("title", "Handbook"), ("content", "Refunds take five days. Shipping is free.")],
                    true,
                )
                .await;
            assert_eq!(stored.status(), 200);
            assert!(stored.text().await.unwrap().contains("Refunds take five days."));

            // An entry of another agent is not this page's to delete.
            let id = listed["memories"][0]["id"].as_str().unwrap();
            let elsewhere = browser
                .post(&format!("/console/{tenant}/agents/{other}/memory/{id}/delete"), &[], true)
                .await;
            assert_eq!(elsewhere.status(), 404);
            let deleted = browser.post(&format!("{memory}/{id}/delete"), &[], true).await;
            assert_eq!(deleted.status(), 303);
            assert_eq!(app.get_with_token(&format!("/api/v1/memory/{id}"), &token).await.status(), 404);
        },
    )
    .await;
}

#[tokio::test]
async fn a_page_signed_in_through_the_api_opens_the_console_with_a_session_of_its_own() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let client = Client::builder().redirect(redirect::Policy::none()).build().unwrap();
    let started = client.post(app.url("/console/session")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(started.status(), 204);
    let mut browser = Browser::new(&app);
    browser.keep_cookies(&started);
    assert!(browser.cookies.contains_key("agentry_csrf"));
    assert_ne!(browser.cookies["agentry_access"], token, "a session of its own");
    let tenant = app.tenant_of(&token).await;
    assert_eq!(browser.get(&format!("/console/{tenant}/agents")).await.status(), 200);
    // Signing the console out leaves the page's own session alone.
    assert_eq!(browser.post("/console/sign-out", &[], true).await.status(), 303);
    assert_eq!(app.get_with_token("/api/v1/auth/me", &token).await.status(), 200);
    // An API key does not open the console.
    let key = json_with_status(
        app.post_json_with_token(
            "/api/v1/auth/api-keys",
            &token,
            &json!({"name": "ci", "scopes": ["agents:read"]}),
        )
        .await,
        201,
    )
    .await;
    let refused = client
        .post(app.url("/console/session"))
        .bearer_auth(key["key"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
}
