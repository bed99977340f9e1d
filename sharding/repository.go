package sharding

import (
	"errors"
	"fmt"
	"strings"
)

// Settings configures a repository of [github.com/idforge/idforge/sharding/shardgorm]
// or [github.com/idforge/idforge/sharding/shardsqlx]; both read it alike.
// The zero value is the default; New refuses a value out of range with an
// error wrapping engine.ErrInvalidConfig that names the field.
type Settings struct {
	// BatchSize is how many rows one INSERT statement carries at most; a
	// shard's part of a larger batch is inserted in several statements
	// within one transaction. Both repositories cut a statement shorter
	// when its bind parameters (rows × columns) would pass the database's
	// limit: 65,535 on MySQL, MariaDB and PostgreSQL, 32,766 on SQLite and
	// any other driver. 0 means 1,000, the batch default of the whole
	// library; a negative size is an error.
	BatchSize int
	// ShardKey names the integer field rows are routed by, as a Go field
	// name or a column name. Empty means the ID: the primary key for GORM,
	// the "id" column for sqlx. Rows that must change together in one
	// transaction share a shard when they share a shard key.
	ShardKey string
	// Parallel is how many shards a call over several shards (Get, Page,
	// Count, Update, Delete) reaches at once; each holds one connection
	// of its database while it runs. 0 means 8; a negative number is an
	// error.
	Parallel int
	// OwnerResidues, when above 0, makes Create compose the ID of every
	// row it fills so that the ID routes like the row's ShardKey, its
	// owner: id = value × OwnerResidues + owner mod OwnerResidues, value
	// being the number drawn for the ID column ([Router.OwnerID]). A row
	// is then found by its ID (Get, Query.IDs) and by its owner (Find,
	// Query.Key) with no lookup table. It needs ShardKey, a Mod router and
	// an integer primary key, and must be a multiple of the router's
	// databases × tables (and, to add shards later, of the counts you may
	// grow to: see [Router.OwnerID]). The values drawn must leave room:
	// draw from a snowflake layout of fewer bits (snowflake.JSSafe leaves
	// room for 1,024) or a chain. 0 draws plain IDs.
	OwnerResidues int
}

// ErrNotFound is what a repository's Find returns, wrapped together with the
// ORM's own error (gorm.ErrRecordNotFound, sql.ErrNoRows), when the shard
// holds no row with the key.
var ErrNotFound = errors.New("sharding: no row with that key")

// ErrWrongShard is wrapped by the errors of a write or a read that would
// reach another shard than the one a handle is bound to: a row created
// through a repository's DB(key) session or transaction that routes
// elsewhere, a transaction of another database given to In. Nothing
// is written.
var ErrWrongShard = errors.New("sharding: row or statement of another shard")

// ErrOutcomeUnknown is wrapped by a [ShardError] whose shard's part may or
// may not have been committed: the connection failed while COMMIT was on
// its way, so only the database knows. A COMMIT the server answered with
// an error (a deferred constraint, a serialization failure) is no such
// case: the part was rolled back, and the ShardError wraps that error. Read one of the part's rows back by
// the ID it holds (Find), or call Create again with the same rows, which
// skips those already stored.
var ErrOutcomeUnknown = errors.New("sharding: outcome unknown, the part may have been committed")

// ShardError reports a Create that stopped at a shard. Each shard's part
// is all-or-nothing, in one transaction: the failed part was rolled back,
// unless the error wraps [ErrOutcomeUnknown]. Written lists the rows that
// are stored (a batch spanning shards is not atomic: there is no
// distributed transaction).
//
// Create is idempotent: calling it again with the same rows, which now
// hold their IDs, skips every row already stored in its shard under its
// primary key and writes the rest, so it finishes the batch without duplicates.
type ShardError struct {
	// Rows are the positions, in the value given to Create (0 for a single
	// struct), of the failed part's rows, ascending, but those an earlier
	// Create stored, which are in Written.
	Rows []int
	// Written are the positions of the rows stored, ascending: those this
	// Create stored before the failure, and those an earlier one stored,
	// found by the IDs they held before the call, in the failed part and
	// in the parts after it, which were never tried (one read of each;
	// a part whose read fails too is left out). Rows in neither list
	// are not stored, barring such a part and a failed part whose
	// outcome is unknown.
	Written []int
	// Err is the database's error, naming the shard.
	Err error
}

// Error names the rows, the database's error and what the batch left
// written.
func (e *ShardError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sharding: insert %d rows: %v", len(e.Rows), e.Err)
	if errors.Is(e.Err, ErrOutcomeUnknown) {
		b.WriteString(" (the part may be stored")
	} else {
		b.WriteString(" (the part was rolled back")
	}
	fmt.Fprintf(&b, "; %d rows written: Create again with the same rows finishes the batch)", len(e.Written))
	return b.String()
}

// Unwrap returns the database's error.
func (e *ShardError) Unwrap() error { return e.Err }
