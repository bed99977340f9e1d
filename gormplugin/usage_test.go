package idplugin_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// Everyday GORM usage on every database: Select/Omit, gorm.Model,
// hooks that copy rows, bad rows, and models the plugin does not own.

type Shop struct {
	ID    int64 `idgen:"snowflake"`
	Code  string
	Name  string
	Items []ShopItem
}

type ShopItem struct {
	ID     int64 `idgen:"chain,name=item"`
	ShopID int64
	SKU    string
}

func TestSelectOmitOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Shop{}, &ShopItem{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Shop{}, &ShopItem{}); err != nil {
				t.Fatal(err)
			}
			items := func() []ShopItem { return []ShopItem{{SKU: "a"}, {SKU: "b"}} }
			var shops []*Shop
			create := func(what string, tx *gorm.DB, s *Shop) {
				t.Helper()
				if err := tx.Create(s).Error; err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if s.ID == 0 {
					t.Fatalf("%s: no ID", what)
				}
				shops = append(shops, s)
			}
			create("Select(Code)", db.Select("Code"), &Shop{Code: "s1", Name: "not inserted"})
			create("Select(code) lower-case", db.Select("code"), &Shop{Code: "s2"})
			create("Omit(ID)", db.Omit("ID"), &Shop{Code: "o1", Name: "n"})
			create("Omit(shops.id, Name)", db.Omit("shops.id", "Name"), &Shop{Code: "o2", Name: "not inserted"})
			create("Omit(*)", db.Omit("*"), &Shop{Code: "not inserted"})
			create("Select(Code, Items)", db.Select("Code", "Items"), &Shop{Code: "si", Items: items()})
			create("Omit(ID) with items", db.Omit("ID"), &Shop{Code: "oi", Items: items()})
			create("Omit(Items.ID)", db.Omit("Items.ID"), &Shop{Code: "oii", Items: items()})
			create("Omit(ID, Items.ID)", db.Omit("ID", "Items.ID"), &Shop{Code: "oo", Items: items()})
			create("Select(Code, Items.SKU, Items.ShopID)", db.Select("Code", "Items", "Items.SKU", "Items.ShopID"), &Shop{Code: "sis", Items: items()})
			create("Omit(associations)", db.Omit(clause.Associations).Omit("ID"), &Shop{Code: "oa", Items: items()})

			// Batches and maps take the same way.
			batch := []Shop{{Code: "b1"}, {Code: "b2"}, {Code: "b3"}}
			if err := db.Omit("ID").CreateInBatches(&batch, 2).Error; err != nil {
				t.Fatal(err)
			}
			for i := range batch {
				shops = append(shops, &batch[i])
			}
			m := map[string]any{"code": "m1"}
			if err := db.Model(&Shop{}).Select("code").Create(m).Error; err != nil {
				t.Fatal(err)
			}
			// A chain reused keeps its Select/Omit for the next create.
			q := db.Omit("ID", "Name")
			twice := []*Shop{{Code: "q1", Name: "x"}, {Code: "q2", Name: "x"}}
			for _, s := range twice {
				create("reused Omit chain", q, s)
			}

			// Every struct holds the ID of its row, and every row is a struct's.
			var got []Shop
			if err := db.Preload("Items").Find(&got).Error; err != nil {
				t.Fatal(err)
			}
			byID := map[int64]Shop{}
			for _, s := range got {
				byID[s.ID] = s
			}
			if len(got) != len(shops)+1 {
				t.Fatalf("%d rows, want %d", len(got), len(shops)+1)
			}
			for _, s := range shops {
				row, ok := byID[s.ID]
				if !ok {
					t.Fatalf("shop %q: no row has its ID %d", s.Code, s.ID)
				}
				wantCode := s.Code
				if s.Code == "not inserted" {
					wantCode = ""
				}
				if row.Code != wantCode || row.Name != "" && s.Name != row.Name {
					t.Fatalf("shop %q: row %+v", s.Code, row)
				}
				if len(row.Items) != len(s.Items) {
					t.Fatalf("shop %q: %d items in the table, %d created", s.Code, len(row.Items), len(s.Items))
				}
				sort.Slice(row.Items, func(i, j int) bool { return row.Items[i].SKU < row.Items[j].SKU })
				for i, it := range s.Items {
					if it.ID == 0 || it.ShopID != s.ID || row.Items[i].ID != it.ID {
						t.Fatalf("shop %q item %d: struct %+v, row %+v", s.Code, i, it, row.Items[i])
					}
				}
			}
			if id, ok := m["id"].(int64); !ok || byID[id].Code != "m1" {
				t.Fatalf("map: %v, row %+v", m, byID[id])
			}
			// The caller's Omit slice is left as it was.
			cols := []string{"ID"}
			if err := db.Omit(cols...).Create(&Shop{Code: "c"}).Error; err != nil || cols[0] != "ID" {
				t.Fatalf("Omit(cols...): %v, cols %v", err, cols)
			}
		})
	}
}

// Article embeds gorm.Model, whose uint ID carries no tag.
type Article struct {
	gorm.Model
	Title string
}

