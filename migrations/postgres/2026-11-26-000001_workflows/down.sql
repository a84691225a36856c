DROP TABLE workflows;
