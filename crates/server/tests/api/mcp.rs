//! Agents using a remote MCP server's tools: a server written with the official Python SDK
//! (FastMCP over Streamable HTTP, `scripts/mcp_test_server.py`, on 127.0.0.1) with a tool that
//! answers, one that fails and one that is slow. Registering it lists its tools; the built-in
//! responder calls a tool its message names, so no model is needed. On both databases.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::helpers::{TestApp, json_with_status, on_both_databases, python_tools, spawn_with};

const TOKEN: &str = "s3cret-mcp-token";

/// The Python MCP server, stopped when dropped.
struct PythonMcp {
    _child: tokio::process::Child,
    url: String,
}

/// A port free now on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts the server and waits for it to say it listens; `None` without the test venv.
async fn python_mcp() -> Option<PythonMcp> {
    let (root, python) = python_tools("the MCP client tests")?;
    let port = free_port();
    let mut child = tokio::process::Command::new(python)
        .arg(root.join("scripts/mcp_test_server.py"))
        .arg(port.to_string())
        .arg(TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line()).await;
    assert!(
        matches!(ready, Ok(Ok(Some(ref l))) if l.starts_with("ready")),
        "the MCP server did not start: {ready:?}"
    );
    Some(PythonMcp { _child: child, url: format!("http://127.0.0.1:{port}/mcp") })
}

async fn register(app: &TestApp, token: &str, body: Value) -> Value {
    json_with_status(app.post_json_with_token("/api/v1/mcp-servers", token, &body).await, 201).await
}

async fn chat(app: &TestApp, token: &str, agent: &str, message: &str) -> Value {
    let body = json!({"message": message, "session_id": "s-1"});
    json_with_status(
        app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), token, &body).await,
        200,
    )
    .await
}

