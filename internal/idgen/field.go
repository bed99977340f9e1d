package idgen

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
)

// Field is one field that receives IDs: where they come from and how values
// of its type are tested and set. It does not know how to reach the field
// inside a row: the GORM plugin uses GORM's schema for that, plain structs a
// [Plan].
type Field struct {
	// Model and Name identify the field in errors: the struct type's name and
	// the field's name, dotted through embedded structs ("Base.ID").
	Model, Name string
	// Spec says which generator fills the field.
	Spec Spec
	// Type is the field's Go type.
	Type reflect.Type

	kind   reflect.Kind // reflect.Int64, reflect.Uint64 or reflect.String, of the pointed-to type
	ptr    bool
	format engine.Formatter
}

// FromStructField returns the Field for a struct field carrying an idgen tag,
// or nil and no error when the field has none. name is the field's name as
// errors should show it.
func FromStructField(model, name string, sf reflect.StructField) (*Field, error) {
	tag, ok := sf.Tag.Lookup(TagKey)
	if !ok {
		return nil, nil
	}
	spec, why := parseTag(tag)
	if why != "" {
		return nil, fieldError(model, name, tagProblem(tag, why))
	}
	if !sf.IsExported() {
		return nil, fieldError(model, name, "unexported, so the ID could not be written to it")
	}
	return NewField(model, name, sf.Type, spec)
}

// NewField checks that a field of type typ can hold IDs drawn by spec: int64,
// uint64, int and uint where they are 64 bits wide, string (which takes a
// format), named types of those kinds such as engine.ID, and pointers to any
// of them. Anything else wraps [engine.ErrInvalidConfig].
func NewField(model, name string, typ reflect.Type, spec Spec) (*Field, error) {
	f := &Field{Model: model, Name: name, Spec: spec, Type: typ}
	t := typ
	if t.Kind() == reflect.Pointer {
		f.ptr, t = true, t.Elem()
	}
	switch k := t.Kind(); {
	case k == reflect.Int64 || k == reflect.Int && strconv.IntSize == 64:
		f.kind = reflect.Int64
	case k == reflect.Uint64 || k == reflect.Uint && strconv.IntSize == 64:
		f.kind = reflect.Uint64
	case k == reflect.String:
		f.kind = reflect.String
	default:
		return nil, fieldError(model, name, fmt.Sprintf("type %s cannot hold a 64-bit ID (use int64, uint64, engine.ID or string, or a pointer to one)", typ))
	}
	if f.kind != reflect.String {
		if spec.Format != "" {
			return nil, fieldError(model, name, fmt.Sprintf("type %s: format=%s applies to string fields only", typ, spec.Format))
		}
		return f, nil
	}
	format := spec.Format
	if format == "" {
		format = "decimal"
	}
	if !slices.Contains(convert.Names(), format) {
		return nil, fieldError(model, name, fmt.Sprintf("tag `%s:%q`: unknown format %q (known: %s)",
			TagKey, spec, format, strings.Join(convert.Names(), ", ")))
	}
	// Radix strings are zero-padded to full width so that string keys sort
	// like the IDs and B-tree inserts stay append-only.
	var opts []convert.Option
	if format != "decimal" {
		opts = append(opts, convert.Padded())
	}
	var err error
	if f.format, err = convert.ByName(format, opts...); err != nil {
		return nil, fmt.Errorf("model %s field %s: %w", model, name, err)
	}
	return f, nil
}

func fieldError(model, name, why string) error {
	return fmt.Errorf("%w: model %s field %s: %s", engine.ErrInvalidConfig, model, name, why)
}

// Generator asks p for the field's generator. An unknown kind or name wraps
// [engine.ErrUnknownGenerator] and says which registry provides the segment
// kinds. Callers cache the result: the hot path should not take the
// provider's lock.
func (f *Field) Generator(ctx context.Context, p engine.Provider) (engine.Generator, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: model %s field %s: no registry to draw IDs from", engine.ErrInvalidConfig, f.Model, f.Name)
	}
	g, err := p.Generator(ctx, f.Spec.Kind, f.Spec.Name)
	if err != nil {
		return nil, fmt.Errorf("model %s field %s: tag `%s:%q`: %w%s", f.Model, f.Name, TagKey, f.Spec, err, StoreHint(f.Spec.Kind, err))
	}
	return g, nil
}

// StoreHint explains an error drawing from a segment kind the registry does
// not have (the empty string for any other error): only a registry built on a
// store has them, and the default registry has none.
func StoreHint(kind string, err error) string {
	if !errors.Is(err, engine.ErrUnknownGenerator) || (kind != "chain" && kind != "segment") {
		return ""
	}
	return fmt.Sprintf("; kind %q needs a registry built with a store (idforge.New(ctx, idforge.Settings{Store: st})), "+
		"passed to idplugin.WithRegistry or sqlhook.New: the default registry, used when none is given, has only \"snowflake\"", kind)
}

// IsZero reports whether v, a value of the field's type, still needs an ID:
// 0, "", a nil pointer or a pointer to 0 or "".
func (f *Field) IsZero(v reflect.Value) bool {
	if f.ptr {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	switch f.kind {
	case reflect.Int64:
		return v.Int() == 0
	case reflect.Uint64:
		return v.Uint() == 0
	default:
		return v.Len() == 0
	}
}

// Set stores id into v, a settable value of the field's type: as a number,
// or formatted for string fields. A nil pointer gets a new target.
func (f *Field) Set(v reflect.Value, id int64) error {
	if f.ptr && !v.IsNil() {
		v = v.Elem() // settable even when the pointer itself is not
	} else if !v.CanSet() {
		return fieldError(f.Model, f.Name, "cannot be set: pass a pointer (or a slice) so the ID can be written back")
	} else if f.ptr {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	switch f.kind {
	case reflect.Int64:
		v.SetInt(id)
	case reflect.Uint64:
		if id < 0 {
			return fmt.Errorf("%w: model %s field %s: negative id %d for an unsigned field", engine.ErrInvalidID, f.Model, f.Name, id)
		}
		v.SetUint(uint64(id))
	default:
		v.SetString(f.format.Format(id))
	}
	return nil
}

// Fill draws an ID from g into v when [Field.IsZero] says it needs one; a
// set value is kept.
func (f *Field) Fill(ctx context.Context, g engine.Generator, v reflect.Value) error {
	if !f.IsZero(v) {
		return nil
	}
	id, err := g.NextID(ctx)
	if err != nil {
		return fmt.Errorf("model %s field %s: %w", f.Model, f.Name, err)
	}
	return f.Set(v, id)
}
