package storeepoch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
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
	c := clocktest.NewFake(start)
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

// TestReadyAndResetError: Ready re-seeds pending floors before waiting out
// the grace, says which step failed, and the reset error names the store,
// the operation, both epochs and when things are handed out again.
// TestResetNamesAFailedReseed: Reset adopts, re-seeds at once and says so
// when the re-seed failed; Ready then retries it.
func TestResetNamesAFailedReseed(t *testing.T) {
	start := time.UnixMilli(1_790_000_000_000)
	s := NewState(clocktest.NewFake(start), 2*time.Second)
	old := NewToken(start.Add(-time.Hour))
	s.Set(old)
	s.Raise("order", 500)
	fresh, newer := NewToken(start), NewToken(start)
	adopted := fresh
	down := errors.New("down")
	var raised []int64
	raise := func(_ context.Context, token, _ string, floor int64) error {
		if token != adopted {
			t.Errorf("re-seeded under %q, want the adopted %q", token, adopted)
		}
		raised = append(raised, floor)
		if len(raised) == 1 {
			return down
		}
		return nil
	}
	err := s.Reset(context.Background(), "teststore", "fetching", old, "", func() (string, error) { return fresh, nil }, raise)
	if !errors.Is(err, engine.ErrStoreReset) || !errors.Is(err, down) || !strings.Contains(err.Error(), "retried before the next fetch") {
		t.Fatalf("Reset with a failing re-seed: %v; want ErrStoreReset and the re-seed's error named", err)
	}
	if s.Token() != fresh {
		t.Fatalf("Reset adopted %q, want %q", s.Token(), fresh)
	}
	if err := s.Reseed(context.Background(), raise); err != nil || len(raised) != 2 || raised[1] != 500 {
		t.Fatalf("the retried re-seed: %v, raised %v; want order raised to 500 again", err, raised)
	}
	adopted = newer
	if err := s.Reset(context.Background(), "teststore", "fetching", fresh, newer, func() (string, error) { return newer, nil }, raise); !errors.Is(err, engine.ErrStoreReset) || errors.Is(err, down) || len(raised) != 3 {
		t.Fatalf("Reset with a working re-seed: %v; want ErrStoreReset alone", err)
	}
}

func TestReadyAndResetError(t *testing.T) {
	start := time.UnixMilli(1_790_000_000_000)
	c := clocktest.NewFake(start)
	s := NewState(c, 2*time.Second)
	old := NewToken(start.Add(-time.Hour))
	s.Set(old)
	s.Raise("order", 500)
	fresh := NewToken(start)
	if _, err := s.Adopt(old, func() (string, error) { return fresh, nil }); err != nil {
		t.Fatal(err)
	}
	down := errors.New("down")
	failing := func(context.Context, string, string, int64) error { return down }
	if _, err := s.Ready(context.Background(), failing); !errors.Is(err, down) || !strings.Contains(err.Error(), "re-seeding segment \"order\" at 500") {
		t.Fatalf("Ready with a failing re-seed: %v; want it named and wrapping the cause", err)
	}
	if c.Sleeps() != 0 {
		t.Fatalf("Ready waited (%d sleeps) although the re-seed failed", c.Sleeps())
	}
	var raised int64
	raise := func(_ context.Context, _, _ string, floor int64) error { raised = floor; return nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Ready(ctx, raise); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting out the reset grace") {
		t.Fatalf("Ready on a cancelled context: %v; want the grace's wait named and context.Canceled", err)
	}
	if raised != 500 {
		t.Fatalf("Ready re-seeded order at %d; want 500", raised)
	}
	if token, err := s.Ready(context.Background(), raise); err != nil || token != fresh || c.Now().Before(start.Add(2*time.Second)) {
		t.Fatalf("Ready: %q, %v, clock %v; want %q after the grace", token, err, c.Now(), fresh)
	}

	for _, current := range []string{fresh, ""} {
		err := s.ResetError("teststore", "fetching", old, current)
		want := []string{"teststore: fetching: ", old, "before " + start.Add(2*time.Second).UTC().Format(time.RFC3339Nano)}
		if current == "" {
			want = append(want, "is gone")
		} else {
			want = append(want, "replaced by \""+fresh+"\"")
		}
		for _, w := range want {
			if !errors.Is(err, engine.ErrStoreReset) || !strings.Contains(err.Error(), w) {
				t.Errorf("ResetError(%q) = %v; want ErrStoreReset and %q", current, err, w)
			}
		}
	}
}

func TestLeast(t *testing.T) {
	ctx := context.Background()
	floors := map[string]int64{"order": 41_000, "small": 3, "bad": -1}
	floor := func(_ context.Context, name string) (int64, error) {
		switch name {
		case "down":
			return 0, errors.New("connection refused")
		case "unknown":
			return 0, fmt.Errorf("%w: no table", engine.ErrNoFloor)
		}
		return floors[name], nil
	}
	for _, tc := range []struct {
		name  string
		start int64
		want  int64
		ok    bool
		err   error
	}{
		{"order", 10, 41_000, true, nil},
		{"small", 10, 10, true, nil},
		{"new", 0, 0, true, nil},
		{"unknown", 5, 5, false, nil},
		{"bad", 0, 0, false, engine.ErrInvalidConfig},
		{"down", 0, 0, false, engine.ErrStoreUnavailable},
	} {
		got, ok, err := Least(ctx, floor, tc.name, tc.start)
		if got != tc.want || ok != tc.ok || !errors.Is(err, tc.err) || (err != nil) != (tc.err != nil) {
			t.Errorf("Least(%q, %d) = %d, %v, %v; want %d, %v, %v", tc.name, tc.start, got, ok, err, tc.want, tc.ok, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), `Floor("`+tc.name+`")`) {
			t.Errorf("error %q does not name the Floor", err)
		}
	}
	if got, ok, err := Least(ctx, nil, "order", 7); got != 7 || ok || err != nil {
		t.Errorf("Least without a floor = %d, %v, %v; want 7, false", got, ok, err)
	}
}

