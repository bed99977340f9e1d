package idgen

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
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

	kind   reflect.Kind // reflect.Int64, Uint64, String or Array (a UUID), of the pointed-to type
	ptr    bool
	format *convert.Formatter // string fields of int64 IDs
	uuid   bool               // kind "uuidv7": a 16-byte array or the canonical string
	dated  *dated.Format      // a chain's dated format (string fields)
}

// KindUUIDv7 is the registry kind whose fields hold UUIDs, not int64 IDs.
const KindUUIDv7 = "uuidv7"

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
// of them; for kind "uuidv7" a 16-byte array (uuid.UUID) or a string (the
// canonical form); for a chain with a dated format a string. Anything else
// wraps [engine.ErrInvalidConfig].
func NewField(model, name string, typ reflect.Type, spec Spec) (*Field, error) {
	f := &Field{Model: model, Name: name, Spec: spec, Type: typ, uuid: spec.Kind == KindUUIDv7}
	t := typ
	if t.Kind() == reflect.Pointer {
		f.ptr, t = true, t.Elem()
	}
	switch k := t.Kind(); {
	case f.uuid && k == reflect.Array && t.Len() == 16 && t.Elem().Kind() == reflect.Uint8:
		f.kind = reflect.Array
	case f.uuid && k != reflect.String:
		return nil, fieldError(model, name, fmt.Sprintf("type %s cannot hold a UUID (use uuid.UUID of github.com/google/uuid, or string, or a pointer to one)", typ))
	case k == reflect.Int64 || k == reflect.Int && strconv.IntSize == 64:
		f.kind = reflect.Int64
	case k == reflect.Uint64 || k == reflect.Uint && strconv.IntSize == 64:
		f.kind = reflect.Uint64
	case k == reflect.String:
		f.kind = reflect.String
	default:
		return nil, fieldError(model, name, fmt.Sprintf("type %s cannot hold a 64-bit ID (use int64, uint64, engine.ID or string, or a pointer to one; uuid.UUID with kind %q)", typ, KindUUIDv7))
	}
	switch {
	case f.uuid && spec.Format != "":
		return nil, fieldError(model, name, fmt.Sprintf("kind %q takes no format: a string field holds the canonical 36-character form", KindUUIDv7))
	case f.uuid:
		return f, nil
	case f.kind != reflect.String && spec.Format != "":
		return nil, fieldError(model, name, fmt.Sprintf("type %s: format=%s applies to string fields only", typ, spec.Format))
	case f.kind != reflect.String:
		return f, nil
	case dated.IsFormat(spec.Format):
		return f.datedFormat()
	}
	format := spec.Format
	if format == "" {
		format = "decimal"
	}
	// Radix strings are zero-padded to full width so that string keys sort
	// like the IDs and B-tree inserts stay append-only.
	var set convert.Settings
	if format != "decimal" {
		set.Padded = true
	}
	var err error
	if f.format, err = convert.New(format, set); err != nil {
		return nil, fmt.Errorf("model %s field %s: tag `%s:%q`: %w", model, name, TagKey, spec, err)
	}
	return f, nil
}

// datedFormat checks the dated format of a string field.
func (f *Field) datedFormat() (*Field, error) {
	switch {
	case f.Spec.Kind != "chain":
		return nil, fieldError(f.Model, f.Name, fmt.Sprintf("tag `%s:%q`: a dated format is for kind \"chain\", not %q", TagKey, f.Spec, f.Spec.Kind))
	case f.Spec.Name == "":
		return nil, fieldError(f.Model, f.Name, fmt.Sprintf("tag `%s:%q`: a dated format needs the chain's name (name=invoice): each period counts in the sequence <name>:<period>", TagKey, f.Spec))
	}
	var err error
	if f.dated, err = dated.Parse(f.Spec.Format); err != nil {
		return nil, fmt.Errorf("model %s field %s: %w", f.Model, f.Name, err)
	}
	return f, nil
}

// DatedLen is the length of every string of the field's dated format, 0
// when it has none.
func (f *Field) DatedLen() int {
	if f.dated == nil {
		return 0
	}
	return f.dated.Len()
}

