-- Time values in INSERT: NOW and TODAY() (midnight UTC of the current day), with offsets,
-- in the database's precision; time strings and epoch numbers. Rows written at NOW are
-- checked by what holds whatever the clock says.
CREATE DATABASE it VGROUPS 2 PRECISION 'us';
USE it;
CREATE STABLE m (ts TIMESTAMP, v INT, at TIMESTAMP) TAGS (k INT);
INSERT INTO t USING m TAGS (1) VALUES (TODAY(), 1, NOW) (TODAY() + 8h, 2, NOW()) (today() - 1d + 30m, 3, NOW - 1h) (TODAY() + 1s + 500a, 4, NOW + 1w);
SELECT v, CAST(ts AS BIGINT) % 86400000000 AS since_midnight_us FROM t ORDER BY v;
SELECT v, at <= NOW() + 1w, at >= TODAY() - 1h FROM t ORDER BY v;
SELECT COUNT(*) FROM t WHERE ts >= TODAY() - 1d AND ts < TODAY() + 1d;
-- A TIMESTAMP column that is not the first takes time functions too.
INSERT INTO t VALUES ('2024-01-01 00:00:00.000001', 5, TODAY());
SELECT CAST(at AS BIGINT) % 86400000000 FROM t WHERE v = 5;
-- Strings and epoch numbers in the database's precision (microseconds here).
INSERT INTO t VALUES ('2024-01-01T00:00:01Z', 6, '2024-01-01 08:00:00+08:00') (1704067202000000, 7, 1704067202000001);
SELECT ts, v, at FROM t WHERE v >= 6 ORDER BY v;
-- A TIMESTAMP tag is in the database's precision (microseconds here), as its rows are:
-- time strings and epoch numbers by CREATE TABLE, USING ... TAGS, the tbname form, SET TAG.
CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (born TIMESTAMP);
CREATE TABLE s1 USING st TAGS ('2024-01-01 00:00:00');
INSERT INTO s2 USING st TAGS ('2024-01-02T00:00:00.000001Z') VALUES ('2024-01-02 00:00:00', 2);
INSERT INTO st (tbname, born, ts, v) VALUES ('s3', 1704326400000000, '2024-01-04 00:00:00', 3);
INSERT INTO s1 VALUES ('2024-01-01 00:00:00', 1);
SELECT tbname, born, ts FROM st ORDER BY tbname;
SELECT tbname FROM st WHERE born = '2024-01-02 00:00:00.000001';
ALTER TABLE s1 SET TAG born = '2024-02-01 12:00:00';
SHOW TABLE TAGS FROM st;
-- NOW and TODAY() are TIMESTAMP tag values too (read when the statement runs, in the
-- database's precision), by CREATE TABLE, USING ... TAGS, the tbname form and SET TAG.
CREATE TABLE s4 USING st TAGS (TODAY() + 8h);
INSERT INTO s5 USING st TAGS (NOW) VALUES (NOW, 5);
INSERT INTO st (tbname, born, ts, v) VALUES ('s6', NOW - 1h, NOW, 6);
CREATE TABLE s7 USING st (born) TAGS (NOW());
SELECT TAGS tbname, CAST(born AS BIGINT) % 86400000000 FROM st WHERE tbname = 's4';
SELECT TAGS tbname, born <= NOW(), born > NOW() - 1d FROM st WHERE tbname IN ('s5', 's6', 's7') ORDER BY tbname;
ALTER TABLE s5 SET TAG born = TODAY() - 1d + 1s;
SELECT TAGS tbname, CAST(born AS BIGINT) % 86400000000 FROM st WHERE tbname = 's5';
-- A row's value or a tag that is no time, a number or a TIMESTAMP, takes no time function.
CREATE STABLE sv (ts TIMESTAMP, s VARCHAR(32)) TAGS (name VARCHAR(32), on_duty BOOL);
INSERT INTO v1 USING sv TAGS (NOW, true) VALUES (NOW, 'a');
INSERT INTO v1 USING sv TAGS ('x', TODAY()) VALUES (NOW, 'a');
INSERT INTO v1 USING sv TAGS ('x', true) VALUES (NOW, NOW);
SELECT COUNT(*) FROM sv;
-- Errors: TODAY needs its parentheses; neither function is a FILL value.
INSERT INTO t VALUES (TODAY, 8, NOW);
INSERT INTO t VALUES (TODAY(, 8, NOW);
SELECT COUNT(*) FROM t INTERVAL(1d) FILL(VALUE, TODAY());
