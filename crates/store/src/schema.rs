//! One diesel schema for both backends, in portable column types (see [`crate::types`]).
//! Kept by hand beside the migrations in `migrations/{postgres,sqlite}`.

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    tenants (id) {
        id -> Text,
        name -> Text,
        plan -> Text,
        credits -> BigInt,
        created_at -> UtcTime,
        updated_at -> UtcTime,
        ledger_seq -> BigInt,
        held -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    users (id) {
        id -> Text,
        email -> Text,
        full_name -> Text,
        password_hash -> Text,
        is_active -> Bool,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    memberships (tenant_id, user_id) {
        tenant_id -> Text,
        user_id -> Text,
        role -> Text,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    credit_ledger (id) {
        id -> Text,
        tenant_id -> Text,
        delta -> BigInt,
        balance_after -> BigInt,
        reason -> Text,
        created_at -> UtcTime,
        reference -> Nullable<Text>,
        seq -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    refresh_tokens (id) {
        id -> Text,
        family_id -> Text,
        user_id -> Text,
        token_digest -> Text,
        status -> Text,
        issued_at -> UtcTime,
        expires_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::joinable!(memberships -> tenants (tenant_id));
diesel::joinable!(memberships -> users (user_id));
diesel::joinable!(credit_ledger -> tenants (tenant_id));
diesel::joinable!(refresh_tokens -> users (user_id));

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    api_keys (id) {
        id -> Text,
        user_id -> Text,
        tenant_id -> Text,
        name -> Text,
        key_prefix -> Text,
        key_digest -> Text,
        scopes -> Json,
        created_at -> UtcTime,
        expires_at -> Nullable<UtcTime>,
        last_used_at -> Nullable<UtcTime>,
        revoked_at -> Nullable<UtcTime>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    one_time_tokens (id) {
        id -> Text,
        user_id -> Text,
        purpose -> Text,
        token_digest -> Text,
        created_at -> UtcTime,
        expires_at -> UtcTime,
        used_at -> Nullable<UtcTime>,
    }
}

diesel::table! {
    rate_limit_counters (bucket, window_start) {
        bucket -> Text,
        window_start -> BigInt,
        hits -> BigInt,
        expires_at -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    agents (id) {
        id -> Text,
        tenant_id -> Text,
        name -> Text,
        agent_type -> Text,
        status -> Text,
        description -> Nullable<Text>,
        memory_types -> Json,
        config -> Json,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    chat_sessions (tenant_id, agent_id, id) {
        id -> Text,
        tenant_id -> Text,
        agent_id -> Text,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    chat_messages (id) {
        id -> Text,
        tenant_id -> Text,
        agent_id -> Text,
        session_id -> Text,
        role -> Text,
        content -> Text,
        prompt_tokens -> BigInt,
        completion_tokens -> BigInt,
        created_at -> UtcTime,
        incomplete -> Bool,
        tool_calls -> Nullable<Text>,
        tool_call_id -> Nullable<Text>,
        tool_name -> Nullable<Text>,
        citations -> Nullable<Text>,
        finish_reason -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    credit_holds (id) {
        id -> Text,
        tenant_id -> Text,
        amount -> BigInt,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    purchases (id) {
        id -> Text,
        tenant_id -> Text,
        credits -> BigInt,
        provider -> Text,
        provider_reference -> Text,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    events (id) {
        id -> Text,
        tenant_id -> Text,
        event_type -> Text,
        data -> Json,
        created_at -> UtcTime,
        position -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    memory_blocks (agent_id, label) {
        tenant_id -> Text,
        agent_id -> Text,
        label -> Text,
        value -> Text,
        description -> Nullable<Text>,
        char_limit -> Integer,
        version -> Integer,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    memory_block_history (agent_id, label, version) {
        tenant_id -> Text,
        agent_id -> Text,
        label -> Text,
        version -> Integer,
        value -> Text,
        change -> Text,
        actor -> Text,
        at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    memory_history (memory_id, version) {
        memory_id -> Text,
        tenant_id -> Text,
        version -> Integer,
        content -> Text,
        change -> Text,
        reason -> Nullable<Text>,
        source_message_ids -> Json,
        at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    memory_extractions (tenant_id, message_id) {
        tenant_id -> Text,
        message_id -> Text,
        agent_id -> Text,
        changes -> Integer,
        extracted_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    event_consumers (name) {
        name -> Text,
        after_position -> BigInt,
        after_id -> Text,
        lease_token -> Nullable<Text>,
        lease_owner -> Nullable<Text>,
        lease_until -> Nullable<UtcTime>,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    event_consumer_failures (consumer, event_id) {
        consumer -> Text,
        event_id -> Text,
        tenant_id -> Text,
        attempts -> Integer,
        error -> Text,
        next_attempt_at -> Nullable<UtcTime>,
        failed_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    webhook_subscriptions (id) {
        id -> Text,
        tenant_id -> Text,
        url -> Text,
        events -> Json,
        description -> Nullable<Text>,
        metadata -> Json,
        status -> Text,
        secret_sealed -> Text,
        previous_secret_sealed -> Nullable<Text>,
        previous_secret_until -> Nullable<UtcTime>,
        created_at -> UtcTime,
        updated_at -> UtcTime,
        created_by -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    webhook_deliveries (id) {
        id -> Text,
        tenant_id -> Text,
        subscription_id -> Text,
        event_id -> Text,
        event_type -> Text,
        payload -> Text,
        is_test -> Bool,
        status -> Text,
        attempts -> BigInt,
        next_attempt_at -> Nullable<UtcTime>,
        lease_token -> Nullable<Text>,
        lease_until -> Nullable<UtcTime>,
        lease_owner -> Nullable<Text>,
        response_status -> Nullable<BigInt>,
        response_time_ms -> Nullable<BigInt>,
        error -> Nullable<Text>,
        delivered_at -> Nullable<UtcTime>,
        created_at -> UtcTime,
        updated_at -> UtcTime,
        earlier_attempts -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    webhook_attempts (delivery_id, attempt) {
        delivery_id -> Text,
        attempt -> BigInt,
        tenant_id -> Text,
        started_at -> UtcTime,
        succeeded -> Bool,
        response_status -> Nullable<BigInt>,
        response_time_ms -> BigInt,
        error_kind -> Nullable<Text>,
        error -> Nullable<Text>,
        response_body -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    instances (id) {
        id -> Text,
        started_at -> UtcTime,
        heartbeat_at -> UtcTime,
        fingerprints -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    jobs (id) {
        id -> Text,
        kind -> Text,
        payload -> Json,
        status -> Text,
        attempts -> BigInt,
        run_at -> UtcTime,
        lease_token -> Nullable<Text>,
        lease_until -> Nullable<UtcTime>,
        lease_owner -> Nullable<Text>,
        last_error -> Nullable<Text>,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    memory_documents (id) {
        id -> Text,
        tenant_id -> Text,
        agent_id -> Text,
        title -> Text,
        metadata -> Json,
        chunk_count -> BigInt,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    /// On SQLite also `pk` (the full-text index's row key) and on PostgreSQL `search_vector`
    /// (generated): neither is ever written, and only the lexical search's SQL reads them.
    memory_entries (id) {
        id -> Text,
        tenant_id -> Text,
        agent_id -> Nullable<Text>,
        document_id -> Nullable<Text>,
        memory_type -> Text,
        key -> Nullable<Text>,
        content -> Text,
        source -> Text,
        metadata -> Json,
        tags -> Json,
        importance -> Double,
        access_count -> BigInt,
        created_at -> UtcTime,
        updated_at -> UtcTime,
        expires_at -> Nullable<UtcTime>,
        embedding -> Binary,
        embedding_dim -> Integer,
        embedding_model -> Text,
        seq -> BigInt,
        valid_from -> UtcTime,
        invalid_at -> Nullable<UtcTime>,
        superseded_by -> Nullable<Text>,
        origin -> Text,
        source_message_ids -> Json,
    }
}

diesel::table! {
    memory_scopes (tenant_id) {
        tenant_id -> Text,
        version -> BigInt,
        reset_version -> BigInt,
    }
}

diesel::table! {
    memory_tombstones (tenant_id, seq, entry_id) {
        tenant_id -> Text,
        seq -> BigInt,
        entry_id -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    workflows (id) {
        id -> Text,
        tenant_id -> Text,
        name -> Text,
        description -> Nullable<Text>,
        steps -> Json,
        is_active -> Bool,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    workflow_executions (id) {
        id -> Text,
        tenant_id -> Text,
        workflow_id -> Text,
        status -> Text,
        input -> Json,
        output -> Nullable<Json>,
        error -> Nullable<Text>,
        steps -> Json,
        origin_kind -> Text,
        origin_id -> Nullable<Text>,
        dedup_key -> Nullable<Text>,
        run_as_user_id -> Text,
        run_as_role -> Text,
        lease_token -> Nullable<Text>,
        lease_until -> Nullable<UtcTime>,
        lease_owner -> Nullable<Text>,
        started_at -> UtcTime,
        finished_at -> Nullable<UtcTime>,
        updated_at -> UtcTime,
        claims -> BigInt,
        trigger_details -> Nullable<Json>,
        call_chain -> Json,
        due_at -> UtcTime,
        at_step -> Nullable<Text>,
        step_runs -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    workflow_step_results (execution_id, position) {
        execution_id -> Text,
        position -> Integer,
        step_id -> Text,
        step_type -> Text,
        status -> Text,
        output -> Nullable<Json>,
        error -> Nullable<Text>,
        started_at -> Nullable<UtcTime>,
        finished_at -> Nullable<UtcTime>,
        attempts -> Integer,
        next_run_at -> Nullable<UtcTime>,
        branch -> Nullable<Text>,
        attempt_errors -> Json,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    workflow_triggers (id) {
        id -> Text,
        tenant_id -> Text,
        workflow_id -> Text,
        path -> Text,
        name -> Text,
        allowed_methods -> Json,
        secret_sealed -> Text,
        is_active -> Bool,
        trigger_count -> BigInt,
        run_as_user_id -> Text,
        run_as_role -> Text,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    integrations (id) {
        id -> Text,
        tenant_id -> Text,
        kind -> Text,
        name -> Text,
        workflow_id -> Text,
        signing_secret_sealed -> Text,
        run_as_user_id -> Text,
        run_as_role -> Text,
        created_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    workflow_schedules (id) {
        id -> Text,
        tenant_id -> Text,
        workflow_id -> Text,
        cron -> Text,
        timezone -> Text,
        input -> Json,
        is_active -> Bool,
        run_as_user_id -> Text,
        run_as_role -> Text,
        next_run_at -> Nullable<UtcTime>,
        last_run_at -> Nullable<UtcTime>,
        missed_count -> BigInt,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::UtcTime;

    invitations (id) {
        id -> Text,
        tenant_id -> Text,
        email -> Text,
        role -> Text,
        invited_by -> Text,
        token_digest -> Nullable<Text>,
        created_at -> UtcTime,
        expires_at -> UtcTime,
        accepted_at -> Nullable<UtcTime>,
        accepted_by -> Nullable<Text>,
        revoked_at -> Nullable<UtcTime>,
    }
}

diesel::joinable!(event_consumer_failures -> events (event_id));
diesel::joinable!(memory_history -> memory_entries (memory_id));
diesel::joinable!(invitations -> tenants (tenant_id));
diesel::joinable!(invitations -> users (invited_by));
diesel::joinable!(api_keys -> users (user_id));
diesel::joinable!(api_keys -> tenants (tenant_id));
diesel::joinable!(one_time_tokens -> users (user_id));

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::{Json, UtcTime};

    mcp_servers (id) {
        id -> Text,
        tenant_id -> Text,
        name -> Text,
        url -> Text,
        headers_sealed -> Text,
        header_names -> Json,
        allowed_tools -> Nullable<Json>,
        timeout_seconds -> Integer,
        status -> Text,
        error -> Nullable<Text>,
        tools -> Json,
        checked_at -> Nullable<UtcTime>,
        created_at -> UtcTime,
        updated_at -> UtcTime,
    }
}

mod knowledge;

pub use self::knowledge::{knowledge_bases, knowledge_chunks, knowledge_file_parts, knowledge_files};

diesel::allow_tables_to_appear_in_same_query!(
    tenants,
    instances,
    workflows,
    workflow_executions,
    workflow_step_results,
    users,
    memberships,
    credit_ledger,
    refresh_tokens,
    api_keys,
    one_time_tokens,
    rate_limit_counters,
    agents,
    chat_sessions,
    chat_messages,
    credit_holds,
    purchases,
    events,
    event_consumers,
    event_consumer_failures,
    jobs,
    memory_documents,
    memory_entries,
    memory_scopes,
    memory_tombstones,
    memory_history,
    memory_extractions,
    memory_blocks,
    memory_block_history,
    webhook_subscriptions,
    webhook_deliveries,
    webhook_attempts,
    workflow_triggers,
    integrations,
    workflow_schedules,
    invitations,
    mcp_servers,
    knowledge_bases,
    knowledge_files,
    knowledge_file_parts,
    knowledge_chunks,
);
