package idforge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/tests/testdb"
)

// datedStore is a store a dated test runs on: brand-new, or not (init
// false: a sequence it does not know needs a Floor).
type datedStore struct {
	name string
	open func(t *testing.T, init bool) idforge.Store
}

// datedStores are the SQL stores on SQLite, MariaDB and PostgreSQL, and the
// Redis store, each on a database or key prefix of its own.
func datedStores(t *testing.T) []datedStore {
	var out []datedStore
	for _, d := range testdb.All(t) {
		out = append(out, datedStore{d.Name, func(t *testing.T, init bool) idforge.Store {
			st, err := sqlstore.Open(t.Context(), d.Open(t), sqlstore.Settings{CreateTables: true, Init: init, ResetGrace: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}})
	}
	out = append(out, datedStore{"redis", func(t *testing.T, init bool) idforge.Store {
		client, prefix := testdb.Redis(t)
		st, err := redisstore.Open(t.Context(), client, redisstore.Settings{Prefix: prefix, AllowVolatile: true, Init: init, ResetGrace: -1})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}})
	return out
}

// datedRegistry is a registry on st whose clock is fc: machine 1 by hand,
// so that no store compares its clock with fc.
func datedRegistry(t *testing.T, st idforge.Store, fc *clocktest.Fake, zone *time.Location) *idforge.Registry {
	t.Helper()
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Machine: machine.Manual(1), StateDir: "off",
		Clock: fc, Zone: zone, Chain: segment.Settings{Step: 10, MaxWait: time.Second}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// fakeClock stands still at t; heartbeats wait for the test to move it.
func fakeClock(t time.Time) *clocktest.Fake {
	fc := clocktest.NewFake(t)
	fc.ManualSleep = true
	return fc
}

func draw(t *testing.T, g func(context.Context) (string, error), n int) []string {
	t.Helper()
	var out []string
	for range n {
		s, err := g(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func want(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// TestDatedAcrossMidnightAndYearEnd: a dated chain counts from 1 each day,
// month or year, on every store, and restarts at midnight and at the year
// end by the registry's clock.
func TestDatedAcrossMidnightAndYearEnd(t *testing.T) {
	for _, s := range datedStores(t) {
		t.Run(s.name, func(t *testing.T) {
			fc := fakeClock(time.Date(2026, 12, 30, 23, 59, 59, 0, time.UTC))
			reg := datedRegistry(t, s.open(t, true), fc, nil)
			day, err := reg.Dated("invoice", "INV-{yyyy}{MM}{dd}-{seq:6}")
			if err != nil {
				t.Fatal(err)
			}
			month, err := reg.Dated("invoice", "INV-{yyyy}{MM}-{seq:5}")
			if err != nil {
				t.Fatal(err)
			}
			year, err := reg.Dated("order", "{yyyy}/{seq:4}")
			if err != nil {
				t.Fatal(err)
			}
			want(t, "Dec 30", draw(t, day, 3), "INV-20261230-000001", "INV-20261230-000002", "INV-20261230-000003")
			want(t, "December", draw(t, month, 2), "INV-202612-00001", "INV-202612-00002")
			want(t, "2026", draw(t, year, 2), "2026/0001", "2026/0002")

			fc.Advance(time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC).Sub(fc.Now())) // midnight
			want(t, "Dec 31", draw(t, day, 2), "INV-20261231-000001", "INV-20261231-000002")
			want(t, "December, a day on", draw(t, month, 1), "INV-202612-00003")

			fc.Advance(time.Date(2026, 12, 31, 23, 59, 59, 999e6, time.UTC).Sub(fc.Now()))
			want(t, "Dec 31, the last millisecond", draw(t, day, 1), "INV-20261231-000003")
			fc.Advance(time.Millisecond) // the year end
			want(t, "Jan 1", draw(t, day, 2), "INV-20270101-000001", "INV-20270101-000002")
			want(t, "January", draw(t, month, 1), "INV-202701-00001")
			want(t, "2027", draw(t, year, 1), "2027/0001")

			// Three days were drawn from: the process holds the newest two.
			var days []string
			for _, g := range reg.Stats().Generators {
				if name := g.Name; g.Kind == "chain" && strings.HasPrefix(name, "invoice:") && len(name) == len("invoice:20261230") {
					days = append(days, name)
				}
			}
			if len(days) != 2 {
				t.Errorf("day chains held: %q, want the newest two", days)
			}
			// A clock stepped back into a closed day opens its sequence
			// again, above what it handed out.
			fc.Advance(time.Date(2026, 12, 30, 12, 0, 0, 0, time.UTC).Sub(fc.Now()))
			got := draw(t, day, 1)
			if key, n := got[0][:12], got[0][13:]; key != "INV-20261230" || n <= "000003" {
				t.Errorf("Dec 30 again: %s, want a number of Dec 30 above 000003", got[0])
			}
		})
	}
}

// TestDatedZone: the period starts at midnight of Settings.Zone.
func TestDatedZone(t *testing.T) {
	st := datedStores(t)[0].open(t, true) // SQLite
	tokyo := time.FixedZone("JST", 9*3600)
	fc := fakeClock(time.Date(2026, 11, 25, 14, 59, 59, 0, time.UTC)) // 23:59:59 in Tokyo
	reg := datedRegistry(t, st, fc, tokyo)
	g, err := reg.Dated("invoice", "{yyyy}{MM}{dd}-{seq:3}")
	if err != nil {
		t.Fatal(err)
	}
	want(t, "23:59:59 in Tokyo", draw(t, g, 1), "20261125-001")
	fc.Advance(time.Second)
	want(t, "midnight in Tokyo, 15:00 UTC", draw(t, g, 1), "20261126-001")
}

// TestDatedOverflowAndRefusals: a counter past its width is an error,
// never a wrong number, until the next period; formats and registries that
// cannot work are refused.
func TestDatedOverflowAndRefusals(t *testing.T) {
	st := datedStores(t)[0].open(t, true)
	fc := fakeClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	reg := datedRegistry(t, st, fc, nil)
	g, err := reg.Dated("ticket", "T{yyyy}{MM}{dd}{seq:1}")
	if err != nil {
		t.Fatal(err)
	}
	draw(t, g, 9)
	if s, err := g(t.Context()); !errors.Is(err, engine.ErrIDOverflow) || !strings.Contains(err.Error(), `"ticket"`) {
		t.Errorf("10th number of a 1-digit counter: %q, %v; want ErrIDOverflow naming the chain", s, err)
	}
	fc.Advance(24 * time.Hour)
	want(t, "the next day", draw(t, g, 1), "T202611261")

	for _, c := range []struct{ name, format, why string }{
		{"ticket", "T{seq:4}", "{yyyy} is missing"},
		{"ticket", "{dd}{MM}{yyyy}-{seq:4}", "finer field"},
		{"", "{yyyy}-{seq:4}", "needs a chain name"},
	} {
		if _, err := reg.Dated(c.name, c.format); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Dated(%q, %q): %v; want ErrInvalidConfig saying %q", c.name, c.format, err, c.why)
		}
	}
	bare, err := idforge.New(t.Context(), idforge.Settings{Machine: machine.Manual(2), StateDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.Dated("ticket", "{yyyy}-{seq:4}"); !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), "store") {
		t.Errorf("Dated without a store: %v; want ErrUnknownGenerator asking for a store", err)
	}
	reg.Close()
	if _, err := g(t.Context()); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// TestDatedFloors: on a store not declared brand-new, each period's new
// sequence is refused without a Floor, and starts above the answer of one
// added under "<name>:*", which is asked with the period's sequence name.
func TestDatedFloors(t *testing.T) {
	for _, s := range datedStores(t) {
		t.Run(s.name, func(t *testing.T) {
			fc := fakeClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
			reg := datedRegistry(t, s.open(t, false), fc, nil)
			g, err := reg.Dated("invoice", "INV-{yyyy}{MM}{dd}-{seq:6}")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g(t.Context()); !errors.Is(err, engine.ErrNoFloor) || !strings.Contains(err.Error(), "invoice:20261125") {
				t.Fatalf("no Floor: %v; want ErrNoFloor naming invoice:20261125", err)
			}
			reg.Close() // gives machine 1 back

			reg = datedRegistry(t, s.open(t, false), fc, nil)
			var asked []string
			reg.AddFloor("invoice:*", func(_ context.Context, name string) (int64, error) {
				asked = append(asked, name)
				if name == "invoice:20261125" {
					return 41, nil // the table holds INV-20261125-000041
				}
				return 0, nil
			})
			if g, err = reg.Dated("invoice", "INV-{yyyy}{MM}{dd}-{seq:6}"); err != nil {
				t.Fatal(err)
			}
			want(t, "above the Floor's 41", draw(t, g, 1), "INV-20261125-000042")
			fc.Advance(24 * time.Hour)
			want(t, "the next day, Floor 0", draw(t, g, 1), "INV-20261126-000001")
			if fmt.Sprint(asked) != "[invoice:20261125 invoice:20261126]" {
				t.Errorf("the Floor was asked for %q", asked)
			}
		})
	}
}
