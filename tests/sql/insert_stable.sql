-- INSERT INTO stable (tbname, ...) VALUES (TDengine 3): each row names its subtable in the
-- tbname column; subtables that do not exist are created with the tags listed (NULL for the
-- others), from their first row; columns and tags come in any order.
CREATE DATABASE ins VGROUPS 2;
USE ins;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT) TAGS (location VARCHAR(16), groupid INT);
INSERT INTO meters (tbname, location, groupid, ts, current) VALUES ('d1001', 'sf', 2, 1700000000000, 10.5) ('d1002', 'la', 3, 1700000000000, 11.5) ('d1001', 'other', 9, 1700000001000, 12.5);
SELECT tbname, ts, current, voltage, location, groupid FROM meters ORDER BY tbname, ts;
-- an existing subtable keeps its tags; tags left out are NULL; other items of the statement
INSERT INTO meters (ts, voltage, tbname, groupid) VALUES (1700000002000, 220, 'd1001', 7) (1700000002000, 230, 'd1003', 4) d1002 VALUES (1700000003000, 13.5, 240);
SELECT tbname, ts, current, voltage, location, groupid FROM meters ORDER BY tbname, ts;
SHOW TABLE TAGS FROM meters;
-- a name is taken as written
INSERT INTO ins.meters (tbname, ts, current) VALUES ('Mixed_Case', 1700000004000, 1.5);
SELECT tbname, current FROM meters WHERE ts = 1700000004000;
SELECT current FROM `Mixed_Case`;
-- errors name the problem, and nothing of the statement is written
INSERT INTO meters VALUES (1700000005000, 1.0, 1);
INSERT INTO meters (tbname, ts, current) VALUES (NULL, 1700000005000, 1.0);
INSERT INTO meters (tbname, ts, current) VALUES (5, 1700000005000, 1.0);
INSERT INTO meters (tbname, ts, current) VALUES ('', 1700000005000, 1.0);
INSERT INTO meters (tbname, ts, nope) VALUES ('d9', 1700000005000, 1);
INSERT INTO meters (tbname, tbname, ts) VALUES ('d9', 'd9', 1700000005000);
INSERT INTO meters (tbname, ts, current) VALUES ('d9', 1700000005000);
INSERT INTO meters (tbname, ts, location) VALUES ('d9', 1700000005000, NOW);
INSERT INTO meters (tbname, current) VALUES ('d9', 1.0);
INSERT INTO meters (tbname, ts, groupid) VALUES ('d9', 1700000005000, 'x');
INSERT INTO meters (tbname, ts, current) VALUES ('d9', 1700000005000, 1.0) ('d1001', NULL, 2.0);
INSERT INTO d1001 (tbname, ts, current) VALUES ('d9', 1700000005000, 1.0);
-- a subtable name is at most 192 bytes, however the subtable is created
INSERT INTO meters (tbname, ts, current) VALUES ('nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn', 1700000005000, 1.0);
INSERT INTO meters (tbname, ts, current) VALUES ('nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn', 1700000005000, 1.0);
INSERT INTO `nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn` USING meters TAGS ('x', 1) VALUES (1700000005000, 1.0, 1);
CREATE TABLE `nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn` USING meters TAGS ('x', 1);
-- a subtable may not take a STABLE's name
INSERT INTO meters (tbname, ts, current) VALUES ('meters', 1700000005000, 1.0);
INSERT INTO meters USING meters TAGS ('x', 1) VALUES (1700000005000, 1.0, 1);
CREATE STABLE other (ts TIMESTAMP, v INT) TAGS (k INT);
INSERT INTO other (tbname, ts, v) VALUES ('d1001', 1700000005000, 1);
SELECT count(*) FROM meters;
SHOW TABLES;
