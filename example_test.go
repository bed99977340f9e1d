package idforge_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "github.com/glebarez/go-sqlite" // database/sql driver "sqlite", pure Go

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
)

// A registry on a SQL store: the snowflake generator runs on a machine ID the
// store hands out, and each chain name is a strictly increasing sequence.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idforge-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "ids.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	st, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, Init: true}) // a new file: brand-new
	if err != nil {
		log.Fatal(err)
	}
	reg, err := idforge.New(ctx, idforge.Settings{Store: st, Namespace: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close() // gives the machine ID back

	for range 3 {
		id, _ := reg.NextID(ctx, "chain", "invoice")
		fmt.Println("chain", id)
	}
	id, _ := reg.NextID(ctx, "snowflake", "")
	_, machine, _, _ := snowflake.Default.Decode(id)
	fmt.Println("snowflake on machine", machine, "=", reg.Stats().MachineID)
	// Output:
	// chain 1
	// chain 2
	// chain 3
	// snowflake on machine 0 = 0
}
