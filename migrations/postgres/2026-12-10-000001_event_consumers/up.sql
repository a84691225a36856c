-- The outbox becomes a stream read by consumers, each from its own cursor (the webhook fan-out,
-- the episodic note of a chat, memory extraction).
--
-- Each event records the id of the transaction that wrote it. A consumer reads only events
-- of transactions older than every transaction still running (pg_snapshot_xmin), in the order
-- (position, id): a transaction that commits later always has a greater id than that horizon,
-- so no event can appear behind a cursor. Events written before this migration keep position 0
-- and are ordered by id, before every later one.
ALTER TABLE events ADD COLUMN position BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ALTER COLUMN position SET DEFAULT (pg_current_xact_id()::text::bigint);
CREATE INDEX events_position_idx ON events (position, id);

CREATE TABLE event_consumers (
    name            TEXT        PRIMARY KEY,
    after_position  BIGINT      NOT NULL,
    after_id        TEXT        NOT NULL,
    lease_token     TEXT,
    lease_owner     TEXT,
    lease_until     TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL
);

-- Events a consumer failed: due again at next_attempt_at, or parked (NULL) after the last
-- attempt, until someone retries them.
CREATE TABLE event_consumer_failures (
    consumer        TEXT        NOT NULL REFERENCES event_consumers (name) ON DELETE CASCADE,
    event_id        TEXT        NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    tenant_id       TEXT        NOT NULL,
    attempts        INTEGER     NOT NULL,
    error           TEXT        NOT NULL,
    next_attempt_at TIMESTAMPTZ,
    failed_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX event_consumer_failures_due_idx ON event_consumer_failures (consumer, next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;

-- The fan-out continues after the last event before the first it had not dispatched (the
-- deliveries it makes are keyed by event and subscription, so an event seen twice makes one).
INSERT INTO event_consumers (name, after_position, after_id, updated_at)
SELECT 'webhook_fanout', 0, COALESCE(
    CASE WHEN EXISTS (SELECT 1 FROM events WHERE dispatched_at IS NULL)
         THEN (SELECT MAX(id) FROM events WHERE id < (SELECT MIN(id) FROM events WHERE dispatched_at IS NULL))
         ELSE (SELECT MAX(id) FROM events) END, ''), now();
-- The memory consumers begin with what happens from now on.
INSERT INTO event_consumers (name, after_position, after_id, updated_at)
SELECT name, 0, COALESCE((SELECT MAX(id) FROM events), ''), now()
FROM (VALUES ('episodic_memory'), ('memory_extraction')) AS c (name);

DROP INDEX events_undispatched_idx;
ALTER TABLE events DROP COLUMN dispatched_at;
