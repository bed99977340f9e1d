package storeepoch_test

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/holding"
	"github.com/idforge/idforge/engine/internal/storeepoch"
)

// FuzzWindows: any RideThrough and ResetGrace are valid or refused with
// engine.ErrInvalidConfig; valid ones resolve to a window and a grace whose
// sums (the grace, the live window of a holding, a record) stay in range.
// A window of the largest Duration once made the default grace, the window
// plus 1 s, wrap negative: a wiped store then waited for nothing.
func FuzzWindows(f *testing.F) {
	for _, w := range []int64{0, -1, 1, int64(time.Second), int64(time.Minute), int64(24 * time.Hour), int64(24*time.Hour) + 1, math.MaxInt64, math.MinInt64} {
		for _, g := range []int64{0, -1, int64(2 * time.Second), int64(48 * time.Hour), math.MaxInt64, math.MinInt64} {
			f.Add(w, g)
		}
	}
	f.Fuzz(func(t *testing.T, w0, g0 int64) {
		w, grace, err := storeepoch.Windows("store", time.Duration(w0), time.Duration(g0))
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("Windows(%d, %d) = %v; want nil or ErrInvalidConfig", w0, g0, err)
			}
			return
		}
		if w != -time.Millisecond && (w < time.Millisecond || w > storeepoch.MaxRideThrough) {
			t.Fatalf("Windows(%d, %d): window %v", w0, g0, w)
		}
		if grace != -1 && (grace <= 0 || grace > storeepoch.MaxResetGrace) {
			t.Fatalf("Windows(%d, %d): grace %v", w0, g0, grace)
		}
		if g0 == 0 && grace <= w {
			t.Fatalf("Windows(%d, 0): the default grace %v is not past the window %v", w0, grace, w)
		}
		if lw := holding.LiveWindow(grace, w); lw > 3*24*time.Hour || lw < -3*24*time.Hour {
			t.Fatalf("LiveWindow(%v, %v) = %v", grace, w, lw)
		}
		rec := storeepoch.FormatRecord(w)
		if got, ok := storeepoch.ParseRecord(rec); !ok || got != w {
			t.Fatalf("record %q of %v reads back as %v, %v", rec, w, got, ok)
		}
		if err := storeepoch.CheckRecord("store", rec, w); err != nil {
			t.Fatalf("CheckRecord(%q, %v) = %v", rec, w, err)
		}
		if err := storeepoch.CheckRecord("store", strconv.FormatInt(math.MaxInt64, 10), w); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Fatalf("CheckRecord of an overflowing record = %v", err)
		}
	})
}
