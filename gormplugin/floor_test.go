package idplugin_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// The models of TestDerivedFloor: integer, padded radix-62 and decimal
// string keys, each drawing from a chain of its own.
type (
	floorInt struct {
		ID int64 `gorm:"primaryKey;autoIncrement:false" idgen:"chain,name=floor_int"`
	}
	floorRadix struct {
		ID string `gorm:"primaryKey;size:16" idgen:"chain,name=floor_radix,format=radix62"`
	}
	floorDecimal struct {
		ID string `gorm:"primaryKey;size:24" idgen:"chain,name=floor_decimal"`
	}
)

// TestDerivedFloor: on a store that was not declared brand-new (as after a
// wipe), the chains of tagged models start above the largest key their
// table holds, read by the Floor the plugin derives: integers, padded
// radix-62 strings compared byte by byte (a case-insensitive collation
// would put "…Z" (35) above "…a" (36)) and decimal strings compared
// as numbers ("9" sorts after "100").
func TestDerivedFloor(t *testing.T) {
	radix, err := convert.New("radix62", convert.Settings{Padded: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			ids, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "ids.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ids.Close() })
			st, err := sqlstore.Open(t.Context(), ids, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Namespace: "floor", StateDir: "off"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reg.Close() })
			db, err := gorm.Open(dialector(d), &gorm.Config{Logger: logger.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&floorInt{}, &floorRadix{}, &floorDecimal{}); err != nil {
				t.Fatal(err)
			}
			// Rows written before this process: by hand, so that the plugin
			// has not seen the models yet.
			insert := func(table string, ids ...string) {
				for _, id := range ids {
					if err := db.Exec("INSERT INTO "+table+" (id) VALUES (?)", id).Error; err != nil {
						t.Fatal(err)
					}
				}
			}
			insert("floor_ints", "10", "123456", "5000")
			insert("floor_radixes", radix.Format(36), radix.Format(35))
			insert("floor_decimals", "9", "100", "10")

			var i floorInt
			if err := db.Create(&i).Error; err != nil || i.ID <= 123456 {
				t.Errorf("integer key: %d, %v; want above 123456", i.ID, err)
			}
			var r floorRadix
			if err := db.Create(&r).Error; err != nil {
				t.Fatalf("radix-62 key: %v", err)
			}
			if n, err := radix.Parse(r.ID); err != nil || n <= 36 {
				t.Errorf("radix-62 key %q = %d, %v; want above 36", r.ID, n, err)
			}
			var dec floorDecimal
			if err := db.Create(&dec).Error; err != nil {
				t.Fatalf("decimal key: %v", err)
			}
			if n, err := strconv.ParseInt(dec.ID, 10, 64); err != nil || n <= 100 {
				t.Errorf("decimal key %q: %v; want above 100", dec.ID, err)
			}

			// The store is wiped: the Floor is asked again, long after the
			// transaction of the Create that first asked it ended.
			for _, table := range []string{"idforge_meta", "idforge_segment"} {
				if _, err := ids.ExecContext(t.Context(), "DELETE FROM "+table); err != nil {
					t.Fatal(err)
				}
			}
			// As the registry does when the lease's heartbeat sees the
			// wipe: the chain drops what it held and fetches anew.
			g, err := reg.Generator(t.Context(), "chain", "floor_int")
			if err != nil {
				t.Fatal(err)
			}
			g.(interface{ Discard(error) }).Discard(errors.New("the store was wiped"))
			var again floorInt
			if err := db.Create(&again).Error; err != nil || again.ID <= i.ID {
				t.Errorf("integer key after the store was wiped: %d, %v; want above %d", again.ID, err, i.ID)
			}
		})
	}
}
