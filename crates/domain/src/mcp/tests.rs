//! The MCP servers' service and their tools as agents' tools, over mocks.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use secrecy::SecretString;
use serde_json::{Map, json};

use super::*;
use crate::agents::{
    Agent, AgentConfig, AgentName, AgentStatus, AgentTool, AgentType, ToolCallContext, ToolError,
    ToolProvider,
};
use crate::ids::{AgentId, McpServerId, MockIdGenerator, SessionId, TenantId, UserId};
use crate::tenancy::{Credential, Plan, Principal, Role};
use crate::time::MockClock;
use crate::webhooks::{MockSecretCipher, SealedSecret};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap()
}

fn caller() -> Principal {
    Principal {
        user_id: UserId::from_string("usr_1"),
        tenant_id: TenantId::from_string("ten_1"),
        plan: Plan::Starter,
        role: Role::Owner,
        credential: Credential::AccessToken,
        chain: Default::default(),
    }
}

/// Seals as `<context>|<plaintext>`: what is sealed, and for which server, stays visible.
fn cipher() -> Arc<MockSecretCipher> {
    let mut cipher = MockSecretCipher::new();
    cipher.expect_seal().returning(|context, clear| Ok(SealedSecret(format!("{context}|{clear}"))));
    cipher.expect_open().returning(|context, sealed| {
        sealed
            .0
            .strip_prefix(&format!("{context}|"))
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("wrong context"))
    });
    Arc::new(cipher)
}

fn tool(name: &str) -> McpTool {
    McpTool {
        name: name.into(),
        description: Some(format!("does {name}")),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }
}

