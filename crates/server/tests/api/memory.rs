//! Memory over HTTP: both variants, on both databases, with the real embedding model.

use serde_json::{Value, json};

use crate::helpers::{
    TestApp, json_with_status, model_available, on_both_databases, slow_model, spawn, spawn_with, use_model,
};

async fn agent(app: &TestApp, token: &str, types: Value) -> String {
    let a = app.create_agent(token, json!({"name": "Helper", "memory_types": types})).await;
    a["id"].as_str().unwrap().to_owned()
}

async fn add(app: &TestApp, token: &str, body: Value) -> Value {
    json_with_status(app.post_json_with_token("/api/v1/memory", token, &body).await, 201).await
}

async fn search(app: &TestApp, token: &str, body: Value) -> Vec<Value> {
    let r =
        json_with_status(app.post_json_with_token("/api/v1/memory/search", token, &body).await, 200).await;
    r["results"].as_array().unwrap().clone()
}

const FACTS: &[&str] = &[
    "The customer's favourite colour is teal.",
    "The client's account manager is Priya Raman.",
    "Invoices are sent on the first business day of each month.",
    "The office closes at six in the evening on Fridays.",
    "Maria's flight to Lisbon departs on 14 March at 09:40.",
];

#[tokio::test]
async fn the_meaning_not_the_words_finds_the_memory_on_both_variants_and_databases() {
    if !model_available() {
        return;
    }
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let agent = agent(&app, &token, json!(["semantic"])).await;
            for fact in FACTS {
                add(&app, &token, json!({"agent_id": agent, "content": fact})).await;
                let r = app
                    .post_json_with_token("/api/v1/memory-stores/entries", &token, &json!({"memory_type": "semantic", "key": fact.len().to_string(), "content": fact}))
                    .await;
                assert_eq!(r.status(), 201);
            }
            // No content word in common with the teal memory.
            let hits = search(&app, &token, json!({"agent_id": agent, "query": "which shade does the client prefer?", "top_k": 3})).await;
            assert_eq!(hits[0]["content"], FACTS[0], "{hits:#?}");
            // The default min_score leaves the unrelated facts out, although one shares "client".
            assert_eq!(hits.len(), 1, "{hits:#?}");
            let every = search(&app, &token, json!({"agent_id": agent, "query": "which shade does the client prefer?", "top_k": 3, "min_score": 0})).await;
            assert_eq!(every.len(), 3);
            assert_eq!(every[0]["content"], FACTS[0]);
            assert!(every[0]["score"].as_f64().unwrap() >= 0.34 && every[1]["score"].as_f64().unwrap() < 0.34, "{every:#?}");
            assert!(every.iter().all(|h| (0.0..=1.0).contains(&h["score"].as_f64().unwrap())));
            let semantic = every[0]["explanation"]["semantic"].as_f64().unwrap();
            assert!(semantic > every[1]["explanation"]["semantic"].as_f64().unwrap());
            let hits = search(&app, &token, json!({"agent_id": agent, "query": "what colour does the client like?"})).await;
            assert_eq!(hits[0]["content"], FACTS[0]);
            assert!(hits[0]["explanation"]["similarity"].as_f64().unwrap() > 0.4);

            let r = json_with_status(
                app.post_json_with_token("/api/v1/memory-stores/entries/search", &token, &json!({"memory_type": "semantic", "query": "which shade does the client prefer?", "limit": 2, "min_score": 0})).await,
                200,
            )
            .await;
            assert_eq!(r["entries"][0]["content"], FACTS[0]);
            assert_eq!((r["skip"].as_u64(), r["limit"].as_u64()), (Some(0), Some(2)));
            assert_eq!(r["entries"].as_array().unwrap().len(), 2);
            assert!(r["total"].as_u64().unwrap() >= 2);

            let ready = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
            assert_eq!(ready["embedding"]["provider"], "minilm");
            assert_eq!(ready["embedding"]["dimension"], 384);
        },
    )
    .await;
}

