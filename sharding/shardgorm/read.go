package shardgorm

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// model describes elem's rows for the shared reads and writes.
func (g *Repository) model(ctx context.Context, elem reflect.Type) (*repo.Model, error) {
	s, err := g.schema(reflect.New(elem).Interface())
	if err != nil {
		return nil, err
	}
	key, err := g.keyField(s)
	if err != nil {
		return nil, err
	}
	col := func(f *schema.Field) *repo.Col {
		return &repo.Col{Name: f.DBName, Type: f.FieldType, Get: func(row reflect.Value) reflect.Value { return f.ReflectValueOf(ctx, row) }}
	}
	m := &repo.Model{Name: s.Name, Elem: elem, Key: col(key), Column: func(name string) *repo.Col {
		if f := s.LookUpField(name); f != nil && f.DBName != "" {
			return col(f)
		}
		return nil
	}}
	if id := s.PrioritizedPrimaryField; id != nil && repo.KeyKind(s.Name, id.Name, id.FieldType) == nil {
		m.ID = col(id)
	}
	return m, nil
}

// stmts runs the shared reads and writes through GORM, in the caller's
// transaction for a Repository of In. Reads go through GORM's Find and
// Count, writes through Updates and Delete, so soft deletes, UpdatedAt and
// the model's hooks apply as in any GORM call.
func (g *Repository) stmts(elem reflect.Type) repo.Stmts[gorm.DB] {
	on := func(ctx context.Context, db *gorm.DB, s sharding.Shard, w repo.Cond) *gorm.DB {
		if g.tx != nil {
			db = g.tx
		}
		q := db.Session(&gorm.Session{NewDB: true, Context: ctx}).Table(s.TableName)
		if w.SQL != "" {
			q = q.Where(w.SQL, w.Args...)
		}
		return q
	}
	return repo.Stmts[gorm.DB]{
		SelectShards: func(ctx context.Context, db *gorm.DB, parts []repo.Part, order string, limit int, dest any) error {
			sql, args, err := g.union(db, elem, parts, order, limit)
			if err != nil {
				return err
			}
			return db.Session(&gorm.Session{NewDB: true, Context: ctx}).Raw(sql, args...).Find(dest).Error
		},
		Select: func(ctx context.Context, db *gorm.DB, s sharding.Shard, w repo.Cond, order string, limit int, dest any) error {
			q := on(ctx, db, s, w)
			if order != "" {
				q = q.Order(order)
			}
			if limit > 0 {
				q = q.Limit(limit)
			}
			return q.Find(dest).Error
		},
		Count: func(ctx context.Context, db *gorm.DB, s sharding.Shard, w repo.Cond) (int64, error) {
			var n int64
			return n, on(ctx, db, s, w).Model(reflect.New(elem).Interface()).Count(&n).Error
		},
		Update: func(ctx context.Context, db *gorm.DB, s sharding.Shard, w repo.Cond, set []repo.Set) (int64, error) {
			values := make(map[string]any, len(set))
			for _, c := range set {
				values[c.Column] = c.Value
			}
			res := on(ctx, db, s, w).Model(reflect.New(elem).Interface()).Updates(values)
			return res.RowsAffected, res.Error
		},
		Delete: func(ctx context.Context, db *gorm.DB, s sharding.Shard, w repo.Cond) (int64, error) {
			res := on(ctx, db, s, w).Delete(reflect.New(elem).Interface())
			return res.RowsAffected, res.Error
		},
	}
}

