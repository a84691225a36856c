-- Agents, conversations, credit holds and purchases, and the event outbox.

ALTER TABLE credit_ledger ADD COLUMN reference TEXT;

CREATE TABLE agents (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          TEXT        NOT NULL,
    agent_type    TEXT        NOT NULL CHECK (agent_type IN ('assistant', 'support', 'custom')),
    status        TEXT        NOT NULL CHECK (status IN ('active', 'paused')),
    description   TEXT,
    memory_types  JSONB       NOT NULL,
    config        JSONB       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX agents_tenant_idx ON agents (tenant_id, id);

CREATE TABLE chat_sessions (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id    TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX chat_sessions_agent_idx ON chat_sessions (agent_id);

CREATE TABLE chat_messages (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT        NOT NULL,
    agent_id           TEXT        NOT NULL,
    session_id         TEXT        NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    role               TEXT        NOT NULL CHECK (role IN ('user', 'assistant')),
    content            TEXT        NOT NULL,
    prompt_tokens      BIGINT      NOT NULL,
    completion_tokens  BIGINT      NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, id);

-- Credits set aside while a chat runs; settled or released when it ends.
CREATE TABLE credit_holds (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    amount      BIGINT      NOT NULL CHECK (amount > 0),
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX credit_holds_created_idx ON credit_holds (created_at);

CREATE TABLE purchases (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    credits             BIGINT      NOT NULL CHECK (credits > 0),
    provider            TEXT        NOT NULL,
    provider_reference  TEXT        NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL
);

-- The outbox: written in the transaction of the change that causes each event.
CREATE TABLE events (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT        NOT NULL,
    event_type  TEXT        NOT NULL,
    data        JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX events_tenant_idx ON events (tenant_id, id);
