-- The secondary index (account_id, key) of one insert sequence (1,000,000 rows in key order, 100,000
-- accounts drawn with RAND(7)) under primary keys of 8 to 32 bytes: mysql -uroot < probe.sql (MariaDB, needs the
-- Sequence engine; drops its database first). Results: result.txt.
DROP DATABASE IF EXISTS idforge_fill_probe;
CREATE DATABASE idforge_fill_probe;
USE idforge_fill_probe;
CREATE TABLE src (id BIGINT PRIMARY KEY, acct BIGINT NOT NULL) ENGINE=InnoDB;
INSERT INTO src SELECT seq, 1 + FLOOR(RAND(7) * 100000) FROM seq_1_to_1000000;
CREATE TABLE w8 (id BINARY(8) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w8 SELECT UNHEX(LPAD(HEX(id), 16, '0')), acct FROM src ORDER BY id;
CREATE TABLE w10 (id BINARY(10) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w10 SELECT UNHEX(LPAD(HEX(id), 20, '0')), acct FROM src ORDER BY id;
CREATE TABLE w12 (id BINARY(12) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w12 SELECT UNHEX(LPAD(HEX(id), 24, '0')), acct FROM src ORDER BY id;
CREATE TABLE w14 (id BINARY(14) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w14 SELECT UNHEX(LPAD(HEX(id), 28, '0')), acct FROM src ORDER BY id;
CREATE TABLE w16 (id BINARY(16) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w16 SELECT UNHEX(LPAD(HEX(id), 32, '0')), acct FROM src ORDER BY id;
CREATE TABLE w18 (id BINARY(18) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w18 SELECT UNHEX(LPAD(HEX(id), 36, '0')), acct FROM src ORDER BY id;
CREATE TABLE w20 (id BINARY(20) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w20 SELECT UNHEX(LPAD(HEX(id), 40, '0')), acct FROM src ORDER BY id;
CREATE TABLE w24 (id BINARY(24) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w24 SELECT UNHEX(LPAD(HEX(id), 48, '0')), acct FROM src ORDER BY id;
CREATE TABLE w32 (id BINARY(32) PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB;
INSERT INTO w32 SELECT UNHEX(LPAD(HEX(id), 64, '0')), acct FROM src ORDER BY id;
CREATE TABLE bi (id BIGINT PRIMARY KEY, acct BIGINT NOT NULL, KEY a (acct)) ENGINE=InnoDB; INSERT INTO bi SELECT id, acct FROM src ORDER BY id;
ANALYZE TABLE bi, w8, w10, w12, w14, w16, w18, w20, w24, w32;
SELECT table_name, stat_value AS leaf FROM mysql.innodb_index_stats WHERE database_name='idforge_fill_probe' AND index_name='a' AND stat_name='n_leaf_pages' ORDER BY table_name;
DROP DATABASE idforge_fill_probe;