// Dated asks p for the dated chain name in format, as an idforge registry
// built with a store makes them (idforge.Registry.Dated). A provider that
// makes none wraps [engine.ErrUnknownGenerator].
func Dated(p engine.Provider, name, format string) (func(context.Context) (string, error), error) {
	d, ok := p.(interface {
		Dated(name, format string) (func(context.Context) (string, error), error)
	})
	if !ok {
		return nil, fmt.Errorf("%w: dated chain %q: the provider (%T) makes no dated chains; pass the *idforge.Registry of idforge.New with a store", engine.ErrUnknownGenerator, name, p)
	}
	return d.Dated(name, format)
}

func fieldError(model, name, why string) error {
	return fmt.Errorf("%w: model %s field %s: %s", engine.ErrInvalidConfig, model, name, why)
}

// source is where a bound field's values come from: one of int64 IDs (for
// numbers and formatted strings), UUIDs or dated strings.
type source struct {
	gen  engine.Generator
	uuid engine.UUIDGenerator
	str  func(context.Context) (string, error)
}

// bind asks p for the field's generator. An unknown kind or name wraps
// [engine.ErrUnknownGenerator] and says which registry provides the segment
// kinds. Callers keep the result: the hot path should not take the
// provider's lock.
func (f *Field) bind(ctx context.Context, p engine.Provider) (source, error) {
	if p == nil {
		return source{}, fmt.Errorf("%w: model %s field %s: no registry to draw IDs from", engine.ErrInvalidConfig, f.Model, f.Name)
	}
	var (
		src source
		err error
	)
	switch {
	case f.uuid:
		src.uuid, err = genreg.UUIDOf(ctx, p, f.Spec.Kind, f.Spec.Name)
	case f.dated != nil:
		src.str, err = Dated(p, f.Spec.Name, f.Spec.Format)
	default:
		if src.gen, err = p.Generator(ctx, f.Spec.Kind, f.Spec.Name); err == nil {
			if _, isUUID := src.gen.(engine.UUIDGenerator); isUUID {
				err = fmt.Errorf("%w: kind %q gives UUIDs, not int64 IDs", engine.ErrInvalidConfig, f.Spec.Kind)
			}
		}
	}
	if err != nil {
		return source{}, fmt.Errorf("model %s field %s: tag `%s:%q`: %w%s", f.Model, f.Name, TagKey, f.Spec, err, StoreHint(f.Spec.Kind, err))
	}
	return src, nil
}

// StoreHint explains an error drawing from a segment kind the registry does
// not have (the empty string for any other error): only a registry built on a
// store has them, and the default registry has none.
func StoreHint(kind string, err error) string {
	if !errors.Is(err, engine.ErrUnknownGenerator) || (kind != "chain" && kind != "segment") {
		return ""
	}
	return fmt.Sprintf("; kind %q needs a registry built with a store (idforge.New(ctx, idforge.Settings{Store: st})), "+
		"given to idplugin.Settings.Registry or sqlhook.New: the default registry, used when none is given, has only \"snowflake\"", kind)
}

// IsZero reports whether v, a value of the field's type, still needs an ID:
// 0, "", an all-zero UUID, a nil pointer or a pointer to one of those.
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
	case reflect.Array:
		return v.IsZero()
	default:
		return v.Len() == 0
	}
}

// settable returns the value to write v's ID into: v itself, or what the
// pointer v points to, allocated when nil.
func (f *Field) settable(v reflect.Value) (reflect.Value, error) {
	if f.ptr && !v.IsNil() {
		return v.Elem(), nil // settable even when the pointer itself is not
	}
	if !v.CanSet() {
		return v, fieldError(f.Model, f.Name, "cannot be set: pass a pointer (or a slice) so the ID can be written back")
	}
	if f.ptr {
		v.Set(reflect.New(v.Type().Elem()))
		v = v.Elem()
	}
	return v, nil
}

// Set stores id into v, a settable value of the field's type: as a number,
// or formatted for string fields. A nil pointer gets a new target.
func (f *Field) Set(v reflect.Value, id int64) error {
	v, err := f.settable(v)
	if err != nil {
		return err
	}
	switch f.kind {
	case reflect.Int64:
		v.SetInt(id)
	case reflect.Uint64:
		if id < 0 {
			return fmt.Errorf("%w: model %s field %s: negative id %d for an unsigned field", engine.ErrInvalidID, f.Model, f.Name, id)
		}
		v.SetUint(uint64(id))
	case reflect.String:
		v.SetString(f.format.Format(id))
	default:
		return fieldError(f.Model, f.Name, fmt.Sprintf("type %s holds a UUID, not an int64 ID", f.Type))
	}
	return nil
}
