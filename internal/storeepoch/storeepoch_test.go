package storeepoch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock"
)

func TestToken(t *testing.T) {
	now := time.UnixMilli(1_790_000_000_123)
	a, b := NewToken(now), NewToken(now)
	if a == b {
		t.Fatalf("two tokens of one millisecond are equal: %q", a)
	}
	if got, ok := Created(a); !ok || !got.Equal(now) {
		t.Fatalf("Created(%q) = %v, %v; want %v", a, got, ok, now)
	}
	for _, bad := range []string{"", "x.y", "123"} {
		if _, ok := Created(bad); ok {
			t.Errorf("Created(%q) accepted", bad)
		}
	}
}

// TestWaitAndAdopt: a new epoch is handed out only after its creation plus
// the grace; one adoption per epoch seen, whoever races for it.
func TestWaitAndAdopt(t *testing.T) {
	start := time.UnixMilli(1_790_000_000_000)
	c := clock.NewFake(start)
	s := NewState(c, 2*time.Second)
	s.Set(NewToken(start.Add(-time.Hour)))
	if _, err := s.Wait(context.Background()); err != nil || c.Sleeps() != 0 {
		t.Fatalf("an old epoch: %v, %d sleeps; want no wait", err, c.Sleeps())
	}
	seen := s.Token()
	s.Raise("order", 500)
	s.Raise("order", 300) // floors never go down
	fresh := NewToken(start)
	for i := range 2 {
		adopted, err := s.Adopt(seen, func() (string, error) { return fresh, nil })
		if err != nil || adopted != (i == 0) {
			t.Fatalf("adoption %d: %v, %v", i, adopted, err)
		}
	}
	var raised map[string]int64
	raise := func(_ context.Context, token, name string, floor int64) error {
		if token != fresh {
			t.Errorf("re-seeded under %q, want %q", token, fresh)
		}
		raised[name] = floor
		return nil
	}
	raised = map[string]int64{}
	if err := s.Reseed(context.Background(), raise); err != nil || raised["order"] != 500 {
		t.Fatalf("re-seed: %v, %v; want order at 500", raised, err)
	}
	raised = map[string]int64{}
	if err := s.Reseed(context.Background(), raise); err != nil || len(raised) != 0 {
		t.Fatalf("second re-seed of one epoch: %v, %v; want nothing", raised, err)
	}
	token, err := s.Wait(context.Background())
	if err != nil || token != fresh || c.Now().Before(start.Add(2*time.Second)) {
		t.Fatalf("Wait on a new epoch: %q, %v, clock %v; want %q after %v", token, err, c.Now(), fresh, start.Add(2*time.Second))
	}
	if _, err := s.Adopt(fresh, func() (string, error) { return "", errors.New("down") }); err == nil {
		t.Fatal("a failed adoption reported no error")
	}
}
