package sqlschema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/schema"
	"github.com/idforge/idforge/tests/testdb"
)

func TestTypeDialect(t *testing.T) {
	for _, tc := range []struct {
		pkg, name string
		want      schema.Dialect
	}{
		{"github.com/go-sql-driver/mysql", "MySQLDriver", schema.MySQL},
		{"github.com/jackc/pgx/v5/stdlib", "Driver", schema.Postgres},
		{"github.com/jackc/pgx/v4/stdlib", "Driver", schema.Postgres},
		{"github.com/lib/pq", "Driver", schema.Postgres},
		{"github.com/glebarez/go-sqlite", "Driver", schema.SQLite},
		{"modernc.org/sqlite", "Driver", schema.SQLite},
		{"github.com/mattn/go-sqlite3", "SQLiteDriver", schema.SQLite},
	} {
		if got, err := typeDialect(tc.pkg, tc.name); err != nil || got != tc.want {
			t.Errorf("typeDialect(%s.%s) = %v, %v; want %v", tc.pkg, tc.name, got, err, tc.want)
		}
	}
	if _, err := typeDialect("example.com/oracle", "Driver"); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("unknown driver: err = %v", err)
	}
	if _, err := driverDialect(nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("nil driver: err = %v", err)
	}
}

// storeTables is what the store's queries use, written out here rather
// than read from the DDL files: each table's columns in order, and its
// keys. The double-allocation guarantees rest on the keys: one owner per
// machine ID, one machine ID per instance.
var storeTables = []struct {
	name    string
	columns []string
	keys    []string
}{
	{"segment", []string{"name", "last_max_id", "step", "created_at", "last_fetch_time"}, []string{"primary(name)"}},
	{"machine", []string{"namespace", "machine_id", "instance_id", "holder", "stable", "last_timestamp", "prev_timestamp",
		"distribute_time", "revert_time", "version"}, []string{"primary(namespace,machine_id)", "unique(namespace,instance_id)"}},
	{"meta", []string{"name", "value"}, []string{"primary(name)"}},
}

// parseTable reads a CREATE TABLE statement of the DDL: the table's name,
// its columns in order and its keys as "primary(cols)" or "unique(cols)".
func parseTable(t *testing.T, stmt string) (name string, columns, keys []string) {
	t.Helper()
	head, body, ok := strings.Cut(stmt, "(")
	f := strings.Fields(head)
	if !ok || len(f) != 6 || strings.Join(f[:5], " ") != "CREATE TABLE IF NOT EXISTS" {
		t.Fatalf("not a CREATE TABLE IF NOT EXISTS statement:\n%s", stmt)
	}
	name = f[5]
	cols := func(def string) string {
		_, list, _ := strings.Cut(def, "(")
		list, _, _ = strings.Cut(list, ")")
		return strings.ReplaceAll(list, " ", "")
	}
	for line := range strings.Lines(body) {
		def := strings.TrimSuffix(strings.TrimSpace(line), ",")
		upper := strings.ToUpper(def)
		switch {
		case def == "" || strings.HasPrefix(def, ")"):
		case strings.HasPrefix(upper, "PRIMARY KEY"):
			keys = append(keys, "primary("+cols(def)+")")
		case strings.HasPrefix(upper, "UNIQUE"), strings.HasPrefix(upper, "CONSTRAINT"):
			if _, rest, ok := strings.Cut(upper, "UNIQUE"); ok {
				keys = append(keys, "unique("+cols(def[len(def)-len(rest):])+")")
			} else {
				t.Errorf("table %s: constraint %q is not a unique key", name, def)
			}
		default:
			col := strings.Fields(def)[0]
			columns = append(columns, col)
			if strings.Contains(upper, "PRIMARY KEY") {
				keys = append(keys, "primary("+col+")")
			}
		}
	}
	return name, columns, keys
}

