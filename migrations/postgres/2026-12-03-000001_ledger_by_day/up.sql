-- The console's chart sums a tenant's charges per day over the last 30 days: a range of this
-- index instead of every entry the tenant ever had.
CREATE INDEX credit_ledger_tenant_time_idx ON credit_ledger (tenant_id, created_at);
