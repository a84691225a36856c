-- POST /api/v1/agents/{id}/chat with the built-in responder: the five statements the service
-- sends per chat, as its statement log shows them (crates/store/src/accounts.rs: the
-- principal; agents.rs: the agent; memory.rs: the tenant's memory version; credits.rs: the
-- hold; conversations.rs: the exchange, which releases the hold and writes the session, both
-- messages, both events, the settlement and its ledger entry). Run by scripts/bench.sh through
-- pgbench -M prepared, the statements once per benchmark tenant with :bench_user,
-- :bench_family, :bench_tenant and :bench_agent replaced by its ids, each transaction taking
-- the tenants in turn (one `\if` branch per tenant). The new rows' ids are made from a per-client counter
-- (-D run=N -D n=0: unique within a run and across runs on one database), the messages and
-- events are those of the benchmark's chat, and the figures (2 credits wanted, at least 1,
-- 1 charged) those of its reply.
\set n :n + 1
\set id :run * 1000000000000 + :client_id * 1000000000 + :n
\set wanted 2
\set least 1
\set cost 1
\set delta -1
SELECT "memberships"."tenant_id", "tenants"."name", "tenants"."plan", "memberships"."role", "memberships"."created_at" FROM (("memberships" INNER JOIN "tenants" ON ("memberships"."tenant_id" = "tenants"."id")) INNER JOIN "users" ON ("memberships"."user_id" = "users"."id")) WHERE ((("memberships"."user_id" = :bench_user) AND ("users"."is_active" = true)) AND EXISTS (SELECT "refresh_tokens"."id", "refresh_tokens"."family_id", "refresh_tokens"."user_id", "refresh_tokens"."token_digest", "refresh_tokens"."status", "refresh_tokens"."issued_at", "refresh_tokens"."expires_at", "refresh_tokens"."updated_at" FROM "refresh_tokens" WHERE ((("refresh_tokens"."family_id" = :bench_family) AND ("refresh_tokens"."user_id" = :bench_user)) AND ("refresh_tokens"."status" != 'revoked')))) ORDER BY "memberships"."created_at" ASC, "memberships"."tenant_id" ASC;
SELECT "agents"."id", "agents"."tenant_id", "agents"."name", "agents"."agent_type", "agents"."status", "agents"."description", "agents"."memory_types", "agents"."config", "agents"."created_at", "agents"."updated_at" FROM "agents" WHERE (("agents"."tenant_id" = :bench_tenant) AND ("agents"."id" = :bench_agent)) LIMIT 1;
SELECT "memory_scopes"."version", "memory_scopes"."reset_version" FROM "memory_scopes" WHERE ("memory_scopes"."tenant_id" = :bench_tenant) LIMIT 1;
WITH balance AS MATERIALIZED (
    SELECT id, LEAST(:wanted, credits) AS amount FROM tenants WHERE id = :bench_tenant FOR UPDATE
), taken AS (
    UPDATE tenants SET credits = tenants.credits - balance.amount, held = tenants.held + balance.amount
    FROM balance
    WHERE tenants.id = balance.id AND balance.amount >= :least AND balance.amount > 0
    RETURNING balance.amount
)
INSERT INTO credit_holds (id, tenant_id, amount, created_at)
SELECT 'hld_' || :id::text, :bench_tenant, amount, now() FROM taken
RETURNING amount;
WITH released AS (
    DELETE FROM credit_holds WHERE id = 'hld_' || :id::text RETURNING amount
), session AS (
    INSERT INTO chat_sessions (id, tenant_id, agent_id, created_at)
    SELECT 'ses_' || :id::text, :bench_tenant, :bench_agent, now() FROM released WHERE cardinality(ARRAY['msg_' || :id::text || 'u', 'msg_' || :id::text || 'a']) > 0
    ON CONFLICT DO NOTHING
), messages AS (
    INSERT INTO chat_messages
        (id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at, incomplete,
         tool_calls, tool_call_id, tool_name)
    SELECT m.id, :bench_tenant, :bench_agent, 'ses_' || :id::text, m.role, m.content, m.prompt_tokens, m.completion_tokens, m.created_at, m.incomplete,
        m.tool_calls, m.tool_call_id, m.tool_name
    FROM released, unnest(ARRAY['msg_' || :id::text || 'u', 'msg_' || :id::text || 'a'], '{user,assistant}'::text[],
        '{"Hello! What can you tell me about the weather on Mars today?","I am Agentry''s built-in responder: no language model is connected, so I can only reflect what I receive. You said: \"Hello! What can you tell me about the weather on Mars today?\" (14 tokens). This is the first message of our conversation."}'::text[],
        '{0,37}'::bigint[], '{0,55}'::bigint[], ARRAY[now(), now()], '{f,f}'::boolean[], '{NULL,NULL}'::text[], '{NULL,NULL}'::text[], '{NULL,NULL}'::text[])
        AS m (id, role, content, prompt_tokens, completion_tokens, created_at, incomplete, tool_calls, tool_call_id, tool_name)
), outbox AS (
    INSERT INTO events (id, tenant_id, event_type, data, created_at)
    SELECT e.id, :bench_tenant, e.event_type, e.data, e.created_at
    FROM released, unnest(ARRAY['evt_' || :id::text || 'c', 'evt_' || :id::text || 'd'], '{agent.message.created,agent.message.completed}'::text[],
        ARRAY['{"role": "user", "content": "Hello! What can you tell me about the weather on Mars today?", "agent_id": "agt", "message_id": "msg", "conversation_id": "ses"}',
              '{"content": "I am Agentry''s built-in responder: no language model is connected, so I can only reflect what I receive. You said: \"Hello! What can you tell me about the weather on Mars today?\" (14 tokens). This is the first message of our conversation.", "agent_id": "agt", "latency_ms": 1, "message_id": "msg", "tokens_used": 92, "conversation_id": "ses"}']::jsonb[],
        ARRAY[now(), now()]) AS e (id, event_type, data, created_at)
), settled AS (
    UPDATE tenants SET
        credits = tenants.credits + released.amount - :cost,
        held = tenants.held - released.amount,
        ledger_seq = tenants.ledger_seq + 1
    FROM released
    WHERE tenants.id = :bench_tenant
    RETURNING tenants.credits AS available, tenants.credits + tenants.held AS settled, tenants.ledger_seq AS seq
), ledger AS (
    INSERT INTO credit_ledger (id, tenant_id, delta, balance_after, reason, created_at, reference, seq)
    SELECT 'led_' || :id::text, :bench_tenant, :delta, settled.settled, 'chat_usage', now(), 'msg_' || :id::text || 'a', settled.seq FROM settled
)
SELECT available, settled FROM settled;
