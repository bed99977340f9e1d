package sharding

import (
	"errors"
	"fmt"

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
	// BatchSize is how many rows one INSERT statement carries; a shard's
	// part of a larger batch is inserted in several statements within one
	// transaction. 0 means [DefaultBatchSize]; a negative size is an error.
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

// ShardError reports a failed insert into one shard. The shards before it,
// in the order of the router's Shards, were written: a batch spanning shards
// is not atomic, each shard's part is.
type ShardError struct {
	Shard Shard
	Rows  int // rows meant for the shard
	Err   error
}

// Error names the shard, the rows and the database's error.
func (e *ShardError) Error() string {
	return fmt.Sprintf("sharding: insert %d rows into %s: %v", e.Rows, e.Shard, e.Err)
}

// Unwrap returns the database's error.
func (e *ShardError) Unwrap() error { return e.Err }
