// Package repo is what the GORM and sqlx sharded repositories share: option
// resolution, the checks of a router against the databases given, routing a
// batch of rows and splitting it by shard, the fan-out over every shard, the
// Floors of the sequences over every shard, and the errors that name a
// shard. The ORM-specific parts (filling IDs, reading the shard key, the
// statements) are passed in as functions.
package repo

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/sharding"
)

// Base holds a repository's router, its databases (indexed like
// [sharding.Shard.Database]) and its settings.
type Base[DB any] struct {
	Router   sharding.Router
	DBs      []*DB
	Settings sharding.Settings

	floors  Floors[DB]
	floorMu sync.Mutex // held while a row type's floors are added
	floored sync.Map   // reflect.Type -> true: row types whose floors were added
}

// Floors is what the Floors of a row type's sequences need from the ORM.
type Floors[DB any] struct {
	// Sequences returns the registry the IDs of elem's rows are drawn from
	// and elem's columns that take IDs from a sequence; an error in elem's
	// tags is the one filling the rows would return.
	Sequences func(elem reflect.Type) (engine.Provider, []idgen.Column, error)
	// Table returns the Floor of c's sequence in shard s's table, read
	// through db: the largest ID in c's column, 0 while the table does not
	// exist.
	Table func(db *DB, s sharding.Shard, c idgen.Column) engine.Floor
}

// New checks the router, the databases and the options; pkg names the
// constructor in errors ("shardgorm.New").
func New[DB any](pkg string, r sharding.Router, dbs []*DB, opts []sharding.Option, floors Floors[DB]) (*Base[DB], error) {
	var s sharding.Settings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if s.BatchSize < 0 {
		return nil, fmt.Errorf("%w: %s: batch size %d (want at least 1, or 0 for %d)",
			engine.ErrInvalidConfig, pkg, s.BatchSize, sharding.DefaultBatchSize)
	}
	if s.BatchSize == 0 {
		s.BatchSize = sharding.DefaultBatchSize
	}
	if r == nil {
		return nil, fmt.Errorf("%w: %s needs a router", engine.ErrInvalidConfig, pkg)
	}
	if len(dbs) == 0 {
		return nil, fmt.Errorf("%w: %s needs at least one database", engine.ErrInvalidConfig, pkg)
	}
	for i, db := range dbs {
		if db == nil {
			return nil, fmt.Errorf("%w: %s: database %d is nil", engine.ErrInvalidConfig, pkg, i)
		}
	}
	// A router that lists its shards must use exactly the databases given;
	// an unbounded one is checked on every route instead.
	if shards, err := r.Shards(); err == nil {
		want := 0
		for _, s := range shards {
			want = max(want, s.Database+1)
		}
		if len(dbs) != want {
			return nil, fmt.Errorf("%w: %s: the router uses %d databases, %d were given",
				engine.ErrInvalidConfig, pkg, want, len(dbs))
		}
	}
	return &Base[DB]{Router: r, DBs: dbs, Settings: s, floors: floors}, nil
}

// Route returns the shard of id and its database.
func (b *Base[DB]) Route(id int64) (*DB, sharding.Shard, error) {
	s, err := b.Router.Route(id)
	if err != nil {
		return nil, sharding.Shard{}, err
	}
	if s.Database < 0 || s.Database >= len(b.DBs) {
		return nil, sharding.Shard{}, fmt.Errorf("%w: id %d routes to database %d (%s), but only %d databases were given",
			engine.ErrInvalidConfig, id, s.Database, s, len(b.DBs))
	}
	return b.DBs[s.Database], s, nil
}

// ForEach calls fn for every shard, in the router's order, with its
// database; errors name the shard. It stops when ctx ends.
func (b *Base[DB]) ForEach(ctx context.Context, fn func(s sharding.Shard, db *DB) error) error {
	shards, err := b.Router.Shards()
	if err != nil {
		return err
	}
	for _, s := range shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		db, err := b.shardDB(s)
		if err != nil {
			return err
		}
		if err := fn(s, db); err != nil {
			return fmt.Errorf("sharding: shard %s: %w", s, err)
		}
	}
	return nil
}

