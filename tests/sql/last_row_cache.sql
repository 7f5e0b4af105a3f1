-- LAST_ROW / LAST with the last-row cache, and ALTER DATABASE changing CACHEMODEL live.
CREATE DATABASE lr VGROUPS 2 CACHEMODEL 'none';
USE lr;
CREATE STABLE readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, fuel DOUBLE) TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30));
INSERT INTO r1 USING readings TAGS ('truck_1', 'East', 'Derek') VALUES ('2016-01-01 00:00:00.000', 1.0, 2.0, 0.5) ('2016-01-01 00:00:10.000', 1.5, 2.5, NULL) ('2016-01-01 00:00:05.000', 9.0, 9.0, 0.05);
INSERT INTO r2 USING readings TAGS ('truck_2', 'East', 'Andy') VALUES ('2016-01-01 00:00:00.000', 3.0, 4.0, 0.08) ('2016-01-01 00:00:10.000', 3.5, 4.5, 0.9);
INSERT INTO r3 USING readings TAGS ('truck_3', 'West', 'Seth') VALUES ('2016-01-01 00:00:20.000', 5.0, 6.0, NULL);
SELECT last_row(ts), name, driver, latitude, longitude FROM readings WHERE fleet = 'East' PARTITION BY name, driver ORDER BY name;
SELECT last_row(ts), last_row(latitude), last_row(longitude) FROM readings WHERE name IN ('truck_2') GROUP BY name;
-- The latest row among those matching the filter (low-fuel).
SELECT last_row(ts), name, fuel FROM readings WHERE fuel <= 0.1 GROUP BY name ORDER BY name;
SELECT name, last(fuel), last(ts) FROM readings GROUP BY name ORDER BY name;
ALTER DATABASE lr CACHEMODEL 'both' CACHESIZE 4;
SELECT last_row(ts), name, driver, latitude, longitude FROM readings WHERE fleet = 'East' PARTITION BY name, driver ORDER BY name;
SELECT name, last(fuel), last(ts) FROM readings GROUP BY name ORDER BY name;
-- A write older than the cached row does not replace it; one of the same ts does.
INSERT INTO r1 VALUES ('2016-01-01 00:00:01.000', 7.0, 7.0, 0.01);
INSERT INTO r2 VALUES ('2016-01-01 00:00:10.000', 3.75, 4.75, NULL);
SELECT last_row(ts), name, latitude, fuel FROM readings PARTITION BY name ORDER BY name;
SELECT name, last(fuel) FROM readings GROUP BY name ORDER BY name;
SELECT last_row(ts), name, fuel FROM readings WHERE fuel <= 0.1 GROUP BY name ORDER BY name;
DROP TABLE r3;
SELECT count(*) FROM (SELECT last_row(ts), name FROM readings PARTITION BY name);
ALTER DATABASE lr VGROUPS 4;
ALTER DATABASE lr CACHEMODEL 'sometimes';
ALTER DATABASE nosuchdb KEEP 10d;
