-- Team members: invitations of an e-mail address into a tenant with a role. The link's token is
-- made when the e-mail is sent and stored only as its SHA-256 digest; an invitation is pending
-- while it is neither accepted nor revoked nor past expires_at.

CREATE TABLE invitations (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email         TEXT        NOT NULL,
    role          TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    invited_by    TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_digest  TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    accepted_at   TIMESTAMPTZ,
    accepted_by   TEXT,
    revoked_at    TIMESTAMPTZ,
    CONSTRAINT invitations_digest_unique UNIQUE (token_digest)
);
CREATE INDEX invitations_tenant_idx ON invitations (tenant_id, email);
