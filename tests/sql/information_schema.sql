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
-- tags: one row per subtable and tag, values as text (a timestamp in its database's
-- precision; NULL for a tag added after the subtable was created)
CREATE STABLE is1.k (ts TIMESTAMP, v INT) TAGS (since TIMESTAMP, note NCHAR(6));
CREATE TABLE is1.k1 USING is1.k TAGS (1700000000000001, 'é''x');
ALTER STABLE is2.n ADD TAG c DOUBLE;
SELECT * FROM information_schema.ins_tags ORDER BY db_name, table_name, tag_name;
SELECT stable_name, count(*) FROM information_schema.ins_tags WHERE db_name = 'is1' GROUP BY stable_name ORDER BY stable_name;
SELECT table_name, tag_value FROM information_schema.ins_tags WHERE tag_value IS NULL;
-- columns: every column (tags are in ins_tags) of every STABLE and subtable
SELECT * FROM information_schema.ins_columns WHERE db_name = 'is2' ORDER BY table_type DESC, table_name, col_name;
SELECT table_type, count(*) FROM information_schema.ins_columns GROUP BY table_type ORDER BY table_type;
SELECT table_name, col_type, col_length FROM information_schema.ins_columns WHERE col_name = 'ts' AND table_type = 'SUPER_TABLE' ORDER BY table_name;
-- vgroups of every database, as SHOW VGROUPS shows them
SELECT vgroup_id, db_name, hash_begin, hash_end, status, `tables`, `rows` FROM information_schema.ins_vgroups ORDER BY vgroup_id;
SELECT db_name, sum(`tables`), sum(`rows`) FROM information_schema.ins_vgroups GROUP BY db_name ORDER BY db_name;
-- users: never a password or its hash
CREATE USER reader PASS 'reader_pw1';
GRANT READ ON is1 TO reader;
SELECT name, super, privileges FROM information_schema.ins_users ORDER BY name;
SELECT count(*) FROM information_schema.ins_users WHERE create_time > '2020-01-01 00:00:00';
-- the cluster (its id, name and times vary: tests/show_cluster_views.rs) and its licence
SELECT count(*) FROM information_schema.ins_cluster WHERE id > 0 AND uptime >= 0;
SELECT version, expired, timeseries FROM information_schema.ins_grants;
USE information_schema;
SELECT count(*) FROM ins_stables;
SELECT * FROM ins_nothing;
