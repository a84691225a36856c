-- Outbound webhooks: subscriptions, one delivery per (event, subscription), and each
-- delivery's attempts. The outbox (events) gains the mark of the fan-out.

CREATE TABLE webhook_subscriptions (
    id                      TEXT PRIMARY KEY,
    tenant_id               TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url                     TEXT    NOT NULL,
    -- The names the user listed (types, aliases, '*'), a JSON array.
    events                  TEXT      NOT NULL,
    description             TEXT,
    metadata                TEXT      NOT NULL,
    status                  TEXT    NOT NULL CHECK (status IN ('active', 'failed', 'disabled')),
    -- AES-256-GCM, bound to the row's id: signing needs the secret in clear.
    secret_sealed           TEXT    NOT NULL,
    previous_secret_sealed  TEXT,
    previous_secret_until   TEXT,
    created_at              TEXT      NOT NULL,
    updated_at              TEXT      NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant_idx ON webhook_subscriptions (tenant_id, status);

CREATE TABLE webhook_deliveries (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT    NOT NULL,
    subscription_id   TEXT    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL,
    -- The exact body every attempt sends (the envelope, serialised once).
    payload           TEXT    NOT NULL,
    is_test           INTEGER      NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts          BIGINT  NOT NULL,
    next_attempt_at   TEXT,
    lease_token       TEXT,
    lease_until       TEXT,
    response_status   BIGINT,
    response_time_ms  BIGINT,
    error             TEXT,
    delivered_at      TEXT,
    created_at        TEXT      NOT NULL,
    updated_at        TEXT      NOT NULL
);
-- Fan-out creates one delivery per pair, whoever dispatches: a constraint, not luck.
CREATE UNIQUE INDEX webhook_deliveries_pair_idx ON webhook_deliveries (event_id, subscription_id);
CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (subscription_id, created_at);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
    delivery_id       TEXT    NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt           BIGINT  NOT NULL,
    tenant_id         TEXT    NOT NULL,
    started_at        TEXT      NOT NULL,
    succeeded         INTEGER      NOT NULL,
    response_status   BIGINT,
    response_time_ms  BIGINT  NOT NULL,
    error_kind        TEXT,
    error             TEXT,
    response_body     TEXT,
    PRIMARY KEY (delivery_id, attempt)
);

ALTER TABLE events ADD COLUMN dispatched_at TEXT;
-- Events written before subscriptions existed have no one to go to.
UPDATE events SET dispatched_at = created_at;
CREATE INDEX events_undispatched_idx ON events (id) WHERE dispatched_at IS NULL;
