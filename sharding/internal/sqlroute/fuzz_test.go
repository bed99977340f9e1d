package sqlroute

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: no input panics, every error wraps a sentinel, and a rewrite
// changes the table references only.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM `orders` WHERE `orders`.`id` IN (?,?,?)",
		`INSERT INTO "orders" ("user_id","id") VALUES ($1,$2),($3,$4) ON CONFLICT ("id") DO UPDATE SET "user_id"="excluded"."user_id" RETURNING "id"`,
		"INSERT INTO `orders` (`id`,`user_id`) VALUES (?,?) ON DUPLICATE KEY UPDATE `user_id`=VALUES(`user_id`)",
		"UPDATE orders SET user_id = ? WHERE id = ? AND (a OR b)",
		"DELETE FROM orders o WHERE o.user_id IN (1, ?, 'x') -- c",
		"SELECT * FROM orders JOIN items ON items.order_id = orders.id",
		"select count(*) from orders where user_id = ?; ",
		"SELECT * FROM users WHERE EXISTS (SELECT 1 FROM orders WHERE orders.id = ?2)",
		"DELETE orders",
		"SELECT * FROM orders WHERE x = 'it''s' /* c */",
		"SELECT * FROM orders WHERE NOT user_id = ? AND a IS NOT NULL AND b NOT LIKE ? OR c || d",
		"SELECT * FROM orders WHERE CASE WHEN a OR b THEN 1 END = 1 AND id BETWEEN 1 AND 2 AND key = value",
	} {
		f.Add(s, uint8(strings.Count(s, "?")+strings.Count(s, "$")))
	}
	f.Fuzz(func(t *testing.T, query string, nargs uint8) {
		args := make([]any, nargs)
		for i := range args {
			args[i] = i
		}
		st, err := Parse(query, args, testTables)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("%q: error %v wraps no sentinel", query, err)
			}
			return
		}
		out, err := st.Rewrite("shard_9")
		if err != nil {
			t.Fatalf("%q: rewrite: %v", query, err)
		}
		if !st.Sharded() {
			if out != query {
				t.Fatalf("%q: unsharded statement rewritten to %q", query, out)
			}
			return
		}
		checkOnlyTablesChanged(t, st, out)
		checkReadsAlike(t, st, out, args)
		for _, list := range [][]Value{st.IDs, st.Owners} {
			for _, v := range list {
				n, nargs, err := st.Narrow("shard_9", []Value{v})
				if err != nil {
					if !isSentinel(err) {
						t.Fatalf("%q: narrow error %v wraps no sentinel", query, err)
					}
					continue
				}
				if _, err := lex(n); err != nil {
					t.Fatalf("%q: narrowed to %q, which does not lex: %v", query, n, err)
				}
				if len(nargs) > len(args) {
					t.Fatalf("%q: narrowed args %v outgrow %v", query, nargs, args)
				}
			}
		}
	})
}

// checkOnlyTablesChanged checks that out has the statement's tokens, the
// table references alone replaced by shard_9.
func checkOnlyTablesChanged(t *testing.T, st *Statement, out string) {
	t.Helper()
	lx, err := lex(out)
	if err != nil || len(lx.toks) != len(st.lx.toks) {
		t.Fatalf("%q: rewritten to %q: %v", st.lx.query, out, err)
	}
	isRef := map[int]bool{}
	for _, r := range st.refs {
		isRef[r] = true
	}
	for i := range lx.toks {
		got, want := lx.text(i), st.lx.text(i)
		if isRef[i] {
			name, _ := lx.name(i)
			if name != "shard_9" {
				t.Fatalf("%q: reference %d became %q", st.lx.query, i, got)
			}
		} else if got != want {
			t.Fatalf("%q: token %d %q became %q", st.lx.query, i, want, got)
		}
	}
}

// checkReadsAlike parses the rewritten text with the physical table as
// the logical one: it must read as the original did.
func checkReadsAlike(t *testing.T, st *Statement, out string, args []any) {
	t.Helper()
	phys := st.Table
	phys.Name = "shard_9"
	again, err := Parse(out, args, []Table{phys})
	if err != nil {
		if strings.Contains(strings.ToLower(st.lx.query), "shard_9") {
			return // the name was there before the rewrite
		}
		t.Fatalf("%q: rewritten to %q, which reads as %v", st.lx.query, out, err)
	}
	values := func(vs []Value) []any {
		var out []any
		for _, v := range vs {
			out = append(out, v.Value)
		}
		return out
	}
	if again.Kind != st.Kind || !again.Sharded() ||
		!reflect.DeepEqual(values(again.IDs), values(st.IDs)) ||
		!reflect.DeepEqual(values(again.Owners), values(st.Owners)) ||
		len(again.Assigned) != len(st.Assigned) {
		t.Fatalf("%q: rewritten to %q, which reads differently: %+v", st.lx.query, out, again)
	}
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrSyntax, ErrMultipleStatements, ErrSeveralTables, ErrDDL, ErrUnsupported, ErrArgs, ErrName, ErrSelection} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
