package leasetest_test

import (
	"testing"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/internal/leased/leasetest"
)

// TestRunMemory runs the lease cases on machinetest's reference
// distributor, which has no server clock: ServerClockSkew skips.
func TestRunMemory(t *testing.T) {
	leasetest.Run(t, func(t *testing.T, c clock.Clock) machine.Distributor {
		return machinetest.NewMemory(c)
	})
}
