//! Route handlers, one module per area. Handlers are thin: parse, convert to domain types, call
//! one service method, map the result.

pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod billing;
pub mod health;
pub mod memory;
pub mod pages;
pub mod recovery;
pub mod webhooks;
pub mod workflows;
