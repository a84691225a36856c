//! Search: the nearest vectors and the best lexical matches, fused and ranked; the lexical
//! terms of a query; and the recall chat uses, which is a search of one agent's memory.

use std::collections::{HashMap, HashSet};

use super::{MemoryError, MemoryService};
use crate::ids::{AgentId, MemoryId, TenantId};
use crate::memory::model::{MemoryEntry, MemoryFilter, MemoryType};
pub use crate::memory::ranking::SearchMode;
use crate::memory::ranking::{Scored, fuse, rank};
use crate::tenancy::{Permission, Principal};

/// A validated search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// The text to find memories for.
    pub text: String,
    /// Which entries are considered.
    pub filter: MemoryFilter,
    /// Results to skip.
    pub skip: usize,
    /// Results to return.
    pub limit: usize,
    /// Whether the returned entries' `access_count` goes up by one (Variant B).
    pub count_access: bool,
    /// Which retrievers to use.
    pub mode: SearchMode,
    /// Results scoring under this are left out (0–1; [`DEFAULT_MIN_SCORE`] unless the request
    /// says otherwise).
    ///
    /// [`DEFAULT_MIN_SCORE`]: crate::memory::ranking::DEFAULT_MIN_SCORE
    pub min_score: f64,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The entry (with its access count after this search).
    pub entry: MemoryEntry,
    /// Its score and the parts it is made of.
    pub ranking: Scored<MemoryId>,
}

/// A page of search results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// How many entries the search ranked (the page is cut from these).
    pub total: usize,
}

/// Words too common to help a lexical search; the vector search sees them anyway.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "to", "us", "was", "we", "were", "what",
    "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Most terms a lexical query uses.
const MAX_TERMS: usize = 32;

/// The terms a lexical search looks for: lower-cased words of letters and digits, without
/// stop words and repeats, at most 32.
pub fn lexical_terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .take(MAX_TERMS)
        .collect()
}

/// A crude stem: a word without its last two letters when it has more than five, so that
/// `colours`/`colour` and `preferred`/`prefer` meet. Only decides whether a lexical match is
/// strong enough (see [`enough_terms`]); the databases' own stemmers rank.
fn stem(word: &str) -> &str {
    let n = word.chars().count();
    if n <= 5 {
        return word;
    }
    word.char_indices().nth(n - 2).map_or(word, |(i, _)| &word[..i])
}

/// How many of `terms` occur in `content`, a term counting when a word of the content and the
/// term share a stem.
pub fn matched_terms(content: &str, terms: &[String]) -> usize {
    let words: Vec<String> = content
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    terms
        .iter()
        .filter(|t| {
            words.iter().any(|w| {
                // Prefixes only between words of three letters or more: "s" of "client's"
                // is no stem of "shade".
                w == *t
                    || (w.chars().count() >= 3
                        && t.chars().count() >= 3
                        && (w.starts_with(stem(t)) || t.starts_with(stem(w))))
            })
        })
        .count()
}

