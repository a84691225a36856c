-- Team members: invitations of an e-mail address into a tenant with a role. SQLite twin of the
-- PostgreSQL migration (timestamps as fixed-width RFC 3339 text).

CREATE TABLE invitations (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email         TEXT        NOT NULL,
    role          TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    invited_by    TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_digest  TEXT,
    created_at    TEXT        NOT NULL,
    expires_at    TEXT        NOT NULL,
    accepted_at   TEXT,
    accepted_by   TEXT,
    revoked_at    TEXT,
    CONSTRAINT invitations_digest_unique UNIQUE (token_digest)
);
CREATE INDEX invitations_tenant_idx ON invitations (tenant_id, email);
