DROP TABLE jobs;
CREATE TABLE chat_sessions_old (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id    TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    created_at  TEXT        NOT NULL
);
INSERT OR IGNORE INTO chat_sessions_old SELECT id, tenant_id, agent_id, created_at FROM chat_sessions;
CREATE TABLE chat_messages_old (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    session_id         TEXT        NOT NULL REFERENCES chat_sessions_old (id) ON DELETE CASCADE,
    role               TEXT        NOT NULL CHECK (role IN ('user', 'assistant')),
    content            TEXT        NOT NULL,
    prompt_tokens      INTEGER     NOT NULL,
    completion_tokens  INTEGER     NOT NULL,
    created_at         TEXT        NOT NULL
);
INSERT INTO chat_messages_old SELECT m.* FROM chat_messages m
    JOIN chat_sessions_old s ON s.id = m.session_id AND s.agent_id = m.agent_id;
DROP TABLE chat_messages;
DROP TABLE chat_sessions;
ALTER TABLE chat_sessions_old RENAME TO chat_sessions;
ALTER TABLE chat_messages_old RENAME TO chat_messages;
CREATE INDEX chat_sessions_agent_idx ON chat_sessions (agent_id);
CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, id);
