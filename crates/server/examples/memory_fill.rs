//! Benchmark helper (`make bench`): fills one agent's memory with `count` entries straight
//! through the store, so that search can be timed over 10,000 and 100,000 entries without
//! embedding them all first. The contents are varied sentences; the vectors are random unit
//! vectors recorded under the model id given, which costs a search exactly what real ones do
//! (the scan compares every vector either way). Queries are embedded by the real model.
//!
//! `cargo run --release --example memory_fill -- DATABASE_URL TENANT_ID AGENT_ID COUNT MODEL_ID DIMENSION`
#![allow(clippy::print_stdout)]

use agentry_domain::ids::{AgentId, MemoryId, TenantId};
use agentry_domain::memory::{
    EmbeddedEntry, Embedding, MemoryEntry, MemoryRepository, MemoryType, normalize,
};
use agentry_store::{Database, DatabaseSettings, MemoryStore};

const WORDS: &[&str] = &[
    "invoice",
    "customer",
    "shipping",
    "refund",
    "colour",
    "meeting",
    "flight",
    "hotel",
    "password",
    "account",
    "manager",
    "project",
    "deadline",
    "budget",
    "report",
    "contract",
    "delivery",
    "warranty",
    "schedule",
    "office",
    "printer",
    "laptop",
    "subscription",
    "discount",
    "policy",
    "holiday",
    "training",
    "support",
    "ticket",
    "server",
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, tenant, agent, count, model, dimension] = args.as_slice() else {
        anyhow::bail!("usage: memory_fill DATABASE_URL TENANT_ID AGENT_ID COUNT MODEL_ID DIMENSION");
    };
    let (count, dimension): (usize, usize) = (count.parse()?, dimension.parse()?);
    let db = Database::connect(&DatabaseSettings::new(url.clone())).await?;
    let store = MemoryStore::new(db, dimension);
    let now = chrono::Utc::now();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*: deterministic, good enough to scatter vectors.
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    // Ids unique across runs, so a second fill adds to the first.
    let run = format!("{:x}", now.timestamp_micros());
    let started = std::time::Instant::now();
    for batch in 0..count.div_ceil(1000) {
        let n = 1000.min(count - batch * 1000);
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let words: Vec<&str> = (0..8).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
            #[allow(clippy::cast_precision_loss)]
            let mut vector: Vec<f32> =
                (0..dimension).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
            normalize(&mut vector);
            entries.push(EmbeddedEntry {
                entry: MemoryEntry {
                    id: MemoryId::from_string(format!("mem_fill{run}_{batch:04}{i:04}")),
                    tenant_id: TenantId::from_string(tenant.clone()),
                    agent_id: Some(AgentId::from_string(agent.clone())),
                    document_id: None,
                    memory_type: MemoryType::Semantic,
                    key: None,
                    content: format!("Note {batch}-{i}: {}.", words.join(" ")),
                    source: "bench".into(),
                    metadata: serde_json::Map::new(),
                    tags: Vec::new(),
                    importance: 0.5,
                    access_count: 0,
                    created_at: now,
                    updated_at: now,
                    expires_at: None,
                    valid_from: now,
                    invalid_at: None,
                    superseded_by: None,
                    origin: agentry_domain::memory::model::MemoryOrigin::Api,
                    source_message_ids: Vec::new(),
                },
                embedding: Embedding { model_id: model.clone(), vector },
            });
        }
        store.insert(&entries, &[]).await?;
    }
    println!("filled {count} entries in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
