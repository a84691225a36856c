-- Workflows: named lists of steps a tenant runs on an input. Steps are stored as validated
-- when saved (the domain's validate_steps), as one JSON array.
CREATE TABLE workflows (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name         TEXT        NOT NULL,
    description  TEXT,
    steps        JSONB       NOT NULL,
    is_active    BOOLEAN     NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX workflows_tenant_idx ON workflows (tenant_id, id);
