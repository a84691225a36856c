-- Events that match a failed or disabled subscription are kept as deliveries in state
-- `skipped`; a recovery or a bulk retry queues them (and failed ones) again with a fresh retry
-- schedule, the attempts made before counted apart so that the log's numbers go on.
--
-- SQLite cannot change a CHECK in place: the deliveries table is rebuilt. The attempts
-- reference it with ON DELETE CASCADE, and dropping it would delete them (the migration runs
-- with foreign keys on, in a transaction where they cannot be turned off): they are set
-- aside first and put back after.
CREATE TABLE webhook_attempts_kept AS SELECT * FROM webhook_attempts;
DROP TABLE webhook_attempts;

CREATE TABLE webhook_deliveries_new (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT    NOT NULL,
    subscription_id   TEXT    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL,
    -- The exact body every attempt sends (the envelope, serialised once).
    payload           TEXT    NOT NULL,
    is_test           INTEGER      NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'skipped')),
    attempts          BIGINT  NOT NULL,
    next_attempt_at   TEXT,
    lease_token       TEXT,
    lease_until       TEXT,
    response_status   BIGINT,
    response_time_ms  BIGINT,
    error             TEXT,
    delivered_at      TEXT,
    created_at        TEXT      NOT NULL,
    updated_at        TEXT      NOT NULL,
    lease_owner       TEXT,
    earlier_attempts  BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO webhook_deliveries_new
        (id, tenant_id, subscription_id, event_id, event_type, payload, is_test, status, attempts,
         next_attempt_at, lease_token, lease_until, response_status, response_time_ms, error,
         delivered_at, created_at, updated_at, lease_owner)
    SELECT id, tenant_id, subscription_id, event_id, event_type, payload, is_test, status, attempts,
           next_attempt_at, lease_token, lease_until, response_status, response_time_ms, error,
           delivered_at, created_at, updated_at, lease_owner
    FROM webhook_deliveries;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_new RENAME TO webhook_deliveries;
-- Fan-out creates one delivery per pair, whoever dispatches: a constraint, not luck.
CREATE UNIQUE INDEX webhook_deliveries_pair_idx ON webhook_deliveries (event_id, subscription_id);
CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (subscription_id, created_at);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- A recovery selects one subscription's deliveries by status since a time.
CREATE INDEX webhook_deliveries_requeue_idx ON webhook_deliveries (subscription_id, status, created_at);

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
INSERT INTO webhook_attempts SELECT * FROM webhook_attempts_kept;
DROP TABLE webhook_attempts_kept;
-- The statistics read a tenant's attempts of the last hours.
CREATE INDEX webhook_attempts_recent_idx ON webhook_attempts (tenant_id, started_at);
