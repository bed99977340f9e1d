package chaintest_test

import (
	"sync"
	"testing"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/internal/chain/chaintest"
	"github.com/idforge/idforge/internal/segtest"
)

// TestRunFake runs the chains over the in-memory fake, one per name.
func TestRunFake(t *testing.T) {
	var mu sync.Mutex
	m := map[string]*segtest.Fake{}
	chaintest.Run(t, func(t *testing.T, name string) segment.Distributor {
		mu.Lock()
		defer mu.Unlock()
		if m[name] == nil {
			m[name] = segtest.NewFake(0)
		}
		return m[name]
	}, 0)
}
