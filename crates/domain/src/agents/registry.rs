//! The [`ToolRegistry`]: the tool providers composed, as the chat loop sees them. It asks each
//! provider what it offers an agent (a [`Toolbox`] per chat), routes a model's call to the
//! provider that offered its name, and applies what holds for every kind of tool: the
//! arguments are a JSON object, the caller acts with their role *now* (a demotion or removal
//! applies to a chat already running), and each call is given its tool's timeout (the
//! domain has no timer: a provider gives up with [`ToolError::TimedOut`] once it has passed).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::chat::{ToolCall, ToolSpec};
use super::model::Agent;
use super::providers::{OfferedTool, ToolCallContext, ToolProvider};
use super::tools::ToolError;
use crate::ids::SessionId;
use crate::tenancy::{MemberRoles, NotEntitled, Principal};

/// The providers of every kind of tool (none: an agent's tools are not available).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    providers: Vec<Arc<dyn ToolProvider>>,
    members: Option<Arc<dyn MemberRoles>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry").field("providers", &self.providers.len()).finish_non_exhaustive()
    }
}

/// The tools one chat offers its model, each with the provider that performs it.
#[derive(Clone, Default)]
pub struct Toolbox {
    offered: Vec<(OfferedTool, Arc<dyn ToolProvider>)>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.offered.iter().map(|(t, _)| &t.spec.name)).finish()
    }
}

impl Toolbox {
    /// The tools as the model is told about them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.offered.iter().map(|(t, _)| t.spec.clone()).collect()
    }

    /// Whether a tool of this name is offered.
    pub fn offers(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// The kind of the tool named `name` (`unknown` when none is), for metrics.
    pub fn kind_of(&self, name: &str) -> &'static str {
        self.find(name).map_or("unknown", |(t, _)| t.kind)
    }

    fn find(&self, name: &str) -> Option<&(OfferedTool, Arc<dyn ToolProvider>)> {
        self.offered.iter().find(|(t, _)| t.spec.name == name)
    }
}

impl ToolRegistry {
    /// A registry over no provider; the callers' roles, when given, are read again on every
    /// call.
    pub fn new(members: Option<Arc<dyn MemberRoles>>) -> Self {
        Self { providers: Vec::new(), members }
    }

    /// This registry with one more provider.
    #[must_use]
    pub fn with(&self, provider: Arc<dyn ToolProvider>) -> Self {
        let mut providers = self.providers.clone();
        providers.push(provider);
        Self { providers, members: self.members.clone() }
    }

    /// What `agent` offers its model when `caller` chats with it: every provider's tools, in
    /// the order of the agent's `config.tools`; a name offered twice keeps the first.
    pub async fn toolbox(&self, agent: &Agent, caller: &Principal) -> Toolbox {
        let mut offered = Vec::new();
        for provider in &self.providers {
            offered.extend(provider.offer(agent, caller).await.into_iter().map(|t| (t, provider.clone())));
        }
        offered.sort_by_key(|(t, _)| t.position);
        let mut toolbox = Toolbox::default();
        for (tool, provider) in offered {
            {
                if toolbox.offers(&tool.spec.name) {
                    tracing::warn!(agent_id = %agent.id, tool = %tool.spec.name, "two tools have one name; the first is offered");
                    continue;
                }
                toolbox.offered.push((tool, provider));
            }
        }
        toolbox
    }

    /// Performs a model's `call` with the tool `toolbox` offers under its name, as `caller`
    /// with their current role, with the tool's timeout.
    ///
    /// # Errors
    /// [`ToolError::Unknown`] for a name not offered, [`ToolError::BadArguments`] for
    /// arguments that are not a JSON object, [`ToolError::NotAllowed`] when the caller is no
    /// longer a member, and the provider's own errors.
    pub async fn call(
        &self,
        toolbox: &Toolbox,
        caller: &Principal,
        agent: &Agent,
        session_id: &SessionId,
        call: &ToolCall,
    ) -> Result<Value, ToolError> {
        let (tool, provider) =
            toolbox.find(&call.name).ok_or_else(|| ToolError::Unknown(call.name.clone()))?;
        let arguments = arguments(&call.arguments)?;
        let caller = self.current(caller).await?;
        let context = ToolCallContext { caller: &caller, agent, session_id, timeout: tool.timeout };
        provider.call(context, &call.name, arguments).await
    }

    /// The caller with their role now, never above the one they chat with.
    async fn current(&self, caller: &Principal) -> Result<Principal, ToolError> {
        let Some(members) = &self.members else { return Ok(caller.clone()) };
        let role = match members.role_of(&caller.tenant_id, &caller.user_id).await {
            Ok(Some(role)) => role,
            Ok(None) => {
                return Err(ToolError::NotAllowed(NotEntitled::Gone(caller.user_id.clone()).to_string()));
            }
            Err(e) => {
                return Err(ToolError::Failed(format!("the caller's membership could not be read: {e}")));
            }
        };
        let role = if role.outranks(caller.role) { caller.role } else { role };
        Ok(Principal { role, ..caller.clone() })
    }
}

