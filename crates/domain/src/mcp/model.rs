//! Remote MCP servers a tenant registers, and the tools they offer.

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde_json::Value;

use crate::ids::{McpServerId, TenantId};
use crate::validation::{FieldError, FieldErrorKind, TextKind, check_length, check_text};
use crate::webhooks::SealedSecret;

/// Longest name of a server, in characters: it prefixes its tools' names (`<server>__<tool>`),
/// which a model sees and which must stay within 64 characters.
pub const MAX_SERVER_NAME_CHARS: usize = 24;
/// Most headers sent to a server.
pub const MAX_HEADERS: usize = 20;
/// Longest value of a header.
pub const MAX_HEADER_VALUE_CHARS: usize = 4_096;
/// Most names in `allowed_tools`.
pub const MAX_ALLOWED_TOOLS: usize = 64;
/// How long a call may take when the server does not say, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 30;
/// The longest `timeout_seconds`.
pub const MAX_TIMEOUT_SECONDS: u32 = 120;
/// Most bytes of a tool's result given to the model; the rest is cut with a note.
pub const MAX_RESULT_BYTES: usize = 32 * 1024;

crate::string_enum! {
    /// Whether the last discovery (`tools/list`) worked.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum McpStatus {
        /// The tools were listed.
        Ok => "ok",
        /// Listing failed: `error` says why; agents are offered none of its tools.
        Error => "error",
    }
}

/// A tool a server lists. Its name, description and schema are the server's: data, shown as
/// such, never instructions of ours.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct McpTool {
    /// The tool's name on the server.
    pub name: String,
    /// What the server says it does.
    pub description: Option<String>,
    /// Its arguments, as a JSON Schema object.
    pub input_schema: Value,
}

/// A registered MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    /// Its id (`mcp_…`).
    pub id: McpServerId,
    /// The tenant.
    pub tenant_id: TenantId,
    /// Its name, unique in the tenant: `[A-Za-z0-9-]{1,24}`.
    pub name: String,
    /// The Streamable HTTP endpoint.
    pub url: String,
    /// The headers sent with every request, sealed (values are secrets: tokens, keys).
    pub headers: SealedSecret,
    /// The headers' names, shown (their values never are).
    pub header_names: Vec<String>,
    /// The tools agents may use; `None`: all it lists.
    pub allowed_tools: Option<Vec<String>>,
    /// Longest a call may take, 1–120 s.
    pub timeout_seconds: u32,
    /// The last discovery's outcome.
    pub status: McpStatus,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The tools it listed then.
    pub tools: Vec<McpTool>,
    /// When it was last listed.
    pub checked_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl McpServer {
    /// Whether agents may use `tool` of this server.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools.as_ref().is_none_or(|allowed| allowed.iter().any(|a| a == tool))
    }

    /// The tools agents may use now: listed, and allowed.
    pub fn usable_tools(&self) -> impl Iterator<Item = &McpTool> {
        self.tools.iter().filter(|t| self.status == McpStatus::Ok && self.allows(&t.name))
    }
}

/// A server to register, validated.
#[derive(Debug, Clone)]
pub struct NewMcpServer {
    /// Its name.
    pub name: String,
    /// Its endpoint.
    pub url: String,
    /// Headers to send, in clear until sealed.
    pub headers: Vec<(String, SecretString)>,
    /// The tools agents may use.
    pub allowed_tools: Option<Vec<String>>,
    /// Longest a call may take.
    pub timeout_seconds: u32,
}

/// Changes to a server; absent fields stay.
#[derive(Debug, Clone, Default)]
pub struct McpServerChanges {
    /// A new name.
    pub name: Option<String>,
    /// A new endpoint.
    pub url: Option<String>,
    /// New headers (replacing all).
    pub headers: Option<Vec<(String, SecretString)>>,
    /// New allowed tools; `Some(None)`: all.
    pub allowed_tools: Option<Option<Vec<String>>>,
    /// A new timeout.
    pub timeout_seconds: Option<u32>,
}

fn invalid(field: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(field, FieldErrorKind::InvalidValue, message)
}

/// Checks a server's name.
///
/// # Errors
/// A [`FieldError`] naming `name`.
pub fn server_name(raw: &str) -> Result<String, FieldError> {
    // No `_`: `__` separates a server's name from its tool's in what a model sees.
    let ok = (1..=MAX_SERVER_NAME_CHARS).contains(&raw.len())
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(invalid("name", format!("name must be 1–{MAX_SERVER_NAME_CHARS} letters, digits or -")))
    }
}

/// Checks a server's headers: at most [`MAX_HEADERS`], names of header characters, values of
/// printable text.
///
/// # Errors
/// A [`FieldError`] naming the header.
pub fn headers(raw: Vec<(String, String)>) -> Result<Vec<(String, SecretString)>, FieldError> {
    if raw.len() > MAX_HEADERS {
        return Err(invalid("headers", format!("a server has at most {MAX_HEADERS} headers")));
    }
    raw.into_iter()
        .map(|(name, value)| {
            let field = format!("headers.{name}");
            let ok_name = (1..=100).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !ok_name {
                return Err(invalid(&field, "a header name is 1–100 letters, digits, - or _"));
            }
            check_text(&value, &field, TextKind::SingleLine)?;
            check_length(&value, 0, MAX_HEADER_VALUE_CHARS, &field)?;
            Ok((name, SecretString::from(value)))
        })
        .collect()
}

/// Checks `allowed_tools`: at most [`MAX_ALLOWED_TOOLS`] names.
///
/// # Errors
/// A [`FieldError`] naming the entry.
pub fn allowed_tools(raw: Vec<String>) -> Result<Vec<String>, FieldError> {
    if raw.len() > MAX_ALLOWED_TOOLS {
        return Err(invalid(
            "allowed_tools",
            format!("allowed_tools lists at most {MAX_ALLOWED_TOOLS} tools"),
        ));
    }
    for (i, name) in raw.iter().enumerate() {
        let field = format!("allowed_tools[{i}]");
        check_text(name, &field, TextKind::SingleLine)?;
        check_length(name, 1, 128, &field)?;
    }
    Ok(raw)
}

/// Checks `timeout_seconds`: 1–120.
///
/// # Errors
/// A [`FieldError`] naming `timeout_seconds`.
pub fn timeout_seconds(raw: i64) -> Result<u32, FieldError> {
    u32::try_from(raw).ok().filter(|s| (1..=MAX_TIMEOUT_SECONDS).contains(s)).ok_or_else(|| {
        FieldError::new(
            "timeout_seconds",
            FieldErrorKind::OutOfRange,
            format!("timeout_seconds must be from 1 to {MAX_TIMEOUT_SECONDS}"),
        )
    })
}
