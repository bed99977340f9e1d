package chain

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idforge/idforge/engine"
)

// errInvalidRange is returned (and logged) when a distributor answers with a
// range the generator refuses to serve: one that goes backwards or overlaps
// the previous range, or holds IDs below 1. Serving it could repeat IDs, so
// the range is dropped and the fetch counts as a store failure.
var errInvalidRange = errors.New("idforge: distributor returned an invalid range")

// checkRange validates the range (max-size, max] a distributor returned
// after it handed out prevMax (0 before the first fetch).
func checkRange(prevMax, max, size int64) error {
	if max < size {
		return fmt.Errorf("%w: NextMaxID(%d) returned %d: the range would hold IDs below 1", errInvalidRange, size, max)
	}
	if lo := max - size; lo < prevMax {
		return fmt.Errorf("%w: NextMaxID(%d) returned %d: range (%d, %d] goes back into IDs up to %d already served",
			errInvalidRange, size, max, lo, max, prevMax)
	}
	return nil
}

// exhaustedError is returned by NextID when no ID is ready and none could be
// fetched: the chain ran dry and its wait ended or its store refuses the
// sequence, or the single-segment generator's refill failed. It matches engine.ErrSegmentExhausted, the store's error (so
// engine.ErrStoreUnavailable when the store wraps it) and the cause that
// ended the wait (context.DeadlineExceeded, context.Canceled) with
// [errors.Is].
type exhaustedError struct {
	// Name is the sequence's name from Settings.Name, if any.
	Name string
	// Waited is how long NextID waited for IDs.
	Waited time.Duration
	// Store is the store's last failure, nil if it has not failed (it is
	// slow, or a fetch is still on its way).
	Store error
	// Cause is what ended the wait: ctx's cause, or a context.DeadlineExceeded
	// naming [segment.Settings].MaxWait. Nil when a refill failed without waiting,
	// or a [Chain]'s store refused the sequence (see [Chain]).
	Cause error
}

// Error says what ran out, why the wait ended and what the store said.
func (e *exhaustedError) Error() string {
	var b strings.Builder
	b.WriteString(engine.ErrSegmentExhausted.Error())
	if e.Name != "" {
		fmt.Fprintf(&b, " (%q)", e.Name)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, ": no ID ready after %v: %v", e.Waited.Round(time.Microsecond), e.Cause)
	}
	switch {
	case e.Store != nil && e.Cause == nil:
		fmt.Fprintf(&b, ": refill failed: %v", e.Store)
	case e.Store != nil:
		fmt.Fprintf(&b, "; last store error: %v", e.Store)
	case e.Cause != nil:
		b.WriteString("; the store has not failed, it is slow to answer")
	}
	return b.String()
}

// Unwrap returns engine.ErrSegmentExhausted, the store error and the cause.
func (e *exhaustedError) Unwrap() []error {
	errs := []error{engine.ErrSegmentExhausted}
	if e.Store != nil {
		errs = append(errs, e.Store)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
