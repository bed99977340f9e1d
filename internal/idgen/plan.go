package idgen

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/idforge/idforge/engine"
)

// DefaultBatchSize is the rows per statement that batch inserts send when the
// caller gives no batch size: the sqlx helper's InsertBatch and the sharding
// repositories. Larger statements gain little, and some drivers bind a
// statement's parameters in time that grows faster than their number.
const DefaultBatchSize = 1000

// Plan lists the tagged fields of one struct type, with the index path that
// reaches each from the struct (through embedded structs, as
// [reflect.VisibleFields] sees them). [NewPlan] builds it; the caller caches
// it (the sqlx helper per type, the GORM plugin per schema), so that no
// package-level state is kept here.
type Plan struct {
	// Type is the struct type.
	Type reflect.Type
	// Fields are the tagged fields, in struct order.
	Fields []Target
}

// Target is a field to fill and the index path that reaches it from the row
// struct, as reflect.StructField.Index through embedded structs; the path may
// pass through embedded pointers, which are allocated when nil.
type Target struct {
	*Field
	Index []int
}

// NewPlan parses the idgen tags of struct type t. Every mistake is an error
// naming the model and the field (see the package documentation).
func NewPlan(t reflect.Type) (*Plan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s is not a struct", engine.ErrInvalidConfig, t)
	}
	model := ModelName(t)
	p := &Plan{Type: t}
	for _, sf := range reflect.VisibleFields(t) {
		f, err := FromStructField(model, fieldPath(t, sf.Index), sf)
		if err != nil {
			return nil, err
		}
		if key, ok := misspeltKey(sf.Tag); ok && f == nil {
			return nil, fieldError(model, fieldPath(t, sf.Index), fmt.Sprintf("tag key %q looks like a misspelt %q", key, TagKey))
		}
		if f != nil {
			p.Fields = append(p.Fields, Target{Field: f, Index: sf.Index})
		}
	}
	return p, nil
}

// ModelName is how errors name a struct type: its name, or its full
// description when it has none.
func ModelName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

func fieldPath(t reflect.Type, index []int) string {
	names := make([]string, len(index))
	for i := range index {
		names[i] = t.FieldByIndex(index[:i+1]).Name
	}
	return strings.Join(names, ".")
}

// Bind asks p for the generator of every field and returns the [Filler] of
// the plan's rows.
func (p *Plan) Bind(ctx context.Context, prov engine.Provider) (*Filler, error) {
	return Bind(ctx, prov, p.Type, p.Fields)
}

// Bind asks p for the generator of every target and returns the [Filler]
// that fills them in rows of struct type t.
func Bind(ctx context.Context, p engine.Provider, t reflect.Type, targets []Target) (*Filler, error) {
	f := &Filler{typ: t, slots: make([]slot, len(targets)), direct: true}
	for i, tg := range targets {
		src, err := tg.bind(ctx, p)
		if err != nil {
			return nil, err
		}
		f.slots[i] = newSlot(t, tg, src)
		f.direct = f.direct && f.slots[i].direct
	}
	return f, nil
}

// Filler fills the targets of one struct type with IDs from their bound
// generators, for the GORM plugin and the sqlx helper. A Filler is
// immutable and safe for concurrent use.
//
// Make one with [Bind] or [Plan.Bind]. One bound to no targets (a struct
// without tagged fields) walks the rows and fills nothing; the zero Filler
// knows no row type and refuses every value.
type Filler struct {
	typ    reflect.Type
	slots  []slot
	direct bool // every slot is direct
}

type slot struct {
	// The first fields are what the hot path reads, copied out of Target.
	gen    engine.Generator
	offset uintptr
	kind   reflect.Kind
	// direct: the field is a number, a string or a UUID (not a pointer)
	// reached without passing through a pointer, so it sits at offset from
	// the row's address and is filled without reflection.
	direct bool
	uuid   engine.UUIDGenerator
	str    func(context.Context) (string, error)
	Target
}

