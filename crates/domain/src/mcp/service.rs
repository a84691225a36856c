//! Registering, reading, changing and refreshing a tenant's MCP servers. Registering or
//! refreshing one lists its tools (`tools/list`) at once; the outcome, failures included, is
//! stored and shown with the server.

use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret as _;

use super::model::{McpServer, McpServerChanges, McpStatus, NewMcpServer};
use super::ports::{McpClient, McpEndpoint, McpServerRepository};
use crate::ids::{IdGenerator, McpServerId};
use crate::tenancy::{Forbidden, Permission, Principal};
use crate::time::Clock;
use crate::validation::ValidationErrors;
use crate::webhooks::SecretCipher;

/// Why an MCP server operation failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The caller lacks the right.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// Invalid input (a name already used is one).
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// No such server in the caller's tenant.
    #[error("no such MCP server")]
    NotFound,
    /// The tenant has a server of this name already.
    #[error("the tenant has an MCP server named {0:?} already")]
    NameTaken(String),
    /// Storage or the cipher failed.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// The ports of the service.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // trait objects
pub struct McpServiceDeps {
    /// The servers.
    pub servers: Arc<dyn McpServerRepository>,
    /// The MCP client.
    pub client: Arc<dyn McpClient>,
    /// Seals the headers.
    pub cipher: Arc<dyn SecretCipher>,
    /// Identifiers.
    pub ids: Arc<dyn IdGenerator>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// The tenants' MCP servers.
#[derive(Clone)]
pub struct McpServerService {
    deps: McpServiceDeps,
    allow_insecure: bool,
}

impl std::fmt::Debug for McpServerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpServerService { .. }")
    }
}

fn name_taken(name: &str) -> McpError {
    McpError::NameTaken(name.to_owned())
}

impl McpServerService {
    /// A service over `deps`; servers' URLs are `https` only unless `allow_insecure` (the
    /// webhooks' setting: a development machine's servers).
    pub fn new(deps: McpServiceDeps, allow_insecure: bool) -> Self {
        Self { deps, allow_insecure }
    }

    /// Checks a server's URL as a webhook's is checked (where it may point is the client's
    /// check, made before each connection).
    fn check_url(&self, url: &str) -> Result<(), McpError> {
        crate::webhooks::model::check_url(url.trim(), self.allow_insecure).map_err(ValidationErrors::one)?;
        Ok(())
    }

    /// Registers a server and lists its tools.
    ///
    /// # Errors
    /// [`McpError::Forbidden`] without `agents:write`; [`McpError::NameTaken`].
    pub async fn create(&self, caller: &Principal, new: NewMcpServer) -> Result<McpServer, McpError> {
        caller.require(Permission::AgentsWrite)?;
        self.check_url(&new.url)?;
        let d = &self.deps;
        let now = d.clock.now();
        let id = McpServerId::generate(d.ids.as_ref());
        let headers = seal(d.cipher.as_ref(), &id, &new.headers)?;
        let mut server = McpServer {
            id,
            tenant_id: caller.tenant_id.clone(),
            name: new.name,
            url: new.url.trim().to_owned(),
            headers,
            header_names: new.headers.iter().map(|(n, _)| n.clone()).collect(),
            allowed_tools: new.allowed_tools,
            timeout_seconds: new.timeout_seconds,
            status: McpStatus::Error,
            error: None,
            tools: Vec::new(),
            checked_at: None,
            created_at: now,
            updated_at: now,
        };
        self.discover(&mut server).await?;
        if d.servers.create(&server).await? { Ok(server) } else { Err(name_taken(&server.name)) }
    }

