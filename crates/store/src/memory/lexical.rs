//! The lexical side of memory search: full-text matching (FTS5 on SQLite, `tsvector` on
//! PostgreSQL) with common words left out of the ranking, as Lucene's common-terms query does.

use super::*;
use crate::database::DbPool;

/// The words this process found common in a search scope (see [`COMMON_TERM_MATCHES`]), for
/// [`COMMON_TERM_TTL`]. Counting a common word is the expensive case — on PostgreSQL it reads
/// a thousand rows of the word's index entry, 7–10 ms a word over 100k entries — and the
/// verdict hardly changes: a word held by a thousand entries stays common. A rare word is
/// counted each time (a short index entry), so that a word becoming common is seen at once.
/// What a stale verdict changes is only which words rank the lexical side, never what a
/// filter lets through.
#[derive(Debug, Default)]
pub(super) struct CommonTerms {
    seen: Mutex<HashMap<String, Instant>>,
}

/// How long a word found common is taken as such without counting again.
const COMMON_TERM_TTL: Duration = Duration::from_secs(600);
/// Most verdicts kept; past it the oldest half is dropped.
const COMMON_TERM_CAPACITY: usize = 10_000;

impl CommonTerms {
    fn key(tenant: &str, agent: &str, types: &str, term: &str) -> String {
        format!("{tenant}\u{1f}{agent}\u{1f}{types}\u{1f}{term}")
    }

    fn is_common(&self, key: &str) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(key).is_some_and(|at| at.elapsed() < COMMON_TERM_TTL)
    }

    fn remember(&self, key: String) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= COMMON_TERM_CAPACITY {
            let mut ages: Vec<Instant> = seen.values().copied().collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            seen.retain(|_, at| *at > cut);
        }
        seen.insert(key, Instant::now());
    }
}

const SQLITE_LEXICAL: &str = "SELECT e.id AS id FROM memory_fts JOIN memory_entries e ON e.pk = memory_fts.rowid \
     WHERE memory_fts MATCH ?1 AND e.tenant_id = ?2 AND (?3 = '' OR e.agent_id = ?3) \
     AND (e.expires_at IS NULL OR e.expires_at > ?4) AND (?5 = '' OR instr(?5, ',' || e.memory_type || ',') > 0) \
     ORDER BY bm25(memory_fts), e.id LIMIT ?6";

/// Entries of a search's scope from which on a word counts as common in a lexical search.
const COMMON_TERM_MATCHES: i64 = 1000;

/// How many entries of the scope hold a word, counted up to `?6`.
const SQLITE_TERM_COUNT: &str = "SELECT count(*) AS n FROM (SELECT 1 FROM memory_fts \
     JOIN memory_entries e ON e.pk = memory_fts.rowid \
     WHERE memory_fts MATCH ?1 AND e.tenant_id = ?2 AND (?3 = '' OR e.agent_id = ?3) \
     AND (e.expires_at IS NULL OR e.expires_at > ?4) AND (?5 = '' OR instr(?5, ',' || e.memory_type || ',') > 0) \
     LIMIT ?6)";

const PG_TERM_COUNT: &str = "SELECT count(*) AS n FROM (SELECT 1 FROM memory_entries \
     WHERE search_vector @@ to_tsquery('english', $1) AND tenant_id = $2 AND ($3 = '' OR agent_id = $3) \
     AND (expires_at IS NULL OR expires_at > $4) AND ($5 = '' OR strpos($5, ',' || memory_type || ',') > 0) \
     LIMIT $6) s";

const PG_LEXICAL: &str = "SELECT id FROM memory_entries \
     WHERE search_vector @@ to_tsquery('english', $1) AND tenant_id = $2 AND ($3 = '' OR agent_id = $3) \
     AND (expires_at IS NULL OR expires_at > $4) AND ($5 = '' OR strpos($5, ',' || memory_type || ',') > 0) \
     ORDER BY ts_rank_cd(search_vector, to_tsquery('english', $1)) DESC, id LIMIT $6";

/// The word counts and the ranked match planned for their words, not generically as the
/// service's connections plan every other statement (`plan_cache_mode = force_generic_plan`,
/// [`crate::database`]). A generic plan cannot fold `to_tsquery('english', $1)` into a
/// constant, nor see how many entries hold the word: where it scans the table it parses and
/// stems the word again for every row (13.7 ms for a word count over 10k entries against 1.3 ms
/// planned for the word), and for a word a thousand entries hold it reads them all through the
/// index where a scan stops at the thousandth (6.3 ms against 1.4 ms over 100k;
/// `docs/performance.md`).
const PG_CUSTOM_PLANS: &str = "SET LOCAL plan_cache_mode = force_custom_plan";

/// Search terms as each backend's full-text query takes them: FTS5 quoted strings (quoted, a
/// term is never read as an operator); PostgreSQL lexemes (stemmed and stripped of stop words
/// by the `english` configuration), of letters and digits only. Terms left empty are dropped.
pub(crate) fn match_terms(backend: Backend, terms: &[String]) -> Vec<String> {
    match backend {
        Backend::Sqlite => terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect(),
        Backend::Postgres => terms
            .iter()
            .map(|t| t.chars().filter(|c| c.is_alphanumeric()).collect::<String>())
            .filter(|t| !t.is_empty())
            .collect(),
    }
}

