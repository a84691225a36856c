-- Running instances of the service and their heartbeats. A lease whose owner's heartbeat is
-- older than AGENTRY_INSTANCE_TIMEOUT_SECS is free at once: work a crashed instance held is
-- taken over in seconds rather than when its lease runs out.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL
);

-- Which instance holds each lease (NULL: none, or one taken before owners were recorded).
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN lease_owner TEXT;
ALTER TABLE workflow_executions ADD COLUMN lease_owner TEXT;
