-- Storage statements: COMP per database, ENCODE/COMPRESS/LEVEL per column (TDengine 3.3),
-- FLUSH and COMPACT, KEEP, and reads that merge memtable, STT and data files.
CREATE DATABASE st VGROUPS 2 PRECISION 'ms' KEEP 36500d DURATION 1d COMP 1 STT_TRIGGER 2 MAXROWS 100 MINROWS 10;
USE st;
CREATE STABLE m (ts TIMESTAMP, v DOUBLE ENCODE 'delta-d' COMPRESS 'zstd' LEVEL 'high', n BIGINT COMPRESS 'lz4', s VARCHAR(16) LEVEL 'low', b BOOL) TAGS (loc VARCHAR(8));
DESCRIBE m;
-- A bad codec choice names the column and the allowed values.
CREATE STABLE bad (ts TIMESTAMP, v DOUBLE COMPRESS 'snappy') TAGS (loc VARCHAR(8));
CREATE STABLE bad (ts TIMESTAMP, v DOUBLE ENCODE) TAGS (loc VARCHAR(8));
CREATE DATABASE badcomp COMP 7;
INSERT INTO a USING m TAGS ('x') VALUES ('2016-01-01 00:00:00.000', 1.5, 10, 'one', true) ('2016-01-01 00:00:10.000', 2.5, NULL, 'two', false) ('2016-01-02 00:00:00.000', NULL, 30, NULL, NULL);
INSERT INTO b USING m TAGS ('y') VALUES ('2016-01-01 00:00:05.000', 7.25, -4, 'b1', true);
FLUSH DATABASE st;
-- Newer writes of the same timestamps replace flushed rows; an older row lands out of order.
INSERT INTO a VALUES ('2016-01-01 00:00:10.000', 20.5, 20, 'TWO', true) ('2015-12-31 23:59:59.000', 0.5, 0, 'zero', false);
SELECT * FROM a;
FLUSH DATABASE st;
SELECT COUNT(*), SUM(n), MIN(v), MAX(v), AVG(v) FROM m;
COMPACT DATABASE st;
SELECT * FROM a;
SELECT tbname, COUNT(*), SUM(n), MAX(ts) FROM m PARTITION BY tbname ORDER BY tbname;
SELECT _wstart, COUNT(*), SUM(v) FROM m INTERVAL(1d) ORDER BY _wstart;
-- Too old for KEEP.
CREATE DATABASE short KEEP 1d DURATION 1d;
USE short;
CREATE STABLE m2 (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(8));
INSERT INTO t USING m2 TAGS ('z') VALUES ('2016-01-01 00:00:00.000', 1);
INSERT INTO t USING m2 TAGS ('z') VALUES (NOW, 1);
SELECT COUNT(*) FROM m2;
-- Grouping without aggregates and DISTINCT answered from block statistics (after the flush
-- above, whole blocks have them): each group once.
SELECT loc FROM st.m GROUP BY loc ORDER BY loc;
SELECT DISTINCT loc FROM st.m ORDER BY loc;
SELECT DISTINCT tbname, loc FROM st.m ORDER BY 1;
