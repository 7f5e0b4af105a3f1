-- ALTER TABLE subtable SET TAG t = v [, t = v ...]: one subtable's tags change (a truck's new
-- driver); tag filters, PARTITION BY and SHOW TABLE TAGS see the new values at once.
CREATE DATABASE stg VGROUPS 2;
USE stg;
CREATE STABLE trucks (ts TIMESTAMP, speed DOUBLE) TAGS (driver VARCHAR(8), fleet VARCHAR(8), cap INT, since TIMESTAMP, active BOOL);
INSERT INTO t1 USING trucks TAGS ('ann', 'north', 10, '2024-01-01 00:00:00.000', true) VALUES (1700000000000, 50.5);
INSERT INTO t2 USING trucks TAGS ('bob', 'north', 20, NULL, true) VALUES (1700000000000, 60.5);
INSERT INTO t3 USING trucks TAGS ('ann', 'south', 30, NULL, false) VALUES (1700000000000, 70.5);
SELECT tbname, driver FROM trucks WHERE driver = 'ann' ORDER BY tbname;
ALTER TABLE t1 SET TAG driver = 'cid';
SELECT tbname, driver FROM trucks WHERE driver = 'ann' ORDER BY tbname;
SELECT tbname, driver FROM trucks WHERE driver = 'cid' ORDER BY tbname;
-- LAST_ROW of the subtables a tag picks (the point-lookup path, through the tag index)
SELECT tbname, driver, last_row(speed) FROM trucks WHERE driver = 'cid' PARTITION BY tbname;
SELECT count(*) FROM trucks WHERE driver IN ('ann', 'cid');
-- several tags at once, NULL, numbers, time strings and bools
ALTER TABLE stg.t2 SET TAG fleet = NULL, cap = 25, since = '2024-06-01 12:00:00.000', active = false;
ALTER TABLE t3 SET TAG cap = -1, DRIVER = 'dee';
SHOW TABLE TAGS FROM trucks;
SELECT driver, count(*) FROM trucks PARTITION BY driver ORDER BY driver;
SELECT fleet, sum(speed) FROM trucks PARTITION BY fleet ORDER BY fleet;
SELECT driver, fleet, cap FROM t2;
SELECT tbname FROM trucks WHERE active = false ORDER BY tbname;
-- errors name the problem; nothing changes
ALTER TABLE t1 SET TAG;
ALTER TABLE t1 SET TAG driver;
ALTER TABLE t1 SET TAG driver = ;
ALTER TABLE t1 SET TAG driver = 'x',;
ALTER TABLE t1 SET TAG driver = NOW;
ALTER TABLE t1 SET TAG driver = 'x', driver = 'y';
ALTER TABLE t1 SET driver = 'x';
ALTER TABLE t1 ADD COLUMN c INT;
ALTER TABLE trucks SET TAG driver = 'x';
ALTER TABLE nosuch SET TAG driver = 'x';
ALTER TABLE t1 SET TAG drivr = 'x';
ALTER TABLE t1 SET TAG cap = 'many';
ALTER TABLE t1 SET TAG driver = 'a-too-long-name';
ALTER TABLE t1 SET TAG since = 'not a time';
ALTER TABLE t1 SET TAG driver = 'x', cap = 'many';
ALTER TABLE nodb.t1 SET TAG driver = 'x';
SHOW TABLE TAGS FROM trucks;
