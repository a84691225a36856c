DROP TABLE memory_tombstones;
DROP TABLE memory_scopes;
DROP TRIGGER memory_entries_fts_update;
DROP TRIGGER memory_entries_fts_delete;
DROP TRIGGER memory_entries_fts_insert;
DROP TABLE memory_fts;
DROP TABLE memory_entries;
DROP TABLE memory_documents;
