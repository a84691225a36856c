use agentry_domain::billing::{
    CreditHold, CreditRepository, HoldRequest, LedgerEntry, LedgerReason, Settlement,
};
use agentry_domain::events::{EventLog, EventPayload, MemoryChangedData};
use agentry_domain::ids::{AgentId, CreditHoldId, EventId, LedgerEntryId, MemoryId, MessageId, TenantId};
use agentry_domain::memory::learning::{Invalidation, Learned, MemoryChange, Reworded};
use agentry_domain::memory::model::MemoryOrigin;
use agentry_domain::memory::{MemoryFilter, MemoryRepository, Validity};
use agentry_store::{CreditStore, Database, EventStore};
use chrono::Duration;

use super::memory::{embedded, entry, setup, t0};

crate::contract!(
    learning_adds_invalidates_and_records_history_once_per_exchange,
    invalidated_facts_are_found_only_when_asked_for_or_as_of_a_time_they_held,
    learning_never_touches_another_tenants_or_agents_fact,
    a_model_extractions_charge_is_settled_with_what_it_learned_once,
    a_reworded_fact_keeps_its_earlier_text_in_its_history,
    an_agents_current_fact_on_a_topic_is_found_by_the_topic,
    a_pass_of_exchanges_is_stored_in_order_in_one_go_and_each_once,
    an_exchange_given_twice_in_one_pass_is_learned_from_once,
);

const MODEL: &str = "test:2";

fn lyon() -> agentry_domain::memory::MemoryEntry {
    let mut e = entry("mem_lyon", "ten_1", Some("agt_1"), "The user lives in Lyon.");
    e.origin = MemoryOrigin::Extraction;
    e.metadata.insert("topic".into(), "home".into());
    e
}

/// Porto replaces Lyon, learned from the exchange `msg_1` → `msg_2` an hour after t0.
fn moved() -> Learned {
    let at = t0() + Duration::hours(1);
    let mut porto = entry("mem_porto", "ten_1", Some("agt_1"), "The user lives in Porto.");
    porto.origin = MemoryOrigin::Extraction;
    porto.metadata.insert("topic".into(), "home".into());
    (porto.created_at, porto.updated_at, porto.valid_from) = (at, at, at);
    porto.source_message_ids = vec![MessageId::from_string("msg_1"), MessageId::from_string("msg_2")];
    let data = MemoryChangedData {
        memory_id: MemoryId::from_string("mem_porto"),
        agent_id: Some(AgentId::from_string("agt_1")),
        content: porto.content.clone(),
        origin: "extraction".into(),
        reason: None,
        superseded_by: None,
        source_message_ids: porto.source_message_ids.clone(),
    };
    Learned {
        tenant_id: TenantId::from_string("ten_1"),
        agent_id: AgentId::from_string("agt_1"),
        exchange: MessageId::from_string("msg_1"),
        source_message_ids: porto.source_message_ids.clone(),
        added: vec![embedded(porto, [0.8, 0.6])],
        updated: vec![],
        invalidated: vec![Invalidation {
            id: MemoryId::from_string("mem_lyon"),
            superseded_by: Some(MemoryId::from_string("mem_porto")),
            reason: "replaced by a later statement: The user lives in Porto.".into(),
        }],
        events: vec![agentry_domain::events::Event {
            id: EventId::from_string("evt_learned"),
            tenant_id: TenantId::from_string("ten_1"),
            payload: EventPayload::MemoryCreated(data),
            created_at: at,
        }],
        at,
        charge: None,
    }
}

async fn learning_adds_invalidates_and_records_history_once_per_exchange(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    assert!(repo.learn(&moved()).await.unwrap());
    assert!(!repo.learn(&moved()).await.unwrap(), "the same exchange again changes nothing");

    let old = repo.get(&tenant, &MemoryId::from_string("mem_lyon")).await.unwrap().unwrap();
    assert_eq!(old.invalid_at, Some(t0() + Duration::hours(1)));
    assert_eq!(old.superseded_by, Some(MemoryId::from_string("mem_porto")));
    let new = repo.get(&tenant, &MemoryId::from_string("mem_porto")).await.unwrap().unwrap();
    assert_eq!(
        (new.origin, new.invalid_at, new.source_message_ids.len()),
        (MemoryOrigin::Extraction, None, 2)
    );

    let history = repo.history(&tenant, &MemoryId::from_string("mem_lyon")).await.unwrap();
    let changes: Vec<_> = history.iter().map(|v| (v.version, v.change, v.content.as_str())).collect();
    assert_eq!(
        changes,
        [
            (1, MemoryChange::Added, "The user lives in Lyon."),
            (2, MemoryChange::Invalidated, "The user lives in Lyon."),
        ]
    );
    assert!(history[1].reason.as_deref().unwrap().contains("Porto"));
    assert_eq!(
        history[1].source_message_ids,
        [MessageId::from_string("msg_1"), MessageId::from_string("msg_2")]
    );
    let porto = repo.history(&tenant, &MemoryId::from_string("mem_porto")).await.unwrap();
    assert_eq!(porto.iter().map(|v| v.change).collect::<Vec<_>>(), [MemoryChange::Added]);

    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.id.as_str() == "evt_learned").count(), 1, "its events once");
}

