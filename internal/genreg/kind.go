package genreg

// The kinds of generator a registry hands out: the first element of an
// `idgen` struct tag and the kind argument of engine.Provider.Generator.
// Users write them as strings ("snowflake", `idgen:"chain,name=order"`);
// the module's code uses these names so that each is declared once.

const (
	// Snowflake is the time-ordered snowflake generator, one per registry
	// (name "").
	Snowflake = "snowflake"
	// Chain is a lock-free segment chain per sequence name.
	Chain = "chain"
	// Segment is a synchronous single-segment generator per sequence name.
	Segment = "segment"
	// UUIDv7 gives 128-bit RFC 9562 version 7 UUIDs, not int64 IDs: its
	// generator is an engine.UUIDGenerator.
	UUIDv7 = "uuidv7"
)
