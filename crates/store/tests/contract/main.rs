//! Contract tests: every repository port, against SQLite always and against PostgreSQL when
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.
//! `AGENTRY_TEST_DATABASE_URL` is set (`AGENTRY_REQUIRE_POSTGRES=1` makes its absence a
//! failure). Each test gets a database of its own: a fresh SQLite file, or a fresh PostgreSQL
//! schema.

mod accounts;
mod agents;
mod api_keys;
mod blocks;
mod chat;
mod consumers;
mod credits;
mod execution_due_times;
mod execution_retries;
mod execution_waits;
mod executions;
mod harness;
mod jobs;
mod knowledge;
mod knowledge_index;
mod learning;
mod leases;
mod mcp_servers;
mod memory;
mod one_time_tokens;
mod rate_limits;
mod refresh_tokens;
mod schedules;
mod signals;
mod team;
mod triggers;
mod webhooks;
mod workflows;
