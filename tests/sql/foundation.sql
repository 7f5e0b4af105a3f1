-- The statements of the foundation issue, end to end through tidal shell.
CREATE DATABASE iot VGROUPS 4 PRECISION 'ms' KEEP 36500d DURATION 10d;
USE iot;
CREATE STABLE readings (ts TIMESTAMP, latitude DOUBLE, longitude DOUBLE, elevation DOUBLE,
  velocity DOUBLE, heading DOUBLE, grade DOUBLE, fuel_consumption DOUBLE)
  TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30),
  device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE);
CREATE STABLE diagnostics (ts TIMESTAMP, fuel_state DOUBLE, current_load DOUBLE, status BIGINT)
  TAGS (name VARCHAR(30), fleet VARCHAR(30), driver VARCHAR(30), model VARCHAR(30),
  device_version VARCHAR(30), load_capacity DOUBLE, fuel_capacity DOUBLE, nominal_fuel_consumption DOUBLE);
CREATE TABLE r_truck_1 USING readings TAGS ('truck_1', 'South', 'Albert', 'F-150', 'v1.5', 2000, 200, 15);
INSERT INTO r_truck_1 VALUES (1451606400000, 1.5, 2.5, 100, 20, 90, 5, 25) (1451606410000, 1.6, 2.6, 110, 30, 91, 6, 24);
INSERT INTO r_truck_2 USING readings TAGS ('truck_2', 'North', 'Derek', 'G-2000', 'v2.0', 5000, 300, 19) VALUES (1451606400000, 10.5, 20.5, 500, 50, 180, 10, 30);
INSERT INTO r_truck_1 VALUES (1451606420000, 1.7, 2.7, 120, 40, 92, 7, 23) r_truck_2 VALUES (1451606410000, 10.6, 20.6, 510, 60, 181, 11, 31);
INSERT INTO r_truck_1 (ts, velocity) VALUES (1451606430000, 45);
-- a time string, an out-of-order row and a repeated timestamp (the later write wins)
INSERT INTO r_truck_1 VALUES ('2016-01-01 00:00:05.000', 1.55, 2.55, 105, 25, 90, 5, 24.5);
INSERT INTO r_truck_2 VALUES (1451606400000, 10.0, 20.0, 499, 55, 179, 9, 29);
SELECT * FROM r_truck_1 WHERE ts >= 1451606400000 AND ts < 1451606500000;
SELECT * FROM r_truck_2;
SELECT COUNT(*), AVG(velocity), MAX(velocity), MIN(ts) FROM readings WHERE fleet = 'South';
SELECT COUNT(*), AVG(velocity), MAX(velocity), MIN(ts) FROM readings;
SELECT LAST_ROW(*) FROM readings PARTITION BY tbname;
SELECT tbname, COUNT(*) FROM readings GROUP BY tbname ORDER BY tbname;
SELECT COUNT(*) FROM iot.readings WHERE ts >= '2016-01-01 00:00:10.000';
SHOW STABLES;
SHOW TABLES;
DESCRIBE readings;
DESCRIBE r_truck_1;
DROP TABLE r_truck_2;
SHOW TABLES;
SELECT COUNT(*) FROM readings;
DROP STABLE diagnostics;
SHOW STABLES;
DROP DATABASE iot;
