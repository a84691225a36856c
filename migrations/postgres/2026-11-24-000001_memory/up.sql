-- Memory: entries (with their embeddings and a full-text index), documents, and the
-- per-tenant version that keeps every instance's cache of vectors current.

CREATE TABLE memory_documents (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id     TEXT        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    title        TEXT        NOT NULL,
    metadata     JSONB       NOT NULL,
    chunk_count  BIGINT      NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX memory_documents_tenant_idx ON memory_documents (tenant_id, id);

CREATE TABLE memory_entries (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT             NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id         TEXT             REFERENCES agents (id) ON DELETE CASCADE,
    document_id      TEXT             REFERENCES memory_documents (id) ON DELETE CASCADE,
    memory_type      TEXT             NOT NULL CHECK (memory_type IN ('semantic', 'episodic', 'procedural')),
    key              TEXT,
    content          TEXT             NOT NULL,
    source           TEXT             NOT NULL,
    metadata         JSONB            NOT NULL,
    tags             JSONB            NOT NULL,
    importance       DOUBLE PRECISION NOT NULL CHECK (importance >= 0 AND importance <= 1),
    access_count     BIGINT           NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ      NOT NULL,
    updated_at       TIMESTAMPTZ      NOT NULL,
    expires_at       TIMESTAMPTZ,
    -- Little-endian f32 values (`embedding_dim` of them), unit length, made by `embedding_model`.
    embedding        BYTEA            NOT NULL,
    embedding_dim    INTEGER          NOT NULL,
    embedding_model  TEXT             NOT NULL,
    -- The tenant's memory version of the transaction that last wrote the row.
    seq              BIGINT           NOT NULL,
    search_vector    TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
-- One entry per (memory_type, key) in a tenant; entries without a key never collide (NULLs
-- are distinct), so Variant B's upsert is one INSERT … ON CONFLICT.
CREATE UNIQUE INDEX memory_entries_key_idx ON memory_entries (tenant_id, memory_type, key);
CREATE INDEX memory_entries_agent_idx ON memory_entries (tenant_id, agent_id, id);
CREATE INDEX memory_entries_seq_idx ON memory_entries (tenant_id, seq);
CREATE INDEX memory_entries_document_idx ON memory_entries (document_id);
CREATE INDEX memory_entries_model_idx ON memory_entries (embedding_model);
CREATE INDEX memory_entries_search_idx ON memory_entries USING GIN (search_vector);

-- Advanced in the transaction of every change to a tenant's memory. `reset_version`: the
-- version at which a bulk change (an agent deleted with its memory) asks caches to reload.
CREATE TABLE memory_scopes (
    tenant_id      TEXT   PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    version        BIGINT NOT NULL,
    reset_version  BIGINT NOT NULL DEFAULT 0
);

-- Entries deleted at a version, so that caches drop them without reloading everything.
CREATE TABLE memory_tombstones (
    tenant_id  TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    entry_id   TEXT   NOT NULL,
    PRIMARY KEY (tenant_id, seq, entry_id)
);
