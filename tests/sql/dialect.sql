-- TDengine dialect details: NULL literals as function arguments, session functions,
-- _qstart/_qend, GROUP_CONCAT.
CREATE DATABASE dl VGROUPS 4 PRECISION 'ms' KEEP 36500d DURATION 10d;
USE dl;
CREATE STABLE m (ts TIMESTAMP, v DOUBLE, s VARCHAR(8)) TAGS (loc VARCHAR(16), gid INT);
INSERT INTO d1 USING m TAGS ('a', 1) VALUES ('2024-01-01 00:00:00.000', 1, 'x') ('2024-01-01 00:00:10.000', 2, 'y') ('2024-01-01 00:00:20.000', NULL, NULL) ('2024-01-01 00:01:00.000', 4, 'z');
INSERT INTO d2 USING m TAGS ('b', 2) VALUES ('2024-01-01 00:00:05.000', 10, 'p') ('2024-01-01 00:00:15.000', 20, 'q');
INSERT INTO d3 USING m TAGS ('a', 3) VALUES ('2024-01-01 00:00:30.000', 7, 'r') ('2024-01-01 00:01:30.000', 8, 's');
-- A NULL literal argument of a scalar function gives NULL (of the function's result type),
-- whether the function is string or math; CHAR skips NULL code points.
SELECT LENGTH(NULL), CONCAT('a', NULL), UPPER(NULL), ABS(NULL), POSITION(NULL IN 'x'), POSITION('x' IN NULL);
SELECT LOWER(NULL), CHAR_LENGTH(NULL), SUBSTR(NULL, 1, 2), TRIM(NULL), REPLACE(NULL, 'a', 'b'), REPEAT(NULL, 2), ASCII(NULL);
SELECT SQRT(NULL), POW(NULL, 2), LOG(2, NULL), ROUND(NULL), FLOOR(NULL), SIGN(NULL), MOD(7, NULL), GREATEST(1, NULL);
SELECT TIMETRUNCATE(NULL, 1d), TO_ISO8601(NULL), TO_CHAR(NULL, 'yyyy'), TO_TIMESTAMP(NULL, 'yyyy'), TO_UNIXTIMESTAMP(NULL), CHAR(84, NULL, 105);
SELECT CONCAT_WS('-', 'a', NULL), CONCAT_WS(NULL, 'a', 'b'), CONCAT_WS('-', 'a', 'b');
SELECT LENGTH(NULL) IS NULL, CONCAT(NULL, 'b') IS NULL, COALESCE(UPPER(NULL), 'none');
-- Per row, next to columns and tags.
SELECT ts, CONCAT(s, NULL), LENGTH(NULL), UPPER(s), POSITION(NULL IN s) FROM d1;
SELECT tbname, ts, CONCAT(loc, NULL) IS NULL, ABS(NULL), CONCAT_WS('/', loc, s), CONCAT_WS('/', loc, NULL) FROM m ORDER BY tbname, ts;
SELECT COUNT(*) FROM m WHERE LENGTH(NULL) IS NULL;
-- Errors keep their place: argument counts, a number where a string belongs.
SELECT LENGTH(NULL, NULL);
SELECT UPPER();
SELECT LOWER(5);
SELECT POSITION(NULL 'x');
-- Session functions: the user the statement runs as (planned by the client library or by
-- the server alike), the session database, the versions.
SELECT CURRENT_USER(), USER(), DATABASE(), SERVER_VERSION() = CLIENT_VERSION();
SELECT CURRENT_USER(), COUNT(*) FROM m;
SELECT tbname, USER() FROM m PARTITION BY tbname ORDER BY tbname LIMIT 1;
SELECT USER(1);
SELECT CURRENT_USER('root');
-- _qstart/_qend: the closed time range the WHERE clause gives the primary timestamp (a
-- strict bound moves by one unit of the precision), the same on every row.
SELECT _qstart, _qend, COUNT(*) FROM m WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:00.000';
SELECT _wstart, _qstart, _qend, COUNT(*), AVG(v) FROM m WHERE ts >= '2024-01-01 00:00:00.000' AND ts < '2024-01-01 00:01:00.000' INTERVAL(20s);
SELECT _wstart, _qstart, _qend, COUNT(*) FROM d2 WHERE ts BETWEEN '2024-01-01 00:00:00.000' AND '2024-01-01 00:00:59.999' INTERVAL(20s) FILL(NULL);
SELECT tbname, _wstart, _qend, MAX(v) FROM m WHERE ts > '2024-01-01 00:00:10.000' AND ts <= '2024-01-01 00:01:30.000' AND v > 1 PARTITION BY tbname INTERVAL(1m) ORDER BY tbname, _wstart;
SELECT _qstart, _qend, COUNT(*) FROM d1 WHERE ts > '2024-01-01 00:00:10.000';
SELECT _qend - _qstart, CAST(_qstart AS BIGINT), COUNT(*) FROM d1 WHERE ts > '2024-01-01 00:00:10.000' AND ts < '2024-01-01 00:01:00.000';
SELECT loc, _qstart, COUNT(*) FROM m WHERE ts <= '2024-01-01 00:00:30.000' GROUP BY loc ORDER BY loc;
SELECT _qstart, _qend, COUNT(*) FROM m;
SELECT _qstart;
SELECT _qend FROM (SELECT ts, v FROM m);
SELECT COUNT(*) FROM m WHERE ts > _qstart;
-- GROUP_CONCAT(values..., separator): each row's values concatenated, NULL rows skipped,
-- joined in time order (equal timestamps by value) whatever vnode holds the rows.
SELECT GROUP_CONCAT(s, ',') FROM m;
SELECT loc, GROUP_CONCAT(tbname, ':', s, ' '), COUNT(s) FROM m GROUP BY loc ORDER BY loc;
SELECT tbname, GROUP_CONCAT(s, '') FROM m PARTITION BY tbname ORDER BY tbname;
SELECT _wstart, GROUP_CONCAT(s, '-'), COUNT(*) FROM m INTERVAL(30s);
SELECT loc, _wstart, GROUP_CONCAT(UPPER(s), '+') FROM m WHERE ts < '2024-01-01 00:01:00.000' PARTITION BY loc INTERVAL(30s) ORDER BY loc, _wstart;
SELECT GROUP_CONCAT(s, ',') FROM m WHERE s IS NULL;
SELECT GROUP_CONCAT(s, ',') FROM (SELECT ts, s FROM m WHERE loc = 'a');
SELECT GROUP_CONCAT(s) FROM m;
SELECT GROUP_CONCAT(v, ',') FROM m;
SELECT GROUP_CONCAT(s, loc) FROM m;
-- LAG(x), as TDengine documents it: x, or on a NULL the partition's last non-NULL value
-- before it (NULL when there is none); numbers and strings; one row out per row in.
SELECT ts, v, LAG(v), s, LAG(s) FROM d1;
SELECT _rowts, LAG(v) * 2, LAG(v) + LAG(v) FROM d1 WHERE ts >= '2024-01-01 00:00:10.000';
SELECT tbname, ts, LAG(s) FROM m PARTITION BY tbname ORDER BY tbname, ts;
SELECT LAG(v, 1) FROM d1;
SELECT LAG(v), COUNT(*) FROM d1;
SELECT LAG(ts) FROM d1;
