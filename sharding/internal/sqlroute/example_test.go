package sqlroute_test

import (
	"fmt"

	"github.com/idforge/idforge/sharding/internal/sqlroute"
)

// A batch INSERT as GORM sends it to PostgreSQL, cut into one statement
// per shard (here id % 2) with the args of its rows.
func ExampleStatement_Narrow() {
	tables := []sqlroute.Table{{Name: "orders", ID: "id", Owner: "user_id"}}
	query := `INSERT INTO "orders" ("user_id","id") VALUES ($1,$2),($3,$4),($5,$6) RETURNING "id"`
	args := []any{int64(7), int64(10), int64(8), int64(11), int64(9), int64(12)}

	st, err := sqlroute.Parse(query, args, tables)
	if err != nil {
		fmt.Println(err)
		return
	}
	byShard := make([][]sqlroute.Value, 2)
	for _, v := range st.IDs {
		id, _ := v.Value.(int64) // args as the caller passed them
		byShard[id%2] = append(byShard[id%2], v)
	}
	for shard, keep := range byShard {
		q, a, err := st.Narrow(fmt.Sprintf("orders_%d", shard), keep)
		fmt.Println(q, a, err)
	}
	// Output:
	// INSERT INTO "orders_0" ("user_id","id") VALUES ($1,$2),($3,$4) RETURNING "id" [7 10 9 12] <nil>
	// INSERT INTO "orders_1" ("user_id","id") VALUES ($1,$2) RETURNING "id" [8 11] <nil>
}

// A statement users write, routed by its owner column and rewritten.
func ExampleStatement_Rewrite() {
	tables := []sqlroute.Table{{Name: "orders", ID: "id", Owner: "user_id"}}
	st, err := sqlroute.Parse("SELECT o.id FROM orders o WHERE o.user_id = ? ORDER BY o.id LIMIT ?", []any{42, 10}, tables)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Kind, st.Table.Name, st.Owners[0].Value, st.IDs == nil)
	fmt.Println(st.Rewrite("orders_3"))
	// Output:
	// SELECT orders 42 true
	// SELECT o.id FROM orders_3 o WHERE o.user_id = ? ORDER BY o.id LIMIT ? <nil>
}