/// The identifiers a query names, lower-cased: words of three characters or more that hold a
/// digit and either a letter or a joining `-`, `_`, `.` or `/` (`P-01234`, `INV-2024-007`,
/// `v2.4.1`, `x86_64`). A search matches an identifier whole (see [`lexical_coverage`]).
pub fn identifiers(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in
        text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '\'' | '[' | ']'))
    {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        let joined = word.contains(['-', '_', '.', '/']);
        let is_identifier = word.chars().count() >= 3
            && word.chars().any(|c| c.is_ascii_digit())
            && (joined || word.chars().any(char::is_alphabetic));
        let word = word.to_lowercase();
        if is_identifier && !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// Whether `content` holds `identifier` whole: not inside a longer word or identifier
/// (`P-01234` is not in `P-012345`).
fn holds(content: &str, identifier: &str) -> bool {
    let content = content.to_lowercase();
    let joins = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    content.match_indices(identifier).any(|(at, _)| {
        let before = content[..at].chars().next_back();
        let after = content[at + identifier.len()..].chars().next();
        // A sentence's full stop after an identifier ends it.
        before.is_none_or(|c| !joins(c)) && after.is_none_or(|c| !c.is_alphanumeric() && c != '-' && c != '_')
    })
}

/// How much of a query `content` covers in words, `None` when too little to count (see
/// [`enough_terms`]; in `lexical` mode every match counts). An identifier the query names
/// ([`identifiers`]) is matched whole: content holding one covers the query fully, and the
/// identifier's parts (`p`, `01234`) do not match by themselves, so `P-01235` is no match for
/// `P-01234`.
pub fn lexical_coverage(
    content: &str,
    terms: &[String],
    identifiers: &[String],
    lexical: bool,
) -> Option<f64> {
    if identifiers.iter().any(|id| holds(content, id)) {
        return Some(1.0);
    }
    let parts: Vec<String> = identifiers.iter().flat_map(|id| lexical_terms(id)).collect();
    let words: Vec<String> = terms.iter().filter(|t| !parts.contains(t)).cloned().collect();
    let matched = matched_terms(content, &words);
    let coverage = matched.max(1) as f64 / terms.len().max(1) as f64;
    (lexical || enough_terms(matched, terms.len())).then_some(coverage)
}

/// Whether a lexical match covers enough of the query to count ("minimum should match"): one
/// term of a query of one or two, half of a longer query's terms. A single shared word such as
/// "client" in a question of three says little, and reciprocal rank fusion would otherwise let
/// it outweigh a far closer meaning (with k = 60, first and second place differ by 1.6 %).
pub fn enough_terms(matched: usize, terms: usize) -> bool {
    matched >= if terms <= 2 { 1 } else { terms.div_ceil(2) }
}

impl MemoryService {
    /// Hybrid search: the nearest vectors and the best lexical matches, fused and ranked.
    ///
    /// # Errors
    /// [`MemoryError::AgentNotFound`], [`MemoryError::Forbidden`], [`MemoryError::Embedding`].
    pub async fn search(&self, caller: &Principal, query: SearchQuery) -> Result<SearchResults, MemoryError> {
        caller.require(Permission::MemoryRead)?;
        self.require_agent(&caller.tenant_id, query.filter.agent_id.as_ref()).await?;
        let mut results = self
            .rank(&caller.tenant_id, &query.text, &query.filter, query.skip + query.limit, query.mode)
            .await?;
        results.retain(|hit| hit.ranking.score >= query.min_score);
        let total = results.len();
        let page: Vec<SearchHit> = results.drain(..).skip(query.skip).take(query.limit).collect();
        let mut hits = page;
        if query.count_access && !hits.is_empty() {
            let ids: Vec<MemoryId> = hits.iter().map(|h| h.entry.id.clone()).collect();
            self.deps.memories.touch(&caller.tenant_id, &ids).await?;
            for h in &mut hits {
                h.entry.access_count += 1;
            }
        }
        Ok(SearchResults { hits, total })
    }

    /// Every candidate of a search, ranked.
    async fn rank(
        &self,
        tenant: &TenantId,
        text: &str,
        filter: &MemoryFilter,
        wanted: usize,
        mode: SearchMode,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        let d = &self.deps;
        let now = d.clock.now();
        let n = self.settings.candidates.max(wanted);
        let model = d.embedder.model().id.clone();
        let terms = lexical_terms(text);
        let nearest = if mode == SearchMode::Lexical {
            Vec::new()
        } else {
            let query = d.embedder.embed_query(text).await?;
            d.memories.nearest(tenant, &model, &query, filter, now, n).await?
        };
        let lexical = if terms.is_empty() || mode == SearchMode::Vector {
            Vec::new()
        } else {
            d.memories.lexical(tenant, &terms, filter, now, n).await?
        };
        let mut ids: Vec<MemoryId> = nearest.iter().map(|(id, _)| id.clone()).collect();
        let known: HashSet<&MemoryId> = ids.iter().collect();
        let extra: Vec<MemoryId> = lexical.iter().filter(|id| !known.contains(id)).cloned().collect();
        ids.extend(extra);
        let entries: HashMap<MemoryId, MemoryEntry> = d
            .memories
            .get_many(tenant, &ids)
            .await?
            .into_iter()
            .filter(|e| filter.matches(&e.facets(), now))
            .map(|e| (e.id.clone(), e))
            .collect();
        // Alone, the lexical ranking is what it is (every match counts with what it covers);
        // combined, a match covering too little of the query is left out.
        let named = identifiers(text);
        let lexical: Vec<(MemoryId, f64)> = lexical
            .into_iter()
            .filter_map(|id| {
                let content = &entries.get(&id)?.content;
                let coverage = lexical_coverage(content, &terms, &named, mode == SearchMode::Lexical)?;
                Some((id, coverage))
            })
            .collect();
        let candidates = fuse(&nearest, &lexical, |id| entries.get(id).map(|e| (e.importance, e.updated_at)));
        let mut entries = entries;
        Ok(rank(candidates, mode, &self.settings.ranking, now)
            .into_iter()
            .filter_map(|ranking| {
                entries.remove(&ranking.candidate.id).map(|entry| SearchHit { entry, ranking })
            })
            .collect())
    }

    /// What an agent remembers that bears on a chat message: the contents of its best semantic
    /// and episodic entries, most relevant first, within the recall budget.
    ///
    /// # Errors
    /// [`MemoryError::Embedding`], storage errors.
    pub async fn recall_for(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        message: &str,
    ) -> Result<Vec<String>, MemoryError> {
        let filter = MemoryFilter {
            agent_id: Some(agent.clone()),
            memory_types: vec![MemoryType::Semantic, MemoryType::Episodic],
            ..MemoryFilter::default()
        };
        let d = &self.deps;
        // Most agents remember nothing: no embedding, no search then.
        let model = d.embedder.model().id.clone();
        if d.memories.vector_count(tenant, &model, &filter, d.clock.now()).await? == 0 {
            return Ok(Vec::new());
        }
        // Facts are worded about "the user": asked so too, "where do I live?" finds them.
        let query = crate::memory::learning::rules::in_the_third_person(message);
        let hits = self.rank(tenant, &query, &filter, self.settings.recall_top_k, SearchMode::Hybrid).await?;
        let mut used = 0;
        let mut recalled = Vec::new();
        let relevant = hits.into_iter().filter(|h| h.ranking.score >= self.settings.recall_min_score);
        for hit in relevant.take(self.settings.recall_top_k) {
            let cost = d.tokens.count(&hit.entry.content) + 2;
            if used + cost > self.settings.recall_token_budget {
                continue;
            }
            used += cost;
            recalled.push(hit.entry.content);
        }
        Ok(recalled)
    }
}
