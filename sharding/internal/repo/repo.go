// Package repo is what the GORM and sqlx sharded repositories share:
// settings resolution, the checks of a router against the databases given, routing a
// batch of rows and splitting it by shard, writing each shard's part
// all-or-nothing and skipping rows an earlier Create stored, the
// batch-size rule and the quoting of table names, the fan-out over every
// shard, the Floors of the sequences over every shard, and the errors that
// name a shard. The ORM-specific parts (filling IDs, reading the shard key,
// the statements and transactions) are passed in as functions.
package repo

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
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
	Router   *sharding.Router
	DBs      []*DB
	Settings sharding.Settings

	order  map[sharding.Shard]int // position in Router.Shards, when it lists them
	idents []string               // Identity of each database, "" when unknown
	pools  []any                  // each database's pool

	orm     ORM[DB]
	floorMu sync.Mutex // held while a row type's floors are added
	floored sync.Map   // reflect.Type -> true: row types whose floors were added
}

// ORM is what the shared code needs from one ORM about its databases.
type ORM[DB any] struct {
	// Sequences returns the registry the IDs of elem's rows are drawn from
	// and elem's columns that take IDs from a sequence; an error in elem's
	// tags is the one filling the rows would return.
	Sequences func(elem reflect.Type) (engine.Provider, []idgen.Column, error)
	// Floor returns the Floor of c's sequence in shard s's table, read
	// through db: the largest ID in c's column, 0 while the table does not
	// exist.
	Floor func(db *DB, s sharding.Shard, c idgen.Column) engine.Floor
	// Database returns db's connection pool and the [Identity] of the
	// database it reaches ([PoolIdentity]).
	Database func(db *DB) (pool any, ident string, err error)
	// Dialect names db's SQL dialect: "mysql", "postgres", "sqlite" or
	// another driver's name.
	Dialect func(db *DB) string
}

// Table is what statements run on every shard write for the physical
// table: "DELETE FROM {table} WHERE ...".
const Table = "{table}"

// New checks the databases, the router and the settings (at most one
// value); pkg names the constructor in errors ("shardgorm.New").
func New[DB any](pkg string, dbs []*DB, r *sharding.Router, settings []sharding.Settings, orm ORM[DB]) (*Base[DB], error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{engine.ErrInvalidConfig, pkg}, args...)...)
	}
	var s sharding.Settings
	switch len(settings) {
	case 0:
	case 1:
		s = settings[0]
	default:
		return nil, bad("%d Settings values given, want at most one", len(settings))
	}
	if s.BatchSize < 0 {
		return nil, bad("Settings.BatchSize is %d (want at least 1, or 0 for %d)", s.BatchSize, idgen.DefaultBatchSize)
	}
	if s.BatchSize == 0 {
		s.BatchSize = idgen.DefaultBatchSize
	}
	if s.Parallel < 0 {
		return nil, bad("Settings.Parallel is %d (want at least 1, or 0 for %d)", s.Parallel, DefaultParallel)
	}
	if s.Parallel == 0 {
		s.Parallel = DefaultParallel
	}
	if r == nil {
		return nil, bad("the router is nil")
	}
	if _, err := r.Route(0); errors.Is(err, engine.ErrInvalidConfig) && strings.Contains(err.Error(), "zero Router") {
		return nil, bad("%w", err)
	}
	if len(dbs) == 0 {
		return nil, bad("needs at least one database")
	}
	idents, pools := make([]string, len(dbs)), make([]any, len(dbs))
	seen := map[any]int{}
	for i, db := range dbs {
		if db == nil {
			return nil, bad("database %d is nil", i)
		}
		// One database reached through two pools is one all the same:
		// its shards' tables would be one table each.
		pool, ident, err := orm.Database(db)
		if err != nil {
			return nil, fmt.Errorf("%s: database %d: asking which database it is: %w", pkg, i, err)
		}
		idents[i], pools[i] = ident, pool
		id := pool // a database without an identity is its pool's
		if idents[i] != "" {
			id = idents[i]
		}
		if j, ok := seen[id]; ok {
			what := "one connection pool"
			if idents[i] != "" {
				what = "one database, " + idents[i]
			}
			return nil, bad("databases %d and %d are %s: give each database once", j, i, what)
		}
		seen[id] = i
	}
	if err := usesAll(r, len(dbs)); err != nil {
		return nil, bad("%w", err)
	}
	if err := ownerResidues(r, s); err != nil {
		return nil, bad("Settings.OwnerResidues: %w", err)
	}
	b := &Base[DB]{Router: r, DBs: dbs, Settings: s, orm: orm, idents: idents, pools: pools}
	if shards, err := r.Shards(); err == nil {
		b.order = make(map[sharding.Shard]int, len(shards))
		for i, s := range shards {
			b.order[s] = i
		}
	}
	return b, nil
}