// shardDB returns the database of a shard the router listed.
func (b *Base[DB]) shardDB(s sharding.Shard) (*DB, error) {
	if s.Database < 0 || s.Database >= len(b.DBs) {
		return nil, fmt.Errorf("%w: shard %s is in database %d, but only %d databases were given",
			engine.ErrInvalidConfig, s, s.Database, len(b.DBs))
	}
	return b.DBs[s.Database], nil
}

// AddFloors gives the registry of elem's rows the Floor of every sequence
// their columns draw from, once per row type: the largest ID of the
// sequence's columns over every table of every database the router lists,
// so a store that forgot the sequence restarts it above every shard, not
// above the one table a GORM plugin sees. Create calls it before filling
// the rows; call it before anything else can draw elem's first ID (binding
// its generators builds the chain whose first fetch asks the floors).
//
// A router that cannot list its shards (an interval router without an End)
// gets a Floor answering an error wrapping engine.ErrNoFloor instead: a
// store that forgot the sequence refuses it rather than restart it below
// the IDs the shards hold.
func (b *Base[DB]) AddFloors(elem reflect.Type) error {
	if _, ok := b.floored.Load(elem); ok {
		return nil
	}
	// Held until the floors are added, so no concurrent Create of elem
	// draws an ID before them.
	b.floorMu.Lock()
	defer b.floorMu.Unlock()
	if _, ok := b.floored.Load(elem); ok {
		return nil
	}
	p, cols, err := b.floors.Sequences(elem)
	if err != nil {
		return err
	}
	var names []string
	bySeq := map[string][]idgen.Column{}
	for _, c := range cols {
		name := c.Field.FloorName() // a dated chain's is <name>:*, for every period
		if bySeq[name] == nil {
			names = append(names, name)
		}
		bySeq[name] = append(bySeq[name], c)
	}
	for _, name := range names {
		f, err := b.floor(idgen.ModelName(elem), name, bySeq[name])
		if err != nil {
			return err
		}
		idgen.AddFloor(p, name, f)
	}
	b.floored.Store(elem, true)
	return nil
}

// floor is the Floor of the sequence name over every shard: the largest ID
// in cols of every shard's table.
func (b *Base[DB]) floor(model, name string, cols []idgen.Column) (engine.Floor, error) {
	shards, err := b.Router.Shards()
	if err != nil {
		// Registry.AddFloor cannot lift this refusal (the registry fails on
		// any floor's error); a store's own Floor is asked beside it.
		refusal := fmt.Errorf("%w: sharding: model %s: sequence %q: the router cannot list its shards, so nothing reads the largest ID they hold: "+
			"bound the router, or give the store a Floor (sqlstore or redisstore Settings.Floor) that reads the largest %q ID of every table (%v)",
			engine.ErrNoFloor, model, name, name, err)
		return func(context.Context, string) (int64, error) { return 0, refusal }, nil
	}
	type part struct {
		shard sharding.Shard
		floor engine.Floor
	}
	var parts []part
	for _, s := range shards {
		db, err := b.shardDB(s)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			parts = append(parts, part{s, b.floors.Table(db, s, c)})
		}
	}
	return func(ctx context.Context, name string) (int64, error) {
		var top int64
		for _, p := range parts {
			n, err := p.floor(ctx, name)
			if err != nil {
				return 0, fmt.Errorf("sharding: shard %s: %w", p.shard, err)
			}
			top = max(top, n)
		}
		return top, nil
	}, nil
}

// Exec runs query, which must name the table {table}, in every shard
// through exec, which gets the query with the shard's table filled in.
func (b *Base[DB]) Exec(ctx context.Context, query string, exec func(db *DB, query string) error) error {
	if err := CheckTemplate(query); err != nil {
		return err
	}
	return b.ForEach(ctx, func(s sharding.Shard, db *DB) error { return exec(db, s.Query(query)) })
}

