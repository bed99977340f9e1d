// Package reason names the sentinel an idforge error wraps: the one table
// that the registry's error counts, the Prometheus labels, the HTTP error
// codes of `idforge serve` and its proxy store, and the torture report
// share. It imports engine only.
package reason

import (
	"context"
	"errors"

	"github.com/idforge/idforge/engine"
)

// Reasons, as Of names them.
const (
	StoreReset        = "store_reset"
	NoFloor           = "no_floor"
	ClockBackwards    = "clock_backwards"
	MachineIDLost     = "machine_id_lost"
	StoreUnavailable  = "store_unavailable"
	SegmentExhausted  = "segment_exhausted"
	TimestampOverflow = "timestamp_overflow"
	IDOverflow        = "id_overflow"
	MachineIDOverflow = "machine_id_overflow"
	InstanceInUse     = "instance_in_use"
	ClockSkew         = "clock_skew"
	UnknownGenerator  = "unknown_generator"
	Closed            = "closed"
	Canceled          = "canceled"
	Deadline          = "deadline"
	InvalidConfig     = "invalid_config"
	InvalidID         = "invalid_id"
	Other             = "other"
)

// table is in order of precedence: a store reset comes first, since the
// lease and the chain report it wrapped in a lost machine ID or an
// exhausted segment.
var table = []struct {
	err  error
	name string
}{
	{engine.ErrStoreReset, StoreReset},
	{engine.ErrNoFloor, NoFloor},
	{engine.ErrClockBackwards, ClockBackwards},
	{engine.ErrMachineIDLost, MachineIDLost},
	{engine.ErrStoreUnavailable, StoreUnavailable},
	{engine.ErrSegmentExhausted, SegmentExhausted},
	{engine.ErrTimestampOverflow, TimestampOverflow},
	{engine.ErrIDOverflow, IDOverflow},
	{engine.ErrMachineIDOverflow, MachineIDOverflow},
	{engine.ErrInstanceInUse, InstanceInUse},
	{engine.ErrClockSkew, ClockSkew},
	{engine.ErrUnknownGenerator, UnknownGenerator},
	{engine.ErrClosed, Closed},
	{context.Canceled, Canceled},
	{context.DeadlineExceeded, Deadline},
	{engine.ErrInvalidConfig, InvalidConfig},
	{engine.ErrInvalidID, InvalidID},
}

// Of names the sentinel err wraps, Other for none.
func Of(err error) string {
	for _, r := range table {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return Other
}

// Err returns the sentinel named name, nil for Other or a name not in the
// table: the way back from a code sent over the wire.
func Err(name string) error {
	for _, r := range table {
		if r.name == name {
			return r.err
		}
	}
	return nil
}
