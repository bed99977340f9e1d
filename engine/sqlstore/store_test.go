package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/schema"
	"github.com/idforge/idforge/tests/testdb"
)

// hiddenDriver hides the real driver's type, as instrumentation wrappers do.
type hiddenDriver struct{ driver.Driver }

func hiddenDB(t *testing.T, d testdb.DB) *sql.DB {
	t.Helper()
	db := sql.OpenDB(dsnConnector{d.DSN, hiddenDriver{d.Open(t).Driver()}})
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenDetectsDialect(t *testing.T) {
	ctx := context.Background()
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		want, err := schema.ParseDialect(d.Driver)
		if err != nil {
			t.Fatal(err)
		}
		if got := openStore(t, d).Dialect(); got != want {
			t.Errorf("by driver type: %v, want %v", got, want)
		}
		// Behind a wrapper Open asks the server...
		hidden := hiddenDB(t, d)
		s := storeOn(t, hidden)
		if s.Dialect() != want {
			t.Errorf("by asking the server: %v, want %v", s.Dialect(), want)
		}
		seg, err := s.Segment("hidden")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := seg.NextMaxID(ctx, 3); err != nil || got != 3 {
			t.Errorf("NextMaxID through the wrapper = %d, %v", got, err)
		}
		// ...or is told.
		m := storeOn(t, hidden, sqlstore.Settings{Dialect: want})
		if st := distribute(t, m, unstable("hidden"), 4); st.MachineID != 0 {
			t.Errorf("first machine ID through the wrapper = %d", st.MachineID)
		}
	})
}

func TestTablePrefix(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			s := openStore(t, d, sqlstore.Settings{TablePrefix: "app_", CreateTables: true})
			seg, err := s.Segment("p")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := seg.NextMaxID(ctx, 7); err != nil {
				t.Fatal(err)
			}
			distribute(t, s, unstable("p"), 4)
			db := d.Open(t)
			var segMax, machines int64
			if err := db.QueryRowContext(ctx, "SELECT last_max_id FROM app_segment").Scan(&segMax); err != nil || segMax != 7 {
				t.Errorf("app_segment: %d, %v", segMax, err)
			}
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM app_machine").Scan(&machines); err != nil || machines != 1 {
				t.Errorf("app_machine: %d rows, %v", machines, err)
			}
			// The default tables were never created.
			if _, err := db.ExecContext(ctx, "SELECT 1 FROM idforge_segment"); err == nil {
				t.Error("idforge_segment exists")
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t).Open(t)
	for name, opt := range map[string]sqlstore.Settings{
		"prefix":  sqlstore.Settings{TablePrefix: "app-"},
		"start":   sqlstore.Settings{Start: -1},
		"dialect": sqlstore.Settings{Dialect: schema.Dialect(9)},
	} {
		if _, err := sqlstore.Open(ctx, db, opt); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: Open err = %v; want ErrInvalidConfig", name, err)
		}
	}
	if _, err := sqlstore.Open(ctx, nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil db: err = %v", err)
	}
	s := storeOn(t, db, sqlstore.Settings{CreateTables: true})
	for _, name := range []string{"", strings.Repeat("n", 129)} {
		if _, err := s.Segment(name); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("segment name of %d bytes: err = %v", len(name), err)
		}
	}
}

// Windows whose sums overflow are refused at Open naming the field: a
// RideThrough of the largest Duration once made the reset grace (the window
// plus 1 s) wrap negative, so a newcomer on a wiped store waited for
// nothing and issued on a cut-off process's machine ID.
func TestOpenRefusesOverflowingWindows(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t).Open(t)
	for _, c := range []struct {
		set   sqlstore.Settings
		field string
	}{
		{sqlstore.Settings{RideThrough: math.MaxInt64}, "sqlstore.Settings.RideThrough"},
		{sqlstore.Settings{RideThrough: 24*time.Hour + time.Millisecond}, "sqlstore.Settings.RideThrough"},
		{sqlstore.Settings{ResetGrace: math.MaxInt64}, "sqlstore.Settings.ResetGrace"},
		{sqlstore.Settings{ResetGrace: 48*time.Hour + 1}, "sqlstore.Settings.ResetGrace"},
	} {
		c.set.CreateTables = true
		s, err := sqlstore.Open(ctx, db, c.set)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Open(%+v) = %v; want ErrInvalidConfig naming %s", c.set, err, c.field)
		}
	}
	// The bounds themselves open, and so does the most negative grace (none).
	s := storeOn(t, db, sqlstore.Settings{CreateTables: true, RideThrough: 24 * time.Hour, ResetGrace: math.MinInt64})
	if got := s.Terms().RideThrough; got != 24*time.Hour {
		t.Errorf("Terms().RideThrough = %v; want 24h", got)
	}
	if got := s.Terms().ResetGrace; got >= 0 {
		t.Errorf("Terms().ResetGrace = %v; want none (negative)", got)
	}
	if _, err := sqlstore.AdminOf(s).SetRideThrough(ctx, math.MaxInt64, true); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("SetRideThrough(MaxInt64) = %v; want ErrInvalidConfig", err)
	}
}

// Names with a NUL or another control byte, or broken UTF-8, are refused up
// front on every dialect: PostgreSQL refuses a NUL in text with an error
// that read as "store unavailable" and was retried.
func TestControlBytesInNamesRefused(t *testing.T) {
	forEachDB(t, func(t *testing.T, d testdb.DB) {
		ctx := context.Background()
		s := openStore(t, d)
		for _, name := range []string{"order\x00", "a\x00b", "line\nbreak", "del\x7f", "\xff"} {
			if _, err := s.Segment(name); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "segment name") {
				t.Errorf("Segment(%q) = %v; want ErrInvalidConfig naming the segment name", name, err)
			}
			for _, inst := range []machine.Instance{{Namespace: name, ID: "a"}, {Namespace: "ns", ID: name}} {
				st, err := s.Distribute(ctx, inst, 10, time.Minute)
				if !errors.Is(err, engine.ErrInvalidConfig) || errors.Is(err, engine.ErrStoreUnavailable) ||
					!strings.Contains(err.Error(), "namespace") && !strings.Contains(err.Error(), "instance ID") {
					t.Errorf("Distribute(%+v) = %+v, %v; want ErrInvalidConfig naming the field", inst, st, err)
				}
			}
			if _, err := sqlstore.AdminOf(s).RaiseCounter(ctx, name, 1); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Errorf("RaiseCounter(%q) = %v; want ErrInvalidConfig", name, err)
			}
		}
	})
}

// TestReplicasOpenANewSQLiteFileTogether: processes that open one new file
// with journal_mode(WAL) at the same moment race to convert it, and the
// losers get SQLITE_BUSY at once, ignoring the busy timeout; Open must wait
// that out instead of failing. The race is rare per start, so this opens
// many new files, each from several pools at once.
func TestReplicasOpenANewSQLiteFileTogether(t *testing.T) {
	ctx := context.Background()
	for range 60 {
		d := testdb.SQLite(t)
		var wg sync.WaitGroup
		for range 4 {
			db := d.Open(t)
			wg.Go(func() {
				s, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
				if err != nil {
					t.Errorf("Open on a new file with others: %v", err)
					return
				}
				s.Close()
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