// Post embeds gorm.Model too, with the plugin told to leave it alone.
type Post struct {
	gorm.Model
	Title string
}

func TestGormModelOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Article{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Article{}); err != nil {
				t.Fatal(err)
			}
			if autoIncrement(t, d, "articles") {
				t.Error("articles.id is auto-increment after Prepare")
			}
			a := Article{Title: "one"}
			if err := db.Create(&a).Error; err != nil {
				t.Fatal(err)
			}
			many := []Article{{Title: "two"}, {Title: "three"}}
			if err := db.CreateInBatches(&many, 10).Error; err != nil {
				t.Fatal(err)
			}
			for _, x := range append(many, a) {
				if x.ID <= 1_000_000 {
					t.Fatalf("article %q: ID %d is not generated", x.Title, x.ID)
				}
				var row Article
				if err := db.First(&row, x.ID).Error; err != nil || row.Title != x.Title || row.CreatedAt.IsZero() {
					t.Fatalf("article %q (ID %d) read back as %+v, %v", x.Title, x.ID, row, err)
				}
			}

			// The database keeps the key when asked to.
			plain := open(t, d.DB, idplugin.Settings{GormModelAutoIncrement: true})
			if err := plain.AutoMigrate(&Post{}); err != nil {
				t.Fatal(err)
			}
			p := Post{Title: "db"}
			if err := plain.Create(&p).Error; err != nil || p.ID != 1 {
				t.Fatalf("WithGormModelAutoIncrement: ID %d, %v", p.ID, err)
			}
		})
	}
}

// Note copies itself in a hook, as audit or "duplicate" features do.
type Note struct {
	ID   int64 `idgen:"snowflake"`
	Text string
}

// AfterCreate creates a copy of notes that ask for one: keeping the ID
// ("keep:") or zeroing it first ("zero:"), the documented way.
func (n *Note) AfterCreate(tx *gorm.DB) error {
	var c Note
	switch {
	case strings.HasPrefix(n.Text, "keep:"):
		c = *n
	case strings.HasPrefix(n.Text, "zero:"):
		c = *n
		c.ID = 0
	case strings.HasPrefix(n.Text, "audit:"):
		return tx.Create(&NoteAudit{NoteID: n.ID, Text: n.Text}).Error
	default:
		return nil
	}
	c.Text = "copy of " + n.Text
	return tx.Create(&c).Error
}

// EarlyNote copies itself before its own insert.
type EarlyNote struct {
	ID   int64 `idgen:"snowflake"`
	Text string
}

// BeforeCreate creates a copy that keeps the ID.
func (n *EarlyNote) BeforeCreate(tx *gorm.DB) error {
	if strings.HasPrefix(n.Text, "copy of") {
		return nil
	}
	c := *n
	c.Text = "copy of " + n.Text
	return tx.Create(&c).Error
}

// NoteAudit is keyed by the note's own ID, in a table of its own.
type NoteAudit struct {
	NoteID int64 `gorm:"primaryKey;autoIncrement:false"`
	Text   string
}

func TestHookCopiesOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Note{}, &EarlyNote{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Note{}, &EarlyNote{}, &NoteAudit{}); err != nil {
				t.Fatal(err)
			}
			count := func(model any) int64 {
				var n int64
				if err := db.Model(model).Count(&n).Error; err != nil {
					t.Fatal(err)
				}
				return n
			}
			// The rule: a copy with its ID zeroed gets its own.
			z := Note{Text: "zero: fine"}
			if err := db.Create(&z).Error; err != nil {
				t.Fatal(err)
			}
			var copies []Note
			if err := db.Where("text = ?", "copy of zero: fine").Find(&copies).Error; err != nil || len(copies) != 1 || copies[0].ID == z.ID || copies[0].ID == 0 {
				t.Fatalf("zeroed copy: %+v, %v (original %d)", copies, err, z.ID)
			}
			// A row keyed by the note's ID in another table is no copy.
			if err := db.Create(&Note{Text: "audit: fine"}).Error; err != nil || count(&NoteAudit{}) != 1 {
				t.Fatalf("audit row: %v", err)
			}
			// A copy that keeps the ID is refused, naming the cause, and the
			// create rolls back: before or after the original's insert.
			for _, c := range []struct {
				model any
				name  string
			}{{&Note{Text: "keep: refused"}, "Note"}, {&EarlyNote{Text: "early"}, "EarlyNote"}} {
				before := count(c.model)
				err := db.Create(c.model).Error
				if !errors.Is(err, idplugin.ErrHookCopy) || !errors.Is(err, gorm.ErrDuplicatedKey) ||
					!strings.Contains(err.Error(), "model "+c.name+" field ID") || !strings.Contains(err.Error(), "set the copy's ID to zero") {
					t.Fatalf("%s copy keeping the ID: %v", c.name, err)
				}
				if after := count(c.model); after != before {
					t.Fatalf("%s: %d rows after the refused create, %d before", c.name, after, before)
				}
			}
			// Hooks still see the ID, and a later create on the same chain is unaffected.
			tx := db.Session(&gorm.Session{})
			if err := tx.Create(&Note{Text: "plain"}).Error; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNilElementOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := db.AutoMigrate(&I64Row{}); err != nil {
				t.Fatal(err)
			}
			for _, v := range []any{[]*I64Row{{Name: "a"}, nil}, &[]*I64Row{nil}} {
				err := db.Create(v).Error
				if !errors.Is(err, gorm.ErrInvalidData) || errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "element") {
					t.Fatalf("Create(%T with a nil element): %v", v, err)
				}
				if err := idplugin.Fill(db, v); !errors.Is(err, gorm.ErrInvalidData) {
					t.Fatalf("Fill(%T with a nil element): %v", v, err)
				}
			}
			var n int64
			if err := db.Model(&I64Row{}).Count(&n).Error; err != nil || n != 0 {
				t.Fatalf("%d rows inserted (%v)", n, err)
			}
		})
	}
}

