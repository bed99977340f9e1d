package sqlhook_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "github.com/glebarez/go-sqlite" // database/sql driver "sqlite", pure Go

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sqlhook"
)

func ExampleOpen() {
	ctx := context.Background()
	gen, err := snowflake.New(1) // machine ID 1; engine/machine can hand these out
	if err != nil {
		log.Fatal(err)
	}
	reg := genreg.New() // or idforge.New(ctx, idforge.Settings{Store: st})
	if err := reg.Register("snowflake", "", gen); err != nil {
		log.Fatal(err)
	}

	// Any driver: sqlhook.Open("pgx", dsn, ...), sqlhook.Open("mysql", dsn, ...),
	// or sql.OpenDB(sqlhook.Wrap(connector, ...)).
	db, err := sqlhook.Open("sqlite", "file::memory:", sqlhook.Settings{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	// The marker becomes a fresh ID when the statement runs.
	id := sqlhook.Next("snowflake", "")
	res, err := db.ExecContext(ctx, `INSERT INTO orders (id, customer) VALUES (?, ?)`, id, "ada")
	if err != nil {
		log.Fatal(err)
	}
	key, _ := res.LastInsertId()
	var stored int64
	if err := db.QueryRowContext(ctx, `SELECT id FROM orders WHERE customer = 'ada'`).Scan(&stored); err != nil {
		log.Fatal(err)
	}
	fmt.Println("LastInsertId is the key in the table:", key == stored, "and the marker's:", id.ID() == stored)

	// Two markers, two keys; LastInsertId is the first.
	a, b := sqlhook.Next("snowflake", ""), sqlhook.Next("snowflake", "")
	res, err = db.ExecContext(ctx, `INSERT INTO orders (id, customer) VALUES (?, 'bob'), (?, 'cy')`, a, b)
	if err != nil {
		log.Fatal(err)
	}
	key, _ = res.LastInsertId()
	fmt.Println("two keys:", a.ID() != b.ID(), "first:", key == a.ID())

	// Without the plugin a marker fails instead of inserting a zero key.
	plain, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer plain.Close()
	_, err = plain.ExecContext(ctx, `SELECT ?`, sqlhook.Next("snowflake", ""))
	fmt.Println("without the plugin:", errors.Is(err, sqlhook.ErrNotHooked))
	// Output:
	// LastInsertId is the key in the table: true and the marker's: true
	// two keys: true first: true
	// without the plugin: true
}
