-- Chat sessions are named by the client (`s-1`, `user-42:support`) or by the service
-- (`ses_…`), within one tenant and agent: the same id with another agent is another
-- conversation. The key becomes (tenant_id, agent_id, id).
ALTER TABLE chat_messages DROP CONSTRAINT chat_messages_session_id_fkey;
ALTER TABLE chat_sessions DROP CONSTRAINT chat_sessions_pkey;
ALTER TABLE chat_sessions ADD CONSTRAINT chat_sessions_pkey PRIMARY KEY (tenant_id, agent_id, id);
ALTER TABLE chat_messages ADD CONSTRAINT chat_messages_session_fkey
    FOREIGN KEY (tenant_id, agent_id, session_id)
    REFERENCES chat_sessions (tenant_id, agent_id, id) ON DELETE CASCADE;
DROP INDEX chat_messages_session_idx;
CREATE INDEX chat_messages_session_idx ON chat_messages (tenant_id, agent_id, session_id, id);

-- Durable background work (e-mail today), claimed by workers with a lease.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    kind         TEXT        NOT NULL,
    payload      JSONB       NOT NULL,
    status       TEXT        NOT NULL CHECK (status IN ('queued', 'running', 'failed')),
    attempts     BIGINT      NOT NULL DEFAULT 0,
    run_at       TIMESTAMPTZ NOT NULL,
    lease_token  TEXT,
    lease_until  TIMESTAMPTZ,
    last_error   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX jobs_due_idx ON jobs (status, run_at);
