package idplugin_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/gormplugin"
)

type Owner struct {
	ID   int64 `idgen:"snowflake"`
	Name string
}

type Parent struct {
	ID       int64 `idgen:"snowflake"`
	Name     string
	OwnerID  int64
	Owner    *Owner   // belongs to
	Children []Child  // has many
	Profile  *Profile // has one
	Tags     []Tag    `gorm:"many2many:parent_tags"`
	SeenID   int64    `gorm:"-"` // what BeforeCreate saw
}

// BeforeCreate records the ID the hook sees.
func (p *Parent) BeforeCreate(*gorm.DB) error {
	p.SeenID = p.ID
	return nil
}

type Child struct {
	ID       int64 `idgen:"chain,name=child"`
	ParentID int64
	Name     string
}

type Profile struct {
	ID       engine.ID `gorm:"primaryKey" idgen:"snowflake"`
	ParentID int64
	Bio      string
}

type Tag struct {
	ID    uint64 `gorm:"primaryKey" idgen:"snowflake"`
	Label string
}

// ParentTag is the many-to-many join model; its rows carry their own ID.
type ParentTag struct {
	ParentID int64  `gorm:"primaryKey"`
	TagID    uint64 `gorm:"primaryKey"`
	LinkID   int64  `gorm:"not null;uniqueIndex" idgen:"snowflake"`
}

func TestAssociationsOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := db.SetupJoinTable(&Parent{}, "Tags", &ParentTag{}); err != nil {
				t.Fatal(err)
			}
			models := []any{&Owner{}, &Parent{}, &Child{}, &Profile{}, &Tag{}, &ParentTag{}}
			if err := idplugin.Prepare(db, models...); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(models...); err != nil {
				t.Fatal(err)
			}
			p := Parent{
				Name:     "p",
				Owner:    &Owner{Name: "o"},
				Children: []Child{{Name: "c0"}, {Name: "c1"}, {Name: "c2"}},
				Profile:  &Profile{Bio: "b"},
				Tags:     []Tag{{Label: "t0"}, {Label: "t1"}},
			}
			if err := db.Create(&p).Error; err != nil {
				t.Fatal(err)
			}
			if p.ID == 0 || p.SeenID != p.ID {
				t.Fatalf("parent id %d, BeforeCreate saw %d", p.ID, p.SeenID)
			}
			if p.Owner.ID == 0 || p.OwnerID != p.Owner.ID {
				t.Fatalf("belongs-to: owner id %d, parent.owner_id %d", p.Owner.ID, p.OwnerID)
			}

			var got Parent
			if err := db.Preload("Owner").Preload("Children").Preload("Profile").Preload("Tags").First(&got, p.ID).Error; err != nil {
				t.Fatal(err)
			}
			if got.Name != "p" || got.OwnerID != p.Owner.ID || got.Owner == nil || got.Owner.Name != "o" {
				t.Fatalf("parent read back as %+v", got)
			}
			if len(got.Children) != 3 {
				t.Fatalf("%d children read back, want 3", len(got.Children))
			}
			ids := map[int64]bool{}
			for i, c := range got.Children {
				if c.ID != p.Children[i].ID || c.ID == 0 || c.ParentID != p.ID || c.Name != p.Children[i].Name || ids[c.ID] {
					t.Fatalf("child %d read back as %+v, inserted %+v (parent %d)", i, c, p.Children[i], p.ID)
				}
				ids[c.ID] = true
			}
			if got.Profile == nil || got.Profile.ID == 0 || got.Profile.ID != p.Profile.ID || got.Profile.ParentID != p.ID {
				t.Fatalf("profile read back as %+v, inserted %+v", got.Profile, p.Profile)
			}
			if len(got.Tags) != 2 || got.Tags[0].ID == 0 || got.Tags[0].ID == got.Tags[1].ID {
				t.Fatalf("tags read back as %+v", got.Tags)
			}
			for i, tag := range got.Tags {
				if tag.ID != p.Tags[i].ID || tag.Label != p.Tags[i].Label {
					t.Fatalf("tag %d read back as %+v, inserted %+v", i, tag, p.Tags[i])
				}
			}
			var links []ParentTag
			if err := db.Order("tag_id").Find(&links).Error; err != nil {
				t.Fatal(err)
			}
			if len(links) != 2 || links[0].LinkID == 0 || links[0].LinkID == links[1].LinkID || links[0].ParentID != p.ID {
				t.Fatalf("join rows %+v", links)
			}
		})
	}
}