fn server(status: McpStatus, allowed: Option<Vec<&str>>) -> McpServer {
    McpServer {
        id: McpServerId::from_string("mcp_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: "files".into(),
        url: "http://127.0.0.1:9/mcp".into(),
        headers: SealedSecret(r#"mcp_1|[["Authorization","Bearer s3cret"]]"#.into()),
        header_names: vec!["Authorization".into()],
        allowed_tools: allowed.map(|a| a.into_iter().map(str::to_owned).collect()),
        timeout_seconds: 7,
        status,
        error: None,
        tools: vec![tool("read"), tool("write"), tool("delete")],
        checked_at: Some(t0()),
        created_at: t0(),
        updated_at: t0(),
    }
}

fn agent(entry: serde_json::Value) -> Agent {
    Agent {
        id: AgentId::from_string("agt_1"),
        tenant_id: TenantId::from_string("ten_1"),
        name: AgentName::new("Helper").unwrap(),
        agent_type: AgentType::Assistant,
        status: AgentStatus::Active,
        description: None,
        memory_types: Vec::new(),
        config: AgentConfig {
            tools: AgentTool::parse_list(&json!([{"type": "memory_search"}, entry])).unwrap(),
            ..AgentConfig::default()
        },
        created_at: t0(),
        updated_at: t0(),
    }
}

fn servers_with(found: Option<McpServer>) -> MockMcpServerRepository {
    let mut servers = MockMcpServerRepository::new();
    servers.expect_get().returning(move |tenant, _| Ok(found.clone().filter(|s| &s.tenant_id == tenant)));
    servers
}

#[tokio::test]
async fn an_agent_is_offered_the_servers_allowed_tools_it_names_prefixed_by_the_servers_name() {
    let provider = McpTools::new(
        Arc::new(servers_with(Some(server(McpStatus::Ok, Some(vec!["read", "delete"]))))),
        Arc::new(MockMcpClient::new()),
        cipher(),
    );
    let agent = agent(json!({"type": "mcp", "server_id": "mcp_1", "tools": ["read", "write"]}));
    let offered = provider.offer(&agent, &caller()).await;
    assert_eq!(offered.len(), 1, "write is not allowed by the server, delete not named by the agent");
    assert_eq!(offered[0].spec.name, "files__read");
    assert_eq!(offered[0].spec.parameters["properties"]["q"]["type"], "string", "the server's schema");
    assert!(offered[0].spec.description.contains("does read"));
    assert_eq!((offered[0].position, offered[0].kind, offered[0].timeout.as_secs()), (1, "mcp", 7));

    let failing = McpTools::new(
        Arc::new(servers_with(Some(server(McpStatus::Error, None)))),
        Arc::new(MockMcpClient::new()),
        cipher(),
    );
    assert!(
        failing.offer(&agent, &caller()).await.is_empty(),
        "a server whose listing failed offers nothing"
    );
    let elsewhere = Principal { tenant_id: TenantId::from_string("ten_2"), ..caller() };
    assert!(provider.offer(&agent, &elsewhere).await.is_empty(), "another tenant's server offers nothing");
}

#[tokio::test]
async fn a_call_reaches_the_server_with_its_headers_and_its_failures_are_tool_errors() {
    let mut client = MockMcpClient::new();
    client
        .expect_call_tool()
        .withf(|endpoint, name, arguments| {
            endpoint.headers == [("Authorization".to_owned(), "Bearer s3cret".to_owned())]
                && endpoint.timeout.as_secs() == 7
                && name == "read"
                && arguments["q"] == "notes"
        })
        .times(1)
        .returning(|_, _, _| {
            Ok(McpCallResult { content: json!([{"type": "text", "text": "hello"}]), is_error: false })
        });
    client.expect_call_tool().withf(|_, name, _| name == "write").times(1).returning(|_, _, _| {
        Ok(McpCallResult { content: json!([{"type": "text", "text": "disk full"}]), is_error: true })
    });
    client.expect_call_tool().withf(|_, name, _| name == "delete").times(1).returning(|_, _, _| {
        Ok(McpCallResult { content: json!("x".repeat(MAX_RESULT_BYTES + 10)), is_error: false })
    });
    let provider =
        McpTools::new(Arc::new(servers_with(Some(server(McpStatus::Ok, None)))), Arc::new(client), cipher());
    let agent = agent(json!({"type": "mcp", "server_id": "mcp_1"}));
    let caller = caller();
    let session = SessionId::parse("ses_1").unwrap();
    let context = ToolCallContext {
        caller: &caller,
        agent: &agent,
        session_id: &session,
        timeout: std::time::Duration::from_secs(7),
    };
    let args = |v: serde_json::Value| -> Map<String, serde_json::Value> { v.as_object().unwrap().clone() };
    let read = provider.call(context, "files__read", args(json!({"q": "notes"}))).await.unwrap();
    assert_eq!(read, json!({"content": "hello"}));
    let write = provider.call(context, "files__write", Map::new()).await.unwrap_err();
    assert_eq!(write, ToolError::Failed("the tool failed: disk full".into()));
    let big = provider.call(context, "files__delete", Map::new()).await.unwrap();
    let text = big["content"].as_str().unwrap();
    assert!(
        text.len() < MAX_RESULT_BYTES + 200 && text.contains("a tool result gives the model at most"),
        "cut with a note"
    );
    assert_eq!(
        provider.call(context, "other__read", Map::new()).await.unwrap_err(),
        ToolError::Unknown("other__read".into())
    );
    assert_eq!(
        provider.call(context, "files", Map::new()).await.unwrap_err(),
        ToolError::Unknown("files".into())
    );
}

#[tokio::test]
async fn registering_a_server_seals_its_headers_and_records_what_listing_its_tools_gave() {
    let mut client = MockMcpClient::new();
    client.expect_list_tools().times(1).returning(|endpoint| {
        assert_eq!(endpoint.headers, [("X-Key".to_owned(), "k".to_owned())]);
        Err(McpFailure::Transport("connection refused".into()))
    });
    let mut repo = MockMcpServerRepository::new();
    repo.expect_create()
        .withf(|s| {
            s.status == McpStatus::Error
                && s.error.as_deref() == Some("the MCP server failed: connection refused")
                && s.header_names == ["X-Key"]
                && s.headers.0 == format!("{}|[[\"X-Key\",\"k\"]]", s.id)
        })
        .times(1)
        .returning(|_| Ok(true));
    repo.expect_create().returning(|_| Ok(false));
    let mut ids = MockIdGenerator::new();
    ids.expect_generate().returning(|p| format!("{p}_1"));
    let mut clock = MockClock::new();
    clock.expect_now().returning(t0);
    let service = McpServerService::new(
        McpServiceDeps {
            servers: Arc::new(repo),
            client: Arc::new(client),
            cipher: cipher(),
            ids: Arc::new(ids),
            clock: Arc::new(clock),
        },
        true,
    );
    let new = NewMcpServer {
        name: "files".into(),
        url: "http://127.0.0.1:9/mcp".into(),
        headers: vec![("X-Key".into(), SecretString::from("k"))],
        allowed_tools: None,
        timeout_seconds: 30,
    };
    let created = service.create(&caller(), new).await.unwrap();
    assert_eq!((created.status, created.tools.len(), created.checked_at), (McpStatus::Error, 0, Some(t0())));
    let viewer = Principal { role: Role::Viewer, ..caller() };
    let refused = service
        .create(
            &viewer,
            NewMcpServer {
                name: "x".into(),
                url: "http://127.0.0.1:9/".into(),
                headers: Vec::new(),
                allowed_tools: None,
                timeout_seconds: 30,
            },
        )
        .await;
    assert!(matches!(refused, Err(McpError::Forbidden(_))));
}

#[test]
fn names_headers_and_timeouts_are_checked() {
    assert!(server_name("files-2").is_ok());
    assert!(
        server_name("a__b").is_err() && server_name("a_b").is_err(),
        "__ separates the server from the tool"
    );
    assert!(server_name(&"x".repeat(MAX_SERVER_NAME_CHARS + 1)).is_err());
    assert!(headers(vec![("Authorization".into(), "Bearer x".into())]).is_ok());
    assert_eq!(headers(vec![("Bad Name".into(), "x".into())]).unwrap_err().field, "headers.Bad Name");
    assert!(headers(vec![("X".into(), "a\nb".into())]).is_err());
    assert!(timeout_seconds(0).is_err() && timeout_seconds(121).is_err() && timeout_seconds(120).is_ok());
    assert!(allowed_tools(vec![String::new()]).is_err());
}
