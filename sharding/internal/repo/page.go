package repo

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// order is a page's order: a column (the ID when nil) and its direction;
// the ID breaks ties in the same direction.
type order struct {
	col  *Col
	desc bool
}

// orderOf parses Query.Order: a column and an optional ASC or DESC.
func orderOf(src string, m *Model) (order, error) {
	if m.ID == nil {
		return order{}, fmt.Errorf("%w: sharding: Page: model %s has no integer primary key to order ties and page by", engine.ErrInvalidConfig, m.Name)
	}
	f := strings.Fields(src)
	var o order
	switch {
	case len(f) == 0 && src == "":
		return o, nil
	case len(f) == 0:
		return o, fmt.Errorf("%w: sharding: Query.Order %q is blank: want it empty (by ID) or a column, optionally followed by ASC or DESC", engine.ErrInvalidConfig, src)
	case len(f) == 2 && strings.EqualFold(f[1], "DESC"):
		o.desc = true
	case len(f) == 2 && strings.EqualFold(f[1], "ASC"):
	case len(f) != 1:
		return o, fmt.Errorf("%w: sharding: Query.Order %q: want a column, optionally followed by ASC or DESC", engine.ErrInvalidConfig, src)
	}
	c := m.Column(f[0])
	if c == nil {
		return o, fmt.Errorf("%w: sharding: Query.Order %q: model %s has no column %q", engine.ErrInvalidConfig, src, m.Name, f[0])
	}
	if !orderable(c.Type) {
		return o, fmt.Errorf("%w: sharding: Query.Order %q: column %s is a %s; pages are merged by integer or time columns "+
			"(text would be compared in Go, not in the database's collation)", engine.ErrInvalidConfig, src, c.Name, c.Type)
	}
	if c.Name != m.ID.Name {
		o.col = c
	}
	return o, nil
}

var timeType = reflect.TypeFor[time.Time]()

// orderable reports whether the merge can compare values of t as the
// database orders them: integers and times, not NULL.
func orderable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return t == timeType
}

// sortKey is a row's place in a page: its order value and its ID.
type sortKey struct {
	n  int64
	u  uint64
	t  time.Time
	id int64
}

func (k sortKey) compare(o sortKey) int {
	return cmp.Or(cmp.Compare(k.n, o.n), cmp.Compare(k.u, o.u), k.t.Compare(o.t), cmp.Compare(k.id, o.id))
}

// key reads row's sortKey, and the order value as the database gets it.
func (o order) key(m *Model, row reflect.Value) (sortKey, any, error) {
	row = reflect.Indirect(row)
	id, err := KeyValue(m.ID.Get(row))
	if err != nil {
		return sortKey{}, nil, err
	}
	k := sortKey{id: id}
	if o.col == nil {
		return k, id, nil
	}
	v := o.col.Get(row)
	switch {
	case v.Type() == timeType:
		k.t = v.Interface().(time.Time)
	case v.CanInt():
		k.n = v.Int()
	default:
		k.u = v.Uint()
	}
	return k, v.Interface(), nil
}

// sql writes the ORDER BY clause.
func (o order) sql(dialect string, m *Model) string {
	dir := ""
	if o.desc {
		dir = " DESC"
	}
	id := Quote(dialect, m.ID.Name) + dir
	if o.col == nil {
		return id
	}
	return Quote(dialect, o.col.Name) + dir + ", " + id
}

// after adds the keyset condition: rows past (v, id) in the order,
// written c >= v AND (c > v OR id > id) so that the databases seek an
// index on (c, id) to v instead of scanning it from the start.
func (o order) after(w *where, m *Model, v any, id int64) {
	op, eq := " > ?", " >= ?"
	if o.desc {
		op, eq = " < ?", " <= ?"
	}
	if o.col == nil {
		w.add(w.col(m.ID.Name)+op, id)
		return
	}
	c := w.col(o.col.Name)
	w.add(c+eq, v)
	w.add(c+op+" OR "+w.col(m.ID.Name)+op, v, id)
}

