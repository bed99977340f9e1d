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

// TestRedisServer: a volatile server comes back empty after SHUTDOWN NOSAVE,
// a durable one keeps its keys across kill -9, and both answer on the same
// address after the restart.
func TestRedisServer(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		args  []string
		crash bool
		want  int64
	}{
		{"volatile", RedisVolatile(), false, 0},
		{"durable", RedisDurable(), true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StartRedisServer(t, tc.args...)
			c := s.Client(t)
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.crash {
				s.Kill()
			} else if err := s.ShutdownNoSave(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatalf("%v answers after it was stopped", s)
			}
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := c.DBSize(ctx).Result(); err != nil || n != tc.want {
				t.Fatalf("%v holds %d keys after the restart (%v); want %d", s, n, err, tc.want)
			}
		})
	}
}
