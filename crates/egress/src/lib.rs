//! Agentry's guarded outbound HTTP client.
//!
//! Tenants choose the URLs Agentry calls (webhook endpoints and workflow `http_request` steps),
//! so every such call is a server-side request forgery risk: a tenant could aim it at
//! `127.0.0.1:5432`, the cloud metadata service at `169.254.169.254`, or anything else on the
//! internal network. [`GuardedClient`] is the one way those calls leave the process:
//!
//! - **No internal targets.** The client resolves host names itself and checks *every* resolved
//!   address with [`forbidden_reason`]; forbidden ones are dropped, and the connector only ever
//!   connects to what the resolver handed back, so a name that resolves to a public address at
//!   validation time and to `127.0.0.1` a moment later (DNS rebinding) gains nothing. Hosts
//!   written as IP literals never reach a resolver, so [`GuardedClient::check_url`] judges them
//!   before anything is sent.
//! - **No redirects.** A `3xx` is handed back as it is: following it would be a second request
//!   to a target nobody checked up front (and a classic way around URL allow-lists).
//! - **Bounded.** One deadline for the whole exchange, connection included, and at most
//!   [`EgressSettings::max_response_bytes`] of the answer is read and kept.
//! - **No proxies.** A proxy would resolve and connect on our behalf, past the guard.
//!
//! [`WebhookClient`] is the domain's `WebhookSender` port over it.
//!
//! `allow_private` lifts the address rule (tests, on-premises installations whose receivers sit
//! on the private network); the other rules stay.

mod address;
mod client;
mod error;
mod mcp;
mod resolver;
mod webhooks;

pub use address::forbidden_reason;
pub use client::{EgressRequest, EgressResponse, EgressSettings, GuardedClient};
pub use error::{EgressError, EgressErrorKind};
/// The HTTP method type [`EgressRequest`] takes, so callers need no direct `reqwest`/`http`
/// dependency.
pub use reqwest::Method;
pub use webhooks::WebhookClient;
