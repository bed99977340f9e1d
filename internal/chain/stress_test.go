package chain_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/segtest"
)

// Callers draw while the worker retires segments by a 1 ms TTL under them,
// the store flaps down and up, and Close lands in the middle of the draws:
// every ID is handed out once, each caller's IDs increase, no ID comes from
// outside what the store handed out, NextID fails only with ErrClosed or an
// ExhaustedError honouring its deadline, and Close stops the worker.
func TestStressTTLOutagesClose(t *testing.T) {
	f := segtest.NewFake(0)
	c, err := chain.New(f, segment.Settings{Step: 16, SafeDistance: 2, TTL: time.Millisecond, MaxWait: 50 * time.Millisecond}, chain.Owned{Logger: slog.New(slog.DiscardHandler), PrefetchPeriod: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopFlap := make(chan struct{})
	flapDone := make(chan struct{})
	go func() {
		defer close(flapDone)
		for i := 0; ; i++ {
			select {
			case <-stopFlap:
				f.SetDown(false)
				return
			case <-time.After(7 * time.Millisecond):
				f.SetDown(i%3 == 0)
			}
		}
	}()

	const goroutines = 8
	all := make([][]int64, goroutines)
	var closed atomic.Bool
	var wg sync.WaitGroup
	for w := range all {
		wg.Go(func() {
			var ids []int64
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				id, err := c.NextID(ctx)
				cancel()
				var ex *chain.ExhaustedError
				switch {
				case err == nil:
				case errors.Is(err, engine.ErrClosed):
					if !closed.Load() {
						t.Errorf("ErrClosed before Close: %v", err)
					}
					all[w] = ids
					return
				case errors.As(err, &ex):
					continue // store down and the chain dry
				default:
					t.Errorf("NextID: %v", err)
					all[w] = ids
					return
				}
				if n := len(ids); n > 0 && id <= ids[n-1] {
					t.Errorf("goroutine %d: %d after %d", w, id, ids[n-1])
				}
				ids = append(ids, id)
			}
		})
	}
	time.Sleep(700 * time.Millisecond)
	// The race under test needs a segment expired under the callers' feet:
	// wait for one rather than count on 700 ms bringing it.
	eventually(t, "the TTL discards IDs", func() bool { return c.Stats().Discarded > 0 })
	closed.Store(true)
	closeDone := make(chan struct{})
	go func() { c.Close(); close(closeDone) }()
	select {
	case <-closeDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	wg.Wait()
	close(stopFlap)
	<-flapDone

	merged := slices.Concat(all...)
	if len(merged) == 0 {
		t.Fatal("no IDs")
	}
	slices.Sort(merged)
	for i, id := range merged {
		if i > 0 && id == merged[i-1] {
			t.Fatalf("ID %d handed out twice", id)
		}
	}
	if lo, hi := merged[0], merged[len(merged)-1]; lo < 1 || hi > f.Max() {
		t.Fatalf("IDs span [%d, %d], the store handed out (0, %d]", lo, hi, f.Max())
	}
	s := c.Stats()
	if got := int64(len(merged)); s.Issued != got {
		t.Errorf("Stats.Issued %d, callers received %d", s.Issued, got)
	}
	if _, err := c.NextID(context.Background()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("NextID after Close: %v", err)
	}
}
