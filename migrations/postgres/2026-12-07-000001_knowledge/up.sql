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
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
-- One file per content in a base: a second upload of the same bytes is the first file, also
-- when both arrive at once.
CREATE UNIQUE INDEX knowledge_files_sha256_idx ON knowledge_files (knowledge_base_id, sha256);
CREATE INDEX knowledge_files_tenant_idx ON knowledge_files (tenant_id, knowledge_base_id, id);

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
