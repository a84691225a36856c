//! The knowledge tables (see `migrations/*/2026-12-07-000001_knowledge`).

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    knowledge_bases (id) {
        id -> Text,
        tenant_id -> Text,
        name -> Text,
        description -> Nullable<Text>,
        chunk_max_tokens -> Integer,
        chunk_overlap_tokens -> Integer,
        index_version -> BigInt,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    knowledge_files (id) {
        id -> Text,
        tenant_id -> Text,
        knowledge_base_id -> Text,
        name -> Text,
        media_type -> Text,
        bytes -> BigInt,
        sha256 -> Text,
        status -> Text,
        error -> Nullable<Text>,
        pages -> Nullable<Integer>,
        chunks -> Integer,
        progress -> Double,
        embedding_model -> Nullable<Text>,
        claims -> BigInt,
        lease_token -> Nullable<Text>,
        lease_until -> Nullable<UtcTime>,
        lease_owner -> Nullable<Text>,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    knowledge_file_parts (file_id, part) {
        file_id -> Text,
        part -> Integer,
        tenant_id -> Text,
        content -> Binary,
        written_at -> Nullable<UtcTime>,
    }
}

diesel::table! {
    /// SQLite's `pk` (the full-text index's row id) and PostgreSQL's generated `search_vector`
    /// are left out: only the search statements, written per backend, read them.
    knowledge_chunks (id) {
        id -> Text,
        tenant_id -> Text,
        knowledge_base_id -> Text,
        file_id -> Text,
        idx -> Integer,
        text -> Text,
        page -> Nullable<Integer>,
        headings -> Text,
        start_char -> BigInt,
        end_char -> BigInt,
        embedding -> Binary,
        embedding_model -> Text,
    }
}

diesel::joinable!(knowledge_files -> knowledge_bases (knowledge_base_id));
diesel::joinable!(knowledge_chunks -> knowledge_files (file_id));
