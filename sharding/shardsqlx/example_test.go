package shardsqlx_test

import (
	"context"
	"fmt"
	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"log"
	"os"
	"path/filepath"

	_ "github.com/glebarez/go-sqlite" // registers "sqlite"
	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/shardsqlx"
)

type Lesson struct {
	ID   int64  `db:"id" idgen:"snowflake"`
	Name string `db:"name"`
}

// A repository over one SQLite database holding four tables, lesson_0 to
// lesson_3, by the default rule table = id % 4.
func Example() {
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlx.Open("sqlite", filepath.Join(dir, "school.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// Machine ID 1; a store hands these out to several instances.
	reg, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(1), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	router, err := sharding.NewMod(sharding.Mod{Databases: "school", Tables: "lesson_{0..3}"})
	if err != nil {
		log.Fatal(err)
	}
	repo, err := shardsqlx.New([]*sqlx.DB{db}, router, reg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := repo.Exec(ctx, "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	lessons := []Lesson{{Name: "go"}, {Name: "sql"}, {Name: "k8s"}, {Name: "rust"}, {Name: "c"}}
	if err := repo.Create(ctx, lessons); err != nil { // INSERT INTO lesson_N (id, name) VALUES (:id, :name)
		log.Fatal(err)
	}
	var l Lesson
	if err := repo.Find(ctx, lessons[2].ID, &l); err != nil { // SELECT id, name FROM lesson_N WHERE id = ?
		log.Fatal(err)
	}
	fmt.Println(l.Name)

	total := 0
	err = repo.ForEach(ctx, func(s sharding.Shard, db *sqlx.DB) error {
		var n int
		err := db.GetContext(ctx, &n, shardsqlx.Query(db, s, "SELECT count(*) FROM {table}"))
		total += n
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(total, "lessons in", len(must(router.Shards())), "tables")
	// Output:
	// k8s
	// 5 lessons in 4 tables
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
