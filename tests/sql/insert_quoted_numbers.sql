-- A quoted value for a numeric column or tag is the number it spells, as TDengine reads it
-- (clients that quote every value write unchanged); text that is no number of the column's
-- type is an error that names the column, the row and the text.
CREATE DATABASE qn VGROUPS 2;
USE qn;
CREATE STABLE m (ts TIMESTAMP, i INT, u BIGINT UNSIGNED, t TINYINT, d DOUBLE, f FLOAT, b BOOL, s VARCHAR(8)) TAGS (k INT, w DOUBLE);
INSERT INTO d1 USING m TAGS ('7', '-1.25') VALUES (1000, '12', '18446744073709551615', '-128', '2.5e3', '0.5', 'true', '42');
INSERT INTO d1 VALUES (2000, '-12', '0', '+7', '-0.125', '1', 'false', '');
SELECT ts, i, u, t, d, f, b, s FROM d1 ORDER BY ts;
SELECT tbname, k, w FROM m GROUP BY tbname, k, w;
INSERT INTO m (tbname, k, ts, i) VALUES ('d2', '8', 3000, '3');
SELECT tbname, k, i FROM m WHERE tbname = 'd2';
ALTER TABLE d2 SET TAG k = '9';
SELECT tbname, k FROM m WHERE tbname = 'd2' GROUP BY tbname, k;
-- Hexadecimal and binary integers, as TDengine writes them (in INSERT and in queries).
INSERT INTO d1 VALUES (3000, 0x7FFFFFFF, 0xFFFFFFFFFFFFFFFF, -0b1111111, 0x10, 0b1, true, 'hex');
SELECT i, u, t, d, f FROM d1 WHERE s = 'hex';
SELECT COUNT(*) FROM d1 WHERE i = 0x7fffffff AND t = -0B1111111;
INSERT INTO d1 VALUES (3001, 0x80000000, 0, 0, 0, 0, true, 'x');
INSERT INTO d1 VALUES (3001, 0x1G, 0, 0, 0, 0, true, 'x');
-- Errors: not a number of the type, out of range, empty, not finite; nothing is written.
INSERT INTO d1 VALUES (4000, '12a', 0, 0, 0, 0, true, 'x');
INSERT INTO d1 VALUES (4000, '1.5', 0, 0, 0, 0, true, 'x');
INSERT INTO d1 VALUES (4000, '2147483648', 0, 0, 0, 0, true, 'x');
INSERT INTO d1 VALUES (4000, 1, '-1', 0, 0, 0, true, 'x');
INSERT INTO d1 VALUES (4000, 1, 0, '', 0, 0, true, 'x');
INSERT INTO d1 VALUES (4000, 1, 0, 0, 'nan', 0, true, 'x');
INSERT INTO d1 VALUES (4000, 1, 0, 0, 0, ' 1', true, 'x');
INSERT INTO d3 USING m TAGS ('7x', 0) VALUES (4000, 1, 0, 0, 0, 0, true, 'x');
ALTER TABLE d2 SET TAG w = 'high';
SELECT COUNT(*) FROM m WHERE ts = 4000;