// TestDDL: every dialect's file creates the tables the store uses, with the
// columns its queries name and the keys its guarantees rest on (the
// expectation is written out above, not read from the files), under the
// prefix asked for, one statement per table.
func TestDDL(t *testing.T) {
	for _, d := range []schema.Dialect{schema.MySQL, schema.Postgres, schema.SQLite} {
		if _, err := schema.DDL(d, ""); err != nil {
			t.Errorf("schema.DDL(%v, \"\"): %v; every dialect's file must be embedded", d, err)
		}
		custom, err := schema.DDL(d, "app_")
		if err != nil || strings.Contains(custom, "idforge_") {
			t.Errorf("schema.DDL(%v, \"app_\"): err %v; still names idforge_ tables: %v", d, err, strings.Contains(custom, "idforge_"))
		}
		stmts, err := statements(d, "app_")
		if err != nil || len(stmts) != len(storeTables) {
			t.Fatalf("statements(%v) = %d statements, %v; want %d:\n%s", d, len(stmts), err, len(storeTables), strings.Join(stmts, "\n----\n"))
		}
		for i, want := range storeTables {
			if strings.Contains(stmts[i], "--") || strings.Contains(stmts[i], ";") {
				t.Errorf("statements(%v)[%d] keeps a comment or a semicolon:\n%s", d, i, stmts[i])
			}
			name, columns, keys := parseTable(t, stmts[i])
			if name != "app_"+want.name || !slices.Equal(columns, want.columns) || !slices.Equal(keys, want.keys) {
				t.Errorf("%v, statement %d: table %s, columns %q, keys %q; want table app_%s, columns %q, keys %q",
					d, i, name, columns, keys, want.name, want.columns, want.keys)
			}
		}
		if !strings.Contains(custom, "app_machine_instance") {
			t.Errorf("schema.DDL(%v, \"app_\"): the machine table's unique key is not named after the prefix", d)
		}
	}
}

// hiddenDriver hides the real driver's type, as instrumentation wrappers
// do, so Detect must ask the server.
type hiddenDriver struct{ driver.Driver }

type hiddenConnector struct {
	dsn string
	drv hiddenDriver
}

func (c hiddenConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c hiddenConnector) Driver() driver.Driver                        { return c.drv }

func TestDetect(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			want, err := schema.ParseDialect(d.Driver)
			if err != nil {
				t.Fatal(err)
			}
			db := d.Open(t)
			if got, err := Detect(ctx, db); err != nil || got != want {
				t.Errorf("Detect = %v, %v; want %v", got, err, want)
			}
			hidden := sql.OpenDB(hiddenConnector{dsn: d.DSN, drv: hiddenDriver{db.Driver()}})
			defer hidden.Close()
			if _, err := driverDialect(hidden.Driver()); err == nil {
				t.Fatal("the wrapper should hide the driver")
			}
			if got, err := Detect(ctx, hidden); err != nil || got != want {
				t.Errorf("Detect through a wrapper = %v, %v; want %v", got, err, want)
			}
		})
	}
}

// TestEnsure creates the tables from several pools at once, twice, and
// then checks that the constraints refuse double allocation.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			dialect, err := schema.ParseDialect(d.Driver)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 4 {
				// Each pool's first contact, one at a time: a new schema.SQLite
				// file turning to WAL answers SQLITE_BUSY to the others
				// (sqlstore.Open retries that; here it is not the point).
				db := d.Open(t)
				if err := db.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					errs <- Ensure(ctx, db, dialect, "")
					errs <- Ensure(ctx, db, dialect, "")
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("ensure: %v", err)
				}
			}
			db := d.Open(t)
			// The server made the columns the store's queries name.
			for _, want := range storeTables {
				rows, err := db.QueryContext(ctx, "SELECT * FROM "+"idforge_"+want.name+" WHERE 1 = 0")
				if err != nil {
					t.Fatalf("table %s: %v", want.name, err)
				}
				columns, err := rows.Columns()
				rows.Close()
				if err != nil || !slices.Equal(columns, want.columns) {
					t.Errorf("table %s on the server has columns %q (%v); want %q", want.name, columns, err, want.columns)
				}
			}
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