type Typo struct {
	ID   int64 `idgen:"snowflake,nmae=order"`
	Name string
}

type WrongType struct {
	ID   int64   `idgen:"snowflake"`
	Rank float64 `idgen:"snowflake"`
}

type UnknownKind struct {
	ID int64 `idgen:"chian"`
}

type KeyTypo struct {
	ID   int64 `gorm:"primaryKey;autoIncrement:false" idgne:"snowflake"`
	Name string
}

func TestTagErrorsOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			// The tables exist, so an insert without IDs would succeed: only the plugin stops it.
			if err := db.AutoMigrate(&Typo{}, &WrongType{}, &UnknownKind{}, &KeyTypo{}); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				model any
				is    error
				says  []string
			}{
				{&Typo{Name: "x"}, engine.ErrInvalidConfig, []string{"model Typo field ID", `unknown option "nmae"`}},
				{&WrongType{}, engine.ErrInvalidConfig, []string{"model WrongType field Rank", "type float64"}},
				{&UnknownKind{}, engine.ErrUnknownGenerator, []string{"model UnknownKind field ID", `"chian"`}},
				{&KeyTypo{Name: "x"}, engine.ErrInvalidConfig, []string{"model KeyTypo field ID", `tag key "idgne" looks like a misspelt "idgen"`}},
			}
			for _, c := range cases {
				for attempt := range 2 { // first sight, and every time after
					err := db.Create(c.model).Error
					if !errors.Is(err, c.is) {
						t.Fatalf("%T attempt %d: %v, want %v", c.model, attempt, err, c.is)
					}
					for _, s := range c.says {
						if !strings.Contains(err.Error(), s) {
							t.Fatalf("%T: %q does not say %q", c.model, err, s)
						}
					}
				}
				var n int64
				if err := db.Model(c.model).Count(&n).Error; err != nil || n != 0 {
					t.Fatalf("%T: %d rows inserted despite the error (%v)", c.model, n, err)
				}
			}
			err := idplugin.Prepare(db, &I64Row{}, &Typo{}, &WrongType{})
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "model Typo") || !strings.Contains(err.Error(), "model WrongType") {
				t.Fatalf("Prepare: %v", err)
			}
		})
	}
}

type Plain struct {
	ID   int64
	Name string
}

type Small struct {
	ID   int32
	Name string
}

type Counted struct {
	ID   uint64 `gorm:"primaryKey;autoIncrement"`
	Name string
}

type Control struct {
	ID   int64
	Name string
}

func TestUntaggedPrimaryKeysOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t, idplugin.Settings{DefaultGenerator: "chain,name=plain"}) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := idplugin.Prepare(db, &Plain{}, &Small{}, &Counted{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Plain{}, &Small{}, &Counted{}, &Control{}); err != nil {
				t.Fatal(err)
			}
			if autoIncrement(t, d, "plains") {
				t.Error("plains.id is auto-increment after Prepare")
			}
			// Not prepared before AutoMigrate, and explicitly auto-increment: both keep it.
			if !autoIncrement(t, d, "controls") || !autoIncrement(t, d, "counteds") {
				t.Error("controls.id or counteds.id is not auto-increment: the check cannot tell")
			}
			rows := []Plain{{Name: "a"}, {Name: "b"}, {ID: 7, Name: "pinned"}}
			if err := db.Create(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if rows[0].ID <= 1_000_000 || rows[1].ID <= 1_000_000 || rows[0].ID == rows[1].ID || rows[2].ID != 7 {
				t.Fatalf("untagged keys: %+v", rows)
			}
			var got []Plain
			if err := db.Order("name").Find(&got).Error; err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got[0] != rows[0] || got[1] != rows[1] || got[2] != rows[2] {
				t.Fatalf("read back %+v, inserted %+v", got, rows)
			}
			// An int32 key cannot hold an ID and an explicit autoIncrement is the
			// database's: both are left to it.
			small, counted := Small{Name: "s"}, Counted{Name: "c"}
			if err := db.Create(&small).Error; err != nil || small.ID != 1 {
				t.Fatalf("int32 key: %+v, %v", small, err)
			}
			if err := db.Create(&counted).Error; err != nil || counted.ID != 1 {
				t.Fatalf("autoIncrement key: %+v, %v", counted, err)
			}
		})
	}
}