// usesAll checks that the router puts shards in every one of n databases
// and in no other: a database left unused is a configuration mistake, not
// a spare.
func usesAll(r *sharding.Router, n int) error {
	shards, err := r.Shards()
	if err != nil {
		// Only an interval router cannot list its shards, and it puts
		// every table in one database.
		if n != 1 {
			return fmt.Errorf("the interval router uses 1 database, %d were given", n)
		}
		return nil
	}
	return coversAll(shards, n)
}

// ownerResidues checks s.OwnerResidues against the router: owner-keyed IDs
// need a shard key, and rules under which an ID routes like its owner,
// which a sample of owners (every residue, up to 4,096) shows.
func ownerResidues(r *sharding.Router, s sharding.Settings) error {
	m := s.OwnerResidues
	switch {
	case m == 0:
		return nil
	case m < 0:
		return fmt.Errorf("%d (want at least 1, or 0 for plain IDs)", m)
	case s.ShardKey == "":
		return fmt.Errorf("owner-keyed IDs route like the row's owner: set Settings.ShardKey to the owner's field")
	}
	shards, err := r.Shards()
	if err != nil {
		return fmt.Errorf("owner-keyed IDs need a Mod router: %w", err)
	}
	if m%len(shards) != 0 {
		return fmt.Errorf("%d is not a multiple of the router's %d shards, so IDs would not route like their owners", m, len(shards))
	}
	for owner := int64(1); owner <= int64(min(m, 4096)); owner++ {
		for _, value := range []int64{1, 7} {
			if _, err := r.OwnerID(owner, value, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// coversAll checks that shards lie in every one of n databases and in no
// other.
func coversAll(shards []sharding.Shard, n int) error {
	used := make([]bool, 0, n)
	for _, s := range shards {
		for s.Database >= len(used) {
			used = append(used, false)
		}
		used[s.Database] = true
	}
	if len(used) != n {
		return fmt.Errorf("the router uses %d databases, %d were given", len(used), n)
	}
	if i := slices.Index(used, false); i >= 0 {
		return fmt.Errorf("the router lists no shard in database %d of %d", i, n)
	}
	return nil
}

// IsNil reports whether v is nil or a nil pointer, map, slice, func or
// channel in an interface: a typed nil that would panic on first use.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Ready checks a call of a repository's method named call
// ("shardgorm.Repository.Get"): ctx is set, and b, the repository's
// state, was made by New (a zero Repository has none). Either fault
// wraps engine.ErrInvalidConfig.
func Ready[DB any](ctx context.Context, b *Base[DB], call string) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: %s: nil context: pass context.Background() or a context of yours", engine.ErrInvalidConfig, call)
	case b == nil:
		return fmt.Errorf("%w: %s on a zero or nil Repository: make it with New", engine.ErrInvalidConfig, call)
	}
	return nil
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

// InDatabase checks that tx, a caller's transaction given for key's
// shard s, is on s's database: its [Identity] is the database's. A
// database whose identity is unknown is taken on trust.
func (b *Base[DB]) InDatabase(ctx context.Context, key int64, s sharding.Shard, tx Querier) error {
	want := b.idents[s.Database]
	if want == "" {
		return nil
	}
	got, err := Identity(ctx, tx, b.orm.Dialect(b.DBs[s.Database]))
	if err != nil {
		return fmt.Errorf("sharding: In(%d, tx): asking which database tx is on: %w", key, err)
	}
	if got != want {
		return fmt.Errorf("%w: In(%d, tx): tx is a transaction of %s, not of %s's %s", sharding.ErrWrongShard, key, got, s, want)
	}
	return nil
}

// idle is how many idle connections database i's pool holds, plus one:
// how many times a BEGIN that lost its connection is tried again.
func (b *Base[DB]) idle(i int) int {
	if p, ok := b.pools[i].(*sql.DB); ok {
		return p.Stats().Idle + 1
	}
	return 1
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
	p, cols, err := b.orm.Sequences(elem)
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
			parts = append(parts, part{s, b.orm.Floor(db, s, c)})
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

// ForOne calls fn for shard s with in, a caller's transaction on its
// database: the fan-out of a repository bound to one shard by In.
func (b *Base[DB]) ForOne(ctx context.Context, s sharding.Shard, in *DB, fn func(s sharding.Shard, db *DB) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fn(s, in); err != nil {
		return fmt.Errorf("sharding: shard %s: %w", s, err)
	}
	return nil
}

// Exec runs query, which must name the table {table}, in every shard
// through exec, which gets the query with the shard's table filled in,
// quoted for the database; with only set, in shard only alone, through
// in, a caller's transaction on only's database.
func (b *Base[DB]) Exec(ctx context.Context, query string, only *sharding.Shard, in *DB, exec func(db *DB, query string) error) error {
	if err := CheckTemplate(query); err != nil {
		return err
	}
	each := func(s sharding.Shard, db *DB) error {
		return exec(db, strings.ReplaceAll(query, Table, Quote(b.orm.Dialect(b.DBs[s.Database]), s.TableName)))
	}
	if only != nil {
		return b.ForOne(ctx, *only, in, each)
	}
	return b.ForEach(ctx, each)
}

// CheckTemplate rejects a statement that does not name {table}: it would
// run on one table the router knows nothing of.
func CheckTemplate(query string) error {
	if !strings.Contains(query, Table) {
		return fmt.Errorf("%w: sharding: statement %q does not name its table %s",
			engine.ErrInvalidConfig, query, Table)
	}
	return nil
}

// Quote quotes a table name the router made (letters, digits, '_', '$',
// and '.' between schema and table) for dialect, each dotted part on its
// own, as GORM quotes the names of its statements: `m0`.`course_1` on
// MySQL, "Course_1" elsewhere. Both repositories write every table name
// quoted, so a name that is a keyword ("order"), starts with a digit or
// has upper case (PostgreSQL folds unquoted names) reaches the same table.
func Quote(dialect, name string) string {
	q := `"`
	if dialect == "mysql" {
		q = "`"
	}
	return q + strings.ReplaceAll(name, ".", q+"."+q) + q
}

// Placeholders is the most bind parameters one statement may carry on
// dialect: 65,535 on MySQL/MariaDB and PostgreSQL, SQLite's default
// 32,766 on SQLite and on any driver not known here.
func Placeholders(dialect string) int {
	switch dialect {
	case "mysql", "postgres":
		return 65535
	}
	return 32766
}

// PerStatement is how many rows of cols columns one INSERT carries: the
// batch size, cut shorter when the bind parameters would pass limit.
func PerStatement(batch, cols, limit int) int {
	return max(1, min(batch, limit/max(cols, 1)))
}

// Find routes key and runs find on its shard. An error notFound recognises
// is wrapped with [sharding.ErrNotFound] as well. A key routing outside
// only (when set) wraps [sharding.ErrWrongShard].
func (b *Base[DB]) Find(key int64, only *sharding.Shard, find func(db *DB, s sharding.Shard) error, notFound func(error) bool) error {
	if key == 0 {
		return fmt.Errorf("%w: sharding: find key 0: no row is stored under 0, the value of an unset key", engine.ErrInvalidID)
	}
	db, s, err := b.Route(key)
	if err != nil {
		return err
	}
	if err := Within(only, s, "key", key); err != nil {
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

// Within checks that shard s, where what key routes, is only (when set).
func Within(only *sharding.Shard, s sharding.Shard, what string, key int64) error {
	if only == nil || *only == s {
		return nil
	}
	return fmt.Errorf("%w: %s %d routes to %s, outside %s this handle is bound to", sharding.ErrWrongShard, what, key, s, *only)
}

// Plan is what Create knows of one row type.
type Plan struct {
	// Key reads a row's shard key, ID its integer primary key, by which
	// rows already stored are found; ID is nil for a row type without one
	// (a shard key need not be unique), whose rows are never skipped.
	Key, ID func(row reflect.Value) (int64, error)
	// SetID writes a row's integer primary key: the owner-keyed ID
	// composed from the value drawn ([sharding.Settings.OwnerResidues]).
	SetID func(row reflect.Value, id int64) error
	// KeyIsID reports that the shard key is the primary key.
	KeyIsID bool
	// Columns counts the columns one row binds in an INSERT.
	Columns int
}

// Conn is one shard part's transaction, or its savepoint inside a caller's
// transaction ([Savepoint]).
type Conn struct {
	// Stored returns the IDs of ids stored in the shard's table.
	Stored func(ids []int64) ([]int64, error)
	// Insert writes rows, a []*T, in one statement.
	Insert           func(rows any) error
	Commit, Rollback func() error
}

// Savepoint opens a savepoint with exec, in a caller's transaction, and
// returns c committing and rolling back to it, so the part is
// all-or-nothing and a failed one leaves the caller's transaction usable.
// Each savepoint has a name of its own: a part's associations are parts
// too, nested in it, and MySQL replaces a savepoint of the same name
// where PostgreSQL and SQLite stack them.
func Savepoint(exec func(query string) error, c Conn) (Conn, error) {
	name := fmt.Sprintf("idforge_part_%x", rand.Uint64())
	if err := exec("SAVEPOINT " + name); err != nil {
		return Conn{}, err
	}
	c.Commit = func() error { return exec("RELEASE SAVEPOINT " + name) }
	c.Rollback = func() error {
		return errors.Join(exec("ROLLBACK TO SAVEPOINT "+name), exec("RELEASE SAVEPOINT "+name))
	}
	return c, nil
}

// Rows is what a Create needs from the ORM, for one call.
type Rows[DB any] struct {
	// Plan checks the row type elem (its shard key exists and is an
	// integer) before any ID is drawn.
	Plan func(elem reflect.Type) (Plan, error)
	// Fill gives value's rows their IDs.
	Fill func(value any) error
	// Begin opens the transaction of shard s's part on db.
	Begin func(db *DB, s sharding.Shard) (Conn, error)
	// Only, when set, is the one shard the rows may go to: a caller's
	// transaction is on it, and Begin opens a savepoint in it.
	Only *sharding.Shard
	// Single refuses rows of several shards before anything is written:
	// a caller's transaction not yet on a shard will hold one.
	Single bool
}

// Create fills the IDs of value (a pointer to a struct, or a slice or array
// of structs or of pointers), after adding the Floors of its row type
// ([Base.AddFloors]), routes every row by its shard key, and writes each
// shard's part, by database then table, in a transaction of its own: rows
// whose ID was set before the call and is found stored are skipped (an
// earlier Create wrote them), the others inserted in statements of
// [PerStatement] rows. A nil row wraps [engine.ErrInvalidData]; a row of
// another shard than orm.Only wraps [sharding.ErrWrongShard], before
// anything is written; a failed part is a *[sharding.ShardError].
func (b *Base[DB]) Create(value any, orm Rows[DB]) error {
	rows, elem, err := rowsOf(value)
	if err != nil || len(rows) == 0 {
		return err
	}
	plan, err := orm.Plan(elem)
	if err != nil {
		return err
	}
	residues := b.Settings.OwnerResidues
	if residues > 0 && (plan.ID == nil || plan.KeyIsID) {
		return fmt.Errorf("%w: sharding: %s: Settings.OwnerResidues composes the integer primary key from the shard key %s; "+
			"the rows need an integer primary key that is not the shard key", engine.ErrInvalidConfig, elem, b.Settings.ShardKey)
	}
	if err := b.AddFloors(elem); err != nil {
		return err
	}
	held := make([]bool, len(rows))
	for i, row := range rows {
		if plan.ID == nil {
			break
		}
		id, err := plan.ID(row)
		if err != nil {
			return fmt.Errorf("sharding: row %d: %w", i, err)
		}
		held[i] = id != 0
	}
	if err := orm.Fill(value); err != nil {
		return err
	}
	var id func(reflect.Value) (int64, error)
	if residues > 0 {
		if err := b.compose(rows, held, plan); err != nil {
			return err
		}
		id = plan.ID
	}
	groups, err := b.split(rows, plan.Key, id, orm.Only)
	if err != nil {
		return err
	}
	if orm.Single && len(groups) > 1 {
		return fmt.Errorf("%w: sharding: the rows go to %d shards (%s, %s, ...), and a transaction holds one: nothing was written",
			sharding.ErrWrongShard, len(groups), groups[0].Shard, groups[1].Shard)
	}
	var written []int
	for k, g := range groups {
		stored, err := b.write(g, elem, plan, orm, held)
		if err != nil {
			// The rows of the part an earlier Create stored are written
			// all the same: the rollback took back only this call's. So
			// are those of the parts not tried.
			written = append(written, stored...)
			for _, rest := range groups[k+1:] {
				written = append(written, b.storedBefore(rest, plan, orm, held)...)
			}
			slices.Sort(written)
			rest := slices.DeleteFunc(slices.Clone(g.Rows), func(i int) bool { return slices.Contains(stored, i) })
			return &sharding.ShardError{Rows: rest, Written: written, Err: fmt.Errorf("%s: %w", g.Shard, err)}
		}
		written = append(written, g.Rows...)
	}
	return nil
}

// compose turns the value drawn for each row's ID into its owner-keyed
// ID ([sharding.Router.OwnerID]); rows whose ID was held before the call
// keep it (split checks that it routes like its owner).
func (b *Base[DB]) compose(rows []reflect.Value, held []bool, plan Plan) error {
	for i, row := range rows {
		if held[i] {
			continue
		}
		owner, err := plan.Key(row)
		if err != nil || owner == 0 {
			continue // split names the row
		}
		value, err := plan.ID(row)
		if err != nil {
			return fmt.Errorf("sharding: row %d: %w", i, err)
		}
		if value == 0 {
			return fmt.Errorf("%w: sharding: row %d: no ID was drawn to compose its owner-keyed ID from: tag the ID field (`idgen:\"snowflake\"`)",
				engine.ErrInvalidID, i)
		}
		id, err := b.Router.OwnerID(owner, value, b.Settings.OwnerResidues)
		if err != nil {
			return fmt.Errorf("sharding: row %d: %w", i, err)
		}
		if err := plan.SetID(row, id); err != nil {
			return fmt.Errorf("sharding: row %d: %w", i, err)
		}
	}
	return nil
}

// write stores one shard's part: all of it, or none. It returns the
// positions of the part's rows found stored by an earlier Create, which
// stay stored whatever becomes of the part.
func (b *Base[DB]) write(g *group, elem reflect.Type, plan Plan, orm Rows[DB], held []bool) ([]int, error) {
	db := b.DBs[g.Shard.Database]
	limit := Placeholders(b.orm.Dialect(db))
	conn, err := orm.Begin(db, g.Shard)
	// A pooled connection the server ended fails at BEGIN, where nothing
	// ran: begin again. Each failure discards one dead connection, so
	// once the idle ones are tried the pool opens a fresh one.
	for tries := b.idle(g.Shard.Database); err != nil && orm.Only == nil && ConnLost(err) && tries > 0; tries-- {
		conn, err = orm.Begin(db, g.Shard)
	}
	if err != nil {
		return nil, err
	}
	rows, stored, err := unstored(conn, g, plan, held, limit)
	if err != nil {
		_ = conn.Rollback()
		return nil, err
	}
	per := PerStatement(b.Settings.BatchSize, plan.Columns, limit)
	for i := 0; i < len(rows); i += per {
		part := rows[i:min(i+per, len(rows))]
		if err := conn.Insert(pointers(elem, part)); err != nil {
			_ = conn.Rollback()
			return stored, fmt.Errorf("statement %d of %d (%d rows): %w", i/per+1, (len(rows)+per-1)/per, len(part), err)
		}
	}
	if err := conn.Commit(); err != nil {
		if orm.Only != nil || Refused(err) {
			// The caller's transaction decides; or the server refused
			// the COMMIT, and rolled the part back.
			return stored, fmt.Errorf("commit: %w", err)
		}
		return stored, fmt.Errorf("%w: commit: %w", sharding.ErrOutcomeUnknown, err)
	}
	return stored, nil
}

// storedBefore returns the positions of g's rows that an earlier Create
// stored, for the ShardError of a Create that stopped before g: one read
// of the IDs they held before the call, in a transaction rolled back,
// and none when that read fails too.
func (b *Base[DB]) storedBefore(g *group, plan Plan, orm Rows[DB], held []bool) []int {
	if !slices.ContainsFunc(g.Rows, func(i int) bool { return held[i] }) {
		return nil
	}
	db := b.DBs[g.Shard.Database]
	conn, err := orm.Begin(db, g.Shard)
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Rollback() }()
	_, stored, err := unstored(conn, g, plan, held, Placeholders(b.orm.Dialect(db)))
	if err != nil {
		return nil
	}
	return stored
}

// unstored returns the part's rows but those whose ID was held before the
// call and is stored in the shard already, and the positions of those.
func unstored(conn Conn, g *group, plan Plan, held []bool, limit int) ([]reflect.Value, []int, error) {
	var ids []int64
	for i, row := range g.rows {
		if held[g.Rows[i]] {
			id, _ := plan.ID(row) // read before filling without error
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return g.rows, nil, nil
	}
	stored := map[int64]bool{}
	for i := 0; i < len(ids); i += limit {
		found, err := conn.Stored(ids[i:min(i+limit, len(ids))])
		if err != nil {
			return nil, nil, fmt.Errorf("reading which rows are stored: %w", err)
		}
		for _, id := range found {
			stored[id] = true
		}
	}
	if len(stored) == 0 {
		return g.rows, nil, nil
	}
	var out []reflect.Value
	var skipped []int
	for i, row := range g.rows {
		if id, _ := plan.ID(row); !held[g.Rows[i]] || !stored[id] {
			out = append(out, row)
		} else {
			skipped = append(skipped, g.Rows[i])
		}
	}
	return out, skipped, nil
}

// group is the rows of one shard, in input order.
type group struct {
	Shard sharding.Shard
	Rows  []int // positions in the value given to Create
	rows  []reflect.Value
}

// split routes every row by key and groups the rows by shard, ordered by
// database then table (as the router lists them, else by name), so a failure leaves a predictable set of
// shards written. With ownerID set (owner-keyed IDs), every row's ID must
// route to its key's shard.
func (b *Base[DB]) split(rows []reflect.Value, key, ownerID func(row reflect.Value) (int64, error), only *sharding.Shard) ([]*group, error) {
	byShard := map[sharding.Shard]*group{}
	var out []*group
	for i, row := range rows {
		id, err := key(row)
		if err != nil {
			return nil, fmt.Errorf("sharding: row %d: %w", i, err)
		}
		if id == 0 {
			if b.Settings.ShardKey != "" {
				return nil, fmt.Errorf("%w: sharding: row %d: its shard key %s is 0: set it before Create (only ID fields are filled)",
					engine.ErrInvalidID, i, b.Settings.ShardKey)
			}
			return nil, fmt.Errorf("%w: sharding: row %d has no ID to route by after filling: tag the field "+
				"(`idgen:\"snowflake\"`) or set it", engine.ErrInvalidID, i)
		}
		_, s, err := b.Route(id)
		if err != nil {
			return nil, fmt.Errorf("sharding: row %d: %w", i, err)
		}
		if ownerID != nil {
			if err := b.routesLike(i, row, ownerID, id); err != nil {
				return nil, err
			}
		}
		if err := Within(only, s, fmt.Sprintf("row %d with key", i), id); err != nil {
			return nil, err
		}
		g := byShard[s]
		if g == nil {
			g = &group{Shard: s}
			byShard[s] = g
			out = append(out, g)
		}
		g.Rows = append(g.Rows, i)
		g.rows = append(g.rows, row)
	}
	slices.SortFunc(out, func(x, y *group) int {
		return cmp.Or(cmp.Compare(x.Shard.Database, y.Shard.Database),
			cmp.Compare(b.order[x.Shard], b.order[y.Shard]), cmp.Compare(x.Shard.TableName, y.Shard.TableName))
	})
	return out, nil
}

// routesLike checks that row i's ID carries its owner's residue
// ([Residue]), so that it routes to s, its owner's shard, now and once
// shards are added.
func (b *Base[DB]) routesLike(i int, row reflect.Value, ownerID func(reflect.Value) (int64, error), owner int64) error {
	id, err := ownerID(row)
	if err != nil {
		return fmt.Errorf("sharding: row %d: %w", i, err)
	}
	return Residue(fmt.Sprintf("row %d", i), id, owner, int64(b.Settings.OwnerResidues))
}

// Residue checks that id, the owner-keyed ID of row what, carries the
// residue of its owner mod m ([sharding.Settings.OwnerResidues]): one
// of another residue may route with its owner over today's shards, but
// not over the counts the residues allow to grow to. The error wraps
// [sharding.ErrWrongShard] and engine.ErrInvalidID.
func Residue(what string, id, owner, m int64) error {
	if id%m == owner%m {
		return nil
	}
	return fmt.Errorf("%w: %w: sharding: %s: id %d has residue %d mod %d, its owner %d has %d, so it does not route with its owner "+
		"(once shards are added if not now): leave the ID 0 and Create composes an owner-keyed one",
		sharding.ErrWrongShard, engine.ErrInvalidID, what, id, id%m, m, owner, owner%m)
}

// pointers returns a []*T of the rows' addresses, for the drivers to insert
// and write back into.
func pointers(elem reflect.Type, rows []reflect.Value) any {
	s := reflect.MakeSlice(reflect.SliceOf(reflect.PointerTo(elem)), len(rows), len(rows))
	for i, row := range rows {
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
	return fmt.Errorf("%w: model %s: shard key %s is a %s; routing needs an integer field (Settings.ShardKey picks another)",
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

// SetKeyValue writes id into v, an integer field or a pointer to one (a
// nil pointer gets a new integer).
func SetKeyValue(v reflect.Value, id int64) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.OverflowInt(id) {
			return fmt.Errorf("%w: id %d does not fit a %s", engine.ErrInvalidID, id, v.Type())
		}
		v.SetInt(id)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if id < 0 || v.OverflowUint(uint64(id)) {
			return fmt.Errorf("%w: id %d does not fit a %s", engine.ErrInvalidID, id, v.Type())
		}
		v.SetUint(uint64(id))
	default:
		return fmt.Errorf("%w: an ID cannot be written into a %s", engine.ErrInvalidConfig, v.Type())
	}
	return nil
}
