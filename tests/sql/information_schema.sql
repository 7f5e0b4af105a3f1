-- information_schema: the cluster's databases, STABLEs, tables and nodes as tables that any
-- query can read (TDengine's ins_* tables), computed by the frontend per query.
CREATE DATABASE is1 VGROUPS 2 PRECISION 'us';
CREATE DATABASE is2 VGROUPS 1;
CREATE STABLE is1.m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(8));
CREATE STABLE is2.n (ts TIMESTAMP, v INT, w BOOL) TAGS (a INT, b VARCHAR(4));
INSERT INTO is1.d1 USING is1.m TAGS ('x') VALUES ('2024-01-01 00:00:00', 1) is1.d2 USING is1.m TAGS ('y') VALUES ('2024-01-01 00:00:00', 2) is2.e1 USING is2.n TAGS (1, 'p') VALUES ('2024-01-01 00:00:00', 3, true);
SELECT name, vgroups, precision FROM information_schema.ins_databases ORDER BY name;
SELECT stable_name, db_name, columns, `tags` FROM information_schema.ins_stables ORDER BY db_name, stable_name;
SELECT table_name, db_name, stable_name FROM information_schema.ins_tables ORDER BY db_name, table_name;
SELECT db_name, count(*) FROM information_schema.ins_tables GROUP BY db_name ORDER BY db_name;
SELECT count(*) FROM information_schema.ins_dnodes WHERE status = 'ready';
SELECT table_name FROM information_schema.ins_tables WHERE table_name MATCH '2$';
USE information_schema;
SELECT count(*) FROM ins_stables;
SELECT * FROM ins_nothing;
