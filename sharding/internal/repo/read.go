package repo

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// DefaultParallel is how many shards a call over several shards reaches at
// once when [sharding.Settings.Parallel] is 0.
const DefaultParallel = 8

// Col is one column of a row type.
type Col struct {
	// Name is the column's name in SQL.
	Name string
	// Type is the Go field's type.
	Type reflect.Type
	// Get returns the field of row, a struct value of the row type.
	Get func(row reflect.Value) reflect.Value
}

// Model is what the shared reads and writes know of one row type.
type Model struct {
	// Name names the row type in errors.
	Name string
	// Elem is the row type, a struct.
	Elem reflect.Type
	// ID is the integer primary key, nil without one; Key the shard key,
	// which may be the same column.
	ID, Key *Col
	// Column finds a column by its Go field name or its name in SQL; nil
	// if the row type has none.
	Column func(name string) *Col
}

// Cond is an SQL condition with '?' placeholders and its values; an
// empty SQL selects every row.
type Cond struct {
	SQL  string
	Args []any
}

// Set is one column an Update writes and its value.
type Set struct {
	Column string // the column's name in SQL
	Value  any
}

// Stmts runs the statements of the reads and writes over shards on one
// ORM. Each gets the shard's database (an ORM bound to a caller's
// transaction runs them in it instead) and a condition whose column names
// are quoted for the database.
type Stmts[DB any] struct {
	// Select reads into dest, a pointer to a slice of the row type or of
	// pointers to it, the rows of s matching w, ordered by order (SQL, may
	// be empty), at most limit of them (0: all).
	Select func(ctx context.Context, db *DB, s sharding.Shard, w Cond, order string, limit int, dest any) error
	// Count counts the rows of s matching w.
	Count func(ctx context.Context, db *DB, s sharding.Shard, w Cond) (int64, error)
	// Update writes set into the rows of s matching w and returns how
	// many the database reports changed.
	Update func(ctx context.Context, db *DB, s sharding.Shard, w Cond, set []Set) (int64, error)
	// Delete deletes the rows of s matching w and returns how many.
	Delete func(ctx context.Context, db *DB, s sharding.Shard, w Cond) (int64, error)
	// SelectShards, when set, reads several shards of db in one statement
	// (UNION ALL): into dest, as Select, the rows of every part, ordered
	// by order (SQL over the parts' columns), at most limit of them (0:
	// all).
	SelectShards func(ctx context.Context, db *DB, parts []Part, order string, limit int, dest any) error
}

// Part is one shard's share of a statement reading several: its
// condition, order and limit (0: all), as Select takes them.
type Part struct {
	Shard sharding.Shard
	Where Cond
	Order string
	Limit int
}

// target is one shard a call reaches, with the IDs asked of it.
type target struct {
	shard sharding.Shard
	ids   []int64 // nil: no ID condition
}

// SliceOf returns the slice dest points to, settable, and its row type:
// dest must be a pointer to a slice of structs or of pointers to structs.
func SliceOf(verb string, dest any) (reflect.Value, reflect.Type, error) {
	rv := reflect.ValueOf(dest)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Slice {
		return reflect.Value{}, nil, fmt.Errorf("%w: sharding: %s wants a pointer to a slice of structs, got %T", engine.ErrInvalidConfig, verb, dest)
	}
	elem := rv.Elem().Type().Elem()
	if elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	if elem.Kind() != reflect.Struct {
		return reflect.Value{}, nil, fmt.Errorf("%w: sharding: %s wants a pointer to a slice of structs, got %T", engine.ErrInvalidConfig, verb, dest)
	}
	return rv.Elem(), elem, nil
}

// FindDest returns the row type of Find's dest, a pointer to a struct or
// to a slice of structs or of pointers to them, and whether it is a
// slice.
func FindDest(dest any) (elem reflect.Type, many bool, err error) {
	t := reflect.TypeOf(dest)
	if t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Slice {
		_, elem, err := SliceOf("Find", dest)
		return elem, true, err
	}
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, false, fmt.Errorf("%w: sharding: Find wants a pointer to a struct or to a slice of structs, got %T", engine.ErrInvalidConfig, dest)
	}
	return t.Elem(), false, nil
}

