package sharding

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// Absurd shard counts are refused before anything is allocated, with an
// error naming the field: Tables: math.MaxInt32 used to take the process's
// memory naming the tables.
func TestModBoundedCounts(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Mod
		field string
	}{
		{"MaxInt32 tables", Mod{Tables: "t_{0..2147483646}"}, "Tables"},
		{"past int32 tables", Mod{Tables: "t_{0..9223372036854775806}"}, "Tables"},
		{"MaxInt32 databases", Mod{Databases: "m{0..2147483646}", Tables: "t"}, "Databases"},
		{"one too many tables", Mod{Tables: fmt.Sprintf("t_{1..%d}", maxTables+1)}, "Tables"},
		{"one too many databases", Mod{Databases: fmt.Sprintf("m{1..%d}", maxDatabases+1), Tables: "t"}, "Databases"},
		{"product", Mod{Databases: "m{0..1}", Tables: fmt.Sprintf("t_{0..%d}", maxShards/2)}, "Databases × Tables"},
		{"overflowing table range", Mod{Tables: "t_{2147483647..2147483648}"}, "Tables"},
	}
	for _, c := range cases {
		_, err := NewMod(c.cfg)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "sharding.Mod."+c.field) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming sharding.Mod.%s", c.name, err, c.field)
		}
	}
	// The bounds themselves are allowed.
	for _, cfg := range []Mod{
		{Tables: fmt.Sprintf("t_{1..%d}", maxTables)},
		{Databases: fmt.Sprintf("m{0..%d}", maxDatabases-1), Tables: fmt.Sprintf("t_{0..%d}", maxShards/maxDatabases-1)},
	} {
		r, err := NewMod(cfg)
		if err != nil {
			t.Fatalf("%s × %s: %v", cfg.Databases, cfg.Tables, err)
		}
		shards, err := r.Shards()
		if err != nil || len(shards) != maxShards {
			t.Errorf("%s × %s: %d shards, %v; want %d", cfg.Databases, cfg.Tables, len(shards), err, maxShards)
		}
	}
}

// An interval range spanning more buckets than maxShards is refused at
// NewInterval, and so is a Tables call over such a range on an open router.
func TestIntervalBoundedRange(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(1_000_000_000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, cfg := range map[string]Interval{
		"daily to the end of time": {Layout: snowflake.Default, Table: "t_{20060102}", Start: start, End: far},
		"daily for 200 years":      {Layout: snowflake.Default, Table: "t_{20060102}", Start: start, End: start.AddDate(200, 0, 0)},
		"daily from year 2":        {Layout: snowflake.Default, Table: "t_{20060102}", Start: time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC), End: start},
	} {
		_, err := NewInterval(cfg)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "65536") {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming the bound", name, err)
		}
	}
	ok, err := NewInterval(Interval{Layout: snowflake.Default, Table: "t_{20060102}", Start: start, End: start.AddDate(0, 0, maxShards)})
	if err != nil {
		t.Fatalf("exactly maxShards days: %v", err)
	}
	if shards, err := ok.Shards(); err != nil || len(shards) != maxShards {
		t.Errorf("Shards() = %d shards, %v; want %d", len(shards), err, maxShards)
	}

	open := mustInterval(t, Interval{Layout: snowflake.Default, Table: "t_{20060102}"})
	if got, err := open.Tables(time.Time{}, far); !errors.Is(err, engine.ErrInvalidConfig) || got != nil {
		t.Errorf("Tables over all time: %d tables, %v; want ErrInvalidConfig", len(got), err)
	}
	if got, err := open.Tables(start, start.AddDate(0, 0, 3)); err != nil || len(got) != 3 {
		t.Errorf("Tables over 3 days = %v, %v", got, err)
	}
}
