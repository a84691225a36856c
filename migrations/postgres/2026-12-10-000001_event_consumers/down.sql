ALTER TABLE events ADD COLUMN dispatched_at TIMESTAMPTZ;
UPDATE events SET dispatched_at = created_at;
CREATE INDEX events_undispatched_idx ON events (id) WHERE dispatched_at IS NULL;
DROP TABLE event_consumer_failures;
DROP TABLE event_consumers;
DROP INDEX events_position_idx;
ALTER TABLE events DROP COLUMN position;
