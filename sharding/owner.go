package sharding

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/idforge/idforge/engine"
)

// OwnerID composes the ID of a row owned by owner (the row's shard key: a
// customer, a tenant) from value, a unique positive number drawn for the
// row, so that the ID routes to the owner's shard:
//
//	id = value × residues + owner mod residues
//
// The row is then found by its own ID and by its owner, with no lookup
// table. The owner's residue is a field of the ID's layout, below the
// value: two IDs are equal only if their values are, so IDs are as unique
// as the values (a snowflake generator's, or a chain's). Overwriting the
// low bits of an ID already drawn would not be: two snowflake IDs that
// differ only there would become one.
//
// The ID routes like its owner when the router's rules depend on the ID
// only through id mod residues: residues must be a multiple of databases
// × tables for the default rules (of 4 for ShardingSphere's course rule).
// Pick it a multiple of every shard count you may grow to as well (720
// serves 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16 ... shards): the IDs already
// stored then route with their owners after the shards are added, and
// IDs stay unique across the change, since the layout does not move.
// Changing residues itself changes the layout: IDs composed before and
// after may collide, so it is a new ID space, not a setting to turn.
//
// The value must leave room: value × residues must fit 63 bits, so a
// value of b bits addresses at most 2^(63-b) residues. The default
// snowflake layout uses all 63 bits and leaves none; snowflake.JSSafe's
// 53 bits (41/3/9) leave 1,024, a layout of 41/6/8 bits (55) 256, a
// chain's numbers, far below 2^40, millions.
//
// An owner or value below 1, or a value too large for residues, wraps
// engine.ErrInvalidID; an interval router (which routes by time), residues
// below 1, or rules under which the ID would not route like its owner
// wrap engine.ErrInvalidConfig.
func (r *Router) OwnerID(owner, value int64, residues int) (int64, error) {
	rr, err := r.get()
	if err != nil {
		return 0, err
	}
	if _, ok := rr.(*modRouter); !ok {
		return 0, fmt.Errorf("%w: sharding: owner-keyed IDs need a Mod router; %s routes by the ID's time", engine.ErrInvalidConfig, rr)
	}
	switch {
	case residues < 1:
		return 0, fmt.Errorf("%w: sharding: owner-keyed IDs with %d residues (want at least 1)", engine.ErrInvalidConfig, residues)
	case owner < 1:
		return 0, fmt.Errorf("%w: sharding: owner %d: owners are positive", engine.ErrInvalidID, owner)
	case value < 1:
		return 0, fmt.Errorf("%w: sharding: value %d for an owner-keyed ID: values are positive", engine.ErrInvalidID, value)
	}
	m := int64(residues)
	if value > (math.MaxInt64-(m-1))/m {
		return 0, fmt.Errorf("%w: sharding: value %d (%d bits) does not fit an owner-keyed ID with %d residues: "+
			"draw values of at most %d bits (a snowflake layout such as snowflake.JSSafe, or a chain)",
			engine.ErrInvalidID, value, bits.Len64(uint64(value)), residues, 63-bits.Len64(uint64(m-1)))
	}
	id := value*m + owner%m
	got, err := rr.route(id)
	if err != nil {
		return 0, err
	}
	want, err := rr.route(owner)
	if err != nil {
		return 0, err
	}
	if got != want {
		return 0, fmt.Errorf("%w: sharding: id %d composed for owner %d routes to %s, the owner to %s: "+
			"the rules %s do not depend on the ID through id mod %d alone (make residues a multiple of their period)",
			engine.ErrInvalidConfig, id, owner, got, want, rr, residues)
	}
	return id, nil
}
