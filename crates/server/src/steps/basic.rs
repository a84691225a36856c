//! [`BasicSteps`]: the steps that need neither chat nor executions.

use agentry_domain::knowledge::{KnowledgeQuery, KnowledgeService};
use agentry_domain::memory::model::MemoryOrigin;
use agentry_domain::memory::model::content;
use agentry_domain::memory::ranking::DEFAULT_MIN_SCORE;
use agentry_domain::memory::{MemoryFilter, MemoryService, NewMemory, SearchQuery};
use agentry_domain::tenancy::Principal;
use agentry_domain::webhooks::model::check_url;
use agentry_domain::workflows::outputs::{
    KnowledgeHitOutput, KnowledgeSearchOutput, MemoryEntryOutput, MemoryHit, MemorySearchOutput,
};
use agentry_domain::workflows::{FailureKind, HttpMethod, StepAction, StepFailure};
use agentry_egress::{EgressErrorKind, EgressRequest, EgressResponse, Method, WebhookClient};
use serde_json::{Map, Value, json};

/// Results a `memory_search` or `knowledge_search` step returns when it does not say.
const DEFAULT_TOP_K: usize = 5;

/// Performs the steps that need neither chat nor executions: transforms, memory and the
/// guarded client. Agents' tools of the same kinds run through it too.
#[derive(Clone)]
pub struct BasicSteps {
    memory: MemoryService,
    knowledge: KnowledgeService,
    http: WebhookClient,
    allow_insecure: bool,
}

impl std::fmt::Debug for BasicSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicSteps").finish_non_exhaustive()
    }
}

impl BasicSteps {
    /// Steps over `memory` and `knowledge`; `http` sends `http_request` steps, to `https`
    /// URLs only unless `allow_insecure`.
    pub fn new(
        memory: MemoryService,
        knowledge: KnowledgeService,
        http: WebhookClient,
        allow_insecure: bool,
    ) -> Self {
        Self { memory, knowledge, http, allow_insecure }
    }

    /// Performs a step other than `agent_chat`.
    ///
    /// # Errors
    /// Why it failed.
    pub async fn run(&self, caller: &Principal, action: StepAction) -> Result<Value, StepFailure> {
        let fail = |e: &dyn std::fmt::Display| StepFailure::new(e.to_string());
        match action {
            StepAction::Transform { output } => Ok(output),
            StepAction::AgentChat { .. } => Err(StepFailure::new("agent_chat steps are performed with chat")),
            StepAction::MemorySearch { query, agent_id, memory_type, top_k } => {
                let text = content(&query, "query").map_err(|e| fail(&e))?;
                let query = SearchQuery {
                    text,
                    filter: MemoryFilter {
                        agent_id,
                        memory_types: memory_type.into_iter().collect(),
                        ..MemoryFilter::default()
                    },
                    skip: 0,
                    limit: top_k.map_or(DEFAULT_TOP_K, |k| k as usize),
                    count_access: false,
                    mode: Default::default(),
                    min_score: DEFAULT_MIN_SCORE,
                };
                let results = self.memory.search(caller, query).await.map_err(|e| fail(&e))?;
                to_json(MemorySearchOutput {
                    results: results.hits.into_iter().map(MemoryHit::from).collect(),
                })
            }
            StepAction::KnowledgeSearch { knowledge_base_ids, query, top_k } => {
                let text = content(&query, "query").map_err(|e| fail(&e))?;
                let query = KnowledgeQuery {
                    text,
                    bases: knowledge_base_ids,
                    files: Vec::new(),
                    top_k: top_k.map_or(DEFAULT_TOP_K, |k| k as usize),
                    min_score: None,
                };
                let hits = self.knowledge.search(caller, query).await.map_err(|e| fail(&e))?;
                to_json(KnowledgeSearchOutput {
                    results: hits.into_iter().map(KnowledgeHitOutput::from).collect(),
                })
            }
            StepAction::MemoryAdd { content: text, memory_type, agent_id, metadata } => {
                let text = content(&text, "content").map_err(|e| fail(&e))?;
                let new = NewMemory {
                    agent_id,
                    memory_type,
                    key: None,
                    content: text,
                    source: Some("workflow".to_owned()),
                    metadata,
                    tags: Vec::new(),
                    importance: None,
                    expiry: None,
                    origin: MemoryOrigin::Tool,
                };
                let entry = self.memory.add(caller, new).await.map_err(|e| fail(&e))?;
                to_json(MemoryEntryOutput::from(entry))
            }
            StepAction::HttpRequest { method, url, headers, body } => {
                self.http_request(method, url, headers, body).await
            }
            StepAction::Condition { .. } | StepAction::Wait(_) => {
                Err(StepFailure::new("condition and wait steps are decided by the executor"))
            }
        }
    }

