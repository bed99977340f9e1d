package schema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/internal/testdb"
)

func TestParseDialect(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Dialect
	}{
		{"mysql", MySQL}, {"MariaDB", MySQL}, {"postgres", Postgres}, {"postgresql", Postgres},
		{"pgx", Postgres}, {"sqlite", SQLite}, {" SQLite3 ", SQLite},
	} {
		got, err := ParseDialect(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseDialect(got.String()); err != nil || back != got {
			t.Errorf("ParseDialect(%v.String()) = %v, %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "oracle", "sqlserver", "my sql"} {
		if _, err := ParseDialect(bad); !errors.Is(err, ErrUnknownDialect) || !strings.Contains(err.Error(), "mariadb") {
			t.Errorf("ParseDialect(%q) error = %v; want ErrUnknownDialect listing the names", bad, err)
		}
	}
	if s := Dialect(0).String(); s != "Dialect(0)" {
		t.Errorf("Dialect(0).String() = %q", s)
	}
}

func TestTypeDialect(t *testing.T) {
	for _, tc := range []struct {
		pkg, name string
		want      Dialect
	}{
		{"github.com/go-sql-driver/mysql", "MySQLDriver", MySQL},
		{"github.com/jackc/pgx/v5/stdlib", "Driver", Postgres},
		{"github.com/jackc/pgx/v4/stdlib", "Driver", Postgres},
		{"github.com/lib/pq", "Driver", Postgres},
		{"github.com/glebarez/go-sqlite", "Driver", SQLite},
		{"modernc.org/sqlite", "Driver", SQLite},
		{"github.com/mattn/go-sqlite3", "SQLiteDriver", SQLite},
	} {
		if got, err := typeDialect(tc.pkg, tc.name); err != nil || got != tc.want {
			t.Errorf("typeDialect(%s.%s) = %v, %v; want %v", tc.pkg, tc.name, got, err, tc.want)
		}
	}
	if _, err := typeDialect("example.com/oracle", "Driver"); !errors.Is(err, ErrUnknownDialect) {
		t.Errorf("unknown driver: err = %v", err)
	}
	if _, err := DriverDialect(nil); !errors.Is(err, ErrUnknownDialect) {
		t.Errorf("nil driver: err = %v", err)
	}
}

func TestNewTables(t *testing.T) {
	tb, err := NewTables("billing_")
	if err != nil {
		t.Fatal(err)
	}
	if tb.Segment() != "billing_segment" || tb.Machine() != "billing_machine" {
		t.Errorf("names = %s, %s", tb.Segment(), tb.Machine())
	}
	var zero Tables
	if zero.Segment() != "idforge_segment" || zero.Machine() != "idforge_machine" || zero.Prefix() != "idforge_" {
		t.Errorf("zero Tables = %s, %s", zero.Segment(), zero.Machine())
	}
	for _, bad := range []string{"", "1x_", "a-b", "a b", "x;drop table y;", "schema.t_", "é_", strings.Repeat("a", 41)} {
		if _, err := NewTables(bad); !errors.Is(err, ErrInvalidPrefix) {
			t.Errorf("NewTables(%q) err = %v; want ErrInvalidPrefix", bad, err)
		}
	}
}

func TestDDL(t *testing.T) {
	tb, err := NewTables("app_")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Dialects {
		ddl := DDL(d)
		for _, want := range []string{"CREATE TABLE IF NOT EXISTS idforge_segment", "CREATE TABLE IF NOT EXISTS idforge_machine",
			"PRIMARY KEY (namespace, machine_id)", "(namespace, instance_id)", "last_max_id", "last_timestamp"} {
			if !strings.Contains(ddl, want) {
				t.Errorf("DDL(%v) lacks %q", d, want)
			}
		}
		custom := tb.DDL(d)
		if strings.Contains(custom, "idforge_") || !strings.Contains(custom, "app_segment") || !strings.Contains(custom, "app_machine") {
			t.Errorf("prefixed DDL(%v) still names idforge_ tables or lacks app_ ones", d)
		}
		stmts := tb.Statements(d)
		if len(stmts) != 2 {
			t.Fatalf("Statements(%v) = %d statements, want 2:\n%s", d, len(stmts), strings.Join(stmts, "\n----\n"))
		}
		for _, s := range stmts {
			if !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS app_") || strings.Contains(s, "--") || strings.Contains(s, ";") {
				t.Errorf("Statements(%v): malformed statement:\n%s", d, s)
			}
		}
	}
	if DDL(0) != "" || len(Tables{}.Statements(Dialect(9))) != 0 {
		t.Error("an invalid dialect has DDL")
	}
}

// hiddenDriver hides the real driver's type, as instrumentation wrappers
// do, so Detect must ask the server.
type hiddenDriver struct{ driver.Driver }

func TestDetect(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			want, err := ParseDialect(d.Driver)
			if err != nil {
				t.Fatal(err)
			}
			db := d.Open(t)
			if got, err := Detect(ctx, db); err != nil || got != want {
				t.Errorf("Detect = %v, %v; want %v", got, err, want)
			}
			hidden := sql.OpenDB(hiddenConnector{dsn: d.DSN, drv: hiddenDriver{db.Driver()}})
			defer hidden.Close()
			if _, err := DriverDialect(hidden.Driver()); err == nil {
				t.Fatal("the wrapper should hide the driver")
			}
			if got, err := Detect(ctx, hidden); err != nil || got != want {
				t.Errorf("Detect through a wrapper = %v, %v; want %v", got, err, want)
			}
		})
	}
}

type hiddenConnector struct {
	dsn string
	drv hiddenDriver
}

func (c hiddenConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c hiddenConnector) Driver() driver.Driver                        { return c.drv }

// TestEnsure runs Ensure from several pools at once, twice, and then checks
// that the constraints refuse double allocation.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 4 {
				db := d.Open(t)
				wg.Go(func() {
					errs <- Ensure(ctx, db)
					errs <- Ensure(ctx, db)
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("Ensure: %v", err)
				}
			}
			db := d.Open(t)
			insert := d.Rebind("INSERT INTO idforge_machine (namespace, machine_id, instance_id) VALUES (?, ?, ?)")
			exec := func(id int, inst any) error { _, err := db.ExecContext(ctx, insert, "ns", id, inst); return err }
			for i, tc := range []struct {
				id      int
				inst    any
				allowed bool
			}{
				{1, "a", true},
				{1, "b", false}, // one machine ID, two owners
				{2, "a", false}, // one instance, two machine IDs
				{3, nil, true},  // free rows...
				{4, nil, true},  // ...do not collide
				{2, "A", true},  // instance IDs compare case-sensitively
				{5, "a ", true}, // and trailing spaces count
			} {
				err := exec(tc.id, tc.inst)
				if (err == nil) != tc.allowed {
					t.Errorf("row %d (%d, %v): err = %v, allowed = %v", i, tc.id, tc.inst, err, tc.allowed)
				}
			}
			segIns := d.Rebind("INSERT INTO idforge_segment (name, last_max_id, step, created_at, last_fetch_time) VALUES (?, 0, 1, 0, 0)")
			for i, name := range []string{"order", "Order", "order"} {
				_, err := db.ExecContext(ctx, segIns, name)
				if (err == nil) != (i < 2) {
					t.Errorf("segment %q #%d: err = %v", name, i, err)
				}
			}
		})
	}
}

func TestEnsureRejectsInvalidDialect(t *testing.T) {
	if err := (Tables{}).Ensure(context.Background(), nil, 0); !errors.Is(err, ErrUnknownDialect) {
		t.Errorf("err = %v", err)
	}
}
