DROP TABLE memory_tombstones;
DROP TABLE memory_scopes;
DROP TABLE memory_entries;
DROP TABLE memory_documents;