func TestMapsOnAllDatabases(t *testing.T) {
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := db.AutoMigrate(&I64Row{}); err != nil {
				t.Fatal(err)
			}
			named := map[string]any{"id": 0, "name": "zero"}
			missing := map[string]any{"name": "missing"}
			pinned := map[string]any{"ID": int64(7), "Name": "pinned"}
			for _, m := range []map[string]any{named, missing, pinned} {
				if err := db.Model(&I64Row{}).Create(m).Error; err != nil {
					t.Fatal(err)
				}
			}
			many := []map[string]any{{"name": "m0"}, {"name": "m1", "id": nil}}
			if err := db.Model(&I64Row{}).Create(&many).Error; err != nil {
				t.Fatal(err)
			}
			want := map[int64]string{7: "pinned"}
			for _, m := range []map[string]any{named, missing, many[0], many[1]} {
				id, ok := m["id"].(int64)
				if !ok || id == 0 {
					t.Fatalf("map %v: id not filled", m)
				}
				want[id] = m["name"].(string)
			}
			if pinned["ID"] != int64(7) {
				t.Fatalf("pinned map changed: %v", pinned)
			}
			if _, added := pinned["id"]; added {
				t.Fatalf("pinned map got a second key: %v", pinned)
			}
			var got []I64Row
			if err := db.Find(&got).Error; err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for _, r := range got {
				if want[r.ID] != r.Name {
					t.Fatalf("row %+v, want name %q", r, want[r.ID])
				}
			}
		})
	}
}

// Concurrent creates through one *gorm.DB, starting on a model the plugin has
// not seen: 8 goroutines race to plan it, then insert 5,000 rows each.
type Burst struct {
	ID     int64 `idgen:"snowflake"`
	Worker int
	Seq    int
}

func TestConcurrentCreatesOnAllDatabases(t *testing.T) {
	const workers, perWorker, chunk = 8, 5000, 50
	for _, d := range openAll(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.gorm
			if err := db.AutoMigrate(&Burst{}); err != nil {
				t.Fatal(err)
			}
			rows := make([][]Burst, workers)
			errs := make([]error, workers)
			var start, wg sync.WaitGroup
			start.Add(1)
			for w := range workers {
				rows[w] = make([]Burst, perWorker)
				for i := range rows[w] {
					rows[w][i] = Burst{Worker: w, Seq: i}
				}
				wg.Go(func() {
					start.Wait()
					mine := rows[w]
					// 100 single-row creates, then the rest in chunks.
					for i := range 100 {
						if err := db.Create(&mine[i]).Error; err != nil {
							errs[w] = err
							return
						}
					}
					for i := 100; i < perWorker; i += chunk {
						part := mine[i:min(i+chunk, perWorker)]
						if err := db.Create(&part).Error; err != nil {
							errs[w] = err
							return
						}
					}
				})
			}
			start.Done()
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			want := map[int64][2]int{}
			for _, rs := range rows {
				for _, r := range rs {
					if _, dup := want[r.ID]; dup || r.ID == 0 {
						t.Fatalf("id %d given twice (or zero)", r.ID)
					}
					want[r.ID] = [2]int{r.Worker, r.Seq}
				}
			}
			var got []Burst
			if err := db.FindInBatches(&got, 10000, func(tx *gorm.DB, _ int) error {
				for _, r := range got {
					if w, ok := want[r.ID]; !ok || w != [2]int{r.Worker, r.Seq} {
						t.Fatalf("row %+v was not inserted as such", r)
					}
					delete(want, r.ID)
				}
				return nil
			}).Error; err != nil {
				t.Fatal(err)
			}
			if len(want) != 0 {
				t.Fatalf("%d rows missing", len(want))
			}
		})
	}
}
