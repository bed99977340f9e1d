package sharding

import (
	"errors"
	"math"
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
		{"MaxInt32 tables", Mod{Databases: 1, Tables: math.MaxInt32, TablePattern: "t_%d"}, "Tables"},
		{"MaxInt tables", Mod{Databases: 1, Tables: math.MaxInt, TablePattern: "t_%d"}, "Tables"},
		{"MaxInt32 databases", Mod{Databases: math.MaxInt32, Tables: 1, TablePattern: "t"}, "Databases"},
		{"one too many tables", Mod{Databases: 1, Tables: MaxTables + 1, TablePattern: "t_%d"}, "Tables"},
		{"one too many databases", Mod{Databases: MaxDatabases + 1, Tables: 1, TablePattern: "t"}, "Databases"},
		{"product", Mod{Databases: 2, Tables: MaxShards/2 + 1, TablePattern: "t_%d"}, "Databases × Tables"},
		{"overflowing table base", Mod{Databases: 1, Tables: 2, TablePattern: "t_%d", TableBase: math.MaxInt - 1}, "TableBase"},
		{"overflowing database base", Mod{Databases: 2, Tables: 1, TablePattern: "t", DatabaseBase: math.MaxInt32}, "DatabaseBase"},
	}
	for _, c := range cases {
		_, err := NewMod(c.cfg)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "sharding.Mod."+c.field) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming sharding.Mod.%s", c.name, err, c.field)
		}
	}
	// The bounds themselves are allowed.
	for _, cfg := range []Mod{
		{Databases: 1, Tables: MaxTables, TablePattern: "t_%d"},
		{Databases: MaxDatabases, Tables: MaxShards / MaxDatabases, TablePattern: "t_%d"},
	} {
		r, err := NewMod(cfg)
		if err != nil {
			t.Fatalf("%d × %d: %v", cfg.Databases, cfg.Tables, err)
		}
		shards, err := r.Shards()
		if err != nil || len(shards) != MaxShards {
			t.Errorf("%d × %d: %d shards, %v; want %d", cfg.Databases, cfg.Tables, len(shards), err, MaxShards)
		}
	}
}

// An interval range spanning more buckets than MaxShards is refused at
// NewInterval, and so is a Tables call over such a range on an open router.
func TestIntervalBoundedRange(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(1_000_000_000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, cfg := range map[string]Interval{
		"daily to the end of time": {Layout: snowflake.Default, Period: Daily, Prefix: "t_", Start: start, End: far},
		"daily for 200 years":      {Layout: snowflake.Default, Period: Daily, Prefix: "t_", Start: start, End: start.AddDate(200, 0, 0)},
		"daily from year 2":        {Layout: snowflake.Default, Period: Daily, Prefix: "t_", Start: time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC), End: start},
	} {
		_, err := NewInterval(cfg)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxShards") {
			t.Errorf("%s: err = %v, want ErrInvalidConfig naming MaxShards", name, err)
		}
	}
	ok, err := NewInterval(Interval{Layout: snowflake.Default, Period: Daily, Prefix: "t_", Start: start, End: start.AddDate(0, 0, MaxShards)})
	if err != nil {
		t.Fatalf("exactly MaxShards days: %v", err)
	}
	if shards, err := ok.Shards(); err != nil || len(shards) != MaxShards {
		t.Errorf("Shards() = %d shards, %v; want %d", len(shards), err, MaxShards)
	}

	open := mustInterval(t, Interval{Layout: snowflake.Default, Period: Daily, Prefix: "t_"})
	if got, err := open.Tables(time.Time{}, far); !errors.Is(err, engine.ErrInvalidConfig) || got != nil {
		t.Errorf("Tables over all time: %d tables, %v; want ErrInvalidConfig", len(got), err)
	}
	if got, err := open.Tables(start, start.AddDate(0, 0, 3)); err != nil || len(got) != 3 {
		t.Errorf("Tables over 3 days = %v, %v", got, err)
	}
}
