package sharding

import (
	"errors"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
)

// ruleSeeds are rules that once crashed or hung the parser, or were read
// wrong: a stack overflow on deep nesting or on millions of terms, a
// Route error that printed a million-term rule in quadratic time, and a
// NUL that silently ended the rule.
func ruleSeeds() []string {
	return []string{
		"id", "(id+1)%4/2+1", "id%2", "id/2%2", "id-(3+2)", "id*-1", "1+id/2%4",
		"", "(", ")", "id%0", "id/-2", "-", "--1", "99999999999999999999",
		"id\x00%2", "id\n%2", "id\t%2", "\xff",
		strings.Repeat("(", 10_000_000) + "id" + strings.Repeat(")", 10_000_000),
		strings.Repeat("(", 10_000_000),
		"id" + strings.Repeat("+1", 5_000_000),
		"id" + strings.Repeat("+1", 1_000_000),
		strings.Repeat("(", maxRuleDepth) + "id" + strings.Repeat(")", maxRuleDepth),
		strings.Repeat("(", maxRuleDepth+1) + "id" + strings.Repeat(")", maxRuleDepth+1),
		"id" + strings.Repeat("+1", (maxRuleLen-2)/2),
	}
}

// FuzzRule: any text parses or is refused with engine.ErrInvalidConfig and a
// bounded message, never a panic; a rule that parses prints as a rule that
// parses back to the same values.
func FuzzRule(f *testing.F) {
	for _, s := range ruleSeeds() {
		f.Add(s, int64(12345))
	}
	f.Fuzz(func(t *testing.T, src string, id int64) {
		r, err := parseRule(src)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("parseRule(%.40q) = %v; want ErrInvalidConfig", src, err)
			}
			if len(err.Error()) > 512 {
				t.Fatalf("parseRule(%.40q): a %d-byte error", src, len(err.Error()))
			}
			return
		}
		if len(src) > maxRuleLen {
			t.Fatalf("parseRule accepted %d bytes, more than %d", len(src), maxRuleLen)
		}
		text := r.String()
		back, err := parseRule(text)
		if err != nil {
			t.Fatalf("%q prints as %q, which does not parse: %v", src, text, err)
		}
		v1, ok1 := r.eval(id)
		v2, ok2 := back.eval(id)
		if v1 != v2 || ok1 != ok2 {
			t.Fatalf("%q at %d = %d, %v; printed as %q: %d, %v", src, id, v1, ok1, text, v2, ok2)
		}
	})
}

// FuzzNewMod: any Mod builds a router or is refused with
// engine.ErrInvalidConfig naming a field; a router routes any ID to one of
// its shards or refuses with a bounded error, never a panic.
func FuzzNewMod(f *testing.F) {
	for _, s := range ruleSeeds() {
		f.Add("", "t_{0..3}", "", s, int64(7))
	}
	for _, names := range []string{"o_0..1}", "o_{0..1", "}{", "o_}0..1{", "{..}", "{0..1}{2..3}", "t\x00_{0..1}", "t_{0..1}\x00", "\xff{0..1}",
		strings.Repeat("t", 1<<20) + "{0..65535}"} {
		f.Add(names, "t", "", "", int64(1))
		f.Add("m{0..1}", names, "", "", int64(1))
	}
	f.Add("m{0..1}", "course_{1..2}", "id%2", "(id+1)%4/2+1", int64(1))
	f.Fuzz(func(t *testing.T, dbs, tbls, dbRule, tbRule string, id int64) {
		r, err := NewMod(Mod{Databases: dbs, Tables: tbls, DatabaseRule: dbRule, TableRule: tbRule})
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "sharding.Mod.") {
				t.Fatalf("NewMod: %v; want ErrInvalidConfig naming a field", err)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("NewMod: a %d-byte error", len(err.Error()))
			}
			return
		}
		s, err := r.Route(id)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) && !errors.Is(err, engine.ErrInvalidID) {
				t.Fatalf("Route(%d): %v", id, err)
			}
			if len(err.Error()) > 4096 {
				t.Fatalf("Route(%d): a %d-byte error", id, len(err.Error()))
			}
			return
		}
		if s.TableName == "" {
			t.Fatalf("Route(%d) = %+v: no table", id, s)
		}
	})
}
