//! Agentry's storage adapter: every repository port of `agentry-domain`, over PostgreSQL
//! (`diesel-async`'s `AsyncPgConnection`) or SQLite (diesel's `SqliteConnection` run on the
//! blocking pool), chosen at runtime by the database URL.
//!
//! Queries are written once with diesel's query builder and expanded per backend by the
//! `with_conn!` and `transaction!` macros, so both are type-checked at compile time. Backend
//! differences are kept to the column types in [`types`], the two migration directories, and
//! the statements written as SQL text for one backend's strength: the lease claims
//! (`FOR UPDATE SKIP LOCKED` on PostgreSQL, the single writer on SQLite; `leases.rs`), the
//! chat's hold and exchange in one statement of data-modifying CTEs on PostgreSQL
//! (`credits.rs`, `conversations.rs`), and full-text search (`tsvector` on PostgreSQL, FTS5 on
//! SQLite; `memory.rs`). docs/architecture.md lists them.

#[macro_use]
mod macros;
mod accounts;
mod agents;
mod api_keys;
#[macro_use]
mod automations;
mod blocks;
mod consumers;
mod conversations;
mod credits;
mod database;
mod error;
mod events;
mod executions;
mod insert_all;
mod jobs;
mod knowledge;
mod leases;
mod mcp_servers;
mod memory;
mod one_time_tokens;
mod pool_stats;
mod postgres;
mod rate_limits;
mod refresh_tokens;
mod schedules;
pub mod schema;
mod signals;
pub(crate) mod sqlite;
mod statements;
mod team;
#[cfg(feature = "test-support")]
pub mod test_support;
mod triggers;
pub mod types;
mod vectors;
mod webhooks;
mod workflows;

pub use accounts::AccountStore;
pub use agents::AgentStore;
pub use api_keys::ApiKeyStore;
pub use blocks::MemoryBlockStore;
pub use consumers::ConsumerStore;
pub use conversations::ConversationStore;
pub use credits::CreditStore;
pub use database::{Backend, Database, DatabaseSettings, backend_of, redact};
pub use events::EventStore;
pub use executions::ExecutionStore;
pub use jobs::JobStore;
pub use knowledge::{DbFileStore, KnowledgeStore};
pub use leases::InstanceStore;
pub use mcp_servers::McpServerStore;
pub use memory::MemoryStore;
pub use one_time_tokens::OneTimeTokenStore;
pub use pool_stats::PoolStats;
pub use rate_limits::DbRateCounter;
pub use refresh_tokens::RefreshTokenStore;
pub use schedules::ScheduleStore;
pub use signals::{WorkQueue, WorkSignals};
pub use team::TeamStore;
pub use triggers::{IntegrationStore, TriggerStore};
pub use webhooks::WebhookStore;
pub use workflows::WorkflowStore;
