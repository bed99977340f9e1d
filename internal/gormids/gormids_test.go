package gormids_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/tests/testdb"
)

// A table counts as missing, 0, only on a database that answers: GORM's
// HasTable also says false when its query fails, and a floor of 0 would
// restart the sequence below the rows of a database that is down.
func TestFloorOfADatabaseDown(t *testing.T) {
	type row struct {
		ID int64 `idgen:"chain,name=row"`
	}
	plan, err := idgen.NewPlan(reflect.TypeFor[row]())
	if err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(sqlite.Open(testdb.SQLite(t).DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	floor := gormids.Floor(db, "missing_rows", idgen.Column{Field: plan.Fields[0].Field, Name: "id"})
	if n, err := floor(ctx, "row"); n != 0 || err != nil {
		t.Fatalf("floor of a table that does not exist = %d, %v; want 0", n, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	if n, err := floor(ctx, "row"); err == nil {
		t.Errorf("floor on a closed database = %d, no error; want the database's error", n)
	}
}