// Page reads into dest (a pointer to a slice of m's rows or of pointers)
// the rows q selects over the shards it reaches, ordered by q.Order and
// the ID, after q.After, at most q.Limit. The shards are read by sources
// ([Base.sources]: a shard, or a database's shards in one statement),
// Settings.Parallel at once, and the sources' ordered lists are merged
// (k-way, by a heap) until the page is full. With a limit, each source is
// first asked for its share of the page and a margin ([share]); a source
// that returned all it was asked for and whose last row lies before the
// page's last may hold more of the page, and is asked again, after its
// last row, for as many rows as the page may still need of it: every row
// read up to that last row is in the page. At most two rounds, and every
// row of the page is read.
func (b *Base[DB]) Page(ctx context.Context, q sharding.Query, dest any, m *Model, only *sharding.Shard, st Stmts[DB]) error {
	out, _, err := SliceOf("Page", dest)
	if err != nil {
		return err
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: sharding: Query.Limit is %d (want 0 for no limit, or more)", engine.ErrInvalidConfig, q.Limit)
	}
	o, err := orderOf(q.Order, m)
	if err != nil {
		return err
	}
	var keyset func(w *where)
	if q.After != nil {
		row := reflect.ValueOf(q.After)
		if row.Kind() == reflect.Pointer && !row.IsNil() {
			row = row.Elem()
		}
		if row.Type() != m.Elem {
			return fmt.Errorf("%w: sharding: Query.After is a %T; want the last row of the previous page, a %s", engine.ErrInvalidConfig, q.After, m.Elem)
		}
		k, v, err := o.key(m, row)
		if err != nil {
			return err
		}
		keyset = func(w *where) { o.after(w, m, v, k.id) }
	}
	ts, err := b.targets(&q, m, only)
	if err != nil {
		return err
	}
	conds := make([]Cond, len(ts))
	for i, t := range ts {
		if conds[i], err = b.cond(&q, m, t, keyset); err != nil {
			return err
		}
	}
	srcs := b.sources(ts, only, st)
	asked := q.Limit
	if q.Limit > 0 {
		asked = share(q.Limit, len(srcs))
	}
	lists := make([]reflect.Value, len(srcs))
	keys := make([][]sortKey, len(srcs))
	lasts := make([]any, len(srcs)) // each list's last order value
	got := func(si int, list reflect.Value) error {
		for j := range list.Len() {
			k, v, err := o.key(m, list.Index(j))
			if err != nil {
				return err
			}
			keys[si], lasts[si] = append(keys[si], k), v
		}
		if lists[si].IsValid() {
			list = reflect.AppendSlice(lists[si], list)
		}
		lists[si] = list
		return nil
	}
	all := make([]int, len(srcs))
	limits := make([]int, len(srcs))
	for si := range srcs {
		all[si], limits[si] = si, asked
	}
	if err := b.read(ctx, ts, srcs, all, conds, limits, o, m, st, out.Type(), got); err != nil {
		return err
	}
	page, last := merge(out.Type(), lists, keys, o.desc, q.Limit)
	if asked < q.Limit {
		// Sources that may hold more of the page: all they were asked for
		// came back, and their last row lies before the page's last.
		var again []int
		for si, ks := range keys {
			if len(ks) == asked && (page.Len() < q.Limit || o.before(ks[len(ks)-1], last)) {
				k, v := ks[len(ks)-1], lasts[si]
				for _, i := range srcs[si] {
					if conds[i], err = b.cond(&q, m, ts[i], func(w *where) { o.after(w, m, v, k.id) }); err != nil {
						return err
					}
				}
				// Every row read up to k is in the page: the source's
				// rows after k fill at most what is left of it.
				again, limits[si] = append(again, si), q.Limit-o.upTo(keys, k)
			}
		}
		if len(again) > 0 {
			if err := b.read(ctx, ts, srcs, again, conds, limits, o, m, st, out.Type(), got); err != nil {
				return err
			}
			page, _ = merge(out.Type(), lists, keys, o.desc, q.Limit)
		}
	}
	out.Set(page)
	return nil
}

