package idplugin_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"gorm.io/gorm/clause"

	"github.com/idforge/idforge/gormplugin"
)

// The models of TestUUIDKeys: a uuid.UUID key, a string UUID beside it, and
// children whose foreign key references the key.
type (
	uuidOrder struct {
		ID       uuid.UUID `gorm:"primaryKey" idgen:"uuidv7"`
		Ref      string    `gorm:"uniqueIndex" idgen:"uuidv7"`
		Customer string
		Items    []uuidItem
	}
	uuidItem struct {
		ID          uuid.UUID `idgen:"uuidv7"`
		UUIDOrderID uuid.UUID
		SKU         string
	}
)

// TestUUIDKeys: a uuid.UUID key tagged uuidv7 gets time-ordered version 7
// UUIDs on every dialect, in a native uuid column on PostgreSQL, BINARY(16)
// on MariaDB and TEXT on SQLite (Prepare sets them), and so do the
// children's foreign keys; rows read back and are found by their key.
func TestUUIDKeys(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &uuidOrder{}); err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second AutoMigrate finds nothing to change
				if err := db.AutoMigrate(&uuidOrder{}, &uuidItem{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct{ table, col string }{{"uuid_orders", "id"}, {"uuid_orders", "ref"}, {"uuid_items", "id"}, {"uuid_items", "uuid_order_id"}} {
				want := map[string]string{"postgres": "uuid", "mariadb": "binary(16)", "sqlite": "text"}[d.Name]
				if c.col == "ref" && d.Name == "mariadb" {
					want = "char(36)" // a string field: the canonical form
				}
				if typ := columnType(t, d, c.table, c.col); !strings.EqualFold(typ, want) {
					t.Errorf("%s.%s is %q, want %q", c.table, c.col, typ, want)
				}
			}
			orders := []uuidOrder{
				{Customer: "ada", Items: []uuidItem{{SKU: "pen"}, {SKU: "ink"}}},
				{Customer: "bob"},
				{Customer: "eve", Items: []uuidItem{{SKU: "pad"}}},
			}
			if err := db.CreateInBatches(&orders, 2).Error; err != nil {
				t.Fatal(err)
			}
			var keys [][]byte
			for _, o := range orders {
				if o.ID.Version() != 7 || o.ID.Variant() != uuid.RFC4122 {
					t.Fatalf("order key %s: want a version 7 UUID", o.ID)
				}
				if _, err := uuid.Parse(o.Ref); err != nil || len(o.Ref) != 36 {
					t.Errorf("Ref %q: want a canonical UUID (%v)", o.Ref, err)
				}
				for _, it := range o.Items {
					if it.UUIDOrderID != o.ID || it.ID.Version() != 7 {
						t.Errorf("item %+v of order %s", it, o.ID)
					}
				}
				keys = append(keys, bytes.Clone(o.ID[:]))
			}
			if !slices.IsSortedFunc(keys, bytes.Compare) {
				t.Errorf("keys not in the order they were made: %x", keys)
			}
			var back []uuidOrder
			if err := db.Preload("Items").Order("id").Find(&back).Error; err != nil {
				t.Fatal(err)
			}
			if len(back) != 3 || back[0].ID != orders[0].ID || back[2].ID != orders[2].ID || len(back[0].Items) != 2 || back[1].Ref != orders[1].Ref {
				t.Errorf("read back in key order: %+v, want %+v", back, orders)
			}
			var one uuidOrder
			if err := db.First(&one, uuidOrder{ID: orders[1].ID}).Error; err != nil || one.Customer != "bob" {
				t.Errorf("found by its key: %+v, %v", one, err)
			}
			one.Customer = "bo"
			if err := db.Save(&one).Error; err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := db.Model(&uuidOrder{}).Where(&uuidOrder{Customer: "bo"}).Count(&n).Error; err != nil || n != 1 {
				t.Errorf("Save updated %d rows (%v), want the one", n, err)
			}
			// An upsert that meets the row of its Ref ends with that row's key.
			again := uuidOrder{Ref: orders[2].Ref, Customer: "eve2"}
			if err := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "ref"}}, UpdateAll: true}).Create(&again).Error; err != nil {
				t.Fatal(err)
			}
			if again.ID != orders[2].ID {
				t.Errorf("upsert met order %s, ends with key %s", orders[2].ID, again.ID)
			}
		})
	}
}

// columnType is the SQL type of a column as the database reports it.
func columnType(t *testing.T, d gormDB, table, column string) string {
	t.Helper()
	types, err := d.gorm.Migrator().ColumnTypes(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range types {
		if c.Name() == column {
			if ct, ok := c.ColumnType(); ok && d.Name == "mariadb" {
				return ct // with its length: binary(16)
			}
			return c.DatabaseTypeName()
		}
	}
	t.Fatalf("%s has no column %s", table, column)
	return ""
}
