package idplugin_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// Label is unique by name, the conflict column of the upserts below.
type Label struct {
	ID    int64  `idgen:"snowflake"`
	Name  string `gorm:"size:64;uniqueIndex"`
	Hits  int
	Notes []LabelNote
}

// LabelNote is a child of Label, created with it or after it.
type LabelNote struct {
	ID      int64 `idgen:"chain,name=note"`
	LabelID int64
	Text    string
}

// AutoLabel is Label with GORM's auto-increment key, to compare with.
type AutoLabel struct {
	ID   uint
	Name string `gorm:"size:64;uniqueIndex"`
	Hits int
}

// onName is an upsert on the name column.
func onName(oc clause.OnConflict) clause.OnConflict {
	oc.Columns = []clause.Column{{Name: "name"}}
	return oc
}

var (
	updateAll = onName(clause.OnConflict{UpdateAll: true})
	doUpdates = onName(clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"hits"})})
	doNothing = onName(clause.OnConflict{DoNothing: true})
)

// labelDB migrates the label tables and inserts labels with the names given,
// returning their IDs by name.
func labelDB(t *testing.T, d gormDB, names ...string) (*gorm.DB, map[string]int64) {
	t.Helper()
	db := d.gorm
	models := []any{&Label{}, &LabelNote{}, &AutoLabel{}}
	if err := idplugin.Prepare(db, models...); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(models...); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, n := range names {
		l := Label{Name: n}
		if err := db.Create(&l).Error; err != nil {
			t.Fatal(err)
		}
		ids[n] = l.ID
	}
	return db, ids
}

// stored returns the labels in the table by name.
func stored(t *testing.T, db *gorm.DB) map[string]Label {
	t.Helper()
	var rows []Label
	if err := db.Preload("Notes").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]Label{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

// agree checks that every label holds the key of the row of its name: the
// seeded key for a name seeded before.
func agree(t *testing.T, db *gorm.DB, seeded map[string]int64, labels ...*Label) {
	t.Helper()
	rows := stored(t, db)
	for _, l := range labels {
		row, ok := rows[l.Name]
		switch {
		case !ok:
			t.Fatalf("label %q: no row", l.Name)
		case l.ID != row.ID:
			t.Fatalf("label %q holds key %d, its row %d", l.Name, l.ID, row.ID)
		case seeded[l.Name] != 0 && l.ID != seeded[l.Name]:
			t.Fatalf("label %q holds key %d, seeded as %d", l.Name, l.ID, seeded[l.Name])
		}
	}
}

func TestUpsertSingleRowOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db, seeded := labelDB(t, d, "go", "sql")
			// The defect this guards against: the struct kept a freshly drawn
			// key while the row kept its own.
			tag := Label{Name: "go", Hits: 5}
			if err := db.Clauses(updateAll).Create(&tag).Error; err != nil {
				t.Fatal(err)
			}
			agree(t, db, seeded, &tag)
			if rows := stored(t, db); rows["go"].Hits != 5 || len(rows) != 2 {
				t.Fatalf("table after the upsert: %+v", rows)
			}
			again := Label{Name: "go", Hits: 6}
			if err := db.Clauses(doUpdates).Create(&again).Error; err != nil {
				t.Fatal(err)
			}
			fresh := Label{Name: "new"}
			if err := db.Clauses(updateAll).Create(&fresh).Error; err != nil {
				t.Fatal(err)
			}
			agree(t, db, seeded, &again, &fresh)
			if fresh.ID == seeded["go"] || fresh.ID == seeded["sql"] {
				t.Fatalf("new label took key %d of a seeded one", fresh.ID)
			}

			// A chain reused keeps its clause, which the plugin adds to on MySQL.
			q := db.Clauses(doUpdates)
			x, y := Label{Name: "sql", Hits: 1}, Label{Name: "sql", Hits: 2}
			if err := q.Create(&x).Error; err != nil {
				t.Fatal(err)
			}
			if err := q.Create(&y).Error; err != nil {
				t.Fatal(err)
			}
			// Without GORM's transaction, and from a map.
			noTx := Label{Name: "go", Hits: 7}
			if err := db.Session(&gorm.Session{SkipDefaultTransaction: true}).Clauses(updateAll).Create(&noTx).Error; err != nil {
				t.Fatal(err)
			}
			agree(t, db, seeded, &x, &y, &noTx)
			m := map[string]any{"name": "go", "hits": 8}
			if err := db.Model(&Label{}).Clauses(updateAll).Create(m).Error; err != nil {
				t.Fatal(err)
			}
			if m["id"] != seeded["go"] {
				t.Fatalf("map upsert: %v, want id %d", m, seeded["go"])
			}
			if rows := stored(t, db); rows["go"].Hits != 8 || rows["sql"].Hits != 2 || len(rows) != 3 {
				t.Fatalf("table: %+v", rows)
			}
		})
	}
}

func TestUpsertBatchOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db, seeded := labelDB(t, d, "a", "b", "c", "d")
			mixed := []Label{{Name: "a", Hits: 1}, {Name: "x"}, {Name: "c", Hits: 1}, {Name: "y"}}
			if err := db.Clauses(updateAll).Create(&mixed).Error; err != nil {
				t.Fatal(err)
			}
			ptrs := []*Label{{Name: "z"}, {Name: "b", Hits: 2}, {Name: "x", Hits: 2}}
			if err := db.Clauses(doUpdates).Create(ptrs).Error; err != nil {
				t.Fatal(err)
			}
			// Chunks of two: a mixed one, one of new rows, one of a single row.
			chunks := []Label{{Name: "d", Hits: 3}, {Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "a", Hits: 3}}
			if err := db.Clauses(updateAll).CreateInBatches(&chunks, 2).Error; err != nil {
				t.Fatal(err)
			}
			all := append(ptrs, &mixed[0], &mixed[1], &mixed[2], &mixed[3])
			for i := range chunks {
				all = append(all, &chunks[i])
			}
			agree(t, db, seeded, all...)
			rows := stored(t, db)
			for name, hits := range map[string]int{"a": 3, "b": 2, "c": 1, "d": 3, "x": 2, "y": 0, "n3": 0} {
				if rows[name].Hits != hits {
					t.Errorf("%s: %d hits, want %d", name, rows[name].Hits, hits)
				}
			}
			if len(rows) != 10 {
				t.Fatalf("%d rows, want 10: %+v", len(rows), rows)
			}
		})
	}
}

// TestUpsertDoNothingOnAllDatabases checks that a row DoNothing skips
// holds the key of the row it met, found by the conflict columns (SQLite,
// PostgreSQL) or by the unique keys of the table (MySQL/MariaDB, with or
// without RETURNING); and that, without conflict columns on SQLite and
// PostgreSQL, where the plugin cannot tell which row it met, it gets back
// the key it came without.
func TestUpsertDoNothingOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			doNothingReadsBack(t, d, d.Name == "mariadb")
		})
	}
	t.Run("mariadb without RETURNING", func(t *testing.T) {
		md := testdb.MariaDB(t)
		db, err := gorm.Open(mysql.New(mysql.Config{DSN: md.DSN, DisableWithReturning: true}), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if sqlDB, err := db.DB(); err == nil {
			t.Cleanup(func() { sqlDB.Close() })
		}
		if err := db.Use(idplugin.New(idplugin.Settings{Registry: newRegistry(t)})); err != nil {
			t.Fatal(err)
		}
		doNothingReadsBack(t, gormDB{DB: md, gorm: db}, true)
	})
}