impl MemoryStore {
    /// The ids of the entries in `filter` that match `terms`, best first, at most `limit`.
    pub(super) async fn lexical_ids(
        &self,
        tenant: &TenantId,
        terms: &[String],
        filter: &MemoryFilter,
        now: DateTime<Utc>,
        limit: usize,
    ) -> anyhow::Result<Vec<MemoryId>> {
        use diesel::sql_types::{BigInt, Text};

        use crate::types::UtcTime;
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let (sql, count_sql, any, all) = match self.db.backend() {
            Backend::Sqlite => (SQLITE_LEXICAL, SQLITE_TERM_COUNT, " OR ", " AND "),
            Backend::Postgres => (PG_LEXICAL, PG_TERM_COUNT, " | ", " & "),
        };
        let terms = match_terms(self.db.backend(), terms);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let agent = filter.agent_id.as_ref().map(|a| a.to_string()).unwrap_or_default();
        let types = types_list(&filter.memory_types);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Common words (as Lucene's common-terms query treats them): a word found in at least
        // COMMON_TERM_MATCHES entries of the scope carries little weight in bm25, yet ranking
        // it means scoring every one of those entries. The query is any of the rare words;
        // when every word is common, all of them together.
        //
        // The statements run with the words in hand (`$conn` of either backend): the word
        // counts of the words not known to be common, then the ranked match.
        macro_rules! statements {
            ($conn:ident, $common_terms:expr, $tenant:expr, $agent:expr, $types:expr, $terms:expr) => {{
                let mut rare = Vec::with_capacity($terms.len());
                if $terms.len() > 1 {
                    for term in &$terms {
                        let key = CommonTerms::key($tenant, $agent, $types, term);
                        if $common_terms.is_common(&key) {
                            continue;
                        }
                        let counted: Vec<CountRow> = diesel::sql_query(count_sql)
                            .bind::<Text, _>(term)
                            .bind::<Text, _>($tenant)
                            .bind::<Text, _>($agent)
                            .bind::<UtcTime, _>(DbTime(now))
                            .bind::<Text, _>($types)
                            .bind::<BigInt, _>(COMMON_TERM_MATCHES)
                            .load($conn)
                            .await?;
                        if <[CountRow]>::first(&counted).is_none_or(|c| c.n < COMMON_TERM_MATCHES) {
                            rare.push(term.as_str());
                        } else {
                            $common_terms.remember(key);
                        }
                    }
                }
                let matching = if $terms.len() > 1 && rare.is_empty() {
                    $terms.join(all)
                } else if rare.is_empty() {
                    $terms.join(any)
                } else {
                    rare.join(any)
                };
                diesel::sql_query(sql)
                    .bind::<Text, _>(&matching)
                    .bind::<Text, _>($tenant)
                    .bind::<Text, _>($agent)
                    .bind::<UtcTime, _>(DbTime(now))
                    .bind::<Text, _>($types)
                    .bind::<BigInt, _>(limit)
                    .load::<IdRow>($conn)
                    .await
            }};
        }
        let rows: Vec<IdRow> = match &self.db.pool {
            DbPool::Sqlite(_) => with_conn!(self.db, conn => async {
                statements!(conn, self.common_terms, tenant.as_str(), &agent, &types, terms)
            }.await)?,
            // Planned for the words at hand (see PG_CUSTOM_PLANS), in a transaction of its own
            // so that the setting ends with it.
            DbPool::Pg(pools) => {
                let (common_terms, tenant) = (Arc::clone(&self.common_terms), tenant.to_string());
                pg_transaction!(pools, conn => {
                    diesel_async::SimpleAsyncConnection::batch_execute(conn, PG_CUSTOM_PLANS).await?;
                    Ok(statements!(conn, common_terms, &tenant, &agent, &types, terms)?)
                })?
            }
        };
        Ok(rows.into_iter().map(|r| MemoryId::from_string(r.id)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_verdict_is_per_scope_and_the_oldest_half_goes_when_full() {
        let terms = CommonTerms::default();
        let key = CommonTerms::key("ten_1", "agt_1", "", "customer");
        assert!(!terms.is_common(&key));
        terms.remember(key.clone());
        assert!(terms.is_common(&key));
        assert!(!terms.is_common(&CommonTerms::key("ten_1", "agt_2", "", "customer")), "another agent");
        assert!(!terms.is_common(&CommonTerms::key("ten_2", "agt_1", "", "customer")), "another tenant");
        for i in 1..COMMON_TERM_CAPACITY {
            terms.remember(CommonTerms::key("ten_1", "agt_1", "", &format!("w{i}")));
        }
        terms.remember(CommonTerms::key("ten_1", "agt_1", "", "newest"));
        let kept = terms.seen.lock().unwrap_or_else(PoisonError::into_inner).len();
        assert!(kept <= COMMON_TERM_CAPACITY / 2 + 1, "kept {kept}");
        assert!(!terms.is_common(&key), "the oldest verdict was dropped");
        assert!(terms.is_common(&CommonTerms::key("ten_1", "agt_1", "", "newest")));
    }
}
