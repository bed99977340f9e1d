package shardsqlx

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// modelOf describes rt's rows for the shared reads and writes.
func modelOf(elem reflect.Type, rt *rowType) *repo.Model {
	col := func(fi *reflectx.FieldInfo) *repo.Col {
		return &repo.Col{Name: fi.Path, Type: fi.Field.Type, Get: func(row reflect.Value) reflect.Value {
			return reflectx.FieldByIndexesReadOnly(row, fi.Index)
		}}
	}
	m := &repo.Model{Name: elem.String(), Elem: elem, Key: col(rt.key), Column: func(name string) *repo.Col {
		for _, fi := range rt.cols {
			if fi.Path == name {
				return col(fi)
			}
		}
		for _, fi := range rt.cols {
			if fi.Field.Name == name {
				return col(fi)
			}
		}
		return nil
	}}
	if rt.id != nil {
		m.ID = col(rt.id)
	}
	return m
}

// stmts runs the shared reads and writes with SQL written from rt's
// columns, in the caller's transaction for a Repository of In. Slices
// among a condition's values are expanded (sqlx.In: "status IN (?)").
func (x *Repository) stmts(rt *rowType) repo.Stmts[sqlx.DB] {
	build := func(db *sqlx.DB, s sharding.Shard, head string, w repo.Cond, tail string, set []any) (string, []any, error) {
		q := withTable(db, s, head)
		if w.SQL != "" {
			q += " WHERE " + w.SQL
		}
		args := append(append(make([]any, 0, len(set)+len(w.Args)), set...), w.Args...)
		q, args, err := sqlx.In(q+tail, args...)
		if err != nil {
			return "", nil, err
		}
		return db.Rebind(q), args, nil
	}
	var tx sqlx.ExtContext
	if x.tx != nil {
		tx = x.tx
	}
	on := func(db *sqlx.DB) sqlx.ExtContext {
		if tx != nil {
			return tx
		}
		return db
	}
	exec := func(ctx context.Context, db *sqlx.DB, q string, args []any) (int64, error) {
		res, err := on(db).ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	return repo.Stmts[sqlx.DB]{
		SelectShards: func(ctx context.Context, db *sqlx.DB, parts []repo.Part, order string, limit int, dest any) error {
			var b strings.Builder
			var args []any
			for j, p := range parts {
				if j > 0 {
					b.WriteString(" UNION ALL ")
				}
				fmt.Fprintf(&b, "SELECT * FROM (%s) AS p%d", selectSQL(withTable(db, p.Shard, rt.sel(dialectOf(db.DriverName()))), p.Where, p.Order, p.Limit), j)
				args = append(args, p.Where.Args...)
			}
			q, args, err := sqlx.In(selectSQL(b.String(), repo.Cond{}, order, limit), args...)
			if err != nil {
				return err
			}
			return sqlx.SelectContext(ctx, on(db), dest, db.Rebind(q), args...)
		},
		Select: func(ctx context.Context, db *sqlx.DB, s sharding.Shard, w repo.Cond, order string, limit int, dest any) error {
			var tail string
			if order != "" {
				tail += " ORDER BY " + order
			}
			if limit > 0 {
				tail += fmt.Sprintf(" LIMIT %d", limit)
			}
			q, args, err := build(db, s, rt.sel(dialectOf(db.DriverName())), w, tail, nil)
			if err != nil {
				return err
			}
			return sqlx.SelectContext(ctx, on(db), dest, q, args...)
		},
		Count: func(ctx context.Context, db *sqlx.DB, s sharding.Shard, w repo.Cond) (int64, error) {
			q, args, err := build(db, s, "SELECT COUNT(*) FROM "+repo.Table, w, "", nil)
			if err != nil {
				return 0, err
			}
			var n int64
			return n, sqlx.GetContext(ctx, on(db), &n, q, args...)
		},
		Update: func(ctx context.Context, db *sqlx.DB, s sharding.Shard, w repo.Cond, set []repo.Set) (int64, error) {
			cols := make([]string, len(set))
			vals := make([]any, len(set))
			for i, c := range set {
				cols[i] = repo.Quote(dialectOf(db.DriverName()), c.Column) + " = ?"
				vals[i] = c.Value
			}
			q, args, err := build(db, s, "UPDATE "+repo.Table+" SET "+strings.Join(cols, ", "), w, "", vals)
			if err != nil {
				return 0, err
			}
			return exec(ctx, db, q, args)
		},
		Delete: func(ctx context.Context, db *sqlx.DB, s sharding.Shard, w repo.Cond) (int64, error) {
			q, args, err := build(db, s, "DELETE FROM "+repo.Table, w, "", nil)
			if err != nil {
				return 0, err
			}
			return exec(ctx, db, q, args)
		},
	}
}

// rowsOf returns the rowType and model of the rows dest, a pointer to a
// slice, holds.
func (x *Repository) rowsOf(verb string, dest any) (*rowType, *repo.Model, error) {
	_, elem, err := repo.SliceOf(verb, dest)
	if err != nil {
		return nil, nil, err
	}
	rt, err := x.rowTypeOf(elem)
	if err != nil {
		return nil, nil, err
	}
	return rt, modelOf(elem, rt), nil
}

// Get reads the rows whose IDs ("id" column) are ids into dest, a pointer
// to a slice of the struct or of pointers to it: the IDs are grouped by
// shard and each shard is read with one query (more only past the
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
func (x *Repository) Get(ctx context.Context, ids []int64, dest any) error {
	if err := x.ready(ctx, "Get"); err != nil {
		return err
	}
	rt, m, err := x.rowsOf("Get", dest)
	if err != nil {
		return err
	}
	return x.base.Get(ctx, ids, dest, m, x.only, x.stmts(rt))
}

// modelRows returns the rowType and model of model, a pointer
// to a struct.
func (x *Repository) modelRows(verb string, model any) (*rowType, *repo.Model, error) {
	elem, err := repo.ModelOf(verb, model)
	if err != nil {
		return nil, nil, err
	}
	rt, err := x.rowTypeOf(elem)
	if err != nil {
		return nil, nil, err
	}
	return rt, modelOf(elem, rt), nil
}

// Update writes set, columns by `db` name or Go field name and their
// values, into the rows of model (a pointer to the struct, &order{}) that
// q selects: by q.Key (the shard key: one owner's rows, in its shard), by
// q.IDs (in their shards), by q.Where, or all three. Each shard reached
// runs one UPDATE, [sharding.Settings.Parallel] shards at once; a query by
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
func (x *Repository) Update(ctx context.Context, q sharding.Query, model any, set map[string]any) (int64, error) {
	if err := x.ready(ctx, "Update"); err != nil {
		return 0, err
	}
	rt, m, err := x.modelRows("Update", model)
	if err != nil {
		return 0, err
	}
	return x.base.Update(ctx, q, m, set, x.only, x.stmts(rt))
}

// Delete deletes the rows of model (a pointer to the struct) that q
// selects, as [Repository.Update] selects them, one DELETE per shard
// reached, [sharding.Settings.Parallel] shards at once, and returns how
// many rows the databases deleted. A query without Key, IDs or Where, or
// with Order, Limit or After, wraps engine.ErrInvalidConfig; a shard that
// fails makes a *[sharding.FanoutError]. In a Repository of In, Delete
// runs in the transaction, in its one shard.
func (x *Repository) Delete(ctx context.Context, q sharding.Query, model any) (int64, error) {
	if err := x.ready(ctx, "Delete"); err != nil {
		return 0, err
	}
	rt, m, err := x.modelRows("Delete", model)
	if err != nil {
		return 0, err
	}
	return x.base.Delete(ctx, q, m, x.only, x.stmts(rt))
}

// Page reads into dest, a pointer to a slice of the struct or of pointers
// to it, one page of the rows q selects, over every shard unless q.Key or
// q.IDs narrow it: ordered by q.Order and then "id", starting after
// q.After (the last row of the previous page), at most q.Limit rows.
// Each source (a shard; on MySQL, MariaDB and PostgreSQL, all the shards
// of one database in one UNION ALL statement, ordered and cut by the
// database) is first asked for its share of the page and a margin,
// [sharding.Settings.Parallel] at once, and the lists are merged in order
// (k-way); a source whose rows may still belong to the page is asked
// again, after its last row, for what is missing. Every row of the page
// is read, and a page costs about the same however deep it is (keyset
// paging: no OFFSET):
//
//	q := sharding.Query{Where: "status = ?", Args: []any{"paid"}, Order: "created_at DESC", Limit: 50}
//	for {
//		var page []order
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
func (x *Repository) Page(ctx context.Context, q sharding.Query, dest any) error {
	if err := x.ready(ctx, "Page"); err != nil {
		return err
	}
	rt, m, err := x.rowsOf("Page", dest)
	if err != nil {
		return err
	}
	return x.base.Page(ctx, q, dest, m, x.only, x.stmts(rt))
}

// Count counts the rows of model (a pointer to the struct) that q selects
// (Key, IDs, Where; Order, Limit and After are refused), over every shard
// unless Key or IDs narrow it, [sharding.Settings.Parallel] shards at
// once. A shard that fails makes a *[sharding.FanoutError] and 0. In a
// Repository of In, Count reads in the transaction, its one shard.
func (x *Repository) Count(ctx context.Context, q sharding.Query, model any) (int64, error) {
	if err := x.ready(ctx, "Count"); err != nil {
		return 0, err
	}
	rt, m, err := x.modelRows("Count", model)
	if err != nil {
		return 0, err
	}
	return x.base.Count(ctx, q, m, x.only, x.stmts(rt))
}

// selectSQL completes a SELECT of one table with its condition, order and
// limit (0: none).
func selectSQL(sel string, w repo.Cond, order string, limit int) string {
	if w.SQL != "" {
		sel += " WHERE " + w.SQL
	}
	if order != "" {
		sel += " ORDER BY " + order
	}
	if limit > 0 {
		sel += fmt.Sprintf(" LIMIT %d", limit)
	}
	return sel
}
