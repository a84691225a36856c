-- Ledger order and held credits, kept on the tenant row so that one UPDATE … RETURNING gives a
-- settlement everything it needs while the row is locked.
--
-- credit_ledger.seq: the order in which entries were applied to the balance, per tenant. Entry
-- ids are made before their transaction, so under concurrency id order and application order
-- can differ; balance_after follows application order, and so does the listing.
-- tenants.ledger_seq: the last seq given out. tenants.held: credits held by chats in flight.
ALTER TABLE credit_ledger ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE credit_ledger SET seq = numbered.n
FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY id) AS n FROM credit_ledger) AS numbered
WHERE credit_ledger.id = numbered.id;
CREATE INDEX credit_ledger_tenant_seq_idx ON credit_ledger (tenant_id, seq);

ALTER TABLE tenants ADD COLUMN ledger_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN held BIGINT NOT NULL DEFAULT 0 CHECK (held >= 0);
UPDATE tenants SET
    ledger_seq = (SELECT COUNT(*) FROM credit_ledger WHERE credit_ledger.tenant_id = tenants.id),
    held = (SELECT COALESCE(SUM(amount), 0) FROM credit_holds WHERE credit_holds.tenant_id = tenants.id);
