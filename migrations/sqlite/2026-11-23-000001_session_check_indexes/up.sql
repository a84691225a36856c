-- The session check on every authenticated request looks up a session's live tokens by family
-- and user, and the user's memberships in (created_at, tenant_id) order. With the family alone
-- indexed, SQLite would rather scan all of a user's tokens through the user index, which grows
-- with every refresh; with both columns the family index is the obvious choice.
DROP INDEX refresh_tokens_family_idx;
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id, user_id);
DROP INDEX memberships_user_idx;
CREATE INDEX memberships_user_idx ON memberships (user_id, created_at, tenant_id);