#[tokio::test]
async fn the_hashing_fallback_still_serves_and_says_so() {
    let app = spawn_with(|c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing).await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token, json!([])).await;
    add(&app, &token, json!({"agent_id": agent, "content": "The customer's favourite colour is teal."}))
        .await;
    add(&app, &token, json!({"agent_id": agent, "content": "Invoices go out monthly."})).await;
    let hits = search(&app, &token, json!({"agent_id": agent, "query": "favourite colour"})).await;
    assert_eq!(hits[0]["content"], "The customer's favourite colour is teal.");
    let ready = json_with_status(app.client.get(app.url("/readyz")).send().await.unwrap(), 200).await;
    assert_eq!(ready["embedding"]["provider"], "hashing");
}

#[tokio::test]
async fn a_key_keeps_one_entry_under_concurrent_writes_and_search_counts_access_once() {
    on_both_databases(
        |c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing,
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let writes = (0..20).map(|i| {
                let (app, token) = (&app, &token);
                async move {
                    let body = json!({"memory_type": "semantic", "key": "favourite-colour", "content": format!("favourite colour, version {i}"), "tags": [format!("v{i}")]});
                    let r = app.post_json_with_token("/api/v1/memory-stores/entries", token, &body).await;
                    let status = r.status().as_u16();
                    assert!([200, 201].contains(&status), "{status}");
                    (status, r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned())
                }
            });
            let answers = futures_util::future::join_all(writes).await;
            assert_eq!(answers.iter().filter(|(status, _)| *status == 201).count(), 1, "one write created it");
            let ids: std::collections::HashSet<String> = answers.into_iter().map(|(_, id)| id).collect();
            assert_eq!(ids.len(), 1, "every write answered the one entry");
            let id = ids.into_iter().next().unwrap();
            let list = json_with_status(app.get_with_token("/api/v1/memory", &token).await, 200).await;
            assert_eq!(list["total"], 1);

            let body = json!({"memory_type": "semantic", "query": "favourite colour", "limit": 5});
            let r = json_with_status(app.post_json_with_token("/api/v1/memory-stores/entries/search", &token, &body).await, 200).await;
            assert_eq!(r["entries"][0]["id"], id.as_str());
            assert_eq!(r["entries"][0]["key"], "favourite-colour");
            assert_eq!(r["entries"][0]["access_count"], 1);
            let concurrent = (0..5).map(|_| app.post_json_with_token("/api/v1/memory-stores/entries/search", &token, &body));
            for r in futures_util::future::join_all(concurrent).await {
                assert_eq!(r.status(), 200);
            }
            let entry = json_with_status(app.get_with_token(&format!("/api/v1/memory-stores/entries/{id}"), &token).await, 200).await;
            assert_eq!(entry["access_count"], 6, "once per search that returned it");
            // Variant A's search does not count.
            search(&app, &token, json!({"query": "favourite colour"})).await;
            let entry = json_with_status(app.get_with_token(&format!("/api/v1/memory/{id}"), &token).await, 200).await;
            assert_eq!(entry["access_count"], 6);
        },
    )
    .await;
}

#[tokio::test]
async fn documents_are_chunked_searchable_and_deleted_with_their_chunks() {
    on_both_databases(
        |c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing,
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let agent = agent(&app, &token, json!(["semantic"])).await;
            let long: String =
                (0..120).map(|i| format!("Paragraph sentence number {i} about shipping policy. ")).collect();
            let body = json!({"agent_id": agent, "documents": [
                {"title": "Handbook", "content": long, "metadata": {"team": "ops"}},
                {"title": "Refunds", "content": "Refunds are paid within five business days of approval."}
            ]});
            let r = json_with_status(
                app.post_json_with_token("/api/v1/memory/documents", &token, &body).await,
                201,
            )
            .await;
            let docs = r["documents"].as_array().unwrap();
            assert!(docs[0]["chunks"].as_u64().unwrap() >= 3, "{r}");
            assert_eq!(docs[1]["chunks"], 1);
            let refunds = docs[1]["id"].as_str().unwrap().to_owned();
            let hits = search(
                &app,
                &token,
                json!({"agent_id": agent, "query": "when are refunds paid", "top_k": 1}),
            )
            .await;
            assert_eq!(hits[0]["metadata"]["title"], "Refunds");
            let hits = search(
                &app,
                &token,
                json!({"agent_id": agent, "query": "shipping policy", "metadata": {"team": "ops"}}),
            )
            .await;
            assert!(!hits.is_empty() && hits.iter().all(|h| h["metadata"]["title"] == "Handbook"));

            let r = app.delete_with_token(&format!("/api/v1/memory/documents/{refunds}"), &token).await;
            assert_eq!(r.status(), 204);
            let hits = search(
                &app,
                &token,
                json!({"agent_id": agent, "query": "when are refunds paid", "top_k": 100}),
            )
            .await;
            assert!(hits.iter().all(|h| h["metadata"]["title"] != "Refunds"), "{hits:#?}");
            assert_eq!(
                app.delete_with_token(&format!("/api/v1/memory/documents/{refunds}"), &token).await.status(),
                404
            );
        },
    )
    .await;
}

