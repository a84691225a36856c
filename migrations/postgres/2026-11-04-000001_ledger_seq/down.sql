ALTER TABLE tenants DROP COLUMN held;
ALTER TABLE tenants DROP COLUMN ledger_seq;
DROP INDEX credit_ledger_tenant_seq_idx;
ALTER TABLE credit_ledger DROP COLUMN seq;
