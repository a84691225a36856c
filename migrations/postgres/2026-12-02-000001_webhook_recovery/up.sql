-- Events that match a failed or disabled subscription are kept as deliveries in state
-- `skipped`; a recovery or a bulk retry queues them (and failed ones) again with a fresh retry
-- schedule, the attempts made before counted apart so that the log's numbers go on.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('pending', 'delivered', 'failed', 'skipped'));
ALTER TABLE webhook_deliveries ADD COLUMN earlier_attempts BIGINT NOT NULL DEFAULT 0;
-- A recovery selects one subscription's deliveries by status since a time.
CREATE INDEX webhook_deliveries_requeue_idx ON webhook_deliveries (subscription_id, status, created_at);
-- The statistics read a tenant's attempts of the last hours.
CREATE INDEX webhook_attempts_recent_idx ON webhook_attempts (tenant_id, started_at);
