package idsqlx

import (
	"context"
	"database/sql/driver"
	"sync"

	"github.com/idforge/idforge/engine"
)

// Value is an ID for hand-written SQL: a driver.Valuer that draws from the
// registry's generator when the statement runs, once, however often the
// driver asks. Use one Value per row inserted.
//
//	id := idsqlx.Next(reg, "snowflake", "")
//	_, err := db.ExecContext(ctx, "INSERT INTO orders (id, customer) VALUES (?, ?)", id, "ada")
//	n, _ := id.ID() // the ID the row got
type Value struct {
	ctx        context.Context
	reg        *engine.Registry
	kind, name string

	once sync.Once
	id   int64
	err  error
}

// Next returns a Value drawing from kind and name ("" for the kind's shared
// default) of reg, with a background context.
func Next(reg *engine.Registry, kind, name string) *Value {
	return NextContext(context.Background(), reg, kind, name)
}

// NextContext is [Next] with the context the draw honours (a segment chain
// that has run dry waits for it).
func NextContext(ctx context.Context, reg *engine.Registry, kind, name string) *Value {
	return &Value{ctx: ctx, reg: reg, kind: kind, name: name}
}

func (v *Value) draw() {
	reg, err := registry(v.reg)
	if err != nil {
		v.err = err
		return
	}
	v.id, v.err = reg.NextID(v.ctx, v.kind, v.name)
}

// Value implements driver.Valuer: the ID as an int64, drawn on the first
// call. A generator error is returned as is (database/sql wraps it with %w,
// so errors.Is still finds engine's sentinels).
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