// sources groups the targets into what one statement reads: on MySQL and
// PostgreSQL, with the ORM's SelectShards, all the shards of one database
// (UNION ALL, ordered and cut by the database: one round trip per
// database, the database merging its own tables); elsewhere, one shard
// each (SQLite's UNION ALL of ordered subqueries is slower than reading
// them one by one).
func (b *Base[DB]) sources(ts []target, only *sharding.Shard, st Stmts[DB]) [][]int {
	var out [][]int
	byDB := map[int]int{}
	for i, t := range ts {
		d := b.dialect(t.shard)
		if st.SelectShards == nil || only != nil || d != "mysql" && d != "postgres" {
			out = append(out, []int{i})
			continue
		}
		si, ok := byDB[t.shard.Database]
		if !ok {
			si = len(out)
			byDB[t.shard.Database] = si
			out = append(out, nil)
		}
		out[si] = append(out[si], i)
	}
	return out
}

// read reads the sources which, Settings.Parallel at a time: for each, the
// rows of its shards matching their conds, in the order o, at most
// limits[si] of them, handed to got(si, rows) in that order (calls for
// different sources may run at once). A database whose one statement
// fails is read again shard by shard, so that the error names the shards
// that failed; the error of one shard names it, and failures over several
// make a *[sharding.FanoutError].
func (b *Base[DB]) read(ctx context.Context, ts []target, srcs [][]int, which []int, conds []Cond, limits []int, o order, m *Model,
	st Stmts[DB], slice reflect.Type, got func(si int, rows reflect.Value) error) error {
	errs := make([]error, len(ts))
	one := func(ctx context.Context, i, limit int) (reflect.Value, error) {
		rows := reflect.New(slice)
		s := ts[i].shard
		err := st.Select(ctx, b.DBs[s.Database], s, conds[i], o.sql(b.dialect(s), m), limit, rows.Interface())
		return rows.Elem(), err
	}
	serrs := b.run(ctx, len(which), func(ctx context.Context, j int) error {
		si := which[j]
		is, limit := srcs[si], limits[si]
		if len(is) == 1 {
			rows, err := one(ctx, is[0], limit)
			if err != nil {
				errs[is[0]] = err
				return err
			}
			return got(si, rows)
		}
		s0 := ts[is[0]].shard
		parts := make([]Part, len(is))
		for k, i := range is {
			parts[k] = Part{Shard: ts[i].shard, Where: conds[i], Order: o.sql(b.dialect(s0), m), Limit: limit}
		}
		rows := reflect.New(slice)
		if err := st.SelectShards(ctx, b.DBs[s0.Database], parts, parts[0].Order, limit, rows.Interface()); err == nil {
			return got(si, rows.Elem())
		}
		// Shard by shard: which failed, and the page of those that did not.
		lists := make([]reflect.Value, len(is))
		keys := make([][]sortKey, len(is))
		failed := false
		for k, i := range is {
			if lists[k], errs[i] = one(ctx, i, limit); errs[i] != nil {
				failed = true
				continue
			}
			for r := range lists[k].Len() {
				key, _, err := o.key(m, lists[k].Index(r))
				if err != nil {
					return err
				}
				keys[k] = append(keys[k], key)
			}
		}
		if failed {
			return errors.New("failed") // errs names the shards
		}
		merged, _ := merge(slice, lists, keys, o.desc, limit)
		return got(si, merged)
	})
	n := 0
	for j, si := range which {
		n += len(srcs[si])
		if serrs[j] != nil && !slices.ContainsFunc(srcs[si], func(i int) bool { return errs[i] != nil }) {
			for _, i := range srcs[si] {
				errs[i] = serrs[j] // not a statement's: got's, or ctx's
			}
		}
	}
	var sub []target
	var subErrs []error
	for _, si := range which {
		for _, i := range srcs[si] {
			sub, subErrs = append(sub, ts[i]), append(subErrs, errs[i])
		}
	}
	if n == 1 && subErrs[0] != nil {
		return fmt.Errorf("sharding: shard %s: %w", sub[0].shard, subErrs[0])
	}
	return fanoutError(sub, subErrs)
}

