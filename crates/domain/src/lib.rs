#![doc = include_str!("../README.md")]
//!
//! # Layout
//! - [`identity`]: users, passwords, access and refresh tokens, the account service.
//! - [`tenancy`]: tenants, memberships and roles, plans.
//! - [`agents`]: agents, conversations, the model port, chat.
//! - [`billing`]: the credit ledger, holds, purchases.
//! - [`events`]: domain events and their envelope (written to an outbox).
//! - [`pagination`]: page requests; [`patch`]: three-state fields of partial updates.
//! - [`ids`], [`time`], [`secrets`]: identifiers, the clock and randomness, all behind ports so
//!   tests are deterministic.
//! - [`work`]: the durable-work core: the one lease-queue port, the typed kinds of work, the
//!   worker rules (leases, counted claims) and the registry of running instances whose
//!   heartbeats keep their leases held; [`jobs`]: typed background jobs (mail) as one kind.
//! - [`storable`]: the one rule that keeps U+0000 out of both databases.
//! - [`string_enum!`]: enums whose values have one stable name each.
//! - [`tokens`]: the token-counting port chat and memory budget with.
//! - [`memory`]: memory entries, documents, embeddings, hybrid search and its ranking.
//! - [`metrics`]: the names the service reports under.
//! - [`mail`]: the e-mail port; [`ratelimit`]: fixed-window quotas over a counting port.
//! - [`validation`]: the field-level error type every value object reports with; [`decode`]:
//!   reading the API's objects with serde, every refusal at its path.
//! - [`webhooks`]: subscriptions, signed deliveries with retries, the delivery log.
//! - [`workflows`]: workflows, executions and their state machines, step templates, triggers
//!   and integrations.

pub mod agents;
pub mod billing;
pub mod decode;
pub mod events;
pub mod identity;
pub mod ids;
pub mod jobs;
pub mod knowledge;
pub mod mail;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod pagination;
pub mod patch;
pub mod ratelimit;
pub mod secrets;
pub mod storable;
mod string_enum;

pub use string_enum::Named;
pub mod team;
pub mod tenancy;
pub mod time;
pub mod tokens;
pub mod validation;
pub mod webhooks;
pub mod work;
pub mod workflows;
