package shardgorm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/internal/gormids"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// createName is the plugin's create callback, by which register knows a
// database it routes already.
const createName = "idforge:shardgorm_create"

// doneKey marks, per statement (gorm.DB.InstanceSet), a statement whose
// work the plugin did itself: GORM's own step for it is skipped.
const doneKey = "idforge:shardgorm_done"

// register adds the routing callbacks to db's chains and wraps GORM's own
// steps (and the idforge plugin's) so they skip a statement the plugin
// did itself.
func (p *Plugin) register(db *gorm.DB) error {
	cb := db.Callback()
	var errs []error
	skip := func(proc interface {
		Get(string) func(*gorm.DB)
		Replace(string, func(*gorm.DB)) error
	}, names ...string) {
		for _, name := range names {
			if f := proc.Get(name); f != nil {
				errs = append(errs, proc.Replace(name, func(db *gorm.DB) {
					if _, done := db.InstanceGet(doneKey); !done {
						f(db)
					}
				}))
			}
		}
	}
	skip(cb.Create(), "gorm:begin_transaction", "gorm:save_before_associations", "gorm:create", "gorm:save_after_associations",
		fillName)
	skip(cb.Query(), "gorm:query")
	skip(cb.Update(), "gorm:begin_transaction", "gorm:save_before_associations", "gorm:update", "gorm:save_after_associations")
	skip(cb.Delete(), "gorm:begin_transaction", "gorm:delete_before_associations", "gorm:delete")
	skip(cb.Raw(), "gorm:raw")
	errs = append(errs,
		cb.Create().Before("*").Register(createName, p.create),
		cb.Query().Before("gorm:query").Register("idforge:shardgorm_query", p.query),
		cb.Row().Before("gorm:row").Register("idforge:shardgorm_row", p.row),
		cb.Update().Before("*").Register("idforge:shardgorm_update", func(db *gorm.DB) { p.write(db, true) }),
		cb.Delete().Before("*").Register("idforge:shardgorm_delete", func(db *gorm.DB) { p.write(db, false) }),
		cb.Raw().Before("gorm:raw").Register("idforge:shardgorm_raw", func(db *gorm.DB) { p.raw(db, true) }),
	)
	return errors.Join(errs...)
}

// done marks db's statement as done by the plugin.
func done(db *gorm.DB) { db.InstanceSet(doneKey, true) }

// ctxOf is the statement's context.
func ctxOf(db *gorm.DB) context.Context {
	if db.Statement.Context != nil {
		return db.Statement.Context
	}
	return context.Background()
}

