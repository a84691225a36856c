DROP INDEX events_undispatched_idx;
ALTER TABLE events DROP COLUMN dispatched_at;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
