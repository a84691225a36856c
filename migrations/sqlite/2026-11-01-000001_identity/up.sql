-- Tenancy and identity: tenants, users, memberships, the credit ledger, refresh tokens.
-- SQLite twin of the PostgreSQL migration: timestamps are fixed-width RFC 3339 text (they sort
-- as they compare), booleans are 0/1 integers.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT        NOT NULL,
    plan        TEXT        NOT NULL CHECK (plan IN ('starter', 'pro', 'enterprise')),
    -- The balance is the sum of credit_ledger; kept here so a charge is one conditional UPDATE.
    credits     INTEGER      NOT NULL CHECK (credits >= 0),
    created_at  TEXT        NOT NULL,
    updated_at  TEXT        NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    -- Stored normalised (trimmed, lower-case), so a plain unique constraint is case-insensitive.
    email          TEXT        NOT NULL,
    full_name      TEXT        NOT NULL,
    password_hash  TEXT        NOT NULL,
    is_active      INTEGER     NOT NULL,
    created_at     TEXT        NOT NULL,
    updated_at     TEXT        NOT NULL,
    CONSTRAINT users_email_unique UNIQUE (email)
);

CREATE TABLE memberships (
    tenant_id   TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id     TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role        TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at  TEXT        NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id, created_at);

CREATE TABLE credit_ledger (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    delta          INTEGER      NOT NULL,
    balance_after  INTEGER      NOT NULL CHECK (balance_after >= 0),
    reason         TEXT        NOT NULL,
    created_at     TEXT        NOT NULL
);
CREATE INDEX credit_ledger_tenant_idx ON credit_ledger (tenant_id, id);

CREATE TABLE refresh_tokens (
    id            TEXT PRIMARY KEY,
    family_id     TEXT        NOT NULL,
    user_id       TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the token; the token itself is never stored.
    token_digest  TEXT        NOT NULL,
    status        TEXT        NOT NULL CHECK (status IN ('active', 'rotated', 'revoked')),
    issued_at     TEXT        NOT NULL,
    expires_at    TEXT        NOT NULL,
    updated_at    TEXT        NOT NULL,
    CONSTRAINT refresh_tokens_digest_unique UNIQUE (token_digest)
);
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_user_idx ON refresh_tokens (user_id);