// conn is the connection pool a statement of db runs on in shard s: the
// shard's database, or its prepared-statement pool for a statement of a
// PrepareStmt session. In a transaction of the plugin it is the
// transaction, bound to s at its first statement; in a transaction begun
// on one of the databases, that transaction when s is in it. Another
// shard is refused with sharding.ErrWrongShard.
func (p *Plugin) conn(db *gorm.DB, s sharding.Shard) (gorm.ConnPool, error) {
	base := p.g.base.DBs[s.Database]
	cur := db.Statement.ConnPool
	if t := txOf(cur); t != nil {
		return t.bind(base.Statement.ConnPool, &s, "database "+s.DatabaseName)
	}
	if _, ok := cur.(gorm.TxCommitter); ok {
		in, err := (&gorm.DB{Config: &gorm.Config{ConnPool: cur}, Statement: &gorm.Statement{ConnPool: cur}}).DB()
		if err != nil || in != identity(base.Statement.ConnPool) {
			return nil, fmt.Errorf("%w: a statement in a transaction of another database reaches shard %s", sharding.ErrWrongShard, s)
		}
		return cur, nil
	}
	if _, prep := cur.(*gorm.PreparedStmtDB); !prep {
		return base.Statement.ConnPool, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.prepared[s.Database]
	if !ok {
		c = base.Session(&gorm.Session{PrepareStmt: true}).Statement.ConnPool
		p.prepared[s.Database] = c
	}
	return c, nil
}

// on returns a new statement on shard s's database and table carrying
// db's clauses, selections and destination: one shard's part of a
// statement the plugin runs on several.
func (p *Plugin) on(db *gorm.DB, m *pmodel, s sharding.Shard, clauses map[string]clause.Clause) (*gorm.DB, error) {
	st := db.Statement
	c, err := p.conn(db, s)
	if err != nil {
		return nil, err
	}
	tx := p.g.base.DBs[s.Database].Session(&gorm.Session{NewDB: true, Context: ctxOf(db), SkipHooks: true}).Table(m.table(s))
	t := tx.Statement
	t.ConnPool = c
	t.Clauses = clauses
	t.Model = st.Model
	t.Selects, t.Omits, t.Distinct, t.Unscoped = st.Selects, st.Omits, st.Distinct, st.Unscoped
	return tx, nil
}

// cloneClauses copies a statement's clauses, so each shard's part can
// change its own.
func cloneClauses(in map[string]clause.Clause) map[string]clause.Clause {
	out := make(map[string]clause.Clause, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// fan runs part for every shard of db's statement, Settings.Parallel at
// once, or one after the other in a transaction, whose one connection
// serves one statement at a time; the shards that failed make a
// *sharding.FanoutError. A transaction of the plugin holds one shard: a
// statement reaching several is refused before any runs.
func (p *Plugin) fan(db *gorm.DB, shards []sharding.Shard, part func(ctx context.Context, i int) error) error {
	ctx := ctxOf(db)
	parallel := p.g.base.Settings.Parallel
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		parallel = 1
	}
	if t := txOf(db.Statement.ConnPool); t != nil && !t.batches && len(shards) > 1 {
		return fmt.Errorf("%w: a statement in a transaction reaches %d shards (%s, %s, ...): a transaction stays in one shard (there is no distributed transaction)",
			sharding.ErrWrongShard, len(shards), shards[0], shards[1])
	}
	errs := repo.Run(ctx, parallel, len(shards), part)
	return repo.FanoutError(func(i int) sharding.Shard { return shards[i] }, errs)
}

// inShardKey holds, in a statement's Settings (which GORM copies into the
// statements saving its associations), the shard whose transaction the
// statement runs in.
const inShardKey = "idforge:shardgorm_in"

// written returns the Select and Omit of a Create for its parts, with the
// ID and the shard key always written: they place the row.
func (m *pmodel) written(st *gorm.Statement) (selects, omits []string) {
	keep := []string{m.key.Name}
	if m.id != nil {
		keep = append(keep, m.id.Name)
	}
	placing := func(name string) bool {
		return slices.ContainsFunc(keep, func(k string) bool {
			f := m.schema.LookUpField(name)
			return f != nil && f.Name == k
		})
	}
	omits = slices.DeleteFunc(slices.Clone(st.Omits), placing)
	if len(st.Selects) == 0 {
		return nil, omits
	}
	return append(slices.Clone(st.Selects), keep...), omits
}

// create writes a Create of a sharded model through the repository: IDs
// filled (owner-keyed ones composed), rows routed, each shard's part in a
// transaction of its own. The rest of GORM's create chain on db is
// skipped: each part's statement runs the model's hooks (unless db skips
// them) and saves its associations in its shard's transaction. A create
// in a shard's transaction (an association saved with its parent's row)
// writes there, behind a savepoint, and its rows must route to that
// shard; so does a create in a transaction, whose rows must all go to
// the one shard it holds, or will hold.
func (p *Plugin) create(db *gorm.DB) {
	m := p.modelOf(db.Statement)
	if m == nil || db.Error != nil {
		return
	}
	done(db)
	hooks := !db.Statement.SkipHooks
	db.Statement.SkipHooks = true // the parts run them
	ctx := ctxOf(db)
	g := p.g
	var extra []clause.Expression
	if c, ok := db.Statement.Clauses["ON CONFLICT"]; ok {
		extra = append(extra, c.Expression.(clause.OnConflict))
	}
	var only *sharding.Shard
	if v, ok := db.Statement.Settings.Load(inShardKey); ok {
		s := v.(sharding.Shard)
		only = &s
	}
	_, inTx := db.Statement.ConnPool.(gorm.TxCommitter)
	t := txOf(db.Statement.ConnPool)
	batches := t != nil && t.batches && only == nil
	if held := t.held(); only == nil && held != nil {
		only = held
	}
	selects, omits := m.written(db.Statement)
	n := 0
	insert := func(tx *gorm.DB, s sharding.Shard) func(rows any) error {
		return func(rows any) error {
			q := tx.Session(&gorm.Session{NewDB: true, Context: ctx}).Table(m.table(s)).Set(inShardKey, s).Clauses(extra...)
			q.Statement.Selects, q.Statement.Omits = selects, omits
			q.Statement.SkipHooks = !hooks
			res := q.Create(rows)
			if res.Error == nil {
				n += reflect.ValueOf(rows).Len()
			}
			return res.Error
		}
	}
	// A key already stored is the database's duplicate-key error, as on
	// one table: nothing is skipped.
	none := func([]int64) ([]int64, error) { return nil, nil }
	var plan repo.Plan
	err := g.base.Create(db.Statement.Dest, repo.Rows[gorm.DB]{
		Plan: func(elem reflect.Type) (repo.Plan, error) {
			pl, _, err := g.plan(ctx, elem)
			plan = pl
			return pl, err
		},
		Fill: func(value any) error { return idplugin.Fill(g.base.DBs[0].WithContext(ctx), value) },
		Begin: func(base *gorm.DB, s sharding.Shard) (repo.Conn, error) {
			if inTx || only != nil {
				c, err := p.conn(db, s)
				if err != nil {
					return repo.Conn{}, err
				}
				tx := db.Session(&gorm.Session{NewDB: true, Context: ctx})
				tx.Statement.ConnPool = c
				return repo.Savepoint(func(q string) error { return tx.Exec(q).Error }, repo.Conn{Stored: none, Insert: insert(tx, s)})
			}
			tx := base.Session(&gorm.Session{Context: ctx}).Begin()
			if tx.Error != nil {
				return repo.Conn{}, tx.Error
			}
			return repo.Conn{
				Stored:   none,
				Insert:   insert(tx, s),
				Commit:   func() error { return tx.Commit().Error },
				Rollback: func() error { return tx.Rollback().Error },
			}, nil
		},
		Only:   only,
		Single: inTx && !batches,
	})
	db.RowsAffected = int64(n)
	if batches {
		err = p.batchWritten(t, db.Statement.Dest, plan, err)
	}
	var se *sharding.ShardError
	if errors.As(err, &se) {
		what := fmt.Sprintf("the part was rolled back; %s written before it, stored (ShardError.Written)", rowsN(len(se.Written)))
		switch {
		case batches:
			what = "every batch was rolled back: none of the rows is stored"
		case inTx:
			what = fmt.Sprintf("the part was rolled back to its savepoint; %s written in the transaction, which commits or rolls them back", rowsN(len(se.Written)))
		case errors.Is(se.Err, sharding.ErrOutcomeUnknown):
			what = fmt.Sprintf("the part may be stored; %s written before it, stored (ShardError.Written)", rowsN(len(se.Written)))
		}
		err = createError{se: se, what: what}
	}
	if err != nil {
		_ = db.AddError(gormids.InvalidData(err))
	}
}

// batchWritten records a batch of CreateInBatches, value, written with
// err in the batches' transactions t: the shard of each row, for the
// error of a COMMIT. A failed batch's rows are turned into positions in
// the value given to CreateInBatches; none is written, since GORM rolls
// every batch back.
func (p *Plugin) batchWritten(t *ptx, value any, plan repo.Plan, err error) error {
	var se *sharding.ShardError
	if errors.As(err, &se) {
		rows := make([]int, len(se.Rows))
		off := t.offset()
		for i, r := range se.Rows {
			rows[i] = r + off
		}
		return &sharding.ShardError{Rows: rows, Err: se.Err}
	}
	if err != nil {
		return err
	}
	rows := reflect.Indirect(reflect.ValueOf(value))
	shards := make([]sharding.Shard, rows.Len())
	for i := range shards {
		row := reflect.Indirect(rows.Index(i))
		key, err := plan.Key(row)
		if err != nil {
			return err
		}
		if _, shards[i], err = p.g.base.Route(key); err != nil {
			return err
		}
	}
	t.written(shards)
	return nil
}

// createError is a *sharding.ShardError of the plugin's Create, with
// what became of the rows: the plugin skips no row stored before (a key
// stored is the database's duplicate-key error), so the repository's
// advice to Create again does not hold.
type createError struct {
	se   *sharding.ShardError
	what string
}

func (e createError) Error() string {
	return fmt.Sprintf("sharding: insert %s: %v (%s)", rowsN(len(e.se.Rows)), e.se.Err, e.what)
}

func (e createError) Unwrap() error { return e.se }

// rowsN is "1 row" or "n rows".
func rowsN(n int) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}

// write routes an update or delete on a sharded model: on one shard, the
// statement runs there; on several (an IN over keys of several shards, or
// an unrouted statement allowed by Settings), the plugin runs it on each,
// in a statement of its own.
func (p *Plugin) write(db *gorm.DB, update bool) {
	m := p.modelOf(db.Statement)
	if m == nil || db.Error != nil {
		return
	}
	verb := "Delete"
	if update {
		verb = "Update"
	}
	t, err := p.route(db.Statement, m, true)
	if err != nil {
		_ = db.AddError(err)
		return
	}
	if !t.routed && !p.set.AllowUnroutedWrites {
		_ = db.AddError(m.unrouted(verb))
		return
	}
	if update {
		if err := p.staysInShard(db, m, t.shards); err != nil {
			_ = db.AddError(err)
			return
		}
	}
	if len(t.shards) == 1 {
		if err := p.use(db, m, t.shards[0]); err != nil {
			_ = db.AddError(err)
			return
		}
		m.writeAs(db.Statement, t.shards[0], update)
		return
	}
	done(db)
	var total int64
	var mu sync.Mutex
	st := db.Statement
	same := func(a, b any) bool {
		x, y := reflect.ValueOf(a), reflect.ValueOf(b)
		return x.Kind() == reflect.Pointer && y.Kind() == reflect.Pointer && x.Pointer() == y.Pointer()
	}
	// GORM writes the values it sets into the model and the struct given,
	// so each part writes into copies, and the first part's reach them.
	models, dests := make([]any, len(t.shards)), make([]any, len(t.shards))
	err = p.fan(db, t.shards, func(ctx context.Context, i int) error {
		tx, err := p.on(db, m, t.shards[i], p.onlyShard(m, st.Clauses, t.shards[i]))
		if err != nil {
			return err
		}
		m.writeAs(tx.Statement, t.shards[i], update)
		models[i], dests[i] = structCopy(st.Model), structCopy(st.Dest)
		tx.Statement.Model, tx.Statement.Dest = models[i], dests[i]
		if rows := p.rowsIn(ctx, m, st.Dest, t.shards[i]); !same(rows, st.Dest) {
			tx.Statement.Dest = rows
			if same(st.Model, st.Dest) {
				tx.Statement.Model = rows // GORM reads keys from both
			}
		} else if same(st.Model, st.Dest) {
			tx.Statement.Dest = models[i]
		}
		proc := tx.Callback().Delete()
		if update {
			proc = tx.Callback().Update()
		}
		res := proc.Execute(tx)
		mu.Lock()
		total += res.RowsAffected
		mu.Unlock()
		return res.Error
	})
	db.RowsAffected = total
	if err != nil {
		_ = db.AddError(err)
		return
	}
	copyBack(st.Model, models[0])
	if !same(st.Model, st.Dest) {
		copyBack(st.Dest, dests[0])
	}
}

// structCopy returns a pointer to a copy of the struct v points to, and v
// itself when it is no pointer to a struct.
func structCopy(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return v
	}
	c := reflect.New(rv.Elem().Type())
	c.Elem().Set(rv.Elem())
	return c.Interface()
}