// share is how many rows each of n shards is first asked for, for a page
// of limit rows: its even share and a margin of about one standard
// deviation of the count a random spread would give it, plus one.
func share(limit, n int) int {
	if n <= 1 {
		return limit
	}
	even := float64(limit) / float64(n)
	return min(limit, int(math.Ceil(even+math.Sqrt(even)))+1)
}

// upTo counts the rows of keys (lists in order) up to k, k included.
func (o order) upTo(keys [][]sortKey, k sortKey) int {
	n := 0
	for _, ks := range keys {
		n += sort.Search(len(ks), func(j int) bool { return o.before(k, ks[j]) })
	}
	return n
}

// before reports whether a comes before b in the order.
func (o order) before(a, b sortKey) bool {
	c := a.compare(b)
	if o.desc {
		return c > 0
	}
	return c < 0
}

// merge takes the first limit rows (all with 0) of lists, each ordered by
// its keys, in order: a k-way merge. It returns them and the last one's
// key.
func merge(t reflect.Type, lists []reflect.Value, keys [][]sortKey, desc bool, limit int) (reflect.Value, sortKey) {
	total := 0
	h := &cursors{keys: keys, desc: desc}
	for i, ks := range keys {
		total += len(ks)
		if len(ks) > 0 {
			h.at = append(h.at, cursor{list: i})
		}
	}
	if limit == 0 || limit > total {
		limit = total
	}
	heap.Init(h)
	out := reflect.MakeSlice(t, 0, limit)
	var last sortKey
	for out.Len() < limit {
		c := &h.at[0]
		out = reflect.Append(out, lists[c.list].Index(c.pos))
		last = keys[c.list][c.pos]
		if c.pos++; c.pos == len(keys[c.list]) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out, last
}

// cursor is the next row of one shard's list.
type cursor struct{ list, pos int }

// cursors is a heap of the shards' next rows, the first in order on top.
type cursors struct {
	at   []cursor
	keys [][]sortKey
	desc bool
}

func (h *cursors) Len() int { return len(h.at) }
func (h *cursors) Less(i, j int) bool {
	c := h.keys[h.at[i].list][h.at[i].pos].compare(h.keys[h.at[j].list][h.at[j].pos])
	if h.desc {
		return c > 0
	}
	return c < 0
}
func (h *cursors) Swap(i, j int) { h.at[i], h.at[j] = h.at[j], h.at[i] }
func (h *cursors) Push(x any)    { h.at = append(h.at, x.(cursor)) }
func (h *cursors) Pop() any {
	c := h.at[len(h.at)-1]
	h.at = h.at[:len(h.at)-1]
	return c
}

// Count counts the rows q selects over the shards it reaches,
// Settings.Parallel shards at once. Order, Limit and After are refused.
func (b *Base[DB]) Count(ctx context.Context, q sharding.Query, m *Model, only *sharding.Shard, st Stmts[DB]) (int64, error) {
	if q.Order != "" || q.Limit != 0 || q.After != nil {
		return 0, fmt.Errorf("%w: sharding: Count takes Query.Key, IDs, Where and Args; Order, Limit and After are for Page", engine.ErrInvalidConfig)
	}
	ts, err := b.targets(&q, m, only)
	if err != nil {
		return 0, err
	}
	conds := make([]Cond, len(ts))
	for i, t := range ts {
		if conds[i], err = b.cond(&q, m, t, nil); err != nil {
			return 0, err
		}
	}
	var total atomic.Int64
	err = b.fan(ctx, ts, func(ctx context.Context, i int, db *DB) error {
		n, err := st.Count(ctx, db, ts[i].shard, conds[i])
		total.Add(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	return total.Load(), nil
}
