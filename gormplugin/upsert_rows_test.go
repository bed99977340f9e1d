package idplugin_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// Ticket is unique by code; the plugin fills its key, a chain number, a
// dated number and a UUID.
type Ticket struct {
	ID      int64     `idgen:"snowflake"`
	Code    string    `gorm:"size:32;uniqueIndex"`
	OrderNo int64     `idgen:"chain,name=ticket_no"`
	Invoice string    `idgen:"chain,name=ticket_inv,format=TK-{yyyy}{MM}{dd}-{seq:6}"`
	Ref     uuid.UUID `idgen:"uuidv7"`
	Hits    int
}

// AutoTicket is Ticket with a key the database numbers: the plugin fills
// the other three.
type AutoTicket struct {
	ID      int64     `gorm:"primaryKey;autoIncrement"`
	Code    string    `gorm:"size:32;uniqueIndex"`
	OrderNo int64     `idgen:"chain,name=auto_ticket_no"`
	Invoice string    `idgen:"chain,name=auto_ticket_inv,format=AT-{yyyy}{MM}{dd}-{seq:6}"`
	Ref     uuid.UUID `idgen:"uuidv7"`
	Hits    int
}

// upsertForm is one clause.OnConflict a create is made with.
type upsertForm struct {
	name string
	oc   clause.OnConflict
}

func upsertForms() []upsertForm {
	hits := clause.AssignmentColumns([]string{"hits"})
	onCode := []clause.Column{{Name: "code"}}
	return []upsertForm{
		{"DoNothing on code", clause.OnConflict{Columns: onCode, DoNothing: true}},
		{"DoUpdates on code", clause.OnConflict{Columns: onCode, DoUpdates: hits}},
		{"UpdateAll on code", clause.OnConflict{Columns: onCode, UpdateAll: true}},
		{"DoNothing", clause.OnConflict{DoNothing: true}},
		{"DoUpdates", clause.OnConflict{DoUpdates: hits}},
		{"UpdateAll", clause.OnConflict{UpdateAll: true}},
	}
}

// upsertOutcome is what a create with an upsert form does with the rows
// that meet a conflict.
type upsertOutcome int

const (
	readBack upsertOutcome = iota // they hold the values of the row they met
	cleared                       // they get back the values they came with
	refused                       // the create fails with ErrUpsertRow and changes nothing
)

// outcomeOf is what docs/gorm.md says of the form on the database: with
// Columns every form reads the row met back. Without, MySQL/MariaDB still
// can (any unique key counts, and the plugin reads them), SQLite and
// PostgreSQL cannot: DoNothing gives the values back, DoUpdates is refused
// (always on PostgreSQL, which needs a target), and UpdateAll, which GORM
// aims at the primary key, meets the conflict as a duplicate key, refused.
func outcomeOf(db string, f upsertForm, conflict bool) upsertOutcome {
	oc := f.oc
	switch {
	case db == "mariadb" || len(oc.Columns) > 0:
		return readBack
	case oc.DoNothing:
		return cleared
	case db == "postgres" && !oc.UpdateAll:
		return refused // before anything runs, met or not
	case conflict:
		return refused
	}
	return readBack
}

// TestUpsertRowsMatchTheTableOnAllDatabases: after every form of upsert,
// on a single row, a slice and CreateInBatches, every field the plugin
// filled holds what the table holds, read back with a query of its own;
// or, where docs/gorm.md says so, the values the row came with, or the
// create fails with ErrUpsertRow and the table is as before.
func TestUpsertRowsMatchTheTableOnAllDatabases(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := datedGorm(t, d, fakeClock(time.Now()), true)
			if err := idplugin.Prepare(db, &Ticket{}, &AutoTicket{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Ticket{}, &AutoTicket{}); err != nil {
				t.Fatal(err)
			}
			for _, model := range []string{"Ticket", "AutoTicket"} {
				for _, f := range upsertForms() {
					for _, shape := range []string{"single", "slice", "batches"} {
						t.Run(model+"/"+f.name+"/"+shape, func(t *testing.T) {
							if model == "Ticket" {
								upsertRows[Ticket](t, d.Name, db, f, shape)
							} else {
								upsertRows[AutoTicket](t, d.Name, db, f, shape)
							}
						})
					}
				}
			}
		})
	}
}

