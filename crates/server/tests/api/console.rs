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

    fn keep_cookies(&mut self, response: &Response) {
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
