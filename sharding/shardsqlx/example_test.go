package shardsqlx_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "github.com/glebarez/go-sqlite" // registers "sqlite"
	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/shardsqlx"
)

type Lesson struct {
	ID   int64  `db:"id" idgen:"snowflake"`
	Name string `db:"name"`
}

// A repository over two SQLite files standing for databases m0 and m1, with
// ShardingSphere's course rule.
func Example() {
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	g, err := snowflake.New(1) // machine ID 1; see engine/machine for assigned ones
	if err != nil {
		log.Fatal(err)
	}
	reg := engine.NewRegistry()
	if err := reg.Register("snowflake", "", g); err != nil {
		log.Fatal(err)
	}

	var dbs []*sqlx.DB
	for _, name := range []string{"m0", "m1"} {
		db, err := sqlx.Open("sqlite", filepath.Join(dir, name+".db"))
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	router, err := sharding.NewMod(sharding.Mod{ // db = id % 2, table = ((id+1) % 4)/2 + 1
		Databases: 2, DatabasePattern: "m%d",
		Tables: 2, TablePattern: "lesson_%d", TableBase: 1,
		TableRule: sharding.ID().Add(1).Mod(4).Div(2),
	})
	if err != nil {
		log.Fatal(err)
	}
	repo, err := shardsqlx.New(router, reg, dbs)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// lesson_1 and lesson_2 in m0 and m1
	if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	lessons := make([]Lesson, 8)
	for i := range lessons {
		lessons[i].Name = fmt.Sprint("java ", i)
	}
	if err := repo.Create(ctx, lessons); err != nil { // IDs filled, rows split by shard
		log.Fatal(err)
	}

	var l Lesson
	if err := repo.Find(ctx, lessons[5].ID, &l); err != nil { // reads one shard
		log.Fatal(err)
	}
	fmt.Println(l.Name)

	err = repo.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
		var n int
		err := db.GetContext(ctx, &n, s.Query("SELECT count(*) FROM {table}"))
		fmt.Println(s, n)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// java 5
	// m0.lesson_1 2
	// m0.lesson_2 2
	// m1.lesson_1 2
	// m1.lesson_2 2
}
