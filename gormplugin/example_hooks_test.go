package idplugin_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/gormplugin"
)

// Doc keeps a revision of itself: a copy created from its AfterCreate hook.
type Doc struct {
	ID       int64 `idgen:"snowflake"`
	Title    string
	Revision bool
	KeepID   bool `gorm:"-"` // for the example: copy without zeroing the ID
}

// AfterCreate runs after the plugin filled d.ID: the copy holds the same ID
// until it is zeroed, and a zero ID is what gets a new one.
func (d *Doc) AfterCreate(tx *gorm.DB) error {
	if d.Revision {
		return nil
	}
	rev := *d
	rev.Revision = true
	if !d.KeepID {
		rev.ID = 0 // the rule: zero the copy's key so that it gets its own
	}
	return tx.Create(&rev).Error
}

// Hooks see the IDs the plugin filled; a copy made in a hook gets its own
// ID once its key is zeroed, and a copy that keeps the key is refused with an
// error that says so, instead of a duplicate-key error from the database.
func Example_hooks() {
	db, err := gorm.Open(sqlite.Open("file::memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Use(idplugin.New()); err != nil { // the default registry
		log.Fatal(err)
	}
	if err := idplugin.Prepare(db, &Doc{}); err != nil {
		log.Fatal(err)
	}
	if err := db.AutoMigrate(&Doc{}); err != nil {
		log.Fatal(err)
	}

	if err := db.Create(&Doc{Title: "spec"}).Error; err != nil {
		log.Fatal(err)
	}
	var docs []Doc
	if err := db.Order("revision").Find(&docs).Error; err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", len(docs), "distinct IDs:", docs[0].ID != docs[1].ID, "revision:", docs[1].Revision)

	err = db.Create(&Doc{Title: "draft", KeepID: true}).Error
	fmt.Println("copy keeping the ID refused:", errors.Is(err, idplugin.ErrHookCopy), errors.Is(err, gorm.ErrDuplicatedKey))
	var n int64
	if err := db.Model(&Doc{}).Count(&n).Error; err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows after the refused create:", n)
	// Output:
	// rows: 2 distinct IDs: true revision: true
	// copy keeping the ID refused: true true
	// rows after the refused create: 2
}
