DROP INDEX webhook_attempts_recent_idx;
DROP INDEX webhook_deliveries_requeue_idx;
UPDATE webhook_deliveries SET status = 'failed' WHERE status = 'skipped';
ALTER TABLE webhook_deliveries DROP COLUMN earlier_attempts;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('pending', 'delivered', 'failed'));
