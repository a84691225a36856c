//! What the MCP servers need from outside: their storage, and a client that speaks MCP.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::model::{McpServer, McpTool};
use crate::ids::{McpServerId, TenantId};

/// Where and how to reach a server: its endpoint, its headers in clear, the call's deadline.
#[derive(Clone)]
pub struct McpEndpoint {
    /// The Streamable HTTP endpoint.
    pub url: String,
    /// Headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Deadline of the whole exchange (session opened, request, session closed).
    pub timeout: Duration,
}

impl std::fmt::Debug for McpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The headers' values are secrets.
        f.debug_struct("McpEndpoint").field("url", &self.url).finish_non_exhaustive()
    }
}

/// What a `tools/call` gave.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    /// The result's content (MCP content blocks, as JSON), or its structured content.
    pub content: Value,
    /// The server's `isError`: the tool ran and failed.
    pub is_error: bool,
}

/// Why an exchange with a server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpFailure {
    /// The URL or its address is one the service may not contact.
    #[error("not allowed: {0}")]
    Refused(String),
    /// No answer within the deadline.
    #[error("the MCP server did not answer in time")]
    TimedOut,
    /// The connection or the protocol failed.
    #[error("the MCP server failed: {0}")]
    Transport(String),
}

/// Speaks MCP (Streamable HTTP) to a remote server: each exchange opens a session, makes its
/// request and closes the session.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait McpClient: Send + Sync {
    /// The server's tools (`tools/list`, every page).
    async fn list_tools(&self, endpoint: &McpEndpoint) -> Result<Vec<McpTool>, McpFailure>;

    /// Calls one tool (`tools/call`).
    async fn call_tool(
        &self,
        endpoint: &McpEndpoint,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<McpCallResult, McpFailure>;
}

/// The tenants' MCP servers, always within a tenant.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait McpServerRepository: Send + Sync {
    /// Stores a new server; `false` when the tenant has one of that name already.
    async fn create(&self, server: &McpServer) -> anyhow::Result<bool>;

    /// The tenant's server with this id.
    async fn get(&self, tenant: &TenantId, id: &McpServerId) -> anyhow::Result<Option<McpServer>>;

    /// The tenant's servers, oldest first.
    async fn list(&self, tenant: &TenantId) -> anyhow::Result<Vec<McpServer>>;

    /// Replaces the tenant's server: `Some(false)` when another of the tenant's servers has its
    /// name, `None` when there is no such server.
    async fn update(&self, server: &McpServer) -> anyhow::Result<Option<bool>>;

    /// Deletes the tenant's server; `false` when absent.
    async fn delete(&self, tenant: &TenantId, id: &McpServerId) -> anyhow::Result<bool>;
}
