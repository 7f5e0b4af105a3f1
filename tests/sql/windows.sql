-- Windows of the TDengine dialect: INTERVAL with SLIDING and FILL, STATE_WINDOW, SESSION,
-- EVENT_WINDOW, COUNT_WINDOW, their pseudo columns, per partition and over a subquery.
CREATE DATABASE w VGROUPS 4 PRECISION 'ms' KEEP 36500d DURATION 10d;
USE w;
CREATE STABLE m (ts TIMESTAMP, v DOUBLE, s INT) TAGS (loc VARCHAR(16), gid INT);
INSERT INTO d1 USING m TAGS ('a', 1) VALUES ('2024-01-01 00:00:00.000', 1, 0) ('2024-01-01 00:00:10.000', 2, 0) ('2024-01-01 00:00:20.000', 4, 1) ('2024-01-01 00:00:30.000', 3, 1) ('2024-01-01 00:01:10.000', 5, 0) ('2024-01-01 00:01:20.000', NULL, 0);
INSERT INTO d2 USING m TAGS ('b', 2) VALUES ('2024-01-01 00:00:05.000', 10, 1) ('2024-01-01 00:00:15.000', 20, 1) ('2024-01-01 00:00:25.000', 30, 0);
INSERT INTO d3 USING m TAGS ('a', 3) VALUES ('2024-01-01 00:00:00.000', 7, 2) ('2024-01-01 00:01:00.000', 8, 2);
-- Tumbling and sliding windows.
SELECT _wstart, _wend, _wduration, COUNT(*), SUM(v) FROM m INTERVAL(30s);
SELECT _wstart, COUNT(*), MAX(v) FROM d1 INTERVAL(20s) SLIDING(10s);
SELECT _wstart, tbname, COUNT(*) FROM m WHERE ts < '2024-01-01 00:00:30.000' PARTITION BY tbname INTERVAL(20s) SLIDING(10s);
-- FILL over the WHERE range, and between the first and last window without one.
SELECT _wstart, AVG(v), COUNT(*) FROM d1 WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:30.000' INTERVAL(15s) FILL(NULL);
SELECT _wstart, AVG(v) FROM d1 WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:30.000' INTERVAL(15s) FILL(PREV);
SELECT _wstart, AVG(v) FROM d1 WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:30.000' INTERVAL(15s) FILL(NEXT);
SELECT _wstart, AVG(v) FROM d1 WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:30.000' INTERVAL(15s) FILL(LINEAR);
SELECT _wstart, AVG(v), COUNT(*) FROM d1 INTERVAL(20s) FILL(VALUE, -1, 0);
SELECT _wstart, loc, MAX(v) FROM m PARTITION BY loc INTERVAL(20s) FILL(PREV);
-- State, session, event and count windows; _wstart/_wend are the first and last row.
SELECT _wstart, _wend, _wduration, COUNT(*), s FROM d1 STATE_WINDOW(s);
SELECT tbname, _wstart, COUNT(*), SUM(v), s FROM m PARTITION BY tbname STATE_WINDOW(s) ORDER BY tbname, _wstart;
SELECT _wstart, _wend, COUNT(*) FROM d1 SESSION(ts, 10s);
SELECT tbname, _wstart, COUNT(*) FROM m PARTITION BY tbname SESSION(ts, 30s) ORDER BY tbname, _wstart;
SELECT _wstart, _wend, COUNT(*), AVG(v) FROM d1 EVENT_WINDOW START WITH v >= 2 END WITH v < 4;
SELECT _wstart, COUNT(*), SUM(v) FROM d1 COUNT_WINDOW(4);
SELECT _wstart, _wend, COUNT(*) FROM d1 COUNT_WINDOW(3, 2);
-- Windows over a subquery use its first timestamp column.
SELECT _wstart, COUNT(*), MAX(c) FROM (SELECT _wstart AS w, COUNT(*) AS c FROM m INTERVAL(10s)) SESSION(w, 10s);
SELECT _wstart, SUM(v) FROM (SELECT ts, v, s FROM d1) STATE_WINDOW(s);
-- Errors name the problem and the position.
SELECT COUNT(*) FROM m INTERVAL(10s) SLIDING(20s);
SELECT COUNT(*) FROM m SESSION(v, 10s);
SELECT COUNT(*) FROM m STATE_WINDOW(v);
SELECT _wstart FROM m;
SELECT COUNT(*) FROM m COUNT_WINDOW(0);
