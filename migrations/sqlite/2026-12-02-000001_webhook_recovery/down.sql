-- Back to three statuses: a skipped delivery counts as failed (it was never sent). The CHECK
-- is not narrowed again (SQLite would need the whole rebuild); no row can violate it.
DROP INDEX webhook_attempts_recent_idx;
DROP INDEX webhook_deliveries_requeue_idx;
UPDATE webhook_deliveries SET status = 'failed' WHERE status = 'skipped';
ALTER TABLE webhook_deliveries DROP COLUMN earlier_attempts;
