package repo

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// ModelOf returns the row type of model, a pointer to a struct (a
// struct by value is refused, as GORM refuses one: the verbs take the
// model as they take a destination).
func ModelOf(verb string, model any) (reflect.Type, error) {
	t := reflect.TypeOf(model)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: sharding: %s wants the model, a pointer to a struct (&Order{}), got %T", engine.ErrInvalidConfig, verb, model)
	}
	return t.Elem(), nil
}

// cond is q's condition for target t: the shard key, the IDs asked of the
// shard, q.Where, and extra (a keyset condition), joined with AND.
func (b *Base[DB]) cond(q *sharding.Query, m *Model, t target, extra func(w *where)) (Cond, error) {
	w := where{dialect: b.dialect(t.shard)}
	if q.Key != 0 {
		w.add(w.col(m.Key.Name)+" = ?", q.Key)
	}
	if t.ids != nil {
		w.in(m.ID.Name, t.ids)
	}
	if q.Where != "" {
		w.add(q.Where, q.Args...)
	} else if len(q.Args) > 0 {
		return Cond{}, fmt.Errorf("%w: sharding: Query.Args holds %d values but Where is empty", engine.ErrInvalidConfig, len(q.Args))
	}
	if extra != nil {
		extra(&w)
	}
	if limit := Placeholders(w.dialect); len(w.args) > limit {
		return Cond{}, fmt.Errorf("%w: sharding: a query of %d values in shard %s, more than the %d bind parameters the database takes: ask for fewer IDs at a time",
			engine.ErrInvalidConfig, len(w.args), t.shard, limit)
	}
	return w.cond(), nil
}

// writeTargets checks q for an Update or Delete and lists its shards.
func (b *Base[DB]) writeTargets(verb string, q *sharding.Query, m *Model, only *sharding.Shard) ([]target, error) {
	switch {
	case q.Order != "" || q.Limit != 0 || q.After != nil:
		return nil, fmt.Errorf("%w: sharding: %s takes Query.Key, IDs, Where and Args; Order, Limit and After are for Page", engine.ErrInvalidConfig, verb)
	case q.Key == 0 && len(q.IDs) == 0 && q.Where == "":
		return nil, fmt.Errorf("%w: sharding: %s of every row of every shard: give Query.Key, IDs or Where (Exec runs a statement of yours on every shard)",
			engine.ErrInvalidConfig, verb)
	}
	return b.targets(q, m, only)
}

// Update writes set (columns by Go field name or column name, and their
// values) into the rows q selects, in every shard q reaches, one statement
// per shard, Settings.Parallel shards at once. A column that routes rows
// (the shard key, and the ID when IDs route) may only take a value that
// routes to the shard the row is in, else nothing is written and the
// error wraps [sharding.ErrWrongShard]. It returns the rows the databases
// report changed, in the shards that answered.
func (b *Base[DB]) Update(ctx context.Context, q sharding.Query, m *Model, set map[string]any, only *sharding.Shard, st Stmts[DB]) (int64, error) {
	ts, err := b.writeTargets("Update", &q, m, only)
	if err != nil {
		return 0, err
	}
	sets, err := b.sets(&q, m, set, ts)
	if err != nil {
		return 0, err
	}
	return b.change(ctx, &q, m, ts, func(ctx context.Context, db *DB, s sharding.Shard, w Cond) (int64, error) {
		return st.Update(ctx, db, s, w, sets)
	})
}

// Delete deletes the rows q selects in every shard q reaches, one statement
// per shard, Settings.Parallel shards at once, and returns how many the
// shards that answered deleted.
func (b *Base[DB]) Delete(ctx context.Context, q sharding.Query, m *Model, only *sharding.Shard, st Stmts[DB]) (int64, error) {
	ts, err := b.writeTargets("Delete", &q, m, only)
	if err != nil {
		return 0, err
	}
	return b.change(ctx, &q, m, ts, st.Delete)
}

// change runs one statement per target and sums the rows it touched.
func (b *Base[DB]) change(ctx context.Context, q *sharding.Query, m *Model, ts []target,
	stmt func(ctx context.Context, db *DB, s sharding.Shard, w Cond) (int64, error)) (int64, error) {
	conds := make([]Cond, len(ts))
	for i, t := range ts {
		c, err := b.cond(q, m, t, nil)
		if err != nil {
			return 0, err
		}
		conds[i] = c
	}
	var total atomic.Int64
	err := b.fan(ctx, ts, func(ctx context.Context, i int, db *DB) error {
		n, err := stmt(ctx, db, ts[i].shard, conds[i])
		if err == nil {
			total.Add(n)
		}
		return err
	})
	return total.Load(), err
}

// sets checks an Update's columns and orders them by name. A routing
// column's new value must route to every shard written; an owner-keyed
// row's owner or ID must keep the residue its ID carries, which only a
// query by Key tells.
func (b *Base[DB]) sets(q *sharding.Query, m *Model, set map[string]any, ts []target) ([]Set, error) {
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: sharding: Update with no column to set", engine.ErrInvalidConfig)
	}
	out := make([]Set, 0, len(set))
	for name, v := range set {
		c := m.Column(name)
		if c == nil {
			return nil, fmt.Errorf("%w: sharding: model %s has no column %q to update", engine.ErrInvalidConfig, m.Name, name)
		}
		if slices.ContainsFunc(out, func(s Set) bool { return s.Column == c.Name }) {
			return nil, fmt.Errorf("%w: sharding: Update sets column %s twice (%q)", engine.ErrInvalidConfig, c.Name, name)
		}
		isKey, isID := c.Name == m.Key.Name, m.ID != nil && c.Name == m.ID.Name && b.idsRoute(m)
		if isKey || isID {
			if err := b.keepsShard(q, c.Name, v, ts, isKey && !isID); err != nil {
				return nil, err
			}
		}
		out = append(out, Set{Column: c.Name, Value: v})
	}
	slices.SortFunc(out, func(a, c Set) int { return cmp.Compare(a.Column, c.Column) })
	return out, nil
}

// keepsShard checks that v, the new value of routing column col, keeps
// every row written in its shard.
func (b *Base[DB]) keepsShard(q *sharding.Query, col string, v any, ts []target, owner bool) error {
	rv := reflect.ValueOf(v)
	ok := rv.IsValid()
	for ok && rv.Kind() == reflect.Pointer {
		ok = !rv.IsNil()
		if ok {
			rv = rv.Elem()
		}
	}
	if ok {
		ok = KeyKind("", "", rv.Type()) == nil
	}
	if !ok {
		return fmt.Errorf("%w: sharding: Update sets %s, which routes rows, to %v (%T): only an integer can be checked to stay in its shard",
			sharding.ErrWrongShard, col, v, v)
	}
	n, err := KeyValue(rv)
	if err != nil {
		return err
	}
	if m := int64(b.Settings.OwnerResidues); m > 0 {
		if q.Key == 0 || n%m != q.Key%m {
			what := "ID"
			if owner {
				what = "owner"
			}
			return fmt.Errorf("%w: sharding: Update sets %s to %d: an owner-keyed ID carries its owner's residue mod %d, so a new %s must keep it "+
				"(and only an Update by Query.Key tells which it is)", sharding.ErrWrongShard, col, n, m, what)
		}
	}
	_, s, err := b.Route(n)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.shard != s {
			return fmt.Errorf("%w: sharding: Update sets %s to %d, which routes to %s: rows of %s would be left in the wrong shard",
				sharding.ErrWrongShard, col, n, s, t.shard)
		}
	}
	return nil
}
