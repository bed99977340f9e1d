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

// Rule and name text that once crashed the process, hung it or was read
// wrong is refused at NewMod with an error naming the field: a brace
// without its pair panicked slicing the name, deep or unclosed nesting
// and millions of terms overflowed the stack, a million-term rule was
// accepted and then printed in quadratic time by every Route error, and a
// NUL silently ended the rule ("id\x00%2" routed as "id").
func TestModRefusesHostileText(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Mod
		field string
	}{
		{"closing brace only", Mod{Tables: "o_0..1}"}, "Tables"},
		{"opening brace only", Mod{Tables: "o_{0..1"}, "Tables"},
		{"braces reversed", Mod{Tables: "o_}0..1{"}, "Tables"},
		{"closing brace only, databases", Mod{Databases: "m0..1}", Tables: "t"}, "Databases"},
		{"NUL in a database name", Mod{Databases: "m\x00{0..1}", Tables: "t"}, "Databases"},
		{"broken UTF-8 in a database name", Mod{Databases: "m\xff", Tables: "t"}, "Databases"},
		{"huge name text", Mod{Tables: strings.Repeat("t", 1<<20) + "_{0..65535}"}, "Tables"},
		{"10M nested parentheses", Mod{Tables: "t_{0..1}", TableRule: strings.Repeat("(", 10_000_000) + "id" + strings.Repeat(")", 10_000_000)}, "TableRule"},
		{"10M unclosed parentheses", Mod{Tables: "t_{0..1}", TableRule: strings.Repeat("(", 10_000_000)}, "TableRule"},
		{"33 nested parentheses", Mod{Tables: "t_{0..1}", TableRule: strings.Repeat("(", 33) + "id%2" + strings.Repeat(")", 33)}, "TableRule"},
		{"5M terms", Mod{Tables: "t_{0..1}", TableRule: "id" + strings.Repeat("+1", 5_000_000)}, "TableRule"},
		{"1M terms", Mod{Databases: "m{0..1}", Tables: "t", DatabaseRule: "id" + strings.Repeat("+1", 1_000_000)}, "DatabaseRule"},
		{"NUL in a rule", Mod{Tables: "t_{0..1}", TableRule: "id\x00%2"}, "TableRule"},
		{"newline in a rule", Mod{Tables: "t_{0..1}", TableRule: "id\n%2"}, "TableRule"},
	}
	for _, c := range cases {
		_, err := NewMod(c.cfg)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "sharding.Mod."+c.field) {
			t.Errorf("%s: err = %.300v; want ErrInvalidConfig naming sharding.Mod.%s", c.name, err, c.field)
			continue
		}
		if len(err.Error()) > 512 {
			t.Errorf("%s: a %d-byte error; want it to quote a bounded prefix", c.name, len(err.Error()))
		}
	}
	// The bounds themselves are allowed, and route.
	for _, rule := range []string{
		strings.Repeat("(", maxRuleDepth) + "id%2" + strings.Repeat(")", maxRuleDepth),
		"id%2" + strings.Repeat("+0", (maxRuleLen-4)/2),
	} {
		r, err := NewMod(Mod{Tables: "t_{0..1}", TableRule: rule})
		if err != nil {
			t.Fatalf("a rule of %d bytes: %v", len(rule), err)
		}
		if s, err := r.Route(3); err != nil || s.TableName != "t_1" {
			t.Errorf("a rule of %d bytes: Route(3) = %+v, %v; want t_1", len(rule), s, err)
		}
	}
}

// An interval table with a NUL, broken UTF-8 or a huge text is refused.
func TestIntervalRefusesHostileText(t *testing.T) {
	for name, table := range map[string]string{
		"NUL":          "order\x00_{200601}",
		"broken UTF-8": "order_{200601}\xff",
		"huge":         strings.Repeat("o", 1<<20) + "_{200601}",
		"closing only": "order_200601}",
	} {
		_, err := NewInterval(Interval{Layout: snowflake.Default, Table: table})
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "sharding.Interval.Table") || len(err.Error()) > 512 {
			t.Errorf("%s: err = %.300v; want a bounded ErrInvalidConfig naming sharding.Interval.Table", name, err)
		}
	}
}
