CREATE TABLE chat_messages_old (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    session_id         TEXT        NOT NULL,
    role               TEXT        NOT NULL CHECK (role IN ('user', 'assistant')),
    content            TEXT        NOT NULL,
    prompt_tokens      INTEGER     NOT NULL,
    completion_tokens  INTEGER     NOT NULL,
    created_at         TEXT        NOT NULL,
    incomplete         BOOLEAN     NOT NULL DEFAULT 0,
    FOREIGN KEY (tenant_id, agent_id, session_id)
        REFERENCES chat_sessions (tenant_id, agent_id, id) ON DELETE CASCADE
);
INSERT INTO chat_messages_old
    SELECT id, tenant_id, agent_id, session_id, role, content, prompt_tokens, completion_tokens, created_at, incomplete
    FROM chat_messages WHERE role <> 'tool';
DROP TABLE chat_messages;
ALTER TABLE chat_messages_old RENAME TO chat_messages;
CREATE INDEX chat_messages_session_idx ON chat_messages (tenant_id, agent_id, session_id, id);
