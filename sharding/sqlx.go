package sharding

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/idsqlx"
)

// Sqlx is a sharded repository over sqlx: one *sqlx.DB per database of the
// router, indexed like [Shard.Database]. Statements are templates naming the
// table {table}. IDs are filled from reg's generators through idsqlx, by
// the same idgen tags the GORM plugin reads, and rows are routed by the "id"
// column unless [WithShardKey] names another. It is safe for concurrent use.
type Sqlx struct {
	router Router
	reg    *engine.Registry
	dbs    []*sqlx.DB
	cfg    config
}

// NewSqlx returns a repository routing with r over dbs, filling IDs from reg.
func NewSqlx(r Router, reg *engine.Registry, dbs []*sqlx.DB, opts ...Option) (*Sqlx, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.key == "" {
		cfg.key = "id"
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: sharding.NewSqlx needs a registry", engine.ErrInvalidConfig)
	}
	for i, db := range dbs {
		if db == nil {
			return nil, fmt.Errorf("%w: sharding.NewSqlx: database %d is nil", engine.ErrInvalidConfig, i)
		}
	}
	if len(dbs) == 0 {
		return nil, fmt.Errorf("%w: sharding.NewSqlx needs at least one *sqlx.DB", engine.ErrInvalidConfig)
	}
	if err := checkDatabases(r, len(dbs)); err != nil {
		return nil, err
	}
	return &Sqlx{router: r, reg: reg, dbs: dbs, cfg: cfg}, nil
}

// Router returns the repository's router.
func (x *Sqlx) Router() Router { return x.router }

// Insert fills the IDs of value (a pointer to a struct, or a slice of structs
// or of pointers), routes every row, and runs query for each shard's rows,
// with {table} replaced, as sqlx's bulk NamedExec: a multi-row INSERT of up
// to the batch size per statement (fewer if the placeholders would pass
// idsqlx.MaxPlaceholders), one transaction per shard. A failure is a
// *[ShardError] naming the shard; shards before it were written.
func (x *Sqlx) Insert(ctx context.Context, query string, value any) error {
	if !strings.Contains(query, TablePlaceholder) {
		return fmt.Errorf("%w: sharding: query %q has no %s", engine.ErrInvalidConfig, query, TablePlaceholder)
	}
	rows, elem, err := rowsOf(value)
	if err != nil || len(rows) == 0 {
		return err
	}
	fi := x.dbs[0].Mapper.TypeMap(elem).GetByPath(x.cfg.key)
	if fi == nil {
		return fmt.Errorf("%w: %s has no column %q to route by (db tag)", engine.ErrInvalidConfig, elem, x.cfg.key)
	}
	if err := keyKind(elem.String(), fi.Path, fi.Field.Type); err != nil {
		return err
	}
	if err := idsqlx.Fill(ctx, x.reg, value); err != nil {
		return err
	}
	groups, err := split(x.router, len(x.dbs), rows, func(row reflect.Value) (int64, error) {
		return keyValue(reflectx.FieldByIndexesReadOnly(row, fi.Index))
	})
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := x.insert(ctx, g, elem, g.shard.Query(query)); err != nil {
			return &ShardError{Shard: g.shard, Rows: len(g.rows), Err: err}
		}
	}
	return nil
}

// insert writes one shard's rows with idsqlx.InsertBatch, which chunks
// them by the batch size and the placeholder limit, in a transaction when
// there is more than one row.
func (x *Sqlx) insert(ctx context.Context, g *group, elem reflect.Type, query string) error {
	part := g.pointers(elem)
	db := x.dbs[g.shard.Database]
	if len(g.rows) == 1 {
		_, err := idsqlx.InsertBatch(ctx, db, x.reg, query, part, x.cfg.batchSize)
		return err
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := idsqlx.InsertBatch(ctx, tx, x.reg, query, part, x.cfg.batchSize); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Get runs query, with {table} replaced and '?' placeholders rebound for the
// driver, on id's shard with id as its one argument, scanning the row into
// dest: x.Get(ctx, &c, "SELECT * FROM {table} WHERE id = ?", id). A missing
// row is an error matching sql.ErrNoRows.
func (x *Sqlx) Get(ctx context.Context, dest any, query string, id int64) error {
	db, s, err := x.DB(id)
	if err != nil {
		return err
	}
	if err := db.GetContext(ctx, dest, db.Rebind(s.Query(query)), id); err != nil {
		return fmt.Errorf("sharding: get %d from %s: %w", id, s, err)
	}
	return nil
}

// DB returns the database of id's shard and the shard, whose
// [Shard.Query] fills in the table.
func (x *Sqlx) DB(id int64) (*sqlx.DB, Shard, error) {
	s, err := routeIn(x.router, id, len(x.dbs))
	if err != nil {
		return nil, Shard{}, err
	}
	return x.dbs[s.Database], s, nil
}

// ForEach calls fn for every shard, in order, with its database: the fan-out
// for counts, scans and maintenance. It stops at the first error, naming
// the shard, or when ctx ends.
func (x *Sqlx) ForEach(ctx context.Context, fn func(s Shard, db *sqlx.DB) error) error {
	return eachShard(ctx, x.router, len(x.dbs), func(s Shard) error { return fn(s, x.dbs[s.Database]) })
}

// ExecEach runs query, with {table} replaced, in every shard: the sqlx
// counterpart of Gorm.Migrate, e.g. "CREATE TABLE IF NOT EXISTS {table} (...)".
func (x *Sqlx) ExecEach(ctx context.Context, query string, args ...any) error {
	return x.ForEach(ctx, func(s Shard, db *sqlx.DB) error {
		_, err := db.ExecContext(ctx, db.Rebind(s.Query(query)), args...)
		return err
	})
}
