//! Team members: invitations mailed over a real SMTP conversation and accepted, roles and
//! their ceilings, the last owner, removal, scopes and tenant isolation (PRODUCT.md §12).

use std::time::Duration;

use agentry_domain::events::{EventPayload, EventType};
use agentry_mailer::test_support::{ReceivedMail, SmtpSink};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::{TestApp, json_with_status, on_both_databases_with_clock, spawn_with_clock};

const PASSWORD: &str = "correct horse battery";

fn use_smtp(c: &mut agentry_server::Config, url: &str) {
    c.smtp_url = Some(SecretString::from(url.to_owned()));
    c.public_url = Some("https://agentry.test".into());
}

async fn app_with_smtp() -> (TestApp, SmtpSink) {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    let app = spawn_with_clock(|c| use_smtp(c, &url)).await;
    (app, sink)
}

/// The invitation token in the newest mail to `to`.
fn invitation_token(mails: &[ReceivedMail], to: &str) -> String {
    let mail = mails.iter().rev().find(|m| m.to == [to]).unwrap_or_else(|| panic!("no mail to {to}"));
    let data = mail.data.replace("=\r\n", "").replace("=3D", "=");
    let marker = "https://agentry.test/invitation?token=";
    let start = data.find(marker).unwrap_or_else(|| panic!("no link in:\n{data}")) + marker.len();
    data[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

struct Owner {
    token: String,
    tenant: String,
    user_id: String,
}

async fn owner(app: &TestApp, email: &str) -> Owner {
    let token = app.access_token(email).await;
    let me = json_with_status(app.get_with_token("/api/v1/auth/me", &token).await, 200).await;
    Owner {
        tenant: me["tenants"][0]["id"].as_str().unwrap().to_owned(),
        user_id: me["id"].as_str().unwrap().to_owned(),
        token,
    }
}

async fn invite(app: &TestApp, token: &str, tenant: &str, email: &str, role: &str) -> reqwest::Response {
    app.post_json_with_token(
        &format!("/api/v1/tenants/{tenant}/invitations"),
        token,
        &json!({"email": email, "role": role}),
    )
    .await
}

/// Invites `email` as `role`, lets the mail go out, and returns the link's token.
async fn invited(app: &TestApp, sink: &SmtpSink, by: &Owner, email: &str, role: &str) -> String {
    let before = sink.received().len();
    let created = json_with_status(invite(app, &by.token, &by.tenant, email, role).await, 201).await;
    assert_eq!(created["email"], email);
    assert_eq!(created["role"], role);
    assert!(created.get("token").is_none(), "the token is only in the e-mail");
    app.drain().await;
    let mails = sink.wait_for(before + 1, Duration::from_secs(10)).await;
    invitation_token(&mails, email)
}

async fn accept(app: &TestApp, body: Value) -> reqwest::Response {
    app.post_json("/api/v1/auth/invitations/accept", &body).await
}

/// `email` joins `by`'s tenant as `role` with a new account: its access token.
async fn joined_new(app: &TestApp, sink: &SmtpSink, by: &Owner, email: &str, role: &str) -> String {
    let token = invited(app, sink, by, email, role).await;
    let pair = json_with_status(
        accept(app, json!({"token": token, "full_name": "Grace Hopper", "password": PASSWORD})).await,
        200,
    )
    .await;
    pair["access_token"].as_str().unwrap().to_owned()
}

async fn me(app: &TestApp, token: &str) -> Value {
    json_with_status(app.get_with_token("/api/v1/auth/me", token).await, 200).await
}

fn role_in(me: &Value, tenant: &str) -> Option<String> {
    me["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == tenant)
        .map(|t| t["role"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn an_invitation_mailed_over_smtp_makes_a_new_address_a_member_on_both_databases() {
    let sink = SmtpSink::start().await;
    let url = sink.url();
    on_both_databases_with_clock(
        |c| use_smtp(c, &url),
        |app| {
            let sink = sink.clone();
            async move {
                let ada = owner(&app, "ada@example.com").await;
                let token = invited(&app, &sink, &ada, "grace@example.com", "member").await;
                assert_eq!(token.len(), 43, "a 256-bit token");
                let mail = sink.received().into_iter().rev().find(|m| m.to == ["grace@example.com"]).unwrap();
                assert!(mail.data.contains("Subject: You are invited to Acme on Agentry"), "{}", mail.data);

                let path = format!("/api/v1/tenants/{}/invitations", ada.tenant);
                let pending = json_with_status(app.get_with_token(&path, &ada.token).await, 200).await;
                assert_eq!(pending["total"], 1);
                assert_eq!(pending["invitations"][0]["email"], "grace@example.com");
                assert!(!pending.to_string().contains(&token), "never the token");

                let pair = json_with_status(
                    accept(&app, json!({"token": token, "full_name": "Grace Hopper", "password": PASSWORD}))
                        .await,
                    200,
                )
                .await;
                assert_eq!(pair["token_type"], "bearer");
                let grace = pair["access_token"].as_str().unwrap();
                let grace_me = me(&app, grace).await;
                assert_eq!(grace_me["email"], "grace@example.com");
                assert_eq!(
                    grace_me["tenants"],
                    json!([{"id": ada.tenant, "name": "Acme", "role": "member"}])
                );
                // The new member signs in with the password they chose.
                assert_eq!(app.login("grace@example.com", PASSWORD).await.status(), 200);

                let members = json_with_status(
                    app.get_with_token(&format!("/api/v1/tenants/{}/members", ada.tenant), &ada.token).await,
                    200,
                )
                .await;
                let roles: Vec<(&str, &str)> = members["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| (m["email"].as_str().unwrap(), m["role"].as_str().unwrap()))
                    .collect();
                assert_eq!(roles, [("ada@example.com", "owner"), ("grace@example.com", "member")]);
                let pending = json_with_status(app.get_with_token(&path, &ada.token).await, 200).await;
                assert_eq!(pending["total"], 0, "accepted: no longer pending");

                // Single use.
                let again =
                    accept(&app, json!({"token": token, "full_name": "Eve", "password": PASSWORD})).await;
                assert_eq!(json_with_status(again, 400).await["error"], "invalid_token");

                let events = app.events(&ada.tenant).await;
                let added =
                    events.iter().find(|e| e.event_type() == EventType::TenantMemberAdded).expect("an event");
                let EventPayload::TenantMemberAdded { email, role, invited_by, user_id } = &added.payload
                else {
                    unreachable!()
                };
                assert_eq!(
                    (email.as_str(), role.as_str(), invited_by.as_str()),
                    ("grace@example.com", "member", ada.user_id.as_str())
                );
                assert_eq!(user_id.as_str(), grace_me["id"].as_str().unwrap());
            }
        },
    )
    .await;
}

#[tokio::test]
async fn an_existing_user_accepts_with_their_password_and_keeps_their_own_tenant() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let grace = owner(&app, "grace@example.com").await;
    let token = invited(&app, &sink, &ada, "grace@example.com", "viewer").await;

    let wrong = accept(&app, json!({"token": token, "password": "not the password"})).await;
    assert_eq!(json_with_status(wrong, 401).await["error"], "invalid_credentials");
    let missing = accept(&app, json!({"token": token})).await;
    assert_eq!(json_with_status(missing, 422).await["details"][0]["field"], "password");
    let pair = json_with_status(accept(&app, json!({"token": token, "password": PASSWORD})).await, 200).await;
    let grace_me = me(&app, pair["access_token"].as_str().unwrap()).await;
    assert_eq!(role_in(&grace_me, &grace.tenant).as_deref(), Some("owner"));
    assert_eq!(role_in(&grace_me, &ada.tenant).as_deref(), Some("viewer"));
    // Her earlier session sees the new tenant too.
    assert_eq!(role_in(&me(&app, &grace.token).await, &ada.tenant).as_deref(), Some("viewer"));

    // A member is not invited again.
    let r = invite(&app, &ada.token, &ada.tenant, "grace@example.com", "admin").await;
    assert_eq!(json_with_status(r, 409).await["error"], "conflict");
}

#[tokio::test]
async fn roles_are_bounded_by_the_callers_and_the_last_owner_stays() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let bob = joined_new(&app, &sink, &ada, "bob@example.com", "admin").await;
    let bob_id = me(&app, &bob).await["id"].as_str().unwrap().to_owned();
    let members = format!("/api/v1/tenants/{}/members", ada.tenant);

    // An admin invites at most as an admin (403 above: a right the caller lacks).
    let r = invite(&app, &bob, &ada.tenant, "carol@example.com", "owner").await;
    assert_eq!(json_with_status(r, 403).await["error"], "forbidden");
    let r = invite(&app, &bob, &ada.tenant, "carol@example.com", "admin").await;
    assert_eq!(r.status(), 201);
    let r = invite(&app, &bob, &ada.tenant, "carol@example.com", "boss").await;
    assert_eq!(json_with_status(r, 422).await["details"][0]["field"], "role");
    // ... and neither changes nor removes an owner, nor makes anyone one.
    let ada_path = format!("{members}/{}", ada.user_id);
    let bob_path = format!("{members}/{bob_id}");
    let r = app.patch_json_with_token(&ada_path, &bob, &json!({"role": "viewer"})).await;
    assert_eq!(r.status(), 403);
    let r = app.patch_json_with_token(&bob_path, &bob, &json!({"role": "owner"})).await;
    assert_eq!(r.status(), 403);
    assert_eq!(app.delete_with_token(&ada_path, &bob).await.status(), 403);

    // The last owner can neither leave, be demoted nor removed.
    let r = app.delete_with_token(&ada_path, &ada.token).await;
    assert_eq!(json_with_status(r, 409).await["error"], "conflict");
    let r = app.patch_json_with_token(&ada_path, &ada.token, &json!({"role": "admin"})).await;
    assert_eq!(json_with_status(r, 409).await["error"], "conflict");

    // A demotion applies at the demoted member's next request.
    let changed = json_with_status(
        app.patch_json_with_token(&bob_path, &ada.token, &json!({"role": "viewer"})).await,
        200,
    )
    .await;
    assert_eq!(changed["role"], "viewer");
    let r = invite(&app, &bob, &ada.tenant, "dan@example.com", "viewer").await;
    assert_eq!(r.status(), 403, "a viewer cannot invite");
    assert_eq!(app.get_with_token(&members, &bob).await.status(), 200, "but reads the members");
    let events = app.events(&ada.tenant).await;
    assert!(events.iter().any(|e| matches!(&e.payload,
        EventPayload::TenantMemberRoleChanged { from, to, changed_by, .. }
            if from == "admin" && to == "viewer" && changed_by.as_str() == ada.user_id)));

    // With a second owner, the first may leave.
    app.patch_json_with_token(&bob_path, &ada.token, &json!({"role": "owner"})).await;
    assert_eq!(app.delete_with_token(&ada_path, &ada.token).await.status(), 200);
    let left = json_with_status(app.get_with_token(&members, &bob).await, 200).await;
    assert_eq!(left["total"], 1);
    assert_eq!(left["members"][0]["role"], "owner");
}

#[tokio::test]
async fn removal_ends_the_members_access_and_keys_at_the_next_request() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let grace = owner(&app, "grace@example.com").await;
    let token = invited(&app, &sink, &ada, "grace@example.com", "member").await;
    json_with_status(accept(&app, json!({"token": token, "password": PASSWORD})).await, 200).await;

    let in_ada = format!("?tenant_id={}", ada.tenant);
    let key = json_with_status(
        app.post_json_with_token(
            &format!("/api/v1/auth/api-keys{in_ada}"),
            &grace.token,
            &json!({"name": "ci", "scopes": ["agents:read"]}),
        )
        .await,
        201,
    )
    .await;
    let key = key["key"].as_str().unwrap().to_owned();
    assert_eq!(app.get_with_token(&format!("/api/v1/agents{in_ada}"), &grace.token).await.status(), 200);
    assert_eq!(app.get_with_token("/api/v1/agents", &key).await.status(), 200);

    let grace_path = format!("/api/v1/tenants/{}/members/{}", ada.tenant, grace.user_id);
    let removed = json_with_status(app.delete_with_token(&grace_path, &ada.token).await, 200).await;
    assert_eq!(removed, json!({"user_id": grace.user_id, "paused": []}), "nothing acted as her");

    let r = app.get_with_token(&format!("/api/v1/agents{in_ada}"), &grace.token).await;
    assert_eq!(
        json_with_status(r, 403).await["error"],
        "forbidden",
        "her token no longer reaches the tenant"
    );
    let r = app.get_with_token(&format!("/api/v1/tenants/{}/members", ada.tenant), &grace.token).await;
    assert_eq!(r.status(), 404);
    assert_eq!(app.get_with_token("/api/v1/agents", &key).await.status(), 401, "her key there is dead");
    // Her own tenant is untouched.
    assert_eq!(app.get_with_token("/api/v1/agents", &grace.token).await.status(), 200);
    assert_eq!(role_in(&me(&app, &grace.token).await, &ada.tenant), None);
    let events = app.events(&ada.tenant).await;
    assert!(
        events.iter().any(|e| matches!(&e.payload,
        EventPayload::TenantMemberRemoved { user_id, removed_by, paused }
            if user_id.as_str() == grace.user_id && removed_by.as_str() == ada.user_id && paused.is_empty()))
    );
    assert_eq!(app.delete_with_token(&grace_path, &ada.token).await.status(), 404, "gone");
}

#[tokio::test]
async fn scopes_are_enforced_and_other_tenants_see_404_everywhere() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let eve = owner(&app, "eve@example.com").await;
    let base = format!("/api/v1/tenants/{}", ada.tenant);

    let reader = json_with_status(
        app.post_json_with_token(
            "/api/v1/auth/api-keys",
            &ada.token,
            &json!({"name": "r", "scopes": ["members:read"]}),
        )
        .await,
        201,
    )
    .await;
    let reader = reader["key"].as_str().unwrap();
    assert_eq!(app.get_with_token(&format!("{base}/members"), reader).await.status(), 200);
    assert_eq!(app.get_with_token(&format!("{base}/invitations"), reader).await.status(), 200);
    let r = invite(&app, reader, &ada.tenant, "x@example.com", "viewer").await;
    assert_eq!(json_with_status(r, 403).await["error"], "forbidden");

    let inv =
        json_with_status(invite(&app, &ada.token, &ada.tenant, "x@example.com", "viewer").await, 201).await;
    let inv_id = inv["id"].as_str().unwrap();
    let eve_base = format!("/api/v1/tenants/{}", eve.tenant);
    // Eve, on Ada's tenant: every route 404.
    for r in [
        app.get_with_token(&format!("{base}/members"), &eve.token).await,
        app.get_with_token(&format!("{base}/invitations"), &eve.token).await,
        invite(&app, &eve.token, &ada.tenant, "y@example.com", "viewer").await,
        app.delete_with_token(&format!("{base}/invitations/{inv_id}"), &eve.token).await,
        app.patch_json_with_token(
            &format!("{base}/members/{}", ada.user_id),
            &eve.token,
            &json!({"role": "viewer"}),
        )
        .await,
        app.delete_with_token(&format!("{base}/members/{}", ada.user_id), &eve.token).await,
        // Ada's invitation and member through Eve's own tenant.
        app.delete_with_token(&format!("{eve_base}/invitations/{inv_id}"), &eve.token).await,
        app.patch_json_with_token(
            &format!("{eve_base}/members/{}", ada.user_id),
            &eve.token,
            &json!({"role": "viewer"}),
        )
        .await,
        app.delete_with_token(&format!("{eve_base}/members/{}", ada.user_id), &eve.token).await,
        // Ada's key on Eve's tenant, and a tenant that does not exist.
        app.get_with_token(&format!("{eve_base}/members"), reader).await,
        app.get_with_token("/api/v1/tenants/ten_nope/members", &ada.token).await,
    ] {
        assert_eq!(json_with_status(r, 404).await["error"], "not_found");
    }
    // The invitation is still there, and revoking it works once.
    assert_eq!(
        app.delete_with_token(&format!("{base}/invitations/{inv_id}"), &ada.token).await.status(),
        204
    );
    assert_eq!(
        app.delete_with_token(&format!("{base}/invitations/{inv_id}"), &ada.token).await.status(),
        404
    );
    let _ = sink;
}

#[tokio::test]
async fn expired_revoked_and_replaced_invitations_are_refused() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let body = |token: &str| json!({"token": token, "full_name": "Grace Hopper", "password": PASSWORD});

    // Revoked.
    let revoked = invited(&app, &sink, &ada, "rev@example.com", "member").await;
    let list = json_with_status(
        app.get_with_token(&format!("/api/v1/tenants/{}/invitations", ada.tenant), &ada.token).await,
        200,
    )
    .await;
    let id = list["invitations"][0]["id"].as_str().unwrap();
    let path = format!("/api/v1/tenants/{}/invitations/{id}", ada.tenant);
    assert_eq!(app.delete_with_token(&path, &ada.token).await.status(), 204);
    assert_eq!(json_with_status(accept(&app, body(&revoked)).await, 400).await["error"], "invalid_token");

    // Replaced by a newer invitation of the same address: only the newer link works.
    let older = invited(&app, &sink, &ada, "new@example.com", "member").await;
    let newer = invited(&app, &sink, &ada, "new@example.com", "viewer").await;
    assert_eq!(accept(&app, body(&older)).await.status(), 400);

    // Expired: seven days later the newer link is dead too.
    app.clock().advance(chrono::Duration::days(7));
    assert_eq!(json_with_status(accept(&app, body(&newer)).await, 400).await["error"], "invalid_token");
    assert_eq!(app.login("new@example.com", PASSWORD).await.status(), 401, "no account was made");
}

/// In the console, a member of two tenants switches between them, and acts in each with the
/// role they have there: a viewer's form is refused as the API would refuse it.
#[tokio::test]
async fn the_consoles_tenant_switcher_moves_between_tenants_with_the_role_of_each() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let grace = owner(&app, "grace@example.com").await;
    let token = invited(&app, &sink, &ada, "grace@example.com", "viewer").await;
    json_with_status(accept(&app, json!({"token": token, "password": PASSWORD})).await, 200).await;

    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in("grace@example.com").await;
    let own = format!("/console/{}/agents", grace.tenant);
    let page = browser.get(&own).await.text().await.unwrap();
    assert!(page.contains(&format!("value=\"{}\"", ada.tenant)), "the switcher offers Ada's tenant");
    let switched = browser.landing(&format!("/console/switch?tenant_id={}", ada.tenant)).await;
    assert_eq!(switched, format!("/console/{}/agents", ada.tenant));
    // Not a tenant of hers: back to the console's start.
    assert_eq!(browser.landing("/console/switch?tenant_id=ten_nobody").await, "/console");

    // A viewer reads Ada's agents but cannot create one: 403, as from the API, and nothing made.
    assert_eq!(browser.get(&switched).await.status(), 200);
    let refused = browser.post(&switched, &[("name", "Not allowed")], true).await;
    assert_eq!(refused.status(), 403);
    let agents = json_with_status(app.get_with_token("/api/v1/agents", &ada.token).await, 200).await;
    assert_eq!(agents["total"], 0);
    // In her own tenant she is the owner.
    assert_eq!(browser.post(&own, &[("name", "Mine")], true).await.status(), 303);
}

/// The invitation page's form starts a session only when it is the page's own: posted by
/// another site (without the page's cookie, or from another origin with it) it is refused and
/// sets no cookie, and the invitation stays unspent for the page's own form.
#[tokio::test]
async fn the_invitation_page_refuses_a_form_from_another_site() {
    let (app, sink) = app_with_smtp().await;
    let ada = owner(&app, "ada@example.com").await;
    let token = invited(&app, &sink, &ada, "grace@example.com", "member").await;
    let page = app.client.get(app.url(&format!("/invitation?token={token}"))).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let (csrf, cookie) = crate::helpers::page_form_token(&page);
    let form = [
        ("token", token.as_str()),
        ("full_name", "Grace Hopper"),
        ("password", PASSWORD),
        ("confirm_password", PASSWORD),
        ("csrf", csrf.as_str()),
    ];
    let foreign = [
        (None, None, None),
        (Some(cookie.as_str()), Some("https://evil.example"), None),
        (Some(cookie.as_str()), None, Some("cross-site")),
    ];
    for (cookie, origin, fetch_site) in foreign {
        let mut post = app.client.post(app.url("/invitation")).form(&form);
        if let Some(cookie) = cookie {
            post = post.header("cookie", cookie);
        }
        if let Some(origin) = origin {
            post = post.header("origin", origin);
        }
        if let Some(site) = fetch_site {
            post = post.header("sec-fetch-site", site);
        }
        let r = post.send().await.unwrap();
        assert_eq!(r.status(), 403, "{cookie:?} {origin:?} {fetch_site:?}");
        assert!(r.headers().get("set-cookie").is_none(), "no session cookie");
    }
    let r = app
        .client
        .post(app.url("/invitation"))
        .header("cookie", &cookie)
        .header("origin", app.base.as_str())
        .header("sec-fetch-site", "same-origin")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the page's own form joins");
    let cookies: Vec<&str> =
        r.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).collect();
    assert!(cookies.iter().any(|c| c.starts_with("agentry_session=")), "{cookies:?}");
    // The session-from-token route refuses another origin too.
    let access = app.access_token("eve@example.com").await;
    let r = app
        .client
        .post(app.url("/console/session"))
        .bearer_auth(&access)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("set-cookie").is_none());
}
