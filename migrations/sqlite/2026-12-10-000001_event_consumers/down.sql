ALTER TABLE events ADD COLUMN dispatched_at TEXT;
UPDATE events SET dispatched_at = created_at;
CREATE INDEX events_undispatched_idx ON events (id) WHERE dispatched_at IS NULL;
DROP TABLE event_consumer_failures;
DROP TABLE event_consumers;
DROP TRIGGER events_position;
DROP INDEX events_position_idx;
ALTER TABLE events DROP COLUMN position;
