package sqlroute

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestNarrow(t *testing.T) {
	cases := []struct {
		name   string
		query  string
		args   []any
		owners bool  // narrow Owners, not IDs
		keep   []int // indexes in the list
		want   string
		args2  []any
	}{
		{name: "pg renumbers later placeholders",
			query: `SELECT * FROM "orders" WHERE "id" IN ($1,$2,$3) AND amount > $4 LIMIT $5`, args: []any{1, 2, 3, 9, 10},
			keep: []int{1}, want: `SELECT * FROM "orders_1" WHERE "id" IN ($1) AND amount > $2 LIMIT $3`, args2: []any{2, 9, 10}},
		{name: "pg placeholder used twice",
			query: `SELECT * FROM orders WHERE id IN ($2, $3) AND (user_id <> $1 OR note = $1)`, args: []any{"x", 5, 6},
			keep: []int{1}, want: `SELECT * FROM orders_1 WHERE id IN ($2) AND (user_id <> $1 OR note = $1)`, args2: []any{"x", 6}},
		{name: "spaces kept between elements",
			query: "SELECT * FROM orders WHERE user_id IN ( ?, ?, ? ) AND id = ?", args: []any{1, 2, 3, 4}, owners: true,
			keep: []int{0, 2}, want: "SELECT * FROM orders_1 WHERE user_id IN ( ?, ? ) AND id = ?", args2: []any{1, 3, 4}},
		{name: "mixed elements", query: "SELECT * FROM orders WHERE id IN (7, ?, 8)", args: []any{2},
			keep: []int{0, 2}, want: "SELECT * FROM orders_1 WHERE id IN (7, 8)", args2: nil},
		{name: "insert rows with literals",
			query: "INSERT INTO orders (id, user_id, note) VALUES (1, ?, 'a'), (2, ?, 'b') RETURNING id", args: []any{10, 20},
			keep: []int{1}, want: "INSERT INTO orders_1 (id, user_id, note) VALUES (2, ?, 'b') RETURNING id", args2: []any{20}},
		{name: "keep all", query: "SELECT * FROM orders WHERE id IN (1, 2)",
			keep: []int{1, 0}, want: "SELECT * FROM orders_1 WHERE id IN (1, 2)", args2: []any{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Parse(c.query, c.args, testTables)
			if err != nil {
				t.Fatal(err)
			}
			list := st.IDs
			if c.owners {
				list = st.Owners
			}
			var keep []Value
			for _, i := range c.keep {
				keep = append(keep, list[i])
			}
			got, args, err := st.Narrow("orders_1", keep)
			if err != nil {
				t.Fatalf("Narrow: %v", err)
			}
			if got != c.want || (len(args) > 0 || len(c.args2) > 0) && !reflect.DeepEqual(args, c.args2) {
				t.Errorf("\n got %s %v\nwant %s %v", got, args, c.want, c.args2)
			}
		})
	}
}

func TestNarrowRefused(t *testing.T) {
	parse := func(q string, args ...any) *Statement {
		t.Helper()
		st, err := Parse(q, args, testTables)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	literals := parse("SELECT * FROM orders WHERE id IN (1, 2, 3)")
	if _, _, err := literals.Narrow("orders_1", literals.IDs[:1]); !errors.Is(err, ErrUnsupported) {
		t.Errorf("literal list: %v, want ErrUnsupported", err)
	}
	named := parse("SELECT * FROM orders WHERE id IN (?, ?) AND note = :n", 1, 2)
	if _, _, err := named.Narrow("orders_1", named.IDs[:1]); !errors.Is(err, ErrUnsupported) {
		t.Errorf("named placeholder: %v, want ErrUnsupported", err)
	}
	both := parse("SELECT * FROM orders WHERE id IN (?, ?) AND user_id IN (?, ?)", 1, 2, 3, 4)
	if _, _, err := both.Narrow("orders_1", []Value{both.IDs[0], both.Owners[0]}); !errors.Is(err, ErrSelection) {
		t.Errorf("two lists: %v, want ErrSelection", err)
	}
	if _, _, err := both.Narrow("orders_1", nil); !errors.Is(err, ErrSelection) {
		t.Errorf("nothing kept: %v, want ErrSelection", err)
	}
	other := parse("SELECT * FROM orders WHERE id IN (?, ?, ?)", 1, 2, 3)
	if _, _, err := both.Narrow("orders_1", other.IDs[:1]); !errors.Is(err, ErrSelection) {
		t.Errorf("value of another statement: %v, want ErrSelection", err)
	}
	if _, _, err := both.Narrow("orders 1", both.IDs[:1]); !errors.Is(err, ErrName) {
		t.Errorf("bad physical name: %v, want ErrName", err)
	}
	plain := parse("SELECT * FROM users WHERE id IN (?, ?)", 1, 2)
	if _, _, err := plain.Narrow("users_1", nil); !errors.Is(err, ErrSelection) {
		t.Errorf("unsharded: %v, want ErrSelection", err)
	}
}

// TestNarrowLargeBatch cuts a PostgreSQL batch of many rows to every
// third row and checks the rows and the renumbered args line up.
func TestNarrowLargeBatch(t *testing.T) {
	const rows = 600
	var b strings.Builder
	b.WriteString(`INSERT INTO "orders" ("id","user_id") VALUES `)
	var args []any
	for r := range rows {
		if r > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "($%d,$%d)", 2*r+1, 2*r+2)
		args = append(args, int64(r), int64(1000+r))
	}
	b.WriteString(` RETURNING "id"`)
	st, err := Parse(b.String(), args, testTables)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IDs) != rows {
		t.Fatalf("%d IDs, want %d", len(st.IDs), rows)
	}
	var keep []Value
	var want strings.Builder
	var wantArgs []any
	want.WriteString(`INSERT INTO "orders_2" ("id","user_id") VALUES `)
	for r := 0; r < rows; r += 3 {
		keep = append(keep, st.IDs[r])
		if r > 0 {
			want.WriteString(",")
		}
		n := len(wantArgs)
		fmt.Fprintf(&want, "($%d,$%d)", n+1, n+2)
		wantArgs = append(wantArgs, int64(r), int64(1000+r))
	}
	want.WriteString(` RETURNING "id"`)
	got, gotArgs, err := st.Narrow("orders_2", keep)
	if err != nil {
		t.Fatal(err)
	}
	if got != want.String() || !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("\n got %.200s… %v\nwant %.200s… %v", got, gotArgs[:4], want.String(), wantArgs[:4])
	}
}