func newSlot(t reflect.Type, tg Target, src source) slot {
	s := slot{Target: tg, gen: src.gen, uuid: src.uuid, str: src.str, direct: !tg.ptr, kind: tg.kind}
	cur := t
	for _, x := range tg.Index {
		if cur.Kind() == reflect.Pointer {
			cur, s.direct = cur.Elem(), false
		}
		sf := cur.Field(x)
		s.offset += sf.Offset
		cur = sf.Type
	}
	return s
}

// Type is the struct type of the rows the filler fills.
func (f *Filler) Type() reflect.Type { return f.typ }

// Len is the number of fields filled in each row.
func (f *Filler) Len() int { return len(f.slots) }

// Fill fills the zero-valued targets of every row of v, walked as [Walk]
// walks rows of the filler's type: a struct, a pointer to one, or a slice or
// array of them or of pointers to them (or of interfaces holding those). A
// set value is kept.
//
// A nil row (a nil element of a []*T, a nil pointer) wraps [ErrInvalidData];
// a value of another type wraps [engine.ErrInvalidConfig], as does a zero
// field in a row that cannot be written to (a struct or array passed by
// value). Rows are filled in order; on error the rows before hold their IDs.
// The zero Filler returns an error wrapping [engine.ErrInvalidConfig].
func (f *Filler) Fill(ctx context.Context, v reflect.Value) error {
	if f.typ == nil {
		return errUnbound
	}
	// The hot path: rows side by side in memory, every target at an offset.
	rows := reflect.Indirect(v)
	side := rows.Kind() == reflect.Slice || rows.Kind() == reflect.Array && rows.CanAddr()
	if f.direct && side && rows.Type().Elem() == f.typ && rows.Len() > 0 {
		return f.fillDirect(ctx, rows.Index(0).Addr().UnsafePointer(), f.typ.Size(), rows.Len())
	}
	return Walk(v, f.typ, func(row reflect.Value) error { return f.fillValue(ctx, row) })
}

// errUnbound is the zero Filler's answer: it has no row type to check
// values against.
var errUnbound = fmt.Errorf("%w: idgen: the zero Filler fills nothing (make one with Bind)", engine.ErrInvalidConfig)

// Walk calls fn with every row of v, in order: v is a struct of type t, a
// pointer to one, or a slice or array of them or of pointers to them (or of
// interfaces holding those), or a pointer to such a slice or array. It is
// the one walk of rows that the fillers and the sharding repositories share.
// A row reached through a pointer or a slice is addressable, so what fn
// writes into it reaches the caller; one in a struct or array passed by
// value is not.
//
// A nil row (a nil pointer, a nil element) or an element holding another
// type wraps [ErrInvalidData]; a value of another shape or row type wraps
// [engine.ErrInvalidConfig]. An error from fn stops the walk and is returned
// as is.
func Walk(v reflect.Value, t reflect.Type, fn func(row reflect.Value) error) error {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == t {
			return fn(v)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return fmt.Errorf("%w: nil %s", ErrInvalidData, v.Type())
		}
		return Walk(v.Elem(), t, fn)
	case reflect.Slice, reflect.Array:
		return walkRows(v, t, fn)
	case reflect.Invalid:
		return fmt.Errorf("%w: nil value", ErrInvalidData)
	}
	return notRows(t, v.Type())
}

func notRows(row, t reflect.Type) error {
	return fmt.Errorf("%w: cannot fill IDs of %s into a %s (want a pointer to a %[2]s, or a slice or array of them)",
		engine.ErrInvalidConfig, ModelName(row), t)
}

