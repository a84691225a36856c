use agentry_domain::agents::{BlockActor, BlockChange, MemoryBlock, MemoryBlockRepository};
use agentry_domain::ids::{AgentId, TenantId};
use agentry_store::{Database, MemoryBlockStore};
use chrono::{DateTime, Duration, TimeZone, Utc};

crate::contract!(
    a_block_is_written_over_its_version_with_each_version_recorded,
    a_change_made_from_an_older_version_writes_nothing,
    a_deleted_block_keeps_its_history_and_its_numbering,
    blocks_are_kept_per_tenant_and_agent_and_go_with_the_agent,
);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 3, 9, 0, 0).unwrap()
}

fn block(tenant: &str, agent: &str, value: &str, version: u32) -> MemoryBlock {
    MemoryBlock {
        tenant_id: TenantId::from_string(tenant),
        agent_id: AgentId::from_string(agent),
        label: "human".into(),
        value: value.into(),
        description: Some("Who the user is".into()),
        limit: 100,
        version,
        created_at: t0(),
        updated_at: t0() + Duration::minutes(i64::from(version)),
    }
}

async fn setup(db: &Database) -> MemoryBlockStore {
    super::agents::setup(db).await;
    super::agents::setup_agent(db, "agt_1", "ten_1").await;
    super::agents::setup_agent(db, "agt_2", "ten_2").await;
    MemoryBlockStore::new(db.clone())
}

fn ours() -> (TenantId, AgentId) {
    (TenantId::from_string("ten_1"), AgentId::from_string("agt_1"))
}

async fn a_block_is_written_over_its_version_with_each_version_recorded(db: Database) {
    let repo = setup(&db).await;
    let (tenant, agent) = ours();
    assert!(repo.save(&block("ten_1", "agt_1", "Ada.", 1), BlockChange::Set, BlockActor::Api).await.unwrap());
    let appended = block("ten_1", "agt_1", "Ada.\nLives in Porto.", 2);
    assert!(repo.save(&appended, BlockChange::Appended, BlockActor::Agent).await.unwrap());
    assert_eq!(repo.list(&tenant, &agent).await.unwrap(), [appended]);
    let history = repo.history(&tenant, &agent, "human").await.unwrap();
    let versions: Vec<_> = history.iter().map(|v| (v.version, v.change, v.actor, v.value.as_str())).collect();
    assert_eq!(
        versions,
        [
            (1, BlockChange::Set, BlockActor::Api, "Ada."),
            (2, BlockChange::Appended, BlockActor::Agent, "Ada.\nLives in Porto.")
        ]
    );
    assert_eq!(repo.last_version(&tenant, &agent, "human").await.unwrap(), 2);
}

async fn a_change_made_from_an_older_version_writes_nothing(db: Database) {
    let repo = setup(&db).await;
    let (tenant, agent) = ours();
    repo.save(&block("ten_1", "agt_1", "Ada.", 1), BlockChange::Set, BlockActor::Api).await.unwrap();
    repo.save(&block("ten_1", "agt_1", "Ada, a chemist.", 2), BlockChange::Set, BlockActor::Api)
        .await
        .unwrap();
    // Both made from version 1: the second comes too late.
    let stale = block("ten_1", "agt_1", "Ada.\nLikes tea.", 2);
    assert!(!repo.save(&stale, BlockChange::Appended, BlockActor::Agent).await.unwrap());
    // A "new" block under a label that is taken writes nothing either.
    assert!(
        !repo.save(&block("ten_1", "agt_1", "Bob.", 1), BlockChange::Set, BlockActor::Api).await.unwrap()
    );
    let now = repo.list(&tenant, &agent).await.unwrap();
    assert_eq!((now[0].value.as_str(), now[0].version), ("Ada, a chemist.", 2));
    assert_eq!(repo.history(&tenant, &agent, "human").await.unwrap().len(), 2);
}

async fn a_deleted_block_keeps_its_history_and_its_numbering(db: Database) {
    let repo = setup(&db).await;
    let (tenant, agent) = ours();
    let first = block("ten_1", "agt_1", "Ada.", 1);
    repo.save(&first, BlockChange::Set, BlockActor::Api).await.unwrap();
    assert!(!repo.delete(&block("ten_1", "agt_1", "Ada.", 7), t0()).await.unwrap(), "not its version");
    assert!(repo.delete(&first, t0() + Duration::hours(1)).await.unwrap());
    assert!(repo.list(&tenant, &agent).await.unwrap().is_empty());
    assert_eq!(repo.last_version(&tenant, &agent, "human").await.unwrap(), 2);
    // Set again after its deletion: version 3, a new block.
    assert!(repo.save(&block("ten_1", "agt_1", "Bob.", 3), BlockChange::Set, BlockActor::Api).await.unwrap());
    let changes: Vec<_> =
        repo.history(&tenant, &agent, "human").await.unwrap().iter().map(|v| (v.version, v.change)).collect();
    assert_eq!(changes, [(1, BlockChange::Set), (2, BlockChange::Deleted), (3, BlockChange::Set)]);
}

async fn blocks_are_kept_per_tenant_and_agent_and_go_with_the_agent(db: Database) {
    let repo = setup(&db).await;
    repo.save(&block("ten_1", "agt_1", "Ada.", 1), BlockChange::Set, BlockActor::Api).await.unwrap();
    repo.save(&block("ten_2", "agt_2", "Oslo.", 1), BlockChange::Set, BlockActor::Api).await.unwrap();
    let (tenant, agent) = ours();
    assert_eq!(repo.list(&tenant, &agent).await.unwrap().len(), 1);
    assert!(repo.list(&TenantId::from_string("ten_2"), &agent).await.unwrap().is_empty(), "another tenant");
    assert!(repo.history(&TenantId::from_string("ten_2"), &agent, "human").await.unwrap().is_empty());
    use agentry_domain::agents::AgentRepository as _;
    assert!(agentry_store::AgentStore::new(db.clone()).delete(&tenant, &agent).await.unwrap());
    assert!(repo.list(&tenant, &agent).await.unwrap().is_empty());
    assert!(repo.history(&tenant, &agent, "human").await.unwrap().is_empty());
    assert_eq!(
        repo.list(&TenantId::from_string("ten_2"), &AgentId::from_string("agt_2")).await.unwrap().len(),
        1
    );
}
