package idforge_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/segment"
)

// Durations and counts whose arithmetic would overflow, and values past
// their documented bounds, are refused at New with an error naming the
// field. A SafeGuard of the largest Duration with the skew margin off was
// accepted, and with a ride-through window as large the reset grace wrapped
// negative; a Heartbeat of 1 ns burnt a core and lost its own lease.
func TestNewRefusesOutOfBoundSettings(t *testing.T) {
	mem := machinetest.NewMemory(nil)
	for _, c := range []struct {
		name  string
		set   idforge.Settings
		field string
	}{
		{"SafeGuard MaxInt64, no skew margin", idforge.Settings{Lease: machine.Settings{SafeGuard: math.MaxInt64, SkewMargin: -1}}, "SafeGuard"},
		{"SafeGuard past a week", idforge.Settings{Lease: machine.Settings{SafeGuard: 7*24*time.Hour + 1}}, "SafeGuard"},
		{"Heartbeat 1 ns", idforge.Settings{Lease: machine.Settings{Heartbeat: 1}}, "Heartbeat"},
		{"Heartbeat 99 ms", idforge.Settings{Lease: machine.Settings{Heartbeat: 99 * time.Millisecond}}, "Heartbeat"},
		{"SkewMargin MaxInt64", idforge.Settings{Lease: machine.Settings{SkewMargin: math.MaxInt64}}, "SkewMargin"},
		{"MaxBackwards MaxInt64", idforge.Settings{MaxBackwards: math.MaxInt64}, "MaxBackwards"},
		{"Step MaxInt64", idforge.Settings{Chain: segment.Settings{Step: math.MaxInt64}}, "Step"},
		{"SafeDistance MaxInt64", idforge.Settings{Chain: segment.Settings{SafeDistance: math.MaxInt64}}, "SafeDistance"},
		{"Step past 2^32", idforge.Settings{Chain: segment.Settings{Step: 1 << 33, SafeDistance: 1 << 30}}, "Step"},
		{"TTL MaxInt64", idforge.Settings{Chain: segment.Settings{TTL: math.MaxInt64}}, "TTL"},
		{"Ahead MaxInt64", idforge.Settings{Chain: segment.Settings{Ahead: math.MaxInt64}}, "Ahead"},
		{"MaxWait MaxInt64", idforge.Settings{Chain: segment.Settings{MaxWait: math.MaxInt64}}, "MaxWait"},
		{"Fence MaxInt64", idforge.Settings{Chain: segment.Settings{Fence: math.MaxInt64}}, "Fence"},
		{"NUL in the namespace", idforge.Settings{Namespace: "orders\x00"}, "namespace"},
		{"newline in the instance ID", idforge.Settings{Instance: machine.Instance{ID: "pod\n0", Stable: true}}, "instance ID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.set
			s.Machine = mem
			reg, err := idforge.New(context.Background(), s)
			if err == nil {
				reg.Close()
			}
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("New = %v; want ErrInvalidConfig naming %s", err, c.field)
			}
		})
	}
}

// A chain name with a NUL is refused at the first draw, as invalid
// configuration rather than a store outage.
func TestChainNameWithControlByteRefused(t *testing.T) {
	reg := newReg(t, idforge.Settings{Store: newSQLiteStore(t)})
	for _, name := range []string{"order\x00", "a\x00b", "line\nbreak"} {
		_, err := reg.NextID(t.Context(), "chain", name)
		if !errors.Is(err, engine.ErrInvalidConfig) || errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "segment name") {
			t.Errorf("NextID(chain %q) = %v; want ErrInvalidConfig naming the segment name", name, err)
		}
	}
}

// A negative Chain.Fence fences chains at the store's ride-through window,
// as its doc says: New accepts it, and checks Ahead against the window.
func TestChainFenceNegativeIsTheWindow(t *testing.T) {
	st := newSQLiteStore(t) // RideThrough 1 s
	reg := newReg(t, idforge.Settings{Store: st, Chain: segment.Settings{Fence: -1}})
	if _, err := reg.NextID(t.Context(), "chain", "order"); err != nil {
		t.Fatalf("a chain fenced at the window: %v", err)
	}
	reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Chain: segment.Settings{Fence: -1, Ahead: 2 * time.Second}})
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "beyond Fence 1s") {
		t.Fatalf("New with Ahead 2s and a Fence at the 1 s window = %v; want ErrInvalidConfig naming Ahead and the Fence", err)
	}
}
