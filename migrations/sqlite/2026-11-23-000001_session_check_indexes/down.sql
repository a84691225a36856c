DROP INDEX refresh_tokens_family_idx;
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);
DROP INDEX memberships_user_idx;
CREATE INDEX memberships_user_idx ON memberships (user_id, created_at);