    async fn http_request(
        &self,
        method: HttpMethod,
        url: String,
        headers: std::collections::BTreeMap<String, String>,
        body: Option<Value>,
    ) -> Result<Value, StepFailure> {
        // The webhooks' rule for a URL the service sends to: absolute, https unless allowed,
        // a host, no credentials, no fragment. (Where it may point is the client's guard.)
        let url = check_url(url.trim(), self.allow_insecure)
            .map_err(|e| StepFailure::new(format!("{url:?}: {}", e.message)))?
            .to_string();
        let mut pairs: Vec<(String, String)> = headers.into_iter().collect();
        let has =
            |pairs: &[(String, String)], name: &str| pairs.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        // A string body is sent as it is; anything else as JSON.
        let body = match body {
            None => None,
            Some(Value::String(text)) => {
                if !has(&pairs, "content-type") {
                    pairs.push(("Content-Type".into(), "text/plain; charset=utf-8".into()));
                }
                Some(text.into_bytes())
            }
            Some(value) => {
                if !has(&pairs, "content-type") {
                    pairs.push(("Content-Type".into(), "application/json".into()));
                }
                Some(value.to_string().into_bytes())
            }
        };
        let method = Method::from_bytes(method.as_str().as_bytes())
            .map_err(|e| StepFailure::new(format!("method {method}: {e}")))?;
        let response = self
            .http
            .request(EgressRequest { method, url, headers: pairs, body })
            .await
            .map_err(|e| StepFailure::of(failure_kind(e.kind), e.message))?;
        if response.status >= 500 || response.status == 429 {
            return Err(server_error(&response));
        }
        let mut headers = Map::new();
        for (name, value) in response.headers {
            headers.insert(name.to_ascii_lowercase(), Value::String(value));
        }
        // A JSON answer is parsed, anything else kept as text.
        let text = String::from_utf8_lossy(&response.body).into_owned();
        let body = match serde_json::from_str::<Value>(&text) {
            Ok(parsed) if !response.truncated => parsed,
            _ => Value::String(text),
        };
        Ok(
            json!({ "status": response.status, "headers": headers, "body": body, "truncated": response.truncated }),
        )
    }
}

/// A step's output as JSON.
pub(crate) fn to_json<T: serde::Serialize>(value: T) -> Result<Value, StepFailure> {
    serde_json::to_value(value).map_err(|e| StepFailure::new(format!("the output could not be written: {e}")))
}

/// What kind of step failure an outbound request's failure is: a `retry` policy's `network`
/// covers every failure to get an answer, `timeout` one that took too long.
fn failure_kind(kind: EgressErrorKind) -> FailureKind {
    match kind {
        EgressErrorKind::Dns | EgressErrorKind::Connect | EgressErrorKind::Tls | EgressErrorKind::Body => {
            FailureKind::Network
        }
        EgressErrorKind::Timeout => FailureKind::Timeout,
        EgressErrorKind::InvalidUrl | EgressErrorKind::RefusedAddress | EgressErrorKind::Other => {
            FailureKind::Other
        }
    }
}

/// Most characters of an answer's body a server error quotes.
const QUOTED_BODY_CHARS: usize = 200;

/// The failure of a request the server answered with 5xx or 429 (it could not, or would not
/// yet, serve it): the status and the start of the body, with the wait its `Retry-After` asks.
fn server_error(response: &EgressResponse) -> StepFailure {
    let body: String = String::from_utf8_lossy(&response.body).chars().take(QUOTED_BODY_CHARS).collect();
    let message = if body.trim().is_empty() {
        format!("the server answered {}", response.status)
    } else {
        format!("the server answered {}: {}", response.status, body.trim())
    };
    let failure = StepFailure::of(FailureKind::ServerError, message);
    let asked = response
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| retry_after(value, chrono::Utc::now()));
    match asked {
        Some(wait) => failure.with_retry_after(wait),
        None => failure,
    }
}

/// The wait a `Retry-After` value asks for at `now`: seconds, or an HTTP date (RFC 9110 §10.2.3).
fn retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<std::time::Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(std::time::Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&chrono::Utc) - now).to_std().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_is_read_as_seconds_or_as_a_date() {
        let now =
            chrono::DateTime::parse_from_rfc3339("2015-10-21T07:27:30Z").unwrap().with_timezone(&chrono::Utc);
        assert_eq!(retry_after("120", now), Some(std::time::Duration::from_secs(120)));
        assert_eq!(retry_after(" 0 ", now), Some(std::time::Duration::ZERO));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(std::time::Duration::ZERO),
            "a date past"
        );
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }

    #[test]
    fn failures_to_get_an_answer_are_network_failures_and_refusals_are_not() {
        assert_eq!(failure_kind(EgressErrorKind::Connect), FailureKind::Network);
        assert_eq!(failure_kind(EgressErrorKind::Dns), FailureKind::Network);
        assert_eq!(failure_kind(EgressErrorKind::Timeout), FailureKind::Timeout);
        assert_eq!(failure_kind(EgressErrorKind::RefusedAddress), FailureKind::Other);
    }
}
