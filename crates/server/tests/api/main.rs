//! API tests: the real application on port 0, spoken to over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

mod agents;
mod api_keys;
mod auth;
mod automations;
mod billing;
mod chat;
mod console;
mod console_ops;
mod console_workflows;
mod durability;
mod errors;
mod executions;
mod hardening;
mod helpers;
mod integrations;
mod limits;
mod mail_budget;
mod memory;
mod metrics;
mod nesting;
mod nul_bodies;
mod openai;
mod operations;
mod probes;
mod processes;
mod recovery;
mod scale_out;
mod schedules;
mod sessions;
mod streaming;
mod teams;
mod tools;
mod triggers;
mod webhooks;
mod workflows;