async fn invalidated_facts_are_found_only_when_asked_for_or_as_of_a_time_they_held(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    repo.learn(&moved()).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let later = t0() + Duration::hours(2);
    let found = |filter: MemoryFilter| {
        let repo = repo.clone();
        let tenant = tenant.clone();
        async move {
            let mut ids: Vec<String> = repo
                .nearest(&tenant, MODEL, &[1.0, 0.0], &filter, later, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|(id, _)| id.into_string())
                .collect();
            ids.sort();
            ids
        }
    };
    let agent = || MemoryFilter { agent_id: Some(AgentId::from_string("agt_1")), ..MemoryFilter::default() };
    assert_eq!(found(agent()).await, ["mem_porto"]);
    assert_eq!(found(MemoryFilter { include_invalid: true, ..agent() }).await, ["mem_lyon", "mem_porto"]);
    let before = MemoryFilter { as_of: Some(t0() + Duration::minutes(30)), ..agent() };
    assert_eq!(found(before).await, ["mem_lyon"]);
    let list = |validity: Validity| {
        let repo = repo.clone();
        let tenant = tenant.clone();
        async move {
            let page = agentry_domain::pagination::Page::new(None, Some(10)).unwrap();
            let agent = Some(AgentId::from_string("agt_1"));
            let (listed, _) = repo.list(&tenant, agent, None, None, validity, later, page).await.unwrap();
            let mut ids: Vec<String> = listed.into_iter().map(|e| e.id.into_string()).collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(list(Validity::default()).await, ["mem_porto"], "a list shows what holds");
    assert_eq!(list(Validity { include_invalid: true, as_of: None }).await, ["mem_lyon", "mem_porto"]);
    let before = Validity { include_invalid: false, as_of: Some(t0() + Duration::minutes(30)) };
    assert_eq!(list(before).await, ["mem_lyon"], "what held then");
}

async fn learning_never_touches_another_tenants_or_agents_fact(db: Database) {
    let repo = setup(&db).await;
    let theirs = entry("mem_theirs", "ten_2", Some("agt_2"), "The user lives in Oslo.");
    repo.insert(&[embedded(theirs, [1.0, 0.0])], &[]).await.unwrap();
    let mut learned = moved();
    learned.invalidated[0].id = MemoryId::from_string("mem_theirs");
    assert!(repo.learn(&learned).await.unwrap());
    let still = repo
        .get(&TenantId::from_string("ten_2"), &MemoryId::from_string("mem_theirs"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.invalid_at, None);
    assert!(
        repo.history(&TenantId::from_string("ten_2"), &MemoryId::from_string("mem_theirs"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A hold of 5 credits for a model extraction, and the charge of 2 settling it.
async fn charged(db: &Database) -> Settlement {
    let credits = CreditStore::new(db.clone());
    let request = HoldRequest {
        id: CreditHoldId::from_string("hld_extraction"),
        tenant_id: TenantId::from_string("ten_1"),
        wanted: 5,
        minimum: 1,
        created_at: t0(),
    };
    let hold: CreditHold = credits.hold(&request).await.unwrap().unwrap();
    Settlement {
        hold,
        entry: LedgerEntry {
            id: LedgerEntryId::from_string("led_extraction"),
            tenant_id: TenantId::from_string("ten_1"),
            delta: -2,
            balance_after: 0,
            reason: LedgerReason::MemoryExtraction,
            reference: Some("msg_1".into()),
            created_at: t0(),
        },
        low_threshold: 10,
        low_event: EventId::from_string("evt_low"),
    }
}

async fn a_model_extractions_charge_is_settled_with_what_it_learned_once(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    let credits = CreditStore::new(db.clone());
    let tenant = TenantId::from_string("ten_1");
    let before = credits.account(&tenant).await.unwrap().unwrap().0;
    let learned = Learned { charge: Some(charged(&db).await), ..moved() };
    assert_eq!(credits.account(&tenant).await.unwrap().unwrap().0, before - 5, "held");
    assert!(repo.learn(&learned).await.unwrap());
    assert_eq!(credits.account(&tenant).await.unwrap().unwrap().0, before - 2, "charged 2, 3 back");
    assert_eq!(db.count_rows("credit_holds").await.unwrap(), 0);
    let (ledger, _) = credits
        .ledger(&tenant, agentry_domain::pagination::Page::new(None, Some(10)).unwrap())
        .await
        .unwrap();
    let entry = ledger.iter().find(|e| e.reason == LedgerReason::MemoryExtraction).unwrap();
    assert_eq!((entry.delta, entry.reference.as_deref()), (-2, Some("msg_1")));

    // Handed over again (a second hold for it): nothing is applied, and nothing charged.
    let again = Learned { charge: Some(charged(&db).await), ..moved() };
    assert!(!repo.learn(&again).await.unwrap());
    let held = credits.account(&tenant).await.unwrap().unwrap().0;
    assert_eq!(held, before - 2 - 5, "the second hold stands until its caller releases it");
    credits.release(&CreditHoldId::from_string("hld_extraction")).await.unwrap();
    assert_eq!(credits.account(&tenant).await.unwrap().unwrap().0, before - 2);
    let (ledger, _) = credits
        .ledger(&tenant, agentry_domain::pagination::Page::new(None, Some(10)).unwrap())
        .await
        .unwrap();
    assert_eq!(ledger.iter().filter(|e| e.reason == LedgerReason::MemoryExtraction).count(), 1);
}

async fn a_reworded_fact_keeps_its_earlier_text_in_its_history(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let sources = vec![MessageId::from_string("msg_1"), MessageId::from_string("msg_2")];
    let text = "The user lives in Lyon, near the Saône.";
    let learned = Learned {
        added: vec![],
        invalidated: vec![],
        updated: vec![Reworded {
            id: MemoryId::from_string("mem_lyon"),
            content: text.into(),
            embedding: embedded(lyon(), [0.9, 0.1]).embedding,
            source_message_ids: sources.clone(),
        }],
        events: vec![],
        ..moved()
    };
    assert!(repo.learn(&learned).await.unwrap());
    let now = repo.get(&tenant, &MemoryId::from_string("mem_lyon")).await.unwrap().unwrap();
    assert_eq!((now.content.as_str(), now.invalid_at, now.source_message_ids), (text, None, sources));
    let history = repo.history(&tenant, &MemoryId::from_string("mem_lyon")).await.unwrap();
    let changes: Vec<_> = history.iter().map(|v| (v.version, v.change, v.content.as_str())).collect();
    assert_eq!(
        changes,
        [(1, MemoryChange::Added, "The user lives in Lyon."), (2, MemoryChange::Updated, text)]
    );
}

async fn an_agents_current_fact_on_a_topic_is_found_by_the_topic(db: Database) {
    let repo = setup(&db).await;
    let on_topic = |mut e: agentry_domain::memory::MemoryEntry, topic: &str| {
        e.metadata.insert("topic".into(), topic.into());
        embedded(e, [1.0, 0.0])
    };
    let mut expired = entry("mem_expired", "ten_1", Some("agt_1"), "The user lives in Paris.");
    expired.expires_at = Some(t0() + Duration::minutes(90));
    repo.insert(
        &[
            embedded(lyon(), [1.0, 0.0]),
            on_topic(entry("mem_name", "ten_1", Some("agt_1"), "The user's name is Ada."), "name"),
            on_topic(entry("mem_no_agent", "ten_1", None, "The user lives in Oslo."), "home"),
            on_topic(expired, "home"),
            embedded(entry("mem_untopical", "ten_1", Some("agt_1"), "The user likes tea."), [0.0, 1.0]),
        ],
        &[],
    )
    .await
    .unwrap();
    let rome = on_topic(entry("mem_other_tenant", "ten_2", Some("agt_2"), "The user lives in Rome."), "home");
    repo.insert(&[rome], &[]).await.unwrap();
    let (tenant, agent) = (TenantId::from_string("ten_1"), AgentId::from_string("agt_1"));
    let found = |topic: &'static str| {
        let (repo, tenant, agent) = (repo.clone(), tenant.clone(), agent.clone());
        async move {
            let later = t0() + Duration::hours(2);
            let entries = repo.on_topic(&tenant, &agent, topic, later, 20).await.unwrap();
            entries.into_iter().map(|e| e.id.into_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        found("home").await,
        ["mem_lyon"],
        "not the tenant's other facts, another tenant's or an expired one"
    );
    assert_eq!(found("name").await, ["mem_name"]);
    assert!(found("work").await.is_empty());
    // Once Porto replaces Lyon, the invalidated fact is no longer current on the topic.
    repo.learn(&moved()).await.unwrap();
    assert_eq!(found("home").await, ["mem_porto"]);
}

/// Berlin replaces Porto, learned from the exchange `msg_3` → `msg_4` two hours after t0.
fn moved_again() -> Learned {
    let mut learned = moved();
    let at = t0() + Duration::hours(2);
    let sources = vec![MessageId::from_string("msg_3"), MessageId::from_string("msg_4")];
    let berlin = &mut learned.added[0].entry;
    (berlin.id, berlin.content) = (MemoryId::from_string("mem_berlin"), "The user lives in Berlin.".into());
    (berlin.created_at, berlin.updated_at, berlin.valid_from) = (at, at, at);
    berlin.source_message_ids.clone_from(&sources);
    learned.invalidated = vec![Invalidation {
        id: MemoryId::from_string("mem_porto"),
        superseded_by: Some(MemoryId::from_string("mem_berlin")),
        reason: "replaced by a later statement: The user lives in Berlin.".into(),
    }];
    learned.events[0].id = EventId::from_string("evt_berlin");
    (learned.exchange, learned.source_message_ids, learned.at) = (sources[0].clone(), sources, at);
    learned
}

async fn a_pass_of_exchanges_is_stored_in_order_in_one_go_and_each_once(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    let tenant = TenantId::from_string("ten_1");
    let (msg_1, msg_3) = (MessageId::from_string("msg_1"), MessageId::from_string("msg_3"));
    let asked = [
        (tenant.clone(), msg_1.clone()),
        (tenant.clone(), msg_3.clone()),
        (TenantId::from_string("ten_2"), MessageId::from_string("msg_1")),
    ];
    assert!(repo.learned_already(&asked).await.unwrap().is_empty());

    // The second exchange invalidates the fact the first adds, in the same transaction.
    assert_eq!(repo.learn_all(&[moved(), moved_again()]).await.unwrap(), [true, true]);
    let now = t0() + Duration::hours(3);
    let current = repo.on_topic(&tenant, &AgentId::from_string("agt_1"), "home", now, 10).await.unwrap();
    assert_eq!(current.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["mem_berlin"]);
    let porto = repo.get(&tenant, &MemoryId::from_string("mem_porto")).await.unwrap().unwrap();
    assert_eq!(porto.superseded_by, Some(MemoryId::from_string("mem_berlin")));
    let history = repo.history(&tenant, &MemoryId::from_string("mem_porto")).await.unwrap();
    assert_eq!(
        history.iter().map(|v| v.change).collect::<Vec<_>>(),
        [MemoryChange::Added, MemoryChange::Invalidated]
    );

    // Receipts count for their own tenant only; the same pass again changes nothing.
    assert_eq!(repo.learned_already(&asked).await.unwrap(), [msg_1, msg_3]);
    assert_eq!(repo.learn_all(&[moved(), moved_again()]).await.unwrap(), [false, false]);
    let events = EventStore::new(db.clone()).recent(&tenant, 10).await.unwrap();
    let learned: Vec<&str> = events
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| ["evt_learned", "evt_berlin"].contains(id))
        .collect();
    assert_eq!(learned.len(), 2, "each exchange's events once");
    assert!(repo.learn_all(&[]).await.unwrap().is_empty());
}

async fn an_exchange_given_twice_in_one_pass_is_learned_from_once(db: Database) {
    let repo = setup(&db).await;
    repo.insert(&[embedded(lyon(), [1.0, 0.0])], &[]).await.unwrap();
    // Written in one statement on PostgreSQL: the receipt it returns is the first one's.
    assert_eq!(repo.learn_all(&[moved(), moved(), moved_again()]).await.unwrap(), [true, false, true]);
    let tenant = TenantId::from_string("ten_1");
    let history = repo.history(&tenant, &MemoryId::from_string("mem_porto")).await.unwrap();
    assert_eq!(
        history.iter().map(|v| v.change).collect::<Vec<_>>(),
        [MemoryChange::Added, MemoryChange::Invalidated],
        "the fact was added once"
    );
}
