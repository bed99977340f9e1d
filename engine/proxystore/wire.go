package proxystore

import (
	"context"

	"github.com/idforge/idforge/engine"
)

// The messages and error codes of the /v1/proxy endpoints of `idforge
// serve`, as this client sends and reads them. The server declares its side
// in internal/wire and internal/reason, which the engine does not import;
// wire_test.go holds the two sides alike.

// machineRequest is the body of the /v1/proxy/machines/* calls.
type machineRequest struct {
	Namespace       string `json:"namespace"`
	Instance        string `json:"instance"`
	Stable          bool   `json:"stable,omitempty"`
	MachineBits     int    `json:"machine_bits,omitempty"`
	SafeGuardMillis int64  `json:"safe_guard_ms,omitempty"`
	MachineID       int64  `json:"machine_id,omitempty"`
	LastTimestamp   int64  `json:"last_timestamp,omitempty"`
	Lease           string `json:"lease,omitempty"`
}

// machineState is the answer of /v1/proxy/machines/distribute: with the
// store's reset grace and ride-through window (-1: none).
type machineState struct {
	MachineID         int64  `json:"machine_id"`
	LastTimestamp     int64  `json:"last_timestamp"`
	ResetGraceMillis  int64  `json:"reset_grace_ms,omitempty"`
	RideThroughMillis int64  `json:"ride_through_ms,omitempty"`
	Lease             string `json:"lease,omitempty"`
}

// segmentRequest is the body of /v1/proxy/segments/next.
type segmentRequest struct {
	Name string `json:"name"`
	Step int64  `json:"step"`
}

// segmentRange is the answer of /v1/proxy/segments/next: the caller owns
// (MaxID-step, MaxID].
type segmentRange struct {
	MaxID int64 `json:"max_id"`
}

// The proxy's own error codes; the others are reasons, below.
const (
	codeTimeout       = "timeout"
	codeForbidden     = "forbidden"
	codeQuota         = "quota"
	codeUnknownChain  = "unknown_chain"
	codeTooManyChains = "too_many_chains"
)

// reasons are the error codes named after a sentinel error, as the server
// words them (internal/reason's table): the code of an error matching the
// sentinel.
var reasons = map[string]error{
	"store_reset":         engine.ErrStoreReset,
	"no_floor":            engine.ErrNoFloor,
	"clock_backwards":     engine.ErrClockBackwards,
	"machine_id_lost":     engine.ErrMachineIDLost,
	"store_unavailable":   engine.ErrStoreUnavailable,
	"segment_exhausted":   engine.ErrSegmentExhausted,
	"timestamp_overflow":  engine.ErrTimestampOverflow,
	"id_overflow":         engine.ErrIDOverflow,
	"machine_id_overflow": engine.ErrMachineIDOverflow,
	"instance_in_use":     engine.ErrInstanceInUse,
	"clock_skew":          engine.ErrClockSkew,
	"unknown_generator":   engine.ErrUnknownGenerator,
	"closed":              engine.ErrClosed,
	"canceled":            context.Canceled,
	"deadline":            context.DeadlineExceeded,
	"invalid_config":      engine.ErrInvalidConfig,
	"invalid_id":          engine.ErrInvalidID,
}
