package idplugin_test

import (
	"reflect"
	"strconv"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	idplugin "github.com/idforge/idforge/gormplugin"
)

type I64Row struct {
	ID   int64 `idgen:"snowflake"`
	Name string
}

type U64Row struct {
	ID   uint64 `gorm:"primaryKey" idgen:"chain,name=u64"`
	Name string
}

type EIDRow struct {
	ID   engine.ID `gorm:"primaryKey" idgen:"snowflake"`
	Name string
}

// Code62 is a radix-62 key. Radix 62 tells upper from lower case, so on
// MySQL/MariaDB, whose default collations do not, the column must be binary;
// PostgreSQL and SQLite compare bytes already.
type Code62 string

// GormDBDataType picks a case-sensitive column type per dialect.
func (Code62) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "varchar(16) CHARACTER SET ascii COLLATE ascii_bin"
	}
	return "varchar(16)"
}

type R62Row struct {
	ID   Code62 `gorm:"primaryKey" idgen:"snowflake,format=radix62"`
	Name string
}

type R36Row struct {
	ID   string `gorm:"primaryKey;size:16" idgen:"chain,name=r36,format=radix36"`
	Name string
}

// mustFormat returns the formatter the tag format=name uses: radix forms padded.
func mustFormat(t *testing.T, name string) *convert.Formatter {
	t.Helper()
	f, err := convert.New(name, convert.Settings{Padded: name != "decimal"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// parseID checks a stored key is a generated ID and returns it.
func parseID(t *testing.T, format, id string) int64 {
	t.Helper()
	n, err := mustFormat(t, format).Parse(id)
	if err != nil || n <= 0 {
		t.Fatalf("key %q is not a %s ID: %v", id, format, err)
	}
	return n
}

func TestModelsOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			models := []any{&I64Row{}, &U64Row{}, &EIDRow{}, &R62Row{}, &R36Row{}}
			if err := idplugin.Prepare(d.gorm, models...); err != nil {
				t.Fatal(err)
			}
			if err := d.gorm.AutoMigrate(models...); err != nil {
				t.Fatal(err)
			}
			for _, m := range []any{&I64Row{}, &U64Row{}, &EIDRow{}} {
				if autoIncrement(t, d, tableOf(t, d.gorm, m)) {
					t.Errorf("%T: the id column is auto-increment after Prepare", m)
				}
			}
			t.Run("int64", func(t *testing.T) { exercise[I64Row](t, d.gorm, "decimal", func(r *I64Row, n int) { r.ID = int64(n) }) })
			t.Run("uint64", func(t *testing.T) {
				exercise[U64Row](t, d.gorm, "decimal", func(r *U64Row, n int) { r.ID = uint64(n) })
			})
			t.Run("engine.ID", func(t *testing.T) {
				exercise[EIDRow](t, d.gorm, "decimal", func(r *EIDRow, n int) { r.ID = engine.ID(n) })
			})
			t.Run("radix62", func(t *testing.T) {
				exercise[R62Row](t, d.gorm, "radix62", func(r *R62Row, n int) { r.ID = Code62(mustFormat(t, "radix62").Format(int64(n))) })
			})
			t.Run("radix36", func(t *testing.T) {
				exercise[R36Row](t, d.gorm, "radix36", func(r *R36Row, n int) { r.ID = mustFormat(t, "radix36").Format(int64(n)) })
			})
		})
	}
}

// exercise inserts rows of T every way GORM creates them, then reads the
// table back and compares every row with what the structs hold.
func exercise[T any](t *testing.T, db *gorm.DB, format string, pin func(*T, int)) {
	want := map[string]string{} // id -> name
	var rows []*T
	add := func(r *T) {
		rows = append(rows, r)
	}
	named := func(name string) *T {
		r := new(T)
		reflect.ValueOf(r).Elem().FieldByName("Name").SetString(name)
		return r
	}
	must := func(what string, tx *gorm.DB) {
		t.Helper()
		if tx.Error != nil {
			t.Fatalf("%s: %v", what, tx.Error)
		}
	}

	single := named("single")
	must("Create(&row)", db.Create(single))
	add(single)

	pinned := named("pinned")
	pin(pinned, 42)
	pinnedID := idOf(pinned)
	must("Create(pinned)", db.Create(pinned))
	if idOf(pinned) != pinnedID {
		t.Fatalf("pinned id %s replaced by %s", pinnedID, idOf(pinned))
	}
	add(pinned)

	structs := []T{*named("s0"), *named("s1"), *named("s2")}
	must("Create(&[]T)", db.Create(&structs))
	for i := range structs {
		add(&structs[i])
	}

	ptrs := []*T{named("p0"), named("p1"), named("p2")}
	must("Create([]*T)", db.Create(ptrs))
	rows = append(rows, ptrs...)

	arr := [2]T{*named("a0"), *named("a1")}
	must("Create(&[2]T)", db.Create(&arr))
	for i := range arr {
		add(&arr[i])
	}

	batch := make([]T, 2500)
	for i := range batch {
		batch[i] = *named("b" + strconv.Itoa(i))
	}
	must("CreateInBatches(2500, 1000)", db.CreateInBatches(&batch, 1000))
	for i := range batch {
		add(&batch[i])
	}

	saved := named("saved")
	must("Save(new row)", db.Save(saved))
	add(saved)

	// An upsert: the pinned row is updated in place, two new rows get IDs.
	pinnedAgain := named("pinned-updated")
	pin(pinnedAgain, 42)
	up := []*T{pinnedAgain, named("u0"), named("u1")}
	must("upsert", db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&up))
	rows = append(rows, up[1:]...)
	if idOf(up[0]) != pinnedID {
		t.Fatalf("upsert replaced the pinned id")
	}
	pinned = up[0]

	skip := named("never")
	pin(skip, 42)
	must("upsert do nothing", db.Clauses(clause.OnConflict{DoNothing: true}).Create(skip))

	for _, r := range rows {
		id := idOf(r)
		if prev, dup := want[id]; dup && r != pinned {
			t.Fatalf("id %s given to %q and %q", id, prev, reflect.ValueOf(r).Elem().FieldByName("Name"))
		}
		want[id] = reflect.ValueOf(r).Elem().FieldByName("Name").String()
	}
	want[pinnedID] = "pinned-updated"

	var got []T
	must("Find", db.Find(&got))
	if len(got) != len(want) {
		t.Fatalf("%d rows in the table, want %d", len(got), len(want))
	}
	for i := range got {
		id, name := idOf(&got[i]), reflect.ValueOf(&got[i]).Elem().FieldByName("Name").String()
		if want[id] != name {
			t.Fatalf("row %s: name %q, want %q", id, name, want[id])
		}
		if id != pinnedID {
			parseID(t, format, id)
		}
	}
}