// upsertRows runs one case of TestUpsertRowsMatchTheTableOnAllDatabases on
// the table of T, emptied and seeded with tickets a and b.
func upsertRows[T Ticket | AutoTicket](t *testing.T, dbName string, db *gorm.DB, f upsertForm, shape string) {
	if err := db.Where("1 = 1").Delete(new(T)).Error; err != nil {
		t.Fatal(err)
	}
	seed := []T{T(Ticket{Code: "a"}), T(Ticket{Code: "b"})}
	if err := db.Create(&seed).Error; err != nil {
		t.Fatal(err)
	}
	before := readTickets[T](t, db)

	// Rows that meet a conflict (a, b) and new ones; without a conflict first.
	calls := map[string][][]string{
		"single":  {{"new"}, {"a"}},
		"slice":   {{"n1", "n2"}, {"x", "a", "y", "b"}},
		"batches": {{"n1", "n2", "n3"}, {"a", "x", "y", "b", "z"}},
	}[shape]
	for _, codes := range calls {
		conflict := slices.Contains(codes, "a")
		rows := make([]T, len(codes))
		for i, c := range codes {
			rows[i] = T(Ticket{Code: c, Hits: 7})
		}
		q := db.Clauses(f.oc)
		var err error
		switch shape {
		case "single":
			err = q.Create(&rows[0]).Error
		case "slice":
			err = q.Create(&rows).Error
		default:
			err = q.CreateInBatches(&rows, 2).Error
		}
		want := outcomeOf(dbName, f, conflict)
		stored := readTickets[T](t, db)
		if want == refused {
			if !errors.Is(err, idplugin.ErrUpsertRow) {
				t.Fatalf("%v: error %v; want one wrapping ErrUpsertRow", codes, err)
			}
			if !maps(stored, before) {
				t.Fatalf("%v: the refused create changed the table:\nbefore %+v\nafter  %+v", codes, before, stored)
			}
			return
		}
		if err != nil {
			t.Fatalf("%v: %v", codes, err)
		}
		for _, r := range rows {
			got := Ticket(r)
			row, ok := stored[got.Code]
			_, met := before[got.Code]
			switch {
			case !ok:
				t.Fatalf("%q: no row in the table", got.Code)
			case met && want == cleared:
				if got.OrderNo != 0 || got.Invoice != "" || got.Ref != uuid.Nil || !isAuto[T]() && got.ID != 0 {
					t.Errorf("%q met a conflict and holds %+v; want the plugin's fields back to zero", got.Code, got)
				}
			default:
				if msg := sameFilled[T](got, row); msg != "" {
					t.Errorf("%q holds %+v, its row %+v: %s", got.Code, got, row, msg)
				}
			}
			if met {
				wantHits := 7
				if f.oc.DoNothing {
					wantHits = 0
				}
				if row.Hits != wantHits || row.ID != before[got.Code].ID {
					t.Errorf("%q: row %+v after the upsert; want key %d and %d hits", got.Code, row, before[got.Code].ID, wantHits)
				}
			}
		}
		for code := range before {
			if _, ok := stored[code]; !ok {
				t.Errorf("row %q is gone", code)
			}
		}
		before = stored
	}
}

func isAuto[T Ticket | AutoTicket]() bool {
	var zero T
	_, ok := any(zero).(AutoTicket)
	return ok
}

// sameFilled says how the fields the plugin fills in got differ from row.
func sameFilled[T Ticket | AutoTicket](got, row Ticket) string {
	var diff []string
	if got.ID != row.ID && !isAuto[T]() {
		diff = append(diff, fmt.Sprintf("key %d", got.ID))
	}
	if got.OrderNo != row.OrderNo {
		diff = append(diff, fmt.Sprintf("order no %d", got.OrderNo))
	}
	if got.Invoice != row.Invoice {
		diff = append(diff, fmt.Sprintf("invoice %q", got.Invoice))
	}
	if got.Ref != row.Ref {
		diff = append(diff, fmt.Sprintf("ref %s", got.Ref))
	}
	if len(diff) == 0 {
		return ""
	}
	return fmt.Sprint("differs in ", diff)
}

// readTickets reads the table of T with a query of its own, by code.
func readTickets[T Ticket | AutoTicket](t *testing.T, db *gorm.DB) map[string]Ticket {
	t.Helper()
	var rows []T
	if err := db.Session(&gorm.Session{NewDB: true}).Order("code").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]Ticket{}
	for _, r := range rows {
		out[Ticket(r).Code] = Ticket(r)
	}
	return out
}

func maps(a, b map[string]Ticket) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
