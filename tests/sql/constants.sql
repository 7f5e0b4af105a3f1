-- SELECT without FROM: constants, expressions, and the session and server functions that
-- tools (the taos shell, Grafana's TDengine datasource) ask a server before anything else.
-- No database is selected yet.
SELECT 1;
SELECT 1 + 2 * 3 AS seven, 'tidal' AS name, CAST(2.7 AS INT), FLOOR(-2.5), ROUND(2.5), ABS(-4);
SELECT CONCAT('a', 'b', 'c'), UPPER('iot'), LENGTH('truck_1'), CASE WHEN 2 > 1 THEN 'yes' ELSE 'no' END;
SELECT SERVER_STATUS(), TIMEZONE();
SELECT LENGTH(SERVER_VERSION()) > 0, SERVER_VERSION() = CLIENT_VERSION();
SELECT DATABASE();
SELECT NOW() >= TODAY(), NOW() - 1d < TODAY(), TIMETRUNCATE(TODAY(), 1d) = TODAY(), NOW() + 1h > NOW();
SELECT CAST('2024-01-01 00:00:00' AS TIMESTAMP) + 1d;
SELECT 0x10 + 0b11, -0XfF, 0xFFFFFFFFFFFFFFFF;
SELECT COUNT(*);
-- A SELECT without FROM as a subquery.
SELECT a + b AS c FROM (SELECT 1 AS a, 2 AS b);
SELECT x FROM (SELECT 3 AS x) WHERE x > 5;
-- Errors: what cannot work without a FROM clause, and a misspelt FROM.
SELECT *;
SELECT LAST_ROW(*);
SELECT velocity;
SELECT 1 INTERVAL(1s);
SELECT velocity FORM readings;
SELECT 1 WHERE 1 = 1;
SELECT DATABASE(1);
CREATE DATABASE c VGROUPS 2 PRECISION 'us';
USE c;
SELECT DATABASE(), CONCAT(DATABASE(), '.readings');
-- NOW() and TODAY() in the session database's precision.
SELECT CAST(TODAY() AS BIGINT) % 86400000000 = 0;
SELECT CAST('2024-01-01 00:00:00.000001' AS TIMESTAMP), CAST('1704067200000000' AS TIMESTAMP);
SELECT CAST('yesterday' AS TIMESTAMP);