// CheckTemplate rejects a statement that does not name {table}: it would
// run on one table the router knows nothing of.
func CheckTemplate(query string) error {
	if !strings.Contains(query, sharding.TablePlaceholder) {
		return fmt.Errorf("%w: sharding: statement %q does not name its table %s",
			engine.ErrInvalidConfig, query, sharding.TablePlaceholder)
	}
	return nil
}

// Find routes key and runs find on its shard. An error notFound recognises
// is wrapped with [sharding.ErrNotFound] as well.
func (b *Base[DB]) Find(key int64, find func(db *DB, s sharding.Shard) error, notFound func(error) bool) error {
	db, s, err := b.Route(key)
	if err != nil {
		return err
	}
	if err := find(db, s); err != nil {
		if notFound(err) {
			return fmt.Errorf("%w: key %d in %s: %w", sharding.ErrNotFound, key, s, err)
		}
		return fmt.Errorf("sharding: find %d in %s: %w", key, s, err)
	}
	return nil
}

// Rows is what a Create needs from the ORM, for one struct type.
type Rows[DB any] struct {
	// Key returns the reader of the shard key of rows of type elem, after
	// checking the field exists and is an integer; it is called before any
	// ID is drawn.
	Key func(elem reflect.Type) (func(row reflect.Value) (int64, error), error)
	// Fill gives value's rows their IDs.
	Fill func(value any) error
	// Insert writes part, a []*T of one shard's rows, into the shard in
	// batches of the batch size, in one transaction.
	Insert func(db *DB, s sharding.Shard, part any) error
}

// Create fills the IDs of value (a pointer to a struct, or a slice or array
// of structs or of pointers), after adding the Floors of its row type
// ([Base.AddFloors]), routes every row by its shard key, and inserts each
// shard's rows, by database then table. A nil row wraps
// [sharding.ErrInvalidData]; a failed shard is a *[sharding.ShardError].
func (b *Base[DB]) Create(value any, orm Rows[DB]) error {
	rows, elem, err := rowsOf(value)
	if err != nil || len(rows) == 0 {
		return err
	}
	key, err := orm.Key(elem)
	if err != nil {
		return err
	}
	if err := b.AddFloors(elem); err != nil {
		return err
	}
	if err := orm.Fill(value); err != nil {
		return err
	}
	groups, err := b.split(rows, key)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := orm.Insert(b.DBs[g.shard.Database], g.shard, g.pointers(elem)); err != nil {
			return &sharding.ShardError{Shard: g.shard, Rows: len(g.rows), Err: err}
		}
	}
	return nil
}

// group is the rows of one shard, in input order.
type group struct {
	shard sharding.Shard
	rows  []reflect.Value
}

// split routes every row by key and groups the rows by shard, ordered by
// database then table index, so a failure leaves a predictable set of
// shards written.
func (b *Base[DB]) split(rows []reflect.Value, key func(row reflect.Value) (int64, error)) ([]*group, error) {
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
		_, s, err := b.Route(id)
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

// rowsOf lists the struct rows of value as the fillers walk them
// (idgen.Walk): a pointer to a struct, or a slice or array (or a pointer to
// one) of structs or of pointers to structs. Every row must be addressable,
// so that the IDs written into it reach the caller.
func rowsOf(value any) (rows []reflect.Value, elem reflect.Type, err error) {
	rv := reflect.ValueOf(value)
	if elem, err = idgen.RowType(rv); err != nil {
		return nil, nil, fmt.Errorf("sharding: %w", err)
	}
	err = idgen.Walk(rv, elem, func(row reflect.Value) error {
		if !row.CanAddr() {
			return fmt.Errorf("%w: IDs cannot be written back into the rows of a %T: pass a pointer to it, or pointers to its rows",
				engine.ErrInvalidConfig, value)
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sharding: %w", err)
	}
	return rows, elem, nil
}

// KeyKind checks that a shard key of type t can be read as an int64.
func KeyKind(model, field string, t reflect.Type) error {
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

// KeyValue reads an integer shard key; 0 for a nil pointer.
func KeyValue(v reflect.Value) (int64, error) {
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
