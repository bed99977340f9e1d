// Package idsqlx gives rows inserted through github.com/jmoiron/sqlx their
// IDs before the insert, from the same `idgen` struct tags the GORM plugin
// reads:
//
//	type Order struct {
//		ID       int64  `db:"id" idgen:"snowflake"`
//		Code     string `db:"code" idgen:"chain,name=order,format=radix62"`
//		Customer string `db:"customer"`
//	}
//
//	o := Order{Customer: "ada"}
//	_, err := idsqlx.Insert(ctx, db, reg, `INSERT INTO orders (id, code, customer) VALUES (:id, :code, :customer)`, &o)
//	// o.ID and o.Code are set
//
// Every function takes the registry to draw from; nil means idforge.Default(),
// the process-wide registry with kind "snowflake" on machine.Default()'s
// machine ID (safe for a single instance unless IDFORGE_MACHINE_ID is set).
//
// [Fill] fills a struct or a slice without inserting; [Insert] and
// [InsertBatch] fill and then run sqlx's NamedExecContext, the batch as
// multi-row INSERTs; [Next] is a driver.Valuer for hand-written SQL that draws
// its ID when the statement runs. Only zero values (0, "", nil pointers) are
// filled: a set ID is kept.
//
// IDs are filled at the struct level, not in a database/sql driver wrapper,
// because a driver sees only argument values and could not write the IDs
// back into the caller's structs.
package idsqlx

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

type bindKey struct {
	reg *engine.Registry
	typ reflect.Type
}

// bindings caches each (registry, struct type)'s generators, so filling
// takes no registry lock. Only successes are cached: a kind registered later,
// or a store back up, is picked up on the next call.
var bindings sync.Map // bindKey -> []engine.Generator

// registry returns reg, or idforge.Default() for nil.
func registry(reg *engine.Registry) (*engine.Registry, error) {
	if reg != nil {
		return reg, nil
	}
	def, err := idforge.Default()
	if err != nil {
		return nil, fmt.Errorf("idsqlx: the default registry: %w", err)
	}
	return def.Registry, nil
}

func bound(ctx context.Context, reg *engine.Registry, t reflect.Type) (*idgen.Plan, []engine.Generator, error) {
	plan, err := idgen.PlanOf(t)
	if err != nil {
		return nil, nil, err
	}
	if reg, err = registry(reg); err != nil {
		return nil, nil, err
	}
	k := bindKey{reg, t}
	if gens, ok := bindings.Load(k); ok {
		return plan, gens.([]engine.Generator), nil
	}
	gens, err := plan.Bind(ctx, reg)
	if err != nil {
		return nil, nil, err
	}
	bindings.Store(k, gens)
	return plan, gens, nil
}

// Fill fills the zero-valued idgen-tagged fields of v with IDs from reg's
// generators: v is a pointer to a struct, a slice of structs or of pointers
// to structs, or a pointer to a slice or array. A tag mistake, a field that
// cannot hold an ID or a kind reg does not know is an error naming the type
// and the field (wrapping engine.ErrInvalidConfig or
// engine.ErrUnknownGenerator), as is a value the IDs could not be written
// back into.
func Fill(ctx context.Context, reg *engine.Registry, v any) error {
	rv, elem, err := target(v)
	if err != nil {
		return err
	}
	plan, gens, err := bound(ctx, reg, elem)
	if err != nil || len(plan.Fields) == 0 {
		return err
	}
	if rv.Kind() == reflect.Struct {
		return plan.FillRow(ctx, gens, rv)
	}
	return idgen.Rows(rv, func(row reflect.Value) error { return plan.FillRow(ctx, gens, row) })
}

