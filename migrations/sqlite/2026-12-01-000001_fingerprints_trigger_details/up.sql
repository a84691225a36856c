-- What each running instance was configured with, as fingerprints (never the keys): instances
-- on one database must agree on the JWT key, the secret key and the issuer, or tokens one signs
-- are refused by the others. /readyz compares them and names the setting that differs.
ALTER TABLE instances ADD COLUMN fingerprints TEXT NOT NULL DEFAULT '{}';

-- The details of the call, integration event or schedule tick that started an execution,
-- which its templates read as `trigger.*` (NULL: started by the API or an agent).
ALTER TABLE workflow_executions ADD COLUMN trigger_details TEXT;
