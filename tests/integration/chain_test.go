package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain"
)

// TestSixteenInstancesShareOneSegment has 16 instances, each with a pool or
// client, a store and a chain of its own, draw 1,000,000 IDs together from one
// sequence, 62,500 each. No ID is issued twice, each instance's IDs strictly increase, and
// the store's last max accounts for every ID: issued, or held by a chain
// when it closed (chains drop what they prefetched on Close).
func TestSixteenInstancesShareOneSegment(t *testing.T) {
	const (
		instances = 16
		total     = 1_000_000
		step      = 1000
		name      = "shared"
		period    = 50 * time.Millisecond // short, so idle workers are seen soon
	)
	forEachBackend(t, func(t *testing.T, s *server) {
		chains := make([]*chain.Chain, instances)
		for i := range chains {
			d, err := s.open(t, "").Segment(name)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ownedChain(d, segment.Settings{Step: step}, chain.Owned{Name: name, Logger: quiet, PrefetchPeriod: period})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			chains[i] = c
		}

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var (
			ids     = make([][]int64, instances)
			errs    = make([]error, instances)
			wg      sync.WaitGroup
			started = time.Now()
		)
		for i, c := range chains {
			wg.Go(func() {
				own := make([]int64, 0, total/instances)
				var prev int64
				for range total / instances {
					id, err := c.NextID(ctx)
					if err != nil {
						errs[i] = err
						break
					}
					if id <= prev {
						errs[i] = fmt.Errorf("ID %d after %d: not strictly increasing", id, prev)
						break
					}
					own = append(own, id)
					prev = id
				}
				ids[i] = own
			})
		}
		wg.Wait()
		elapsed := time.Since(started)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("instance %d: %v", i, err)
			}
		}

		// A fetch cancelled by Close may have advanced the store without the
		// chain learning its range, so wait until every worker is idle: it
		// holds its prefetch distance and fetched nothing for two periods.
		eventually(t, "every chain is idle", func() bool {
			before := make([]chain.Stats, instances)
			for i, c := range chains {
				before[i] = c.Stats()
			}
			time.Sleep(2 * period)
			for i, c := range chains {
				if st := c.Stats(); st.Fetches != before[i].Fetches || st.Ahead < st.PrefetchDistance*st.Step {
					return false
				}
			}
			return true
		})
		var fetches, failures, discarded, distance int64
		for i, c := range chains {
			distance = max(distance, c.Stats().PrefetchDistance)
			c.Close()
			st := c.Stats()
			if st.Issued != int64(len(ids[i])) {
				t.Errorf("instance %d: Stats().Issued = %d, drew %d", i, st.Issued, len(ids[i]))
			}
			fetches += st.Fetches
			failures += st.Failures
			discarded += st.Discarded
		}

		lastMax := s.lastMax(t, name)
		seen := newIDSet(lastMax)
		for i, own := range ids {
			for _, id := range own {
				if err := seen.add(id); err != nil {
					t.Fatalf("instance %d: ID %d (store's last max %d): %v", i, id, lastMax, err)
				}
			}
		}
		if seen.n != total {
			t.Fatalf("%d distinct IDs, want %d", seen.n, total)
		}
		// Every ID the store handed out was issued or dropped at Close. A
		// failed fetch may have advanced the store without an answer, so
		// only with no failure must the figures meet exactly.
		if held := lastMax - total; held != discarded && (failures == 0 || held < discarded) {
			t.Errorf("the store's last max %d leaves %d IDs not issued, but the chains discarded %d at Close (%d failed fetches)",
				lastMax, held, discarded, failures)
		}
		t.Logf("%d IDs by %d instances in %v: %.0f IDs/s; %d fetches of step %d (%d failed), %d IDs discarded at Close (widest prefetch distance %d segments)",
			total, instances, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
			fetches, step, failures, discarded, distance)
	})
}

// ownedChain builds a chain with the name, logger and clock a registry
// would give it.
func ownedChain(d segment.Distributor, s segment.Settings, o chain.Owned) (*chain.Chain, error) {
	return chain.New(d, s, o)
}
