package idplugin_test

import (
	"context"
	"fmt"
	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"log"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/gormplugin"
)

type Order struct {
	ID       int64  `idgen:"snowflake"`                // a snowflake ID
	Code     string `idgen:"snowflake,format=radix62"` // the same kind, as a short string
	Customer string
	Items    []Item // has many: each item gets its own ID and the order's
}

type Item struct {
	ID      engine.ID `gorm:"primaryKey" idgen:"snowflake"` // JSON-safe: marshals as a string
	OrderID int64
	SKU     string
}

func Example() {
	// Machine ID 1; a store hands these out to several instances.
	reg, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(1), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()

	db, err := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
		log.Fatal(err)
	}
	// Prepare before AutoMigrate: checks the tags and makes the ID columns plain BIGINT.
	if err := idplugin.Prepare(db, &Order{}); err != nil {
		log.Fatal(err)
	}
	if err := db.AutoMigrate(&Order{}, &Item{}); err != nil {
		log.Fatal(err)
	}

	order := Order{Customer: "ada", Items: []Item{{SKU: "pen"}, {SKU: "ink"}}}
	if err := db.Create(&order).Error; err != nil {
		log.Fatal(err)
	}

	var stored Order
	if err := db.Preload("Items").First(&stored, order.ID).Error; err != nil {
		log.Fatal(err)
	}
	_, machine, _, err := snowflake.Default.Decode(order.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order stored under its ID:", stored.ID == order.ID && order.ID != 0)
	fmt.Println("code is radix-62:", stored.Code == order.Code && len(order.Code) > 0)
	fmt.Println("made by machine:", machine)
	fmt.Println("items:", len(stored.Items), "with their own IDs:", stored.Items[0].ID != 0 && stored.Items[0].ID != stored.Items[1].ID)
	fmt.Println("items point to the order:", stored.Items[0].OrderID == order.ID && stored.Items[1].OrderID == order.ID)
	// Output:
	// order stored under its ID: true
	// code is radix-62: true
	// made by machine: 1
	// items: 2 with their own IDs: true
	// items point to the order: true
}
