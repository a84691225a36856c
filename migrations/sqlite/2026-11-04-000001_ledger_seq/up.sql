-- The order in which ledger entries were applied to the balance, per tenant. Entry ids are made
-- before their transaction, so under concurrency id order and application order can differ;
-- balance_after follows application order, and so does the listing.
ALTER TABLE credit_ledger ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE credit_ledger SET seq = numbered.n
FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY id) AS n FROM credit_ledger) AS numbered
WHERE credit_ledger.id = numbered.id;
CREATE INDEX credit_ledger_tenant_seq_idx ON credit_ledger (tenant_id, seq);
