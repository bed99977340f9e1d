package sqlroute

import "testing"

// BenchmarkParseRewrite is the cost per statement a GORM callback pays.
func BenchmarkParseRewrite(b *testing.B) {
	query := `SELECT * FROM "orders" WHERE "orders"."id" IN ($1,$2,$3) AND "orders"."deleted_at" IS NULL ORDER BY "orders"."id" LIMIT $4`
	args := []any{int64(1), int64(2), int64(3), 10}
	for b.Loop() {
		st, err := Parse(query, args, testTables)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Rewrite("orders_1"); err != nil {
			b.Fatal(err)
		}
	}
}
