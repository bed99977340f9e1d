package repo

import (
	"testing"

	"github.com/idforge/idforge/sharding"
)

// The batch-size rule both repositories follow: the batch size, cut at
// the placeholder limit, at least one row.
func TestPerStatement(t *testing.T) {
	for _, c := range []struct {
		batch, cols int
		dialect     string
		want        int
	}{
		{30000, 5, "postgres", 13107},
		{30000, 5, "mysql", 13107},
		{30000, 5, "sqlite", 6553},
		{30000, 3, "pgx-unknown", 10922},
		{1000, 5, "postgres", 1000},
		{1000, 70000, "postgres", 1},
		{1000, 0, "sqlite", 1000},
	} {
		if got := PerStatement(c.batch, c.cols, Placeholders(c.dialect)); got != c.want {
			t.Errorf("PerStatement(batch %d, %d columns, %s) = %d, want %d", c.batch, c.cols, c.dialect, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ dialect, name, want string }{
		{"mysql", "course_1", "`course_1`"},
		{"mysql", "m0.course_1", "`m0`.`course_1`"},
		{"postgres", "Course_1", `"Course_1"`},
		{"postgres", "public.order", `"public"."order"`},
		{"sqlite", "0", `"0"`},
	} {
		if got := Quote(c.dialect, c.name); got != c.want {
			t.Errorf("Quote(%s, %s) = %s, want %s", c.dialect, c.name, got, c.want)
		}
	}
}

// A router listing its shards must use every database given, and only
// those.
func TestUsesAll(t *testing.T) {
	r, err := sharding.NewMod(sharding.Mod{Databases: "m{0..2}", Tables: "t_{0..1}"})
	if err != nil {
		t.Fatal(err)
	}
	for n, ok := range map[int]bool{2: false, 3: true, 4: false} {
		if err := usesAll(r, n); (err == nil) != ok {
			t.Errorf("3-database router over %d databases: %v", n, err)
		}
	}
	// Shards in databases 0 and 2 only.
	gappy := []sharding.Shard{{Database: 0, TableName: "t"}, {Database: 2, TableName: "t"}}
	if err := coversAll(gappy, 3); err == nil {
		t.Error("a router listing no shard in database 1: no error")
	}
}