    /// The tenant's servers.
    ///
    /// # Errors
    /// [`McpError::Forbidden`] without `agents:read`.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<McpServer>, McpError> {
        caller.require(Permission::AgentsRead)?;
        Ok(self.deps.servers.list(&caller.tenant_id).await?)
    }

    /// One of the tenant's servers.
    ///
    /// # Errors
    /// [`McpError::NotFound`] when absent or another tenant's.
    pub async fn get(&self, caller: &Principal, id: &McpServerId) -> Result<McpServer, McpError> {
        caller.require(Permission::AgentsRead)?;
        self.deps.servers.get(&caller.tenant_id, id).await?.ok_or(McpError::NotFound)
    }

    /// Changes a server; a new URL or new headers list its tools again.
    ///
    /// # Errors
    /// [`McpError::NotFound`], [`McpError::Forbidden`], [`McpError::Invalid`].
    pub async fn update(
        &self,
        caller: &Principal,
        id: &McpServerId,
        changes: McpServerChanges,
    ) -> Result<McpServer, McpError> {
        caller.require(Permission::AgentsWrite)?;
        let d = &self.deps;
        let mut server = d.servers.get(&caller.tenant_id, id).await?.ok_or(McpError::NotFound)?;
        let reach_changed = changes.url.is_some() || changes.headers.is_some();
        if let Some(name) = changes.name {
            server.name = name;
        }
        if let Some(url) = changes.url {
            self.check_url(&url)?;
            server.url = url.trim().to_owned();
        }
        if let Some(headers) = changes.headers {
            server.headers = seal(d.cipher.as_ref(), &server.id, &headers)?;
            server.header_names = headers.iter().map(|(n, _)| n.clone()).collect();
        }
        if let Some(allowed) = changes.allowed_tools {
            server.allowed_tools = allowed;
        }
        if let Some(timeout) = changes.timeout_seconds {
            server.timeout_seconds = timeout;
        }
        server.updated_at = d.clock.now();
        if reach_changed {
            self.discover(&mut server).await?;
        }
        self.store(server).await
    }

    /// Lists a server's tools again.
    ///
    /// # Errors
    /// [`McpError::NotFound`], [`McpError::Forbidden`].
    pub async fn refresh(&self, caller: &Principal, id: &McpServerId) -> Result<McpServer, McpError> {
        caller.require(Permission::AgentsWrite)?;
        let mut server = self.deps.servers.get(&caller.tenant_id, id).await?.ok_or(McpError::NotFound)?;
        self.discover(&mut server).await?;
        self.store(server).await
    }

    /// Deletes a server (agents listing it are offered none of its tools).
    ///
    /// # Errors
    /// [`McpError::NotFound`], [`McpError::Forbidden`].
    pub async fn delete(&self, caller: &Principal, id: &McpServerId) -> Result<(), McpError> {
        caller.require(Permission::AgentsWrite)?;
        if self.deps.servers.delete(&caller.tenant_id, id).await? { Ok(()) } else { Err(McpError::NotFound) }
    }

    async fn store(&self, server: McpServer) -> Result<McpServer, McpError> {
        match self.deps.servers.update(&server).await? {
            Some(true) => Ok(server),
            Some(false) => Err(name_taken(&server.name)),
            None => Err(McpError::NotFound),
        }
    }

    /// Lists the server's tools now, recording the outcome (a failure is an outcome, shown).
    async fn discover(&self, server: &mut McpServer) -> Result<(), McpError> {
        let endpoint = endpoint(self.deps.cipher.as_ref(), server)?;
        let listed = self.deps.client.list_tools(&endpoint).await;
        server.checked_at = Some(self.deps.clock.now());
        match listed {
            Ok(tools) => {
                server.status = McpStatus::Ok;
                server.error = None;
                server.tools = tools;
            }
            Err(failure) => {
                server.status = McpStatus::Error;
                server.error = Some(crate::storable::text(failure.to_string()));
                server.tools = Vec::new();
            }
        }
        Ok(())
    }
}

/// The headers sealed as one JSON object, bound to the server's id.
fn seal(
    cipher: &dyn SecretCipher,
    id: &McpServerId,
    headers: &[(String, secrecy::SecretString)],
) -> anyhow::Result<crate::webhooks::SealedSecret> {
    let clear: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.expose_secret())).collect();
    cipher.seal(id.as_str(), &serde_json::to_string(&clear)?)
}

/// How to reach `server`: its URL, its headers opened, its timeout.
///
/// # Errors
/// When the headers cannot be opened (another key).
pub fn endpoint(cipher: &dyn SecretCipher, server: &McpServer) -> anyhow::Result<McpEndpoint> {
    let headers: Vec<(String, String)> =
        serde_json::from_str(&cipher.open(server.id.as_str(), &server.headers)?)?;
    Ok(McpEndpoint {
        url: server.url.clone(),
        headers,
        timeout: Duration::from_secs(u64::from(server.timeout_seconds)),
    })
}
