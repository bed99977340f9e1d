-- idforge ID tables for MySQL and MariaDB (InnoDB).
--
-- Times are Unix milliseconds in BIGINT columns, the same in every dialect.
-- Names are VARBINARY so they compare byte for byte, as they do on
-- PostgreSQL and SQLite: the default collations would make 'Order' and
-- 'order' one segment, and even utf8mb4_bin ignores trailing spaces.

-- One row per segment sequence. A fetch advances last_max_id by step in one
-- statement: UPDATE ... SET last_max_id = LAST_INSERT_ID(last_max_id + ?)
-- and the new maximum comes back in the same reply as the insert ID.
CREATE TABLE IF NOT EXISTS idforge_segment (
    name            VARBINARY(128) NOT NULL,
    last_max_id     BIGINT NOT NULL,
    step            BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    last_fetch_time BIGINT NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB;

-- One row per machine ID ever handed out in a namespace; rows are reused,
-- never deleted. instance_id is the owner, NULL when the row is free. A row
-- may be taken by another instance when it is free, or when its owner is not
-- stable and has not heartbeated (last_timestamp, the newest ID timestamp
-- under this machine ID) for the safe-guard duration; stable owners keep
-- their row across restarts. The next owner waits until its clock passes
-- last_timestamp before issuing IDs. distribute_time and revert_time record
-- when the row was last claimed and released.
--
-- Double allocation is impossible by construction:
--   * PRIMARY KEY (namespace, machine_id): a machine ID is one row, so it
--     has at most one owner (instance_id) at any moment;
--   * UNIQUE (namespace, instance_id): an instance holds at most one machine
--     ID. Free rows have instance_id NULL, and NULLs never collide in a
--     unique key, so any number of rows can be free.
-- A new machine ID is an INSERT that the primary key turns away when
-- another instance inserted the same number first. Every claim, heartbeat
-- and release is a single UPDATE whose WHERE clause re-checks the owner (or
-- that the row is free or expired), so of two racing instances exactly one
-- changes the row. version is bumped by every write so MySQL's affected-row
-- count (rows changed, not rows matched) is 1 exactly when the row matched.
CREATE TABLE IF NOT EXISTS idforge_machine (
    namespace       VARBINARY(128) NOT NULL,
    machine_id      INT NOT NULL,
    instance_id     VARBINARY(255) NULL,
    stable          BOOLEAN NOT NULL DEFAULT FALSE,
    last_timestamp  BIGINT NOT NULL DEFAULT 0,
    distribute_time BIGINT NOT NULL DEFAULT 0,
    revert_time     BIGINT NOT NULL DEFAULT 0,
    version         BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, machine_id),
    UNIQUE KEY idforge_machine_instance (namespace, instance_id)
) ENGINE = InnoDB;