// union writes the statement reading the parts, shards of db, as GORM's
// Find reads one (the model's columns, without soft-deleted rows),
// ordered by order and cut at limit.
func (g *Repository) union(db *gorm.DB, elem reflect.Type, parts []repo.Part, order string, limit int) (string, []any, error) {
	s, err := g.schema(reflect.New(elem).Interface())
	if err != nil {
		return "", nil, err
	}
	dialect := db.Dialector.Name()
	var cols []string
	deleted := ""
	for _, f := range s.Fields {
		if f.DBName == "" || !f.Readable {
			continue
		}
		cols = append(cols, repo.Quote(dialect, f.DBName))
		if f.FieldType == reflect.TypeFor[gorm.DeletedAt]() {
			deleted = repo.Quote(dialect, f.DBName) + " IS NULL"
		}
	}
	var b strings.Builder
	var args []any
	for j, p := range parts {
		if j > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "SELECT * FROM (SELECT %s FROM %s", strings.Join(cols, ", "), repo.Quote(dialect, p.Shard.TableName))
		switch {
		case p.Where.SQL != "" && deleted != "":
			fmt.Fprintf(&b, " WHERE %s AND %s", p.Where.SQL, deleted)
		case p.Where.SQL != "":
			b.WriteString(" WHERE " + p.Where.SQL)
		case deleted != "":
			b.WriteString(" WHERE " + deleted)
		}
		if p.Order != "" {
			b.WriteString(" ORDER BY " + p.Order)
		}
		if p.Limit > 0 {
			fmt.Fprintf(&b, " LIMIT %d", p.Limit)
		}
		fmt.Fprintf(&b, ") AS p%d", j)
		args = append(args, p.Where.Args...)
	}
	if order != "" {
		b.WriteString(" ORDER BY " + order)
	}
	if limit > 0 {
		fmt.Fprintf(&b, " LIMIT %d", limit)
	}
	return b.String(), args, nil
}

// Get reads the rows whose IDs (integer primary keys) are ids into dest, a
// pointer to a slice of the model or of pointers to it: the IDs are grouped
// by shard and each shard is read with one query (more only past the
// database's limit on bind parameters), [sharding.Settings.Parallel]
// shards at once. dest holds the rows found in the order of ids, each
// once. IDs that are not stored are listed by a *[sharding.MissingError],
// which matches [sharding.ErrNotFound], with the rows found in dest all
// the same; a shard that fails makes a *[sharding.FanoutError] and no rows.
//
// IDs route when rows are routed by their ID (no
// [sharding.Settings.ShardKey]), or by an owner with owner-keyed IDs
// ([sharding.Settings.OwnerResidues]); otherwise Get is refused with an
// error wrapping engine.ErrInvalidConfig. An ID below 1 wraps
// engine.ErrInvalidID. In a Repository of In, Get reads in the
// transaction, and an ID of another shard wraps [sharding.ErrWrongShard].
func (g *Repository) Get(ctx context.Context, ids []int64, dest any) error {
	if err := g.ready(ctx, "Get"); err != nil {
		return err
	}
	_, elem, err := repo.SliceOf("Get", dest)
	if err != nil {
		return err
	}
	m, err := g.model(ctx, elem)
	if err != nil {
		return err
	}
	return g.base.Get(ctx, ids, dest, m, g.only, g.stmts(elem))
}

// Update writes set, columns by Go field name or column name and their
// values, into the rows of model (a pointer to the struct, &Order{}) that q
// selects: by q.Key (the shard key: one owner's rows, in its shard), by
// q.IDs (in their shards), by q.Where, or all three. Each shard reached
// runs one UPDATE, [sharding.Settings.Parallel] shards at once, through
// GORM's Updates (UpdatedAt is set, the model's hooks run); a query by
// Where alone reaches every shard. It returns the rows the databases
// report changed (MySQL and MariaDB count rows whose values changed, not
// rows matched).
//
// An Update can never move a row out of its shard: setting the shard key
// (or the ID, when IDs route) to a value that routes to another shard
// than a row written is refused before anything is written, with an error
// wrapping [sharding.ErrWrongShard]; with owner-keyed IDs a new owner must
// keep the residue the IDs carry, and only an Update by q.Key can tell. A
// query without Key, IDs or Where, or with Order, Limit or After, wraps
// engine.ErrInvalidConfig. Shards are not one transaction: a shard that
// fails makes a *[sharding.FanoutError], and the shards it lists as
// answered committed their change. In a Repository of In, Update runs in
// the transaction, in its one shard.
func (g *Repository) Update(ctx context.Context, q sharding.Query, model any, set map[string]any) (int64, error) {
	if err := g.ready(ctx, "Update"); err != nil {
		return 0, err
	}
	elem, err := repo.ModelOf("Update", model)
	if err != nil {
		return 0, err
	}
	m, err := g.model(ctx, elem)
	if err != nil {
		return 0, err
	}
	return g.base.Update(ctx, q, m, set, g.only, g.stmts(elem))
}

