DROP TABLE knowledge_fts;
DROP TABLE knowledge_chunks;
DROP TABLE knowledge_file_parts;
DROP TABLE knowledge_files;
DROP TABLE knowledge_bases;