func doNothingReadsBack(t *testing.T, d gormDB, mysql bool) {
	db, seeded := labelDB(t, d, "a", "b")
	one := Label{Name: "a", Hits: 1}
	if err := db.Clauses(doNothing).Create(&one).Error; err != nil || one.ID != seeded["a"] {
		t.Fatalf("single row: key %d, want %d (%v)", one.ID, seeded["a"], err)
	}
	batch := []Label{{Name: "x"}, {Name: "b"}, {Name: "y"}, {Name: "a"}}
	if err := db.Clauses(doNothing).Create(&batch).Error; err != nil {
		t.Fatal(err)
	}
	agree(t, db, seeded, &batch[0], &batch[1], &batch[2], &batch[3])
	// A map gets the key it came without.
	m := map[string]any{"name": "b"}
	if err := db.Model(&Label{}).Clauses(doNothing).Create(m).Error; err != nil {
		t.Fatal(err)
	}
	if m["id"] != seeded["b"] {
		t.Fatalf("map: %v, want id %d", m, seeded["b"])
	}
	// Without conflict columns: any unique key counts, and SQLite and
	// PostgreSQL do not say which.
	untargeted := []Label{{Name: "a"}, {Name: "z"}}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&untargeted).Error; err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int64{true: seeded["a"]}[mysql]; untargeted[0].ID != want {
		t.Fatalf("without conflict columns, the row that met a: key %d, want %d", untargeted[0].ID, want)
	}
	agree(t, db, seeded, &untargeted[1])
	if rows := stored(t, db); len(rows) != 5 || rows["a"].Hits != 0 {
		t.Fatalf("table: %+v", rows)
	}
}

func TestUpsertChildrenOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db, seeded := labelDB(t, d, "go")
			// Children created with the upsert go under the row's key.
			tag := Label{Name: "go", Notes: []LabelNote{{Text: "n1"}, {Text: "n2"}}}
			if err := db.Clauses(updateAll).Create(&tag).Error; err != nil {
				t.Fatal(err)
			}
			// And so do those created after it, from the struct's key.
			if err := db.Create(&LabelNote{LabelID: tag.ID, Text: "n3"}).Error; err != nil {
				t.Fatal(err)
			}
			batch := []Label{{Name: "new", Notes: []LabelNote{{Text: "m1"}}}, {Name: "go", Notes: []LabelNote{{Text: "n4"}}}}
			if err := db.Clauses(doUpdates).Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			agree(t, db, seeded, &tag, &batch[0], &batch[1])
			rows := stored(t, db)
			texts := func(name string) string {
				var out []string
				for _, n := range rows[name].Notes {
					out = append(out, n.Text)
				}
				sort.Strings(out)
				return strings.Join(out, ",")
			}
			if texts("go") != "n1,n2,n3,n4" || texts("new") != "m1" {
				t.Fatalf("notes by label: go %q, new %q", texts("go"), texts("new"))
			}
			var orphans int64
			if err := db.Model(&LabelNote{}).Where("label_id NOT IN (?)", db.Model(&Label{}).Select("id")).Count(&orphans).Error; err != nil || orphans != 0 {
				t.Fatalf("%d notes under a key no label has (%v)", orphans, err)
			}
		})
	}
}

// Sku's unique index is the database's alone: the model does not declare it.
type Sku struct {
	ID   int64  `idgen:"snowflake"`
	Code string `gorm:"size:32"`
	Hits int
}

// Slug has a string key.
type Slug struct {
	ID   string `gorm:"primaryKey;size:16" idgen:"chain,name=slug,format=radix36"`
	Name string `gorm:"size:64;uniqueIndex"`
	Hits int
}

func TestUpsertFindsRowsBeyondTheModelOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Sku{}, &Slug{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Sku{}, &Slug{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("CREATE UNIQUE INDEX sku_code ON skus (code)").Error; err != nil {
				t.Fatal(err)
			}
			old := []Sku{{Code: "a"}, {Code: "b"}}
			if err := db.Create(&old).Error; err != nil {
				t.Fatal(err)
			}
			onCode := clause.OnConflict{Columns: []clause.Column{{Name: "code"}}, UpdateAll: true}
			skus := []Sku{{Code: "b", Hits: 1}, {Code: "c"}, {Code: "a", Hits: 1}}
			if err := db.Clauses(onCode).Create(&skus).Error; err != nil {
				t.Fatal(err)
			}
			if skus[0].ID != old[1].ID || skus[2].ID != old[0].ID || skus[1].ID == 0 {
				t.Fatalf("skus %+v, stored before %+v", skus, old)
			}

			// A partial unique index: the row met is the one its condition holds.
			if d.Name != "mariadb" {
				if err := db.Exec("CREATE UNIQUE INDEX sku_live ON skus (hits) WHERE code LIKE 'live%'").Error; err != nil {
					t.Fatal(err)
				}
				live := []Sku{{Code: "old", Hits: 7}, {Code: "live1", Hits: 7}}
				if err := db.Create(&live).Error; err != nil {
					t.Fatal(err)
				}
				onLive := clause.OnConflict{Columns: []clause.Column{{Name: "hits"}}, TargetWhere: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "code LIKE 'live%'"}}},
					DoUpdates: clause.Assignments(map[string]any{"code": "live2"})}
				again := Sku{Code: "live3", Hits: 7}
				if err := db.Clauses(onLive).Create(&again).Error; err != nil || again.ID != live[1].ID {
					t.Fatalf("partial index: key %d, the live row's %d (%v)", again.ID, live[1].ID, err)
				}
			}

			first := Slug{Name: "s"}
			if err := db.Create(&first).Error; err != nil {
				t.Fatal(err)
			}
			one := Slug{Name: "s", Hits: 1}
			if err := db.Clauses(updateAll).Create(&one).Error; err != nil || one.ID != first.ID {
				t.Fatalf("string key: %q, stored %q (%v)", one.ID, first.ID, err)
			}
			slugs := []Slug{{Name: "t"}, {Name: "s", Hits: 2}}
			if err := db.Clauses(updateAll).Create(&slugs).Error; err != nil || slugs[1].ID != first.ID || slugs[0].ID == "" {
				t.Fatalf("string keys: %+v, stored %q (%v)", slugs, first.ID, err)
			}
		})
	}
}

// Account has two unique keys besides its own.
type Account struct {
	ID    int64  `idgen:"snowflake"`
	Name  string `gorm:"size:64;uniqueIndex"`
	Email string `gorm:"size:64;unique"`
	Hits  int
}

func TestUpsertErrorsOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Account{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Account{}); err != nil {
				t.Fatal(err)
			}
			seed := []Account{{Name: "a", Email: "a@"}, {Name: "b", Email: "b@"}}
			if err := db.Create(&seed).Error; err != nil {
				t.Fatal(err)
			}
			hits := clause.AssignmentColumns([]string{"hits"})
			refused := func(what string, err error, says string) {
				t.Helper()
				if !errors.Is(err, idplugin.ErrUpsertRow) || !strings.Contains(err.Error(), "model Account") || !strings.Contains(err.Error(), says) {
					t.Fatalf("%s: %v", what, err)
				}
				var n, touched int64
				if err := db.Model(&Account{}).Count(&n).Error; err != nil || n != 2 {
					t.Fatalf("%s: %d rows after the refused create (%v)", what, n, err)
				}
				if err := db.Model(&Account{}).Where("hits <> 0").Count(&touched).Error; err != nil || touched != 0 {
					t.Fatalf("%s: %d rows updated by the refused create (%v)", what, touched, err)
				}
			}
			switch d.Name {
			case "mariadb":
				// Any unique key counts: a row holding a's name and b's email
				// met one of them, and in a batch nothing says which.
				both := []Account{{Name: "a", Email: "b@", Hits: 1}, {Name: "n", Email: "n@", Hits: 1}}
				refused("batch", db.Clauses(clause.OnConflict{DoUpdates: hits}).Create(&both).Error, "cannot tell which")
				// A single row: the database says which.
				one := Account{Name: "a", Email: "b@", Hits: 1}
				if err := db.Clauses(clause.OnConflict{DoUpdates: hits}).Create(&one).Error; err != nil {
					t.Fatal(err)
				}
				var met Account
				if err := db.Where("hits = 1").First(&met).Error; err != nil || met.ID != one.ID {
					t.Fatalf("single row holds key %d; the row updated: %+v (%v)", one.ID, met, err)
				}
				if err := db.Model(&Account{}).Where("1 = 1").Update("hits", 0).Error; err != nil {
					t.Fatal(err)
				}
				// A unique index on a column the model does not map: the
				// plugin cannot look a row up by it.
				if err := db.Exec("ALTER TABLE accounts ADD COLUMN ext varchar(8) NOT NULL DEFAULT '', ADD UNIQUE INDEX ext_unique (ext, email)").Error; err != nil {
					t.Fatal(err)
				}
				batch := []Account{{Name: "a", Email: "a2@", Hits: 1}, {Name: "m", Email: "m@", Hits: 1}}
				refused("unmapped column", db.Clauses(clause.OnConflict{DoUpdates: hits}).Create(&batch).Error, "does not map")
			case "sqlite":
				// No conflict target: no columns to find the row met by.
				a := Account{Name: "a", Email: "z@", Hits: 1}
				refused("no target", db.Clauses(clause.OnConflict{DoUpdates: hits}).Create(&a).Error, "clause.OnConflict.Columns")
			case "postgres":
				a := Account{Name: "x", Email: "a@", Hits: 1}
				refused("on constraint", db.Clauses(clause.OnConflict{OnConstraint: "uni_accounts_email", DoUpdates: hits}).Create(&a).Error, "clause.OnConflict.Columns")
				// DoNothing needs no columns: the row met is not looked up.
				skipped := Account{Name: "x", Email: "a@"}
				if err := db.Clauses(clause.OnConflict{OnConstraint: "uni_accounts_email", DoNothing: true}).Create(&skipped).Error; err != nil || skipped.ID != 0 {
					t.Fatalf("on constraint, do nothing: key %d (%v)", skipped.ID, err)
				}
			}
		})
	}
}

