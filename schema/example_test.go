package schema_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "github.com/glebarez/go-sqlite" // registers the pure-Go "sqlite" driver

	"github.com/idforge/idforge/schema"
)

// Create the ID tables when a service starts; Ensure detects the dialect
// and leaves existing tables alone.
func Example() {
	dir, err := os.MkdirTemp("", "idforge-schema")
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
	for range 2 { // idempotent
		if err := schema.Ensure(ctx, db); err != nil {
			log.Fatal(err)
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			log.Fatal(err)
		}
		fmt.Println(name)
	}
	// Output:
	// idforge_machine
	// idforge_segment
}

// Print the DDL for a dialect given by name, with another table prefix, as
// `idforge schema -dialect mariadb -prefix billing_` does.
func ExampleTables_DDL() {
	d, err := schema.ParseDialect("mariadb")
	if err != nil {
		log.Fatal(err)
	}
	tables, err := schema.NewTables("billing_")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d, tables.Segment(), tables.Machine())
	for _, stmt := range tables.Statements(d) {
		fmt.Println(stmt[:len("CREATE TABLE IF NOT EXISTS billing_segment")])
	}
	// Output:
	// mysql billing_segment billing_machine
	// CREATE TABLE IF NOT EXISTS billing_segment
	// CREATE TABLE IF NOT EXISTS billing_machine
}