// idsRoute reports whether the IDs of m's rows route to their shards:
// rows are routed by their ID, or their IDs are owner-keyed.
func (b *Base[DB]) idsRoute(m *Model) bool {
	return m.ID != nil && (m.Key.Name == m.ID.Name || b.Settings.OwnerResidues > 0)
}

// targets lists the shards q reaches, in the router's order, with the IDs
// asked of each; with only set (a repository bound to a caller's
// transaction), that one shard, and a key or ID of another wraps
// [sharding.ErrWrongShard].
func (b *Base[DB]) targets(q *sharding.Query, m *Model, only *sharding.Shard) ([]target, error) {
	var keyShard *sharding.Shard
	if q.Key != 0 {
		_, s, err := b.Route(q.Key)
		if err != nil {
			return nil, err
		}
		if err := Within(only, s, "key", q.Key); err != nil {
			return nil, err
		}
		keyShard = &s
	}
	if len(q.IDs) == 0 {
		switch {
		case keyShard != nil:
			return []target{{shard: *keyShard}}, nil
		case only != nil:
			return []target{{shard: *only}}, nil
		}
		shards, err := b.Router.Shards()
		if err != nil {
			return nil, err
		}
		out := make([]target, len(shards))
		for i, s := range shards {
			out[i] = target{shard: s}
		}
		return out, nil
	}
	if m.ID == nil {
		return nil, fmt.Errorf("%w: sharding: model %s has no integer primary key to look rows up by", engine.ErrInvalidConfig, m.Name)
	}
	if !b.idsRoute(m) {
		return nil, fmt.Errorf("%w: sharding: model %s: rows are routed by %s, so an ID does not tell its shard: "+
			"set Settings.OwnerResidues so that IDs route like their %s, or select by Key or Where",
			engine.ErrInvalidConfig, m.Name, b.Settings.ShardKey, b.Settings.ShardKey)
	}
	byShard := map[sharding.Shard]*target{}
	seen := make(map[int64]bool, len(q.IDs))
	var out []*target
	for _, id := range q.IDs {
		if id <= 0 {
			return nil, fmt.Errorf("%w: sharding: id %d: IDs are positive", engine.ErrInvalidID, id)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		_, s, err := b.Route(id)
		if err != nil {
			return nil, err
		}
		if err := Within(only, s, "id", id); err != nil {
			return nil, err
		}
		if keyShard != nil && s != *keyShard {
			continue // no row of Key's lives there
		}
		t := byShard[s]
		if t == nil {
			t = &target{shard: s}
			byShard[s] = t
			out = append(out, t)
		}
		t.ids = append(t.ids, id)
	}
	sortShards(b, out, func(t *target) sharding.Shard { return t.shard })
	res := make([]target, len(out))
	for i, t := range out {
		res[i] = *t
	}
	return res, nil
}

// sortShards orders xs by their shards as the router lists them (else by
// database, then table name).
func sortShards[T any, DB any](b *Base[DB], xs []T, shard func(T) sharding.Shard) {
	slices.SortFunc(xs, func(x, y T) int {
		a, c := shard(x), shard(y)
		return cmp.Or(cmp.Compare(a.Database, c.Database), cmp.Compare(b.order[a], b.order[c]), cmp.Compare(a.TableName, c.TableName))
	})
}

// fan calls fn for every target, at most Settings.Parallel at once, each
// with its shard's database. One target's error comes back naming its
// shard; with several, any failure is a *[sharding.FanoutError] listing the
// shards that answered and those that failed. Targets not started when ctx
// ends fail with ctx's error.
func (b *Base[DB]) fan(ctx context.Context, ts []target, fn func(ctx context.Context, i int, db *DB) error) error {
	if len(ts) == 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(ctx, 0, b.DBs[ts[0].shard.Database]); err != nil {
			return fmt.Errorf("sharding: shard %s: %w", ts[0].shard, err)
		}
		return nil
	}
	return fanoutError(ts, b.run(ctx, len(ts), func(ctx context.Context, i int) error {
		return fn(ctx, i, b.DBs[ts[i].shard.Database])
	}))
}

// run calls fn for 0 ≤ i < n, at most Settings.Parallel at once: see
// [Run].
func (b *Base[DB]) run(ctx context.Context, n int, fn func(ctx context.Context, i int) error) []error {
	return Run(ctx, b.Settings.Parallel, n, fn)
}