// sqlRecorder records the statements GORM runs.
type sqlRecorder struct {
	logger.Interface
	mu  sync.Mutex
	sql []string
}

func (r *sqlRecorder) LogMode(logger.LogLevel) logger.Interface { return r }

func (r *sqlRecorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	s, _ := fc()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sql = append(r.sql, s)
}

func (r *sqlRecorder) selects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(r.sql), func(s string) bool { return !strings.HasPrefix(strings.TrimLeft(s, "("), "SELECT") })
}

// TestUpsertWithoutConflictCostsNoQueryOnAllDatabases checks the plugin
// reads nothing back when it can tell no row met a conflict: creates with
// associations (which GORM saves as upserts), upserts on the key, and
// DoNothing.
func TestUpsertWithoutConflictCostsNoQueryOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			base := d.gorm
			if err := base.SetupJoinTable(&Parent{}, "Tags", &ParentTag{}); err != nil {
				t.Fatal(err)
			}
			models := []any{&Owner{}, &Parent{}, &Child{}, &Profile{}, &Tag{}, &ParentTag{}, &Label{}, &LabelNote{}}
			if err := idplugin.Prepare(base, models...); err != nil {
				t.Fatal(err)
			}
			if err := base.AutoMigrate(models...); err != nil {
				t.Fatal(err)
			}
			rec := &sqlRecorder{Interface: logger.Discard}
			db := base.Session(&gorm.Session{Logger: rec})
			p := Parent{Name: "p", Owner: &Owner{Name: "o"}, Children: []Child{{Name: "c"}}, Profile: &Profile{Bio: "b"}, Tags: []Tag{{Label: "t"}}}
			if err := db.Create(&p).Error; err != nil {
				t.Fatal(err)
			}
			onKey := clause.OnConflict{UpdateAll: true}
			if err := db.Clauses(onKey).Create(&[]Label{{Name: "k1", Notes: []LabelNote{{Text: "n"}}}, {Name: "k2"}}).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Clauses(doNothing).Create(&[]Label{{Name: "d1"}, {Name: "d2"}}).Error; err != nil {
				t.Fatal(err)
			}
			if got := rec.selects(); len(got) != 0 {
				t.Fatalf("the plugin read back %d times:\n%s", len(got), strings.Join(got, "\n"))
			}
		})
	}
}