// Legacy has no idgen tag: the plugin must not change a thing about it.
type Legacy struct {
	ID    uint
	Name  string `gorm:"uniqueIndex"`
	Items []LegacyItem
}

type LegacyItem struct {
	ID       int64
	LegacyID uint
	SKU      string
}

func TestUntaggedModelsAsWithoutThePlugin(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			with := d.gorm
			without, err := gorm.Open(dialector(d.DB), &gorm.Config{Logger: logger.Discard,
				NamingStrategy: schema.NamingStrategy{TablePrefix: "plain_"}})
			if err != nil {
				t.Fatal(err)
			}
			if sqlDB, err := without.DB(); err == nil {
				t.Cleanup(func() { sqlDB.Close() })
			}
			run := func(db *gorm.DB) []string {
				var out []string
				say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
				if err := idplugin.Prepare(with, &Legacy{}, &LegacyItem{}); err != nil {
					t.Fatal(err)
				}
				if err := db.AutoMigrate(&Legacy{}, &LegacyItem{}); err != nil {
					t.Fatal(err)
				}
				table := tableOf(t, db, &Legacy{})
				say("auto-increment %v", autoIncrement(t, gormDB{DB: d.DB, gorm: db}, table))
				dry := db.Session(&gorm.Session{DryRun: true}).Create(&Legacy{Name: "dry"}).Statement
				say("dry run %s %v", strings.ReplaceAll(dry.SQL.String(), "plain_", ""), dry.Vars)
				sql := db.ToSQL(func(tx *gorm.DB) *gorm.DB { return tx.Select("Name").Create(&Legacy{Name: "to-sql"}) })
				say("to sql %s", strings.ReplaceAll(sql, "plain_", ""))
				a := Legacy{Name: "a", Items: []LegacyItem{{SKU: "x"}, {SKU: "y"}}}
				say("create %v -> %d %d %d", db.Create(&a).Error, a.ID, a.Items[0].ID, a.Items[1].ID)
				b := []Legacy{{Name: "b"}, {Name: "c"}}
				say("batch %v -> %d %d", db.CreateInBatches(&b, 1).Error, b[0].ID, b[1].ID)
				o := Legacy{Name: "omit"}
				say("omit id %v -> %d", db.Omit("ID").Create(&o).Error, o.ID)
				s := Legacy{Name: "select"}
				say("select name %v -> %d", db.Select("Name").Create(&s).Error, s.ID)
				p := Legacy{ID: 100, Name: "pinned"}
				say("pinned %v -> %d", db.Create(&p).Error, p.ID)
				dup := Legacy{Name: "a"}
				say("duplicate name fails %v", db.Create(&dup).Error != nil)
				up := Legacy{Name: "a"}
				say("upsert %v", db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoNothing: true}).Create(&up).Error)
				f := Legacy{Name: "first-or-create"}
				say("first or create %v -> %d", db.Where(Legacy{Name: "first-or-create"}).FirstOrCreate(&f).Error, f.ID)
				sv := Legacy{Name: "saved"}
				say("save %v -> %d", db.Save(&sv).Error, sv.ID)
				m := map[string]any{"name": "map"}
				say("map %v", db.Model(&Legacy{}).Create(m).Error)
				say("nil element fails %v", db.Create([]*Legacy{{Name: "n"}, nil}).Error != nil)
				var rows []Legacy
				say("find %v", db.Order("id").Find(&rows).Error)
				for _, r := range rows {
					say("row %d %s", r.ID, r.Name)
				}
				return out
			}
			got, want := run(with), run(without)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("with the plugin:\n%s\nwithout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// ReadOnlyCode has a tagged column GORM never inserts.
type ReadOnlyCode struct {
	ID   int64  `idgen:"snowflake"`
	Code string `gorm:"<-:false" idgen:"snowflake"`
}

func TestTaggedColumnGormDoesNotInsert(t *testing.T) {
	db := open(t, testdb.SQLite(t))
	err := idplugin.Prepare(db, &ReadOnlyCode{})
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "model ReadOnlyCode field Code") || !strings.Contains(err.Error(), "never reach the row") {
		t.Fatalf("Prepare: %v", err)
	}
}
