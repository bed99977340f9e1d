package machinetest_test

import (
	"testing"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
)

func TestMemory(t *testing.T) {
	machinetest.Run(t, func(t *testing.T, c clock.Clock) machine.Distributor {
		return machinetest.NewMemory(c)
	})
}