// target resolves v to the value to fill (a struct, slice or array, its
// elements settable) and the struct type of its rows.
func target(v any) (reflect.Value, reflect.Type, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return rv, nil, fmt.Errorf("%w: idsqlx: nil value", engine.ErrInvalidConfig)
	}
	direct := rv.Kind() == reflect.Slice // slice elements are settable without a pointer
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return rv, nil, fmt.Errorf("%w: idsqlx: nil %T", engine.ErrInvalidConfig, v)
		}
		rv, direct = rv.Elem(), true
	}
	t := rv.Type()
	if k := rv.Kind(); k == reflect.Slice || k == reflect.Array {
		t = t.Elem()
		if t.Kind() == reflect.Pointer {
			t, direct = t.Elem(), true
		}
	}
	if t.Kind() != reflect.Struct {
		return rv, nil, fmt.Errorf("%w: idsqlx: cannot fill IDs into %T (want a pointer to a struct or a slice of structs)", engine.ErrInvalidConfig, v)
	}
	if !direct {
		return rv, nil, fmt.Errorf("%w: idsqlx: %T is passed by value: pass a pointer so the IDs can be written back", engine.ErrInvalidConfig, v)
	}
	return rv, t, nil
}

// isMap reports whether arg is a map sqlx binds by key. Maps carry no tags:
// they are passed through, and may hold [Next] values.
func isMap(arg any) bool {
	t := reflect.TypeOf(arg)
	return t != nil && t.Kind() == reflect.Map
}

// Insert fills arg's IDs (see [Fill]) and runs query with sqlx's
// NamedExecContext, for example
//
//	INSERT INTO orders (id, customer) VALUES (:id, :customer)
//
// arg is a pointer to a struct, so the caller sees the IDs. A map is passed
// through unfilled: put [Next] values in it.
func Insert(ctx context.Context, db sqlx.ExtContext, reg *engine.Registry, query string, arg any) (sql.Result, error) {
	if !isMap(arg) {
		if err := Fill(ctx, reg, arg); err != nil {
			return nil, err
		}
	}
	return sqlx.NamedExecContext(ctx, db, query, arg)
}

// MaxPlaceholders caps the bind parameters of one statement [InsertBatch]
// sends: SQLite's default limit (MySQL/MariaDB and PostgreSQL allow 65,535).
const MaxPlaceholders = 32766

// DefaultBatchSize is the rows per statement [InsertBatch] sends when given
// no batch size. Larger statements gain little, and the pure-Go SQLite driver
// binds a statement's parameters in time that grows faster than their number.
const DefaultBatchSize = 500

// InsertBatch fills the IDs of every row of rows (a slice of structs or of
// pointers, or a pointer to a slice or array) and inserts them with sqlx's
// bulk NamedExecContext: query is a one-row INSERT ... VALUES (:a, :b) that
// sqlx repeats for every row of a chunk. Chunks hold batchSize rows
// ([DefaultBatchSize] if batchSize <= 0), fewer if that would pass
// [MaxPlaceholders]. It returns the number of rows affected.
//
// The chunks are separate statements: pass a *sqlx.Tx to make them atomic.
// Rows are filled before the first chunk is sent, so on error every row
// holds an ID whether or not it was inserted.
func InsertBatch(ctx context.Context, db sqlx.ExtContext, reg *engine.Registry, query string, rows any, batchSize int) (int64, error) {
	if err := Fill(ctx, reg, rows); err != nil {
		return 0, err
	}
	rv := reflect.Indirect(reflect.ValueOf(rows))
	n := rv.Len()
	if n == 0 {
		return 0, nil
	}
	_, args, err := db.BindNamed(query, rv.Index(0).Interface())
	if err != nil {
		return 0, err
	}
	if batchSize <= 0 {
		batchSize = DefaultBatchSize
	}
	batchSize = max(min(batchSize, MaxPlaceholders/max(len(args), 1)), 1)
	if rv.Kind() == reflect.Array {
		if !rv.CanAddr() {
			return 0, fmt.Errorf("%w: idsqlx: pass a pointer to the array", engine.ErrInvalidConfig)
		}
		rv = rv.Slice(0, n)
	}
	var total int64
	for i := 0; i < n; i += batchSize {
		res, err := sqlx.NamedExecContext(ctx, db, query, rv.Slice(i, min(i+batchSize, n)).Interface())
		if err != nil {
			return total, fmt.Errorf("idsqlx: rows %d to %d: %w", i, min(i+batchSize, n)-1, err)
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += affected
	}
	return total, nil
}
