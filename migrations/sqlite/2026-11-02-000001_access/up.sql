-- API keys, one-time tokens (password reset, magic link) and rate-limit counters.

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    user_id       TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tenant_id     TEXT        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          TEXT        NOT NULL,
    key_prefix    TEXT        NOT NULL,
    -- SHA-256 of the key; the key itself is shown once and never stored.
    key_digest    TEXT        NOT NULL,
    scopes        TEXT        NOT NULL,
    created_at    TEXT        NOT NULL,
    expires_at    TEXT       ,
    last_used_at  TEXT       ,
    revoked_at    TEXT       ,
    CONSTRAINT api_keys_digest_unique UNIQUE (key_digest)
);
CREATE INDEX api_keys_owner_idx ON api_keys (user_id, tenant_id);

CREATE TABLE one_time_tokens (
    id            TEXT PRIMARY KEY,
    user_id       TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose       TEXT        NOT NULL CHECK (purpose IN ('password_reset', 'magic_link')),
    token_digest  TEXT        NOT NULL,
    created_at    TEXT        NOT NULL,
    expires_at    TEXT        NOT NULL,
    used_at       TEXT       ,
    CONSTRAINT one_time_tokens_digest_unique UNIQUE (token_digest)
);
CREATE INDEX one_time_tokens_user_idx ON one_time_tokens (user_id, purpose, created_at);

-- Fixed-window counters shared by every instance of the service.
CREATE TABLE rate_limit_counters (
    bucket        TEXT   NOT NULL,
    window_start  INTEGER NOT NULL,
    hits          INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
CREATE INDEX rate_limit_counters_expiry_idx ON rate_limit_counters (expires_at);
