package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

// Discard drops every ID the chain held: the next ID comes from a later
// fetch, and a caller left waiting (the store slow to answer, as a reset
// store is during its grace) is told why.
func TestDiscard(t *testing.T) {
	f := segtest.NewFake(0)
	c, err := chain.New(f, segment.Settings{}, chain.Owned{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	first, err := c.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.SetLatency(time.Second)
	reset := errors.Join(engine.ErrStoreReset, errors.New("test"))
	c.Discard(reset)
	held := f.Max()
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.NextID(wctx)
	if !errors.Is(err, engine.ErrSegmentExhausted) || !errors.Is(err, engine.ErrStoreReset) {
		t.Fatalf("NextID after Discard with a slow store: %v; want exhausted, naming the reset", err)
	}
	f.SetLatency(0)
	id, err := c.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id <= held || id <= first {
		t.Fatalf("after Discard the chain served %d, at or below what it held (%d)", id, held)
	}
	if s := c.Stats(); s.Discarded == 0 || s.LastError != nil {
		t.Fatalf("Stats after recovery: %+v", s)
	}
}