// Run calls fn for 0 ≤ i < n, at most parallel at once, and returns their
// errors by i; calls not started when ctx ends fail with its error.
func Run(ctx context.Context, parallel, n int, fn func(ctx context.Context, i int) error) []error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(parallel, 1), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = ctx.Err(); errs[i] == nil {
					errs[i] = fn(ctx, i)
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// fanoutError is [FanoutError] over the targets' shards.
func fanoutError(ts []target, errs []error) error {
	return FanoutError(func(i int) sharding.Shard { return ts[i].shard }, errs)
}

// FanoutError is nil when no call failed, else a *[sharding.FanoutError]
// whose errs[i] is the error of shard(i).
func FanoutError(shard func(i int) sharding.Shard, errs []error) error {
	var fe *sharding.FanoutError
	for i, err := range errs {
		if err == nil {
			continue
		}
		if fe == nil {
			fe = &sharding.FanoutError{Failed: map[sharding.Shard]error{}}
		}
		fe.Failed[shard(i)] = err
	}
	if fe == nil {
		return nil
	}
	for i, err := range errs {
		if err == nil {
			fe.Answered = append(fe.Answered, shard(i))
		}
	}
	return fe
}

// dialect is the SQL dialect of shard s's database.
func (b *Base[DB]) dialect(s sharding.Shard) string { return b.orm.Dialect(b.DBs[s.Database]) }

// where builds a condition: parts joined with AND, each in parentheses.
type where struct {
	dialect string
	parts   []string
	args    []any
}

func (w *where) add(sql string, args ...any) {
	w.parts = append(w.parts, "("+sql+")")
	w.args = append(w.args, args...)
}

// col quotes a column name for the dialect.
func (w *where) col(name string) string { return Quote(w.dialect, name) }

// in adds "column IN (?, ...)" for ids.
func (w *where) in(column string, ids []int64) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	w.add(w.col(column)+" IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+")", args...)
}

func (w *where) cond() Cond { return Cond{SQL: strings.Join(w.parts, " AND "), Args: w.args} }

// Get reads the rows whose IDs are ids into dest, a pointer to a slice of
// m's rows or of pointers to them: one query per shard (more only past the
// database's limit on bind parameters), the shards at most
// Settings.Parallel at once; the rows in the order of ids, each once. IDs
// not stored are listed by a *[sharding.MissingError], the rows found in
// dest all the same.
func (b *Base[DB]) Get(ctx context.Context, ids []int64, dest any, m *Model, only *sharding.Shard, st Stmts[DB]) error {
	out, _, err := SliceOf("Get", dest)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		out.Set(reflect.MakeSlice(out.Type(), 0, 0))
		return nil
	}
	ts, err := b.targets(&sharding.Query{IDs: ids}, m, only)
	if err != nil {
		return err
	}
	found := make([]reflect.Value, len(ts))
	err = b.fan(ctx, ts, func(ctx context.Context, i int, db *DB) error {
		t := ts[i]
		rows := reflect.New(out.Type()).Elem()
		limit := Placeholders(b.dialect(t.shard))
		for j := 0; j < len(t.ids); j += limit {
			w := where{dialect: b.dialect(t.shard)}
			w.in(m.ID.Name, t.ids[j:min(j+limit, len(t.ids))])
			part := reflect.New(out.Type())
			if err := st.Select(ctx, db, t.shard, w.cond(), "", 0, part.Interface()); err != nil {
				return err
			}
			rows = reflect.AppendSlice(rows, part.Elem())
		}
		found[i] = rows
		return nil
	})
	if err != nil {
		return err
	}
	byID := make(map[int64]reflect.Value, len(ids))
	for _, rows := range found {
		for j := range rows.Len() {
			row := rows.Index(j)
			id, err := KeyValue(m.ID.Get(reflect.Indirect(row)))
			if err != nil {
				return err
			}
			byID[id] = row
		}
	}
	res := reflect.MakeSlice(out.Type(), 0, len(byID))
	var missing []int64
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if row, ok := byID[id]; ok {
			res = reflect.Append(res, row)
		} else {
			missing = append(missing, id)
		}
	}
	out.Set(res)
	if len(missing) > 0 {
		return &sharding.MissingError{IDs: missing}
	}
	return nil
}
