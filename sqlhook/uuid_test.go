package sqlhook_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
	"github.com/idforge/idforge/tests/testreg"
)

// uuidColumn is the type a UUID key takes on tg, as gormplugin creates it.
func uuidColumn(tg target) string {
	return map[string]string{"postgres": "uuid", "mariadb": "BINARY(16)", "sqlite": "TEXT"}[tg.d.Name]
}

// uuidArg is u as tg's column compares it.
func uuidArg(tg target, u uuid.UUID) any {
	if tg.d.Name == "mariadb" {
		return u[:]
	}
	return u.String()
}

// TestUUID: a "uuidv7" marker puts a fresh UUIDv7 in a native uuid,
// BINARY(16) or TEXT key, reports it, and the row reads back by it; an
// int64 marker beside it still answers LastInsertId.
func TestUUID(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			db, err := sqlhook.Open(tg.d.Driver, tg.dsn, sqlhook.Settings{Registry: testreg.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			mustExec(t, db, "DROP TABLE IF EXISTS docs")
			mustExec(t, db, "CREATE TABLE docs (id "+uuidColumn(tg)+" PRIMARY KEY, seq BIGINT NOT NULL, name VARCHAR(40) NOT NULL)")
			ins := tg.d.Rebind("INSERT INTO docs (id, seq, name) VALUES (?, ?, ?)")

			u := sqlhook.Next("uuidv7", "")
			if !isZero(u.UUID()) || u.ID() != 0 {
				t.Fatalf("before the first execution: UUID %v, ID %d", u.UUID(), u.ID())
			}
			n := sqlhook.Next("snowflake", "")
			res := mustExec(t, db, ins, u, n, "ada")
			if lastID(t, res) != n.ID() || n.ID() == 0 {
				t.Errorf("LastInsertId %d, int64 marker %d", lastID(t, res), n.ID())
			}
			if u.UUID().Version() != 7 || u.ID() != 0 || !isZero(n.UUID()) {
				t.Errorf("UUID marker: %v (version %d), ID %d; int64 marker's UUID %v", u.UUID(), u.UUID().Version(), u.ID(), n.UUID())
			}
			first := u.UUID()
			checkRow(t, db, tg, first, "ada")

			// Only a UUID marker: the base driver's LastInsertId, or its error.
			if _, err := db.Exec(ins, u, 7, "bob"); err != nil {
				t.Fatal(err)
			}
			if u.UUID() == first {
				t.Error("a second execution reused the UUID")
			}
			checkRow(t, db, tg, u.UUID(), "bob")

			// A prepared statement draws anew each time.
			st, err := db.Prepare(ins)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			seen := map[uuid.UUID]bool{}
			for i := range 3 {
				if _, err := st.Exec(u, i, "prep"); err != nil {
					t.Fatal(err)
				}
				seen[u.UUID()] = true
			}
			var count int
			if err := db.QueryRow("SELECT COUNT(*) FROM docs WHERE name = 'prep'").Scan(&count); err != nil || count != 3 || len(seen) != 3 {
				t.Errorf("prepared: %d rows (%v), %d UUIDs", count, err, len(seen))
			}
		})
	}
}

func isZero(u uuid.UUID) bool { return u == uuid.UUID{} }

// checkRow reads the row keyed u back and compares its name and key.
func checkRow(t *testing.T, db *sql.DB, tg target, u uuid.UUID, name string) {
	t.Helper()
	var got uuid.UUID
	var gotName string
	if err := db.QueryRow(tg.d.Rebind("SELECT id, name FROM docs WHERE id = ?"), uuidArg(tg, u)).Scan(&got, &gotName); err != nil {
		t.Fatalf("row %v: %v", u, err)
	}
	if got != u || gotName != name {
		t.Errorf("row %v: key %v, name %q; want %q", u, got, gotName, name)
	}
}

// TestDated: a NextDated marker sends the chain's next formatted number,
// reports it, and the row reads back by it.
func TestDated(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), testdb.SQLite(t).Open(t), sqlstore.Settings{CreateTables: true, Init: true, ResetGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Machine: machine.Manual(1), StateDir: "off",
		Chain: segment.Settings{Step: 10, MaxWait: time.Second}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	shape := regexp.MustCompile(`^INV-\d{8}-\d{6}$`)

	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			db, err := sqlhook.Open(tg.d.Driver, tg.dsn, sqlhook.Settings{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			mustExec(t, db, "DROP TABLE IF EXISTS invoices")
			mustExec(t, db, "CREATE TABLE invoices (num VARCHAR(40) PRIMARY KEY, name VARCHAR(40) NOT NULL)")
			ins := tg.d.Rebind("INSERT INTO invoices (num, name) VALUES (?, ?)")

			m := sqlhook.NextDated("invoice", "INV-{yyyy}{MM}{dd}-{seq:6}")
			var prev string
			for _, name := range []string{"ada", "bob"} {
				mustExec(t, db, ins, m, name)
				num := m.Text()
				if !shape.MatchString(num) || num <= prev || m.ID() != 0 || !isZero(m.UUID()) {
					t.Errorf("dated marker: %q after %q, ID %d, UUID %v", num, prev, m.ID(), m.UUID())
				}
				var got string
				if err := db.QueryRow(tg.d.Rebind("SELECT name FROM invoices WHERE num = ?"), num).Scan(&got); err != nil || got != name {
					t.Errorf("row %q: %q, %v", num, got, err)
				}
				prev = num
			}
		})
	}
}

// TestDatedNeedsRegistry: a registry that has no dated chains fails the
// statement with engine.ErrUnknownGenerator, and a bad format with
// engine.ErrInvalidConfig; nothing is inserted.
func TestDatedNeedsRegistry(t *testing.T) {
	d := testdb.SQLite(t)
	db, err := sqlhook.Open(d.Driver, d.DSN, sqlhook.Settings{Registry: testreg.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, "CREATE TABLE invoices (num TEXT PRIMARY KEY)")
	_, err = db.Exec("INSERT INTO invoices (num) VALUES (?)", sqlhook.NextDated("invoice", "INV-{yyyy}-{seq:6}"))
	if !errors.Is(err, engine.ErrUnknownGenerator) {
		t.Errorf("without an idforge registry: %v", err)
	}

	st, err := sqlstore.Open(t.Context(), testdb.SQLite(t).Open(t), sqlstore.Settings{CreateTables: true, Init: true, ResetGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Machine: machine.Manual(1), StateDir: "off", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	db2, err := sqlhook.Open(d.Driver, d.DSN, sqlhook.Settings{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	_, err = db2.Exec("INSERT INTO invoices (num) VALUES (?)", sqlhook.NextDated("invoice", "INV-{seq:6}"))
	if !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a format without {yyyy}: %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM invoices").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows, %v", n, err)
	}
}
