-- SHOW statements whose output does not depend on time, ports or file sizes (SHOW DNODES,
-- MNODES, VGROUPS, DATABASES and QUERIES are checked structurally in tests/show_*.rs).
CREATE DATABASE sh VGROUPS 3 PRECISION 'us' KEEP 3650d DURATION 5d BUFFER 32 WAL_LEVEL 1 WAL_FSYNC_PERIOD 3000 CACHEMODEL 'last_row' CACHESIZE 4 STT_TRIGGER 4 MINROWS 50 MAXROWS 2000 COMP 1;
SHOW CREATE DATABASE sh;
USE sh;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT ENCODE 'delta-d' COMPRESS 'lz4' LEVEL 'high', voltage INT COMPRESS 'zstd', phase DOUBLE, note VARCHAR(20), flag BOOL) TAGS (location VARCHAR(64), group_id INT, rating DOUBLE, since TIMESTAMP, code NCHAR(8), active BOOL);
CREATE STABLE weather (ts TIMESTAMP, temp DOUBLE LEVEL 'low') TAGS (city VARCHAR(20));
CREATE TABLE d1001 USING meters TAGS ('California.SanFrancisco', 2, 1.5, 1700000000000000, 'ab''c', true);
CREATE TABLE d1002 USING meters (location, group_id) TAGS ('it''s \\ here', -3);
INSERT INTO w_paris USING weather TAGS ('Paris') VALUES (1700000000000000, 12.5);
SHOW STABLES;
SHOW STABLES LIKE 'me%';
SHOW sh.STABLES LIKE 'nothing%';
SHOW TABLES;
SHOW sh.TABLES LIKE 'd%';
SHOW TABLE TAGS FROM meters;
SHOW TABLE TAGS FROM d1002 FROM sh;
SHOW TABLE TAGS FROM sh.weather;
SHOW TAGS FROM sh.d1001;
SHOW TAGS FROM d1002;
SHOW CREATE STABLE meters;
SHOW CREATE TABLE sh.weather;
SHOW CREATE TABLE d1001;
SHOW CREATE TABLE d1002;
SHOW CREATE TABLE w_paris;
DESCRIBE meters;
-- no licensing: one row that says so, in TDengine's column shape
SHOW GRANTS;
SHOW LICENCES;
-- configuration: the mnode's (it runs the statement) and a data node's; values that vary
-- (paths, ports) are checked in tests/show_cluster_views.rs
SHOW VARIABLES LIKE 'listen';
SHOW CLUSTER VARIABLES LIKE 'snapshot%';
SHOW DNODE 1 VARIABLES LIKE 'heartbeat%';
-- which vgroups live on which data node (sh: 3 vgroups over 2 data nodes); SHOW VNODES
-- also shows the endpoints, whose ports vary: tests/show_cluster_views.rs
SELECT dnode_id, vgroup_id, db_name, status FROM information_schema.ins_vnodes ORDER BY vgroup_id;
SELECT dnode_id, count(*) FROM information_schema.ins_vnodes GROUP BY dnode_id ORDER BY dnode_id;
-- where rows are stored: w_paris's one row is still in the memtable, meters has subtables
-- on two vgroups and no rows (sizes after a flush vary: tests/show_cluster_views.rs)
SHOW TABLE DISTRIBUTED w_paris;
SHOW TABLE DISTRIBUTED sh.meters;
-- errors name the problem
SHOW TAGS FROM meters;
SHOW CREATE STABLE d1001;
SHOW CREATE TABLE nosuch;
SHOW CREATE DATABASE nosuch;
SHOW TABLE TAGS FROM nosuch;
SHOW TAGS FROM sh.d1001 FROM sh;
SHOW CREATE VIEW v;
KILL QUERY 'nosuch';
KILL QUERY 42;
SHOW GRANT;
SHOW CLUSTER VARIANTS;
SHOW DNODE 9 VARIABLES;
SHOW DNODE one VARIABLES;
SHOW LOCAL VARIABLES;
SHOW VNODES ON DNODE 3;
SHOW VNODES 'nowhere:1';
SHOW VNODES ON 1;
SHOW TABLE DISTRIBUTED nosuch;
SHOW TABLE DISTRIBUTE meters;
