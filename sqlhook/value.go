package sqlhook

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"

	"github.com/idforge/idforge/internal/idgen"
)

// Value is an ID for hand-written SQL: a driver.Valuer that draws from the
// helper's generator when the statement runs, once, however often the
// driver asks. Use one Value per row inserted. Rebind the query for the
// driver's placeholders ($1 on PostgreSQL):
//
//	id := ids.Next(ctx, "snowflake", "")
//	_, err := db.ExecContext(ctx, db.Rebind("INSERT INTO orders (id, customer) VALUES (?, ?)"), id, "ada")
//	n, err := id.ID() // the ID the row got
//
// A Value prints as what it draws from (sqlhook.Next("chain", "order")),
// never its internals.
type Value struct {
	ctx        context.Context
	h          *Helper
	kind, name string

	once sync.Once
	id   int64
	err  error
}

// Next returns a Value drawing from kind and name ("" for the kind's shared
// default) of the helper's registry when the statement runs, with ctx (a
// segment chain that has run dry waits for it).
func (h *Helper) Next(ctx context.Context, kind, name string) *Value {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Value{ctx: ctx, h: h, kind: kind, name: name}
}

func (v *Value) draw() {
	p, err := v.h.provider()
	if err != nil {
		v.err = err
		return
	}
	g, err := p.Generator(v.ctx, v.kind, v.name)
	if err != nil {
		v.err = fmt.Errorf("%s: %w%s", v, err, idgen.StoreHint(v.kind, err))
		return
	}
	if v.id, err = g.NextID(v.ctx); err != nil {
		v.err = fmt.Errorf("%s: %w", v, err)
	}
}

// Value implements driver.Valuer: the ID as an int64, drawn on the first
// call. A generator error wraps engine's sentinels (database/sql wraps it
// with %w, so errors.Is still finds them).
func (v *Value) Value() (driver.Value, error) {
	v.once.Do(v.draw)
	if v.err != nil {
		return nil, v.err
	}
	return v.id, nil
}

// ID returns the ID the statement used, or the error that stopped the draw.
// Called before the statement, it draws the ID then, and the statement uses
// that one: handy to reference a row before inserting it.
func (v *Value) ID() (int64, error) {
	v.once.Do(v.draw)
	return v.id, v.err
}

// String names what the Value draws from, so that drivers and loggers that
// print their arguments show that and not the Value's internals.
func (v *Value) String() string {
	return fmt.Sprintf("sqlhook.Next(%q, %q)", v.kind, v.name)
}

// GoString is [Value.String], for %#v.
func (v *Value) GoString() string { return v.String() }
