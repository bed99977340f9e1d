package shardtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/idforge/idforge/internal/testdb"
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
	ctx := context.Background()
	b := &Blocker{d: d, admin: d.Open(t)}
	conn, err := b.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.conn = conn
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
	t.Cleanup(func() { b.conn.Close() })
	return b
}

// Unlock releases the lock.
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

// Waiting waits for a session of the database blocked on an INSERT and
// returns its id (MariaDB's connection id, PostgreSQL's backend pid).
func (b *Blocker) Waiting(t *testing.T) int64 {
	t.Helper()
	q := "SELECT id FROM information_schema.processlist WHERE db = ? AND info LIKE 'INSERT%' AND state LIKE '%lock%'"
	if b.d.Name == "postgres" {
		q = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE 'INSERT%'"
	}
	var id int64
	b.until(t, "a session blocked on an INSERT", func() (bool, error) {
		err := b.admin.QueryRow(q, b.d.Database).Scan(&id)
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

// until polls cond until it holds; the test's deadline bounds the wait.
func (b *Blocker) until(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
