package shardtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// Blocker holds a lock on one table of a MariaDB or PostgreSQL database,
// so that an INSERT into it waits, and finds, kills and waits out the
// session that waits: a connection cut mid-batch at a point the test
// chose, with no timing involved.
type Blocker struct {
	d     testdb.DB
	admin *sql.DB
	conn  *sql.Conn // holds the lock
}

// Lock locks table (quoted for d) of d against writes until Unlock.
func Lock(t *testing.T, d testdb.DB, table string) *Blocker {
	t.Helper()
	b := holder(t, d)
	ctx := context.Background()
	conn := b.conn
	q := "LOCK TABLES " + table + " WRITE"
	if d.Name == "postgres" {
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		q = "LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"
	}
	if _, err := conn.ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
	return b
}

// holder is a Blocker of d with its own connection, closed when the test
// ends, that holds no lock yet.
func holder(t *testing.T, d testdb.DB) *Blocker {
	t.Helper()
	b := &Blocker{d: d, admin: d.Open(t)}
	conn, err := b.admin.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.conn = conn
	t.Cleanup(func() { conn.Close() })
	return b
}

// HoldCommits makes every COMMIT of a transaction that inserted into
// table (quoted) of PostgreSQL database d wait, in a deferred trigger,
// for an advisory lock the Blocker holds until Unlock.
func HoldCommits(t *testing.T, d testdb.DB, table string) *Blocker {
	t.Helper()
	b := holder(t, d)
	for _, q := range []string{
		"CREATE FUNCTION hold_commit() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(7); RETURN NULL; END $$ LANGUAGE plpgsql",
		"CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON " + table + " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit()",
		"BEGIN",
		"SELECT pg_advisory_xact_lock(7)",
	} {
		if _, err := b.conn.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// Unlock releases the lock (Lock's or HoldCommits').
func (b *Blocker) Unlock(t *testing.T) {
	t.Helper()
	q := "UNLOCK TABLES"
	if b.d.Name == "postgres" {
		q = "ROLLBACK"
	}
	if _, err := b.conn.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

// Waiting waits for a session of the database blocked on a lock in a
// statement starting with verb ("INSERT", "COMMIT") and returns its id
// (MariaDB's connection id, PostgreSQL's backend pid).
func (b *Blocker) Waiting(t *testing.T, verb string) int64 {
	t.Helper()
	q := "SELECT id FROM information_schema.processlist WHERE db = ? AND info LIKE ? AND state LIKE '%lock%'"
	if b.d.Name == "postgres" {
		q = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query ILIKE $2 AND wait_event_type = 'Lock'"
	}
	var id int64
	b.until(t, "a session blocked in "+verb, func() (bool, error) {
		err := b.admin.QueryRow(q, b.d.Database, verb+"%").Scan(&id)
		if err == sql.ErrNoRows {
			return false, nil
		}
		return err == nil, err
	})
	return id
}

// Kill ends session id, as a dropped connection or an operator would.
func (b *Blocker) Kill(t *testing.T, id int64) {
	t.Helper()
	q := fmt.Sprintf("KILL %d", id)
	if b.d.Name == "postgres" {
		q = fmt.Sprintf("SELECT pg_terminate_backend(%d)", id)
	}
	if _, err := b.admin.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// Idle waits until session id runs no statement: it ended, or went idle.
func (b *Blocker) Idle(t *testing.T, id int64) {
	t.Helper()
	q := "SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND command = 'Query'"
	if b.d.Name == "postgres" {
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'"
	}
	b.until(t, fmt.Sprintf("session %d to go idle", id), func() (bool, error) {
		var n int
		err := b.admin.QueryRow(q, id).Scan(&n)
		return n == 0, err
	})
}

// until polls cond until it holds. The wait is for an event, not a
// duration: only the test binary's deadline (-timeout) bounds it, and the
// test fails shortly before, naming what never happened.
func (b *Blocker) until(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// KillOthers ends every other session of the database, as a server
// restart or an operator would, and waits until they are gone: the
// connections pooled for it are dead, and their pools do not know yet.
func KillOthers(t *testing.T, d testdb.DB) {
	t.Helper()
	b := holder(t, d)
	ctx := context.Background()
	others := "SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()"
	if d.Name == "postgres" {
		others = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
		if _, err := b.conn.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"); err != nil {
			t.Fatal(err)
		}
	} else {
		rows, err := b.conn.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()")
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := b.conn.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.until(t, "the killed sessions to end", func() (bool, error) {
		var n int
		err := b.conn.QueryRowContext(ctx, others).Scan(&n)
		return n == 0, err
	})
}
