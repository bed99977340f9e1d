package sqlroute

import (
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/idforge/idforge/tests/testdb"
)

// TestServers runs GORM's statements, routed and narrowed to two physical
// tables by id % 2, on SQLite, MariaDB and PostgreSQL, and reads each
// table back: the rewritten text is what the servers take and every row
// lands, is found, changed and deleted in its own shard.
func TestServers(t *testing.T) {
	dialect := map[string]string{"sqlite": "sqlite", "mariadb": "mysql", "postgres": "postgres"}
	builders := dryRuns(t)
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.Open(t)
			gen := builders[dialect[d.Name]]
			for s := range 2 {
				if _, err := db.Exec(fmt.Sprintf("CREATE TABLE orders_%d (id BIGINT PRIMARY KEY, user_id BIGINT, amount INT)", s)); err != nil {
					t.Fatal(err)
				}
			}
			orders := make([]order, 7)
			var ids []int64
			for i := range orders {
				orders[i] = order{ID: int64(100 + i), UserID: int64(i), Amount: 1}
				ids = append(ids, orders[i].ID)
			}
			run := func(op func(tx *gorm.DB) *gorm.DB) int64 {
				t.Helper()
				query, args := dry(t, gen, "orders", op)
				st, err := Parse(query, args, testTables)
				if err != nil {
					t.Fatal(err)
				}
				byShard := map[int64][]Value{}
				for _, v := range st.IDs {
					id := v.Value.(int64)
					byShard[id%2] = append(byShard[id%2], v)
				}
				var n int64
				for s, vs := range byShard {
					q, a, err := st.Narrow(fmt.Sprintf("orders_%d", s), vs)
					if err != nil {
						t.Fatal(err)
					}
					n += execOrQuery(t, db, st.Kind, q, a)
				}
				return n
			}
			if n := run(func(tx *gorm.DB) *gorm.DB { return tx.Create(&orders) }); n != 7 {
				t.Errorf("inserted %d rows, want 7", n)
			}
			for s := range int64(2) {
				var want []int64
				for _, id := range ids {
					if id%2 == s {
						want = append(want, id)
					}
				}
				if got := tableIDs(t, db, fmt.Sprintf("orders_%d", s)); !slices.Equal(got, want) {
					t.Errorf("orders_%d holds %v, want %v", s, got, want)
				}
			}
			if n := run(func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]order{}, ids[1:]) }); n != 6 {
				t.Errorf("found %d rows, want 6", n)
			}
			if n := run(func(tx *gorm.DB) *gorm.DB {
				return tx.Where("id IN ?", ids[:5]).Updates(map[string]any{"amount": 2})
			}); n != 5 {
				t.Errorf("updated %d rows, want 5", n)
			}
			if n := run(func(tx *gorm.DB) *gorm.DB { return tx.Delete(&order{}, ids[2:]) }); n != 5 {
				t.Errorf("deleted %d rows, want 5", n)
			}
			left := append(tableIDs(t, db, "orders_0"), tableIDs(t, db, "orders_1")...)
			slices.Sort(left)
			if !slices.Equal(left, ids[:2]) {
				t.Errorf("rows left %v, want %v", left, ids[:2])
			}
		})
	}
}

// execOrQuery runs q and returns the rows it returned (SELECT, RETURNING)
// or affected.
func execOrQuery(t *testing.T, db *sql.DB, kind Kind, q string, args []any) int64 {
	t.Helper()
	if kind == Select || (kind == Insert && containsWord(q, "RETURNING")) {
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var n int64
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func containsWord(q, word string) bool {
	lx, err := lex(q)
	if err != nil {
		return false
	}
	for i := range lx.toks {
		if lx.is(i, word) {
			return true
		}
	}
	return false
}

func tableIDs(t *testing.T, db *sql.DB, table string) []int64 {
	t.Helper()
	rows, err := db.Query("SELECT id FROM " + table + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
