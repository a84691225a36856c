//! MCP, the client side: remote MCP servers a tenant registers (their headers sealed, their
//! tools listed on registration and refresh), and their tools offered to agents through the
//! tool registry ([`McpTools`]). The protocol itself is an adapter's ([`McpClient`]).

mod model;
mod ports;
mod service;
mod tools;

pub use model::{
    DEFAULT_TIMEOUT_SECONDS, MAX_RESULT_BYTES, MAX_SERVER_NAME_CHARS, MAX_TIMEOUT_SECONDS, McpServer,
    McpServerChanges, McpStatus, McpTool, NewMcpServer, allowed_tools, headers, server_name, timeout_seconds,
};
pub use ports::{McpCallResult, McpClient, McpEndpoint, McpFailure, McpServerRepository};
#[cfg(any(test, feature = "mock"))]
pub use ports::{MockMcpClient, MockMcpServerRepository};
pub use service::{McpError, McpServerService, McpServiceDeps, endpoint};
pub use tools::{McpTools, SEPARATOR};

#[cfg(test)]
mod tests;
