package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "github.com/glebarez/go-sqlite" // registers the pure-Go "sqlite" driver

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
)

// One store serves segment sequences and machine IDs; here on an SQLite
// file, the same code runs on MariaDB and PostgreSQL.
func Example() {
	dir, err := os.MkdirTemp("", "idforge-sqlstore")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ids.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	// The file was just created: nothing was ever handed out from it, so it
	// is declared brand-new and sequences start at Start.
	store, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, Start: 1000, Init: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	orders, err := store.Segment("order")
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		maxID, err := orders.NextMaxID(ctx, 100)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("order IDs %d to %d\n", maxID-100+1, maxID)
	}

	machines := store // a Store is a machine.Distributor
	web1 := machine.Instance{Namespace: "billing", ID: "10.0.0.7:8080"}
	web2 := machine.Instance{Namespace: "billing", ID: "10.0.0.8:8080"}
	st1, err := machines.Distribute(ctx, web1, 10, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	st2, err := machines.Distribute(ctx, web2, 10, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("machine IDs:", st1.MachineID, st2.MachineID)

	// web1 shuts down and gives its ID back; the next instance reuses it.
	if err := machines.Revert(ctx, web1, st1); err != nil {
		log.Fatal(err)
	}
	web3 := machine.Instance{Namespace: "billing", ID: "10.0.0.9:8080"}
	st3, err := machines.Distribute(ctx, web3, 10, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("web3 reuses machine ID", st3.MachineID)
	// Output:
	// order IDs 1001 to 1100
	// order IDs 1101 to 1200
	// machine IDs: 0 1
	// web3 reuses machine ID 0
}

// A sequence whose table already holds rows (moved from AUTO_INCREMENT, or
// written before the store was emptied) starts above them when the store
// reads its floor from the table. The store asks once per name, before its
// first fetch and its first after a reset; with idforge.New the name is the
// chain's ("order" for kind "chain", name "order").
func ExampleSettings_floor() {
	dir, err := os.MkdirTemp("", "idforge-floor")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, item TEXT)"); err != nil {
		log.Fatal(err)
	}
	for _, item := range []string{"tea", "cake", "jam"} {
		if _, err := db.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item); err != nil {
			log.Fatal(err)
		}
	}

	floor := func(ctx context.Context, name string) (int64, error) {
		if name != "order" {
			return 0, nil
		}
		var maxID int64
		err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM orders").Scan(&maxID)
		return maxID, err
	}
	store, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, Floor: floor})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	orders, err := store.Segment("order")
	if err != nil {
		log.Fatal(err)
	}
	maxID, err := orders.NextMaxID(ctx, 100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order IDs %d to %d\n", maxID-100+1, maxID)
	// Output:
	// order IDs 4 to 103
}
