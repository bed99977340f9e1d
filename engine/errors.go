package engine

import "errors"

// Sentinel errors. Errors returned by idforge wrap one of these with details
// (which generator, by how much, which store), so test them with [errors.Is].
var (
	// ErrUnknownGenerator: no generator is registered under the requested kind or name.
	ErrUnknownGenerator = errors.New("idforge: unknown generator")
	// ErrInvalidConfig: a setting or argument out of range, a snowflake
	// bit layout that cannot work among them.
	ErrInvalidConfig = errors.New("idforge: invalid configuration")
	// ErrInvalidData: the rows given to a filler or a repository, not the
	// configuration, are wrong: a nil element of a []*T, a nil pointer, an
	// element of another type. The GORM plugin's errors also match
	// gorm.ErrInvalidData.
	ErrInvalidData = errors.New("idforge: invalid data")
	// ErrClockBackwards: the clock went back further than the generator waits out.
	ErrClockBackwards = errors.New("idforge: clock moved backwards")
	// ErrTimestampOverflow: the layout's timestamp bits are used up (epoch + 2^bits passed).
	ErrTimestampOverflow = errors.New("idforge: timestamp overflow")
	// ErrMachineIDOverflow: every machine ID of the namespace is taken.
	ErrMachineIDOverflow = errors.New("idforge: machine IDs exhausted")
	// ErrMachineIDLost: this instance's machine ID lapsed or was taken over by another
	// instance; generators using it refuse to issue until a new one is distributed.
	ErrMachineIDLost = errors.New("idforge: machine ID lost")
	// ErrInstanceInUse: another live process holds the machine ID of this
	// stable instance (two processes run with one instance ID); the store
	// hands it over once that holder reverts it or stays silent for the
	// safe-guard duration. Also: another process on this host holds the
	// lock file of this fixed machine ID (IDFORGE_MACHINE_ID, machine.Manual,
	// a StatefulSet ordinal); the error names its PID and the lock file,
	// and the lock is free once that process ends, however it ends.
	ErrInstanceInUse = errors.New("idforge: instance in use by another live process")
	// ErrClockSkew: the local clock is further from the store server's clock
	// than the machine-ID lease's skew margin.
	ErrClockSkew = errors.New("idforge: clock too far from the store's")
	// ErrStoreUnavailable: the store behind a distributor failed or could not be reached.
	ErrStoreUnavailable = errors.New("idforge: store unavailable")
	// ErrSegmentExhausted: a segment generator has no IDs left and could not fetch more.
	ErrSegmentExhausted = errors.New("idforge: segment exhausted")
	// ErrIDOverflow: the next ID would not fit in a signed 64-bit integer.
	ErrIDOverflow = errors.New("idforge: id overflow")
	// ErrInvalidID: a string or value that is not a valid ID for the given format or layout.
	ErrInvalidID = errors.New("idforge: invalid id")
	// ErrStoreReset: the store forgot what it handed out (emptied, restarted
	// without persistence, failed over to a replica that had not seen the
	// latest writes). Generators stop issuing from anything obtained before
	// the reset and start again above what was handed out.
	ErrStoreReset = errors.New("idforge: store was reset")
	// ErrClosed: the generator, chain or registry was closed.
	ErrClosed = errors.New("idforge: closed")
	// ErrNoFloor: a sequence is missing from a store that was not initialised
	// as brand-new, so it may have been wiped after handing out IDs, or its
	// counter is untrusted (the store was declared restored, found without
	// its epoch, or caught going back), and no [Floor] says where the
	// sequence's data ends. Give a Floor (the GORM plugin and the sharding
	// repositories derive one from the tagged columns), mark a store that
	// never handed out IDs brand-new with `idforge store init`, or raise
	// the counter with `idforge store chain NAME -raise N`.
	ErrNoFloor = errors.New("idforge: sequence has no floor")
)
