-- Memory: entries (with their embeddings and a full-text index), documents, and the
-- per-tenant version that keeps every instance's cache of vectors current.

CREATE TABLE memory_documents (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id     TEXT    NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    title        TEXT    NOT NULL,
    metadata     TEXT    NOT NULL,
    chunk_count  BIGINT  NOT NULL,
    created_at   TEXT    NOT NULL
);
CREATE INDEX memory_documents_tenant_idx ON memory_documents (tenant_id, id);

CREATE TABLE memory_entries (
    -- The full-text index refers to rows by this integer key. An explicit INTEGER PRIMARY
    -- KEY, because VACUUM may renumber an implicit rowid and so detach the index.
    pk               INTEGER PRIMARY KEY,
    id               TEXT    NOT NULL UNIQUE,
    tenant_id        TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    agent_id         TEXT    REFERENCES agents (id) ON DELETE CASCADE,
    document_id      TEXT    REFERENCES memory_documents (id) ON DELETE CASCADE,
    memory_type      TEXT    NOT NULL CHECK (memory_type IN ('semantic', 'episodic', 'procedural')),
    key              TEXT,
    content          TEXT    NOT NULL,
    source           TEXT    NOT NULL,
    metadata         TEXT    NOT NULL,
    tags             TEXT    NOT NULL,
    importance       DOUBLE  NOT NULL CHECK (importance >= 0 AND importance <= 1),
    access_count     BIGINT  NOT NULL DEFAULT 0,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    expires_at       TEXT,
    -- Little-endian f32 values (`embedding_dim` of them), unit length, made by `embedding_model`.
    embedding        BLOB    NOT NULL,
    embedding_dim    INTEGER NOT NULL,
    embedding_model  TEXT    NOT NULL,
    -- The tenant's memory version of the transaction that last wrote the row.
    seq              BIGINT  NOT NULL
);
-- One entry per (memory_type, key) in a tenant; entries without a key never collide (NULLs
-- are distinct), so Variant B's upsert is one INSERT … ON CONFLICT.
CREATE UNIQUE INDEX memory_entries_key_idx ON memory_entries (tenant_id, memory_type, key);
CREATE INDEX memory_entries_agent_idx ON memory_entries (tenant_id, agent_id, id);
CREATE INDEX memory_entries_seq_idx ON memory_entries (tenant_id, seq);
CREATE INDEX memory_entries_document_idx ON memory_entries (document_id);
CREATE INDEX memory_entries_model_idx ON memory_entries (embedding_model);

-- bm25 over the content, kept in step by triggers (which also fire for cascaded deletes).
CREATE VIRTUAL TABLE memory_fts USING fts5 (
    content, content = 'memory_entries', content_rowid = 'pk', tokenize = 'porter unicode61'
);
CREATE TRIGGER memory_entries_fts_insert AFTER INSERT ON memory_entries BEGIN
    INSERT INTO memory_fts (rowid, content) VALUES (new.pk, new.content);
END;
CREATE TRIGGER memory_entries_fts_delete AFTER DELETE ON memory_entries BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.pk, old.content);
END;
CREATE TRIGGER memory_entries_fts_update AFTER UPDATE OF content ON memory_entries BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.pk, old.content);
    INSERT INTO memory_fts (rowid, content) VALUES (new.pk, new.content);
END;

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
