package shardsqlx

import (
	"context"
	"reflect"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/tests/testdb"
)

// idColumn is the id column of rows drawing from the chain "row".
func idColumn(t *testing.T) idgen.Column {
	type row struct {
		ID int64 `db:"id" idgen:"chain,name=row"`
	}
	plan, err := idgen.NewPlan(reflect.TypeFor[row]())
	if err != nil {
		t.Fatal(err)
	}
	return idgen.Column{Field: plan.Fields[0].Field, Name: "id"}
}

// The floor of one shard reads its table by the name the repository's
// statements use, quoted: qualified by its schema (its database on
// MariaDB), and in its case but on SQLite. A table that does not exist
// counts as 0.
func TestTableFloorNames(t *testing.T) {
	col := idColumn(t)
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			ctx := context.Background()
			db := sqlx.NewDb(d.Open(t), d.Driver)
			for _, q := range []string{"CREATE TABLE floor_rows (id BIGINT PRIMARY KEY)", "INSERT INTO floor_rows (id) VALUES (7), (12)"} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			schema := map[string]string{"sqlite": "main", "mariadb": d.Database, "postgres": "public"}[d.Name]
			want := map[string]int64{"floor_rows": 12, schema + ".floor_rows": 12, "missing_rows": 0, schema + ".missing_rows": 0}
			if d.Name == "sqlite" { // SQLite's names ignore case, quoted too
				want["FLOOR_ROWS"] = 12
			} else { // quoted, as the repository's statements quote it
				want["FLOOR_ROWS"] = 0
			}
			for table, n := range want {
				got, err := tableFloor(db, sharding.Shard{TableName: table}, col)(ctx, "row")
				if err != nil || got != n {
					t.Errorf("floor of %s = %d, %v; want %d", table, got, err, n)
				}
			}
		})
	}
}

// A database that does not answer fails the floor: it does not count its
// tables as missing.
func TestTableFloorOfADatabaseDown(t *testing.T) {
	d := testdb.SQLite(t)
	db := sqlx.NewDb(d.Open(t), d.Driver)
	db.Close()
	floor := tableFloor(db, sharding.Shard{TableName: "missing_rows"}, idColumn(t))
	if n, err := floor(context.Background(), "row"); err == nil {
		t.Errorf("floor on a closed database = %d, no error; want the database's error", n)
	}
}