#[tokio::test]
async fn an_expired_entry_never_returns() {
    let app = crate::helpers::spawn_with_clock(|c| {
        c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let r = app
        .post_json_with_token(
            "/api/v1/memory",
            &token,
            &json!({"content": "x", "expires_at": "2020-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(r.status(), 422, "an entry that could never be read is refused");
    let gone =
        add(&app, &token, json!({"content": "the old wifi password is hunter2", "ttl_seconds": 60})).await;
    let kept =
        add(&app, &token, json!({"content": "the new wifi password is swordfish", "ttl_seconds": 3600}))
            .await;
    assert!(kept["expires_at"].is_string());
    assert_eq!(
        search(&app, &token, json!({"query": "old wifi password hunter2", "top_k": 100})).await.len(),
        2
    );
    app.clock().advance(chrono::Duration::seconds(120));
    let hits = search(&app, &token, json!({"query": "old wifi password hunter2", "top_k": 100})).await;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["id"], kept["id"]);
    let id = gone["id"].as_str().unwrap();
    assert_eq!(app.get_with_token(&format!("/api/v1/memory/{id}"), &token).await.status(), 404);
    let list = json_with_status(app.get_with_token("/api/v1/memory", &token).await, 200).await;
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn consolidation_merges_paraphrases_and_announces_it() {
    if !model_available() {
        return;
    }
    on_both_databases(
        |_| {},
        async |app: TestApp| {
            let token = app.access_token("ada@example.com").await;
            let tenant = app.tenant_of(&token).await;
            let agent = agent(&app, &token, json!(["semantic"])).await;
            add(&app, &token, json!({"agent_id": agent, "content": "The customer's favourite colour is teal.", "tags": ["a"], "importance_score": 0.9})).await;
            add(&app, &token, json!({"agent_id": agent, "content": "The customer's favorite color is teal.", "tags": ["b"]})).await;
            add(&app, &token, json!({"agent_id": agent, "content": "Invoices are sent on the first business day of each month."})).await;
            let r = json_with_status(app.post_json_with_token("/api/v1/memory/consolidate", &token, &json!({"agent_id": agent})).await, 200).await;
            assert_eq!((r["examined"].as_u64(), r["merged"].as_u64(), r["kept"].as_u64()), (Some(3), Some(1), Some(1)), "{r}");
            let list = json_with_status(app.get_with_token(&format!("/api/v1/memory?agent_id={agent}"), &token).await, 200).await;
            assert_eq!(list["total"], 2);
            let teal = list["memories"].as_array().unwrap().iter().find(|m| m["content"].as_str().unwrap().contains("teal")).unwrap().clone();
            assert_eq!(teal["content"], "The customer's favourite colour is teal.", "the more important one is kept");
            assert_eq!(teal["tags"], json!(["a", "b"]));
            let events = app.events(&tenant).await;
            let e = events.iter().find(|e| e.event_type().as_str() == "memory.consolidated").expect("memory.consolidated");
            assert_eq!(e.payload.data().unwrap()["merged"], 1);
        },
    )
    .await;
}

#[tokio::test]
async fn chat_replies_are_built_with_the_agents_memories_and_episodes_become_searchable() {
    let model = slow_model("Noted.", (10, 2), std::time::Duration::ZERO).await;
    let uri = model.uri();
    let app = spawn_with(|c| {
        use_model(c, &uri);
        c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token, json!(["semantic", "episodic"])).await;
    add(&app, &token, json!({"agent_id": agent, "content": "The customer's favourite colour is teal."}))
        .await;
    add(&app, &token, json!({"agent_id": agent, "content": "Invoices are sent monthly."})).await;
    let r = app
        .post_json_with_token(
            &format!("/api/v1/agents/{agent}/chat"),
            &token,
            &json!({"message": "Which colour does the customer like best?"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let requests = model.received_requests().await.unwrap();
    let prompt: Value = serde_json::from_slice(&requests[0].body).unwrap();
    let system: Vec<&str> = prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(system.iter().any(|s| s.contains("favourite colour is teal")), "{system:#?}");

    // The exchange itself is now an episodic memory of the agent, once the consumer of the
    // exchange's event has run.
    app.drain().await;
    let hits = search(
        &app,
        &token,
        json!({"agent_id": agent, "memory_type": "episodic", "query": "which colour does the customer like"}),
    )
    .await;
    assert_eq!(hits.len(), 1);
    assert!(hits[0]["content"].as_str().unwrap().contains("Which colour does the customer like best?"));
    assert!(hits[0]["content"].as_str().unwrap().contains("Noted."));

    // Deleting the agent deletes its memory.
    assert_eq!(app.delete_with_token(&format!("/api/v1/agents/{agent}"), &token).await.status(), 204);
    let list = json_with_status(app.get_with_token("/api/v1/memory", &token).await, 200).await;
    assert_eq!(list["total"], 0);
}

#[tokio::test]
async fn the_openai_compatible_endpoint_recalls_the_agents_memory_as_chat_does() {
    let model = slow_model("Biscuit.", (10, 2), std::time::Duration::ZERO).await;
    let uri = model.uri();
    let app = spawn_with(|c| {
        use_model(c, &uri);
        c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing;
    })
    .await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token, json!(["semantic"])).await;
    add(&app, &token, json!({"agent_id": agent, "content": "Ada's dog is called Biscuit."})).await;
    let question = "What is my dog called?";
    let chat = app
        .post_json_with_token(&format!("/api/v1/agents/{agent}/chat"), &token, &json!({"message": question}))
        .await;
    assert_eq!(chat.status(), 200);
    let openai = app
        .post_json_with_token(
            "/api/v1/chat/completions",
            &token,
            &json!({"model": agent, "messages": [{"role": "user", "content": question}]}),
        )
        .await;
    assert_eq!(openai.status(), 200);
    let requests = model.received_requests().await.unwrap();
    // The chats' requests: memory extraction's (after the first chat) are not prompts.
    let prompts: Vec<Vec<(String, String)>> = requests
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|body| body.get("response_format").is_none())
        .map(|body| {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or("").to_owned())
                })
                .collect()
        })
        .collect();
    assert_eq!(prompts.len(), 2);
    // Both routes send the same prompt: instructions, what the agent remembers, the question.
    assert_eq!(prompts[0], prompts[1], "the same recall on both routes");
    assert_eq!(prompts[1][1].0, "system");
    assert!(prompts[1][1].1.contains("Biscuit"), "{:#?}", prompts[1]);
    assert_eq!(prompts[1].last().unwrap(), &("user".to_owned(), question.to_owned()));
}

#[tokio::test]
async fn another_tenants_memory_is_never_seen() {
    let app = spawn_with(|c| c.embedding_provider = agentry_server::config::EmbeddingProvider::Hashing).await;
    let ada = app.access_token("ada@example.com").await;
    let bob = app.access_token("bob@example.com").await;
    let agent = agent(&app, &ada, json!(["semantic"])).await;
    let mem = add(&app, &ada, json!({"agent_id": agent, "content": "Ada's secret plan"})).await;
    let mem_id = mem["id"].as_str().unwrap();
    let entry = json_with_status(
        app.post_json_with_token(
            "/api/v1/memory-stores/entries",
            &ada,
            &json!({"key": "k", "content": "Ada's secret key"}),
        )
        .await,
        201,
    )
    .await;
    let entry_id = entry["id"].as_str().unwrap();
    let docs = json_with_status(app.post_json_with_token("/api/v1/memory/documents", &ada, &json!({"agent_id": agent, "documents": [{"title": "Plan", "content": "Ada's secret document."}]})).await, 201).await;
    let doc_id = docs["documents"][0]["id"].as_str().unwrap();

    for path in [
        format!("/api/v1/memory/{mem_id}"),
        format!("/api/v1/memory-stores/entries/{entry_id}"),
        format!("/api/v1/memory?agent_id={agent}"),
    ] {
        assert_eq!(app.get_with_token(&path, &bob).await.status(), 404, "{path}");
    }
    for path in [
        format!("/api/v1/memory/{mem_id}"),
        format!("/api/v1/memory-stores/entries/{entry_id}"),
        format!("/api/v1/memory/documents/{doc_id}"),
    ] {
        assert_eq!(app.delete_with_token(&path, &bob).await.status(), 404, "{path}");
    }
    for (path, body) in [
        ("/api/v1/memory", json!({"agent_id": agent, "content": "x"})),
        ("/api/v1/memory/search", json!({"agent_id": agent, "query": "secret"})),
        (
            "/api/v1/memory/documents",
            json!({"agent_id": agent, "documents": [{"title": "t", "content": "c"}]}),
        ),
        ("/api/v1/memory/consolidate", json!({"agent_id": agent})),
    ] {
        assert_eq!(app.post_json_with_token(path, &bob, &body).await.status(), 404, "{path}");
    }
    assert!(search(&app, &bob, json!({"query": "Ada's secret"})).await.is_empty());
    let r = json_with_status(
        app.post_json_with_token(
            "/api/v1/memory-stores/entries/search",
            &bob,
            &json!({"query": "Ada's secret"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!((r["entries"].as_array().unwrap().len(), r["total"].as_u64()), (0, Some(0)));
    let list = json_with_status(app.get_with_token("/api/v1/memory", &bob).await, 200).await;
    assert_eq!(list["total"], 0);
    // And Ada's is all still there.
    assert_eq!(app.get_with_token(&format!("/api/v1/memory/{mem_id}"), &ada).await.status(), 200);
}

/// An OpenAI-compatible embeddings server whose vector of a text is made of the text's bytes,
/// so equal texts get equal vectors and the test can read what was sent.
struct TextVectors;

impl wiremock::Respond for TextVectors {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let bytes = text.as_str().unwrap().as_bytes();
                let sum: u32 = bytes.iter().map(|&b| u32::from(b)).sum();
                json!({"index": i, "embedding": [bytes.len(), sum % 97, bytes[0], 1]})
            })
            .collect();
        wiremock::ResponseTemplate::new(200).set_body_json(json!({"data": data}))
    }
}

/// The inputs of each request the embeddings server received, in order.
async fn embedded(server: &wiremock::MockServer) -> Vec<Vec<String>> {
    let requests = server.received_requests().await.unwrap();
    requests
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["input"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
        })
        .collect()
}

#[tokio::test]
async fn a_repeated_search_reaches_the_model_once_unless_the_cache_is_off() {
    for (cache_size, query_calls) in [(10_000, 1), (0, 3)] {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::path("/v1/embeddings"))
            .respond_with(TextVectors)
            .mount(&server)
            .await;
        let app = spawn_with(|c| {
            c.embedding_provider = agentry_server::config::EmbeddingProvider::Openai;
            c.embedding_base_url = server.uri();
            c.embedding_model = "text-vectors".into();
            c.embedding_dimension = 4;
            c.embedding_cache_size = cache_size;
        })
        .await;
        let token = app.access_token("ada@example.com").await;
        let agent = agent(&app, &token, json!(["semantic"])).await;
        // Writes at once: each text reaches the model exactly once, whichever batches it went in.
        let facts: Vec<String> = (0..6).map(|i| format!("Fact number {i} about the client")).collect();
        let writes = facts.iter().map(|fact| add(&app, &token, json!({"agent_id": agent, "content": fact})));
        futures_util::future::join_all(writes).await;
        let mut sent: Vec<String> = embedded(&server).await.concat();
        sent.sort();
        assert_eq!(sent, facts, "cache size {cache_size}");

        let query = json!({"agent_id": agent, "query": "Which fact is about the client?", "mode": "vector", "top_k": 10});
        let first = search(&app, &token, query.clone()).await;
        assert_eq!(first.len(), 6);
        for _ in 0..2 {
            let again = search(&app, &token, query.clone()).await;
            let ids = |hits: &[Value]| hits.iter().map(|h| h["id"].clone()).collect::<Vec<_>>();
            assert_eq!(ids(&again), ids(&first), "the same vector, the same ranking");
        }
        let asked = embedded(&server).await.concat();
        let embedded_query = asked.iter().filter(|t| t.starts_with("Which fact")).count();
        assert_eq!(embedded_query, query_calls, "cache size {cache_size}: {asked:?}");
    }
}

#[tokio::test]
async fn bad_memory_requests_get_validation_errors() {
    let app = spawn().await;
    let token = app.access_token("ada@example.com").await;
    let agent = agent(&app, &token, json!(["semantic"])).await;
    let cases = [
        ("/api/v1/memory", json!({"content": ""}), "content"),
        ("/api/v1/memory", json!({"content": "x".repeat(32_001)}), "content"),
        ("/api/v1/memory", json!({"content": "x", "memory_type": "dreams"}), "memory_type"),
        ("/api/v1/memory", json!({"content": "x", "importance_score": 2}), "importance_score"),
        ("/api/v1/memory-stores/entries", json!({"content": "x", "agent_id": " "}), "agent_id"),
        ("/api/v1/memory", json!({"content": "x", "metadata": [1]}), "metadata"),
        ("/api/v1/memory", json!({"content": "x", "ttl_seconds": 0}), "ttl_seconds"),
        ("/api/v1/memory", json!({"content": "x", "expires_at": "tomorrow"}), "expires_at"),
        ("/api/v1/memory/search", json!({"query": "x", "top_k": 0}), "top_k"),
        ("/api/v1/memory/search", json!({"query": "x", "top_k": 101}), "top_k"),
        ("/api/v1/memory/search", json!({}), "query"),
        ("/api/v1/memory/search", json!({"query": "x", "min_score": 1.5}), "min_score"),
        ("/api/v1/memory/search", json!({"query": "x", "min_score": "high"}), "min_score"),
        ("/api/v1/memory-stores/entries/search", json!({"query": "x", "min_score": -0.1}), "min_score"),
        ("/api/v1/memory-stores/entries/search", json!({"query": "x", "limit": 0}), "limit"),
        ("/api/v1/memory-stores/entries/search", json!({"query": "x", "skip": -1}), "skip"),
        ("/api/v1/memory/documents", json!({"agent_id": agent, "documents": []}), "documents"),
        (
            "/api/v1/memory/documents",
            json!({"agent_id": agent, "documents": [{"title": "t"}]}),
            "documents[0].content",
        ),
        ("/api/v1/memory/consolidate", json!({"agent_id": agent, "threshold": 0.1}), "threshold"),
    ];
    for (path, body, field) in cases {
        let r = json_with_status(app.post_json_with_token(path, &token, &body).await, 422).await;
        assert_eq!(r["error"], "validation_error", "{path} {body}");
        assert!(r["details"].as_array().unwrap().iter().any(|d| d["field"] == field), "{path} {body}: {r}");
    }
    let many: Vec<Value> = (0..101).map(|i| json!({"title": format!("t{i}"), "content": "c"})).collect();
    let r = json_with_status(
        app.post_json_with_token(
            "/api/v1/memory/documents",
            &token,
            &json!({"agent_id": agent, "documents": many}),
        )
        .await,
        422,
    )
    .await;
    assert_eq!(r["details"][0]["field"], "documents");
    // A viewer's key may read but not write.
    let list = app.get_with_token("/api/v1/memory?per_page=0", &token).await;
    assert_eq!(list.status(), 422);
}