// copyBack sets the struct to points to from the copy from, made by
// structCopy.
func copyBack(to, from any) {
	rt, rf := reflect.ValueOf(to), reflect.ValueOf(from)
	if rt.Kind() == reflect.Pointer && rf.Kind() == reflect.Pointer && !rt.IsNil() && rt.Elem().Kind() == reflect.Struct && rt.Pointer() != rf.Pointer() {
		rt.Elem().Set(rf.Elem())
	}
}

// rowsIn returns dest, cut down to the rows of shard s when it holds
// rows of m (Delete(&rows)): GORM asks for their keys, each shard for its
// own.
func (p *Plugin) rowsIn(ctx context.Context, m *pmodel, dest any, s sharding.Shard) any {
	rv := reflect.Indirect(reflect.ValueOf(dest))
	if rv.Kind() != reflect.Slice {
		return dest
	}
	if et := rv.Type().Elem(); et != m.schema.ModelType && (et.Kind() != reflect.Pointer || et.Elem() != m.schema.ModelType) {
		return dest
	}
	f := m.key
	if m.idsRoute {
		f = m.id
	}
	out := reflect.MakeSlice(rv.Type(), 0, rv.Len())
	for i := range rv.Len() {
		k, err := repo.KeyValue(f.ReflectValueOf(ctx, reflect.Indirect(rv.Index(i))))
		if err != nil {
			return dest
		}
		if _, at, err := p.g.base.Route(k); err == nil && at == s {
			out = reflect.Append(out, rv.Index(i))
		}
	}
	ptr := reflect.New(rv.Type())
	ptr.Elem().Set(out)
	return ptr.Interface()
}

