package segment_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "github.com/glebarez/go-sqlite" // database/sql driver "sqlite", pure Go

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
)

// A registry's "chain" kind runs one chain per sequence name, configured by
// idforge.Settings.Chain: here ranges of 100 IDs, with at least 30 s of
// current traffic fetched ahead so the chain rides out a store outage that
// long.
func ExampleSettings() {
	dir, err := os.MkdirTemp("", "idforge-chain")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "ids.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, Init: true})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	reg, err := idforge.New(ctx, idforge.Settings{Store: st, StateDir: "off",
		Chain: segment.Settings{Step: 100, Ahead: 30 * time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	for range 3 {
		id, err := reg.NextID(ctx, "chain", "order")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
	// Output:
	// 1
	// 2
	// 3
}