/// The model's arguments: a JSON object (nothing at all counts as `{}`).
fn arguments(raw: &str) -> Result<Map<String, Value>, ToolError> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(raw) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(_) => Err(ToolError::BadArguments("the arguments must be a JSON object".into())),
        Err(e) => Err(ToolError::BadArguments(format!("the arguments are not JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{TimeZone, Utc};
    use serde_json::json;

    use super::*;
    use crate::agents::providers::MockToolProvider;
    use crate::agents::{AgentConfig, AgentName, AgentStatus, AgentType};
    use crate::ids::{AgentId, TenantId, UserId};
    use crate::tenancy::{Credential, MockMemberRoles, Plan, Role};

    fn admin() -> Principal {
        Principal {
            user_id: UserId::from_string("usr_1"),
            tenant_id: TenantId::from_string("ten_1"),
            plan: Plan::Starter,
            role: Role::Admin,
            credential: Credential::AccessToken,
            chain: Default::default(),
        }
    }

    fn agent() -> Agent {
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        Agent {
            id: AgentId::from_string("agt_1"),
            tenant_id: TenantId::from_string("ten_1"),
            name: AgentName::new("Helper").unwrap(),
            agent_type: AgentType::Support,
            status: AgentStatus::Active,
            description: None,
            memory_types: Vec::new(),
            config: AgentConfig::default(),
            created_at: at,
            updated_at: at,
        }
    }

    fn tool(name: &str, position: usize, seconds: u64) -> OfferedTool {
        OfferedTool {
            spec: ToolSpec {
                name: name.into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            },
            timeout: Duration::from_secs(seconds),
            kind: "test",
            position,
        }
    }

    fn offering(tools: Vec<OfferedTool>) -> MockToolProvider {
        let mut provider = MockToolProvider::new();
        provider.expect_offer().returning(move |_, _| tools.clone());
        provider
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall { id: "call_1".into(), name: name.into(), arguments: arguments.into() }
    }

    fn session() -> SessionId {
        SessionId::parse("ses_1").unwrap()
    }

    #[tokio::test]
    async fn tools_are_offered_in_configured_order_and_a_name_keeps_its_first_tool() {
        let first = offering(vec![tool("b", 1, 5), tool("d", 3, 5)]);
        let second = offering(vec![tool("a", 0, 5), tool("b", 2, 9), tool("c", 2, 5)]);
        let registry = ToolRegistry::new(None).with(Arc::new(first)).with(Arc::new(second));
        let toolbox = registry.toolbox(&agent(), &admin()).await;
        let names: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(toolbox.kind_of("c"), "test");
        assert_eq!(toolbox.kind_of("zz"), "unknown");
    }

    #[tokio::test]
    async fn a_call_reaches_its_provider_with_an_object_the_callers_role_now_and_the_tools_timeout() {
        let mut provider = offering(vec![tool("search", 0, 7)]);
        provider
            .expect_call()
            .withf(|context, name, arguments| {
                name == "search"
                    && context.caller.role == Role::Member
                    && context.timeout == Duration::from_secs(7)
                    && context.agent.id.as_str() == "agt_1"
                    && arguments.get("q") == Some(&json!("tea"))
            })
            .times(1)
            .returning(|_, _, _| Ok(json!({"found": 1})));
        provider
            .expect_call()
            .withf(|_, _, arguments| arguments.is_empty())
            .times(1)
            .returning(|_, _, _| Ok(json!(0)));
        let mut members = MockMemberRoles::new();
        // Demoted to member since the chat began; an owner now would still act as admin.
        members.expect_role_of().times(2).returning(|_, _| Ok(Some(Role::Member)));
        let registry = ToolRegistry::new(Some(Arc::new(members))).with(Arc::new(provider));
        let (agent, caller) = (agent(), admin());
        let toolbox = registry.toolbox(&agent, &caller).await;
        let out =
            registry.call(&toolbox, &caller, &agent, &session(), &call("search", r#"{"q": "tea"}"#)).await;
        assert_eq!(out.unwrap(), json!({"found": 1}));
        let empty = registry.call(&toolbox, &caller, &agent, &session(), &call("search", " ")).await;
        assert_eq!(empty.unwrap(), json!(0), "no arguments at all are an empty object");
    }

    #[tokio::test]
    async fn unknown_tools_bad_arguments_and_former_members_are_refused_before_any_provider() {
        let mut provider = offering(vec![tool("search", 0, 5)]);
        provider.expect_call().never();
        let mut members = MockMemberRoles::new();
        members.expect_role_of().returning(|_, _| Ok(None));
        let registry = ToolRegistry::new(Some(Arc::new(members))).with(Arc::new(provider));
        let (agent, caller) = (agent(), admin());
        let toolbox = registry.toolbox(&agent, &caller).await;
        let refused = |raw: &'static str, name: &'static str| {
            let (registry, toolbox, agent, caller) = (&registry, &toolbox, &agent, &caller);
            async move { registry.call(toolbox, caller, agent, &session(), &call(name, raw)).await.unwrap_err() }
        };
        assert_eq!(refused("{}", "shell").await, ToolError::Unknown("shell".into()));
        assert!(
            matches!(refused("not json", "search").await, ToolError::BadArguments(m) if m.contains("not JSON"))
        );
        assert!(matches!(refused("[1]", "search").await, ToolError::BadArguments(m) if m.contains("object")));
        let gone = refused("{}", "search").await;
        assert!(matches!(&gone, ToolError::NotAllowed(m) if m.contains("no longer a member")), "{gone}");
        assert_eq!(gone.kind(), "not_allowed");
    }
}