// use points db's statement at shard s: its database's pool and its
// physical table.
func (p *Plugin) use(db *gorm.DB, m *pmodel, s sharding.Shard) error {
	c, err := p.conn(db, s)
	if err != nil {
		return err
	}
	db.Statement.ConnPool = c
	db.Statement.Table = m.table(s)
	return nil
}

// staysInShard refuses an update setting a routing column to a value of
// another shard than the rows' own.
func (p *Plugin) staysInShard(db *gorm.DB, m *pmodel, shards []sharding.Shard) error {
	check := func(f string, v any) error {
		keys, ok := ints(v)
		if !ok || len(keys) != 1 {
			return fmt.Errorf("%w: Update on model %s sets %s, which routes rows, to %v (%T): only an integer can be checked to stay in its shard",
				sharding.ErrWrongShard, m.schema.Name, f, v, v)
		}
		_, s, err := p.g.base.Route(keys[0])
		if err != nil {
			return err
		}
		for _, t := range shards {
			if t != s {
				return fmt.Errorf("%w: Update on model %s sets %s to %d, which routes to %s: rows of %s would be left in the wrong shard",
					sharding.ErrWrongShard, m.schema.Name, f, keys[0], s, t)
			}
		}
		return nil
	}
	routing := func(name string) string {
		f := m.schema.LookUpField(unqualified(name))
		if f == nil {
			return ""
		}
		if f == m.key || m.idsRoute && f == m.id {
			return f.DBName
		}
		return ""
	}
	switch d := db.Statement.Dest.(type) {
	case map[string]any:
		for k, v := range d {
			if col := routing(k); col != "" {
				if err := check(col, v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if c, ok := db.Statement.Clauses["SET"]; ok {
		if set, ok := c.Expression.(clause.Set); ok {
			for _, a := range set {
				if col := routing(a.Column.Name); col != "" {
					if err := check(col, a.Value); err != nil {
						return err
					}
				}
			}
		}
	}
	rv := reflect.Indirect(reflect.ValueOf(db.Statement.Dest))
	if rv.Kind() != reflect.Struct || rv.Type() != m.schema.ModelType {
		return nil
	}
	// Updates(struct) writes its non-zero fields, Save all of them.
	for _, f := range []*schema.Field{m.key, m.id} {
		if f == nil || f == m.id && !m.idsRoute {
			continue
		}
		if v, zero := f.ValueOf(ctxOf(db), rv); !zero {
			if err := check(f.DBName, v); err != nil {
				return err
			}
		}
	}
	return nil
}
