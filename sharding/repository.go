package sharding

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idforge/idforge/internal/idgen"
)

// DefaultBatchSize is how many rows one INSERT statement of a repository
// carries unless [Settings.BatchSize] says otherwise: the batch default of
// the whole library (sqlhook.DefaultBatchSize is the same), small enough for
// every database's limit on bind parameters with a dozen columns.
const DefaultBatchSize = idgen.DefaultBatchSize

// Settings configures a repository of [github.com/idforge/idforge/sharding/shardgorm]
// or [github.com/idforge/idforge/sharding/shardsqlx]; both read it alike. The
// zero value is the default. Pass it whole with [WithSettings], or set one
// field with [WithBatchSize] or [WithShardKey].
type Settings struct {
	// BatchSize is how many rows one INSERT statement carries at most; a
	// shard's part of a larger batch is inserted in several statements
	// within one transaction. Both repositories cut a statement shorter
	// when its bind parameters (rows × columns) would pass the database's
	// limit: 65,535 on MySQL, MariaDB and PostgreSQL, 32,766 on SQLite and
	// any other driver. 0 means [DefaultBatchSize]; a negative size is an
	// error.
	BatchSize int
	// ShardKey names the integer field rows are routed by, as a Go field
	// name or a column name. Empty means the ID: the primary key for GORM,
	// the "id" column for sqlx.
	ShardKey string
}

// Option configures a repository. See [Settings].
type Option func(*Settings)

// WithSettings replaces every setting by s.
func WithSettings(s Settings) Option { return func(c *Settings) { *c = s } }

// WithBatchSize sets [Settings.BatchSize].
func WithBatchSize(n int) Option { return func(c *Settings) { c.BatchSize = n } }

// WithShardKey sets [Settings.ShardKey].
func WithShardKey(name string) Option { return func(c *Settings) { c.ShardKey = name } }

// ErrNotFound is what a repository's Find returns, wrapped together with the
// ORM's own error (gorm.ErrRecordNotFound, sql.ErrNoRows), when the shard
// holds no row with the key.
var ErrNotFound = errors.New("sharding: no row with that key")

// ErrInvalidData is wrapped by a repository's errors about the rows given
// to Create rather than its configuration: a nil row (a nil pointer, a nil
// element of a []*T). It is sqlhook.ErrInvalidData, the error of the fillers.
var ErrInvalidData = idgen.ErrInvalidData

// ErrWrongShard is wrapped by the errors of a write or a read that would
// reach another shard than the one a handle is bound to: a row created
// through a repository's DB(key) session or transaction that routes
// elsewhere, a Scope applied to another database than its key's. Nothing
// is written.
var ErrWrongShard = errors.New("sharding: row or statement of another shard")

// ErrOutcomeUnknown is wrapped by a [ShardError] whose shard's part may or
// may not have been committed: the connection failed while COMMIT was on
// its way, so only the database knows. Read one of the part's rows back by
// the ID it holds (Find), or call Create again with the same rows, which
// skips those already stored.
var ErrOutcomeUnknown = errors.New("sharding: outcome unknown, the part may have been committed")

// ShardPart is one shard's share of the rows given to a repository's Create.
type ShardPart struct {
	Shard Shard
	// Rows are the positions of the part's rows in the value given to
	// Create (0 for a single struct), ascending.
	Rows []int
}

// ShardError reports a Create that stopped at a shard. Each shard's part
// is all-or-nothing, in one transaction: the failed part was rolled back,
// unless the error wraps [ErrOutcomeUnknown]. Written lists the parts that
// are stored, Pending those never tried (a batch spanning shards is not
// atomic: there is no distributed transaction).
//
// Create is idempotent: calling it again with the same rows, which now
// hold their IDs, skips every row already stored in its shard under its
// primary key and writes the rest, so it finishes the batch without duplicates.
type ShardError struct {
	Shard Shard // the shard whose part failed
	Rows  []int // positions of the failed part's rows in the value given to Create
	// Written are the parts stored before the failure, by this Create or
	// (found stored) by an earlier one.
	Written []ShardPart
	// Pending are the parts after the failed one, not tried.
	Pending []ShardPart
	Err     error
}

// Error names the shard, the rows, the database's error and what the
// batch left written.
func (e *ShardError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sharding: insert %d rows into %s: %v", len(e.Rows), e.Shard, e.Err)
	if errors.Is(e.Err, ErrOutcomeUnknown) {
		b.WriteString(" (the part may be stored")
	} else {
		b.WriteString(" (the part was rolled back")
	}
	fmt.Fprintf(&b, "; %s written, %s pending: Create again with the same rows finishes the batch)",
		countParts(e.Written), countParts(e.Pending))
	return b.String()
}

func countParts(parts []ShardPart) string {
	n := 0
	for _, p := range parts {
		n += len(p.Rows)
	}
	return fmt.Sprintf("%d rows in %d shards", n, len(parts))
}

// Unwrap returns the database's error.
func (e *ShardError) Unwrap() error { return e.Err }
