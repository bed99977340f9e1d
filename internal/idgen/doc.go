// Package idgen is what the GORM plugin, the sqlx helper and the sharding
// repositories share: the one `idgen` struct-tag syntax, the checks that a
// tagged field can hold an ID, the one walk of a value's rows ([Walk]), the
// filler of zero-valued fields ([Filler]), and the one batch default
// ([DefaultBatchSize]).
//
// A [Plan] is parsed from a struct type by [NewPlan]; binding it to an
// engine.Provider gives a [Filler]. Callers keep their own caches of both:
// this package holds no state.
//
// The tag is `idgen:"<kind>[,name=<name>][,format=<format>]"`:
//
//	ID    int64     `idgen:"snowflake"`                 // kind "snowflake", the kind's shared default
//	ID    int64     `idgen:"chain,name=order"`          // kind "chain", generator "order"
//	Code  string    `idgen:"snowflake,format=radix62"`  // string fields take a format (default decimal)
//	ID    uuid.UUID `idgen:"uuidv7"`                    // a version 7 UUID (or its canonical string)
//	No    string    `idgen:"chain,name=invoice,format=INV-{yyyy}{MM}{dd}-{seq:6}"` // a dated chain
//
// Tagged fields may be int64, uint64, int (on 64-bit platforms), engine.ID or
// any other type of those kinds, string, or a pointer to one of them; kind
// "uuidv7" takes a 16-byte array (uuid.UUID) or a string, and a format with
// fields in braces (internal/dated) a string of a chain with a name. Every
// mistake (an unknown option, an empty kind, a bad format, a field that cannot
// hold an ID, a kind the provider does not know) is an error that names the
// model and the field and wraps [engine.ErrInvalidConfig] or
// [engine.ErrUnknownGenerator], so callers test it with errors.Is without
// importing this package. So is a tag key one typo away from "idgen"
// (`idgne:"snowflake"`): that field would otherwise be inserted without an ID.
package idgen