// walkRows walks the elements of v, a slice or array.
func walkRows(v reflect.Value, t reflect.Type, fn func(row reflect.Value) error) error {
	et := v.Type().Elem()
	if et != t && !(et.Kind() == reflect.Pointer && et.Elem() == t) && et.Kind() != reflect.Interface {
		return notRows(t, v.Type())
	}
	for i := range v.Len() {
		row := v.Index(i)
		if row.Kind() == reflect.Interface {
			row = row.Elem()
		}
		if row.Kind() == reflect.Pointer && row.Type().Elem() == t {
			if row.IsNil() {
				return nilElement(i, v.Type())
			}
			row = row.Elem()
		}
		switch {
		case !row.IsValid():
			return nilElement(i, v.Type())
		case row.Type() != t:
			return fmt.Errorf("%w: element %d of %s is a %s, not a %s", ErrInvalidData, i, v.Type(), row.Type(), ModelName(t))
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}

func nilElement(i int, t reflect.Type) error {
	return fmt.Errorf("%w: element %d of %s is nil", ErrInvalidData, i, t)
}

// fillValue fills one row of the filler's type.
func (f *Filler) fillValue(ctx context.Context, row reflect.Value) error {
	if row.CanAddr() {
		return f.fillAt(ctx, row.Addr().UnsafePointer())
	}
	// Not addressable: only fine when nothing needs writing.
	for i := range f.slots {
		s := &f.slots[i]
		v, err := fieldByIndex(row, s.Index)
		if err != nil {
			return fmt.Errorf("model %s field %s: %w", s.Model, s.Name, err)
		}
		if err := s.fill(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// fillAt fills the row of the filler's type at p.
func (f *Filler) fillAt(ctx context.Context, p rowPointer) error {
	if f.direct {
		for i := range f.slots {
			if err := f.slots[i].fillDirect(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	var row reflect.Value // built only for fields reached through pointers
	for i := range f.slots {
		s := &f.slots[i]
		if s.direct {
			if err := s.fillDirect(ctx, p); err != nil {
				return err
			}
			continue
		}
		if !row.IsValid() {
			row = reflect.NewAt(f.typ, p).Elem()
		}
		v, err := fieldByIndex(row, s.Index)
		if err != nil {
			return fmt.Errorf("model %s field %s: %w", s.Model, s.Name, err)
		}
		if err := s.fill(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// pointers on the way, because a field behind one is zero and gets an ID.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, error) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, fmt.Errorf("%w: embedded %s is nil and cannot be allocated: pass a pointer so it can be", engine.ErrInvalidConfig, v.Type())
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, nil
}

// RowType is the struct type of the rows in v, as [Walk] walks them:
// v itself, or what v points to, or the elements of a slice or array (or
// what they point to). Interface elements are typed by the first one.
func RowType(v reflect.Value) (reflect.Type, error) {
	if !v.IsValid() {
		return nil, fmt.Errorf("%w: nil value", ErrInvalidData)
	}
	t := v.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if k := t.Kind(); k == reflect.Slice || k == reflect.Array {
		t = t.Elem()
		if t.Kind() == reflect.Interface {
			v = reflect.Indirect(v)
			if v.Len() == 0 || v.Index(0).IsNil() {
				return nil, fmt.Errorf("%w: cannot tell the row type of %s from its first element", ErrInvalidData, v.Type())
			}
			t = v.Index(0).Elem().Type()
		}
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: cannot fill IDs into a %s (want a pointer to a struct, or a slice or array of structs or of pointers to them)", engine.ErrInvalidConfig, v.Type())
	}
	return t, nil
}

// FillField fills v, a settable value of the type of target i (as given to
// [Bind]) when it is zero, from that target's generator: for rows that are
// not structs, such as the GORM plugin's maps. A target the filler does not
// have is an error wrapping [engine.ErrInvalidConfig].
func (f *Filler) FillField(ctx context.Context, i int, v reflect.Value) error {
	if f.typ == nil {
		return errUnbound
	}
	if i < 0 || i >= len(f.slots) {
		return fmt.Errorf("%w: model %s has no target %d (it has %d)", engine.ErrInvalidConfig, ModelName(f.typ), i, len(f.slots))
	}
	return f.slots[i].fill(ctx, v)
}
