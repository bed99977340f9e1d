package testdb

import (
	"context"
	"testing"
)

func TestAllServersAnswer(t *testing.T) {
	for _, d := range All(t) {
		t.Run(d.Name, func(t *testing.T) {
			db := d.Open(t)
			var one int
			if err := db.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1 on %s: %v, %d", d.Name, err, one)
			}
		})
	}
	c, prefix := Redis(t)
	if err := c.Set(context.Background(), prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}
