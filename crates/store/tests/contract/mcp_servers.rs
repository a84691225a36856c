use agentry_domain::identity::AccountRepository;
use agentry_domain::ids::{McpServerId, TenantId};
use agentry_domain::mcp::{McpServer, McpServerRepository, McpStatus, McpTool};
use agentry_domain::webhooks::SealedSecret;
use agentry_store::{AccountStore, Database, McpServerStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;

crate::contract!(
    a_server_is_stored_read_back_whole_and_listed_per_tenant,
    a_name_is_unique_per_tenant_on_create_and_update,
    another_tenants_server_is_invisible_and_untouchable,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 6, 9, 0, 0).unwrap()
}

fn server(id: &str, tenant: &str, name: &str) -> McpServer {
    McpServer {
        id: McpServerId::from_string(id),
        tenant_id: TenantId::from_string(tenant),
        name: name.into(),
        url: "http://127.0.0.1:9100/mcp".into(),
        headers: SealedSecret("sealed".into()),
        header_names: vec!["Authorization".into()],
        allowed_tools: Some(vec!["read".into()]),
        timeout_seconds: 12,
        status: McpStatus::Ok,
        error: None,
        tools: vec![McpTool {
            name: "read".into(),
            description: Some("Reads — «quoted» text".into()),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        checked_at: Some(t0()),
        created_at: t0(),
        updated_at: t0(),
    }
}

async fn setup(db: &Database) -> McpServerStore {
    let accounts = AccountStore::new(db.clone());
    accounts.create_account(&super::accounts::account("1", "one@example.com")).await.unwrap();
    accounts.create_account(&super::accounts::account("2", "two@example.com")).await.unwrap();
    McpServerStore::new(db.clone())
}

async fn a_server_is_stored_read_back_whole_and_listed_per_tenant(db: Database) {
    let store = setup(&db).await;
    let one = server("mcp_1", "ten_1", "files");
    assert!(store.create(&one).await.unwrap());
    assert_eq!(store.get(&one.tenant_id, &one.id).await.unwrap(), Some(one.clone()));
    let mut failing = server("mcp_2", "ten_1", "crm");
    failing.status = McpStatus::Error;
    failing.error = Some("the MCP server failed: connection refused".into());
    failing.tools = Vec::new();
    failing.allowed_tools = None;
    failing.checked_at = None;
    assert!(store.create(&failing).await.unwrap());
    assert!(store.create(&server("mcp_3", "ten_2", "files")).await.unwrap(), "names are per tenant");
    let listed = store.list(&one.tenant_id).await.unwrap();
    assert_eq!(listed, [one.clone(), failing.clone()]);
    let mut changed = failing.clone();
    changed.status = McpStatus::Ok;
    changed.error = None;
    changed.allowed_tools = Some(vec!["x".into()]);
    assert_eq!(store.update(&changed).await.unwrap(), Some(true));
    assert_eq!(store.get(&changed.tenant_id, &changed.id).await.unwrap(), Some(changed.clone()));
    assert!(store.delete(&one.tenant_id, &one.id).await.unwrap());
    assert!(!store.delete(&one.tenant_id, &one.id).await.unwrap());
    assert_eq!(store.list(&one.tenant_id).await.unwrap(), [changed]);
}

async fn a_name_is_unique_per_tenant_on_create_and_update(db: Database) {
    let store = setup(&db).await;
    assert!(store.create(&server("mcp_1", "ten_1", "files")).await.unwrap());
    assert!(!store.create(&server("mcp_2", "ten_1", "files")).await.unwrap());
    assert!(store.create(&server("mcp_2", "ten_1", "crm")).await.unwrap());
    let renamed = server("mcp_2", "ten_1", "files");
    assert_eq!(store.update(&renamed).await.unwrap(), Some(false));
    assert_eq!(store.get(&renamed.tenant_id, &renamed.id).await.unwrap().unwrap().name, "crm");
}

async fn another_tenants_server_is_invisible_and_untouchable(db: Database) {
    let store = setup(&db).await;
    let one = server("mcp_1", "ten_1", "files");
    store.create(&one).await.unwrap();
    let other = TenantId::from_string("ten_2");
    assert_eq!(store.get(&other, &one.id).await.unwrap(), None);
    assert!(store.list(&other).await.unwrap().is_empty());
    assert_eq!(store.update(&McpServer { tenant_id: other.clone(), ..one.clone() }).await.unwrap(), None);
    assert!(!store.delete(&other, &one.id).await.unwrap());
    assert_eq!(store.get(&one.tenant_id, &one.id).await.unwrap(), Some(one));
}