/// The result of the last tool call in the session, as the model read it.
async fn last_tool_result(app: &TestApp, token: &str, agent: &str) -> Value {
    let page = json_with_status(
        app.get_with_token(&format!("/api/v1/agents/{agent}/sessions/s-1/messages"), token).await,
        200,
    )
    .await;
    let tool =
        page["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").unwrap().clone();
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn an_agent_calls_a_python_mcp_servers_tools_and_their_failures_reach_the_model() {
    let Some(server) = python_mcp().await else { return };
    let url = server.url.clone();
    on_both_databases(crate::executions::loopback, |app| {
        let url = url.clone();
        async move {
            let token = app.access_token("ada@example.com").await;
            let created = register(
                &app,
                &token,
                json!({"name": "calc", "url": url, "headers": {"Authorization": format!("Bearer {TOKEN}")}, "timeout_seconds": 2}),
            )
            .await;
            assert_eq!(created["status"], "ok", "{created}");
            let mut names: Vec<&str> = created["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
            names.sort_unstable();
            assert_eq!(names, ["add", "explode", "slow"]);
            assert_eq!(created["tools"][0]["input_schema"]["type"], "object");
            assert_eq!(created["header_names"], json!(["Authorization"]));
            assert!(!created.to_string().contains(TOKEN), "a header's value is never shown");
            let id = created["id"].as_str().unwrap().to_owned();
            assert!(!app.get_with_token(&format!("/api/v1/mcp-servers/{id}"), &token).await.text().await.unwrap().contains(TOKEN));

            // Without the header the server answers 401: listing fails, and says so.
            let refused = register(&app, &token, json!({"name": "nokey", "url": url})).await;
            assert_eq!((refused["status"].as_str(), refused["tools"].as_array().map(Vec::len)), (Some("error"), Some(0)));
            assert!(refused["error"].as_str().unwrap().contains("MCP server"), "{refused}");
            // A name is the tenant's once.
            let again = app.post_json_with_token("/api/v1/mcp-servers", &token, &json!({"name": "calc", "url": url})).await;
            assert_eq!(json_with_status(again, 409).await["error"], "conflict");

            let tools = json!([{"type": "mcp", "server_id": id}]);
            let agent = app.create_agent(&token, json!({"name": "Calculator", "config": {"tools": tools}})).await;
            let agent = agent["id"].as_str().unwrap().to_owned();
            let reply = chat(&app, &token, &agent, r#"Please use calc__add {"a": 2, "b": 3}"#).await;
            assert!(reply["content"].as_str().unwrap().contains("calc__add"), "{reply}");
            assert_eq!(last_tool_result(&app, &token, &agent).await, json!({"content": "5"}));

            chat(&app, &token, &agent, r#"Please use calc__explode {"reason": "boom"}"#).await;
            let failed = last_tool_result(&app, &token, &agent).await;
            assert!(failed["error"].as_str().unwrap().contains("exploded: boom"), "{failed}");

            chat(&app, &token, &agent, "Please use calc__slow {}").await;
            let late = last_tool_result(&app, &token, &agent).await;
            assert_eq!(late["error"], "timed out after 2 s", "{late}");

            // Allowing only `add` takes `explode` away from the agent.
            let patched = app
                .patch_json_with_token(&format!("/api/v1/mcp-servers/{id}"), &token, &json!({"allowed_tools": ["add"]}))
                .await;
            assert_eq!(json_with_status(patched, 200).await["allowed_tools"], json!(["add"]));
            // (The built-in responder calls only a tool it is offered: no call is made.)
            chat(&app, &token, &agent, r#"Please use calc__explode {"reason": "boom"}"#).await;
            assert_eq!(last_tool_result(&app, &token, &agent).await, late, "explode is no longer offered");

            let refreshed =
                json_with_status(app.post_json_with_token(&format!("/api/v1/mcp-servers/{id}/refresh"), &token, &json!({})).await, 200).await;
            assert_eq!(refreshed["status"], "ok");
            let listed = json_with_status(app.get_with_token("/api/v1/mcp-servers", &token).await, 200).await;
            assert_eq!(listed["items"].as_array().unwrap().len(), 2);

            // Another tenant sees none of it.
            let bob = app.access_token("bob@example.com").await;
            assert_eq!(app.get_with_token(&format!("/api/v1/mcp-servers/{id}"), &bob).await.status(), 404);
            assert!(json_with_status(app.get_with_token("/api/v1/mcp-servers", &bob).await, 200).await["items"]
                .as_array()
                .unwrap()
                .is_empty());

            assert_eq!(app.delete_with_token(&format!("/api/v1/mcp-servers/{id}"), &token).await.status(), 204);
            assert_eq!(app.get_with_token(&format!("/api/v1/mcp-servers/{id}"), &token).await.status(), 404);
        }
    })
    .await;
}

#[tokio::test]
async fn a_server_off_the_allow_list_or_down_is_refused_or_failed_and_bad_fields_are_422() {
    let app = spawn_with(|c| {
        crate::executions::loopback(c);
        c.webhook_allowed_hosts = "localhost".into();
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let port = free_port();
    // Not on the allow-list: refused before any connection.
    let off =
        register(&app, &token, json!({"name": "off", "url": format!("http://127.0.0.1:{port}/mcp")})).await;
    assert_eq!(off["status"], "error");
    assert!(off["error"].as_str().unwrap().contains("not among the hosts"), "{off}");
    // Allowed, but nothing listens there.
    let down =
        register(&app, &token, json!({"name": "down", "url": format!("http://localhost:{port}/mcp")})).await;
    assert_eq!(down["status"], "error");
    assert!(down["error"].as_str().unwrap().contains("MCP server failed"), "{down}");

    let bad = app
        .post_json_with_token(
            "/api/v1/mcp-servers",
            &token,
            &json!({"name": "a__b", "url": "ftp://x", "headers": {"X": 1}, "timeout_seconds": 500, "extra": true}),
        )
        .await;
    assert_eq!(bad.status(), 422);
    let bad = app
        .post_json_with_token(
            "/api/v1/mcp-servers",
            &token,
            &json!({"name": "a__b", "url": "ftp://x", "headers": {"X": 1}, "timeout_seconds": 500}),
        )
        .await;
    let details = json_with_status(bad, 422).await["details"].clone();
    let fields: Vec<&str> =
        details.as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "headers.X", "timeout_seconds"], "{details}");
    let ftp = app
        .post_json_with_token("/api/v1/mcp-servers", &token, &json!({"name": "ftp", "url": "ftp://x/"}))
        .await;
    assert_eq!(json_with_status(ftp, 422).await["details"][0]["field"], "url");
}

/// An API key of `token`'s tenant with `scopes`.
async fn key(app: &TestApp, token: &str, scopes: Value) -> String {
    let body = json!({"name": "mcp", "scopes": scopes});
    let created =
        json_with_status(app.post_json_with_token("/api/v1/auth/api-keys", token, &body).await, 201).await;
    created["key"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_official_python_client_uses_agentry_over_mcp_as_the_rest_routes_allow() {
    let Some((root, python)) = python_tools("the /mcp client suite") else { return };
    on_both_databases(
        |c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing,
        |app| {
            let (root, python) = (root.clone(), python.clone());
            async move {
                let token = app.access_token("ada@example.com").await;
                app.create_agent(&token, json!({"name": "Helper"})).await;
                let workflow = crate::executions::create_workflow(
                    &app,
                    &token,
                    &json!({"name": "Echo", "steps": [{"id": "echo", "type": "transform", "output": {"x": "{{ input.x }}"}}]}),
                )
                .await;
                let full = key(
                    &app,
                    &token,
                    json!(["agents:read", "agents:write", "memory:read", "memory:write", "workflows:read", "workflows:execute"]),
                )
                .await;
                let read_only = key(&app, &token, json!(["agents:read", "memory:read"])).await;
                let bob = app.access_token("bob@example.com").await;
                app.create_agent(&bob, json!({"name": "Secret"})).await;
                let before = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await;

                let config = json!({
                    "url": app.url("/mcp"), "key": full, "read_key": read_only,
                    "agent_tool": "chat_Helper", "hidden_tool": "chat_Secret", "workflow_id": workflow,
                });
                let run = tokio::process::Command::new(&python)
                    .arg(root.join("scripts/mcp_client_suite.py"))
                    .arg(config.to_string())
                    .output()
                    .await
                    .unwrap();
                let out = String::from_utf8_lossy(&run.stdout);
                assert!(run.status.success(), "{out}\n{}", String::from_utf8_lossy(&run.stderr));
                assert!(out.contains("all checks passed"), "{out}");
                // The example of docs/mcp.md, as it is written there.
                let example = tokio::process::Command::new(&python)
                    .arg(root.join("docs/examples/mcp_client.py"))
                    .args([app.url("/mcp"), full.clone(), "Helper".to_owned()])
                    .output()
                    .await
                    .unwrap();
                let printed = String::from_utf8_lossy(&example.stdout);
                assert!(example.status.success(), "{printed}\n{}", String::from_utf8_lossy(&example.stderr));
                assert!(printed.contains("tools: chat_Helper, memory_search") && printed.contains("built-in responder"), "{printed}");

                // Three chats over MCP (two of the suite, one of the example): charged as chats are, one ledger entry each.
                let after = json_with_status(app.get_with_token("/api/v1/billing", &token).await, 200).await;
                let ledger = json_with_status(app.get_with_token("/api/v1/billing/ledger", &token).await, 200).await;
                let chats: Vec<&Value> = ledger["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|e| e["reason"] == "chat_usage")
                    .collect();
                assert_eq!(chats.len(), 3, "{ledger}");
                let charged: i64 = chats.iter().map(|e| -e["delta"].as_i64().unwrap()).sum();
                assert_eq!(before["credits"].as_i64().unwrap() - after["credits"].as_i64().unwrap(), charged);
            }
        },
    )
    .await;
}

#[tokio::test]
async fn mcp_refuses_other_sites_unknown_methods_and_callers_without_a_bearer() {
    let app = spawn_with(|_| {}).await;
    let token = app.access_token("ada@example.com").await;
    let post = |body: Value, origin: Option<&'static str>, bearer: bool| {
        let mut r = app.client.post(app.url("/mcp")).json(&body);
        if bearer {
            r = r.bearer_auth(&token);
        }
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        r.send()
    };
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(post(ping.clone(), None, true).await.unwrap().status(), 200);
    assert_eq!(post(ping.clone(), Some("https://evil.example"), true).await.unwrap().status(), 403);
    assert_eq!(post(ping.clone(), None, false).await.unwrap().status(), 401);
    let unknown: Value = post(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}), None, true)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unknown["error"]["code"], -32601);
    let old = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let init = post(old, None, true).await.unwrap();
    assert!(init.headers().get("mcp-session-id").is_some());
    let init: Value = init.json().await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "the client's version when spoken");
    let note =
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), None, true).await.unwrap();
    assert_eq!(note.status(), 202);
    assert_eq!(app.client.get(app.url("/mcp")).bearer_auth(&token).send().await.unwrap().status(), 405);
}

#[tokio::test]
async fn the_console_adds_refreshes_shows_and_deletes_mcp_servers_and_says_how_to_connect() {
    let Some(server) = python_mcp().await else { return };
    let app = spawn_with(crate::executions::loopback).await;
    let token = app.access_token("ada@example.com").await;
    let tenant = app.tenant_of(&token).await;
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in("ada@example.com").await;
    let page_path = format!("/console/{tenant}/mcp");
    let page = browser.get(&page_path).await;
    assert_eq!(page.status(), 200);
    let empty = page.text().await.unwrap();
    assert!(empty.contains("No MCP servers yet") && empty.contains("&#x2f;mcp</code>"), "{empty}");

    let header = format!("Bearer {TOKEN}");
    let fields = [
        ("name", "calc"),
        ("url", server.url.as_str()),
        ("header_name", "Authorization"),
        ("header_value", header.as_str()),
        ("allowed_tools", "add, explode"),
        ("timeout_seconds", "5"),
    ];
    let added = browser.post(&page_path, &fields, true).await;
    assert_eq!(crate::console::location(&added), page_path);
    let shown = browser.get(&page_path).await.text().await.unwrap();
    assert!(shown.contains("calc__add") && shown.contains("status-ok"), "{shown}");
    assert!(
        shown.contains("allowed: add, explode") && !shown.contains(TOKEN),
        "the header's value is never shown"
    );
    // The form's fields are the API's.
    let bad = browser.post(&page_path, &[("name", "a b"), ("url", "https://x/")], true).await;
    assert_eq!(bad.status(), 422);

    let listed = json_with_status(app.get_with_token("/api/v1/mcp-servers", &token).await, 200).await;
    let id = listed["items"][0]["id"].as_str().unwrap().to_owned();

    // The agent page's MCP tools: the allowed ones, ticked as the agent offers them.
    let agent = app
        .create_agent(&token, json!({"name": "Calc", "config": {"tools": [{"type": "memory_search"}]}}))
        .await;
    let agent = agent["id"].as_str().unwrap().to_owned();
    let agent_page = format!("/console/{tenant}/agents/{agent}");
    let choose = format!("{agent_page}/mcp-tools");
    let tools_of = |body: Value| body["config"]["tools"].clone();
    let shown = browser.get(&agent_page).await.text().await.unwrap();
    assert!(shown.contains(r#"value="add">"#) && shown.contains(r#"value="explode">"#), "{shown}");
    assert!(!shown.contains("calc__slow"), "a tool off the server's allowed_tools is not offered");
    let saved = browser.post(&choose, &[("server_id", id.as_str()), ("tools", "add")], true).await;
    assert_eq!(crate::console::location(&saved), format!("{agent_page}#mcp-tools"));
    let now =
        json_with_status(app.get_with_token(&format!("/api/v1/agents/{agent}"), &token).await, 200).await;
    let tools = tools_of(now);
    assert_eq!((tools[0]["type"].as_str(), tools.as_array().unwrap().len()), (Some("memory_search"), 2));
    assert_eq!(tools[1], json!({"type": "mcp", "server_id": id, "tools": ["add"]}));
    assert!(browser.get(&agent_page).await.text().await.unwrap().contains(r#"value="add" checked>"#));
    browser.post(&choose, &[("server_id", id.as_str()), ("tools", "add"), ("tools", "explode")], true).await;
    let now =
        json_with_status(app.get_with_token(&format!("/api/v1/agents/{agent}"), &token).await, 200).await;
    assert_eq!(tools_of(now)[1], json!({"type": "mcp", "server_id": id}), "all ticked: every tool");
    // The playground shows the MCP call and its result as it shows other tools'.
    let body = json!({"message": r#"Please use calc__add {"a": 2, "b": 3}"#, "session_id": "s-1"});
    json_with_status(
        app.post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), &token, &body).await,
        200,
    )
    .await;
    let playground = browser.get(&format!("{agent_page}?session=s-1")).await.text().await.unwrap();
    assert!(
        playground.contains("calls <strong>calc__add</strong>") && playground.contains("Result of calc__add"),
        "{playground}"
    );
    browser.post(&choose, &[("server_id", id.as_str())], true).await;
    let now =
        json_with_status(app.get_with_token(&format!("/api/v1/agents/{agent}"), &token).await, 200).await;
    let tools = tools_of(now);
    assert_eq!(tools.as_array().unwrap().len(), 1, "none ticked: the entry goes");
    assert_eq!(tools[0]["type"], "memory_search");
    let unknown = browser.post(&choose, &[("server_id", "mcp_nope"), ("tools", "add")], true).await;
    assert_eq!(unknown.status(), 404);

    let refreshed = browser.post(&format!("{page_path}/{id}/refresh"), &[], true).await;
    assert_eq!(crate::console::location(&refreshed), page_path);
    let deleted = browser.post(&format!("{page_path}/{id}/delete"), &[], true).await;
    assert_eq!(crate::console::location(&deleted), page_path);
    assert!(browser.get(&page_path).await.text().await.unwrap().contains("No MCP servers yet"));
}

/// The MCP Inspector's command-line mode (`make inspector`), or `None`, with a note, when it is
/// not installed (a failure under `AGENTRY_REQUIRE_TOOLS=1`).
fn inspector_cli() -> Option<std::path::PathBuf> {
    let (root, _) = python_tools("the MCP Inspector test")?;
    let cli = root.join(".venv-ci/inspector/node_modules/@modelcontextprotocol/inspector-cli/build/index.js");
    if cli.exists() {
        return Some(cli);
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_TOOLS=1 but no {} (run `make inspector`)",
        cli.display()
    );
    eprintln!("skipping the MCP Inspector test: no {} (run `make inspector`)", cli.display());
    None
}

#[tokio::test]
async fn the_mcp_inspector_cli_lists_agentrys_tools_and_calls_one() {
    let Some(cli) = inspector_cli() else { return };
    let app = spawn_with(|c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing).await;
    let token = app.access_token("ada@example.com").await;
    app.create_agent(&token, json!({"name": "Helper"})).await;
    let full = key(&app, &token, json!(["agents:read", "agents:write", "memory:read", "memory:write"])).await;
    let auth = format!("Authorization: Bearer {full}");
    let inspect = |args: Vec<String>| {
        let (cli, url, auth) = (cli.clone(), app.url("/mcp"), auth.clone());
        async move {
            // Run from its own folder: the CLI finds its package.json by a path it checks
            // against the working directory.
            let run = tokio::process::Command::new("node")
                .current_dir(cli.parent().unwrap())
                .arg(&cli)
                .arg(url)
                .args(["--transport", "http", "--header", &auth])
                .args(args)
                .output()
                .await
                .expect("node runs");
            let out = String::from_utf8_lossy(&run.stdout).into_owned();
            assert!(run.status.success(), "{out}\n{}", String::from_utf8_lossy(&run.stderr));
            serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
        }
    };
    let listed = inspect(vec!["--method".into(), "tools/list".into()]).await;
    let names: Vec<&str> =
        listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["chat_Helper", "memory_search", "memory_add", "knowledge_search", "run_workflow", "get_execution"]
    );
    let added = inspect(
        ["--method", "tools/call", "--tool-name", "memory_add", "--tool-arg", "content=Ada drinks green tea"]
            .map(str::to_owned)
            .to_vec(),
    )
    .await;
    assert_eq!(added["isError"], false, "{added}");
    assert_eq!(added["structuredContent"]["content"], "Ada drinks green tea");
}
