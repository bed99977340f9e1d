package idgen

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/idforge/idforge/engine"
)

// Plan lists the tagged fields of one struct type, with the index path that
// reaches each from the struct (through embedded structs, as
// [reflect.VisibleFields] sees them). Plans are built once per type by
// [PlanOf]; the GORM plugin reaches fields through GORM's schema instead and
// uses PlanOf only to validate.
type Plan struct {
	// Type is the struct type.
	Type reflect.Type
	// Fields are the tagged fields, in struct order.
	Fields []PlanField
}

// PlanField is a tagged field and its index path.
type PlanField struct {
	*Field
	Index []int
}

type planResult struct {
	plan *Plan
	err  error
}

var plans sync.Map // reflect.Type -> planResult

// PlanOf returns the plan of struct type t, parsing its tags the first time
// and caching the plan, or the error, for later calls.
func PlanOf(t reflect.Type) (*Plan, error) {
	if r, ok := plans.Load(t); ok {
		res := r.(planResult)
		return res.plan, res.err
	}
	p, err := buildPlan(t)
	plans.Store(t, planResult{p, err})
	return p, err
}

func buildPlan(t reflect.Type) (*Plan, error) {
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
			p.Fields = append(p.Fields, PlanField{Field: f, Index: sf.Index})
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

// Bind looks up the generator of every field in reg, in field order.
func (p *Plan) Bind(ctx context.Context, reg *engine.Registry) ([]engine.Generator, error) {
	gens := make([]engine.Generator, len(p.Fields))
	for i, f := range p.Fields {
		g, err := f.Generator(ctx, reg)
		if err != nil {
			return nil, err
		}
		gens[i] = g
	}
	return gens, nil
}

// FillRow fills the zero-valued tagged fields of row, a struct of the plan's
// type, drawing from gens (as returned by [Plan.Bind]).
func (p *Plan) FillRow(ctx context.Context, gens []engine.Generator, row reflect.Value) error {
	for i, f := range p.Fields {
		v, err := fieldByIndex(row, f.Index)
		if err != nil {
			return fmt.Errorf("model %s field %s: %w", f.Model, f.Name, err)
		}
		if err := f.Fill(ctx, gens[i], v); err != nil {
			return err
		}
	}
	return nil
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// pointers on the way, because a field behind one is zero and gets an ID.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, error) {
	if len(index) == 1 {
		return v.Field(index[0]), nil
	}
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, fmt.Errorf("%w: embedded %s is nil and cannot be allocated", engine.ErrInvalidConfig, v.Type())
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, nil
}

// Rows calls fn for every struct in v: v itself when it is a struct, or each
// element of a slice or array, pointer elements dereferenced. A nil element
// is an error, as is any other kind of value.
func Rows(v reflect.Value, fn func(row reflect.Value) error) error {
	switch v.Kind() {
	case reflect.Struct:
		return fn(v)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			row := v.Index(i)
			if row.Kind() == reflect.Pointer {
				if row.IsNil() {
					return fmt.Errorf("%w: element %d of %s is nil", engine.ErrInvalidConfig, i, v.Type())
				}
				row = row.Elem()
			}
			if row.Kind() != reflect.Struct {
				return fmt.Errorf("%w: element %d of %s is not a struct", engine.ErrInvalidConfig, i, v.Type())
			}
			if err := fn(row); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%w: cannot fill IDs into a %s (want a struct or a slice or array of structs)", engine.ErrInvalidConfig, v.Type())
	}
}
