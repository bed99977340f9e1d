// Package wire holds the types of the /v1/proxy endpoints of `idforge
// serve` as package server reads and answers them. The client,
// engine/proxystore, declares its side of the same messages (the engine
// imports nothing outside it), and its test holds the two alike. Error
// codes are internal/reason's names where one exists. It also holds
// the service's fixed limits and formats, which the CLI's help repeats. It
// imports nothing.
package wire

// MachineRequest is the body of the /v1/proxy/machines/* calls. Distribute
// reads MachineBits and SafeGuardMillis, and Lease when the caller asks
// again for an instance it holds; Guard and Revert read MachineID,
// LastTimestamp and Lease.
type MachineRequest struct {
	Namespace       string `json:"namespace"`
	Instance        string `json:"instance"`
	Stable          bool   `json:"stable,omitempty"`
	MachineBits     int    `json:"machine_bits,omitempty"`
	SafeGuardMillis int64  `json:"safe_guard_ms,omitempty"`
	MachineID       int64  `json:"machine_id,omitempty"`
	LastTimestamp   int64  `json:"last_timestamp,omitempty"`
	Lease           string `json:"lease,omitempty"`
}

// MachineState is the answer of /v1/proxy/machines/distribute.
// ResetGraceMillis is the store's reset grace (machine.Terms.ResetGrace), so
// a client's lease can check itself against it, and RideThroughMillis its
// ride-through window (machine.Terms.RideThrough; -1: none),
// which the client's lease reserves. Lease is the
// lease's secret: its guards and reverts must present it, and only the
// caller that was handed it may.
type MachineState struct {
	MachineID         int64  `json:"machine_id"`
	LastTimestamp     int64  `json:"last_timestamp"`
	ResetGraceMillis  int64  `json:"reset_grace_ms,omitempty"`
	RideThroughMillis int64  `json:"ride_through_ms,omitempty"`
	Lease             string `json:"lease,omitempty"`
}

// SegmentRequest is the body of /v1/proxy/segments/next.
type SegmentRequest struct {
	Name string `json:"name"`
	Step int64  `json:"step"`
}

// SegmentRange is the answer of /v1/proxy/segments/next: the caller owns
// (MaxID-step, MaxID].
type SegmentRange struct {
	MaxID int64 `json:"max_id"`
}

// Error codes of the proxy endpoints, which package proxystore maps back to
// the engine's sentinel errors. Those named like a reason of internal/reason
// (invalid_config, machine_id_lost, ...) are that reason's sentinel.
const (
	CodeInvalidConfig     = "invalid_config"
	CodeMachineIDLost     = "machine_id_lost"
	CodeMachineIDOverflow = "machine_id_overflow"
	CodeStoreUnavailable  = "store_unavailable"
	CodeStoreReset        = "store_reset"
	CodeTimeout           = "timeout"
	// CodeForbidden: the token may not name that namespace or segment, or
	// the instance is the server's own.
	CodeForbidden = "forbidden"
	// CodeInstanceInUse: another process holds a live lease of the instance.
	CodeInstanceInUse = "instance_in_use"
	// CodeNoFloor: the store has no counter for the sequence and no Floor
	// for it (engine.ErrNoFloor).
	CodeNoFloor = "no_floor"
	// CodeQuota: the token holds its quota of machine IDs.
	CodeQuota = "quota"
	// CodeUnknownChain: the name is not on the server's allow-list (-chains).
	CodeUnknownChain = "unknown_chain"
	// CodeTooManyChains: the server serves MaxChains names already and
	// has no allow-list.
	CodeTooManyChains = "too_many_chains"
)

// MaxCount is the largest ?count= one request to `idforge serve` may ask for.
const MaxCount = 10000

// MaxChains bounds the distinct chain names a server without an allow-list
// creates, so that callers cannot make it open an unbounded number of
// sequences (each one a store row and a prefetch worker). Proxy segment
// names count against it too.
const MaxChains = 256

// Formats are the ?format= values: "decimal" (the default; JSON strings, so
// that JavaScript reads them exactly), "number" (JSON numbers), "radix62" and
// "radix36" (zero-padded, so they sort like the IDs), and "friendly"
// (yyyyMMddHHmmssSSS-machine-sequence, snowflake IDs only). A chain also
// takes a dated format such as INV-{yyyy}{MM}{dd}-{seq:6}, URL-encoded (see
// idforge.Registry.Dated).
var Formats = []string{"decimal", "number", "radix62", "radix36", "friendly"}
