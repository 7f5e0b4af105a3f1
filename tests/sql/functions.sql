-- Aggregates, selectors, row functions and scalar functions of the TDengine dialect, plus
-- DISTINCT, SLIMIT/SOFFSET, CASE and NOW arithmetic.
CREATE DATABASE f VGROUPS 4 PRECISION 'ms' KEEP 36500d DURATION 10d;
USE f;
CREATE STABLE m (ts TIMESTAMP, v DOUBLE, s INT) TAGS (loc VARCHAR(16), gid INT);
INSERT INTO d1 USING m TAGS ('a', 1) VALUES ('2024-01-01 00:00:00.000', 1, 0) ('2024-01-01 00:00:10.000', 2, 0) ('2024-01-01 00:00:20.000', 4, 1) ('2024-01-01 00:00:30.000', 3, 1) ('2024-01-01 00:01:10.000', 5, 0) ('2024-01-01 00:01:20.000', NULL, 0);
INSERT INTO d2 USING m TAGS ('b', 2) VALUES ('2024-01-01 00:00:05.000', 10, 1) ('2024-01-01 00:00:15.000', 20, 1) ('2024-01-01 00:00:25.000', 30, 0);
INSERT INTO d3 USING m TAGS ('a', 3) VALUES ('2024-01-01 00:00:00.000', 7, 2) ('2024-01-01 00:01:00.000', 8, 2);
-- Mergeable aggregates (partials from every vnode) and coordinator-only ones.
SELECT SPREAD(v), STDDEV(v), ELAPSED(ts), ELAPSED(ts, 1s) FROM m;
SELECT loc, SPREAD(v), STDDEV(v), COUNT(*) FROM m GROUP BY loc ORDER BY loc;
SELECT TWA(v), PERCENTILE(v, 50), PERCENTILE(v, 100), APERCENTILE(v, 25), MODE(s), IRATE(v), LEASTSQUARES(v, 1, 1) FROM d1;
SELECT tbname, TWA(v), MODE(s), ELAPSED(ts, 1s) FROM m PARTITION BY tbname ORDER BY tbname;
SELECT _wstart, STDDEV(v), PERCENTILE(v, 50) FROM m INTERVAL(30s);
-- Row functions, per partition in time order.
SELECT ts, v, CSUM(v), DERIVATIVE(v, 10s, 0) FROM d1;
SELECT ts, DERIVATIVE(v, 1s, 1) FROM d1;
SELECT ts, MAVG(v, 2) FROM d1;
SELECT ts, s, STATECOUNT(s, 'EQ', 0), STATEDURATION(s, 'EQ', 0, 1s) FROM d1;
SELECT tbname, ts, DIFF(v) FROM m PARTITION BY tbname ORDER BY tbname, ts;
-- HISTOGRAM: one row per bin (lower, upper].
SELECT HISTOGRAM(v, 'user_input', '[0, 2, 4, 10]', 0) FROM d1;
SELECT tbname, HISTOGRAM(v, 'linear_bin', '{"start": 0, "width": 10, "count": 2, "infinity": true}', 1) FROM m PARTITION BY tbname ORDER BY tbname;
-- Multi-row selectors.
SELECT ts, TOP(v, 2) FROM d1;
SELECT tbname, ts, BOTTOM(v, 1) FROM m PARTITION BY tbname ORDER BY tbname;
SELECT COUNT(*) FROM (SELECT SAMPLE(v, 2) FROM m PARTITION BY tbname);
SELECT _wstart, ts, TOP(v, 1) FROM d1 INTERVAL(30s);
-- INTERP at RANGE points, per partition, with each FILL mode.
SELECT _irowts, INTERP(v) FROM d1 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:01:00.000') EVERY(15s) FILL(LINEAR);
SELECT _irowts, INTERP(v) FROM d1 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:01:00.000') EVERY(15s) FILL(PREV);
SELECT _irowts, INTERP(v) FROM d1 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:01:00.000') EVERY(15s) FILL(NEXT);
SELECT _irowts, INTERP(v) FROM d1 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:01:00.000') EVERY(15s) FILL(VALUE, 0);
SELECT _irowts, INTERP(v) FROM d1 RANGE('2024-01-01 00:00:00.000', '2024-01-01 00:01:00.000') EVERY(15s) FILL(NONE);
SELECT _irowts, tbname, INTERP(v) FROM m PARTITION BY tbname RANGE('2024-01-01 00:00:20.000') FILL(NULL);
-- DISTINCT, SLIMIT/SOFFSET, CASE, string functions, NOW arithmetic.
SELECT DISTINCT loc FROM m ORDER BY loc;
SELECT DISTINCT s FROM d1 ORDER BY s;
SELECT tbname, COUNT(*) FROM m PARTITION BY tbname SLIMIT 2 SOFFSET 1;
SELECT ts, CASE WHEN v IS NULL THEN 'none' WHEN v < 3 THEN 'low' ELSE 'high' END AS level, CASE s WHEN 1 THEN 'one' END FROM d1;
SELECT loc, SUM(CASE WHEN v > 4 THEN 1 ELSE 0 END) AS big FROM m GROUP BY loc ORDER BY loc;
SELECT CONCAT(loc, '-', tbname), UPPER(loc), LENGTH(tbname), SUBSTR('tidal', 2, 3), CONCAT_WS('/', loc, 'x'), LTRIM('  a') FROM d2 LIMIT 1;
SELECT ts, TIMETRUNCATE(ts, 1m), TIMEDIFF(ts, '2024-01-01 00:00:00.000', 1s), TO_ISO8601(ts), REPLACE(tbname, 'd', 'dev'), SIGN(v - 3) FROM d1 WHERE ts >= '2024-01-01 00:00:30.000';
SELECT TIMETRUNCATE(ts, 1m) AS minute, COUNT(*) FROM m GROUP BY TIMETRUNCATE(ts, 1m) ORDER BY minute;
SELECT COUNT(*) FROM m WHERE ts < NOW - 1h;
SELECT COUNT(*) FROM m WHERE ts > NOW() - 1d;
-- Errors.
SELECT PERCENTILE(v, 120) FROM d1;
SELECT STATECOUNT(s, 'XX', 0) FROM d1;
SELECT LOWER(v) FROM d1;
SELECT velocty FROM m;
SELECT COUNT(*) FROM m SLIMIT 1;
SELECT MEDIAN(v) FROM m;
-- EXPLAIN shows what runs on the vnodes and what on the coordinator.
EXPLAIN SELECT loc, AVG(v) FROM m WHERE ts >= '2024-01-01 00:00:00.000' AND loc = 'a' PARTITION BY loc INTERVAL(30s) FILL(PREV);
EXPLAIN SELECT tbname, _wstart, COUNT(*) FROM m PARTITION BY tbname STATE_WINDOW(s) SLIMIT 1;
-- INSERT INTO .. SELECT writes a query's rows (here: 30 s rollups into a new subtable).
CREATE STABLE rollup (ts TIMESTAMP, c BIGINT, a DOUBLE) TAGS (loc VARCHAR(16));
INSERT INTO r_a USING rollup TAGS ('a') SELECT _wstart, COUNT(*), AVG(v) FROM m WHERE loc = 'a' INTERVAL(30s);
SELECT * FROM r_a;
INSERT INTO r_a (ts, a) SELECT ts + 1h, v * 10 FROM d2;
SELECT tbname, COUNT(*), SUM(a) FROM rollup PARTITION BY tbname;
INSERT INTO r_a SELECT ts, v FROM d2;
-- MATCH / NMATCH: regular-expression searches on strings and tags (a bad pattern is a
-- planning error with its place).
SELECT tbname, COUNT(*) FROM m WHERE loc MATCH '^a' PARTITION BY tbname ORDER BY tbname;
SELECT COUNT(*) FROM m WHERE tbname NMATCH '[12]$';
SELECT tbname FROM m WHERE tbname MATCH 'd(1|3)' AND v > 4 ORDER BY tbname;
SELECT COUNT(*) FROM m WHERE loc MATCH '(';
SELECT COUNT(*) FROM m WHERE v MATCH '1';
SELECT COUNT(*) FROM m WHERE loc MATCH gid;
-- Calendar and arithmetic functions: TO_CHAR / TO_TIMESTAMP formats, week numbering
-- (WEEK's eight modes), MOD, TRUNCATE; RAND draws in [0, 1).
SELECT ts, TO_CHAR(ts, 'yyyy-mm-dd hh24:mi:ss.ms'), TO_CHAR(ts, 'Dy DD Mon YYYY HH12 AM') FROM d1 LIMIT 2;
SELECT TO_TIMESTAMP('2024-01-01 13:05', 'yyyy-mm-dd hh24:mi'), TO_TIMESTAMP('05 January 2024 01 pm', 'dd Month yyyy hh12 am'), TO_TIMESTAMP('2024-02-30', 'yyyy-mm-dd');
SELECT WEEKDAY(ts), DAYOFWEEK(ts), WEEK(ts), WEEK(ts, 1), WEEKOFYEAR(ts) FROM d1 LIMIT 1;
SELECT WEEK('2021-01-01', 0), WEEK('2021-01-01', 2), WEEK('2021-01-01', 3), WEEK('2024-12-31', 3), WEEK('2024-12-31', 6);
SELECT COUNT(*) FROM m WHERE WEEKDAY(ts) = 0 AND TO_CHAR(ts, 'hh24:mi') = '00:00';
SELECT MOD(v, 3), TRUNCATE(v / 3, 2) FROM d1 WHERE v IS NOT NULL ORDER BY ts LIMIT 3;
SELECT COUNT(*) FROM m WHERE RAND() >= 0 AND RAND() < 1;
SELECT TO_CHAR(v, 'yyyy') FROM d1;
SELECT WEEK(ts, 'x') FROM d1;
SELECT RAND(1);
-- STDDEV_POP is STDDEV (population); VAR_POP its square.
SELECT STDDEV(v), STDDEV_POP(v), VAR_POP(v) FROM d1;
SELECT loc, VAR_POP(v) FROM m GROUP BY loc ORDER BY loc;
-- UNIQUE (each value's first row) and TAIL (the last k rows, after skipping an offset).
SELECT ts, UNIQUE(s) FROM d1;
SELECT tbname, ts, UNIQUE(s) FROM m PARTITION BY tbname ORDER BY tbname, ts;
SELECT ts, UNIQUE(loc) FROM m;
SELECT ts, TAIL(v, 2) FROM d1;
SELECT ts, TAIL(v, 2, 1) FROM d1;
SELECT _wstart, TAIL(v, 1) FROM d1 INTERVAL(30s);
SELECT TAIL(v, 101) FROM d1;
-- SELECT TAGS: one row per subtable, whether it holds data or not.
CREATE TABLE d4 USING m TAGS ('c', 4);
SELECT TAGS tbname, loc, gid FROM m ORDER BY tbname;
SELECT DISTINCT TAGS loc FROM m ORDER BY loc;
SELECT TAGS tbname FROM m WHERE gid > 2 ORDER BY tbname;
SELECT TAGS loc, gid * 10 FROM d4;
SELECT COUNT(*) FROM (SELECT TAGS tbname FROM m);
EXPLAIN SELECT TAGS tbname FROM m WHERE loc = 'a';
SELECT TAGS v FROM m;
-- HYPERLOGLOG: distinct values, approximately (exact at these sizes), merged from every vnode.
SELECT HYPERLOGLOG(v), HYPERLOGLOG(s), HYPERLOGLOG(loc), HYPERLOGLOG(tbname) FROM m;
SELECT loc, HYPERLOGLOG(s) FROM m GROUP BY loc ORDER BY loc;
SELECT _wstart, HYPERLOGLOG(s) FROM m INTERVAL(30s);
-- COUNT(DISTINCT x): exact; DISTINCT inside any other function is an error.
SELECT COUNT(DISTINCT s), COUNT(s), COUNT(DISTINCT loc), COUNT(DISTINCT tbname) FROM m;
SELECT loc, COUNT(DISTINCT s) FROM m GROUP BY loc ORDER BY loc;
SELECT COUNT(DISTINCT s) FROM m WHERE ts > '2030-01-01 00:00:00.000';
SELECT SUM(DISTINCT s) FROM m;
-- NULL handling, conditional, trigonometric and string functions.
SELECT ts, v, IFNULL(v, -1), NVL(v, 0), COALESCE(NULL, v, 99), NVL2(v, 'set', 'unset'), NULLIF(s, 0), IF(v > 3, 'big', 'small') FROM d1;
SELECT ACOS(1), ASIN(0), ATAN(1), PI(), DEGREES(PI()), RADIANS(180), ACOS(2);
SELECT REPEAT('ab', 3), REPEAT('x', 0), ASCII('A'), ASCII(''), CHAR(84, 105, 100, 97, 108);
-- POSITION(a IN b): 1-based, in characters; 0 when absent; on columns and tags.
SELECT POSITION('da' IN 'tidal'), POSITION('x' IN 'tidal'), POSITION('' IN 'abc'), POSITION('é' IN 'café!');
SELECT tbname, POSITION('2' IN tbname), POSITION(loc IN 'xab') FROM m PARTITION BY tbname ORDER BY tbname LIMIT 3;
SELECT COUNT(*) FROM m WHERE POSITION('d' IN tbname) = 1 AND POSITION(loc IN 'ab') > 0;
SELECT POSITION('a' 'b');
SELECT POSITION('a' IN);
SELECT IFNULL(v) FROM d1;
-- UNION ALL / UNION: ORDER BY and LIMIT after the last SELECT apply to the whole.
SELECT tbname, v FROM d2 UNION ALL SELECT tbname, v FROM d3 ORDER BY v DESC LIMIT 3;
SELECT s FROM d1 UNION SELECT s FROM d2 ORDER BY s;
SELECT loc, COUNT(*) FROM m GROUP BY loc UNION ALL SELECT 'all', COUNT(*) FROM m ORDER BY 1;
SELECT COUNT(*) FROM (SELECT ts FROM d1 UNION ALL SELECT ts FROM d2);
(SELECT ts, v FROM d1 ORDER BY ts DESC LIMIT 1) UNION ALL (SELECT ts, v FROM d2 ORDER BY ts LIMIT 1);
EXPLAIN SELECT v FROM d1 UNION SELECT v FROM d2;
SELECT ts, v FROM d1 UNION ALL SELECT ts FROM d2;
-- NULL sorts first ascending and last descending; asking for the other is an error, not ignored.
SELECT ts, v FROM d1 ORDER BY v NULLS FIRST LIMIT 2;
SELECT ts, v FROM d1 ORDER BY v DESC NULLS LAST LIMIT 2;
SELECT ts, v FROM d1 ORDER BY v DESC NULLS FIRST;
