package engine

import "context"

// Provider hands out generators by kind and name; the empty name is the
// kind's shared default. An *idforge.Registry is one; the GORM plugin, the
// sqlx helper and the sharding repositories draw from any. An unknown kind
// or name wraps [ErrUnknownGenerator].
type Provider interface {
	Generator(ctx context.Context, kind, name string) (Generator, error)
}

// Generator hands out unique int64 IDs. Implementations are safe for
// concurrent use. A non-nil error means no ID was consumed. The GORM plugin
// and the sqlx helper read a zero ID field as not filled yet, so a
// Generator should not return 0: chain and segment IDs start at 1, and a
// snowflake ID is 0 only on machine 0 in the first tick of its layout's
// epoch.
type Generator interface {
	NextID(ctx context.Context) (int64, error)
}

// Floor reads from the data how far the named sequence has gone: the
// largest ID its tables hold (0 for empty tables). A store asks it before it
// creates or re-creates a sequence's counter, and starts the counter above the
// answer. An error wrapping [ErrNoFloor] means the Floor knows nothing of the
// name; any other error fails the fetch that asked.
type Floor func(ctx context.Context, name string) (int64, error)

// UUIDGenerator hands out 128-bit IDs: RFC 9562 UUIDs as their 16 bytes,
// which convert to a uuid.UUID (github.com/google/uuid) as they are. The
// generator of the registry's kind "uuidv7" is one. A [Provider] hands
// out Generator values, so a UUID generator is also a Generator whose
// NextID refuses (128 bits do not fit an int64): assert it to
// UUIDGenerator to draw UUIDs.
type UUIDGenerator interface {
	NextUUID(ctx context.Context) ([16]byte, error)
}
