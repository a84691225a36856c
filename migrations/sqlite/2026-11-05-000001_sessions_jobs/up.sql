-- Chat sessions are named by the client (`s-1`, `user-42:support`) or by the service
-- (`ses_…`), within one tenant and agent: the same id with another agent is another
-- conversation. The key becomes (tenant_id, agent_id, id). SQLite cannot change a primary
-- key in place: both tables are rebuilt. Messages are copied before the old sessions table is
-- dropped, since dropping it would cascade to them.
CREATE TABLE chat_sessions_new (
    id          TEXT        NOT NULL,
    tenant_id   TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id    TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    created_at  TEXT        NOT NULL,
    PRIMARY KEY (tenant_id, agent_id, id)
);
INSERT INTO chat_sessions_new (id, tenant_id, agent_id, created_at)
    SELECT id, tenant_id, agent_id, created_at FROM chat_sessions;

CREATE TABLE chat_messages_new (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    session_id         TEXT        NOT NULL,
    role               TEXT        NOT NULL CHECK (role IN ('user', 'assistant')),
    content            TEXT        NOT NULL,
    prompt_tokens      INTEGER     NOT NULL,
    completion_tokens  INTEGER     NOT NULL,
    created_at         TEXT        NOT NULL,
    FOREIGN KEY (tenant_id, agent_id, session_id)
        REFERENCES chat_sessions_new (tenant_id, agent_id, id) ON DELETE CASCADE
);
INSERT INTO chat_messages_new
    SELECT id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at
    FROM chat_messages;

DROP TABLE chat_messages;
DROP TABLE chat_sessions;
-- Renaming also rewrites the reference in chat_messages_new.
ALTER TABLE chat_sessions_new RENAME TO chat_sessions;
ALTER TABLE chat_messages_new RENAME TO chat_messages;
CREATE INDEX chat_sessions_agent_idx ON chat_sessions (agent_id);
CREATE INDEX chat_messages_session_idx ON chat_messages (tenant_id, agent_id, session_id, id);

-- Durable background work (e-mail today), claimed by workers with a lease.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    kind         TEXT        NOT NULL,
    payload      TEXT        NOT NULL,
    status       TEXT        NOT NULL CHECK (status IN ('queued', 'running', 'failed')),
    attempts     INTEGER     NOT NULL DEFAULT 0,
    run_at       TEXT        NOT NULL,
    lease_token  TEXT,
    lease_until  TEXT,
    last_error   TEXT,
    created_at   TEXT        NOT NULL,
    updated_at   TEXT        NOT NULL
);
CREATE INDEX jobs_due_idx ON jobs (status, run_at);
