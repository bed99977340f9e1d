-- idforge ID tables for SQLite (3.35 or later: the stores use RETURNING).
--
-- Times are Unix milliseconds in BIGINT columns, the same in every dialect.
-- Several connections or processes writing one file need a busy timeout
-- (for example _pragma=busy_timeout(10000) in the DSN).

-- One row per segment sequence. A fetch advances last_max_id by step in one
-- statement: UPDATE ... SET last_max_id = last_max_id + ?1 ... RETURNING
-- last_max_id; SQLite runs it under its database write lock.
CREATE TABLE IF NOT EXISTS idforge_segment (
    name            VARCHAR(128) NOT NULL PRIMARY KEY,
    last_max_id     BIGINT NOT NULL,
    step            BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    last_fetch_time BIGINT NOT NULL
);

-- One row per machine ID ever handed out in a namespace; rows are reused,
-- never deleted. instance_id is the owner, NULL when the row is free.
-- holder is the secret of the process holding the row, new at every claim
-- and NULL once released: heartbeats and releases must present it, so two
-- processes with one instance ID are told apart, and a stable owner's row
-- is not claimed for a second process while its holder heartbeats. A row
-- may be taken by another instance when it is free, or when its owner is not
-- stable and has not heartbeated (last_timestamp, the newest ID timestamp
-- under this machine ID) for the safe-guard duration; stable owners keep
-- their row across restarts. A free row stamped ahead of the claimer's
-- clock is taken only once no new number is left: its new owner would have
-- to wait it out. Claiming a row copies last_timestamp into
-- prev_timestamp, which the new owner waits out before issuing IDs, and
-- raises last_timestamp to the claim time, so the row cannot be reclaimed
-- for the safe-guard duration. distribute_time and revert_time record when
-- the row was last claimed and released.
--
-- Double allocation is impossible by construction:
--   * PRIMARY KEY (namespace, machine_id): a machine ID is one row, so it
--     has at most one owner (instance_id) at any moment;
--   * UNIQUE (namespace, instance_id): an instance holds at most one machine
--     ID. Free rows have instance_id NULL, and NULLs never collide in a
--     unique constraint, so any number of rows can be free.
-- A new machine ID is an INSERT that the primary key turns away when
-- another instance inserted the same number first. SQLite runs writers one
-- at a time, so a claim, one UPDATE, sees and changes the newest state of
-- the table. Heartbeats and releases are UPDATEs whose WHERE clause
-- requires the owner and its holder, so an instance that lost its row
-- cannot touch it. version is bumped by every write.
CREATE TABLE IF NOT EXISTS idforge_machine (
    namespace       VARCHAR(128) NOT NULL,
    machine_id      BIGINT NOT NULL,
    instance_id     VARCHAR(255),
    holder          VARCHAR(64),
    stable          BOOLEAN NOT NULL DEFAULT FALSE,
    last_timestamp  BIGINT NOT NULL DEFAULT 0,
    prev_timestamp  BIGINT NOT NULL DEFAULT 0,
    distribute_time BIGINT NOT NULL DEFAULT 0,
    revert_time     BIGINT NOT NULL DEFAULT 0,
    version         BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, machine_id),
    CONSTRAINT idforge_machine_instance UNIQUE (namespace, instance_id)
);

-- The store's epoch: one row (name 'epoch') whose value is a token written
-- when the store's state is first created, "<Unix ms of its creation>.<random
-- hex>". Every statement that hands out or heartbeats checks it in the same
-- statement; a missing or different token means the tables were emptied or
-- recreated (the store forgot what it handed out), and idforge stops issuing
-- from what it holds and waits a grace period before handing out again.
CREATE TABLE IF NOT EXISTS idforge_meta (
    name  VARCHAR(64) NOT NULL PRIMARY KEY,
    value VARCHAR(255) NOT NULL
);
