package sharding

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/idforge/idforge/engine"
)

// Option configures a [Gorm] or [Sqlx] repository.
type Option func(*config)

type config struct {
	batchSize int
	key       string
}

// DefaultBatchSize is how many rows one INSERT statement carries unless
// [WithBatchSize] says otherwise: small enough for every database's limit on
// bind parameters with a dozen columns (SQLite's is 32,766).
const DefaultBatchSize = 1000

// WithBatchSize sets how many rows one INSERT statement carries; a shard's
// part of a larger batch is inserted in several statements within one
// transaction.
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithShardKey routes rows by another integer field than the default (the
// primary key for GORM, the "id" column for sqlx): a Go field name or a
// column name.
func WithShardKey(name string) Option { return func(c *config) { c.key = name } }

func newConfig(opts []Option) (config, error) {
	c := config{batchSize: DefaultBatchSize}
	for _, o := range opts {
		o(&c)
	}
	if c.batchSize < 1 {
		return c, fmt.Errorf("%w: sharding batch size %d (want at least 1)", engine.ErrInvalidConfig, c.batchSize)
	}
	return c, nil
}

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

// checkDatabases verifies that dbs covers the databases r routes to, when r
// can list its shards.
func checkDatabases(r Router, n int) error {
	if r == nil {
		return fmt.Errorf("%w: sharding repository needs a router", engine.ErrInvalidConfig)
	}
	shards, err := r.Shards()
	if err != nil {
		return nil // unbounded: checked on every route instead
	}
	want := 0
	for _, s := range shards {
		want = max(want, s.Database+1)
	}
	if n != want {
		return fmt.Errorf("%w: the router uses %d databases, %d were given", engine.ErrInvalidConfig, want, n)
	}
	return nil
}

// routeIn routes id and checks the database index against the n databases held.
func routeIn(r Router, id int64, n int) (Shard, error) {
	s, err := r.Route(id)
	if err != nil {
		return Shard{}, err
	}
	if s.Database < 0 || s.Database >= n {
		return Shard{}, fmt.Errorf("%w: id %d routes to database %d (%s), but only %d databases were given",
			engine.ErrInvalidConfig, id, s.Database, s, n)
	}
	return s, nil
}

// eachShard calls fn for every shard of r, in order, after checking its
// database is among the n held; errors name the shard. It stops when ctx ends.
func eachShard(ctx context.Context, r Router, n int, fn func(s Shard) error) error {
	shards, err := r.Shards()
	if err != nil {
		return err
	}
	for _, s := range shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.Database >= n {
			return fmt.Errorf("%w: shard %s is in database %d, but only %d databases were given",
				engine.ErrInvalidConfig, s, s.Database, n)
		}
		if err := fn(s); err != nil {
			return fmt.Errorf("sharding: shard %s: %w", s, err)
		}
	}
	return nil
}

// rowsOf lists the struct rows of value, a pointer to a struct or a slice or
// array (or a pointer to one) of structs or of pointers to structs. Every
// row is addressable, so IDs written into it reach the caller.
func rowsOf(value any) (rows []reflect.Value, elem reflect.Type, err error) {
	rv := reflect.ValueOf(value)
	if !rv.IsValid() {
		return nil, nil, fmt.Errorf("%w: sharding: nil value", engine.ErrInvalidConfig)
	}
	if rv.Kind() == reflect.Pointer && rv.Type().Elem().Kind() == reflect.Struct {
		if rv.IsNil() {
			return nil, nil, fmt.Errorf("%w: sharding: nil %T", engine.ErrInvalidConfig, value)
		}
		return []reflect.Value{rv.Elem()}, rv.Type().Elem(), nil
	}
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, nil, fmt.Errorf("%w: sharding: want a pointer to a struct or a slice of structs, got %T",
			engine.ErrInvalidConfig, value)
	}
	if rv.Kind() == reflect.Array && !rv.CanAddr() {
		return nil, nil, fmt.Errorf("%w: sharding: pass a pointer to the array %T so IDs can be written back",
			engine.ErrInvalidConfig, value)
	}
	elem = rv.Type().Elem()
	byPointer := elem.Kind() == reflect.Pointer
	if byPointer {
		elem = elem.Elem()
	}
	if elem.Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("%w: sharding: want structs, got %T", engine.ErrInvalidConfig, value)
	}
	rows = make([]reflect.Value, rv.Len())
	for i := range rows {
		row := rv.Index(i)
		if byPointer {
			if row.IsNil() {
				return nil, nil, fmt.Errorf("%w: sharding: row %d of %T is nil", engine.ErrInvalidConfig, i, value)
			}
			row = row.Elem()
		}
		rows[i] = row
	}
	return rows, elem, nil
}

// keyKind checks that a shard key of type t can be read as an int64.
func keyKind(model, field string, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return nil
	}
	return fmt.Errorf("%w: model %s: shard key %s is a %s; routing needs an integer field (WithShardKey picks another)",
		engine.ErrInvalidConfig, model, field, t)
}

// keyValue reads an integer shard key; 0 for a nil pointer.
func keyValue(v reflect.Value) (int64, error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := v.Uint()
		if u > 1<<63-1 {
			return 0, fmt.Errorf("%w: key %d does not fit an int64", engine.ErrInvalidID, u)
		}
		return int64(u), nil
	}
	return v.Int(), nil
}

// group is the rows of one shard, in input order.
type group struct {
	shard Shard
	rows  []reflect.Value
}

// split routes every row by key and groups the rows by shard, ordered by
// database then table index.
func split(r Router, n int, rows []reflect.Value, key func(row reflect.Value) (int64, error)) ([]*group, error) {
	byShard := map[[2]int]*group{}
	var out []*group
	for i, row := range rows {
		id, err := key(row)
		if err != nil {
			return nil, fmt.Errorf("sharding: row %d: %w", i, err)
		}
		if id == 0 {
			return nil, fmt.Errorf("%w: sharding: row %d has no ID to route by after filling: tag the field "+
				"(`idgen:\"snowflake\"`) or set it", engine.ErrInvalidID, i)
		}
		s, err := routeIn(r, id, n)
		if err != nil {
			return nil, fmt.Errorf("sharding: row %d: %w", i, err)
		}
		k := [2]int{s.Database, s.Table}
		g := byShard[k]
		if g == nil {
			g = &group{shard: s}
			byShard[k] = g
			out = append(out, g)
		}
		g.rows = append(g.rows, row)
	}
	// By database then table, the order of Shards, so a failure leaves a
	// predictable set of shards written.
	slices.SortFunc(out, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.shard.Database, b.shard.Database), cmp.Compare(a.shard.Table, b.shard.Table))
	})
	return out, nil
}

// pointers returns a []*T of the rows' addresses, for the drivers to insert
// and write back into.
func (g *group) pointers(elem reflect.Type) any {
	s := reflect.MakeSlice(reflect.SliceOf(reflect.PointerTo(elem)), len(g.rows), len(g.rows))
	for i, row := range g.rows {
		s.Index(i).Set(row.Addr())
	}
	return s.Interface()
}
