package idplugin_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/tests/testdb"
	"github.com/idforge/idforge/tests/testreg"
)

// newRegistry is the shared test registry: snowflake, and a counter per chain name.
func newRegistry(t testing.TB) *genreg.Registry { return testreg.New(t) }

type gormDB struct {
	testdb.DB
	gorm *gorm.DB
}

func dialector(d testdb.DB) gorm.Dialector {
	switch d.Name {
	case "mariadb":
		return mysql.Open(d.DSN)
	case "postgres":
		return postgres.Open(d.DSN)
	default:
		return sqlite.Open(d.DSN)
	}
}

// openAll opens every database testdb offers with GORM and the plugin.
func openAll(t *testing.T, s ...idplugin.Settings) []gormDB {
	t.Helper()
	var out []gormDB
	for _, d := range testdb.All(t) {
		out = append(out, gormDB{DB: d, gorm: open(t, d, s...)})
	}
	return out
}

func open(t testing.TB, d testdb.DB, s ...idplugin.Settings) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(dialector(d), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if d.Name == "sqlite" {
		sqlDB.SetMaxOpenConns(1) // one writer at a time, instead of SQLITE_BUSY
	}
	t.Cleanup(func() { sqlDB.Close() })
	if err := db.Use(idplugin.New(withRegistry(newRegistry(t), s...))); err != nil {
		t.Fatal(err)
	}
	return db
}

// autoIncrement reports whether the database made table's column id auto-incrementing.
func autoIncrement(t *testing.T, d gormDB, table string) bool {
	t.Helper()
	db, err := d.gorm.DB()
	if err != nil {
		t.Fatal(err)
	}
	return d.AutoIncrement(t, db, table)
}

// idOf returns the ID field of a model value, as text.
func idOf(v any) string {
	return fmt.Sprint(reflect.Indirect(reflect.ValueOf(v)).FieldByName("ID").Interface())
}

func tableOf(t *testing.T, db *gorm.DB, model any) string {
	t.Helper()
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		t.Fatal(err)
	}
	return stmt.Schema.Table
}

// withRegistry is the plugin's settings (at most one) drawing from reg.
func withRegistry(reg engine.Provider, s ...idplugin.Settings) idplugin.Settings {
	var set idplugin.Settings
	if len(s) > 0 {
		set = s[0]
	}
	set.Registry = reg
	return set
}
