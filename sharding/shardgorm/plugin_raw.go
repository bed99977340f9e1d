package shardgorm

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/sqlroute"
)

// sqlTables lists the models' tables as sqlroute reads them.
func sqlTables(byTable map[string]*pmodel) []sqlroute.Table {
	var out []sqlroute.Table
	for _, m := range byTable {
		t := sqlroute.Table{Name: m.schema.Table, ID: m.key.DBName}
		if m.id != nil && m.id != m.key {
			t.ID, t.Owner = m.id.DBName, m.key.DBName
		}
		out = append(out, t)
	}
	return out
}

// raw routes a statement written by hand (db.Exec, or db.Raw read by
// Scan, Row or Find) that names a sharded model's table: by the key its
// WHERE binds or its VALUES carry, with the logical table rewritten to the
// physical one. An Exec over several shards runs in each, cut down to its
// rows; a read must reach one. A statement naming no key is refused with
// [ErrUnrouted], one joining two sharded tables with sqlroute's error:
// none is sent to a logical table, which no database holds. It reports
// whether the statement was one of the plugin's.
func (p *Plugin) raw(db *gorm.DB, exec bool) bool {
	if db.Error != nil || db.Statement.SQL.Len() == 0 {
		return false
	}
	sql := db.Statement.SQL.String()
	st, err := sqlroute.Parse(sql, db.Statement.Vars, p.tables)
	if err != nil {
		_ = db.AddError(rawError{err})
		return true
	}
	if !st.Sharded() {
		return false
	}
	m := p.byTable[st.Table.Name]
	groups, err := p.rawGroups(m, st)
	if err == nil {
		err = p.rawOwnedIDs(m, st)
	}
	if err != nil {
		_ = db.AddError(err)
		return true
	}
	if len(groups) == 1 {
		for s := range groups {
			if err := p.rawAssigned(m, st, s); err != nil {
				_ = db.AddError(err)
				return true
			}
			q, err := st.Rewrite(m.table(s))
			if err != nil {
				_ = db.AddError(rawError{err})
				return true
			}
			c, err := p.conn(db, s)
			if err != nil {
				_ = db.AddError(err)
				return true
			}
			db.Statement.SQL.Reset()
			db.Statement.SQL.WriteString(q)
			db.Statement.ConnPool = c
		}
		return true
	}
	if !exec {
		_ = db.AddError(fmt.Errorf("%w: a raw read of %s reaches %d shards: a raw read goes to one; read with Find to merge shards",
			ErrUnrouted, m.schema.Table, len(groups)))
		return true
	}
	var shards []sharding.Shard
	for s := range groups {
		if err := p.rawAssigned(m, st, s); err != nil {
			_ = db.AddError(err)
			return true
		}
		shards = append(shards, s)
	}
	done(db)
	var total atomic.Int64
	err = p.fan(db, shards, func(ctx context.Context, i int) error {
		s := shards[i]
		q, args, err := st.Narrow(m.table(s), groups[s])
		if err != nil {
			return err
		}
		c, err := p.conn(db, s)
		if err != nil {
			return err
		}
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		total.Add(n)
		return nil
	})
	db.RowsAffected = total.Load()
	_ = db.AddError(err)
	return true
}

// rawError is a raw statement on a sharded table that the SQL reader
// cannot read or rewrite: it wraps ErrUnrouted and the reader's error.
type rawError struct{ err error }

func (e rawError) Error() string {
	return "shardgorm: raw statement on a sharded table cannot be routed: " + strings.TrimPrefix(e.err.Error(), "sqlroute: ")
}

func (e rawError) Unwrap() []error { return []error{ErrUnrouted, e.err} }

// rawGroups groups the routing values of st by shard: an INSERT's rows,
// or the values its WHERE binds the shard key (or an ID, where IDs route)
// to.
func (p *Plugin) rawGroups(m *pmodel, st *sqlroute.Statement) (map[sharding.Shard][]sqlroute.Value, error) {
	vals := st.Owners
	if st.Table.Owner == "" || vals == nil && m.idsRoute {
		vals = st.IDs
	}
	if vals == nil {
		return nil, m.unrouted(st.Kind.String())
	}
	out := map[sharding.Shard][]sqlroute.Value{}
	for _, v := range vals {
		keys, ok := ints(v.Value)
		if !ok || len(keys) != 1 {
			return nil, m.unrouted(st.Kind.String())
		}
		_, s, err := p.g.base.Route(keys[0])
		if err != nil {
			return nil, err
		}
		out[s] = append(out[s], v)
	}
	return out, nil
}

// rawOwnedIDs refuses an INSERT, where IDs route by their owner's residue,
// of a row whose ID routes elsewhere than its owner, or gives none (the
// database would choose it): the row could not be found by its ID.
func (p *Plugin) rawOwnedIDs(m *pmodel, st *sqlroute.Statement) error {
	if st.Kind != sqlroute.Insert || st.Table.Owner == "" || !m.idsRoute {
		return nil
	}
	if len(st.IDs) != len(st.Owners) {
		return fmt.Errorf("%w: INSERT into %s gives no %s in every row: the ID must be given, drawn for its owner (use db.Create to have it drawn)",
			sharding.ErrWrongShard, m.schema.Table, m.id.DBName)
	}
	for i, v := range st.IDs {
		ids, ok := ints(v.Value)
		owners, ok2 := ints(st.Owners[i].Value)
		if !ok || !ok2 || len(ids) != 1 || len(owners) != 1 {
			return m.unrouted(st.Kind.String())
		}
		_, at, err := p.g.base.Route(ids[0])
		if err != nil {
			return err
		}
		_, want, err := p.g.base.Route(owners[0])
		if err != nil {
			return err
		}
		if at != want {
			return fmt.Errorf("%w: INSERT into %s gives %s %d, which routes to %s, for %s %d of %s: the row could not be found by its ID; draw the ID for its owner",
				sharding.ErrWrongShard, m.schema.Table, m.id.DBName, ids[0], at, m.key.DBName, owners[0], want)
		}
	}
	return nil
}

// rawAssigned refuses an UPDATE (or upsert) setting a routing column to a
// value of another shard than s.
func (p *Plugin) rawAssigned(m *pmodel, st *sqlroute.Statement, s sharding.Shard) error {
	for _, a := range st.Assigned {
		if a.Column != m.key.DBName && !m.idsRoute {
			continue
		}
		keys, ok := ints(a.Value.Value)
		if !ok || len(keys) != 1 {
			return fmt.Errorf("%w: %s on %s sets %s, which routes rows, to what cannot be checked to stay in %s",
				sharding.ErrWrongShard, st.Kind, m.schema.Table, a.Column, s)
		}
		if _, at, err := p.g.base.Route(keys[0]); err != nil || at != s {
			return fmt.Errorf("%w: %s on %s sets %s to %d, which routes to %s: rows of %s would be left in the wrong shard",
				sharding.ErrWrongShard, st.Kind, m.schema.Table, a.Column, keys[0], at, s)
		}
	}
	return nil
}
