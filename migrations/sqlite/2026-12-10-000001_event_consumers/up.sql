-- The outbox becomes a stream read by consumers, each from its own cursor (the webhook fan-out,
-- the episodic note of a chat, memory extraction).
--
-- SQLite has one writer at a time, so events commit in the order they are written: each takes
-- the next position as it is inserted. Events written before this migration keep position 0
-- and are ordered by id, before every later one.
ALTER TABLE events ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
CREATE INDEX events_position_idx ON events (position, id);
CREATE TRIGGER events_position AFTER INSERT ON events FOR EACH ROW WHEN NEW.position = 0
BEGIN
    UPDATE events SET position = (SELECT MAX(position) FROM events) + 1 WHERE id = NEW.id;
END;

CREATE TABLE event_consumers (
    name            TEXT    PRIMARY KEY,
    after_position  INTEGER NOT NULL,
    after_id        TEXT    NOT NULL,
    lease_token     TEXT,
    lease_owner     TEXT,
    lease_until     TEXT,
    updated_at      TEXT    NOT NULL
);

-- Events a consumer failed: due again at next_attempt_at, or parked (NULL) after the last
-- attempt, until someone retries them.
CREATE TABLE event_consumer_failures (
    consumer        TEXT    NOT NULL REFERENCES event_consumers (name) ON DELETE CASCADE,
    event_id        TEXT    NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    tenant_id       TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    error           TEXT    NOT NULL,
    next_attempt_at TEXT,
    failed_at       TEXT    NOT NULL,
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
         ELSE (SELECT MAX(id) FROM events) END, ''), strftime('%Y-%m-%dT%H:%M:%f000Z', 'now');
-- The memory consumers begin with what happens from now on.
INSERT INTO event_consumers (name, after_position, after_id, updated_at)
SELECT 'episodic_memory', 0, COALESCE((SELECT MAX(id) FROM events), ''), strftime('%Y-%m-%dT%H:%M:%f000Z', 'now');
INSERT INTO event_consumers (name, after_position, after_id, updated_at)
SELECT 'memory_extraction', 0, COALESCE((SELECT MAX(id) FROM events), ''), strftime('%Y-%m-%dT%H:%M:%f000Z', 'now');

DROP INDEX events_undispatched_idx;
ALTER TABLE events DROP COLUMN dispatched_at;
