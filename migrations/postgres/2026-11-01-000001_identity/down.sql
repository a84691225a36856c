DROP TABLE refresh_tokens;
DROP TABLE credit_ledger;
DROP TABLE memberships;
DROP TABLE users;
DROP TABLE tenants;
