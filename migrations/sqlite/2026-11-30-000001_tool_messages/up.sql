-- Agents call tools: a conversation keeps the assistant's calls (JSON text of
-- [{id, name, arguments}]) and each tool's result as a message of role `tool`. SQLite cannot
-- change a CHECK in place: the table is rebuilt (nothing references it).
CREATE TABLE chat_messages_new (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    session_id         TEXT        NOT NULL,
    role               TEXT        NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content            TEXT        NOT NULL,
    prompt_tokens      INTEGER     NOT NULL,
    completion_tokens  INTEGER     NOT NULL,
    created_at         TEXT        NOT NULL,
    incomplete         BOOLEAN     NOT NULL DEFAULT 0,
    tool_calls         TEXT,
    tool_call_id       TEXT,
    tool_name          TEXT,
    FOREIGN KEY (tenant_id, agent_id, session_id)
        REFERENCES chat_sessions (tenant_id, agent_id, id) ON DELETE CASCADE
);
INSERT INTO chat_messages_new
        (id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at, incomplete)
    SELECT id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at, incomplete
    FROM chat_messages;
DROP TABLE chat_messages;
ALTER TABLE chat_messages_new RENAME TO chat_messages;
CREATE INDEX chat_messages_session_idx ON chat_messages (tenant_id, agent_id, session_id, id);
