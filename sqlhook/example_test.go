package sqlhook_test

import (
	"context"
	"fmt"
	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"log"

	_ "github.com/glebarez/go-sqlite" // database/sql driver "sqlite", pure Go
	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge/sqlhook"
)

type Order struct {
	ID       int64  `db:"id" idgen:"snowflake"`
	Code     string `db:"code" idgen:"snowflake,format=radix62"`
	Customer string `db:"customer"`
}

func Example() {
	ctx := context.Background()
	// Machine ID 1; a store hands these out to several instances.
	reg, err := idforge.New(ctx, idforge.Settings{Machine: machine.Manual(1), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	db, err := sqlx.Open("sqlite", "file::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	db.MustExec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, code VARCHAR(16) NOT NULL UNIQUE, customer TEXT NOT NULL)`)
	db.MustExec(`CREATE TABLE items (id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, sku TEXT NOT NULL)`)

	ids := sqlhook.New(reg) // one helper per registry, shared
	const insert = `INSERT INTO orders (id, code, customer) VALUES (:id, :code, :customer)`

	// One row: the IDs are written back into the struct.
	ada := Order{Customer: "ada"}
	if _, err := ids.Insert(ctx, db, insert, &ada); err != nil {
		log.Fatal(err)
	}

	// Many rows: multi-row INSERTs of up to 1,000 rows each.
	batch := []Order{{Customer: "bob"}, {Customer: "cy"}, {ID: 7, Code: "pinned", Customer: "dee"}}
	n, err := ids.InsertBatch(ctx, db, insert, batch, 0)
	if err != nil {
		log.Fatal(err)
	}

	// Hand-written SQL: draw the ID from the registry. Rebind turns ? into
	// the driver's placeholders ($1, $2, $3 on PostgreSQL).
	id, err := reg.NextID(ctx, "snowflake", "")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO items (id, order_id, sku) VALUES (?, ?, ?)`), id, ada.ID, "pen"); err != nil {
		log.Fatal(err)
	}

	var orders, matching int
	if err := db.Get(&orders, `SELECT count(*) FROM orders`); err != nil {
		log.Fatal(err)
	}
	if err := db.Get(&matching, db.Rebind(`SELECT count(*) FROM items WHERE id = ? AND order_id = ?`), id, ada.ID); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ada has an ID:", ada.ID != 0 && ada.Code != "")
	fmt.Println("batch rows inserted:", n, "pinned kept:", batch[2].ID == 7)
	fmt.Println("orders:", orders, "item stored under the drawn ID:", matching == 1)
	// Output:
	// ada has an ID: true
	// batch rows inserted: 3 pinned kept: true
	// orders: 4 item stored under the drawn ID: true
}
