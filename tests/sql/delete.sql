-- DELETE FROM a subtable or a STABLE by time range, tags and tbname; the last-row cache
-- forgets deleted rows; rows written after a DELETE are kept.
CREATE DATABASE del VGROUPS 2 CACHEMODEL 'both' DURATION 1d;
USE del;
CREATE STABLE readings (ts TIMESTAMP, velocity DOUBLE, fuel DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30));
INSERT INTO r1 USING readings TAGS ('truck_1', 'East') VALUES ('2016-01-01 00:00:00.000', 10, 0.5) ('2016-01-01 12:00:00.000', 11, 0.4) ('2016-01-02 00:00:00.000', 12, 0.3) ('2016-01-03 00:00:00.000', 13, NULL);
INSERT INTO r2 USING readings TAGS ('truck_2', 'East') VALUES ('2016-01-01 00:00:00.000', 20, 0.9) ('2016-01-02 00:00:00.000', 21, 0.8) ('2016-01-03 00:00:00.000', 22, 0.7);
INSERT INTO r3 USING readings TAGS ('truck_3', 'West') VALUES ('2016-01-01 00:00:00.000', 30, 0.2) ('2016-01-02 00:00:00.000', 31, 0.1) ('2016-01-03 00:00:00.000', 32, 0.05);
FLUSH DATABASE del;
INSERT INTO r1 VALUES ('2016-01-03 06:00:00.000', 14, 0.25);
SELECT last_row(ts), name, velocity FROM readings PARTITION BY name ORDER BY name;
-- One subtable, a range spanning two time windows and the memtable.
DELETE FROM r1 WHERE ts >= '2016-01-01 12:00:00.000' AND ts < '2016-01-03 12:00:00.000';
SELECT ts, velocity, fuel FROM r1;
SELECT last_row(ts), last_row(velocity) FROM r1;
SELECT last(fuel), last(ts) FROM r1;
-- A STABLE with a tag filter.
DELETE FROM readings WHERE fleet = 'East' AND ts BETWEEN '2016-01-02 00:00:00.000' AND '2016-01-02 23:59:59.999';
SELECT tbname, ts, velocity FROM readings ORDER BY tbname, ts;
-- tbname, and a row written after the DELETE with a deleted timestamp is kept.
DELETE FROM readings WHERE tbname = 'r3' AND ts > '2016-01-02 12:00:00.000';
INSERT INTO r3 VALUES ('2016-01-03 00:00:00.000', 33, 0.04);
SELECT tbname, ts, velocity FROM readings WHERE tbname = 'r3' ORDER BY ts;
SELECT last_row(ts), name, velocity, fuel FROM readings PARTITION BY name ORDER BY name;
COMPACT DATABASE del;
SELECT count(*), sum(velocity), min(ts), max(ts) FROM readings;
SELECT tbname, count(*) FROM readings PARTITION BY tbname ORDER BY tbname;
-- Everything of one subtable.
DELETE FROM r2;
SELECT count(*) FROM r2;
SELECT last_row(ts), name FROM readings PARTITION BY name ORDER BY name;
-- Errors: a column condition, an unknown table, an unknown column.
DELETE FROM readings WHERE velocity > 20;
DELETE FROM nosuch WHERE ts > 0;
DELETE FROM r1 WHERE speed > 1;
