package uuidv7_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/internal/uuidv7"
)

var start = time.Date(2026, 11, 25, 23, 59, 59, 999_500_000, time.UTC)

// next draws a UUID or fails the test.
func next(t testing.TB, g *uuidv7.Generator) [16]byte {
	t.Helper()
	u, err := g.NextUUID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// UUIDs are RFC 9562 version 7 UUIDs of the clock's millisecond, as
// google/uuid reads them.
func TestFormat(t *testing.T) {
	g := uuidv7.New(clocktest.NewFake(start))
	u := uuid.UUID(next(t, g))
	if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Errorf("%s: version %d, variant %s; want 7, RFC 4122", u, u.Version(), u.Variant())
	}
	at, err := uuidv7.Time(u)
	if want := start.Truncate(time.Millisecond); err != nil || !at.Equal(want) {
		t.Errorf("Time(%s) = %s, %v; want %s", u, at, err, want)
	}
	sec, nsec := u.Time().UnixTime() // google/uuid's reading of the same field
	if got := time.Unix(sec, nsec); !got.Equal(at) {
		t.Errorf("google/uuid reads %s, Time %s", got, at)
	}
	// rand_a is the fraction of the millisecond: 0.5 ms is 2048/4096.
	if frac := int(u[6]&0x0f)<<8 | int(u[7]); frac != 2048 {
		t.Errorf("rand_a = %d, want 2048 for half a millisecond", frac)
	}
	if _, err := uuidv7.Time(uuid.New()); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Time of a version 4 UUID: err = %v, want ErrInvalidID", err)
	}
}

// Within one clock reading, across a clock stepped back and past the 4,096
// steps of a millisecond, every UUID is above the one before, as bytes and
// as strings.
func TestStrictlyIncreasing(t *testing.T) {
	fc := clocktest.NewFake(start)
	g := uuidv7.New(fc)
	prev := next(t, g)
	check := func(what string, n int) {
		t.Helper()
		for range n {
			u := next(t, g)
			if bytes.Compare(u[:], prev[:]) <= 0 || uuid.UUID(u).String() <= uuid.UUID(prev).String() {
				t.Fatalf("%s: %s after %s", what, uuid.UUID(u), uuid.UUID(prev))
			}
			prev = u
		}
	}
	check("one clock reading", 10_000) // past 4,096: the timestamp runs ahead
	if at, _ := uuidv7.Time(prev); !at.After(start) {
		t.Errorf("after 10,000 UUIDs in one reading the timestamp is %s, want it ahead of %s", at, start)
	}
	fc.Advance(-time.Hour)
	check("clock stepped back an hour", 1000)
	fc.Advance(2 * time.Hour)
	check("clock an hour ahead", 1)
	if at, _ := uuidv7.Time(prev); !at.Equal(fc.Now().Truncate(time.Millisecond)) {
		t.Errorf("once the clock is past the last UUID the timestamp is %s, want the clock's %s", at, fc.Now())
	}
}

// Concurrent callers never get the same UUID, and each sees its own
// UUIDs increase.
func TestConcurrent(t *testing.T) {
	g := uuidv7.New(nil)
	const workers, each = 4, 5000
	out := make([][][16]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				u, err := g.NextUUID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				out[w] = append(out[w], u)
			}
		})
	}
	wg.Wait()
	seen := map[[16]byte]bool{}
	for w, us := range out {
		for i, u := range us {
			if seen[u] {
				t.Fatalf("duplicate %s", uuid.UUID(u))
			}
			seen[u] = true
			if i > 0 && bytes.Compare(u[:], us[i-1][:]) <= 0 {
				t.Fatalf("worker %d: %s after %s", w, uuid.UUID(u), uuid.UUID(us[i-1]))
			}
		}
	}
}

// A clock outside the 48 bits of milliseconds is an error, never a wrong
// UUID, and NextID refuses: a UUID is no int64.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := uuidv7.New(clocktest.NewFake(time.Unix(-1, 0))).NextUUID(ctx); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("clock before 1970: err = %v, want ErrTimestampOverflow", err)
	}
	if _, err := uuidv7.New(clocktest.NewFake(time.UnixMilli(1 << 48))).NextUUID(ctx); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("clock past 48 bits of milliseconds: err = %v, want ErrTimestampOverflow", err)
	}
	if _, err := uuidv7.New(nil).NextID(ctx); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("NextID: err = %v, want ErrInvalidConfig", err)
	}
}