// Delete deletes the rows of model (a pointer to the struct) that q
// selects, as [Repository.Update] selects them, through GORM's Delete (a
// model with gorm.DeletedAt is soft-deleted), one statement per shard
// reached, [sharding.Settings.Parallel] shards at once, and returns how
// many rows the databases deleted. A query without Key, IDs or Where, or
// with Order, Limit or After, wraps engine.ErrInvalidConfig; a shard that
// fails makes a *[sharding.FanoutError]. In a Repository of In, Delete
// runs in the transaction, in its one shard.
func (g *Repository) Delete(ctx context.Context, q sharding.Query, model any) (int64, error) {
	if err := g.ready(ctx, "Delete"); err != nil {
		return 0, err
	}
	elem, err := repo.ModelOf("Delete", model)
	if err != nil {
		return 0, err
	}
	m, err := g.model(ctx, elem)
	if err != nil {
		return 0, err
	}
	return g.base.Delete(ctx, q, m, g.only, g.stmts(elem))
}

// Page reads into dest, a pointer to a slice of the model or of pointers to
// it, one page of the rows q selects, over every shard unless q.Key or
// q.IDs narrow it: ordered by q.Order and then the primary key, starting
// after q.After (the last row of the previous page), at most q.Limit rows.
// Each source (a shard; on MySQL, MariaDB and PostgreSQL, all the shards
// of one database in one UNION ALL statement, ordered and cut by the
// database) is first asked for its share of the page and a margin,
// [sharding.Settings.Parallel] at once, and the lists are merged in order
// (k-way); a source whose rows may still belong to the page is asked
// again, after its last row, for what is missing. Every row of the page
// is read, and a page costs about the same however deep it is (keyset
// paging: no OFFSET):
//
//	q := sharding.Query{Where: "status = ?", Args: []any{"paid"}, Order: "CreatedAt DESC", Limit: 50}
//	for {
//		var page []Order
//		if err := repo.Page(ctx, q, &page); err != nil || len(page) == 0 {
//			break
//		}
//		q.After = &page[len(page)-1]
//	}
//
// Order names an integer or time column; text is refused (the merge
// compares values in Go, which would disagree with the database's
// collation). A shard that fails makes a *[sharding.FanoutError] and no
// rows. In a Repository of In, Page reads in the transaction, its one
// shard.
func (g *Repository) Page(ctx context.Context, q sharding.Query, dest any) error {
	if err := g.ready(ctx, "Page"); err != nil {
		return err
	}
	_, elem, err := repo.SliceOf("Page", dest)
	if err != nil {
		return err
	}
	m, err := g.model(ctx, elem)
	if err != nil {
		return err
	}
	return g.base.Page(ctx, q, dest, m, g.only, g.stmts(elem))
}

// Count counts the rows of model (a pointer to the struct) that q selects
// (Key, IDs, Where; Order, Limit and After are refused), over every shard
// unless Key or IDs narrow it, [sharding.Settings.Parallel] shards at
// once. A shard that fails makes a *[sharding.FanoutError] and 0. In a
// Repository of In, Count reads in the transaction, its one shard.
func (g *Repository) Count(ctx context.Context, q sharding.Query, model any) (int64, error) {
	if err := g.ready(ctx, "Count"); err != nil {
		return 0, err
	}
	elem, err := repo.ModelOf("Count", model)
	if err != nil {
		return 0, err
	}
	m, err := g.model(ctx, elem)
	if err != nil {
		return 0, err
	}
	return g.base.Count(ctx, q, m, g.only, g.stmts(elem))
}