func TestFloors(t *testing.T) {
	ctx := context.Background()
	at := func(n int64) engine.Floor { return func(context.Context, string) (int64, error) { return n, nil } }
	none := func(context.Context, string) (int64, error) { return 0, engine.ErrNoFloor }
	down := func(context.Context, string) (int64, error) { return 0, errors.New("down") }
	if Floors(nil, nil) != nil {
		t.Fatal("Floors of nils is not nil")
	}
	for _, tc := range []struct {
		floors []engine.Floor
		want   int64
		err    error
	}{
		{[]engine.Floor{at(3), nil, at(9), at(4)}, 9, nil},
		{[]engine.Floor{none, at(2)}, 2, nil},
		{[]engine.Floor{none, none}, 0, engine.ErrNoFloor},
		{[]engine.Floor{at(2), down}, 0, errors.ErrUnsupported},
	} {
		got, err := Floors(tc.floors...)(ctx, "x")
		switch {
		case tc.err == errors.ErrUnsupported && err == nil:
			t.Errorf("Floors(%d floors) = %d, want the failing floor's error", len(tc.floors), got)
		case tc.err != errors.ErrUnsupported && (got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil)):
			t.Errorf("Floors(%d floors) = %d, %v; want %d, %v", len(tc.floors), got, err, tc.want, tc.err)
		}
	}
}

func TestBrandNewTokens(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	plain, fresh := NewToken(now), NewBrandNewToken(now)
	if BrandNew(plain) || !BrandNew(fresh) {
		t.Fatalf("BrandNew(%q) = %v, BrandNew(%q) = %v", plain, BrandNew(plain), fresh, BrandNew(fresh))
	}
	if c, ok := Created(fresh); !ok || !c.Equal(now) {
		t.Fatalf("Created(%q) = %v, %v", fresh, c, ok)
	}
	c := clocktest.NewFake(now)
	s := NewState(c, time.Hour)
	s.Set(fresh)
	if !s.ReadyAt().IsZero() {
		t.Errorf("a brand-new epoch waits until %v; it has no one to wait for", s.ReadyAt())
	}
	s.Set(plain)
	if want := now.Add(time.Hour); !s.ReadyAt().Equal(want) {
		t.Errorf("a found epoch is ready at %v, want %v", s.ReadyAt(), want)
	}
}

func TestConfirm(t *testing.T) {
	s := NewState(clock.System, 0)
	if !s.Confirmed().IsZero() {
		t.Fatal("a new State is confirmed")
	}
	t0 := time.Unix(100, 0)
	s.Confirm(t0.Add(time.Second))
	s.Confirm(t0) // an older operation that returned later
	if got := s.Confirmed(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Confirmed = %v, want the newest send time", got)
	}
}

// records is a slog.Handler keeping every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}

// TestWaitLogsOnce: the wait after a new epoch is logged once, with its
// reason, the store and its length, however many callers wait; an epoch
// declared brand-new waits and logs nothing; the next new epoch logs again.
func TestWaitLogsOnce(t *testing.T) {
	start := time.UnixMilli(1_790_000_000_000)
	c := clocktest.NewFake(start)
	c.ManualSleep = true
	s := NewState(c, 2*time.Second)
	logs := &records{}
	s.LogWaits(slog.New(logs), "sqlstore (sqlite) idforge_*")
	s.Set(NewToken(start))
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Wait(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	for c.Sleeps() < 5 { // every waiter asleep: each has looked at the epoch
		runtime.Gosched()
	}
	c.Advance(2 * time.Second)
	wg.Wait()
	if len(logs.recs) != 1 {
		t.Fatalf("5 waiters logged %d lines, want 1", len(logs.recs))
	}
	r := logs.recs[0]
	attrs := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
	if !strings.Contains(r.Message, "new store epoch") || !strings.Contains(r.Message, "idforge store init") ||
		attrs["wait"].Duration() != 2*time.Second || attrs["store"].String() != "sqlstore (sqlite) idforge_*" || len(r.Message) > 160 {
		t.Errorf("the wait line: %q %v; want a short reason, the store and wait=2s", r.Message, attrs)
	}

	s.Set(NewBrandNewToken(c.Now()))
	if _, err := s.Wait(context.Background()); err != nil || len(logs.recs) != 1 {
		t.Fatalf("a brand-new epoch: %v, %d lines; want no wait and no line", err, len(logs.recs))
	}
	s.Set(NewToken(c.Now()))
	go func() { _, _ = s.Wait(context.Background()) }()
	for c.Sleeps() < 6 {
		runtime.Gosched()
	}
	c.Advance(2 * time.Second)
	if _, err := s.Wait(context.Background()); err != nil || len(logs.recs) != 2 {
		t.Fatalf("the next new epoch: %v, %d lines; want its own line", err, len(logs.recs))
	}
}
