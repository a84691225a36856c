//! Prepared statements for every query, not only those diesel calls cacheable.
//!
//! diesel keeps a connection's prepared statements in a cache keyed by the query's type, but
//! refuses to cache any `UPDATE`, any upsert and any insert of an optional value: their SQL may
//! differ between two values of one type (a changeset skips `None` fields, an absent value is
//! written `DEFAULT`). Such a query was prepared afresh on every run — on PostgreSQL an extra
//! round trip to parse it and one to close it, for the credit ledger, chat messages and
//! events on every chat. Wrapped in [`CachedBySql`], the same query is cached under its SQL text
//! and bind types instead of its type: two queries share a statement only when their SQL is the
//! same, which is always correct, and the few variants each such query has are each prepared
//! once per connection.

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};

/// A query diesel will not cache by type, to be cached by its SQL text.
pub(crate) struct CachedBySql<T>(pub(crate) T);

impl<T: QueryFragment<DB>, DB: Backend> QueryFragment<DB> for CachedBySql<T> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

/// No type id: the cache key is the SQL text (with the bind types).
impl<T> QueryId for CachedBySql<T> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<T: Query> Query for CachedBySql<T> {
    type SqlType = T::SqlType;
}

/// Whether `query` needs [`CachedBySql`] to be cached at all.
pub(crate) fn uncacheable<T: QueryFragment<DB>, DB: Backend>(query: &T, backend: &DB) -> bool {
    !matches!(query.is_safe_to_cache_prepared(backend), Ok(true))
}
