// Package segcheck checks a segment fetch against a floor, for
// engine/segment/segmenttest and the stores' own Floor tests.
package segcheck

import (
	"errors"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// ExpectAbove fetches a range of step from d, again while the fetch fails
// with engine.ErrStoreReset (at most 3 times: a reset is seen once per
// store value), and fails the test unless the range starts at or above
// floor. what says whose fetch it is.
func ExpectAbove(t *testing.T, d segment.Distributor, step, floor int64, what string) {
	t.Helper()
	ctx := t.Context()
	got, err := d.NextMaxID(ctx, step)
	for i := 0; i < 3 && errors.Is(err, engine.ErrStoreReset); i++ {
		got, err = d.NextMaxID(ctx, step)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got-step < floor {
		t.Fatalf("%s got (%d, %d]; want it above %d", what, got-step, got, floor)
	}
}
