//! The [`McpClient`] port of `agentry-domain`: MCP's Streamable HTTP transport through the
//! guarded client, with the official SDK (`rmcp`). A server's URL passes the webhooks' rules
//! first (scheme, no credentials, no private address or loopback name unless allowed, the
//! allow-list); every address it resolves to is checked again when connecting, and no redirect
//! is followed. Each exchange opens a session (`initialize`), makes its request and closes the
//! session, all within the endpoint's deadline.

use std::collections::HashMap;

use agentry_domain::mcp::{McpCallResult, McpClient, McpEndpoint, McpFailure, McpTool};
use agentry_domain::webhooks::WebhookSender as _;
use async_trait::async_trait;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};

use crate::WebhookClient;

/// Largest JSON answer or SSE event read from a server: tool lists and results are bounded
/// (the model reads at most 32 KiB of a result; schemas are small).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

impl WebhookClient {
    /// A session with the server at `endpoint`, opened under the guard.
    async fn mcp_session(
        &self,
        endpoint: &McpEndpoint,
    ) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, McpFailure> {
        self.check_url(&endpoint.url).map_err(McpFailure::Refused)?;
        let mut headers = HashMap::new();
        for (name, value) in &endpoint.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| McpFailure::Transport(format!("header {name}: {e}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| McpFailure::Transport(format!("header {name}: not a valid header value")))?;
            headers.insert(name, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
            .custom_headers(headers)
            .max_json_response_size(MAX_ANSWER_BYTES);
        let transport = StreamableHttpClientTransport::with_client(self.client.http().clone(), config);
        ().serve(transport).await.map_err(|e| McpFailure::Transport(e.to_string()))
    }

    /// Runs `exchange` in a session with the server, closing it after, within the deadline.
    async fn in_session<T, F>(&self, endpoint: &McpEndpoint, exchange: F) -> Result<T, McpFailure>
    where
        F: AsyncFnOnce(&rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Result<T, McpFailure>,
    {
        let work = async {
            let session = self.mcp_session(endpoint).await?;
            let result = exchange(&session).await;
            // Closing ends the session on the server too (an HTTP DELETE with its id).
            if let Err(e) = session.cancel().await {
                tracing::debug!(error = ?e, "closing an MCP session failed");
            }
            result
        };
        tokio::time::timeout(endpoint.timeout, work).await.unwrap_or(Err(McpFailure::TimedOut))
    }
}

#[async_trait]
impl McpClient for WebhookClient {
    async fn list_tools(&self, endpoint: &McpEndpoint) -> Result<Vec<McpTool>, McpFailure> {
        self.in_session(endpoint, async |session| {
            let tools = session.list_all_tools().await.map_err(|e| McpFailure::Transport(e.to_string()))?;
            Ok(tools
                .into_iter()
                .map(|t| McpTool {
                    name: t.name.into_owned(),
                    description: t.description.map(|d| d.into_owned()),
                    input_schema: Value::Object((*t.input_schema).clone()),
                })
                .collect())
        })
        .await
    }

    async fn call_tool(
        &self,
        endpoint: &McpEndpoint,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<McpCallResult, McpFailure> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        self.in_session(endpoint, async |session| {
            let result = session.call_tool(params).await.map_err(|e| McpFailure::Transport(e.to_string()))?;
            let content = match (result.content.is_empty(), result.structured_content) {
                (true, Some(structured)) => structured,
                _ => {
                    serde_json::to_value(&result.content).map_err(|e| McpFailure::Transport(e.to_string()))?
                }
            };
            Ok(McpCallResult { content, is_error: result.is_error.unwrap_or(false) })
        })
        .await
    }
}
