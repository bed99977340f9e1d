package idplugin_test

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// invoice has a UUIDv7 key and a dated invoice number.
type invoice struct {
	ID     uuid.UUID `idgen:"uuidv7"`
	Number string    `gorm:"uniqueIndex" idgen:"chain,name=invoice,format=INV-{yyyy}{MM}{dd}-{seq:6}"`
	Amount int64
}

// datedGorm opens d with GORM and the plugin on a registry whose store is a
// SQLite file of its own (brand-new when init) and whose clock is fc.
func datedGorm(t *testing.T, d testdb.DB, fc *clocktest.Fake, init bool) *gorm.DB {
	t.Helper()
	ids, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ids.Close() })
	st, err := sqlstore.Open(t.Context(), ids, sqlstore.Settings{CreateTables: true, Init: init, ResetGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// A machine ID by hand: no lease compares the fake clock with the store's.
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Machine: machine.Manual(5), Namespace: "dated", StateDir: "off",
		Clock: fc, Logger: slog.New(slog.DiscardHandler)})
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
	return db
}

func fakeClock(t time.Time) *clocktest.Fake {
	fc := clocktest.NewFake(t)
	fc.ManualSleep = true // heartbeats wait for the test to move it
	return fc
}

// numbers creates n invoices and returns their numbers.
func numbers(t *testing.T, db *gorm.DB, n int) string {
	t.Helper()
	rows := make([]invoice, n)
	if err := db.Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Number)
	}
	return strings.Join(out, " ")
}

// TestDatedNumbers: a dated invoice number is INV-<today in UTC>-000001,
// -000002, … and starts again at 1 the next day and the next year, on every
// dialect; Prepare sizes the column to the format.
func TestDatedNumbers(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			fc := fakeClock(time.Now())
			db := datedGorm(t, d, fc, true)
			if err := idplugin.Prepare(db, &invoice{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&invoice{}); err != nil {
				t.Fatal(err)
			}
			today := "INV-" + fc.Now().UTC().Format("20060102")
			if got, want := numbers(t, db, 2), today+"-000001 "+today+"-000002"; got != want {
				t.Errorf("today: %s, want %s", got, want)
			}
			if got, want := numbers(t, db, 1), today+"-000003"; got != want {
				t.Errorf("today, a second create: %s, want %s", got, want)
			}
			y, m, dd := fc.Now().UTC().Date()
			fc.Advance(time.Date(y, m, dd+1, 0, 0, 0, 0, time.UTC).Sub(fc.Now())) // midnight
			tomorrow := "INV-" + fc.Now().Format("20060102")
			if got, want := numbers(t, db, 2), tomorrow+"-000001 "+tomorrow+"-000002"; got != want {
				t.Errorf("the next day: %s, want %s", got, want)
			}
			fc.Advance(time.Date(2026, 12, 31, 23, 59, 59, 999e6, time.UTC).Sub(fc.Now()))
			if got, want := numbers(t, db, 1), "INV-20261231-000001"; got != want {
				t.Errorf("New Year's Eve: %s, want %s", got, want)
			}
			fc.Advance(time.Millisecond)
			if got, want := numbers(t, db, 1), "INV-20270101-000001"; got != want {
				t.Errorf("New Year: %s, want %s", got, want)
			}
			if d.Name != "sqlite" { // SQLite keeps no length
				var n int
				if types, err := db.Migrator().ColumnTypes(&invoice{}); err == nil {
					for _, c := range types {
						if c.Name() == "number" {
							l, _ := c.Length()
							n = int(l)
						}
					}
				}
				if n != len("INV-20261125-000001") {
					t.Errorf("number column of length %d, want the format's %d", n, len("INV-20261125-000001"))
				}
			}
		})
	}
}

// TestDatedFloor: on a store not declared brand-new, the plugin's Floor of
// a dated column starts each period's counter above the largest number of
// that period the table holds, on every dialect.
func TestDatedFloor(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			fc := fakeClock(time.Date(2026, 12, 31, 10, 0, 0, 0, time.UTC))
			db := datedGorm(t, d, fc, false)
			if err := idplugin.Prepare(db, &invoice{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&invoice{}); err != nil {
				t.Fatal(err)
			}
			// Rows written before this process, by hand (their keys as the
			// column takes them). Numbers of another day must not count.
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"INV-20261231-000041", "INV-20261231-000007", "INV-20261230-000999"} {
				u := uuid.Must(uuid.NewV7())
				var key any = u.String()
				if d.Name == "mariadb" {
					key = u[:] // BINARY(16)
				}
				if _, err := sqlDB.Exec(d.Rebind("INSERT INTO invoices (id, number, amount) VALUES (?, ?, 0)"), key, n); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := numbers(t, db, 1), "INV-20261231-000042"; got != want {
				t.Errorf("above the day's largest: %s, want %s", got, want)
			}
			fc.Advance(24 * time.Hour)
			if got, want := numbers(t, db, 1), "INV-20270101-000001"; got != want {
				t.Errorf("a day with no rows: %s, want %s", got, want)
			}
		})
	}
}
