DROP TABLE memory_block_history;
DROP TABLE memory_blocks;
