-- Knowledge bases: files a tenant's agents answer from. A file's record and its original
-- bytes are kept apart: listing files never reads contents, and the bytes are stored in parts
-- of at most 1 MiB, written as an upload streams in and read as a download streams out, so
-- neither holds a whole file in memory on the way.

CREATE TABLE knowledge_bases (
    id                    TEXT PRIMARY KEY,
    tenant_id             TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                  TEXT    NOT NULL,
    description           TEXT,
    chunk_max_tokens      INTEGER NOT NULL CHECK (chunk_max_tokens BETWEEN 64 AND 2048),
    chunk_overlap_tokens  INTEGER NOT NULL CHECK (chunk_overlap_tokens >= 0 AND chunk_overlap_tokens * 2 <= chunk_max_tokens),
    -- Counts changes of the base's chunks (a file indexed or deleted): a process that keeps
    -- the base's vectors in memory reloads them when it differs from what it loaded.
    index_version         BIGINT  NOT NULL DEFAULT 0,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX knowledge_bases_name_idx ON knowledge_bases (tenant_id, name);

CREATE TABLE knowledge_files (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    knowledge_base_id  TEXT    NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    name               TEXT    NOT NULL,
    media_type         TEXT    NOT NULL,
    bytes              BIGINT  NOT NULL CHECK (bytes >= 0),
    sha256             TEXT    NOT NULL,
    status             TEXT    NOT NULL CHECK (status IN ('queued', 'processing', 'indexed', 'failed')),
    error              TEXT,
    pages              INTEGER,
    chunks             INTEGER NOT NULL DEFAULT 0,
    progress           DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    -- The model that embedded its chunks (`agentry knowledge reindex` finds the others).
    embedding_model    TEXT,
    -- The file is its own ingestion's queue item: a worker claims it with a lease.
    claims             BIGINT  NOT NULL DEFAULT 0,
    lease_token        TEXT,
    lease_until        TIMESTAMPTZ,
    lease_owner        TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
-- One file per content in a base: a second upload of the same bytes is the first file, also
-- when both arrive at once.
CREATE UNIQUE INDEX knowledge_files_sha256_idx ON knowledge_files (knowledge_base_id, sha256);
CREATE INDEX knowledge_files_tenant_idx ON knowledge_files (tenant_id, knowledge_base_id, id);
CREATE INDEX knowledge_files_queue_idx ON knowledge_files (status, created_at)
    WHERE status IN ('queued', 'processing');

-- A file's parts are written before its record (the hash that decides a duplicate is known
-- only at the end of the upload), so they refer to the tenant, not to the file; deleting a
-- file or a base deletes them in the same transaction.
CREATE TABLE knowledge_file_parts (
    file_id    TEXT    NOT NULL,
    part       INTEGER NOT NULL CHECK (part >= 0),
    tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    content    BYTEA  NOT NULL,
    PRIMARY KEY (file_id, part)
);
CREATE INDEX knowledge_file_parts_tenant_idx ON knowledge_file_parts (tenant_id);

-- A file's chunks, written with its `indexed` status in one transaction (and replaced whole
-- when it is ingested again), with their embeddings and a full-text index.
CREATE TABLE knowledge_chunks (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    knowledge_base_id  TEXT    NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    file_id            TEXT    NOT NULL REFERENCES knowledge_files (id) ON DELETE CASCADE,
    idx                INTEGER NOT NULL CHECK (idx >= 0),
    text               TEXT    NOT NULL,
    page               INTEGER,
    headings           TEXT    NOT NULL,
    start_char         BIGINT  NOT NULL,
    end_char           BIGINT  NOT NULL,
    -- Little-endian f32 values, unit length, made by `embedding_model`.
    embedding          BYTEA   NOT NULL,
    embedding_model    TEXT    NOT NULL,
    search_vector      TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE UNIQUE INDEX knowledge_chunks_file_idx ON knowledge_chunks (file_id, idx);
CREATE INDEX knowledge_chunks_base_idx ON knowledge_chunks (tenant_id, knowledge_base_id);
CREATE INDEX knowledge_chunks_search_idx ON knowledge_chunks USING GIN (search_vector);
