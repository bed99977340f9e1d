// The sqlx helpers; the package documentation is in doc.go.

package sqlhook

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/jmoiron/sqlx"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// Helper fills idgen-tagged fields of rows inserted through sqlx. Make one
// with [New] per registry and share it: it is safe for concurrent use and
// caches each struct type's fields and generators.
type Helper struct {
	p     engine.Provider // nil: idforge.Default()
	plans sync.Map        // reflect.Type -> *typePlan
}

// typePlan is what a Helper knows of one struct type. A tag error is kept
// and returned every time; the filler is bound on first success, so a kind
// registered later, or a store back up, is picked up on the next call.
type typePlan struct {
	plan   *idgen.Plan
	err    error
	filler atomic.Pointer[idgen.Filler]
}

// New returns a helper drawing from p, a registry from idforge.New or any
// other engine.Provider; nil means idforge.Default().
func New(p engine.Provider) *Helper {
	if isNil(p) {
		p = nil
	}
	return &Helper{p: p}
}

func isNil(p engine.Provider) bool {
	if p == nil {
		return true
	}
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// provider returns the helper's provider, or the default registry.
func (h *Helper) provider() (engine.Provider, error) {
	if h.p != nil {
		return h.p, nil
	}
	def, err := idforge.Default()
	if err != nil {
		return nil, fmt.Errorf("sqlhook: the default registry: %w", err)
	}
	return def, nil
}

// filler returns the bound filler of struct type t.
func (h *Helper) filler(ctx context.Context, t reflect.Type) (*idgen.Filler, error) {
	tp, ok := h.plans.Load(t)
	if !ok {
		plan, err := idgen.NewPlan(t)
		tp, _ = h.plans.LoadOrStore(t, &typePlan{plan: plan, err: err})
	}
	e := tp.(*typePlan)
	if e.err != nil {
		return nil, e.err
	}
	if f := e.filler.Load(); f != nil {
		return f, nil
	}
	p, err := h.provider()
	if err != nil {
		return nil, err
	}
	f, err := e.plan.Bind(ctx, p)
	if err != nil {
		return nil, err
	}
	e.filler.CompareAndSwap(nil, f)
	return e.filler.Load(), nil
}

// Fill fills the zero-valued idgen-tagged fields of v: v is a pointer to a
// struct, a slice of structs or of pointers to structs, or a pointer to a
// slice or array. A tag mistake, a field that cannot hold an ID or a kind the
// registry does not know is an error naming the type and the field (wrapping
// engine.ErrInvalidConfig or engine.ErrUnknownGenerator), as is a value the
// IDs could not be written back into; a nil row wraps engine.ErrInvalidData.
func (h *Helper) Fill(ctx context.Context, v any) error {
	rv := reflect.ValueOf(v)
	t, err := idgen.RowType(rv)
	if err != nil {
		return err
	}
	f, err := h.filler(ctx, t)
	if err != nil || f.Len() == 0 {
		return err
	}
	return f.Fill(ctx, rv)
}

// isMap reports whether arg is a map sqlx binds by key. Maps carry no tags:
// they are passed through, and may hold [Next] markers.
func isMap(arg any) bool {
	t := reflect.TypeOf(arg)
	return t != nil && t.Kind() == reflect.Map
}

// Insert fills arg's IDs (see [Helper.Fill]) and runs query with sqlx's
// NamedExecContext, for example
//
//	INSERT INTO orders (id, customer) VALUES (:id, :customer)
//
// arg is a pointer to a struct, so the caller sees the IDs. A map is passed
// through unfilled: give it [Next] markers, which a database opened with
// the driver plugin ([Open], [Wrap]) turns into IDs.
func (h *Helper) Insert(ctx context.Context, db sqlx.ExtContext, query string, arg any) (sql.Result, error) {
	if !isMap(arg) {
		if err := h.Fill(ctx, arg); err != nil {
			return nil, err
		}
	}
	return sqlx.NamedExecContext(ctx, db, query, arg)
}

// InsertBatch fills the IDs of every row of rows (a slice of structs or of
// pointers, or a pointer to a slice or array) and inserts them with sqlx's
// bulk NamedExecContext: query is a one-row INSERT ... VALUES (:a, :b) that
// sqlx repeats for every row of a chunk. Chunks hold batchSize rows
// (1,000 if batchSize <= 0), fewer if that would pass
// 32,766 bind parameters, SQLite's default limit. It returns the number of rows affected. rows of
// another shape (one struct: use [Helper.Insert]) is an error wrapping
// engine.ErrInvalidConfig, before any ID is drawn.
//
// The chunks are separate statements: pass a *sqlx.Tx to make them atomic.
// Rows are filled before the first chunk is sent, so on error every row
// holds an ID whether or not it was inserted.
func (h *Helper) InsertBatch(ctx context.Context, db sqlx.ExtContext, query string, rows any, batchSize int) (int64, error) {
	rv := reflect.Indirect(reflect.ValueOf(rows))
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array && k != reflect.Invalid { // Fill reports a nil
		return 0, fmt.Errorf("%w: sqlhook: InsertBatch takes a slice of rows, not a %T (Insert inserts one)", engine.ErrInvalidConfig, rows)
	}
	if err := h.Fill(ctx, rows); err != nil {
		return 0, err
	}
	total, err := insertBatches(ctx, db, query, rv, batchSize)
	if err != nil {
		return total, fmt.Errorf("sqlhook: %w", err)
	}
	return total, nil
}
